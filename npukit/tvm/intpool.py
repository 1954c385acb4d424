"""An integer average pool, computed as the kernel library's call computes it (npukit's simulation).

TVM 0.27 legalizes the average pool of an integer tensor narrower than 64 bits (``R.nn.avg_pool2d``
of int8, declared int8) into a kernel that sums the window in the input's own type (an int8 sum
wraps past 127), divides by the count truncating toward zero and writes int64 (int32 for an
adaptive pool).  The generated program never runs that kernel (the host's C refuses it: see
``hostc_relax``); every processor runs the kernel library's ``npk_avg_pool2d`` /
``npk_adaptive_avg_pool2d`` (or CMSIS-NN's ``arm_avgpool_s8`` / ``_s16``), which rounds the average
to the nearest integer, ties away from zero (TFLite's reference rule; ``docs/kernel-library.md``).
The simulation computes that rule, bit for bit, in the op's own dtype:

    y = round_half_away(float32(avg_pool(float64(float32(x)))))

each tap widened as the kernel loads it (a float), the window summed and divided in double, the
quotient stored as a float and rounded, ties away from zero (``floor(|y| + 0.5)`` in double, exact
for every float), then clamped to the dtype's range.  An int64 pool is left as TVM computes it: its
type is what the op declares, so the host's C and the simulation both run TVM's kernel.
"""

from __future__ import annotations

# the Relax ops whose integer form TVM computes in another type than the op declares
INT_AVG_POOLS = frozenset({"relax.nn.avg_pool1d", "relax.nn.avg_pool2d", "relax.nn.avg_pool3d",
                           "relax.nn.adaptive_avg_pool1d", "relax.nn.adaptive_avg_pool2d",
                           "relax.nn.adaptive_avg_pool3d"})  # fmt: skip

ROUNDING = "to the nearest integer, ties away from zero"


def narrow_int(dtype: str) -> bool:
    """An integer dtype narrower than 64 bits (TVM's average pool of it returns another type)."""
    return dtype.startswith(("int", "uint")) and dtype not in ("int64", "uint64")


def int_avg_pool(bb, relax, call):
    """``call`` (an average pool) computed as the kernel library computes it when its input is an
    integer narrower than 64 bits (module docstring); None otherwise (emitted as it is)."""
    import numpy as np  # noqa: PLC0415

    call = bb.normalize(call)  # (typed: its dtype)
    x = call.args[0]
    dtype = str(getattr(call.ty, "dtype", ""))
    if not narrow_int(dtype) or str(getattr(x.ty, "dtype", "")) != dtype:
        return None
    op = relax.op
    wide = bb.emit(op.astype(bb.emit(op.astype(x, "float32")), "float64"))
    avg = bb.emit(relax.Call(call.op, [wide], call.attrs, call.ty_args, call.span))
    y = bb.emit(op.astype(bb.emit(op.astype(avg, "float32")), "float64"))
    half = relax.const(0.5, "float64")
    r = bb.emit(op.multiply(bb.emit(op.sign(y)), bb.emit(op.floor(bb.emit(op.add(bb.emit(op.abs(y)), half))))))
    info = np.iinfo(dtype)
    lo, hi = relax.const(float(info.min), "float64"), relax.const(float(info.max), "float64")
    r = bb.emit(op.minimum(bb.emit(op.maximum(r, lo)), hi))
    return bb.emit(op.astype(r, dtype))
