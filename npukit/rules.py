"""Per-processor support rules -> verdicts with reasons (no tvm).

Each limit of an op table in the profile is checked by one small function whose docstring is the
rule a user reads (in the manner of Vela's supported-operator constraints).  Unlike a check that
stops at the first failure, ``verdict()`` collects every failing rule, so a user sees all the
reasons a processor refuses an op: ``dla: kernel 9x9 > max 7x7; groups=8 (grouped conv) not
supported``.  The BYOC pattern checks consult the same verdicts, so what the partition does and
what the reasons say cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .graph import Op, OpGraph, dtype_bytes
from .opset import channels, kernel_hw, spatial_attr
from .rules_axis import axis_read
from .soc import OpRule, Processor, SocProfile


@dataclass(frozen=True)
class Failure:
    """One rule that refused an op: which rule, the values it compared, and the words a user reads."""

    rule: str  # "kernel_max", "dtypes", "unsupported", "user_disabled", "pinned", "pruned", ...
    values: tuple[tuple[str, Any], ...]  # (name, value) pairs the rule compared
    text: str



def _listed(xs) -> str:
    """Allowed values as a user reads them: "1, 2", "float32, int8" (not a Python list)."""
    return ", ".join("x".join(map(str, x)) if isinstance(x, (tuple, list)) else str(x) for x in xs)

def fail(rule: str, text: str, **values) -> Failure:
    return Failure(rule, tuple(sorted(values.items())), text)


@dataclass(frozen=True)
class Verdict:
    """One processor's answer for one op, as data: accepted or not, and every failing rule."""

    processor: str
    ok: bool
    failures: tuple[Failure, ...] = ()  # every failing rule, empty when ok
    fused_only: bool = False  # accepted only inside a fused kernel (a chain), never alone
    host: bool = False
    note: str = ""  # the profile's note on this op, shown with a refusal
    read: str = ""  # how a rule read an accepted op where it is not plain (the axis rule on an image)

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(f.text for f in self.failures) + ((f"({self.note})",) if self.note else ())

    @property
    def rule(self) -> str:
        """The first failing rule's id ("" when accepted)."""
        return self.failures[0].rule if self.failures else ""

    def failed(self, rule: str) -> bool:
        for f in self.failures:
            if f.rule == rule:
                return True
        return False

    @property
    def text(self) -> str:
        if self.ok:
            if self.host:
                return "runs every op (host)"
            text = "accepted, only fused into a kernel" if self.fused_only else "accepted"
            return f"{text} ({self.read})" if self.read else text
        text = "; ".join(f.text for f in self.failures)
        return f"{text} ({self.note})" if self.note and text else text or (f"({self.note})" if self.note else "")


# ---------------------------------------------------------------------------------------------
# the rules: (op, graph, the profile's op entry) -> a Failure or None


def rule_kernel_max(op: Op, g: OpGraph, r: OpRule) -> Failure | None:
    """The kernel (or pooling window) must not exceed kernel_max."""
    k = kernel_hw(op, g)
    if not k or r.kernel_max is None:
        return None
    lim = r.kernel_max[-len(k):] if len(k) <= 2 else (r.kernel_max[0],) * len(k)
    if any(a > b for a, b in zip(k, lim)):
        return fail("kernel_max", f"kernel {'x'.join(map(str, k))} > max {'x'.join(map(str, lim))}", kernel=k, max=lim)
    return None


def rule_strides(op: Op, g: OpGraph, r: OpRule) -> Failure | None:
    """Every stride must be one of the allowed strides."""
    s = spatial_attr(op, "strides")
    if s and r.strides is not None and any(x not in r.strides for x in s):
        return fail("strides", f"stride {'x'.join(map(str, s))} not in allowed {_listed(r.strides)}", strides=s, allowed=r.strides)
    return None


def rule_dilations(op: Op, g: OpGraph, r: OpRule) -> Failure | None:
    """Every dilation must be one of the allowed dilations."""
    d = spatial_attr(op, "dilation")
    if d and r.dilations is not None and any(x not in r.dilations for x in d):
        return fail("dilations", f"dilation {'x'.join(map(str, d))} not in allowed {_listed(r.dilations)}", dilation=d,
                    allowed=r.dilations)
    return None


def rule_groups(op: Op, g: OpGraph, r: OpRule) -> Failure | None:
    """Depthwise (groups = channels) and grouped (1 < groups < channels) convolutions need support."""
    if not op.kind.startswith("conv") or len(op.inputs) < 2:
        return None
    ic, _oc, groups = channels(op, g)
    if groups <= 1:
        return None
    if groups == ic and not r.depthwise:
        return fail("depthwise", f"groups={groups}, depthwise not supported", groups=groups, channels=ic)
    if groups != ic and not r.grouped:
        return fail("grouped", f"groups={groups} (grouped conv) not supported", groups=groups, channels=ic)
    return None


