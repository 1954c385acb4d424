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
