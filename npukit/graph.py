"""OpGraph: the model as plain frozen data (no tvm).

One ``Op`` per Relax operator call of the normalised module, in topological (binding) order, so
``op_id`` is stable for the same model.  Every op keeps the model's own name: ``source`` is the
name of the model node it came from (ONNX node name, else its first output; TFLite output tensor
name; for a PyTorch program the path of the module that made the FX node, ``stem.conv``, see
``npukit.tvm.frontends.torch_names``; Relax binding name) and ``name`` is unique within the graph: the node's name
itself for the node's main op, ``<node>/<kind>`` for the helpers a frontend emitted beside it
(a bias ``add`` next to a ``conv2d``).  Model nodes that produced no op at all (folded constants,
identities) are listed in ``elided`` with a pointer to where their value went.

What an op kind means (its role, its work formula, its shape helpers) is in ``npukit.opset``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

# ---------------------------------------------------------------------------------------------
# data


@dataclass(frozen=True)
class Tensor:
    """A value in the graph: a model input, a constant (weight) or an op's output."""

    tid: str  # graph-unique id: "in0", "c3", "t12" or "t12.1" (tuple field)
    shape: tuple[int, ...]
    dtype: str
    kind: str  # "input" | "const" | "act"
    producer: int | None = None  # op_id for kind "act"
    name: str = ""  # the model's own name where it has one
    # a weight's shape as the model holds it, where the op reads it in another form (a .pt2 Linear's
    # weight [out, in] is read transposed, [in, out]); None where the two agree
    model_shape: tuple[int, ...] | None = None

    @property
    def size(self) -> int:
        return int(math.prod(self.shape)) if self.shape else 1

    @property
    def nbytes(self) -> int:
        return self.size * dtype_bytes(self.dtype)


@dataclass(frozen=True)
class Op:
    """One operator call."""

    op_id: int
    name: str  # unique in the graph, model-derived
    source: str  # the model node it came from
    source_op: str  # the model's op type (Conv, CONV_2D, aten.conv2d.default, relax.nn.conv2d)
    op: str  # full Relax op name, e.g. "relax.nn.conv2d"
    attrs: Mapping[str, Any]
    inputs: tuple[str, ...]  # tensor ids, argument order (tuple arguments flattened)
    outputs: tuple[str, ...]
    var: str  # the binding's name in the tagged Relax module

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", short_op(self.op))

    def __reduce__(self):  # attrs are a read-only mapping, which does not pickle
        return (_op, (self.op_id, self.name, self.source, self.source_op, self.op, dict(self.attrs), self.inputs,
                      self.outputs, self.var))  # fmt: skip

    kind: str = field(init=False, compare=False, repr=False)  # short op name: "relax.nn.conv2d" -> "conv2d"


