"""Integer division that never traps, for the code TVM compiles (npukit's simulation, the host C).

TVM lowers an integer divide / floor_divide / mod / floor_mod to the machine's division, which traps
(SIGFPE: the whole process dies, a notebook's kernel with it) on a zero divisor and on the minimum
divided by -1.  The kernel library's npk_binary_int, which the generated code calls for the model's
own integer arithmetic on an accelerator, defines both (``docs/kernel-library.md``): the simulation
and the host's C compute them the same way, so a zero in the data gives the same numbers everywhere
instead of killing the process.
"""

from __future__ import annotations

# the Relax ops whose integer form compiles to a trapping machine division
INT_DIVISIONS = frozenset({"relax.divide", "relax.floor_divide", "relax.mod", "relax.floor_mod"})


def int_division(bb, relax, call):
    """``call`` (an integer divide / floor_divide / mod / floor_mod) emitted so that no divisor
    traps: x / 0 gives 0, as the kernel library's npk_binary_int documents (``docs/kernel-library.md``;
    undefined in C and in the model), x % 0 gives 0, and for signed integers x / -1 is -x wrapped
    (the minimum / -1 is the minimum, as npk_binary_int computes it) and x % -1 is 0.  None for a
    float division (IEEE: no trap), which is emitted as it is."""
    call = bb.normalize(call)  # (typed: its dtype)
    dtype = str(getattr(call.ty, "dtype", ""))
    if not dtype.startswith(("int", "uint")):
        return None
    # (no constant arguments: the host C lowers a group with none left, every value a kernel's)
    x, y = call.args
    op = relax.op
    zero_y, one_y = bb.emit(op.zeros_like(y)), bb.emit(op.ones_like(y))
    is_zero = bb.emit(op.equal(y, zero_y))
    bad = is_zero
    minus_one = None
    if dtype.startswith("int"):  # y == -1 as y + 1 == 0
        minus_one = bb.emit(op.equal(bb.emit(op.add(y, one_y)), zero_y))
        bad = bb.emit(op.logical_or(is_zero, minus_one))
    safe = bb.emit(op.where(bad, one_y, y))
    q = bb.emit(relax.Call(call.op, [x, safe], call.attrs, call.ty_args, call.span))
    zero_q = bb.emit(op.zeros_like(q))
    if minus_one is not None:
        neg = zero_q if call.op.name.endswith("mod") else bb.emit(op.subtract(zero_q, x))
        q = bb.emit(op.where(minus_one, neg, q))
    return bb.emit(op.where(is_zero, zero_q, q))
