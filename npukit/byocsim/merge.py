"""MergeCompositeFunctions replayed on the fused state: composites join their arguments' groups of
the same codegen unless a dependency forbids it; each group becomes one offloaded function."""

from __future__ import annotations

from .fuse import NameSupply, State, topo


def merge(st: State) -> tuple[list[tuple[str, str, list[tuple[str, list[int]]]]], list[tuple[str, object]]]:
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

    rep, comp_args, comp_pattern, reads, bindings = st.rep, st.comp_args, st.comp_pattern, sk.reads, sk.bindings
    uses: dict[int, list[int]] = {}  # node -> the nodes whose variables it reads (st.node_uses), for the sort
    bit_get, deps_get, codegen_get = bit.get, deps.get, codegen.get
    cg_of: dict[str, str] = {}  # pattern -> its codegen (the processor: "<processor>.<ops>")
    for node in st.order:
        if node in comp_args:
            pat = comp_pattern[node]
            cg = cg_of.get(pat)
            if cg is None:
                cg = cg_of[pat] = pat.split(".", 1)[0]
            args = uses[node] = [rep[b] for b in comp_args[node]]
        else:
            b = bindings[node]
            args = uses[node] = [rep[a] for a in reads[node]]  # a host call reads through inline tuples
            kind = b.kind
            if kind != "var" and kind != "tgi" and kind != "tuple":
                # a host call (most of main): a group of its own, which merges with nothing and is
                # no codegen group (no bit, no members: only a codegen group's are ever read), that
                # depends on its arguments' groups and their dependencies (an empty set not stored)
                d = 0
                for a in args:
                    r = memo[a]
                    if r in parent:  # (a group merged into another: its root)
                        r = find(r)
                    d |= bit_get(r, 0) | deps_get(r, 0)
                memo[node] = node
                if d:
                    deps[node] = d
                continue
            if kind == "var":  # x = y: y's group
                if isinstance(b.args[0], int):
                    memo[node] = memo[rep[b.args[0]]]
                else:
                    memo[node] = new_group(node)
                continue
            if kind == "tgi":  # a field of a tuple of tensors read only field by field joins a codegen group
                src = b.args[0]
                if not isinstance(src, int) or not bindings[src].flat:
                    memo[node] = new_group(node)
                    continue
                sg = find(memo[rep[src]])
                if src in tgi_only and sg in codegen_roots:
                    memo[node] = sg
                    continue
                memo[node] = new_group(node)
                add_deps(node, [rep[src]])
                continue
            if kind == "tuple":
                if not b.flat:
                    memo[node] = new_group(node)
                    continue
                if node in tgi_only and args and all(isinstance(a, int) for a in b.args):
                    roots = {find(memo[a]) for a in args}
                    if len(roots) == 1 and next(iter(roots)) in codegen_roots:
                        memo[node] = next(iter(roots))
                        continue
                memo[node] = new_group(node)
                add_deps(node, args)
                continue
        # a composite call: it joins its arguments' groups of its codegen that no other argument's
        # group depends on, else starts a codegen group
        roots = []
        pdeps = 0
        for a in args:
            r = memo[a]
            if r in parent:
                r = find(r)
            roots.append(r)
            pdeps |= deps_get(r, 0)
        to_merge: list[int] = []
        for a, r in zip(args, roots):
            ag = memo[a]
            if codegen_get(ag) == cg and not (pdeps & members[r]):
                to_merge.append(ag)
        if not to_merge:
            grp = root = node
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
            root = find(grp)
            if len(to_merge) > 1:  # the arguments' groups merged into root
                roots = [find(r) for r in roots]
        memo[node] = grp
        d = deps_get(root, 0)  # add_deps(grp, args), the arguments' roots at hand
        for r in roots:
            if r != root:
                d |= bit_get(r, 0) | deps_get(r, 0)
        deps[root] = d

    group_of = {}
    for node in st.order:
        r = memo[node]
        group_of[node] = find(r) if r in parent else r
    codegen_of = {find(gp): cg for gp, cg in codegen.items()}

    emitted = _in_place(st.order, group_of, uses)
    if emitted is None:
        emitted = topo(st, group_of, uses.__getitem__)
    supply = NameSupply(st.names | set(st.comp_name.values()))
    offloaded = []
    order: list[tuple[str, object]] = []
    fn_members: dict[int, list[int]] = {}
    for node in st.order:  # a function's composites in main's binding order
        gid = group_of[node]
        if gid in codegen_of and node in st.comp_args:
            fn_members.setdefault(gid, []).append(node)
    done: set[int] = set()
    host_ops = sk.call_ops
    for node in emitted:
        gid = group_of[node]
        if gid in codegen_of:
            if gid in done:
                continue
            done.add(gid)
            comps = fn_members[gid]
            base = supply.fresh("fused_" + "_".join(st.comp_name[c].removeprefix("fused_") for c in comps))
            fname = f"{base}_{codegen_of[gid]}"
            offloaded.append((fname, codegen_of[gid], [(comp_pattern[c], st.comp_ops[c]) for c in comps]))
            order.append(("call", fname))
        else:
            i = host_ops.get(node)
            if i is not None:
                order.append(("op", i))
    return offloaded, order


def _in_place(order: list[int], group_of: dict[int, int], uses: dict[int, list[int]]) -> list[int] | None:
    """``topo``'s order when every node's producers in other groups stand before its group's first
    node (the usual case): each group's nodes emitted together where its first node stands, in the
    groups' order of appearance -- what the sort's walk gives then, as every group it would visit
    first is done already -- else None (the sort is needed)."""
    pos = {node: k for k, node in enumerate(order)}
    first: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    for k, node in enumerate(order):
        gid = group_of[node]
        mem = members.get(gid)
        if mem is None:
            members[gid] = [node]
            f = first[gid] = k
        else:
            mem.append(node)
            f = first[gid]
        for p in uses[node]:
            if pos.get(p, -1) > f and group_of[p] != gid:
                return None
    return [node for mem in members.values() for node in mem]
