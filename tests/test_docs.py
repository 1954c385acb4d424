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


@pytest.mark.parametrize("page", ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))])
def test_table_rows_are_one_line(page):
    """A markdown table row must not break across lines (a cell's text wrapped onto the next line ends the
    table there): docs/rules.md's rule docstrings once did."""
    inside_code = in_table = False
    broken = []
    for n, line in enumerate((ROOT / page).read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            inside_code = not inside_code
            continue
        if inside_code:
            continue
        if line.startswith("|"):
            in_table = True
        elif in_table and line.strip():
            broken.append(n)
            in_table = False
        else:
            in_table = False
    assert broken == [], f"{page}: table rows continued on lines {broken}"


def test_kernel_library_page_lists_the_core_files():
    """docs/kernel-library.md's Files table names exactly the core's files (it once left out npk_ref_convert.c)."""
    import re

    from npukit.codegen.kernels import core_files

    text = (ROOT / "docs/kernel-library.md").read_text(encoding="utf-8")
    row = next(ln for ln in text.splitlines() if ln.startswith('| `library_files("nvdla")`'))
    named = set(re.findall(r"`(npk_ref[\w.]*)`", row))
    assert named == set(core_files())


def test_targets_page_table_matches_the_targets():
    """docs/targets.md's Targets table names each target's compiler, every flag it builds with, its
    extra sources and its Debian packages as npukit.codegen.targets.TARGETS holds them (the
    cortex-m7-mps2 row once left out -ffunction-sections -fdata-sections -Wl,--gc-sections)."""
    from npukit.codegen.targets import TARGETS

    text = (ROOT / "docs/targets.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.split("## Targets", 1)[1].split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells
    assert set(rows) == set(TARGETS)
    for name, t in TARGETS.items():
        _, flags, _, _, packages = rows[name]
        for word in (t.cc, *t.cflags, *t.ldflags, *t.extra_sources):
            assert word in flags, (name, word)
        assert sorted(p.strip() for p in packages.split(",")) == list(t.packages), name