def rule_max_channels(op: Op, g: OpGraph, r: OpRule) -> Failure | None:
    """Input and output channel counts must not exceed max_channels."""
    if r.max_channels is None or not op.kind.startswith("conv"):
        return None
    ic, oc, _ = channels(op, g)
    if max(ic, oc) > r.max_channels:
        return fail("max_channels", f"{max(ic, oc)} channels > max {r.max_channels}", channels=max(ic, oc),
                    max=r.max_channels)
    return None


def rule_max_elements(op: Op, g: OpGraph, r: OpRule) -> Failure | None:
    """No input or output tensor may have more than max_elements elements."""
    if r.max_elements is None:
        return None
    big = max(g.tensors[t].size for t in (*op.inputs, *op.outputs))
    if big > r.max_elements:
        return fail("max_elements", f"tensor of {big:,} elements > max {r.max_elements:,}", elements=big, max=r.max_elements)
    return None


def rule_ranks(op: Op, g: OpGraph, r: OpRule) -> Failure | None:
    """The first input's rank must be one of the allowed ranks."""
    if r.ranks is None or not op.inputs:
        return None
    rank = len(g.tensors[op.inputs[0]].shape)
    if rank not in r.ranks:
        return fail("ranks", f"rank-{rank} tensor, supports ranks {_listed(r.ranks)}", rank=rank, allowed=r.ranks)
    return None


def rule_axis(op: Op, g: OpGraph, r: OpRule, proc: Processor | None = None) -> Failure | None:
    """With axis = "last", softmax / reductions / sort / topk / layer and RMS norms must work on the
    axis the processor holds innermost: of an image (a rank-4 activation a conv, pool or resize names
    the layout of) in the processor's layout (C on NHWC or tiled, W on NCHW), of any other tensor in
    the model's axis order; dims of one element take no place (``rules_axis``)."""
    return axis_read(op, g, r, proc)[0]


def rule_max_k(op: Op, g: OpGraph, r: OpRule) -> Failure | None:
    """topk's k must not exceed max_k."""
    k = op.attrs.get("k")
    if r.max_k is not None and k is not None and int(k) > r.max_k:
        return fail("max_k", f"k={k} > max {r.max_k}", k=int(k), max=r.max_k)
    return None


_PASS_WEIGHT = ("dequantize", "astype", "permute_dims", "reshape")  # what a constant weight passes through


def _constant(g: OpGraph, tid: str, depth: int = 0) -> bool:
    """Is tensor ``tid`` a constant of the model, or one dequantized, cast, transposed or reshaped?"""
    t = g.tensors[tid]
    if t.kind == "const":
        return True
    if t.kind != "act" or depth > 4:
        return False
    prod = g.ops[t.producer]
    return prod.kind in _PASS_WEIGHT and bool(prod.inputs) and _constant(g, prod.inputs[0], depth + 1)


def rule_const_weights(op: Op, g: OpGraph, r: OpRule) -> Failure | None:
    """With const_weights, a matmul's second operand must be the model's constant weights."""
    if not r.const_weights or len(op.inputs) < 2 or _constant(g, op.inputs[1]):
        return None
    return fail("const_weights", "both operands are activations (an activation x activation matmul); takes constant "
                                 "weights only")  # fmt: skip


def rule_max_boxes(op: Op, g: OpGraph, r: OpRule) -> Failure | None:
    """Non-max suppression over more than max_boxes boxes is not supported."""
    if r.max_boxes is None or not op.inputs:
        return None
    boxes = g.tensors[op.inputs[0]].shape
    n = int(boxes[-2]) if len(boxes) >= 2 else 0
    if n > r.max_boxes:
        return fail("max_boxes", f"{n} boxes > max {r.max_boxes}", boxes=n, max=r.max_boxes)
    return None


def rule_dtypes(op: Op, g: OpGraph, allowed: tuple[str, ...] | None) -> Failure | None:
    """Every input and output dtype must be one the processor (or op entry) accepts."""
    if not allowed:
        return None
    for t in (*op.inputs, *op.outputs):
        dt = g.tensors[t].dtype
        if dt not in allowed:
            return fail("dtypes", f"dtype {dt} not in {_listed(allowed)}", dtype=dt, allowed=tuple(allowed))
    return None


def rule_max_tensor_bytes(op: Op, g: OpGraph, limit: int | None) -> Failure | None:
    """No tensor the op touches may exceed the processor's max_tensor_bytes."""
    if limit is None:
        return None
    big = max(g.tensors[t].size * dtype_bytes(g.tensors[t].dtype) for t in (*op.inputs, *op.outputs))
    if big > limit:
        return fail("max_tensor_bytes", f"tensor of {int(big):,} bytes > max_tensor_bytes {limit:,}", bytes=int(big), max=limit)
    return None


