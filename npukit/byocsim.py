"""TVM's BYOC partition passes replayed on a skeleton of the tagged module (no tvm).

``FuseOpsByPattern`` followed by ``MergeCompositeFunctions`` is what places every op; run by TVM
on the whole module it costs tens of milliseconds at 150 ops and most of a second at 1,000 ops
(the merge keeps every group's transitive dependencies, which is quadratic).  An edit must answer
faster than that, so this module replays the two passes step by step, as apache-tvm 0.27 performs
them, on plain data: the ``Skeleton`` of the tagged module's ``main`` (each binding: op, op id,
arguments) read once per model by ``npukit.tvm.partition.skeleton``.

Replayed exactly, because the Plan must be TVM's (``tests/test_incremental.py`` holds the replay
against TVM's own passes over thousands of random edit sequences on every sample, and
``Partitioned.mod`` -- the real passes on the whole module, built when first asked for -- checks
its read-back against the replay every time it is built):

* FuseOpsByPattern: one pass per pattern (highest priority first, every arity variant on its own);
  the calls of the pattern's root op are visited in ``main``'s current binding order; the match
  walks back through each call's first argument; the check (every op accepted by the pattern's
  processor, no intermediate value read outside the match) is npukit's own; each match becomes a
  composite function, and ``main`` is re-emitted in the topological order of the pass's groups
  (TVM's ``TopoSortByGroupDep``), each function named by a fresh name supply that skips names the
  module already holds.
* MergeCompositeFunctions: one group per call; a composite call joins the groups of its arguments
  that are composites for the same codegen unless another argument's group depends on them, with
  dependency sets kept as TVM keeps them (snapshots, renamed on merge; here as bitsets, so the
  quadratic part runs at C speed); ``main`` is re-emitted in the groups' topological order and each
  group becomes a function ``fused_<its composites>`` + ``_<codegen>``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from . import patterns as pt
from .graph import OpGraph
from .opset import full
from .plan import Plan, build_plan
from .rules import Verdict
from .soc import SocProfile

# an argument: the index of the binding whose variable it is, None for anything that is not a
# variable bound in main (a parameter, a constant, a shape, a prim value), or a tuple of
# arguments for a tuple written inline
Arg = int | None | tuple


@dataclass(frozen=True)
class Binding:
    kind: str  # "call" (an operator call), "tgi" (tuple field), "tuple", "var" (x = y), "other"
    op: str = ""  # full Relax op name of a call
    op_id: int | None = None  # npukit span of a call
    args: tuple = ()  # Args, in argument order
    flat: bool = False  # its variable is a tuple of tensors


@dataclass(frozen=True)
class Skeleton:
    """``main``'s bindings in order (one dataflow block), as plain data."""

    bindings: tuple[Binding, ...]
    outputs: tuple[int, ...] = ()  # bindings whose variables main returns

    @cached_property
    def reads(self) -> tuple[tuple[int, ...], ...]:
        """Per binding: ``_vars`` of its arguments (worked out once; every replay reads them)."""
        return tuple(tuple(_vars(b.args)) for b in self.bindings)

    @cached_property
    def only_tuple_fields_read(self) -> frozenset[int]:
        """Bindings whose (tuple) variable is read only by tuple-field bindings, directly or through
        aliases, and never returned (TVM's ``HasOnlyTupleGetItemUsers``)."""
        users: dict[int, list[int]] = {}
        for k, b in enumerate(self.bindings):
            for a in _vars(b.args):
                users.setdefault(a, []).append(k)
        outs = set(self.outputs)
        out = set()
        for k, b in enumerate(self.bindings):
            if not b.flat:
                continue
            pending, seen, has_tgi, ok = [k], set(), False, True
            while pending and ok:
                cur = pending.pop()
                if cur in seen:
                    continue
                seen.add(cur)
                if cur in outs:
                    ok = False
                    break
                cb = self.bindings[cur]
                if cb.kind == "var" and isinstance(cb.args[0], int):
                    pending.append(cb.args[0])
                for u in users.get(cur, ()):
                    ub = self.bindings[u]
                    if ub.kind == "tgi" and ub.args[0] == cur:
                        has_tgi = True
                    elif ub.kind == "var" and ub.args[0] == cur:
                        pending.append(u)
                    else:
                        ok = False
                        break
            if ok and has_tgi:
                out.add(k)
        return frozenset(out)

    @cached_property
    def by_op(self) -> dict[tuple[str, int], list[int]]:
        out: dict[tuple[str, int], list[int]] = {}
        for k, b in enumerate(self.bindings):
            if b.kind == "call":
                out.setdefault((b.op, len(b.args)), []).append(k)
        return out


