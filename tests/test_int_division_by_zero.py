"""An integer division by zero in the data (and the minimum divided by -1) must not kill the process.

TVM compiles an integer divide / mod to the machine's division, which traps: a zero divisor in the
data given to ``set_data`` killed the whole Python process (a notebook's kernel) with SIGFPE when the
simulation ran, and the exported program's host C died the same way.  Both now compute the division
as the kernel library's npk_binary_int documents it (``docs/kernel-library.md``): x / 0 gives 0
(x % 0 too), and for signed integers x / -1 is -x wrapped (the minimum stays the minimum) and
x % -1 is 0.  Each case runs in a subprocess, so a regression fails the test instead of killing
pytest."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import missing_tool, onnx_model, save_onnx, tensor_info

MIN, MAX = np.iinfo(np.int32).min, np.iinfo(np.int32).max
X = np.array([[MIN, -100, -7, 7], [0, 63, 7, MAX]], np.int32)
Y = np.array([[-1, 0, 2, -2], [0, 0, 3, -1]], np.int32)
DIV = [MIN, 0, -3, -3, 0, 0, 2, -MAX]  # truncating; x / 0 = 0; MIN / -1 wraps to MIN
MOD = [0, 0, 1, -1, 0, 0, 1, 0]  # ONNX Mod (fmod=0: the divisor's sign); x % 0 = 0


def _div_mod(tmp_path):
    from onnx import TensorProto as T
    from onnx import helper as h

    nodes = [h.make_node("Div", ["x", "y"], ["d"], name="div"), h.make_node("Mod", ["x", "y"], ["m"], name="mod")]
    m = onnx_model(nodes, [tensor_info("x", [2, 4], T.INT32), tensor_info("y", [2, 4], T.INT32)],
                   [tensor_info("d", [2, 4], T.INT32), tensor_info("m", [2, 4], T.INT32)])  # fmod=0  # fmt: skip
    return save_onnx(m, tmp_path / "div_mod_int32.onnx")


def _in_subprocess(code: str) -> str:
    """Run ``code`` in a fresh interpreter (a SIGFPE kills it, not pytest): its stdout."""
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0, f"exit {r.returncode} (-8: SIGFPE)\n{r.stderr[-2000:]}"
    return r.stdout


def test_the_simulation_of_an_integer_division_by_zero_gives_zero_and_does_not_kill_the_process(tmp_path):
    path = _div_mod(tmp_path)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", Y)
    out = _in_subprocess(f"""
        import numpy as np, npukit
        from npukit import pipeline
        x, y = np.load({str(tmp_path / "x.npy")!r}), np.load({str(tmp_path / "y.npy")!r})
        s = npukit.Study({str(path)!r}, "arm-dsp-dla", placement="first-fit")
        print(list(s.placement["processor"]))
        s.set_data({{"x": np.stack([x, x]), "y": np.stack([y, y])}})
        sim = pipeline.simulate(s.result, s.data, [0, 1])
        for k in (0, 1):
            print([np.asarray(o).ravel().tolist() for o in sim[k]])
        print(len(s.error))
    """)
    lines = out.strip().splitlines()
    assert lines[0] == "['arm', 'arm']"
    assert lines[1] == lines[2] == str([DIV, MOD])
    assert lines[3] == "0"  # (integer outputs: no float error to report)


@pytest.mark.slow
def test_the_exported_host_c_divides_by_zero_as_the_simulation(tmp_path):
    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make / cc is not installed")
    path = _div_mod(tmp_path)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", Y)
    out = _in_subprocess(f"""
        import numpy as np, npukit
        from npukit.codegen.build import make, run_program
        from pathlib import Path
        x, y = np.load({str(tmp_path / "x.npy")!r}), np.load({str(tmp_path / "y.npy")!r})
        s = npukit.Study({str(path)!r}, "arm-dsp-dla", placement="first-fit")
        s.set_data({{"x": np.stack([x, x]), "y": np.stack([y, y])}})
        d = Path({str(tmp_path / "e")!r})
        s.export(d)
        make(d)
        (d / ".w").mkdir(exist_ok=True)
        got = run_program(d, ["./model"], [x, y], [(2, 4), (2, 4)], d / ".w")
        print([g.ravel().tolist() for g in got])
        r = s.build({str(tmp_path / "b")!r}, samples=2)
        print(r["outputs_agree"], r["mismatches"])
    """)
    lines = out.strip().splitlines()
    assert lines[-2] == str([DIV, MOD])
    assert lines[-1] == "True []"
