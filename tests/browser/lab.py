"""A real JupyterLab server and a real chromium for the browser tests and benchmarks/ui.py."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = os.environ.get("NPUKIT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    def __init__(self, root: Path, port: int, token: str, proc: subprocess.Popen, log: Path):
        self.root, self.port, self.token, self.proc, self.log = root, port, token, proc, log

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        # ?reset: a fresh workspace, so notebooks opened by an earlier page do not come back
        return f"{self.base}/lab/tree/{path}?token={self.token}&reset"


def make_root(root: Path) -> Path:
    """A server root holding a copy of the repo's notebooks and sample models (with their data)."""
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    shutil.copytree(REPO / "notebooks", root / "notebooks", ignore=ignore)
    shutil.copytree(REPO / "sample_models", root / "sample_models", ignore=ignore)
    return root


@contextmanager
def jupyter_lab(root: Path, timeout: float = 90.0):
    """Start JupyterLab on loopback (free port, token, no browser), wait for it, stop it after."""
    port, token = free_port(), secrets.token_hex(16)
    state = root / ".lab-state"
    state.mkdir(exist_ok=True)
    env = dict(os.environ)
    env.update({
        "JUPYTER_CONFIG_DIR": str(state / "config"), "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(state / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(state / "workspaces"),
        "IPYTHONDIR": str(state / "ipython"), "PYTHONUNBUFFERED": "1",
    })  # fmt: skip
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        "--allow-root",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.news_url=",
    ]  # fmt: skip
    # no kernel chooser, no news prompt: a user's defaults, written where this server reads settings
    settings = state / "settings"
    for ext, name, text in (
        ("@jupyterlab/notebook-extension", "tracker", '{"autoStartDefaultKernel": true, "windowingMode": "none"}'),
        ("@jupyterlab/apputils-extension", "notification", '{"fetchNews": "false", "checkForUpdates": false}'),
    ):
        (settings / ext).mkdir(parents=True, exist_ok=True)
        (settings / ext / f"{name}.jupyterlab-settings").write_text(text)
    log = state / "server.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"jupyter lab did not answer within {timeout:.0f} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.25)
        yield Lab(root, port, token, proc, log)
    finally:
        # shut down the kernels and the server we started
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/api/shutdown?token={token}", method="POST")
            urllib.request.urlopen(req, timeout=5).close()
        except Exception:  # noqa: BLE001 - then terminate it below
            pass
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def launch_chromium(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def open_notebook(page, lab: Lab, path: str, timeout_ms: int = 90_000) -> None:
    """Open a notebook and wait until its kernel is connected (a reply came over its websocket) and idle.

    JupyterLab shows "Idle" from the REST session before the kernel's websocket is up; requests
    sent before that can be lost, so wait for the websocket itself.
    """
    frames = {"n": 0}

    def on_ws(ws):
        if "/api/kernels/" in ws.url and "/channels" in ws.url:
            ws.on("framereceived", lambda _payload: frames.__setitem__("n", frames["n"] + 1))

    page.on("websocket", on_ws)
    page.goto(lab.url(path), wait_until="domcontentloaded", timeout=timeout_ms)
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=timeout_ms)
    select = page.locator(".jp-Dialog .jp-mod-accept")  # a kernel chooser, should one still show up
    idle = page.locator(".jp-StatusBar-TextItem:text-matches('\\|\\s*Idle')")
    deadline = time.monotonic() + timeout_ms / 1000
    while time.monotonic() < deadline:
        if select.count():
            select.first.click()
        if frames["n"] > 0 and idle.count():
            page.wait_for_timeout(500)  # let the kernel_info exchange settle
            if idle.count():
                return
        page.wait_for_timeout(200)
    raise TimeoutError(f"the kernel of {path} did not connect within {timeout_ms / 1000:.0f} s")


def run_all_cells(page, timeout_ms: int = 180_000) -> None:
    """Run > Run All Cells, then wait until every code cell has an execution count."""
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
    page.wait_for_function(
        """() => {
            const ps = [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')];
            return ps.length > 0 && ps.every(p => /\\[\\d+\\]/.test(p.textContent));
        }""",
        timeout=timeout_ms,
    )


# ---------------------------------------------------------------------------------------------
# the widget, driven as its front end drives it

WIDGET = '[data-testid="npukit-root"]'  # the widget's root element


def recording_widget(study):
    """A StudyWidget whose comm messages are recorded in ``w.sent`` (no front end needed)."""
    from npukit.ui import StudyWidget

    w = StudyWidget(study)
    w.sent = []
    w.comm.send = lambda data=None, metadata=None, buffers=None: w.sent.append({"data": data, "buffers": buffers})
    return w


def request(w, **msg) -> dict:
    """Send one request as the front end does; return the state it sent in answer.  An edit under
    the cost policy whose placement is not cached is answered twice: at once with provisional
    estimates (a status of no request), then from a thread when its placement is ready; the two
    updates are merged."""
    n = len(w.sent)
    w._on_msg(w, {"seq": 100 + n, **msg}, [])
    job = w.pending
    if job is not None:
        job.wait(600)
        assert w.pending is None, f"{msg}: the placement did not finish"
    updates = [m for m in w.sent[n:] if m["data"]["method"] == "update"]
    assert 1 <= len(updates) <= 2, f"{msg}: {len(updates)} updates"
    if len(updates) == 2:
        assert updates[0]["data"]["state"]["status"]["seq"] is None
    assert w.status["seq"] == 100 + n
    return {k: v for u in updates for k, v in u["data"]["state"].items()}  # (a trait the second left alone: the first's)


@contextmanager
def widget_page(browser, lab: Lab, notebook: str, timeout_ms: int = 60_000, *, scroll: bool = False,
                height: int = 1100, run_timeout_ms: int = 180_000, ready: str = '[data-testid="graph-node"]'):  # fmt: skip
    """A chromium page with ``notebook`` open in the lab, every cell run and the widget drawn
    (``ready`` inside it); ``page.page_errors`` collects the page's JavaScript errors."""
    ctx = browser.new_context(viewport={"width": 1500, "height": height})
    pg = ctx.new_page()
    pg.set_default_timeout(timeout_ms)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    open_notebook(pg, lab, notebook)
    run_all_cells(pg, timeout_ms=run_timeout_ms)
    pg.wait_for_selector(f"{WIDGET} {ready}", timeout=timeout_ms)
    if scroll:
        pg.locator(WIDGET).scroll_into_view_if_needed()
    pg.page_errors = errors
    try:
        yield pg
    finally:
        ctx.close()


def rev(page) -> int:
    return int(page.get_attribute(WIDGET, "data-rev") or 0)


def edit(page, action, timeout_ms: int = 120_000) -> None:
    """Do something that sends one request, then wait until the widget applied its (last) answer and
    repainted the open tab (the widget draws the tab one animation frame plus one task after it
    applies an update; a frame plus a task queued after that runs after it).  ``data-busy`` stays
    "1" while an edit under the cost policy shows first-fit estimates and its placement runs."""
    before = rev(page)
    action()
    page.wait_for_function(f"() => {{ const r = document.querySelector('{WIDGET}').dataset; "
                           f"return +r.rev > {before} && r.busy === '0'; }}", timeout=timeout_ms)  # fmt: skip
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => setTimeout(done, 0)))")