def _vars(args) -> list[int]:
    """Binding indices an argument list reads, in visiting order (inline tuples opened)."""
    out: list[int] = []
    for a in args:
        if isinstance(a, tuple):
            out += _vars(a)
        elif a is not None:
            out.append(a)
    return out


def variants(chain: tuple[str, ...], arity: tuple[tuple[int, ...], ...]) -> list[tuple[int, ...]]:
    """The argument counts of each FusionPattern a spec becomes (as ``_dataflow_patterns`` builds
    them: a chained op needs an argument to chain through)."""
    return [combo for combo in itertools.product(*arity) if all(n > 0 for n in combo[1:])]


class NameSupply:
    """TVM's block-builder naming: a fresh counter per base name, skipping names the module holds."""

    def __init__(self, taken: set[str]):
        self.map: dict[str, int] = {}
        self.taken = taken

    def _unique(self, name: str) -> str:
        if name not in self.map:
            self.map[name] = 0
            return name
        new = name
        while new in self.map:
            self.map[name] += 1
            new = f"{name}{self.map[name]}"
        self.map[new] = 0
        return new

    def fresh(self, hint: str) -> str:
        hint = hint.replace(".", "_")
        name = self._unique(hint)
        while name in self.taken:
            name = self._unique(hint)
        self.taken.add(name)
        return name


class _State:
    """``main`` during the replay: nodes (original bindings, then composites) and their place in
    main's binding order (``key``: only the order of the keys of live nodes matters)."""

    def __init__(self, sk: Skeleton):
        self.sk = sk
        n = len(sk.bindings)
        self.key: list[int] = list(range(n))  # node -> sort key (composites take their first op's)
        self.rep = list(range(n))  # binding index -> node now holding its variable
        self.fused = [False] * n  # binding already inside a composite
        self.comp_args: dict[int, list] = {}  # composite node -> its call's arguments (binding indices)
        self.comp_name: dict[int, str] = {}  # composite node -> function name
        self.comp_pattern: dict[int, str] = {}
        self.comp_members: dict[int, tuple[int, ...]] = {}  # binding indices, in binding order
        self.names = {"main"}
        self.next = n
        self.reordered = False  # has a pass moved a binding ahead of an earlier one
        self._order: list[int] | None = list(range(n))

    @property
    def order(self) -> list[int]:
        """Live nodes in main's binding order."""
        if self._order is None:
            live = [b for b in range(len(self.fused)) if not self.fused[b]] + list(self.comp_args)
            live.sort(key=self.key.__getitem__)
            self._order = live
        return self._order

    def node_args(self, node: int):
        if node in self.comp_args:
            return self.comp_args[node]
        return self.sk.bindings[node].args

    def node_uses(self, node: int) -> list[int]:
        """Nodes whose variables ``node`` reads, in TVM's visiting order."""
        rep = self.rep
        if node in self.comp_args:
            return [rep[b] for b in self.comp_args[node]]
        return [rep[b] for b in self.sk.reads[node]]


def _match(st: _State, root: int, chain_ops: tuple[str, ...], combo: tuple[int, ...]) -> list[int] | None:
    """The bindings a pattern rooted at call ``root`` matches (in chain order), or None."""
    sk = st.sk
    ids = [root]
    cur = root
    for j in range(len(chain_ops) - 2, -1, -1):
        a = sk.bindings[cur].args[0]
        if not isinstance(a, int) or st.fused[a] or st.rep[a] != a:
            return None
        b = sk.bindings[a]
        if b.kind != "call" or b.op != chain_ops[j] or len(b.args) != combo[j]:
            return None
        ids.append(a)
        cur = a
    ids.reverse()
    return ids


