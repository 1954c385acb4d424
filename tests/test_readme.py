"""The README's Python example runs as written (from the repository root)."""

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_python_example_runs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "the README has a Python example"
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        scope: dict = {}
        for code in blocks:
            exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - our own documentation
    finally:
        os.chdir(cwd)
    study = scope["study"]
    assert dict(study.config.pins) == {"/softmax/Softmax": "arm"}
    assert study.plan.processor[study.graph.op_by_name("/conv1/Conv").op_id] == "arm"
    assert dict(study.config.layer_bits) == {"/conv1/Conv": "int8"}


def test_readme_systems_table_commands_run(tmp_path):
    """Every `npukit study ...` command of the README's table of systems runs as written (from a copy
    of the repository's sample models) and writes the export it names; the notebooks it names exist.
    (`npukit build DIR --target` of those exports is what tests/test_codegen*.py and
    tests/test_targets*.py run for the same profiles.)"""
    import json
    import shutil
    import subprocess
    import sys

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("## The systems behind npukit, end to end", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in table.splitlines() if ln.startswith("| ") and not ln.startswith(("| system", "|---"))]
    assert len(rows) == 5
    for nb in re.findall(r"`(notebooks/[\w.]+\.ipynb)`", table):
        assert (ROOT / nb).is_file(), nb
    cmds = re.findall(r"`npukit (study [^`]+)`", table)
    assert len(cmds) == 5
    shutil.copytree(ROOT / "sample_models", tmp_path / "sample_models", ignore=shutil.ignore_patterns("families"))
    for cmd in cmds:
        args = cmd.split()
        r = subprocess.run([sys.executable, "-m", "npukit", *args, "--json"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=600)  # fmt: skip
        assert r.returncode == 0, f"{cmd}: {r.stderr}"
        doc = json.loads(r.stdout)
        assert doc["soc"] == args[args.index("--soc") + 1]
        if "--export" in args:
            out = tmp_path / args[args.index("--export") + 1]
            assert (out / "manifest.json").is_file() and doc["export"]["directory"] == str(out.relative_to(tmp_path))


def test_readme_command_line_names_every_option():
    """The README's `## Command line` synopsis names every option each subcommand's parser takes (it once
    left out study's --config / --input-shape / --placement / --export, build's --samples ...)."""
    from npukit.cli import build_parser

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Command line", 1)[1].split("```", 2)[1]
    synopsis: dict[str, str] = {}
    cmd = None
    for line in block.splitlines():
        if line.startswith("npukit "):
            cmd = line.split()[1]
        if cmd and line.strip():
            synopsis[cmd] = synopsis.get(cmd, "") + " " + line.split("#", 1)[0]
    sub = next(a for a in build_parser()._actions if a.dest == "cmd")
    assert set(synopsis) == set(sub.choices)
    for name, parser in sub.choices.items():
        options = {s for a in parser._actions for s in a.option_strings if s.startswith("--") and s != "--help"}
        missing = sorted(o for o in options if not re.search(re.escape(o) + r"(?![\w-])", synopsis[name]))
        assert missing == [], f"npukit {name}: the README's synopsis leaves out {missing}"