@dataclass(frozen=True)
class OpGraph:
    """The whole model as data."""

    ops: tuple[Op, ...]
    tensors: Mapping[str, Tensor]
    inputs: tuple[str, ...]  # tensor ids of model inputs, in order
    outputs: tuple[str, ...]  # tensor ids of model outputs, in order
    consts: Mapping[str, np.ndarray] = field(repr=False, compare=False, hash=False)
    elided: Mapping[str, str] = field(default_factory=dict)  # model node -> what became of it
    source_format: str = ""  # "onnx" | "tflite" | "torch" | "relax"
    path: str = ""
    # the model's own name of each output, in the order of ``outputs``: two outputs can be one tensor
    # (an Identity of another output), or an input or a constant, so a tensor's name is not enough
    output_names: tuple[str, ...] = ()
    # other names of model nodes -> the nodes' own names: a .pt2's FX node names (``conv2d_1``) and the
    # module paths that made several nodes (``encoder.layers.0.self_attn``); a node's or an op's own
    # name beats an alias of the same spelling
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    # lookups (built once, cached on the instance)
    def __post_init__(self) -> None:
        by_name = {op.name: op.op_id for op in self.ops}
        by_source: dict[str, list[int]] = {}
        consumers: dict[str, list[int]] = {}
        for op in self.ops:
            by_source.setdefault(op.source, []).append(op.op_id)
            for t in op.inputs:
                consumers.setdefault(t, []).append(op.op_id)
        object.__setattr__(self, "_by_name", MappingProxyType(by_name))
        object.__setattr__(
            self, "_by_source", MappingProxyType({k: tuple(v) for k, v in by_source.items()})
        )
        object.__setattr__(
            self, "_consumers", MappingProxyType({k: tuple(v) for k, v in consumers.items()})
        )
        by_alias = {}
        for alias, nodes in self.aliases.items():
            if alias not in by_source and alias not in by_name:
                ids = tuple(sorted(i for n in nodes for i in by_source.get(n, ())))
                if ids:
                    by_alias[alias] = ids
        object.__setattr__(self, "_by_alias", MappingProxyType(by_alias))

    def __reduce__(self):  # read-only mappings do not pickle: rebuild from plain dicts
        return (_graph, (self.ops, dict(self.tensors), self.inputs, self.outputs, dict(self.consts), dict(self.elided),
                         self.source_format, self.path, self.output_names, dict(self.aliases)))  # fmt: skip

    def __len__(self) -> int:
        return len(self.ops)

    def op_by_name(self, name: str) -> Op | None:
        i = self._by_name.get(name)  # type: ignore[attr-defined]
        return None if i is None else self.ops[i]

    def ops_of_source(self, source: str) -> tuple[int, ...]:
        return self._by_source.get(source, ())  # type: ignore[attr-defined]

    def ops_of_kind(self) -> Mapping[str, tuple[int, ...]]:
        """Op kind -> its op ids, ascending (worked out once: a support toggle touches one kind)."""
        got = self.__dict__.get("_by_kind")
        if got is None:
            by: dict[str, list[int]] = {}
            for op in self.ops:
                by.setdefault(op.kind, []).append(op.op_id)
            got = MappingProxyType({k: tuple(v) for k, v in by.items()})
            object.__setattr__(self, "_by_kind", got)
        return got

    def consumers(self, tid: str) -> tuple[int, ...]:
        return self._consumers.get(tid, ())  # type: ignore[attr-defined]

    def producers(self, op: Op) -> tuple[int, ...]:
        """op_ids feeding ``op`` (sorted, unique)."""
        out = {self.tensors[t].producer for t in op.inputs if self.tensors[t].kind == "act"}
        return tuple(sorted(p for p in out if p is not None))

    def resolve(self, node: str | int) -> tuple[int, ...]:
        """op_ids for a user's node reference: a model node name (all of its ops), an op name
        (``<node>/add`` for a helper op), an alias (``aliases``: all the ops of its nodes), or an op
        id (int, ``"#12"`` as stored in configs, or ``"12"``).  The model's own names come first: a
        node named ``"#12"`` or ``"12"`` is that node, and op 12 is then reached by its id as an int
        (configs store such an op by its name)."""
        if isinstance(node, (int, np.integer)) and not isinstance(node, bool):
            if 0 <= int(node) < len(self.ops):
                return (int(node),)
            return ()
        s = str(node)
        ids = self.ops_of_source(s)  # a model node: all the ops it became (conv2d + its bias add)
        if ids:
            return ids
        op = self.op_by_name(s)
        if op is not None:
            return (op.op_id,)
        ids = self._by_alias.get(s)  # type: ignore[attr-defined]
        if ids:
            return ids
        digits = s[1:] if s.startswith("#") else s
        if digits.isdigit() and int(digits) < len(self.ops):  # an op id as stored in configs
            return (int(digits),)
        return ()

    def names(self) -> list[str]:
        return [op.name for op in self.ops]

    def tensor_label(self, tid: str) -> str:
        """A tensor as the model names it, one label per tensor: its own name, else its producer's
        (``:k`` for a tuple field), else its id; where two tensors would share a label (an unnamed
        tensor whose producer is named like another tensor), the one whose own name it is keeps it
        and the other gets its id added, ``name [t1]``.  Worked out once per graph."""
        labels = self.__dict__.get("_labels")
        if labels is None:
            labels = {}
            named: dict[str, str] = {}  # a label -> the first tensor whose own name it is
            for k, t in self.tensors.items():
                if t.name:
                    labels[k] = t.name
                    named.setdefault(t.name, k)
                elif t.producer is not None:
                    labels[k] = self.ops[t.producer].name + (f":{k.split('.')[1]}" if "." in k else "")
                else:
                    labels[k] = k
            count: dict[str, int] = {}
            for v in labels.values():
                count[v] = count.get(v, 0) + 1
            labels = {k: (f"{v} [{k}]" if count[v] > 1 and named.get(v) != k and v != k else v) for k, v in labels.items()}
            object.__setattr__(self, "_labels", labels)
        return labels[tid]

    def output_name(self, k: int) -> str:
        """The model's name of output ``k`` (its tensor's name, else its tensor id, where the model
        gives none)."""
        if k < len(self.output_names) and self.output_names[k]:
            return self.output_names[k]
        tid = self.outputs[k]
        return self.tensors[tid].name or tid


def freeze(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(sorted(d.items())))


def _op(op_id, name, source, source_op, op, attrs, inputs, outputs, var) -> Op:
    return Op(op_id, name, source, source_op, op, freeze(attrs), inputs, outputs, var)


def _graph(ops, tensors, inputs, outputs, consts, elided, source_format, path, output_names=(), aliases=None) -> OpGraph:
    return OpGraph(ops, MappingProxyType(tensors), inputs, outputs, MappingProxyType(consts), MappingProxyType(elided),
                   source_format, path, output_names, MappingProxyType(aliases or {}))  # fmt: skip


# ---------------------------------------------------------------------------------------------
# dtypes and op names

_DTYPE_BITS = {
    "float64": 64, "float32": 32, "float16": 16, "bfloat16": 16,
    "int64": 64, "int32": 32, "int16": 16, "int8": 8, "int4": 4, "int2": 2,
    "uint64": 64, "uint32": 32, "uint16": 16, "uint8": 8, "bool": 8,
}  # fmt: skip


def dtype_bits(dtype: str) -> int:
    return _DTYPE_BITS.get(str(dtype), 32)


def dtype_bytes(dtype: str) -> float:
    return dtype_bits(dtype) / 8


def short_op(op: str) -> str:
    """"relax.nn.conv2d" -> "conv2d"; "relax.vision.all_class_non_max_suppression" -> same tail."""
    return op.rsplit(".", 1)[-1]
