"""Which ops are costed together (kernels) and where each op's tensors live (memory contexts), under
a plan (no tvm)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..graph import OpGraph
from ..opset import KINDS
from ..plan import Plan
from ..soc import SocProfile
from .members import anchor_of, inner_width
from .tables import NUMERIC, Tables, held_as, input_bits


class OpContext(NamedTuple):
    """What an op's cost depends on beyond (op, processor, bits): where its tensors live."""

    fused_in: tuple[bool, ...]  # per input: produced inside the same kernel
    onchip_in: tuple[bool, ...]  # per input: read from on-chip memory
    fused_out: bool  # output only read inside the same kernel
    onchip_out: bool  # output stays on chip (read only inside the partition and fits)
    overhead: bool  # first op of its kernel, or standalone (its kernel pays op_overhead_cycles)
    call: bool  # pays call_overhead_cycles (first op of an offloaded partition)
    # per input: the width its producer in the same partition wrote it at, where that is not this op's
    # (a layer bit-width): the op converts it as it loads it; empty when no input is converted
    convert_in: tuple[str, ...] = ()


def kernels(plan: Plan, g: OpGraph, t: Tables) -> list[tuple[int, ...]]:
    """The plan's kernels in op order: each composite's op ids; outside composites (the host's ops),
    a MAC op with the elementwise epilogue chain after it (each link the only reader of the one
    before, on the same partition, not a model output), as the processor's compiler fuses it (TVM
    FuseOps, TFLite fused activations); every other op alone."""
    comps = [ids for part in plan.partitions for _pat, ids in part.patterns]
    return _kernels(g, t, comps, range(len(g.ops)), plan.partition)


def partition_kernels(t: Tables, op_ids: list[int]) -> list[tuple[int, ...]]:
    """``kernels`` of a host partition holding exactly the ops ``op_ids`` (ascending)."""
    return _kernels(t.g, t, [], op_ids, _Outside.fromkeys(op_ids, 0))


def _kernels(g: OpGraph, t: Tables, comps, op_ids, partition) -> list[tuple[int, ...]]:
    """``kernels`` of the ops ``op_ids`` (ascending; every composite among them in ``comps``), with
    ``partition`` each op's partition."""
    seen: set[int] = set()
    out: list[tuple[int, ...]] = []
    for ids in comps:
        k = tuple(sorted(ids))
        out.append(k)
        seen.update(k)
    ops = g.ops
    for i in op_ids:
        if i in seen:
            continue
        chain = [i]
        seen.add(i)
        if KINDS[ops[i].kind].mac:
            cur = i
            while True:
                cons = t.consumers[cur]
                if len(cons) != 1 or t.graph_out[cur] or len(ops[cur].outputs) != 1:
                    break
                nxt = cons[0]
                if nxt in seen or partition[nxt] != partition[i] or not KINDS[ops[nxt].kind].epilogue:
                    break
                chain.append(nxt)
                seen.add(nxt)
                cur = nxt
        out.append(tuple(chain))
    out.sort(key=lambda k: k[0])
    return out


def contexts(g: OpGraph, plan: Plan, soc: SocProfile, t: Tables, bits_of: Callable[[int], str],
             kernel_list: list[tuple[int, ...]]) -> list[OpContext]:  # fmt: skip
    """Each op's memory context under ``plan``: tensors inside one kernel move nothing."""
    host = soc.host
    first_of_part = {part.ops[0] for part in plan.partitions if part.processor != host and part.ops}
    half_of = {p.name: p.onchip_bytes / 2 for p in soc.processors}
    halves = [half_of[p] for p in plan.processor]
    return _contexts(g, t, bits_of, kernel_list, plan.partition, halves, first_of_part, g.ops)


