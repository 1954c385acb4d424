"""Each benchmark's usage line (its docstring's ``python benchmarks/NAME.py [...]``) names exactly the
options its argument parser takes: a planner runs the command as printed there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def usage_options(path: Path) -> set[str] | None:
    """The options of the usage block: the ``python benchmarks/<name>`` line and the lines under it
    indented further, each holding options in brackets."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    lines = doc.splitlines()
    for k, line in enumerate(lines):
        if line.strip().startswith(f"python benchmarks/{path.name}"):
            block = [line]
            indent = len(line) - len(line.lstrip())
            for nxt in lines[k + 1 :]:
                if nxt.strip().startswith("[") and len(nxt) - len(nxt.lstrip()) > indent:
                    block.append(nxt)
                else:
                    break
            return set(re.findall(r"--[a-z0-9][a-z0-9-]*", " ".join(block)))
    return None


def parser_options(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            out |= {a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")}
    return out


def test_every_benchmark_with_a_parser_prints_its_usage():
    with_parser = [p.name for p in SCRIPTS if parser_options(p)]
    assert "reestimate.py" in with_parser and "vs_vela.py" in with_parser
    assert [n for n in with_parser if usage_options(BENCH / n) is None] == []


@pytest.mark.parametrize("path", [p for p in SCRIPTS if parser_options(p)], ids=lambda p: p.name)
def test_usage_names_the_options_the_parser_takes(path):
    assert usage_options(path) == parser_options(path)
