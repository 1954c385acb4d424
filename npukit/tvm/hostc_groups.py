"""Host kernel groups (no tvm import here): ``chain_groups``, the default grouping of ops into host
kernels (a conv2d / matmul with its epilogue chain, QDQ wrappers joined to their op), and
``_check_groups``, the checks of a grouping ``hostc.host_kernels`` is given."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigError
from ..graph import OpGraph
from ..opset import KINDS


def _check_groups(graph: OpGraph, groups: list[tuple[int, ...]]) -> None:
    seen: dict[int, int] = {}
    n = len(graph.ops)
    for k, grp in enumerate(groups):
        if not grp:
            raise ConfigError(f"host group {k} is empty")
        done: set[str] = set()
        members = set(grp)
        for i in grp:
            if not 0 <= i < n:
                raise ConfigError(f"host group {k}: no op #{i}; the model has ops #0..#{n - 1}")
            if i in seen:
                raise ConfigError(f"host group {k}: op #{i} ({graph.ops[i].name!r}) is already in group {seen[i]}")
            seen[i] = k
            op = graph.ops[i]
            for t in op.inputs:
                tt = graph.tensors[t]
                if tt.kind == "act" and tt.producer in members and t not in done:
                    raise ConfigError(f"host group {k}: op #{i} ({op.name!r}) reads the output of op "
                                      f"#{tt.producer}, which comes later in the group (list ops in topological order)")  # fmt: skip
            done.update(op.outputs)


# kinds that join the group of the op feeding them (a conv2d / matmul epilogue, QDQ wrappers)
_EPILOGUE = frozenset({"add", "subtract", "multiply", "divide", "relu", "clip", "sigmoid", "tanh", "gelu",
                       "gelu_tanh", "silu", "leakyrelu", "hardswish", "quantize", "minimum", "maximum"})  # fmt: skip
# (every normalisation is one: a group / instance / rms norm is a layer norm over other axes)
_ROOTS = frozenset({"conv1d", "conv2d", "conv3d", "conv2d_transpose", "matmul", "max_pool2d", "avg_pool2d",
                    "mean", "softmax"} | {k for k, v in KINDS.items() if v.role == "norm"})  # fmt: skip


def chain_groups(graph: OpGraph, op_ids: Sequence[int] | None = None) -> list[tuple[int, ...]]:
    """A default grouping of ``op_ids`` (all ops if None) into host kernels, in topological order:
    an op joins the group of the op it reads when it is that op's only consumer and an epilogue
    (bias add, activation, quantize, clip, ...), or when a ``dequantize`` feeds it a root op
    (conv / matmul / pool / mean / softmax / layer_norm) and the group has no root yet."""
    ids = sorted(set(range(len(graph.ops)) if op_ids is None else (int(i) for i in op_ids)))
    chosen = set(ids)
    outs = set(graph.outputs)
    groups: list[list[int]] = []
    has_root: list[bool] = []
    for i in ids:
        op = graph.ops[i]
        last = groups[-1][-1] if groups else None
        joins = False
        if last is not None and op.inputs:
            prev = graph.ops[last]
            src = op.inputs[0]
            feeds = (len(prev.outputs) == 1 and src == prev.outputs[0] and src not in outs
                     and graph.consumers(src) == (i,) and last in chosen)  # fmt: skip
            if feeds:
                joins = op.kind in _EPILOGUE or (op.kind in _ROOTS and prev.kind == "dequantize" and not has_root[-1])
        if joins:
            groups[-1].append(i)
            has_root[-1] = has_root[-1] or op.kind in _ROOTS
        else:
            groups.append([i])
            has_root.append(op.kind in _ROOTS)
    return [tuple(g) for g in groups]
