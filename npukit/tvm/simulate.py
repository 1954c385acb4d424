"""Run the model with simulated bit-widths: compiled once, quantization parameters as inputs.

The tagged module is rebuilt into a *simulation* module:

* every MAC op's weight constant becomes a function parameter, so quantized weights
  (per-channel symmetric, computed in numpy by ``npukit.quant``) are passed in, not compiled in;
* after every op with a floating-point output a fake-quantize kernel runs, driven by a 6-float
  parameter vector of its own (scale, zero point, qmin, qmax, a, b):
  ``y = x + a * (dequant(quant(x)) - x) + b * (fp16(x) - x)`` so fp32 is a = b = 0, fp16 is b = 1
  (computed as fp16(x) itself, and a = 1 as the grid's value itself: an inf stays inf in fp16 and
  saturates on a grid, where inf - inf made it NaN)
  and an integer width is a = 1 with its calibrated affine range (the model's own grid where the
  model quantizes the tensor itself: ``npukit.quant.scheme.model_ranges``);
* before every op, each floating-point input it reads gets a fake-quantize kernel too (identity
  unless the input arrives from another processor converted to a narrower format: the boundary
  quantize the cost model charges and the generated code performs; never before a model's own
  quantize, which reads its float input as it is: ``npukit.quant.boundary``);
* the function returns the model outputs followed by every fake-quantized op output.

A bit-width edit therefore changes only the arrays passed in; the compiled VM is reused.  The
fake-quantize kernels take their parameters as a tensor, so one compiled kernel serves every op of
the same output shape (compile time does not grow with the op count).
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cost.tables import weight_tensors
from ..errors import UnsupportedOpError
from ..graph import OpGraph
from ..opset import KINDS
from . import load as _load_tvm
from . import remapper
from .intdiv import INT_DIVISIONS, int_division
from .intpool import INT_AVG_POOLS, int_avg_pool

# Relax ops the VM runs without a lowering of their own (memory, calls, shapes)
_LOWERED = frozenset({"relax.call_tir", "relax.call_dps_packed", "relax.call_tir_with_grad", "relax.call_tir_inplace",
                      "relax.null_value", "relax.call_pure_packed", "relax.call_inplace_packed", "relax.print",
                      "relax.assert_op", "relax.shape_of", "relax.tensor_to_shape", "relax.shape_to_tensor",
                      "relax.make_closure", "relax.invoke_closure", "relax.invoke_pure_closure"})  # fmt: skip

# roles of multi-output ops whose first output (a norm's result, a selection's values) is stored at
# the op's width: a fake-quantize follows the TupleGetItem that takes it out
_ROUNDED_TUPLES = frozenset({"norm", "sort"})


@dataclass(frozen=True)
class SimLayout:
    """What the simulation module expects and returns."""

    weight_tids: tuple[str, ...]  # const tensor ids passed as parameters, in order
    fq_ops: tuple[int, ...]  # op ids with a fake-quantize kernel, in output order
    fq_out: tuple[str, ...]  # the tensor id each fq kernel rounds
    n_outputs: int  # model outputs first in the result tuple
    edges: tuple[tuple[int, str], ...] = ()  # (consumer op id, tensor id): a fake-quantize on that input


class Simulator:
    """Compiles the simulation module once and runs it for given inputs and parameters."""

    def __init__(self, mod, g: OpGraph, cache_dir: str | os.PathLike | None = None):
        self.g = g
        self._build(mod)
        self._compile(cache_dir)

    # -- build ---------------------------------------------------------------------------------
    def _build(self, tagged) -> None:
        tvm = _load_tvm()
        from tvm import relax, te  # noqa: PLC0415

        from .spans import op_id_of_span  # noqa: PLC0415

        g = self.g
        f = tagged["main"]
        wt = weight_tensors(g)
        w_ids = set(wt)

        def fq(x, p):
            def body(*idx):
                v = x(*idx).astype("float32")  # fp16 / bf16 models round in fp32 and store back
                s, z, lo, hi, a, b = (p[k] for k in range(6))
                q = (te.max(te.min(te.round(v / s) + z, hi), lo) - z) * s
                h = v.astype("float16").astype("float32")
                # only the terms whose weight is not zero are computed (the same value as the whole
                # formula; most of a run's time saved): a = b = 0 (fp32, and every input that crosses
                # no boundary) passes the value through; b = 0 skips the fp16 cast
                # (a = 1: the grid's value itself; v + (q - v) made an inf NaN where the grid saturates it)
                qv = te.if_then_else(a == 1.0, q, v + a * (q - v))
                # fp16 (a = 0, b = 1) is the half itself: v + (h - v) made an inf NaN (inf - inf), where
                # IEEE fp16 keeps it, as the program's half does (and overflows past 65504 to inf)
                fp16 = te.if_then_else(b == 1.0, h, v + b * (h - v))
                y = te.if_then_else(b == 0.0, te.if_then_else(a == 0.0, v, qv),
                                    te.if_then_else(a == 0.0, fp16, qv + b * (h - v)))  # fmt: skip
                return y.astype(x.dtype)

            return te.compute(x.shape, body, name="fake_quant")

        # the PrimFuncs a frontend's own kernels call (call_tir) come along
        bb = relax.BlockBuilder(tvm.IRModule({gv: fn for gv, fn in tagged.functions.items() if gv.name_hint != "main"}))
        params = [relax.Var(p.name, p.ty) for p in f.params]
        wvars = {t: relax.Var(f"w_{t}", relax.TensorType(g.tensors[t].shape, g.tensors[t].dtype)) for t in wt}
        fq_ops, fq_out, outs, pvars = [], [], [], []
        mapping = {p.name: q for p, q in zip(f.params, params, strict=True)}
        # tensor ids of the variables a call can read: model inputs and single-output ops
        tid_of = {p.name: tid for p, tid in zip(f.params, g.inputs, strict=False)}
        for op in g.ops:
            if len(op.outputs) == 1:
                tid_of[op.var] = op.outputs[0]
        # a multi-output norm (batch_norm: the result, then the batch statistics) or selection (topk:
        # the values, then their indices) computes its first output at its width: it is rounded where
        # a TupleGetItem takes it out
        multi = {op.var: op for op in g.ops if len(op.outputs) > 1}
        first_of = {}  # the TupleGetItem var taking out a norm's result -> that op's id
        edges, evars = [], {}
        op_by_id = g.ops
        m = remapper(mapping)
        body = [b for blk in f.body.blocks for b in blk.bindings]
        # the function's parameters must be known before its scope opens: find the fq ops first
        for b in body:
            v = b.value
            if isinstance(v, relax.TupleGetItem) and isinstance(v.tuple_value, relax.Var):
                op = multi.get(v.tuple_value.name)
                if op is not None and v.index < len(op.outputs):
                    t = op.outputs[v.index]
                    tid_of[b.var.name] = t  # its readers may get it converted from another processor
                    if v.index == 0 and KINDS[op.kind].role in _ROUNDED_TUPLES and "float" in g.tensors[t].dtype \
                            and op.op_id not in fq_ops:  # fmt: skip
                        first_of[b.var.name] = op.op_id
                        fq_ops.append(op.op_id)
                        fq_out.append(t)
                        pvars.append(relax.Var(f"q{op.op_id}", relax.TensorType((6,), "float32")))
                continue
            if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op):
                i = op_id_of_span(v.span)
                if i is None:
                    continue
                op = op_by_id[i]
                outt = g.tensors[op.outputs[0]]
                if len(op.outputs) == 1 and "float" in outt.dtype and not KINDS[op.kind].relabel:  # relabels: nothing to round
                    fq_ops.append(i)
                    fq_out.append(op.outputs[0])
                    pvars.append(relax.Var(f"q{i}", relax.TensorType((6,), "float32")))
                for a in v.args:  # an input that may arrive converted from another processor
                    t = tid_of.get(a.name) if isinstance(a, relax.Var) else None
                    if t is not None and "float" in g.tensors[t].dtype and (i, t) not in evars:
                        edges.append((i, t))
                        evars[(i, t)] = relax.Var(f"e{i}_{len(edges)}", relax.TensorType((6,), "float32"))
        pvar_of = dict(zip(fq_ops, pvars, strict=True))
        with bb.function("main", params + [wvars[t] for t in wt] + pvars + [evars[e] for e in edges]):
            with bb.dataflow():
                for b in body:
                    v, name = b.value, b.var.name
                    if isinstance(b, relax.MatchCast) or isinstance(v, relax.Var):
                        mapping[name] = m(v)
                        continue
                    if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op):
                        i = op_id_of_span(v.span)
                        args = []
                        for j, a in enumerate(v.args):
                            if i is not None and isinstance(a, tvm.ir.GenericConst) and j >= 1:
                                t = _match_const(g, op_by_id[i], a, w_ids)
                                if t is not None:
                                    args.append(wvars[t])
                                    continue
                            x = m(a)
                            t = tid_of.get(a.name) if isinstance(a, relax.Var) else None
                            if i is not None and (i, t) in evars:
                                x = bb.emit_te(fq, x, evars[(i, t)])
                            args.append(x)
                        call = relax.Call(v.op, args, v.attrs, v.ty_args, v.span)  # (the span names the op)
                        nv = int_division(bb, relax, call) if v.op.name in INT_DIVISIONS else None
                        if v.op.name in INT_AVG_POOLS:  # as the kernel library's call rounds it
                            nv = int_avg_pool(bb, relax, call)
                        nv = bb.emit(call) if nv is None else nv
                        if i is not None and i in pvar_of and len(op_by_id[i].outputs) == 1:
                            nv = bb.emit_te(fq, nv, pvar_of[i])
                            outs.append(nv)
                        mapping[name] = nv
                    elif isinstance(v, relax.TupleGetItem):
                        nv = bb.emit(relax.TupleGetItem(m(v.tuple_value), v.index))
                        if name in first_of:
                            nv = bb.emit_te(fq, nv, pvar_of[first_of[name]])
                            outs.append(nv)
                        mapping[name] = nv
                    else:
                        mapping[name] = bb.emit(m(v))
                res = m(f.body.body)
                if isinstance(res, relax.Tuple):
                    model_outs = list(res.fields)
                elif isinstance(res.ty, relax.TupleType):  # a var bound to the output tuple
                    model_outs = [bb.emit(relax.TupleGetItem(res, k)) for k in range(len(res.ty.fields))]
                else:
                    model_outs = [res]
                gv = bb.emit_output(relax.Tuple(model_outs + outs))
            bb.emit_func_output(gv)
        self.mod = bb.get()
        self.layout = SimLayout(tuple(wt), tuple(fq_ops), tuple(fq_out), len(model_outs), tuple(edges))

    def _compile(self, cache_dir) -> None:
        tvm = _load_tvm()
        from tvm import relax  # noqa: PLC0415

        target = tvm.target.Target({"kind": "llvm"})
        h = hashlib.sha256((tvm.__version__ + "\n" + self.mod.script(show_meta=False)).encode())
        for t in sorted(self.g.consts):  # the metadata the script omits: every constant's bytes
            a = np.ascontiguousarray(self.g.consts[t])
            h.update(f"{t}:{a.dtype}:{a.shape}".encode())
            h.update(a.tobytes())
        key = h.hexdigest()[:24]
        self.key = key  # the simulation module's content (and TVM's version): what its results depend on
        path = None
        if cache_dir is not None:
            path = Path(cache_dir) / f"sim-{key}.so"
        ex = None
        if path is not None and path.exists():
            try:
                ex = tvm.runtime.load_module(str(path))
            except Exception:  # noqa: BLE001 - a stale or foreign cache entry: rebuild
                ex = None
        if ex is None:
            from ..progress import phase  # noqa: PLC0415
            from .importers import _quiet  # noqa: PLC0415

            with phase("npukit: compiling the simulation"), _quiet():
                try:
                    ex = tvm.compile(self.mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
                except Exception as e:  # noqa: BLE001 - said in the model's words, never TVM's
                    raise self._not_compiled(e) from None
            if path is not None:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = path.with_suffix(f".{os.getpid()}.tmp.so")
                    ex.export_library(str(tmp))
                    os.replace(tmp, path)
                except Exception:  # noqa: BLE001 - caching is best effort (read-only home, no compiler)
                    pass
        self.vm = relax.VirtualMachine(ex, tvm.cpu())
        self._fn = self.vm["main"]
        self._run_lock = threading.Lock()

    def _not_compiled(self, err: Exception) -> UnsupportedOpError:
        """TVM could not compile the model to run it: the ops its lowering passes leave as they are
        (no lowering for them, e.g. a transpose convolution in NHWC), named as the model names them."""
        from tvm import relax  # noqa: PLC0415

        from ..codegen.lower import model_node  # noqa: PLC0415
        from .spans import op_id_of_span  # noqa: PLC0415

        left: list[int] = []
        try:
            mod = relax.transform.LegalizeOps()(self.mod)

            def visit(e):
                if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op) and e.op.name.startswith("relax.") \
                        and e.op.name not in _LOWERED:  # fmt: skip
                    i = op_id_of_span(getattr(e, "span", None))
                    if i is not None and i not in left:
                        left.append(i)

            tvm = _load_tvm()
            relax.analysis.post_order_visit(mod["main"], visit)
        except Exception:  # noqa: BLE001 - then only TVM's first line can be said
            left = []
        path = self.g.path or "the model"
        if left:
            nodes = "; ".join(f"{model_node(self.g, self.g.ops[i])} ({self.g.ops[i].kind})" for i in sorted(left)[:8])
            return UnsupportedOpError(f"{path}: the model cannot be run to measure its error: TVM has no lowering "
                                      f"for {nodes} (the placement and the estimates do not need it)")  # fmt: skip
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return UnsupportedOpError(f"{path}: the model cannot be run to measure its error: TVM could not compile it "
                                  f"({first})")  # fmt: skip

    # -- run -----------------------------------------------------------------------------------
    def tensors(self, arrays: list[np.ndarray]) -> list:
        tvm = _load_tvm()
        # np.asarray keeps 0-d arrays 0-d (np.ascontiguousarray would make them 1-d)
        return [tvm.runtime.tensor(np.asarray(a, order="C")) for a in arrays]

    def run(self, inputs: list, weights: list, qparams: list, all_outputs: bool) -> list[np.ndarray]:
        """One sample. ``inputs``/``weights``/``qparams`` are lists of tvm tensors (see ``tensors``)."""
        with self._run_lock:  # one VM: a build in the widget's thread may run beside the kernel's
            res = self._fn(*inputs, *weights, *qparams)
            n = len(res) if all_outputs else self.layout.n_outputs
            return [res[k].numpy() for k in range(n)]


def _match_const(g: OpGraph, op, const, w_ids: set[str]) -> str | None:
    """The weight tensor id of ``op`` that ``const`` holds (by position among its const inputs)."""
    arr_shape = tuple(int(s) for s in const.ty.shape) if getattr(const.ty, "shape", None) is not None else None
    for t in op.inputs[1:]:
        if t in w_ids and g.tensors[t].shape == arr_shape:
            return t
    return None


def default_cache_dir() -> Path | None:
    """~/.cache/npukit (or $NPUKIT_CACHE); None disables the compiled-module cache."""
    env = os.environ.get("NPUKIT_CACHE")
    if env is not None:
        return Path(env) if env else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "npukit"