def _topo(st: _State, group_of: Mapping[int, int], deps_of) -> list[int]:
    """TVM's TopoSortByGroupDep: the nodes in the order the groups are emitted (each group's nodes
    together, deps first, starting from the groups in binding order)."""
    order = st.order
    members: dict[int, list[int]] = {}
    group_order: list[int] = []
    for node in order:
        gid = group_of.get(node, node)
        if gid not in members:
            members[gid] = []
            group_order.append(gid)
        members[gid].append(node)
    deps: dict[int, list[int]] = {}
    for node in order:
        gid = group_of.get(node, node)
        lst = deps.setdefault(gid, [])
        for p in deps_of(node):
            pg = group_of.get(p, p)
            if pg != gid:
                lst.append(pg)
    visited: set[int] = set()
    out: list[int] = []
    for g0 in group_order:
        if g0 in visited:
            continue
        visited.add(g0)
        stack = [(g0, iter(deps.get(g0, ())))]
        while stack:
            g, it = stack[-1]
            for d in it:
                if d not in visited and d in members:
                    visited.add(d)
                    stack.append((d, iter(deps.get(d, ()))))
                    break
            else:
                stack.pop()
                out += members[g]
    return out


def _fuse_pass(st: _State, name: str, chain: tuple[str, ...], combo: tuple[int, ...], cands, accept) -> None:
    chain_ops = tuple(full(k) for k in chain)
    matches: list[list[int]] = []
    grouped: set[int] = set()
    for root in cands:
        if st.fused[root] or st.rep[root] != root:
            continue
        ids = _match(st, root, chain_ops, combo)
        if ids is None or not accept(ids):
            continue
        if len(ids) > 1 and any(i in grouped for i in ids[:-1]):
            continue
        matches.append(ids)
        if len(ids) > 1:
            grouped.update(ids)
    if not matches:
        return
    key = st.key
    group_of: dict[int, int] = {}
    for k, ids in enumerate(matches):
        for b in ids:
            group_of[b] = k
    # TopoSortByGroupDep: when every group's outside producers stand before its first op, each
    # group is emitted where its first op stood and nothing else moves
    simple = True
    for k, ids in enumerate(matches):
        first = key[ids[0]]
        for b in ids:
            if any(group_of.get(p) != k and key[p] > first for p in st.node_uses(b)):
                simple = False
                break
        if not simple:
            break
    if simple:
        emitted = sorted(range(len(matches)), key=lambda k: key[matches[k][0]])
        firsts = [key[matches[k][0]] for k in emitted]
    else:
        order = _topo(st, {b: -1 - k for b, k in group_of.items()}, st.node_uses)
        emitted, firsts, seen = [], [], set()
        for node in order:
            k = group_of.get(node)
            if k is not None and k not in seen:
                seen.add(k)
                emitted.append(k)
    supply = NameSupply(st.names)
    made: dict[int, int] = {}
    for j, k in enumerate(emitted):
        ids = sorted(matches[k], key=key.__getitem__)
        c = st.next
        st.next += 1
        inside = set(ids)
        args: list = []
        for b in ids:  # the composite's call takes every outside variable its ops read (tuples opened)
            for a in st.sk.reads[b]:
                if a not in inside and a not in args:
                    args.append(a)
        st.comp_args[c] = args
        st.comp_members[c] = tuple(ids)
        st.comp_pattern[c] = name
        st.comp_name[c] = supply.fresh("fused_" + "_".join(st.sk.bindings[b].op for b in ids))
        for b in ids:
            st.fused[b] = True
        st.rep[ids[-1]] = c
        st.key.append(firsts[j] if simple else 0)
        made[k] = c
    if simple:
        st._order = None
    else:  # main re-emitted in the groups' topological order
        new_order: list[int] = []
        seen = set()
        for node in order:
            k = group_of.get(node)
            if k is None:
                new_order.append(node)
            elif k not in seen:
                seen.add(k)
                new_order.append(made[k])
        for p, node in enumerate(new_order):
            st.key[node] = p
        st._order = new_order
        st.reordered = True


