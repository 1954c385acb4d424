"""Progress of a long import: a ``tqdm.auto`` bar (a bar in a terminal, a widget in a notebook) that
appears only once a phase has run for more than a second, so short imports stay silent.

It shows only where someone can see it: when stderr is a terminal, or in a Jupyter kernel.
``NPUKIT_PROGRESS=1`` forces it on (e.g. for a log), ``NPUKIT_PROGRESS=0`` off.  No bar is shown
when tqdm is not installed.
"""

from __future__ import annotations

import os
import sys
import time

DELAY_S = 1.0


def enabled() -> bool:
    force = os.environ.get("NPUKIT_PROGRESS", "").strip().lower()
    if force in ("1", "true", "yes", "on"):
        return True
    if force in ("0", "false", "no", "off"):
        return False
    if "ipykernel" in sys.modules:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """``p(k)`` reports step ``k`` of ``total``; a bar appears after ``DELAY_S`` seconds."""

    def __init__(self, total: int, desc: str, delay: float | None = None) -> None:
        self.total, self.desc, self.delay = total, desc, DELAY_S if delay is None else delay
        self.start = time.monotonic()
        self.on = total > 0 and enabled()
        self.bar = None
        self.done = 0
        self.out = None
        if self.on and "ipykernel" not in sys.modules:
            try:  # a handle on the terminal made now: the frontends run with fd 2 silenced
                self.out = os.fdopen(os.dup(2), "w")
            except OSError:
                self.on = False

    def __call__(self, k: int) -> None:
        if not self.on:
            return
        if self.bar is None:
            if time.monotonic() - self.start < self.delay:
                return
            try:
                from tqdm.auto import tqdm  # noqa: PLC0415
            except ImportError:
                self.on = False
                return
            self.bar = tqdm(total=self.total, desc=self.desc, unit="op", leave=False, file=self.out or sys.stderr)
        step = min(k + 1, self.total) - self.done
        if step > 0:
            self.bar.update(step)
            self.done += step

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.out is not None:
            self.out.close()
            self.out = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
