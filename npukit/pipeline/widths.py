"""The width every op runs at (``op_bits``) and why it is not its setting (``width_notes``).

An op is set to a width by its layer's edit, else its processor's setting, else the processor's
default; it runs at that width but where the model, the generated code and the simulation hold its
values narrower or not at all (the cost model, the error figures and the code read the same widths):

* a float16 model: an op whose values the model holds as float16 runs at fp16 under an fp32 setting,
  on a processor that runs fp16 (``cost.tables.narrowed``; one without fp16 arithmetic computes in
  fp32, its tensors still held as float16: ``cost.tables.model_width``);
* inside a kernel: a member whose values never leave it and that owns no quantized weight runs at the
  kernel's anchor's width (``cost.members.inner_width``): nothing rounds, stores or converts its
  values, so a width of its own -- a layer bit-width on a conv's bias add -- has no effect.
"""

from __future__ import annotations

from ..config import Config
from ..cost.grouping import kernels, per_plan
from ..cost.members import inner_members
from ..cost.tables import narrowed
from ..plan import Plan
from ..soc import SocProfile
from .model import Model, by_specificity, layer_bits_of, resolve, shown, tables


def settings(soc: SocProfile, cfg: Config, plan: Plan, g) -> tuple[str, ...]:
    """The width every op is set to: layer override, else its processor's setting, else the
    processor's default."""
    pb = dict(cfg.bits)
    of = {p.name: pb.get(p.name) or p.default_bits for p in soc.processors}
    bits = tuple(map(of.__getitem__, plan.processor))
    if cfg.layer_bits:
        lb = layer_bits_of(g, cfg)
        bits = tuple(lb.get(i) or b for i, b in enumerate(bits))
    return bits


def inner(model: Model, plan: Plan) -> tuple[tuple[int, int], ...]:
    """(member, anchor) of every kernel member of ``plan`` that runs at its anchor's width."""
    t = tables(model)
    return per_plan(t, ("inner", id(plan)), plan, lambda: inner_members(t, kernels(plan, t.g, t)))


def op_bits(model: Model, soc: SocProfile, cfg: Config, plan: Plan) -> tuple[str, ...]:
    """The width every op runs at (see the module docstring)."""
    t = tables(model)
    bits = settings(soc, cfg, plan, model.graph)
    mw = t.model_widths
    if "fp16" in mw:
        procs = {p.name: p for p in soc.processors}
        bits = tuple(narrowed(c, b, procs[p]) for c, b, p in zip(mw, bits, plan.processor))
    if not cfg.layer_bits and "fp16" not in mw:  # each op at its processor's width: a kernel's members at
        return bits  # their anchor's already (one kernel, one processor), so its inner members move nothing
    moved = inner(model, plan)
    if moved and any(bits[i] != bits[a] for i, a in moved):
        out = list(bits)
        for i, a in moved:
            out[i] = bits[a]
        bits = tuple(out)
    return bits


def width_notes(model: Model, soc: SocProfile, cfg: Config, plan: Plan, bits) -> dict[int, str]:
    """Op id -> why it runs at another width than it is set to ("fp16, not the fp32 of arm's
    default_bits: the model holds its values as float16"); ops that run at their setting have none."""
    g = model.graph
    set_to = settings(soc, cfg, plan, g)
    layered = layer_bits_of(g, cfg)
    anchors = dict(inner(model, plan))
    mw = tables(model).model_widths
    procs = {q.name: q for q in soc.processors}
    out = {}
    for i, (b, s) in enumerate(zip(bits, set_to)):
        p = plan.processor[i]
        if b == s:
            if b == "fp32" and mw[i] == "fp16" and "fp16" not in procs[p].macs_per_cycle:
                out[i] = (f"fp32 arithmetic: {p} runs no fp16 (processors.{p}.macs_per_cycle), so it computes in "
                          "fp32; it holds the model's float16 tensors as float16")  # fmt: skip
            continue
        if i in layered:
            node = next(n for n, _w in reversed(by_specificity(g, cfg.layer_bits)) if i in resolve(g, n))
            src = f"layer {shown(g, node)!r}"
        else:
            src = f"{p}'s setting" if dict(cfg.bits).get(p) else f"{p}'s default_bits"
        a = anchors.get(i)
        if a is not None and narrowed(mw[i], s, procs[p]) != b:
            aop = g.ops[a]
            why = (f"its values never leave the kernel of {aop.name!r} ({aop.kind}), where nothing rounds, stores "
                   f"or converts them, so it runs at that kernel's width")  # fmt: skip
        else:
            why = "the model holds its values as float16"
        out[i] = f"{b}, not the {s} of {src}: {why}"
    return out