def fuse(sk: Skeleton, g: OpGraph, soc: SocProfile, specs, vs: Mapping[tuple[int, str], Verdict], ar) -> _State:
    """FuseOpsByPattern(specs as FusionPatterns with npukit's checks, bind_constants=True,
    annotate_codegen=False)."""
    ok: dict[str, set[int]] = {}
    fused_only: dict[str, set[int]] = {}
    for (i, proc), v in vs.items():
        if v.ok and not v.host:
            ok.setdefault(proc, set()).add(i)
            if v.fused_only:
                fused_only.setdefault(proc, set()).add(i)
    st = _State(sk)
    by_op = sk.by_op
    for s in specs:
        acc = ok.get(s.processor, set())
        only = fused_only.get(s.processor, set())
        single = len(s.chain) == 1

        def accept(ids, acc=acc, only=only, single=single) -> bool:
            op_ids = []
            for b in ids:
                i = sk.bindings[b].op_id
                if i is None or i not in acc or (single and i in only):
                    return False
                op_ids.append(i)
            return len(op_ids) < 2 or not pt.internal_outputs_escape(g, op_ids)

        arity = tuple(ar.get(k, (1,)) for k in s.chain)
        for combo in variants(s.chain, arity):
            cands = by_op.get((full(s.chain[-1]), combo[-1]), ())
            if not cands:
                continue
            cands = _in_order(st, cands)
            _fuse_pass(st, s.name, s.chain, combo, cands, accept)
    return st


def _in_order(st: _State, cands) -> list[int]:
    """The calls not yet fused, in main's current order (binding order until a pass reorders)."""
    live = [c for c in cands if not st.fused[c]]
    if len(live) < 2 or not st.reordered:
        return live
    return sorted(live, key=st.key.__getitem__)


