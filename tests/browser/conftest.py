"""Fixtures for the browser tests: a real JupyterLab on loopback and Debian's chromium."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .lab import ARTIFACTS, CHROMIUM, jupyter_lab, launch_chromium, make_root


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


REQUIRED = bool(os.environ.get("NPUKIT_REQUIRE_BROWSER"))  # set by .ci/run: a missing browser fails


def _missing(msg: str):
    if REQUIRED:
        pytest.fail(msg)
    pytest.skip(msg)


def _need(module: str):
    try:
        return __import__(module, fromlist=["x"])
    except ImportError:
        _missing(f"{module} is not installed (pip install -e '.[test]')")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a temp copy of notebooks/ + the sample model; stopped after the module."""
    _need("jupyterlab")
    root = make_root(tmp_path_factory.mktemp("lab"))
    with jupyter_lab(root) as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    sync_api = _need("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        _missing(f"no chromium at {CHROMIUM} (apt-get install chromium, or set NPUKIT_CHROMIUM)")
    with sync_api.sync_playwright() as p:
        b = launch_chromium(p)
        try:
            yield b
        finally:
            b.close()
