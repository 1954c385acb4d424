"""Build and run the generated project from the widget without blocking the kernel.

``BuildJob(study, done, samples=16, target=False)`` builds a copy of the Study (``Study.copy()``:
the config at the moment of the click; the user may go on editing) with ``Study.build`` in a
daemon thread.  When it finishes, ``done(view)`` is called -- on the kernel's event loop when the
job was started from it (a widget request), so the widget's traits are only ever set from the
kernel's own thread; else (plain Python, tests) from the build thread.  ``view`` is plain JSON: the
report as rows (``codeview.build_view``), or the compiler's messages when the build failed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import NpukitError
from .codeview import build_view, code_key


class BuildJob:
    def __init__(self, study, done: Callable[[dict], None], *, samples: int = 16, target: bool = False):
        self.snapshot = study.copy()
        self.key = code_key(study)
        self.samples = samples
        self.target = target
        self._done = done
        self.view: dict | None = None
        self.delivered_on: str | None = None  # where done() ran: "kernel loop (MainThread)" in a notebook
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self.thread = threading.Thread(target=self._run, name="npukit-widget-build", daemon=True)
        self.started = time.perf_counter()
        self.thread.start()

    @property
    def running(self) -> bool:
        return self.thread.is_alive()

    def wait(self, timeout: float | None = None) -> dict | None:
        """Wait for the build to finish (for scripts and tests); its view, or None on timeout."""
        self.thread.join(timeout)
        return self.view

    def _run(self) -> None:
        from ..codegen.build import BuildFailed  # noqa: PLC0415

        base: dict[str, Any] = {"key": self.key, "target": self.target, "config": self.snapshot.config.to_dict()}
        try:
            report = self.snapshot.build(samples=self.samples, target=self.target)
            view = {**base, **build_view(report)}
        except BuildFailed as e:
            view = {**base, "state": "failed", "messages": str(e)}
        except NpukitError as e:
            view = {**base, "state": "error", "messages": str(e)}
        except Exception as e:  # noqa: BLE001 - shown in the widget, never lost in a thread
            view = {**base, "state": "error", "messages": f"unexpected {type(e).__name__}: {e}"}
        view["seconds"] = round(time.perf_counter() - self.started, 2)
        self.view = view
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._deliver, view, "kernel loop")
                return
            except RuntimeError:  # the loop closed meanwhile
                pass
        self._deliver(view, "build thread")

    def _deliver(self, view: dict, where: str) -> None:
        self.delivered_on = f"{where} ({threading.current_thread().name})"
        self._done(view)


def build_status(view: dict) -> tuple[str, str]:
    """(level, status line) of a finished build's view: each run's verdict, the arena, what does
    not fit; or the compiler's first message."""
    if view["state"] in ("ok", "differs", "over_budget"):
        level = "ok" if view["state"] == "ok" else "error"
        runs = "; ".join(
            f"{r['name']}: {r['verdict']}" + (f", {r['host']}" if r.get("host") else "") for r in view["runs"]
        )
        mem = {k: v for k, _, v in view.get("memory", [])}
        text = f"build and run ({view.get('samples')} inputs, {view['seconds']} s): {runs}"
        if "arena_bytes" in mem:
            text += f"; arena {mem['arena_bytes']:,} B"
        over = [
            f"{f['run'] + ' ' if f['run'] else ''}{f['memory']} {f['text']}"
            for f in view.get("fit", [])
            if f["over"]
        ]
        if over:
            text += "; does not fit: " + ", ".join(over)
    else:
        level = "error"
        text = f"build and run failed: {view.get('messages', '').strip().splitlines()[0] if view.get('messages') else ''}"
    return level, text
