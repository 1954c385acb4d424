"""Generated code for outputs that no op writes and for programs without an arena: a model input
returned as an output, an output an Identity folded into another tensor, the same tensor listed
twice, constant outputs (float and int64), and a single op on the host with no intermediate tensor.
Each model is made here with onnx.helper, exported, built with the host compiler (-Werror) and run;
its outputs are held against onnxruntime, and a program whose output is wrong makes `npukit build`
exit 1."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, missing_tool, onnx_model, run_cli, save_onnx, tensor_info

import npukit
from npukit import pipeline
from npukit.codegen.build import build_and_compare, make, run_program
from npukit.codegen.targets import available


def _ort(path, study, i: int) -> list[np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path))
    g = study.graph
    feeds = {g.tensors[t].name: np.asarray(x).reshape(g.tensors[t].shape)
             for t, x in zip(g.inputs, study.data.samples[i])}  # fmt: skip
    return sess.run(None, feeds)


def _build_and_run(study, d, samples=4, argv=("./model",)) -> list[list[np.ndarray]]:
    study.export(d)
    make(d)  # -std=c11 -Wall -Wextra -Werror
    g = study.graph
    shapes = [g.tensors[t].shape for t in g.inputs]
    work = d / ".w"
    work.mkdir(exist_ok=True)
    return [run_program(d, list(argv), list(study.data.samples[i]), shapes, work) for i in range(samples)]


def _assert_same(got: np.ndarray, want: np.ndarray):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    assert np.array_equal(got, want), np.max(np.abs(got.astype(np.float64) - want))


def _passthrough_model(tmp_path):
    """(a) ``x`` -> Relu -> ``y``; outputs ``y``, the input ``x``, and ``u``: an input no op reads."""
    from onnx import helper as h

    m = onnx_model([h.make_node("Relu", ["x"], ["y"], name="relu")],
                   [tensor_info("x", [2, 3, 4, 4]), tensor_info("u", [5])],
                   [tensor_info("y", [2, 3, 4, 4]), tensor_info("x", [2, 3, 4, 4]), tensor_info("u", [5])])  # fmt: skip
    return save_onnx(m, tmp_path / "passthrough.onnx")


def test_an_input_returned_as_an_output_is_copied(tmp_path):
    path = _passthrough_model(tmp_path)
    s = npukit.Study(path, "arm-dsp-dla")
    assert set(s.result.bits) == {"fp32"}
    got = _build_and_run(s, tmp_path / "e")
    entry = (tmp_path / "e/src/model.c").read_text()
    assert "memcpy(outputs->out1, inputs->in0, 384);" in entry and "memcpy(outputs->out2, inputs->in1, 20);" in entry
    for i, outs in enumerate(got):
        want = _ort(path, s, i)
        assert len(outs) == 3
        for a, b in zip(outs, want, strict=True):
            _assert_same(a, b)


def test_an_input_returned_beside_an_int8_accelerator_output(tmp_path):
    """First fit puts the Relu on the DLA at int8: ``y`` comes back through a dequantize, the
    returned input still bit for bit."""
    path = _passthrough_model(tmp_path)
    s = npukit.Study(path, "arm-dsp-dla", placement="first-fit")
    assert s.result.plan.processor == ("dla",) and s.result.bits == ("int8",)
    got = _build_and_run(s, tmp_path / "e")
    sim = pipeline.simulate(s.result, s.data, range(len(got)))
    for i, outs in enumerate(got):
        want = _ort(path, s, i)
        _assert_same(outs[1], want[1])
        _assert_same(outs[2], want[2])
        # the int8 output: within one step of its grid of the simulation (as tests/test_codegen.py holds)
        step = (want[0].max() - want[0].min()) / 255
        assert np.max(np.abs(outs[0] - sim[i][0].reshape(outs[0].shape))) <= step + 1e-6
        assert np.max(np.abs(outs[0] - want[0])) <= 2 * step


def test_identity_outputs_and_a_tensor_listed_twice(tmp_path):
    """(b) ``s = Sigmoid(x)``, ``s2 = Identity(s)``, ``xi = Identity(x)``: the outputs ``s2``, ``s``
    and ``xi`` are one op output, listed twice, and an input; every one is written."""
    from onnx import helper as h

    m = onnx_model([h.make_node("Sigmoid", ["x"], ["s"], name="sig"),
                    h.make_node("Identity", ["s"], ["s2"], name="id_s"),
                    h.make_node("Identity", ["x"], ["xi"], name="id_x")],
                   [tensor_info("x", [1, 16])],
                   [tensor_info("s2", [1, 16]), tensor_info("s", [1, 16]), tensor_info("xi", [1, 16])])  # fmt: skip
    path = save_onnx(m, tmp_path / "identity.onnx")
    s = npukit.Study(path, "arm-dsp-dla")
    g = s.graph
    assert len(g.ops) == 1 and g.outputs[0] == g.outputs[1] and g.outputs[2] == g.inputs[0]
    got = _build_and_run(s, tmp_path / "e")
    entry = (tmp_path / "e/src/model.c").read_text()
    assert entry.index("memcpy(outputs->out1, outputs->out0, 64);") > entry.index("[ops 0]")  # once it is final
    for i, outs in enumerate(got):
        want = _ort(path, s, i)
        assert len(outs) == 3
        np.testing.assert_allclose(outs[0], want[0], rtol=1e-6, atol=1e-7)  # expf of libm vs onnxruntime's
        _assert_same(outs[1], outs[0])  # the copy, bit for bit
        _assert_same(outs[2], want[2])
    r = s.build(tmp_path / "b", samples=2)
    assert list(r["runs"]["host"]["outputs"]) == ["s2", "s", "xi"]  # the model's own name per output
    assert r["outputs_agree"] is True and r["mismatches"] == []


def test_constant_outputs_are_const_data(tmp_path):
    """(c) a float and an int64 Constant returned as outputs beside an op's output: their values are
    const arrays in the constant workspace, copied with their own dtype and size."""
    from onnx import TensorProto, numpy_helper
    from onnx import helper as h

    fk = np.linspace(-1.5, 2.5, 6, dtype=np.float32).reshape(3, 2)
    ik = (np.arange(6, dtype=np.int64) - 3).reshape(2, 3) * (1 << 40)
    m = onnx_model([h.make_node("Constant", [], ["f"], name="fconst", value=numpy_helper.from_array(fk)),
                    h.make_node("Constant", [], ["k"], name="kconst", value=numpy_helper.from_array(ik)),
                    h.make_node("Tanh", ["x"], ["y"], name="tanh")],
                   [tensor_info("x", [2, 8])],
                   [tensor_info("f", [3, 2]), tensor_info("y", [2, 8]), tensor_info("k", [2, 3], TensorProto.INT64)])  # fmt: skip
    path = save_onnx(m, tmp_path / "consts.onnx")
    s = npukit.Study(path, "arm-dsp-dla")
    assert [s.graph.tensors[t].kind for t in s.graph.outputs] == ["const", "act", "const"]
    got = _build_and_run(s, tmp_path / "e")
    weights = (tmp_path / "e/src/weights.c").read_text()
    assert '__attribute__((section(".rodata.npk_weights"), aligned(16))) const int64_t' in weights
    assert "memcpy(outputs->out2, " in (tmp_path / "e/src/model.c").read_text()
    for i, outs in enumerate(got):
        want = _ort(path, s, i)
        _assert_same(outs[0], fk)
        _assert_same(outs[2], ik)
        np.testing.assert_allclose(outs[1], want[1], rtol=1e-6, atol=1e-6)  # tanhf of libm vs onnxruntime's


def test_single_op_on_the_host_has_no_arena(tmp_path):
    """(d) one Conv, on riscv-accel's host at fp32: no intermediate tensor, so no arena (it was an
    unused static array, an error under -Werror); the host build and the riscv64 build run."""
    from conftest import initializer
    from onnx import helper as h

    m = onnx_model([h.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])],
                   [tensor_info("x", [1, 4, 10, 10])], [tensor_info("y", [1, 4, 10, 10])],
                   [initializer("w", [4, 4, 3, 3], seed=1)])  # fmt: skip
    path = save_onnx(m, tmp_path / "conv.onnx")
    s = npukit.Study(path, "riscv-accel")
    s.pin("conv", "riscv").set_bits("fp32", processor="riscv")
    assert s.result.plan.processor == ("riscv",) and s.result.bits == ("fp32",)
    assert s.project.arena_bytes == 0
    got = _build_and_run(s, tmp_path / "e")
    entry = (tmp_path / "e/src/model.c").read_text()
    assert "npukit_arena" not in entry and "No arena" in entry
    for i, outs in enumerate(got):
        (want,) = _ort(path, s, i)
        np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-5)
    ok, why = available(s.soc.target)
    if not ok:
        missing_tool(why)
    r = build_and_compare(s, tmp_path / "e", samples=2, target=True, regenerate=False)
    assert r["runs"]["riscv64-linux"]["bit_exact_with_host"] is True and r["outputs_agree"] is True


def test_npukit_build_fails_when_an_output_disagrees(tmp_path):
    """An export whose returned input is no longer copied (the old defect: zeros) makes `npukit
    build` exit 1 naming that output; the intact export agrees."""
    path = _passthrough_model(tmp_path)
    s = npukit.Study(path, "arm-dsp-dla")
    d = tmp_path / "e"
    s.export(d)
    r = build_and_compare(s, d, samples=4, regenerate=False)
    assert r["outputs_agree"] is True and all(o["rel_rms"] == 0.0 for o in r["runs"]["host"]["outputs"].values())
    src = d / "src/model.c"
    text = src.read_text()
    line = "    memcpy(outputs->out1, inputs->in0, 384);\n"
    assert line in text
    src.write_text(text.replace(line, ""))
    cli = run_cli("build", d, "--samples", "4", timeout=300)
    assert cli.returncode == 1, (cli.stdout, cli.stderr)
    assert "output 'x': max abs" in cli.stdout and "MISMATCH" in cli.stdout
    assert cli.stderr.startswith("npukit: build: the program's outputs disagree: host: output 'x': "
                                 "relative RMS difference 1 from the simulation")  # fmt: skip
    r = build_and_compare(s, d, samples=4, regenerate=False)
    (bad,) = r["mismatches"]
    assert r["outputs_agree"] is False and bad.startswith("host: output 'x'")
    assert r["runs"]["host"]["outputs"]["x"]["within_tolerance"] is False
    assert r["runs"]["host"]["outputs"]["y"]["within_tolerance"] is True


def test_an_output_of_zeros_fails_at_int2_too(tmp_path):
    """At int2 the simulation is far from the float model (relative RMS ~0.85 for the digits CNN), so
    twice that distance was a tolerance of 1.7 and a program writing zeros (1) passed.  The cap
    (0.5) keeps the check able to fail; the intact program is bit-exact with the simulation."""
    s = npukit.Study(ROOT / "sample_models/digits_cnn.onnx", "riscv-accel", {"bits": {"accel": "int2"}})
    d = tmp_path / "e"
    s.export(d)
    r = build_and_compare(s, d, samples=4, regenerate=False)
    o = r["runs"]["host"]["outputs"]["probs"]
    assert (o["rel_rms"], o["tolerance"], r["outputs_agree"]) == (0.0, 0.5, True)
    src = d / "src/model.c"
    lines = src.read_text().splitlines(keepends=True)
    (k,) = [k for k, ln in enumerate(lines) if '"rounding probs to int8"' in ln]  # the output's last write
    lines.insert(k + 1, "    for (int z = 0; z < 10; z++) ((float *)outputs->out0)[z] = 0.0f;\n")
    src.write_text("".join(lines))
    r = build_and_compare(s, d, samples=4, regenerate=False)
    o = r["runs"]["host"]["outputs"]["probs"]
    assert (o["rel_rms"], o["tolerance"], o["within_tolerance"], r["outputs_agree"]) == (1.0, 0.5, False, False)
    assert r["mismatches"] == ["host: output 'probs': relative RMS difference 1 from the simulation (max abs "
                               f"{o['max_abs']:.3g}), tolerance 0.5"]  # fmt: skip


def test_fills_are_byte_identical_across_processes(tmp_path):
    from onnx import helper as h

    m = onnx_model([h.make_node("Relu", ["x"], ["y"], name="relu"), h.make_node("Identity", ["y"], ["y2"], name="idn")],
                   [tensor_info("x", [1, 8])],
                   [tensor_info("y", [1, 8]), tensor_info("x", [1, 8]), tensor_info("y2", [1, 8])])  # fmt: skip
    path = save_onnx(m, tmp_path / "m.onnx")
    code = "import sys, npukit; npukit.Study(sys.argv[1], 'riscv-accel').export(sys.argv[2])"
    outs = []
    for seed in ("1", "4242"):
        d = tmp_path / f"e{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        r = subprocess.run([sys.executable, "-c", code, str(path), str(d)], env=env, capture_output=True, text=True,
                           cwd=str(ROOT), timeout=300)  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        outs.append({p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()})
    assert outs[0].keys() == outs[1].keys() and all(outs[0][k] == outs[1][k] for k in outs[0])
    assert b"memcpy(outputs->out1, inputs->in0, 32);" in outs[0]["src/model.c"]


@pytest.mark.parametrize("soc", ["arm-dsp-dla", "cortex-m7-cmsis-nn"])
def test_no_arena_builds_for_the_profiles_target(soc, tmp_path):
    """A model with no intermediate tensor builds for the profile's cross target too (aarch64 Linux,
    Cortex-M7 firmware), where -Werror holds as well."""
    from onnx import helper as h

    m = onnx_model([h.make_node("Abs", ["x"], ["y"], name="abs")], [tensor_info("x", [3, 5])],
                   [tensor_info("y", [3, 5]), tensor_info("x", [3, 5])])  # fmt: skip
    path = save_onnx(m, tmp_path / "abs.onnx")
    s = npukit.Study(path, soc).pin("abs", npukit.load_soc(soc).host)
    s.set_bits("fp32", processor=s.soc.host)
    assert s.project.arena_bytes == 0
    ok, why = available(s.soc.target)
    if not ok:
        missing_tool(why)
    r = s.build(tmp_path / "e", samples=2, target=True)
    t = r["runs"][s.soc.target]
    assert t["bit_exact_with_host"] is True and r["outputs_agree"] is True
    assert all(o["max_abs"] == 0.0 for run in r["runs"].values() for o in run["outputs"].values())


def test_the_code_tab_follows_the_builds_verdict():
    from npukit.ui.codeview import build_view

    def report(within: bool, max_rel: float, agree: float) -> dict:
        o = {"max_abs": max_rel, "max_rel": max_rel, "argmax_agreement": agree, "rel_rms": max_rel / 2,
             "tolerance": 0.1, "within_tolerance": within}  # fmt: skip
        return {"samples": 4, "runs": {"host": {"outputs": {"y": o}, "within_tolerance": within}}, "memory": {},
                "outputs_agree": within, "mismatches": [] if within else ["host: output 'y': ..."]}  # fmt: skip

    near = build_view(report(True, 0.2, 0.75))  # a detector's reordered boxes: within the tolerance
    assert near["state"] == "ok" and near["runs"][0]["kind"] == "close" and near["extra"] == {}
    assert near["runs"][0]["verdict"].startswith("within its tolerance of the simulation (top-1 agreement 75%")
    off = build_view(report(False, 0.005, 1.0))  # small largest error, but beyond the tolerance
    assert off["state"] == "differs" and off["runs"][0]["kind"] == "differs"


def test_a_target_build_differing_from_the_host_build_is_explained_or_a_mismatch(tmp_path):
    """fp32 host code calling erff / expf agrees across C libraries only to an ulp (the aarch64 build
    of the transformer's GELU differed from the host build and the build still said nothing but
    'DIFFERS', exit 0).  A difference the host code's C library calls explain is said so, with its
    size; any other (integer outputs, larger, or no such calls) is a mismatch (exit 1)."""
    from npukit.codegen.compare import host_difference, libm_calls

    host = tmp_path / "host"
    host.mkdir()
    (host / "npk_host_tvm.c").write_text("float f(float x) { return erff(x) + expf(x) * sqrtf(x) + fabsf(x); }\n")
    assert libm_calls(tmp_path) == ["erff", "expf"]  # sqrtf is correctly rounded everywhere; fabsf exact
    a = np.array([1.0, -2.5, 3.0e-3], np.float32)
    b = a.copy()
    b[1] = np.nextafter(b[1], np.float32(0))  # one ulp
    d = host_difference([[b]], [[a]], ["erff"])
    assert d["explained"] is True and d["max_ulp"] == 1 and d["max_rel"] == pytest.approx(abs(float(b[1]) - float(a[1])) / 2.5)
    assert d["text"].startswith("1 ulp at most, ") and d["text"].endswith(
        "; the host code calls erff from each target's C library, which round alike only to an ulp")
    assert host_difference([[b]], [[a]], [])["explained"] is False  # no C library call to explain it
    c = a.copy()
    c[0] = 1.001  # 1e-3 of the magnitude: beyond rounding
    assert host_difference([[c]], [[a]], ["erff"])["explained"] is False
    i = np.array([1, 2, 3], np.int8)
    d = host_difference([[i + 1]], [[i]], ["erff"])
    assert d["explained"] is False and d["text"] == "integer outputs differ"


@pytest.mark.slow
def test_an_fp32_erf_on_the_host_builds_for_aarch64_within_an_ulp(tmp_path):
    """x -> Erf -> Exp -> Tanh, every op on the host in fp32: the aarch64 build (glibc's libm under
    QEMU) and the host build round erff / expf / tanhf each their own way.  The build says by how
    much and why, and agrees (exit 0); before it said only 'DIFFERS from the host build'."""
    from conftest import missing_tool
    from onnx import TensorProto
    from onnx import helper as h

    from npukit.codegen import targets as tg

    ok, why = tg.available("aarch64-linux")
    if not ok:
        missing_tool(why)
    vi = h.make_tensor_value_info
    nodes = [h.make_node("Erf", ["x"], ["a"], name="erf"), h.make_node("Exp", ["a"], ["b"], name="exp"),
             h.make_node("Tanh", ["b"], ["e"], name="tanh")]  # fmt: skip
    m = h.make_model(h.make_graph(nodes, "t", [vi("x", TensorProto.FLOAT, [1, 4096])], [vi("e", TensorProto.FLOAT, [1, 4096])]),
                     opset_imports=[h.make_opsetid("", 17)])  # fmt: skip
    m.ir_version = 8
    import onnx

    path = tmp_path / "transc.onnx"
    onnx.save(m, path)
    s = npukit.Study(path, "arm-dsp-dla")
    assert set(s.placement["processor"]) == {"arm"}
    rng = np.random.default_rng(0)
    s.set_data(rng.uniform(-3, 3, (4, 1, 4096)).astype(np.float32))
    r = s.build(target=True, samples=4)
    assert r["directory"] is None  # built in a directory of its own, removed after
    run = r["runs"]["aarch64-linux"]
    assert r["outputs_agree"] is True, r["mismatches"]
    assert run["bit_exact_with_host"] is False  # (x86-64 and aarch64 glibc round erff apart on these values)
    d = run["host_difference"]
    assert d["explained"] is True and 1 <= d["max_ulp"] <= 8 and d["libm"] == ["erff", "expf", "tanhf"]


def test_selected_rows_are_compared_whatever_their_count():
    """NMS's selected indices: the program writes its static row count, the rows past the selected
    ones -1; the simulation returns the selected rows alone.  A row selected beyond the reference's,
    or one missing, is an error (only the rows both had were compared, so an extra box passed)."""
    from npukit.codegen.compare import compare

    ref = np.array([[0, 0, 3], [0, 0, 1], [0, 0, 5], [0, 0, 2]])
    pad = np.full((4, 3), -1)
    same, extra, fewer = (np.vstack([ref, pad]), np.vstack([ref, [[0, 0, 7]], pad[:3]]),
                          np.vstack([ref[:3], pad, pad[:1]]))  # fmt: skip
    (r,) = compare([same], [ref], ["selected"])
    assert (r["max_abs"], r["err_sq"], r["ref_sq"]) == (0.0, 0.0, 39.0)
    (r,) = compare([extra], [ref], ["selected"])
    assert (r["max_abs"], r["err_sq"]) == (8.0, 1 + 1 + 64.0)  # the fifth row: (0, 0, 7) where none was selected
    (r,) = compare([fewer], [ref], ["selected"])
    assert (r["max_abs"], r["err_sq"]) == (3.0, 1 + 1 + 9.0)  # the fourth row: none where (0, 0, 2) was
