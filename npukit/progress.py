"""Progress of long steps (an import, the simulation's first compile, error measurement,
calibration): a ``tqdm.auto`` bar (a bar in a terminal, a widget in a notebook) that appears only
once a step has run for more than a second, so short steps stay silent.

``Progress(total, desc)`` counts steps of a loop; ``phase(desc)`` covers one call that cannot
report steps (a TVM compile): after the delay it shows the step's name and the time so far.

It shows only where someone can see it: when stderr is a terminal, or in a Jupyter kernel.
``NPUKIT_PROGRESS=1`` forces it on (e.g. for a log), ``NPUKIT_PROGRESS=0`` off.  No bar is shown
when tqdm is not installed.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
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

    def __init__(self, total: int, desc: str, delay: float | None = None, unit: str = "op") -> None:
        self.total, self.desc, self.delay, self.unit = total, desc, DELAY_S if delay is None else delay, unit
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
            self.bar = tqdm(total=self.total, desc=self.desc, unit=self.unit, leave=False, file=self.out or sys.stderr)
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


@contextlib.contextmanager
def phase(desc: str, delay: float | None = None):
    """Show ``desc`` and the elapsed time while the block runs, once it has run for ``delay``
    seconds (default ``DELAY_S``); nothing for a short block or where no one can see it."""
    delay = DELAY_S if delay is None else delay
    if not enabled():
        yield
        return
    try:
        from tqdm.auto import tqdm  # noqa: PLC0415
    except ImportError:
        yield
        return
    stop = threading.Event()
    out = None
    if "ipykernel" not in sys.modules:
        with contextlib.suppress(OSError):
            out = os.fdopen(os.dup(2), "w")

    def tick() -> None:
        if stop.wait(delay):
            return
        bar = tqdm(total=None, desc=desc, bar_format="{desc}: {elapsed}", leave=False, file=out or sys.stderr)
        try:
            while not stop.wait(0.5):
                bar.refresh()
        finally:
            bar.close()

    t = threading.Thread(target=tick, name="npukit-progress", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
        if out is not None:
            out.close()
