"""Per-kernel timing of a model on this machine's CPU with TVM-compiled code (the data ``npukit
calibrate`` fits a host profile to).

The tagged Relax module (one binding per op, each carrying its op id) is compiled with TVM's
default CPU pipeline (``LegalizeOps -> AnnotateTIROpPattern -> FoldConstant -> FuseOps ->
FuseTIR -> ...``).  A pass inserted right after FuseOps records which ops each kernel holds, in
``main``'s order:

* a call of a fused function: the ops named by the bindings inside it (FuseOps keeps the bindings'
  names, except the function's output binding, which it renames ``gv``);
* a ``call_tir`` left in ``main`` under an op's binding name: that op;
* ops no name points at (the fused functions' outputs; every op of a second call of a fused
  function FuseOps shares between equal groups; ops LegalizeOps lowered to several kernels under
  new names): matched, call by call in ``main``'s order, to the first unmatched op of the kind
  the kernel computes (``add3`` -> add, ``tir_sigmoid1`` -> sigmoid), in binding order; a kernel
  with no such op joins the op matched just before it (the helper kernels of one lowered op).

The VM then runs with ``vm.set_instrument``: the callback sees every call (kernels and
``vm.builtin.*`` helpers) before and after it; the k-th call of a kernel symbol is the k-th kernel
with that symbol in ``main``'s order.  A timed window also holds the VM's return from the "before"
callback and its call into the "after" one: that is measured on ``vm.builtin.null_value`` (which
does nothing) and taken off every kernel.  Views lowered to ``vm.builtin.reshape`` have no kernel.
The whole inference is timed without the instrument, in runs alternating with the instrumented
ones (so both see the same load on the machine), at least ``repeat`` times and on until
``min_seconds`` have passed.  Of repeated runs the fastest is reported (the run least disturbed
by other work on the machine: scheduling, other processes), for kernels and inferences alike.
A ``Session`` keeps a compiled model and its fastest times so far, so several models can be
measured in turns (``npukit.calibrate.measure_models``), each model's runs spread over the whole
measuring time.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

import numpy as np

from ..errors import NpukitError
from ..graph import OpGraph
from . import load as _load_tvm


@dataclass(frozen=True)
class Kernel:
    symbol: str  # the PrimFunc the VM calls
    ops: tuple[int, ...]  # op ids fused into it
    us: float  # time per call: the fastest of the runs, less the instrument's own time


@dataclass(frozen=True)
class Measurement:
    total_us: float  # the fastest whole inference, no instrument
    kernels: tuple[Kernel, ...]
    runs: int
    compile_s: float
    unattributed_ops: tuple[int, ...]  # ops no kernel holds (views lowered to VM builtins, ...)
    instrument_us: float = 0.0  # the instrument's own time in a timed window, taken off each kernel


def _strip_index(name: str) -> str:
    """PrimFunc names carry a dedup suffix: "add3" -> "add", "conv2d1" -> "conv2d"."""
    return re.sub(r"\d+$", "", name)


_ALIASES = {"concat": "concatenate", "permute_dims": "transpose"}


def _kind_matches(symbol: str, kind: str) -> bool:
    """Does a kernel symbol ("tir_sigmoid1", "concatenate", "add4") compute an op of ``kind``?"""
    s = _strip_index(symbol)
    s = s[4:] if s.startswith("tir_") else s
    return s == kind or s == _ALIASES.get(kind)


def measure(
    mod, g: OpGraph, repeat: int = 20, warmup: int = 2, seed: int = 0, min_seconds: float = 0.25
) -> Measurement:
    """Compile ``mod`` (the tagged module of ``g``) for this CPU, run it at least ``repeat`` times on
    random inputs (and on until ``min_seconds`` have passed, at most 100 x ``repeat`` runs: a short
    model's runs then span enough time to find undisturbed ones), and return the time of each
    kernel and of the whole inference (the fastest run)."""
    if repeat < 1:
        raise NpukitError(f"repeat must be >= 1, got {repeat}")
    session = Session(mod, g, warmup=warmup, seed=seed)
    session.run(repeat, min_seconds)
    return session.result()


def _compile(mod, g: OpGraph):
    """(executable, kernels in main's order as (symbol, op ids), compile seconds)."""
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415
    from tvm.relax.backend.cpu_generic import pipeline as cpu  # noqa: PLC0415

    from .importers import _quiet, op_id_of_span  # noqa: PLC0415

    name_to_op: dict[str, int] = {}
    for blk in mod["main"].body.blocks:
        for b in blk.bindings:
            i = op_id_of_span(getattr(b.value, "span", None))
            if i is not None:
                name_to_op[b.var.name] = i

    plan: list[tuple[str, tuple[int, ...]]] = []  # kernels in main's order

    def callee_symbol(call) -> str | None:
        if isinstance(call.op, tvm.ir.GlobalVar):
            return call.op.name_hint
        if getattr(call.op, "name", "") == "relax.call_tir" and isinstance(call.args[0], tvm.ir.GlobalVar):
            return call.args[0].name_hint
        return None

    @tvm.transform.module_pass(opt_level=0, name="NpukitRecordKernels")
    def record(m, _ctx):
        # per fused function: the op ids named in it, and the symbols of the kernels it calls (in order)
        fused: dict[str, tuple[list[int], list[tuple[str, int | None]]]] = {}
        for gv, f in m.functions.items():
            if not isinstance(f, relax.Function) or gv.name_hint == "main":
                continue
            named, inner = [], []
            for blk in f.body.blocks:
                for b in blk.bindings:
                    i = name_to_op.get(b.var.name)
                    if i is not None:
                        named.append(i)
                    if isinstance(b.value, relax.Call):
                        sym = callee_symbol(b.value)
                        if sym is not None:
                            inner.append((sym, i))
            fused[gv.name_hint] = (named, inner)
        used: set[int] = set()
        # per call in main: (symbol, known op ids, kernel symbols whose op is still to be found)
        calls: list[tuple[str, list[int], list[str]]] = []
        called: set[str] = set()
        for blk in m["main"].body.blocks:
            for b in blk.bindings:
                v = b.value
                if not isinstance(v, relax.Call):
                    continue
                sym = callee_symbol(v)
                if sym is None:
                    continue
                if isinstance(v.op, tvm.ir.GlobalVar) and sym in fused:
                    named, inner = fused[sym]
                    if sym not in called:  # the bindings inside are this call site's own ops
                        calls.append((sym, list(named), [k for k, i in inner if i is None]))
                        used.update(named)
                    else:  # FuseOps shares one function between equal groups: find every op by kind
                        calls.append((sym, [], [k for k, _ in inner]))
                    called.add(sym)
                elif b.var.name in name_to_op:
                    calls.append((sym, [name_to_op[b.var.name]], []))
                    used.add(name_to_op[b.var.name])
                else:  # a kernel LegalizeOps made under a new name (one op lowered to several kernels)
                    calls.append((sym, [], [sym]))
        # the ops no binding name points at, matched to the kernels still missing an op: for each,
        # in main's order, the first unmatched op of that kind in binding order
        free = sorted(set(name_to_op.values()) - used)
        last_op = None
        for _sym, ops, needs in calls:
            for need in needs:
                hit = next((i for i in free if _kind_matches(need, g.ops[i].kind)), None)
                if hit is not None:
                    free.remove(hit)
                    ops.append(hit)
                    last_op = hit
                elif not ops and last_op is not None:  # a helper kernel of the op lowered just before
                    ops.append(last_op)
        plan.extend((sym, tuple(sorted(set(ops)))) for sym, ops, _ in calls)
        return m

    target = tvm.target.Target({"kind": "llvm"})

    @tvm.transform.module_pass(opt_level=0, name="NpukitCpuPipeline")
    def pipeline(m, _ctx):
        with target:
            legal = cpu.legalize_passes(target)
            fuse_at = next(k for k, p in enumerate(legal) if "FuseOps" in str(p.info.name)) + 1
            seq = tvm.transform.Sequential(cpu.library_dispatch_passes(target) + legal[:fuse_at] + [record]
                                           + legal[fuse_at:] + cpu.dataflow_lower_passes(target)
                                           + cpu.finalize_passes(target))  # fmt: skip
            return seq(m)

    t0 = time.perf_counter()
    try:
        with _quiet():
            ex = tvm.compile(mod, target=target, relax_pipeline=pipeline)
    except Exception as e:  # noqa: BLE001 - surface TVM's failure as ours, with its first line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise NpukitError(f"{g.path or 'model'}: TVM could not compile it for this CPU: {first}") from None
    compile_s = time.perf_counter() - t0
    return ex, plan, compile_s


class Session:
    """A model compiled for this CPU and its timings so far: ``run`` adds runs (plain and
    instrumented, alternating), ``result`` reads the fastest of all of them.  Several sessions run
    in turns spread each model's runs over the whole measuring time (load from other work on the
    machine comes in bursts)."""

    def __init__(self, mod, g: OpGraph, warmup: int = 2, seed: int = 0):
        tvm = _load_tvm()
        from tvm import relax  # noqa: PLC0415

        self.g = g
        ex, self.plan, self.compile_s = _compile(mod, g)
        self.vm = relax.VirtualMachine(ex, tvm.cpu())
        rng = np.random.default_rng(seed)
        self.args = []
        for tid in g.inputs:
            t = g.tensors[tid]
            if "int" in t.dtype:
                info = np.iinfo(t.dtype)
                a = rng.integers(max(info.min, -64), min(info.max, 64), size=t.shape, dtype=t.dtype)
            else:
                a = rng.random(t.shape, dtype=np.float32).astype(t.dtype)
            self.args.append(tvm.runtime.tensor(a))
        self.main = self.vm["main"]
        for _ in range(warmup):
            self.main(*self.args)
        self.runs = 0
        self.total = math.inf  # fastest plain run, s
        self.per_call = [math.inf] * len(self.plan)  # fastest timed window per kernel call, s
        self.builtin: dict[str, float] = {}  # fastest timed window per VM builtin, s
        symbols = {s for s, _ in self.plan}
        slots: dict[str, list[int]] = {}
        for k, (s, _) in enumerate(self.plan):
            slots.setdefault(s, []).append(k)
        state = {"seen": {}, "start": 0.0}
        self._state = state
        per_call, builtin = self.per_call, self.builtin

        def instrument(func, symbol, before, ret, *a):  # noqa: ARG001 - the VM's calling convention
            if before:
                state["start"] = time.perf_counter()
                return 0
            dt = time.perf_counter() - state["start"]
            if symbol not in symbols:
                if symbol.startswith("vm.builtin.") and dt < builtin.get(symbol, math.inf):
                    builtin[symbol] = dt
                return 0
            n = state["seen"].get(symbol, 0)
            state["seen"][symbol] = n + 1
            ks = slots[symbol]
            if n < len(ks) and dt < per_call[ks[n]]:
                per_call[ks[n]] = dt
            return 0

        self._instrument = instrument

    def run(self, repeat: int, min_seconds: float = 0.0) -> None:
        """At least ``repeat`` plain + instrumented runs, and on until ``min_seconds`` have passed
        (at most 100 x ``repeat``).  Plain and instrumented runs alternate, so both see the same
        conditions on the machine (the whole inference and its kernels are compared)."""
        vm, main, args = self.vm, self.main, self.args
        t_end = time.perf_counter() + min_seconds
        n = 0
        while n < repeat or (time.perf_counter() < t_end and n < 100 * repeat):
            vm.set_instrument(None)
            t = time.perf_counter()
            main(*args)
            self.total = min(self.total, time.perf_counter() - t)
            vm.set_instrument(self._instrument)
            self._state["seen"] = {}
            main(*args)
            n += 1
        vm.set_instrument(None)
        self.runs += n

    def result(self) -> Measurement:
        if not self.runs:
            raise NpukitError("measure: no runs yet")
        # a timed window also holds the VM's return from the "before" callback and its call into the
        # "after" one: measured on the VM's cheapest builtin (``vm.builtin.null_value`` does nothing),
        # and taken off every kernel
        window = self.builtin.get("vm.builtin.null_value", min(self.builtin.values(), default=0.0))
        kernels = tuple(Kernel(s, ops, 1e6 * max(0.0, self.per_call[k] - window) if math.isfinite(self.per_call[k]) else 0.0)
                        for k, (s, ops) in enumerate(self.plan))  # fmt: skip
        held = {i for k in kernels for i in k.ops}
        return Measurement(1e6 * self.total, kernels, self.runs, self.compile_s,
                           tuple(i for i in range(len(self.g.ops)) if i not in held), 1e6 * window)  # fmt: skip
