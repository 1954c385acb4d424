"""Names of the ops and of the tagged module's bindings.

Op names are the model's own (a node's main op takes the node's name, helpers ``<node>/<kind>``);
binding names are valid identifiers that never collide with TVM's own (``main``, ``lv1``, ``gv``,
``R``, ``metadata`` ...) and stay unique without case."""

from __future__ import annotations

import dataclasses
import re

from ...graph import Tensor, short_op
from .common import MAC_KINDS, _Marks

_IDENT = re.compile(r"[^A-Za-z0-9_]")
# names TVM makes or reads itself: the entry function, the BlockBuilder's own bindings (lv, lv1, gv ...),
# TVMScript's namespaces and the module's metadata section
_RESERVED = re.compile(r"(?i)(main|lv\d*|gv\d*|r|t|i|tir|tirx|relax|tvm|metadata|ir|ffi|global_symbol)")


def _var_name(s: str) -> str:
    s = _IDENT.sub("_", s).strip("_") or "op"
    if s[0].isdigit():
        s = "n" + s
    s = s[:48]
    return "n_" + s if _RESERVED.fullmatch(s) else s


class _Namer:
    """Binding names of the tagged module: valid identifiers, none of TVM's own, unique even when
    compared without case (names that differed only by case or by dropped characters stay apart)."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def __call__(self, label: str) -> str:
        base = _var_name(label)
        cand, k = base, 1
        while cand.lower() in self.taken:
            k += 1
            cand = f"{base}_{k}"
        self.taken.add(cand.lower())
        return cand


def tilde_unique(taken: set[str], reserved=frozenset()):
    """A name supply: ``n`` itself while no earlier answer took it, else ``n~2``, ``n~3`` ... (the
    first free one that is not in ``reserved``: the model's own names); each answer is taken."""

    def unique(n: str) -> str:
        k, cand = 1, n
        while cand in taken or (k > 1 and cand in reserved):
            k += 1
            cand = f"{n}~{k}"
        taken.add(cand)
        return cand

    return unique


def _name_ops(ops: list[dict], marks: _Marks) -> tuple[dict[int, str], dict[int, tuple[str, str]]]:
    """Unique op names: a node's main op takes the node's own name, helpers ``<node>/<kind>``; and
    each op's model node (name, op type).  Nodes that share a name stay apart: the second goes by
    ``<name>~2`` (its main op's name), its helpers by ``<name>~2/<kind>``, so a reference to the
    name means the one node, as every table shows it."""
    by_src: dict[int, list[int]] = {}
    for o in ops:
        if o["src"] is not None:
            by_src.setdefault(o["src"], []).append(o["op_id"])
    primary = {}
    for s, ids in by_src.items():
        macs_ids = [i for i in ids if short_op(ops[i]["op"]) in MAC_KINDS]
        # else the op that computes: not the (de)quantize around a quantized node's float op
        work = [i for i in ids if short_op(ops[i]["op"]) not in ("quantize", "dequantize")]
        primary[s] = macs_ids[0] if macs_ids else work[-1] if work else ids[-1]
    # the model's own names are reserved, so a made-up "a~2" never takes a real node's name
    unique = tilde_unique(set(), {marks.sources[s].name for s in primary})

    names: dict[int, str] = {}
    sources: dict[int, tuple[str, str]] = {}
    label: dict[int, str] = {}  # model node -> the name its ops go by: its own, "<name>~2" for a second node of that name
    for o in ops:  # main ops first, so the model's names stay exact
        s = o["src"]
        if s is not None and primary[s] == o["op_id"]:
            names[o["op_id"]] = label[s] = unique(marks.sources[s].name)
    for o in ops:
        s = o["src"]
        if s is None:
            sources[o["op_id"]] = (o["var"], o["op"])
            names.setdefault(o["op_id"], unique(o["var"]))
        else:
            sources[o["op_id"]] = (label[s], marks.sources[s].op_type)
            if o["op_id"] not in names:
                names[o["op_id"]] = unique(f"{label[s]}/{short_op(o['op'])}")
    return names, sources


def _with_name(t: Tensor, name: str) -> Tensor:
    return dataclasses.replace(t, name=name)


