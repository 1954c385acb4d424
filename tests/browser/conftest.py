"""Fixtures for the browser tests: a real JupyterLab on loopback and Debian's chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

from .lab import ARTIFACTS, CHROMIUM, jupyter_lab, launch_chromium, make_root


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a temp copy of notebooks/ + the sample model; stopped after the module."""
    pytest.importorskip("jupyterlab")
    root = make_root(tmp_path_factory.mktemp("lab"))
    with jupyter_lab(root) as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium, or set NPUKIT_CHROMIUM)")
    with sync_api.sync_playwright() as p:
        b = launch_chromium(p)
        try:
            yield b
        finally:
            b.close()
