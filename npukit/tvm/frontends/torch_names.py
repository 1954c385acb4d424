"""The names of a PyTorch program's nodes: the module paths the user wrote, not torch's FX names.

torch.export names its nodes after their ops (``conv2d_1``, ``linear_3``); each node's
``meta["nn_module_stack"]`` lists the module calls that made it, outermost first.  A node is named
after the innermost of them, the way ONNX's exporter names a node after its module scope:

* a module call that made one op names it by the module's path: ``stem.conv``, ``fc``, ``act``;
* a module call that made several ops (a ``MultiheadAttention``, or a block whose ``forward``
  calls functions besides its submodules) names each op it made itself ``<path>/<op>``
  (``encoder.layers.0.self_attn/linear``, ``block/add``); a second op of one kind in the same call
  is ``<path>/<op>~2``.  An op there that reads only the parameters of a submodule that never ran
  as a call of its own is that submodule's (``MultiheadAttention`` reads ``out_proj.weight`` and
  ``out_proj.bias`` itself: the op is ``self_attn.out_proj``);
* a module called again is a new call: its second call goes by ``<path>~2`` (``act``, ``act~2``;
  ``block~2/add``; its submodules ``block.conv~2``), the way npukit keeps two ONNX nodes of one
  name apart;
* an op of the top-level ``forward`` (no module made it) keeps its FX name (``flatten``).

The FX names and the paths of the calls that made several ops are aliases: ``OpGraph.resolve``
finds ``conv2d_1`` (the node) and ``encoder.layers.0.self_attn`` (every op of the call, its
submodules' included) by them.
"""

from __future__ import annotations

import operator
import re

from .naming import tilde_unique

_SELF = re.compile(r"^L\['self'\]\.?")  # (older torch wrote module paths as L['self'].stem)


def op_word(target) -> str:
    """An FX node's op in one word: ``aten.add.Tensor`` -> ``add``; ``getitem``."""
    name = getattr(target, "_opname", None)  # an OpOverload
    if name:
        return str(name)
    return str(getattr(target, "__name__", target)).split(".")[0]


def _stack(node) -> list[tuple[str, str]]:
    """(call key, module path) of the module calls that made ``node``, outermost first; the root
    module (path "") left out."""
    out = []
    for key, val in (node.meta.get("nn_module_stack") or {}).items():
        path = _SELF.sub("", str(val[0] if isinstance(val, (tuple, list)) and val else ""))
        if path:
            out.append((str(key), path))
    return out


def node_names(nodes, param_of: dict[str, str]) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """``nodes``: the user's program's ``call_function`` nodes, in order; ``param_of``: a placeholder's
    name -> the state_dict name of the weight it holds.  Returns the FX name -> the node's name,
    and the aliases: another name -> the names of its nodes."""
    stacks = {n.name: _stack(n) for n in nodes}
    label: dict[str, str] = {}  # call key -> "path" for a module's first call, "path~k" for its k-th
    number: dict[str, int] = {}  # call key -> k
    calls: dict[str, int] = {}  # module path -> calls so far
    for n in nodes:
        for key, path in stacks[n.name]:
            if key not in label:
                k = number[key] = calls[path] = calls.get(path, 0) + 1
                label[key] = path if k == 1 else f"{path}~{k}"

    def owner(n) -> tuple[tuple, str, list[tuple]] | None:
        """The call that made ``n`` (its id, its label) and the ids of every call ``n`` is inside."""
        st = stacks[n.name]
        if not st:
            return None
        ids = [(key,) for key, _ in st]
        key, path = st[-1]
        mods = {p.rpartition(".")[0] for p in (param_of.get(a.name) for a in n.all_input_nodes) if p}
        if len(mods) == 1:  # (the parameters of a submodule the call reads itself: MHA's out_proj)
            sub = mods.pop()
            if sub.startswith(path + ".") and sub not in calls:
                ids.append((key, sub))
                return ids[-1], sub if number[key] == 1 else f"{sub}~{number[key]}", ids
        return ids[-1], label[key], ids

    owners = {n.name: owner(n) for n in nodes}
    real = {n.name: n.target is not operator.getitem for n in nodes}  # (a tuple's field is no op of its own)
    count: dict[tuple, int] = {}  # call id -> ops made in it (its submodules' included)
    members: dict[tuple, list[str]] = {}  # call id -> FX names of its nodes
    labels: dict[tuple, str] = {}
    for n in nodes:
        o = owners[n.name]
        if o is None:
            continue
        labels[o[0]] = o[1]
        for cid in o[2]:
            count[cid] = count.get(cid, 0) + real[n.name]
            members.setdefault(cid, []).append(n.name)
    for key, lab in label.items():
        labels.setdefault((key,), lab)

    bases: dict[str, str] = {}
    seen: dict[tuple, int] = {}
    for n in nodes:
        o = owners[n.name]
        if o is None:
            bases[n.name] = n.name
            continue
        cid, lab, _ = o
        if real[n.name] and count[cid] == 1:
            bases[n.name] = lab
            continue
        word = op_word(n.target)
        k = seen[(cid, word)] = seen.get((cid, word), 0) + 1
        bases[n.name] = f"{lab}/{word}" if k == 1 else f"{lab}/{word}~{k}"
    unique = tilde_unique(set(), set(bases.values()))
    names = {fx: unique(b) for fx, b in bases.items()}

    aliases: dict[str, tuple[str, ...]] = {fx: (nm,) for fx, nm in names.items() if fx != nm}
    for cid, fxs in members.items():  # (a module's path beats an FX name of the same spelling)
        lab = labels[cid]
        if len(fxs) > 1 or names[fxs[0]] != lab:
            aliases[lab] = tuple(names[f] for f in fxs)
    return names, aliases