def _contexts(g: OpGraph, t: Tables, bits_of: Callable[[int], str], kernel_list: list[tuple[int, ...]],
              partition, half_of, first_of_part, ops) -> list[OpContext]:  # fmt: skip
    """``contexts`` of the ops ``ops`` (in that order): ``partition`` and ``half_of`` (half the
    on-chip bytes of its processor) per op id, ``kernel_list`` every kernel they belong to, and
    ``first_of_part`` the first op of every offloaded partition."""
    comp_of: dict[int, int] = {}
    for c, ids in enumerate(kernel_list):
        if len(ids) > 1:
            for i in ids:
                comp_of[i] = c
    nb = t.nbytes
    own = t.own  # (op, tensor) pairs held in the tensor's own dtype: a (de)quantize's float side
    tensors = g.tensors
    specs = t.input_specs()
    consumers, graph_out = t.consumers, t.graph_out
    comp_get = comp_of.get
    out = []
    append = out.append
    for op in ops:
        i = op.op_id
        half = half_of[i]
        c = comp_get(i)
        part_i = partition[i]
        spec = specs[i]
        if c is None:
            fused_in = (False,) * len(spec)
            if half > 0:
                onchip_in = tuple(p >= 0 and partition[p] == part_i and nb(tid, own.get((p, tid)) or bits_of(p)) <= half
                                  for tid, p in spec)  # fmt: skip
            else:
                onchip_in = fused_in
        else:
            fl, ol = [], []
            for tid, p in spec:
                f = p >= 0 and comp_get(p) == c
                fl.append(f)
                ol.append(not f and p >= 0 and half > 0 and partition[p] == part_i
                          and nb(tid, own.get((p, tid)) or bits_of(p)) <= half)  # fmt: skip
            fused_in, onchip_in = tuple(fl), tuple(ol)
        cons = consumers[i]
        is_graph_out = graph_out[i]
        fused_out = False
        if cons and not is_graph_out and c is not None:
            for cc in cons:
                if comp_get(cc) != c:
                    break
            else:
                fused_out = True
        onchip_out = False
        if not fused_out and cons and not is_graph_out and half > 0:
            for cc in cons:
                if partition[cc] != part_i:
                    break
            else:
                b = bits_of(i)
                onchip_out = sum(nb(o, own.get((i, o)) or b) for o in op.outputs) <= half
        overhead = c is None or kernel_list[c][0] == i
        cv, bi = None, None
        for k, (tid, p) in enumerate(spec):
            # (a value made inside the kernel is read as it is: nothing converts it there)
            if p >= 0 and not fused_in[k] and partition[p] == part_i and tensors[tid].dtype in NUMERIC:
                bp = bits_of(p)
                if bi is None:
                    a = anchor_of(kernel_list[c], t) if fused_out else i
                    bi = bits_of(a if inner_width(t, i, a, fused_out) else i)
                bq = bi
                if own and not fused_in[k]:  # stored between two kernels: a (de)quantize's float side in its dtype
                    bp = own.get((p, tid)) or bp
                    bq = own.get((i, tid)) or bi
                if bp != bq and held_as(tensors[tid], bp) != held_as(tensors[tid], bq):  # (the boundary's rule)
                    if cv is None:
                        cv = [""] * len(spec)
                    cv[k] = bp
        append(OpContext(fused_in, onchip_in, fused_out, onchip_out, overhead, i in first_of_part,
                         tuple(cv) if cv else ()))  # fmt: skip
    return out


PLAN_MEMO = 512


def per_plan(t: Tables, key, plan: Plan, make):
    """A per-plan memo on the graph's tables (entries keep their plan, so an id is never reused)."""
    m = t.plan_memo
    hit = m.get(key)
    if hit is not None and hit[0] is plan:
        return hit[1]
    if len(m) >= PLAN_MEMO:
        m.clear()
    value = make()
    m[key] = (plan, value)
    return value


def plan_contexts(plan: Plan, soc: SocProfile, t: Tables, bits: list[str]) -> list[OpContext]:
    """``contexts`` of a plan, once per (plan, bit-widths, host, on-chip sizes): the profile's
    other fields do not enter them."""
    return plan_keys(plan, soc, t, bits).contexts


class PlanKeys(NamedTuple):
    """What the cost of a plan at given bit-widths depends on besides the processors' own tables,
    worked out once per (plan, bit-widths, host, on-chip sizes): the memory contexts, each kernel as
    a small number standing for its ops, bit-widths and contexts (``Tables.sig``), and each boundary
    by what its figures read: the tensor, the two processors and the widths the two sides hold it at
    (not its partitions or readers, so every plan with that crossing shares them)."""

    contexts: list[OpContext]
    kernels: list[tuple[tuple[int, ...], str, int]]  # (op ids, processor, signature)
    bounds: list[tuple[object, str, str, tuple]]  # (Boundary, source bits, destination bits, key: tensor, processors, bits)


KEYS_MEMO = 2048


def plan_keys(plan: Plan, soc: SocProfile, t: Tables, bits: list[str], memo: bool = True) -> PlanKeys:
    """``PlanKeys``, memoized (least recently used first out) apart from the per-plan memo, so that
    many bit-width assignments of one plan do not push out its kernels and schedule program.
    ``memo=False``: a plan used once (a virtual plan of the placement search) is kept in no memo."""
    if not memo:
        return _plan_keys(plan, soc, t, list(bits), memo=False)
    key = (id(plan), tuple(bits), soc.host, tuple((p.name, p.onchip_bytes) for p in soc.processors))
    m = t.keys_memo
    hit = m.get(key)
    if hit is not None and hit[0] is plan:
        m.move_to_end(key)
        return hit[1]
    value = _plan_keys(plan, soc, t, list(bits))
    m[key] = (plan, value)
    if len(m) > KEYS_MEMO:
        m.popitem(last=False)
    return value


