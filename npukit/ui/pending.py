"""Edits under the cost policy in two phases, so that the kernel answers at once.

Under the cost-aware placement a support toggle, a pin or a bit-width edit needs a new placement
decision: milliseconds on small models, tenths of a second on the 1,161-op transformer, seconds
at 10,000 ops.  The widget does not wait for it.  It answers at once with the placement on the
screen re-estimated under the edit when that placement still obeys it (a bit-width edit; a toggle
or a pin it already honours), else with the edit's first-fit placement (a few milliseconds), and
the status line says so: "working:
placing ops by cost (estimates on the current placement meanwhile)".  Meanwhile a ``Placing`` job computes the
cost placement and its estimates in a thread, through the pipeline's pure, cached steps.  When they
are ready the Study switches to the edit, now a cache hit, and the widget shows the real answer.

An edit made meanwhile builds on the pending one and replaces it; an answer nobody waits for is
dropped.  Any other request (export, code, build, a policy switch) first settles the pending edit,
so it acts on the state the user sees.  The Study itself stays synchronous: ``study.result`` is
always the real answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable

from .. import pipeline as pl
from ..config import Config
from ..cost.tables import runs_at
from ..study import Study

ON_SCREEN = "estimates on the current placement meanwhile"  # how a provisional view was made
FIRST_FIT = "first-fit estimates meanwhile"


class Draft(Study):
    """A view of ``study`` under ``config``: its edit methods only record the config they would
    switch to (checked as far as ``pipeline.check`` goes, without partitioning), and its result is
    the one given (the provisional one, or the one on screen for checks that need a plan)."""

    def __init__(self, study: Study, config: Config, result: pl.Result | None = None, note: str = ""):  # noqa: D107 - no Study.__init__: nothing is imported or partitioned
        self.__dict__.update(study.__dict__)
        self._listeners = []
        self._config = config
        self._result = result
        self.note = note  # how the result was made ("estimates on the current placement meanwhile")
        self.proposed: Config | None = None

    def _apply(self, cfg: Config) -> None:
        pl.check(self._model, self.soc, cfg)
        self.proposed = cfg

    def _warn_idle(self, key: str, bits: str) -> None:
        """No warning here (this view's config is not the edit's, nor its plan placed yet): the widget
        says it when the edit lands."""

    @property
    def result(self) -> pl.Result:
        return self._result if self._result is not None else super().result


def provisional(study: Study, cfg: Config, shown=None) -> tuple[pl.Result, str] | None:
    """What to show at once for an edit to ``cfg`` under the cost policy, and how the status line
    says so: the placement on screen (``shown``: a Partitioned) re-estimated under ``cfg`` when it
    still obeys ``cfg`` (a bit-width edit, a toggle or pin it already honours: nothing moves on the
    screen), else the edit's first-fit placement.  None when neither can show it: the edit is then
    made directly.  (Called only when the cost placement of ``cfg`` is not cached.)"""
    model, soc = study._model, study.soc  # noqa: SLF001
    try:
        if shown is not None and obeys(study, cfg, shown.plan):
            return pl.estimate(model, soc, cfg, shown), ON_SCREEN
        ff = dataclasses.replace(cfg, placement="first-fit")
        res = pl.evaluate(model, soc, ff)
        pl.check_placed(model, soc, ff, res.plan)
        return res, FIRST_FIT
    except Exception:  # noqa: BLE001 - whatever it is, the direct edit reports it in full
        return None


def obeys(study: Study, cfg: Config, plan) -> bool:
    """Does ``plan`` keep ``cfg``'s rules: every op on the host or on a processor that accepts it,
    every pin held, every layer's bit-width runnable where the layer is?"""
    model, soc = study._model, study.soc  # noqa: SLF001
    vs = pl.verdicts(model, soc, cfg)
    host = soc.host
    if any(p != host and not vs[(i, p)].ok for i, p in enumerate(plan.processor)):
        return False
    g = model.graph
    if any(plan.processor[i] != p for i, p in pl.pins_of(g, cfg).items()):
        return False
    procs = {p.name: p for p in soc.processors}
    caps = pl.tables(model).model_widths
    return all(runs_at(caps[i], b, procs[plan.processor[i]])
               for i, b in pl.layer_bits_of(g, cfg).items())  # fmt: skip


