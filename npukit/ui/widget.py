"""StudyWidget: the notebook app for one Study (anywidget; the front end is widgets/src, bundled
into static/widget.js).

The widget holds no logic.  It shows ``viewmodel`` data in synced traits and turns the front end's
requests (custom messages ``{"type": ..., "seq": n, ...}``) into calls of the Study's edit methods.
Every request is answered by exactly one state update (``hold_sync``) carrying the traits that
changed plus ``status`` (which request it answers, ok/error, the message).  Edits made on the Study
elsewhere (another cell) refresh the widget the same way.
"""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
import weakref
from collections import OrderedDict
from pathlib import Path

import anywidget
import traitlets as t

from .. import pipeline as pl
from .. import progress
from ..errors import NpukitError
from . import errorview as ev
from . import requests as rq
from . import viewmodel as vm
from .building import BuildJob, build_status
from .codeview import CodeState, code_key
from .pending import ON_SCREEN, Draft, Placing, Warmer, provisional

_STATIC = Path(__file__).parent / "static"

class StudyWidget(anywidget.AnyWidget):
    """``StudyWidget(study)``: graph, controls, cost table, timeline, error panel, generated code
    (with build and run) and exports."""

    _esm = _STATIC / "widget.js"
    _css = _STATIC / "widget.css"

    graph = t.Dict().tag(sync=True)  # the model and the profile (sent once)
    placement = t.Dict().tag(sync=True)  # processors, partitions, reasons (support / pin edits)
    values = t.Dict().tag(sync=True)  # figures, boundaries, totals, timeline (every edit)
    controls = t.Dict().tag(sync=True)  # support matrix, pins, bit-widths
    errors = t.Dict().tag(sync=True)  # the numeric-error panel
    status = t.Dict().tag(sync=True)  # {rev, seq, acks, level, text, ms, code_key}: the answer to the last request
    code = t.Dict().tag(sync=True)  # the Code tab: file tree, one file, call lines, diff (only when asked)
    build = t.Dict().tag(sync=True)  # the last build and run: {state: idle|running|ok|differs|failed|error, ...}
    options = t.Dict().tag(sync=True)  # view options: collapse threshold, default export paths

    def __init__(self, study, **kwargs):
        self._study = study
        self._pcache: OrderedDict[str, dict] = OrderedDict()
        self._vcache: OrderedDict[str, dict] = OrderedDict()
        self._rev = 0
        self._received: dict[str, int] = {}  # per view of the widget, the last request it sent
        self._editing = False
        self._error_wanted = False
        self._error_auto = False
        self._code = CodeState()
        self.build_job: BuildJob | None = None
        self.pending: Placing | None = None  # an edit whose cost placement is being computed
        self._shown = study  # what the view shows: the Study, or a Draft while a placement is pending
        self._config = study.config  # the Study's config when the view was last refreshed
        self._lock = threading.RLock()
        t0 = time.perf_counter()
        state = {
            "graph": vm.graph_model(study, pack=True),
            "placement": self._placement(),
            "values": self._values(),
            "controls": vm.controls_model(study),
            "errors": ev.error_model(study, measure=False),
            "status": {"rev": 0, "seq": None, "acks": {}, "level": "info", "text": "", "ms": 0.0,
                       "code_key": code_key(study)},
            "code": {},
            "build": {"state": "idle"},
            "options": {
                "expand_max_ops": 160,
                "export_paths": {
                    "model_explorer": "npukit_out/model_explorer",
                    "annotated_onnx": "npukit_out/annotated.onnx",
                },
            },  # fmt: skip
        }
        self.build_ms = (time.perf_counter() - t0) * 1e3
        state.update(kwargs)
        super().__init__(**state)
        self.on_msg(self._on_msg)
        self._listen()
        self.warmer = Warmer(study, self._shown)  # the first width edits, costed while the kernel is idle
        self.warmer.start_later()

    # ------------------------------------------------------------------------------------------
    # view data (cached by what they depend on)

    @property
    def study(self):
        return self._study

    def _placement(self, study=None) -> dict:
        study = self._study if study is None else study
        if study is not self._study and study.note == ON_SCREEN:
            return self.placement  # a provisional view on the placement on screen: it stays as drawn
        key = vm.placement_key(study) + (f" ({study.note})" if study is not self._study else "")
        hit = self._pcache.get(key)
        if hit is None:
            hit = self._pcache[key] = {**vm.placement_model(study, pack=True), "key": key}
            if study is not self._study:  # a provisional plan: its limits are not the edit's
                hit["limits"] = []
            while len(self._pcache) > 16:
                self._pcache.popitem(last=False)
        else:
            self._pcache.move_to_end(key)
        return hit

    def _values(self, study=None) -> dict:
        study = self._study if study is None else study
        if study is not self._study and study.note == ON_SCREEN:
            return vm.values_model(study, pack=True)  # on the placement on screen: not a function of the config
        key = study.config.to_json() + (f" ({study.note})" if study is not self._study else "")
        hit = self._vcache.get(key)
        if hit is None:
            hit = self._vcache[key] = vm.values_model(study, pack=True)
            while len(self._vcache) > 16:
                self._vcache.popitem(last=False)
        else:
            self._vcache.move_to_end(key)
        return hit

    def _refresh(self, seq, level: str | None, text: str | None, t0: float, before: dict | None = None,
                 shown=None, answers: dict | None = None) -> None:  # fmt: skip
        """Push the Study's current state: one comm message for everything that changed.  A level of
        None keeps the last message (a request that only fetched data, like the code).  An answer
        (``seq`` not None) answers every request received so far (a pending edit it built on
        included): ``acks`` says, per view of the widget, the last one, which is how each view
        knows its own requests answered (each numbers them from 1).  ``shown``: a
        provisional view of the Study to show instead (``pending.Draft``).  ``answers``: the request
        made, for what the Python API would warn about it (``_note``)."""
        self._rev += 1
        ms = round((time.perf_counter() - t0) * 1e3, 1)
        if level is None:  # (the time shown beside that message is its request's, not this one's)
            level, text, ms = self.status.get("level", "info"), self.status.get("text", ""), self.status.get("ms", 0.0)
        shown = self._study if shown is None else shown
        with self.hold_sync():
            try:
                self.placement = self._placement(shown)
                self._shown = shown
                self._config = self._study.config
                self.values = self._values(shown)
                self.controls = vm.controls_model(shown)
                self.errors = self._errors()
                if level == "ok" and text.endswith("\u2192"):
                    text = f"{text} {rq.change(before, self.values.get('totals'))}"
                note = self._note(answers) if level == "ok" else ""
                if note:
                    text = f"{text}; {note}"
            except Exception as e:  # noqa: BLE001 - a failure to render must not break the widget
                level, text = "error", f"{text}; could not refresh the view: {type(e).__name__}: {e}".lstrip("; ")
            acks = dict(self._received) if seq is not None else self.status.get("acks", {})
            self.status = {"rev": self._rev, "seq": seq, "acks": acks, "level": level, "text": text,
                           "ms": ms, "code_key": code_key(self._study)}  # fmt: skip

    def _note(self, m: dict | None) -> str:
        """What ``study.set_bits`` warns about a layer width the Study now has, in words for the status
        line: that it has no effect (the op runs inside a kernel, at the kernel's width)."""
        if not m or m.get("type") != "layer_bits" or not m.get("bits"):
            return ""
        try:
            s = self._study
            return s._idle_note(s._node_key(rq.node_ref(m["node"])), str(m["bits"]))  # noqa: SLF001
        except Exception:  # noqa: BLE001 - a note only: the edit's own answer stands
            return ""

    def _errors(self) -> dict:
        if self._error_wanted and self._error_auto:
            return ev.error_model(self._study, measure=True)
        if self.errors.get("state") == "ok":  # measured for this config and data, or for others
            why = ev.stale_text(self.errors, self._study)
            if self.errors.get("stale_text", "") != why:
                return {**self.errors, "stale": bool(why), "stale_text": why}
        return self.errors

    # ------------------------------------------------------------------------------------------
    # edits from the front end

    def _on_msg(self, _widget, content, _buffers) -> None:
        if not isinstance(content, dict):
            return
        self.warmer.stop()  # (a request: the view is in use)
        with self._lock:  # (a placement finished in a thread waits for the request being answered)
            self._answer(rq.Message(content))

    def _answer(self, content: dict) -> None:
        seq = content.get("seq")
        view = content.get("view")
        if isinstance(view, str) and isinstance(seq, int) and not isinstance(seq, bool):
            self._received[view] = max(seq, self._received.get(view, 0))
        t0 = time.perf_counter()
        # the figures the status line compares with: the last ones it reported as settled (while a
        # placement runs, the screen holds its provisional estimates, and that edit's own report
        # is replaced by this one's)
        job = self.pending
        before = job.before if job is not None and job.before is not None else self.values.get("totals")
        shown = None
        # a long request reports its steps as they run ("working: measuring error: 120/450
        # samples"): custom messages, since the traits are held until the request ends
        try:
            with self.hold_sync(), progress.listen(lambda line: self._working(seq, line, view)):
                with progress.step(self._step_name(content)):  # whatever the request changes leaves in one message
                    self._editing = True
                    try:
                        shown = self._on_pending(content, seq, t0, before)
                        if isinstance(shown, tuple):  # made at once
                            (level, text), shown = shown, None
                        elif shown is None:
                            self._finish_pending()
                            level, text = self._dispatch(content)
                    except NpukitError as e:
                        level, text = "error", str(e)
                    except Exception as e:  # noqa: BLE001 - shown in the status line, never in the Jupyter log
                        level, text = "error", f"unexpected {type(e).__name__}: {e}"
                    finally:
                        self._editing = False
                    if shown is not None:  # estimates now (no request answered: the front end stays
                        # "working"); the edit's cost placement when it is ready
                        self._refresh(None, "info", f"placing ops by cost ({shown.note})\u2026", t0, shown=shown)
                    elif self.pending is not None:  # a bad edit while a placement runs: say so, keep
                        # the view and the "working"; the placement's answer will answer this request too
                        self.pending.seq = seq
                        if level == "error":  # (said again when the placement lands: it answers this request)
                            self.pending.late = text
                        self._refresh(None, level, text, t0, shown=self._shown)
                    else:
                        self._refresh(seq, level, text, t0, before, answers=content)
        finally:
            job = self.pending
            if job is not None and not job.started:
                self._start_later(job)

    START_DELAY_S = 0.05

    def _start_later(self, job: Placing) -> None:
        """Start a placement once the first answer is on its way: on the kernel's event loop, after
        ``START_DELAY_S`` (the kernel's I/O thread sends the answer; a placement started at once
        would compete with it for the interpreter and delay it); without a loop, at once."""

        def go():
            with self._lock:
                if job is self.pending and not job.started:
                    job.start()

        try:
            asyncio.get_running_loop().call_later(self.START_DELAY_S, go)
        except RuntimeError:  # no loop (scripts, tests)
            go()

    # ------------------------------------------------------------------------------------------
    # edits under the cost policy: estimates at once, the cost placement from a thread (see
    # npukit.ui.pending)

    def _on_pending(self, content: dict, seq, t0: float, before: dict | None):
        """A request that may go two ways while the cost policy places ops: the Draft to show now
        (a placement started), or (level, text): made at once (its placement is cached, or it
        switches the policy away from cost: a pending placement it builds on is never waited
        for), or None: answer it the ordinary way (a pending edit is settled first)."""
        kind = content.get("type")
        base = self.pending.cfg if self.pending is not None else self._study.config
        if not ((kind in rq.TWO_PHASE and base.placement == "cost") or (kind == "placement" and self.pending)):
            return None
        # edits build on the pending config; checks that need a plan use the one on screen
        draft = Draft(self._study, base, self._shown.result)
        level, text = self._dispatch(content, draft)
        cfg = draft.proposed
        if cfg is None or level != "ok" or (kind == "placement" and cfg.placement == "cost"):
            return None
        model, soc = self._study._model, self._study.soc  # noqa: SLF001
        if cfg.placement != "cost" or pl.partition_cached(model, soc, cfg):
            self._study._apply(cfg)  # noqa: SLF001 - the checks of a direct edit (a cache hit, or first-fit)
            self.pending = None  # (only now: had the edit failed, the pending one would still stand)
            return level, text
        got = provisional(self._study, cfg, self._shown.result.partitioned)
        if got is None:
            return None
        res, how = got
        self.pending = Placing(self._study, cfg, self._placed, seq=seq, text=text, before=before, t0=t0,
                               request=content)  # fmt: skip
        return Draft(self._study, cfg, res, note=how)

    def _placed(self, job: Placing) -> None:
        """The cost placement of a pending edit is ready: switch the Study to it and show it (unless
        another edit replaced it, or the widget closed)."""
        with self._lock:
            if job is not self.pending or self.comm is None:
                return
            self.pending = None
            level, text = self._switch(job)
            self._refresh(job.seq, level, text, job.t0, job.before, answers=job.request)
            if job.late:  # an edit refused while this one was placed: its error is the answer's news
                self.status = {**self.status, "level": "error",
                               "text": f"{job.late} (the edit before it stands: {self.status['text']})"}

    def _switch(self, job: Placing) -> tuple[str, str]:
        was, self._editing = self._editing, True
        try:
            if job.error is not None:
                raise job.error
            self._study._apply(job.cfg)  # noqa: SLF001 - a cache hit: the same checks as a direct edit
            return "ok", job.text
        except NpukitError as e:
            return "error", str(e)
        except Exception as e:  # noqa: BLE001
            return "error", f"unexpected {type(e).__name__}: {e}"
        finally:
            self._editing = was

    def _finish_pending(self) -> None:
        """Settle a pending edit now (before a request that reads or changes the Study): wait for its
        thread (never compute the same placement twice), then switch to it."""
        job, self.pending = self.pending, None
        if job is not None:
            if job.started:
                job.computed.wait()  # (not the thread: it may be waiting to deliver, for this lock)
            level, text = self._switch(job)
            if level == "error":
                raise NpukitError(f"the pending edit failed: {text}")

    def _working(self, seq, line: str | None, view=None) -> None:
        """One interim status line of a long request (``None``: the step it named ended)."""
        if self.comm is not None:
            self.send({"type": "progress", "seq": seq, "view": view, "text": line})

    def _step_name(self, m: dict) -> str:
        return rq.step_name(m, self._study.config.placement)

    def _dispatch(self, m: dict, s=None) -> tuple[str, str]:
        s = self._study if s is None else s
        with warnings.catch_warnings():  # (said in the status line instead: _note)
            warnings.filterwarnings("ignore", message=r"npukit: layer .* has no effect")
            said = rq.apply_edit(s, m)
        if said is not None:
            return said
        kind = m.get("type")
        if kind == "measure_error":
            self._error_wanted = True
            if "auto" in m:
                self._error_auto = bool(m["auto"])
            self.errors = ev.error_model(s, measure=self._error_wanted)
            st = self.errors.get("state")
            return ("ok", "error measured") if st == "ok" else ("info", self.errors.get("text", ""))
        if kind == "auto_error":
            self._error_auto = bool(m.get("on"))
            if self._error_auto:  # (measured now, then after every edit: it needs no press of "measure error")
                self._error_wanted = True
            return "info", f"measure error after every edit: {'on' if self._error_auto else 'off'}"
        if kind == "export":
            return rq.export(s, str(m.get("what")), str(m.get("path") or "").strip())
        if kind == "code":
            follow = m.get("follow")
            follow = int(follow) if isinstance(follow, (int, float)) and not isinstance(follow, bool) else None
            path = m.get("path")
            self.code = self._code.view(s, path=str(path) if path else None, follow=follow)
            return None, None
        if kind == "build":
            return self._start_build(bool(m.get("target")), int(m.get("samples") or 16))
        if kind == "refresh":
            return "info", ""
        raise NpukitError(f"the widget sent an unknown request {kind!r}")

    # ------------------------------------------------------------------------------------------
    # build and run (in a thread; the answer comes back through the build and status traits)

    def _start_build(self, target: bool, samples: int) -> tuple[str, str]:
        if self.build_job is not None and self.build_job.running:
            return "info", "a build is already running; its result will show in the Code tab"
        where = "the host and the profile's target" if target else "the host"
        self.build_job = BuildJob(self._study, self._build_done, samples=samples, target=target)
        self.build = {
            "state": "running",
            "target": target,
            "key": self.build_job.key,
            "text": f"building for {where}\u2026",
        }
        return "info", f"building and running the generated code for {where}\u2026"

    def _build_done(self, view: dict) -> None:
        if self.comm is None:  # the widget was closed meanwhile
            return
        self._rev += 1
        level, text = build_status(view)
        with self.hold_sync():
            self.build = view
            self.status = {"rev": self._rev, "seq": None, "acks": self.status.get("acks", {}), "level": level,
                           "text": text, "ms": round(view["seconds"] * 1e3, 1), "code_key": code_key(self._study)}  # fmt: skip

    # ------------------------------------------------------------------------------------------
    # edits made on the Study elsewhere

    def _listen(self) -> None:
        ref = weakref.ref(self)
        study = self._study

        def on_change(_study, ref=ref):
            w = ref()
            if w is None:
                study.unsubscribe(on_change)
                return
            if w._editing or w.comm is None:
                return
            with w._lock:
                job = w.pending
                if job is not None and study.config != w._config:  # an edit made elsewhere replaces the
                    # one whose placement is pending: it answers that request
                    w.pending = None
                    w._refresh(job.seq, "info", "updated from Python (it replaced the widget's pending edit)",
                               time.perf_counter())  # fmt: skip
                elif job is not None:  # new data, the same config: the placement goes on
                    w._refresh(None, "info", "updated from Python", time.perf_counter(), shown=w._shown)
                else:
                    w._refresh(None, "info", "updated from Python", time.perf_counter())

        self._listener = on_change
        study.subscribe(on_change)

    def close(self):
        if getattr(self, "warmer", None) is not None:
            self.warmer.stop()
        if getattr(self, "_listener", None) is not None:
            self._study.unsubscribe(self._listener)
        super().close()