def _plan_keys(plan: Plan, soc: SocProfile, t: Tables, bits: list[str], memo: bool = True) -> PlanKeys:
    """``memo=False``: for a plan used once (the placement search's virtual plans), nothing of it is
    kept in the per-plan memos."""
    if not memo:
        klist = kernels(plan, t.g, t)
        ctxs = contexts(t.g, plan, soc, t, bits.__getitem__, klist)
        return PlanKeys(ctxs, kernel_keys(t, klist, plan.processor, bits, ctxs), bound_keys(plan, t, bits))
    # partition by partition: a partition's kernels and contexts depend only on its own ops,
    # processor, composites and bit-widths, so an edit's new plan re-uses every partition it shares
    # with a plan costed before (most of them, on a large model)
    ctxs: list = [None] * len(t.g.ops)
    ks: list = []
    kept = t.part_memo
    host = soc.host
    for part in plan.partitions:
        proc = part.processor
        comps = tuple(ids for _pat, ids in part.patterns)
        key = (proc, host, soc.processor(proc).onchip_bytes, part.ops, comps, tuple([bits[i] for i in part.ops]))
        hit = kept.get(key)
        if hit is None:
            first = part.ops[0] if proc != host and part.ops else -1
            hit = kept[key] = kernel_by_kernel(t, soc, proc, sorted(part.ops), comps, bits, first)
        ks += hit[0]
        for i, c in hit[1]:
            ctxs[i] = c
    return PlanKeys(ctxs, ks, bound_keys(plan, t, bits))


def kernel_keys(t: Tables, klist, processor, bits, ctxs) -> list[tuple[tuple[int, ...], str, int]]:
    """(op ids, processor, signature) of every kernel; ``processor``, ``bits`` and ``ctxs`` are
    indexed by op id."""
    ks = []
    for ids in klist:
        if len(ids) == 1:
            i = ids[0]
            base = (ids, bits[i], ctxs[i])
        else:
            base = (ids, tuple(bits[i] for i in ids), tuple(ctxs[i] for i in ids))
        ks.append((ids, processor[ids[0]], t.sig(base)))
    return ks


def bound_keys(plan: Plan, t: Tables, bits: list[str]) -> list[tuple[object, str, str, tuple]]:
    """(boundary, source bits, destination bits, key) of every boundary of ``plan``: the widths
    the two sides hold the tensor at -- its producer (a model input: its own dtype) and its first
    consumer on the destination (a model output read by none there: its own dtype), each at its
    bit-width, or in the tensor's own dtype where that op is the model's own input quantize or
    output dequantize and the tensor its float side (``Tables.held``)."""
    bs = []
    g = t.g
    held = t.held
    for b in plan.boundaries:
        tid = b.tensor
        tt = g.tensors[tid]
        sb = held(tt.producer, tid, bits[tt.producer]) if tt.kind == "act" else input_bits(tt)
        db = held(b.consumers[0], tid, bits[b.consumers[0]]) if b.consumers else input_bits(tt)
        bs.append((b, sb, db, (tid, b.src, b.dst, sb, db)))  # (its figures read nothing else of it)
    return bs


def kernel_by_kernel(t: Tables, soc: SocProfile, proc: str, op_ids: list[int], comps, col: list[str], first: int):
    """``run_keys`` of one partition (``op_ids`` ascending, on ``proc``, composites ``comps``, its
    first op ``first`` or -1 on the host), put together from its kernels' kept keys
    (``kept_kernel``): a partition no plan held before is mostly made of kernels some plan held
    with the same neighbours (the placement search costs the plans the policy then partitions for
    real).  When a kernel is new, the partition is worked out whole and its new kernels kept."""
    from .shapes import shapes_of  # noqa: PLC0415 - (shapes costs kernels: it imports this module)

    shapes = shapes_of(t)
    skey = shapes.run(op_ids, comps, first, soc.processor(proc).onchip_bytes, proc, col)
    if skey is not None:
        got = shapes.kept_run(skey, op_ids)
        if got is None:
            got = _kernel_by_kernel(t, soc, proc, op_ids, comps, col, first)
            shapes.keep_run(skey, op_ids, col, got)
        return got
    return _kernel_by_kernel(t, soc, proc, op_ids, comps, col, first)