class Placing:
    """The cost placement of ``cfg`` and its estimates, computed in a daemon thread; ``done(job)``
    is called when they are ready (or failed: ``job.error``), on the kernel's event loop when the
    job was started from it, else from the thread."""

    def __init__(self, study: Study, cfg: Config, done: Callable[[Placing], None], *, seq=None, text: str = "",
                 before: dict | None = None, t0: float | None = None, request: dict | None = None):  # fmt: skip
        self.cfg, self.seq, self.text, self.before = cfg, seq, text, before
        self.request = request  # the edit request it answers
        self.t0 = time.perf_counter() if t0 is None else t0  # when the edit was asked for
        self.error: BaseException | None = None
        self.late = ""  # the error of an edit refused while this placement ran (said when it lands)
        self.computed = threading.Event()  # set when the placement is computed, before it is delivered
        self._model, self._soc, self._done = study._model, study.soc, done  # noqa: SLF001
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self.thread = threading.Thread(target=self._run, name="npukit-widget-placing", daemon=True)

    @property
    def started(self) -> bool:
        return self.thread.ident is not None

    def start(self) -> Placing:
        self.thread.start()
        return self

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the placement and its delivery (scripts and tests)."""
        self.thread.join(timeout)

    def _run(self) -> None:
        try:
            pl.evaluate(self._model, self._soc, self.cfg)  # the partition, then the estimates: cached
        except Exception as e:  # noqa: BLE001 - reported by the widget, never lost in a thread
            self.error = e
        self.computed.set()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._done, self)
                return
            except RuntimeError:  # the loop closed meanwhile
                pass
        self._done(self)


class Warmer:
    """The first bit-width edit of a processor, made ready while the kernel is idle.

    A width no edit has used yet needs every kernel of the placement on screen costed at it: on
    the 1,161-op transformer the first click of the host's width took ~50 ms of costing before its
    first answer, the same click again ~1 ms.  Once the view is shown (``start``, from the kernel's
    event loop, after ``DELAY_S``), a daemon thread estimates the placement on screen at each width
    each processor can run, through the pipeline's cached steps, so that the first such click finds
    its kernels costed.  Any request stops it (``stop``): it never competes with an edit for the
    interpreter beyond the estimate it is in.  Without an event loop (scripts, tests) it does not
    start.  What it computes is what an edit computes, kept in the same bounded caches."""

    DELAY_S = 1.0

    def __init__(self, study: Study, shown):
        self._study, self._shown = study, shown
        self.stopped = threading.Event()
        self.done = threading.Event()
        self.warmed: list[tuple[str, str]] = []  # (processor, width) estimated
        self.thread = threading.Thread(target=self._run, name="npukit-widget-warm", daemon=True)

    def start_later(self) -> bool:
        """Start after ``DELAY_S`` on the running event loop; False (not started) without one."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        loop.call_later(self.DELAY_S, lambda: self.stopped.is_set() or self.thread.start())
        return True

    def stop(self) -> None:
        self.stopped.set()

    def widths(self) -> list[tuple[str, str]]:
        """(processor, width) pairs an edit of the processor's width could ask for, but the current."""
        cfg = self._study.config
        now = dict(cfg.bits)
        return [(p.name, b) for p in self._study.soc.processors for b in p.bits if b != (now.get(p.name) or p.default_bits)]

    def _run(self) -> None:
        try:
            model, soc = self._study._model, self._study.soc  # noqa: SLF001
            cfg = self._study.config
            part = self._shown.result.partitioned
            for p, b in self.widths():
                if self.stopped.is_set():
                    return
                bits = tuple(sorted({**dict(cfg.bits), p: b}.items()))
                try:
                    pl.estimate(model, soc, dataclasses.replace(cfg, bits=bits), part)
                    self.warmed.append((p, b))
                except Exception:  # noqa: BLE001 - a width this placement cannot run: the edit says so itself
                    continue
                time.sleep(0)  # (let a request in between two estimates)
        finally:
            self.done.set()