MAX_KERNEL_RANK = 6  # the kernel libraries' tensor descriptor holds this many dims (NPK_MAX_RANK in npk_ref.h)


def rule_max_rank(op: Op, g: OpGraph) -> Failure | None:
    """An accelerator's kernel calls take tensors of rank 6 at most (the generated code's tensor
    descriptor, ``NPK_MAX_RANK``)."""
    rank = max((len(g.tensors[t].shape) for t in (*op.inputs, *op.outputs)), default=0)
    if rank > MAX_KERNEL_RANK:
        return fail("max_rank", f"rank-{rank} tensor: kernel calls take rank {MAX_KERNEL_RANK} at most", rank=rank,
                    max=MAX_KERNEL_RANK)  # fmt: skip
    return None


OP_RULES: tuple[Callable[[Op, OpGraph, OpRule], Failure | None], ...] = (
    rule_kernel_max, rule_strides, rule_dilations, rule_groups, rule_max_channels, rule_max_elements,
    rule_ranks, rule_axis, rule_max_k, rule_max_boxes, rule_const_weights,
)  # fmt: skip


def rule_codegen(op: Op, g: OpGraph) -> Failure | None:
    """An accelerator takes only ops npukit's kernel library has a call for (its generated code calls
    them), whatever the profile lists: else the placement, the figures and the exported code would
    disagree."""
    from .codegen.calls import missing_call  # noqa: PLC0415

    why = missing_call(g, op)
    return fail("codegen", f"code generation cannot run it here: {why}") if why else None


def rule_docs() -> list[tuple[str, str]]:
    """(rule name, the rule in words) for the reference page."""
    fns = (*OP_RULES, rule_dtypes, rule_max_tensor_bytes, rule_max_rank, rule_codegen)
    return [(f.__name__.removeprefix("rule_"), (f.__doc__ or "").strip()) for f in fns]


# ---------------------------------------------------------------------------------------------
# verdicts


def capability(op: Op, g: OpGraph, proc: Processor) -> Verdict:
    """What the profile alone says of ``op`` on ``proc`` (no user edits)."""
    if proc.host:
        return Verdict(proc.name, True, host=True)
    rule = proc.ops.get(op.kind)
    if rule is None:
        # in the profile's terms: the table a user adds the op to (keyed by its short kind, the key
        # ``canonical`` gives any spelling of it)
        key = proc.disabled_ops.get(op.kind)
        why = (f"{op.kind} is not in processors.{proc.name}.ops" if key is None else
               f"{op.kind} is disabled in the profile (processors.{proc.name}.ops.{key} = false)")  # fmt: skip
        return Verdict(proc.name, False, (fail("unsupported", why, op=op.op),))
    fails = [f for fn in OP_RULES if (f := fn(op, g, rule, proc) if fn is rule_axis else fn(op, g, rule))]
    if f := rule_dtypes(op, g, rule.dtypes or proc.dtypes):
        fails.append(f)
    if f := rule_max_tensor_bytes(op, g, proc.max_tensor_bytes):
        fails.append(f)
    if f := rule_max_rank(op, g):
        fails.append(f)
    if f := rule_codegen(op, g):
        fails.append(f)
    if fails:
        return Verdict(proc.name, False, tuple(fails), note=rule.note)
    return Verdict(proc.name, True, fused_only=rule.fused_only, read=axis_read(op, g, rule, proc)[1])


def capabilities(g: OpGraph, soc: SocProfile) -> dict[tuple[int, str], Verdict]:
    """``capability`` of every op on every processor."""
    return {(op.op_id, p.name): capability(op, g, p) for op in g.ops for p in soc.processors}


def pinned_elsewhere(op: Op, proc: str, pin: str, host: bool) -> Verdict:
    return Verdict(proc, False, (fail("pinned", f"{op.name!r} is pinned to {pin}", node=op.name, to=pin),), host=host)


def verdicts(
    g: OpGraph,
    soc: SocProfile,
    disabled: frozenset[tuple[str, str]] = frozenset(),
    enabled: frozenset[tuple[str, str]] = frozenset(),
    pins: Mapping[int, str] | None = None,
    base: Mapping[tuple[int, str], Verdict] | None = None,
) -> dict[tuple[int, str], Verdict]:
    """Every processor's verdict on every op under the user's edits.

    ``disabled`` / ``enabled`` hold (processor, op kind) pairs the user switched off / on;
    ``pins`` maps op ids to processors.  ``base`` is a cache of ``capability()`` results.
    """
    pins = pins or {}
    if base is not None and len(base) == len(g.ops) * len(soc.processors):
        return _edited(g, soc, disabled, enabled, pins, base)
    out: dict[tuple[int, str], Verdict] = {}
    for op in g.ops:
        for p in soc.processors:
            key = (op.op_id, p.name)
            cap = base[key] if base is not None and key in base else capability(op, g, p)
            out[key] = _verdict(op, g, p, cap, disabled, enabled, pins.get(op.op_id))
    return out


