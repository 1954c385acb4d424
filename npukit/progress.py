"""Progress of long steps (an import, the simulation's first compile, error measurement,
calibration): a ``tqdm.auto`` bar (a bar in a terminal, a widget in a notebook) that appears only
once a step has run for more than a second, so short steps stay silent.

``Progress(total, desc)`` counts steps of a loop; ``phase(desc)`` covers one call that cannot
report steps (a TVM compile): after the delay it shows the step's name and the time so far.

It shows only where someone can see it: when stderr is a terminal, or in a Jupyter kernel.
``NPUKIT_PROGRESS=1`` forces it on (e.g. for a log), ``NPUKIT_PROGRESS=0`` off.  No bar is shown
when tqdm is not installed.

``listen(fn)`` lets an application see the same steps as lines of text: while its block runs
(in this context: a contextvar), once the outermost step has run for more than ``DELAY_S`` the
innermost step calls ``fn("measuring error: 120/450 samples")`` as it advances, at most every
``EVERY_S`` seconds; when it ends, the step around it reports again, and ``fn(None)`` says the
last reported step ended.  The notebook widget listens while it handles a
request and shows the line in its status area.  ``step(desc)`` is a ``phase`` for listeners only
(no bar): the widget names the request it is working on with it.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
import time
from collections.abc import Callable

DELAY_S = 1.0
EVERY_S = 0.25


class _Step:
    """One running step as a listener sees it."""

    def __init__(self, desc: str, total: int | None = None, unit: str = "op") -> None:
        self.desc = desc.removeprefix("npukit: ")
        self.total, self.unit, self.done = total, unit, 0
        self.start = time.monotonic()

    def line(self) -> str:
        if self.total is None:
            return f"{self.desc}\u2026 {time.monotonic() - self.start:.0f} s"
        return f"{self.desc}: {self.done}/{self.total} {self.unit}{'' if self.total == 1 else 's'}"


class _Hub:
    """The listener of one context: the running steps (innermost last) and when it last reported."""

    def __init__(self, fn: Callable[[str | None], None], delay: float | None, every: float | None) -> None:
        self.fn, self.delay, self.every = fn, delay, EVERY_S if every is None else every
        self.steps: list[_Step] = []
        self.last = -1e9
        self.shown: _Step | None = None
        self.said: str | None = None
        self.lock = threading.Lock()

    def begin(self, step: _Step) -> None:
        with self.lock:
            self.steps.append(step)

    def _due(self, now: float) -> bool:
        """Long enough to report: the outermost step has run for the delay (so a request made of
        several short steps still reports once it is long as a whole)."""
        return bool(self.steps) and now - self.steps[0].start >= (DELAY_S if self.delay is None else self.delay)

    def end(self, step: _Step) -> None:
        with self.lock:
            if step in self.steps:
                self.steps.remove(step)
            if self.shown is not step:
                return
            now = time.monotonic()
            if self._due(now):  # back to the step around it
                self.shown, self.last, line = self.steps[-1], now, self.steps[-1].line()
            else:
                self.shown, line = None, None
            self.said = line
        self._call(line)

    def tick(self, step: _Step) -> None:
        now = time.monotonic()
        with self.lock:
            if not self.steps or self.steps[-1] is not step or not self._due(now):
                return
            if self.shown is step and now - self.last < self.every:
                return
            line = step.line()
            if self.shown is step and line == self.said:  # a phase's clock ticks twice a second
                return
            self.last, self.shown, self.said = now, step, line
        self._call(line)

    def _call(self, line: str | None) -> None:
        try:
            self.fn(line)
        except Exception:  # noqa: BLE001, S110 - a listener's failure must not stop the step it watches
            pass


_HUB: contextvars.ContextVar[_Hub | None] = contextvars.ContextVar("npukit_progress_listener", default=None)


@contextlib.contextmanager
def listen(fn: Callable[[str | None], None], delay: float | None = None, every: float | None = None):
    """Report the long steps run inside the block (and in threads they start) to ``fn``: a line of
    text for the innermost step once it has run ``delay`` seconds (default ``DELAY_S``), at most
    every ``every`` seconds (default ``EVERY_S``); ``None`` when a reported step ends."""
    token = _HUB.set(_Hub(fn, delay, every))
    try:
        yield
    finally:
        _HUB.reset(token)


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
        self.hub = _HUB.get() if total > 0 else None
        self.step = _Step(desc, total, unit)
        if self.hub is not None:
            self.hub.begin(self.step)
        self.bar = None
        self.done = 0
        self.out = None
        if self.on and "ipykernel" not in sys.modules:
            try:  # a handle on the terminal made now: the frontends run with fd 2 silenced
                self.out = os.fdopen(os.dup(2), "w")
            except OSError:
                self.on = False

    def __call__(self, k: int) -> None:
        if self.hub is not None:
            self.step.done = min(k + 1, self.total)
            self.hub.tick(self.step)
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
        if self.hub is not None:
            self.hub.end(self.step)
            self.hub = None
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
def phase(desc: str, delay: float | None = None, bar: bool = True):
    """Show ``desc`` and the elapsed time while the block runs, once it has run for ``delay``
    seconds (default ``DELAY_S``); nothing for a short block or where no one can see it.  A
    listener (``listen``) sees it too; ``bar=False`` shows it to listeners only."""
    delay = DELAY_S if delay is None else delay
    hub = _HUB.get()
    tqdm = None
    if bar and enabled():
        try:
            from tqdm.auto import tqdm  # noqa: PLC0415
        except ImportError:
            tqdm = None
    if tqdm is None and hub is None:
        yield
        return
    stop = threading.Event()
    step = _Step(desc)
    if hub is not None:
        hub.begin(step)
    out = None
    if tqdm is not None and "ipykernel" not in sys.modules:
        with contextlib.suppress(OSError):
            out = os.fdopen(os.dup(2), "w")

    def tick() -> None:
        waits = [delay] if tqdm is not None else []
        if hub is not None:
            waits.append(DELAY_S if hub.delay is None else hub.delay)
        if stop.wait(min(waits)):
            return
        shown = None
        try:
            while True:
                if tqdm is not None and shown is None and time.monotonic() - step.start >= delay:
                    shown = tqdm(
                        total=None, desc=desc, bar_format="{desc}: {elapsed}", leave=False, file=out or sys.stderr
                    )
                elif shown is not None:
                    shown.refresh()
                if hub is not None:
                    hub.tick(step)
                if stop.wait(0.25):
                    break
        finally:
            if shown is not None:
                shown.close()

    t = threading.Thread(target=tick, name="npukit-progress", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
        if hub is not None:
            hub.end(step)
        if out is not None:
            out.close()


def step(desc: str, delay: float | None = None):
    """A ``phase`` that only listeners see (no bar): what an application is working on."""
    return phase(desc, delay, bar=False)
