"""The static memory plan (no tvm): one arena, an offset for every buffer from the lifetimes of the
tensors it holds, reported beside the lower bound (the peak of live bytes).

Buffers are placed one by one, each at the offset of the smallest gap where it overlaps no
already-placed buffer live at the same time (best fit), in a few orders (largest first,
chronological, longest-lived first, largest area first); the smallest arena wins.  Offsets are
aligned to 16 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

ALIGN = 16


@dataclass(frozen=True)
class Buffer:
    key: str
    nbytes: int
    first: int  # first step that writes it
    last: int  # last step that reads it


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


ORDERS = {
    "size": lambda b: (-_align(b.nbytes), b.first, b.key),  # largest first
    "first_use": lambda b: (b.first, -_align(b.nbytes), b.key),  # chronological: ping-pong along a chain
    "lifetime": lambda b: (-(b.last - b.first), -_align(b.nbytes), b.first, b.key),  # long-lived first
    "area": lambda b: (-_align(b.nbytes) * (b.last - b.first + 1), b.first, b.key),
}


def _place(order: list[Buffer]) -> tuple[dict[str, int], int]:
    placed: list[tuple[int, int, Buffer]] = []  # (offset, end, buffer)
    offsets: dict[str, int] = {}
    for b in order:
        size = _align(max(b.nbytes, 1))
        busy = sorted((o, e) for o, e, x in placed if not (x.last < b.first or b.last < x.first))
        best, best_gap, cur = None, None, 0
        for o, e in busy:
            if o - cur >= size and (best_gap is None or o - cur < best_gap):
                best, best_gap = cur, o - cur
            cur = max(cur, e)
        off = best if best is not None else cur
        offsets[b.key] = off
        placed.append((off, off + size, b))
    return offsets, max((e for _, e, _ in placed), default=0)


def plan(buffers: list[Buffer]) -> tuple[dict[str, int], int, int]:
    """(offset of every buffer, arena bytes, lower bound: the peak of live bytes).

    Best fit over the gaps for each of a few placement orders (largest first, chronological,
    longest-lived first, largest size x lifetime first); the smallest arena wins (ties: the first
    order), so the plan is deterministic and never worse than any one heuristic."""
    best = None
    for key in ORDERS.values():
        offsets, arena = _place(sorted(buffers, key=key))
        if best is None or arena < best[1]:
            best = (offsets, arena)
    offsets, arena = best if best is not None else ({}, 0)
    steps = sorted({b.first for b in buffers} | {b.last for b in buffers})
    peak = max((sum(_align(max(b.nbytes, 1)) for b in buffers if b.first <= s <= b.last) for s in steps), default=0)
    return offsets, arena, peak