def merge(st: _State) -> tuple[list[tuple[str, str, list[tuple[str, list[int]]]]], list[tuple[str, object]]]:
    """MergeCompositeFunctions on the fused state: (offloaded functions, main's order) as
    ``build_plan`` takes them."""
    sk = st.sk
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        r = x
        while parent.get(r, r) != r:
            r = parent[r]
        while parent.get(x, x) != r:
            parent[x], x = r, parent[x]
        return r

    codegen: dict[int, str] = {}  # group (its creating node) -> codegen
    # bitsets hold codegen groups only, one bit each in creation order: a dependency is only ever
    # tested against the members of a codegen group, and only codegen groups merge, so the host's
    # groups need no bit (at 10,000 ops the sets were ~10x longer with a bit per node)
    bit: dict[int, int] = {}  # codegen group -> its bit
    deps: dict[int, int] = {}  # root -> bitset of groups (lazily renamed: test against members)
    members: dict[int, int] = {}  # root -> bitset of every group merged into it
    memo: dict[int, int] = {}  # node -> group
    codegen_roots: set[int] = set()

    tgi_only = sk.only_tuple_fields_read

    def add_deps(grp: int, var_nodes) -> None:
        root = find(grp)
        for a in var_nodes:
            ar_ = find(memo[a])
            if ar_ == root:
                continue
            deps[root] = deps.get(root, 0) | bit.get(ar_, 0) | deps.get(ar_, 0)

    def new_group(node: int) -> int:
        members[node] = 0
        return node

    for node in st.order:
        if node in st.comp_args:
            cg = st.comp_pattern[node].split(".", 1)[0]
            args = [st.rep[b] for b in st.comp_args[node]]
        else:
            b = sk.bindings[node]
            if b.kind == "var":  # x = y: y's group
                if isinstance(b.args[0], int):
                    memo[node] = memo[st.rep[b.args[0]]]
                else:
                    memo[node] = new_group(node)
                continue
            if b.kind == "tgi":  # a field of a tuple of tensors read only field by field joins a codegen group
                src = b.args[0]
                if not isinstance(src, int) or not sk.bindings[src].flat:
                    memo[node] = new_group(node)
                    continue
                sg = find(memo[st.rep[src]])
                if src in tgi_only and sg in codegen_roots:
                    memo[node] = sg
                    continue
                memo[node] = new_group(node)
                add_deps(node, [st.rep[src]])
                continue
            if b.kind == "tuple":
                fields = [st.rep[a] for a in sk.reads[node]]
                if not b.flat:
                    memo[node] = new_group(node)
                    continue
                if node in tgi_only and fields and all(isinstance(a, int) for a in b.args):
                    roots = {find(memo[a]) for a in fields}
                    if len(roots) == 1 and next(iter(roots)) in codegen_roots:
                        memo[node] = next(iter(roots))
                        continue
                memo[node] = new_group(node)
                add_deps(node, fields)
                continue
            cg = None
            args = [st.rep[a] for a in sk.reads[node]]  # a host call reads through inline tuples
        to_merge: list[int] = []
        if cg is not None:
            pdeps = 0
            for a in args:
                pdeps |= deps.get(find(memo[a]), 0)
            for a in args:
                ag = memo[a]
                if codegen.get(ag) == cg and not (pdeps & members[find(ag)]):
                    to_merge.append(ag)
        if not to_merge:
            grp = new_group(node)
            if cg is not None:
                codegen[grp] = cg
                codegen_roots.add(grp)
                members[grp] = bit[grp] = 1 << len(bit)
        else:
            grp = to_merge[0]
            for other in to_merge[1:]:
                fr, to = find(other), find(grp)
                if fr == to:
                    continue
                parent[fr] = to
                deps[to] = deps.get(to, 0) | deps.pop(fr, 0)
                members[to] |= members.pop(fr)
                codegen_roots.discard(fr)
        memo[node] = grp
        add_deps(grp, args)

    group_of = {node: find(memo[node]) for node in st.order}
    codegen_of = {find(gp): cg for gp, cg in codegen.items()}

    def uses(node: int) -> list[int]:
        return st.node_uses(node)

    emitted = _topo(st, group_of, uses)
    supply = NameSupply(st.names | set(st.comp_name.values()))
    offloaded = []
    order: list[tuple[str, object]] = []
    fn_members: dict[int, list[int]] = {}
    for node in st.order:  # a function's composites in main's binding order
        gid = group_of[node]
        if gid in codegen_of and node in st.comp_args:
            fn_members.setdefault(gid, []).append(node)
    done: set[int] = set()
    for node in emitted:
        gid = group_of[node]
        if gid in codegen_of:
            if gid in done:
                continue
            done.add(gid)
            comps = fn_members[gid]
            base = supply.fresh("fused_" + "_".join(st.comp_name[c].removeprefix("fused_") for c in comps))
            fname = f"{base}_{codegen_of[gid]}"
            offloaded.append((fname, codegen_of[gid], [(st.comp_pattern[c], sorted(sk.bindings[b].op_id for b in st.comp_members[c]))
                                                      for c in comps]))  # fmt: skip
            order.append(("call", fname))
        elif node < len(sk.bindings) and sk.bindings[node].kind == "call" and sk.bindings[node].op_id is not None:
            order.append(("op", sk.bindings[node].op_id))
    return offloaded, order


def partition_plan(sk: Skeleton, g: OpGraph, soc: SocProfile, vs: Mapping[tuple[int, str], Verdict], shapes, ar) -> Plan:
    """The Plan TVM's FuseOpsByPattern + MergeCompositeFunctions give under verdicts ``vs`` (the
    verdicts after npukit's pruning, as ``npukit.tvm.partition`` passes them)."""
    specs = pt.table(g, soc, vs, shapes)
    st = fuse(sk, g, soc, specs, vs, ar)
    if not st.comp_args:
        offloaded, order = [], [("op", b.op_id) for b in sk.bindings if b.kind == "call" and b.op_id is not None]
    else:
        offloaded, order = merge(st)
    return build_plan(g, soc.host, offloaded, order)


def partition(sk: Skeleton, g: OpGraph, soc: SocProfile, vs: Mapping[tuple[int, str], Verdict], shapes, ar):
    """``npukit.tvm.partition.partition`` replayed: (Plan, the verdicts it obeyed after pruning)."""
    vs = pt.prune_lone_views(g, soc, vs)
    plan = partition_plan(sk, g, soc, vs, shapes, ar)
    extra = pt.prune_view_partitions(g, soc, vs, plan.partitions)
    if extra:
        vs = {**vs, **extra}
        plan = partition_plan(sk, g, soc, vs, shapes, ar)
    return plan, vs