def _kernel_by_kernel(t: Tables, soc: SocProfile, proc: str, op_ids: list[int], comps, col: list[str], first: int):
    klist = _kernels(t.g, t, comps, op_ids, _Outside.fromkeys(op_ids, 0))
    whole = {first} if first >= 0 else set()
    if any(list(k) != sorted(k) for k in klist):  # (a chain against op order: named as it runs, whole)
        return run_keys(t, soc, proc, op_ids, comps, col, first=whole)
    inside = set(op_ids)
    kept = t.kernel_kept
    keys = []
    hits = []
    for kern in klist:
        near = tuple([x for x in t.adjacent(kern) if x in inside])
        key = _kernel_key(soc, proc, kern, near, first if first in kern else -1, col)
        keys.append((key, kern))
        hits.append(kept.get(key))
    if None in hits:  # one pass over the partition (cheaper than kernel by kernel), its new kernels kept
        ks, cs = run_keys(t, soc, proc, op_ids, comps, col, first=whole)
        ctx = dict(cs)
        for (key, kern), k, hit in zip(keys, ks, hits):
            if hit is None:
                kept[key] = ([k], [(i, ctx[i]) for i in kern])
        return ks, cs
    out_k: list = []
    out_c: list = []
    for hit in hits:
        out_k += hit[0]
        out_c += hit[1]
    return out_k, out_c


def _kernel_key(soc: SocProfile, proc: str, kern: tuple[int, ...], near: tuple[int, ...], first: int, col: list[str]):
    return (proc, soc.processor(proc).onchip_bytes, kern, near, first, tuple([col[i] for i in kern]),
            tuple([col[x] for x in near]))  # fmt: skip


def kept_kernel(t: Tables, soc: SocProfile, proc: str, kern: tuple[int, ...], near: tuple[int, ...], first: int,
                col: list[str]):  # fmt: skip
    """``run_keys`` of one kernel ``kern`` (ascending op ids) inside a partition on ``proc``:
    ``near`` the partition's ops it reads from or feeds (ascending), ``first`` the partition's first
    op if in ``kern`` and offloaded (its call), else -1; ``col`` bit-widths per op id.  Its contexts
    and keys depend on nothing else (a context reads whether each producer and consumer is in the
    kernel or the partition, and their bit-widths), so they are kept by that content
    (``Tables.kernel_kept``) for every plan, real or virtual, that holds the kernel so placed."""
    key = _kernel_key(soc, proc, kern, near, first, col)
    kept = t.kernel_kept
    hit = kept.get(key)
    if hit is None:
        from .shapes import shapes_of  # noqa: PLC0415 - (shapes costs kernels: it imports this module)

        shapes = shapes_of(t)
        skey = shapes.run(kern, [kern], first, soc.processor(proc).onchip_bytes, proc, col, near)
        hit = shapes.kept_run(skey, kern) if skey is not None else None
        if hit is None:
            hit = run_keys(t, soc, proc, list(kern), [kern], col, list(near), {first} if first >= 0 else set())
            if skey is not None:
                shapes.keep_run(skey, kern, col, hit)
        kept[key] = hit
    return hit


class _Outside(dict):
    """Op id -> partition for the ops of one partition; -1 for every other op."""

    def __missing__(self, key):
        return -1


def run_keys(t: Tables, soc: SocProfile, proc: str, op_ids: list[int], comps, col: list[str],
             partition: list[int] | None = None, first: set[int] | None = None):  # fmt: skip
    """The kernels' keys and the memory contexts of the ops of one partition (``op_ids``,
    ascending), on ``proc`` at the bit-widths ``col`` (per op id), its composites ``comps``:
    what ``plan_keys`` works out for them inside any plan that holds exactly this partition (a
    context reads only whether a producer or consumer is in the same partition and kernel).  The
    placement search re-uses them across the virtual plans that share the partition.  Or, given
    ``partition`` (the ops of the partition that ``op_ids`` read from or feed, besides ``op_ids``)
    and ``first`` (the partition's first op, if among them), the same for the composites ``comps``
    of ``op_ids``, part of a larger partition.  Returns (kernel keys, [(op id, context)])."""
    g = t.g
    inside = _Outside.fromkeys(op_ids if partition is None else [*op_ids, *partition], 0)
    half = soc.processor(proc).onchip_bytes / 2
    klist = _kernels(g, t, comps, op_ids, inside)
    if first is None:
        first = {op_ids[0]} if proc != soc.host and op_ids else set()
    ops = [g.ops[i] for i in op_ids]
    ctxs = _contexts(g, t, col.__getitem__, klist, inside, dict.fromkeys(op_ids, half), first, ops)
    by_id = dict(zip(op_ids, ctxs))
    procs = dict.fromkeys(op_ids, proc)
    return kernel_keys(t, klist, procs, col, by_id), list(by_id.items())
