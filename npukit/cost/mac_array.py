"""The MAC array's side of an op's cost: how well the op's geometry fills the array (utilisation,
with the factors it came from) and which ``efficiency`` key its kernel class reads."""

from __future__ import annotations

import math
from typing import NamedTuple

from ..soc import Processor


def fill(n: int, p: int) -> float:
    """Fraction of ``p`` parallel lanes ``n`` items keep busy: n / (ceil(n / p) * p)."""
    if p <= 1 or n <= 0:
        return 1.0
    return n / (math.ceil(n / p) * p)


class Util(NamedTuple):
    """MAC-array utilisation of one op on one processor, with the factors it came from."""

    value: float
    # (label, n, lanes) per factor; ``alt`` = the part-kernel (kernel_taps) alternative, when it applies
    factors: tuple[tuple[str, int, int], ...]
    alt: tuple[tuple[str, int, int], ...] = ()
    alt_used: bool = False


NO_GEOMETRY = Util(1.0, ())


def kernel_class_of(kind: str, attrs, geo: tuple) -> str:
    """The op's finest ``efficiency`` key: ``KIND.depthwise`` (a conv with groups > 1 and one input
    channel per group), ``KIND.pointwise`` (a conv with a 1-tap kernel, groups 1), ``matmul.gemv``
    (a matmul with one output row: M x batch = 1), else the op kind."""
    if not geo:
        return kind
    if geo[0] == "conv":
        if "transpose" in kind:
            return kind
        groups = int(attrs.get("groups", 1) or 1)
        if groups > 1 and geo[1] == 1:
            return kind + ".depthwise"
        if groups == 1 and geo[4] == 1:
            return kind + ".pointwise"
        return kind
    return kind + ".gemv" if geo[3] == 1 else kind



def util_mac(geo: tuple, p: Processor) -> Util:
    """MAC-array utilisation of an op of geometry ``geo`` on ``p`` (see the cost model's statement)."""
    arr = p.mac_array
    ci, co, px, kt = arr["channels_in"], arr["channels_out"], arr["pixels"], arr.get("kernel_taps", 1)
    if ci == co == px == 1:
        return NO_GEOMETRY
    if geo and geo[0] == "conv":
        _, icg, oc, pixels, taps = geo
        u_in = fill(icg, ci)
        rest = (("OC", oc, co), ("pixels", pixels, px))
        alt: tuple = ()
        used = False
        if kt > 1:
            alt = (("IC/groups", icg, ci // kt), ("KH*KW", taps, kt))
            u_part = fill(icg, ci // kt) * fill(taps, kt)
            if u_part > u_in:
                u_in = u_part
                used = True
        u = u_in * fill(oc, co) * fill(pixels, px)
        return Util(u, (("IC/groups", icg, ci), *rest), alt, used)
    if geo:
        _, k, n, m = geo
        u = fill(k, ci) * fill(n, co) * fill(m, px)
        return Util(u, (("K", k, ci), ("N", n, co), ("M", m, px)))
    return NO_GEOMETRY
