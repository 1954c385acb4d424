"""The reference pages in docs/ are generated from the code; they must not drift."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
gen_docs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen_docs)


@pytest.mark.parametrize("page", sorted(gen_docs.PAGES))
def test_generated_page_is_current(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    assert text == gen_docs.PAGES[page](), f"{page} is stale: run python scripts/gen_docs.py"


def test_pages_state_the_models():
    cost = (ROOT / "docs/cost-model.md").read_text()
    assert "cycles = max(compute_cycles, memory_cycles)" in cost and "macs_per_cycle" in cost
    assert "transfer_us = latency_us + k * bytes / (bandwidth_gbps * 1000)" in cost
    assert "## Placement policy" in cost and "dynamic programming over the groups" in cost
    q = (ROOT / "docs/quantization.md").read_text()
    assert "per output channel, symmetric" in q and "per tensor, affine" in q


def test_every_notebook_cell_has_an_id():
    """nbformat 4.5 notebooks need an id per cell (Jupyter warns, and will refuse, without one)."""
    import json

    root = Path(__file__).resolve().parents[1]
    for nb in sorted((root / "notebooks").glob("*.ipynb")):
        doc = json.loads(nb.read_text(encoding="utf-8"))
        ids = [c.get("id") for c in doc["cells"]]
        assert (doc["nbformat"], doc["nbformat_minor"]) >= (4, 5), nb.name
        assert all(ids) and len(set(ids)) == len(ids), (nb.name, [k for k, i in enumerate(ids) if not i])
