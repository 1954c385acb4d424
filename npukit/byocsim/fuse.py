"""FuseOpsByPattern replayed: one pass per pattern variant over ``main``'s current binding order, each
match a composite named by the pass's fresh name supply; ``main`` re-emitted in TVM's
TopoSortByGroupDep order when a pass's groups need it."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from .. import patterns as pt
from ..graph import OpGraph
from ..opset import full
from ..soc import SocProfile
from .skeleton import Skeleton


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
        return self.fresh_clean(hint.replace(".", "_"))

    def fresh_clean(self, hint: str) -> str:
        """``fresh`` of a hint that holds no dot."""
        name = self._unique(hint)
        while name in self.taken:
            name = self._unique(hint)
        self.taken.add(name)
        return name


class State:
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
        self.comp_ops: dict[int, list[int]] = {}  # composite node -> its op ids, sorted
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


# ops TVM's pattern matcher also matches with their two arguments swapped (relax's
# DFPatternMatcher: a call pattern of relax.add or relax.multiply that fails in argument order is
# tried reversed), so a chain may run through either argument: a residual ``x + matmul(...)``
COMMUTATIVE = frozenset({"relax.add", "relax.multiply"})


def _match(st: State, root: int, chain_ops: tuple[str, ...], combo: tuple[int, ...]) -> list[int] | None:
    """The bindings a pattern rooted at call ``root`` matches (in chain order), or None.  Each op of
    the chain is matched at its reader's first argument, or -- when the reader is commutative and
    the first fails -- at its second, as TVM's matcher backtracks."""
    sk = st.sk

    def down(cur: int, j: int) -> list[int] | None:
        if j < 0:
            return []
        args = sk.bindings[cur].args
        slots = (0, 1) if len(args) == 2 and sk.bindings[cur].op in COMMUTATIVE else (0,)
        for s in slots:
            a = args[s]
            if not isinstance(a, int) or st.fused[a] or st.rep[a] != a:
                continue
            b = sk.bindings[a]
            if b.kind != "call" or b.op != chain_ops[j] or len(b.args) != combo[j]:
                continue
            rest = down(a, j - 1)
            if rest is not None:
                return [*rest, a]
        return None

    below = down(root, len(chain_ops) - 2)
    return None if below is None else [*below, root]


def topo(st: State, group_of: Mapping[int, int], deps_of) -> list[int]:
    """TVM's TopoSortByGroupDep: the nodes in the order the groups are emitted (each group's nodes
    together, deps first, starting from the groups in binding order)."""
    members: dict[int, list[int]] = {}
    group_order: list[int] = []
    deps: dict[int, list[int]] = {}
    gget = group_of.get
    for node in st.order:
        gid = gget(node, node)
        mem = members.get(gid)
        if mem is None:
            members[gid] = [node]
            group_order.append(gid)
            lst = deps[gid] = []
        else:
            mem.append(node)
            lst = deps[gid]
        for p in deps_of(node):
            pg = gget(p, p)
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


def _fuse_pass(st: State, name: str, chain: tuple[str, ...], combo: tuple[int, ...], cands, accept) -> None:
    chain_ops = tuple(full(k) for k in chain)
    if len(chain_ops) == 1:
        return _single_pass(st, name, chain_ops[0], cands, accept)
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
    # (a producer always stands before its reader, so a match of one op cannot break it)
    simple = True
    rep, reads = st.rep, st.sk.reads
    for k, ids in enumerate(matches):
        if len(ids) < 2:
            continue
        first = key[ids[0]]
        for b in ids:
            for a in reads[b]:
                p = rep[a]
                if key[p] > first and group_of.get(p) != k:
                    simple = False
                    break
            if not simple:
                break
        if not simple:
            break
    if simple:
        emitted = sorted(range(len(matches)), key=lambda k: key[matches[k][0]])
        firsts = [key[matches[k][0]] for k in emitted]
    else:
        order = topo(st, {b: -1 - k for b, k in group_of.items()}, st.node_uses)
        emitted, firsts, seen = [], [], set()
        for node in order:
            k = group_of.get(node)
            if k is not None and k not in seen:
                seen.add(k)
                emitted.append(k)
    supply = NameSupply(st.names)
    made: dict[int, int] = {}
    # every match of a pass holds the pattern's ops in chain order (a producer stands before its
    # reader), so every composite of the pass is named from the same hint
    hint = ("fused_" + "_".join(chain_ops)).replace(".", "_")
    op_ids = st.sk.op_ids
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
        st.comp_ops[c] = sorted([op_ids[b] for b in ids])
        st.comp_pattern[c] = name
        st.comp_name[c] = supply.fresh_clean(hint)
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


def _single_pass(st: State, name: str, op: str, cands, accept) -> None:
    """``_fuse_pass`` of a one-op pattern: every candidate call (in main's order) its processor
    accepts alone is a composite of its own, emitted where it stood (nothing moves)."""
    fused, rep, key, reads, op_ids = st.fused, st.rep, st.key, st.sk.reads, st.sk.op_ids
    matches = [b for b in cands if not fused[b] and rep[b] == b and accept((b,))]
    if not matches:
        return
    matches.sort(key=key.__getitem__)  # (candidates come in main's order: already sorted)
    supply = NameSupply(st.names)
    hint = ("fused_" + op).replace(".", "_")
    comp_args, comp_members, comp_ops, comp_pattern, comp_name = (
        st.comp_args, st.comp_members, st.comp_ops, st.comp_pattern, st.comp_name)  # fmt: skip
    c = st.next
    for b in matches:
        args: list = []
        for a in reads[b]:  # the composite's call takes every variable its op reads (tuples opened)
            if a != b and a not in args:
                args.append(a)
        comp_args[c] = args
        comp_members[c] = (b,)
        comp_ops[c] = [op_ids[b]]
        comp_pattern[c] = name
        comp_name[c] = supply.fresh_clean(hint)
        fused[b] = True
        rep[b] = c
        key.append(key[b])
        c += 1
    st.next = c
    st._order = None


def fuse(sk: Skeleton, g: OpGraph, soc: SocProfile, specs, acc: pt.Accepted, ar) -> State:
    """FuseOpsByPattern(specs as FusionPatterns with npukit's checks, bind_constants=True,
    annotate_codegen=False), under what the verdicts accept (``acc``)."""
    ok, fused_only = acc.ok, acc.fused_only
    st = State(sk)
    by_op, op_id, escapes = sk.by_op, sk.op_ids, sk.escapes
    for s in specs:
        acc = ok.get(s.processor, set())
        only = fused_only.get(s.processor, set())
        single = len(s.chain) == 1

        def accept(ids, acc=acc, only=only, single=single) -> bool:
            for b in ids:
                i = op_id[b]
                if i is None or i not in acc or (single and i in only):
                    return False
            if len(ids) < 2:
                return True
            key = tuple(ids)
            esc = escapes.get(key)
            if esc is None:
                esc = escapes[key] = pt.internal_outputs_escape(g, [op_id[b] for b in ids])
            return not esc

        arity = tuple(ar.get(k, (1,)) for k in s.chain)
        for combo in variants(s.chain, arity):
            cands = by_op.get((full(s.chain[-1]), combo[-1]), ())
            if not cands:
                continue
            cands = _in_order(st, cands)
            _fuse_pass(st, s.name, s.chain, combo, cands, accept)
    return st


def _in_order(st: State, cands) -> list[int]:
    """The calls not yet fused, in main's current order (binding order until a pass reorders)."""
    live = [c for c in cands if not st.fused[c]]
    if len(live) < 2 or not st.reordered:
        return live
    return sorted(live, key=st.key.__getitem__)
