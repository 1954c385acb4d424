"""Plan: where every op runs, the partitions in execution order, and the boundary tensors (no tvm).

A Plan is read back from the partitioned Relax module (``npukit.tvm.partition``): each offloaded
partition is one function with a ``Codegen`` attribute produced by ``MergeCompositeFunctions``;
host partitions are the runs of ops left in ``main`` between offloaded calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from .graph import OpGraph


@dataclass(frozen=True)
class Partition:
    pid: int
    processor: str
    ops: tuple[int, ...]  # op ids in execution order
    function: str = ""  # the partition's global function in the module ("" for host runs)
    patterns: tuple[tuple[str, tuple[int, ...]], ...] = ()  # composites: (pattern name, op ids)


@dataclass(frozen=True)
class Boundary:
    """A tensor that crosses from one processor to another."""

    tensor: str  # tensor id
    src: str  # processor that holds it (the host for model inputs)
    dst: str  # processor that needs it (the host for model outputs)
    src_pid: int  # producing partition (-1: model input)
    dst_pid: int  # first consuming partition on dst (-1: model output)
    consumers: tuple[int, ...]  # op ids on dst reading it


@dataclass(frozen=True)
class Plan:
    processor: tuple[str, ...]  # per op id
    partition: tuple[int, ...]  # per op id
    pattern: tuple[str, ...]  # per op id: the composite it belongs to ("" if none)
    partitions: tuple[Partition, ...]
    boundaries: tuple[Boundary, ...]

    def __hash__(self) -> int:
        # worked out once: a plan keys the caches of its costs, and hashing its per-op tuples and
        # partitions costs ~0.5 ms at 1,000 ops (kept out of pickles: str hashes differ by process)
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.processor, self.partition, self.pattern, self.partitions, self.boundaries))
            object.__setattr__(self, "_hash", h)
        return h

    def __eq__(self, other) -> bool:
        # an edit's plan is often equal to one whose costs are kept: compared by its per-op tuples
        # and plain tuples of its partitions and boundaries (worked out once), not field by field of
        # every partition and boundary (~0.4 ms at 1,000 ops); plans of different hashes differ
        if self is other:
            return True
        if not isinstance(other, Plan):
            return NotImplemented
        return hash(self) == hash(other) and self._plain() == other._plain()

    def _plain(self) -> tuple:
        f = self.__dict__.get("_plain_")
        if f is None:
            f = (self.processor, self.partition, self.pattern,
                 tuple([(p.pid, p.processor, p.ops, p.function, p.patterns) for p in self.partitions]),
                 tuple([(b.tensor, b.src, b.dst, b.src_pid, b.dst_pid, b.consumers) for b in self.boundaries]))  # fmt: skip
            object.__setattr__(self, "_plain_", f)
        return f

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_hash", "_plain_")}

    def ops_on(self, proc: str) -> tuple[int, ...]:
        return tuple(i for i, p in enumerate(self.processor) if p == proc)


def build_plan(g: OpGraph, host: str, offloaded: list[tuple[str, str, list[tuple[str, list[int]]]]],
               main_order: list[tuple[str, object]]) -> Plan:  # fmt: skip
    """Assemble a Plan.

    ``offloaded``: (function name, processor, [(pattern, op ids)]) per partition function;
    ``main_order``: main's calls in order, each ("op", op_id) or ("call", function name).
    """
    n = len(g.ops)
    processor = [host] * n
    partition = [-1] * n
    pattern = [""] * n
    fn_info = {fname: (proc, comps) for fname, proc, comps in offloaded}
    parts: list[Partition] = []
    host_run: list[int] = []

    def flush_host():
        if host_run:
            pid = len(parts)
            for i in host_run:
                partition[i] = pid
            parts.append(Partition(pid, host, tuple(host_run)))
            host_run.clear()

    for kind, ref in main_order:
        if kind == "op":
            host_run.append(int(ref))  # type: ignore[arg-type]
            continue
        flush_host()
        proc, comps = fn_info[ref]  # type: ignore[index]
        pid = len(parts)
        ids: list[int] = []
        for pat, op_ids in comps:
            for i in op_ids:
                processor[i] = proc
                partition[i] = pid
                pattern[i] = pat
            ids += op_ids
        parts.append(Partition(pid, proc, tuple(sorted(ids)), str(ref), tuple([(p, tuple(o)) for p, o in comps])))
    flush_host()
    missing = [i for i in range(n) if partition[i] < 0]
    if missing:
        raise AssertionError(f"ops {missing[:5]} missing from the partitioned module")
    return Plan(tuple(processor), tuple(partition), tuple(pattern), tuple(parts), boundaries(g, processor, partition, host))


def boundaries(g: OpGraph, processor, partition, host: str) -> tuple[Boundary, ...]:
    """Tensors crossing processors: one row per (tensor, consuming processor)."""
    out: list[Boundary] = []
    for tid, prod, cons_all, is_out in _flow(g):
        src = processor[prod] if prod >= 0 else host
        if not is_out:
            for c in cons_all:
                if processor[c] != src:
                    break
            else:
                continue  # read only where it is made
        src_pid = partition[prod] if prod >= 0 else -1
        if len(cons_all) == 1 and not is_out:  # (most crossings: one reader elsewhere)
            c = cons_all[0]
            out.append(Boundary(tid, src, processor[c], src_pid, partition[c], cons_all))
            continue
        by_dst: dict[str, list[int]] = {}
        for c in cons_all:
            by_dst.setdefault(processor[c], []).append(c)
        if is_out:
            by_dst.setdefault(host, [])
        for dst in sorted(by_dst):
            if dst == src:
                continue
            cons = tuple(sorted(by_dst[dst]))
            dst_pid = min((partition[c] for c in cons), default=-1)
            out.append(Boundary(tid, src, dst, src_pid, dst_pid, cons))
    return tuple(out)


def _flow(g: OpGraph) -> tuple[tuple[str, int, tuple[int, ...], bool], ...]:
    """The graph's non-constant tensors in boundary order, each as (tensor id, producing op or -1
    for a model input, consuming ops, is a model output): worked out once per graph."""
    flow = g.__dict__.get("_flow")
    if flow is None:
        outs = set(g.outputs)
        flow = tuple((tid, t.producer if t.kind == "act" else -1, tuple(g.consumers(tid)), tid in outs)
                     for tid, t in ((tid, g.tensors[tid]) for tid in sorted(g.tensors, key=_tid_key))
                     if t.kind != "const")  # fmt: skip
        object.__setattr__(g, "_flow", flow)
    return flow


def _tid_key(tid: str):
    head = tid[0] if tid[0] != "t" else "u"  # inputs ("in") first, then activations by producer
    body = tid.lstrip("inct")
    parts = body.split(".")
    try:
        return (head, int(parts[0]), int(parts[1]) if len(parts) > 1 else -1)
    except ValueError:
        return (head, 0, 0)


def over_limits(plan: Plan, soc) -> list[tuple[str, int, list[Partition]]]:
    """(accelerator, its ``max_partitions``, its partitions) for every accelerator whose runtime
    takes fewer offloaded partitions than this plan gives it."""
    out = []
    for p in soc.processors:
        if p.max_partitions is None or p.host:
            continue
        parts = [part for part in plan.partitions if part.processor == p.name]
        if len(parts) > p.max_partitions:
            out.append((p.name, p.max_partitions, parts))
    return out


def partition_limits(plan: Plan, soc) -> tuple[str, ...]:
    """Per accelerator whose runtime takes at most ``max_partitions`` offloaded partitions and that
    this plan gives more: what is over, in words (empty when every limit holds)."""
    out = []
    for name, lim, parts in over_limits(plan, soc):
        pids = [part.pid for part in parts]
        out.append(f"{name} is given {len(pids)} offloaded partitions ({', '.join(map(str, pids))}), and its "
                   f"runtime takes at most {lim} (processors.{name}.max_partitions = {lim}): the chip would refuse "
                   f"this plan; pins or support toggles that leave {name} {lim} partition{'s' if lim > 1 else ''} "
                   "fix it")  # fmt: skip
    return tuple(out)