def _verdict(op: Op, g: OpGraph, p, cap: Verdict, disabled, enabled, pin: str | None, said: dict | None = None) -> Verdict:
    """One processor's verdict on one op under the user's edits, from its capability.  ``said``: the
    refusals of a switched-off kind made so far (one per processor and kind: they read alike)."""
    if pin is not None and pin != p.name:
        return pinned_elsewhere(op, p.name, pin, p.host)
    if p.host:
        return cap
    if (p.name, op.kind) in disabled:
        v = said.get((p.name, op.kind)) if said is not None else None
        if v is None:
            v = Verdict(p.name, False, (fail("user_disabled", f"user disabled {op.kind} on {p.name}",
                                             op=op.kind, processor=p.name),))  # fmt: skip
            if said is not None:
                said[(p.name, op.kind)] = v
        return v
    if (p.name, op.kind) in enabled and not cap.ok and cap.rule == "unsupported":
        # the user asserts support the profile lacks; what npukit's own generated code cannot run
        # stays refused, as it is for an op the profile lists (else the export fails on it)
        fails = tuple(f for f in (rule_max_rank(op, g), rule_codegen(op, g)) if f)
        return Verdict(p.name, False, fails) if fails else Verdict(p.name, True)
    return cap


def _edited(g: OpGraph, soc: SocProfile, disabled, enabled, pins: Mapping[int, str], base) -> dict[tuple[int, str], Verdict]:
    """``verdicts`` from a full capability table: a copy of it (same keys, same order), with only
    the ops an edit touches -- of a kind switched on or off, or pinned -- worked out again (an edit
    at 1,161 ops took ~1 ms for the copy, not ~2.5 ms for every op and processor)."""
    out = dict(base)
    kinds = {k for _p, k in disabled} | {k for _p, k in enabled}
    of_kind = g.ops_of_kind()
    touched = sorted(set(pins).union(*(of_kind.get(k, ()) for k in kinds)))
    said: dict = {}
    for i in touched:
        op = g.ops[i]
        pin = pins.get(i)
        for p in soc.processors:
            key = (i, p.name)
            out[key] = _verdict(op, g, p, base[key], disabled, enabled, pin, said)
    return out


def pruned(proc: str, kinds: str) -> Verdict:
    """A refusal by the partitioner: an offload of only view ops and conversions is not worth its call."""
    return Verdict(proc, False, (fail("pruned", f"pruned: a partition holding only {kinds} is not worth an offload call",
                                      kinds=kinds),))  # fmt: skip


def winner_reason(op: Op, proc: str, pattern: str, vs: Mapping[tuple[int, str], Verdict],
                  soc: SocProfile, pinned: bool, note: str = "") -> str:  # fmt: skip
    """Why ``op`` landed on ``proc``, in words: a pin; the cost policy's figures (``note``); or the
    rule that blocked each accelerator."""
    if pinned:
        return f"pinned to {proc} by the user"
    p = soc.processor(proc)
    blocked = [f"{a}: {vs[(op.op_id, a)].text}" for a in soc.accelerators
               if not vs[(op.op_id, a)].ok and not vs[(op.op_id, a)].failed("cost")]  # fmt: skip
    if p.host:
        takers = [a for a in soc.accelerators if vs[(op.op_id, a)].ok]
        limit = any(vs[(op.op_id, a)].failed("limit") for a in soc.accelerators)  # held off by a partition limit
        if note and not takers and (len(blocked) < len(soc.accelerators) or limit):
            return f"{proc}: {note}" + ("; " + "; ".join(blocked) if blocked else "")
        if not takers:
            return f"{proc}: fallback; " + "; ".join(blocked) if blocked else f"{proc}: fallback"
        why = []
        for a in takers:
            v = vs[(op.op_id, a)]
            why.append(f"{a} takes it only fused into a kernel" if v.fused_only else f"{a} accepts it but no pattern placed it")
        return f"{proc}: fallback ({'; '.join(why)})" + ("; " + "; ".join(blocked) if blocked else "")
    lead = f"{proc}: accepted as {pattern}" if pattern else f"{proc}: accepted"
    if note:  # the cost policy's figures, and why any other accelerator could not take it at all
        return f"{lead}; {note}" + ("; " + "; ".join(blocked) if blocked else "")
    order = soc.preference(op.kind)
    better = [a for a in order[: order.index(proc)] if a != proc]
    if better:
        lead += " (preferred " + ", ".join(f"{a}: {vs[(op.op_id, a)].text}" for a in better) + ")"
    return lead
