"""Generated code (issue 11): every study exports a C project that compiles with -Werror, runs on x86
and on aarch64 under qemu, and matches npukit's own simulation; fp32 exports match onnxruntime."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import DIGITS_ONNX, MOBILENET, ROOT, initializer, missing_tool, onnx_model, save_onnx, tensor_info

import npukit
from npukit import pipeline
from npukit.codegen.build import make, run_program


def _need(*tools):
    for t in tools:
        if shutil.which(t) is None:
            missing_tool(f"{t} is not installed")


def _run_all(d, argv, study, idx):
    g = study.graph
    shapes = [g.tensors[t].shape for t in g.inputs]
    work = d / ".w"
    work.mkdir(exist_ok=True)
    return [run_program(d, argv, list(study.data.samples[i]), shapes, work) for i in idx]


def _first_outputs(study, d):
    """Export ``study`` to ``d``, build it, run it on every sample: the first output of the C program
    and of the simulation, one flat row per sample."""
    study.export(d)
    make(d)
    n = len(study.data.samples)
    got = np.stack([x[0].ravel() for x in _run_all(d, ["./model"], study, range(n))])
    sim = pipeline.simulate(study.result, study.data, range(n))
    return got, np.stack([np.asarray(x[0]).ravel() for x in sim])


@pytest.fixture(scope="module")
def digits_export(tmp_path_factory):
    # softmax pinned to the DSP (the cost policy keeps it on the host): all three processors run
    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla").pin("/softmax/Softmax", "dsp")
    d = tmp_path_factory.mktemp("digits") / "export"
    s.export(d)
    make(d)
    return s, d


def test_digits_int8_matches_the_simulation_on_the_whole_test_split(digits_export):
    s, d = digits_export
    n = len(s.data.samples)
    got = _run_all(d, ["./model"], s, range(n))
    ref = pipeline.simulate(s.result, s.data, range(n))
    a = np.stack([x[0].ravel() for x in got])
    b = np.stack([x[0].ravel() for x in ref])
    # the DLA computes int8, the DSP int16: one int8 step of a logit (0.17 here) moves a probability
    # near a decision boundary by up to ~0.02, so the figures held are per-sample ones
    assert np.mean(np.abs(a - b) <= 1e-3) >= 0.99
    agree = np.mean(a.argmax(1) == b.argmax(1))
    y = s.data.labels
    acc_c, acc_sim = np.mean(a.argmax(1) == y), np.mean(b.argmax(1) == y)
    assert agree >= 0.995 and abs(acc_c - acc_sim) <= 0.005, (agree, acc_c, acc_sim)
    assert n == 450


def test_the_project_is_what_the_manifest_says(digits_export):
    s, d = digits_export
    m = json.loads((d / "manifest.json").read_text())
    assert m["memory"]["arena_bytes"] >= m["memory"]["lower_bound_bytes"] > 0
    ops = {o["name"]: o for o in m["ops"]}
    assert ops["/conv1/Conv"]["processor"] == "dla" and ops["/conv1/Conv"]["file"] == "src/partitions_nvdla.c"
    assert ops["/softmax/Softmax"]["processor"] == "dsp" and ops["/softmax/Softmax"]["bits"] == "int16"
    src = (d / "src/partitions_nvdla.c").read_text()
    assert "nvdla_conv2d(" in src and "nvdla_matmul(" in src  # the profile's kernel_library prefix
    assert "xi_dsp_softmax(" in (d / "src/partitions_xi_dsp.c").read_text()
    entry = (d / "src/model.c").read_text()
    assert "int32_t npukit_model_run(const npukit_model_inputs *inputs, npukit_model_outputs *outputs)" in entry
    assert "nvdla_quantize(" in entry and "xi_dsp_requantize(" in entry and "npk_dequantize(" in entry  # boundaries
    assert '__attribute__((section(".rodata.npk_weights")' in (d / "src/weights.c").read_text()


def test_aarch64_static_build_runs_under_qemu_with_the_same_outputs(digits_export):
    _need("aarch64-linux-gnu-gcc", "qemu-aarch64")
    s, d = digits_export
    r = subprocess.run(["make", "-s", "-B", "CC=aarch64-linux-gnu-gcc", "LDFLAGS=-static", "PROGRAM=model-a64"],
                       cwd=d, capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    native = _run_all(d, ["./model"], s, range(8))
    cross = _run_all(d, ["qemu-aarch64", "./model-a64"], s, range(8))
    for a, b in zip(native, cross):
        assert np.allclose(a[0], b[0], rtol=1e-6, atol=1e-7)


def test_make_with_another_compiler_rebuilds_the_program(digits_export, tmp_path):
    """The README's two builds, one after the other: `make CC=aarch64-linux-gnu-gcc LDFLAGS=-static`
    after `make` said "Nothing to be done" and left the x86 program (and `npukit build` then failed
    on an aarch64 one); the compiler and flags are now a dependency of the program."""
    _need("aarch64-linux-gnu-gcc", "qemu-aarch64")
    s, _ = digits_export
    d = tmp_path / "export"
    s.export(d)

    def build(*args):
        r = subprocess.run(["make", "-s", *args], cwd=d, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        return (d / "model").read_bytes()[:20]

    native = build()
    assert native[18] == 0x3E  # ELF e_machine: x86-64
    assert build("CC=aarch64-linux-gnu-gcc", "LDFLAGS=-static")[18] == 0xB7  # aarch64
    cross = _run_all(d, ["qemu-aarch64", "./model"], s, range(2))
    assert build()[18] == 0x3E  # and back
    for a, b in zip(_run_all(d, ["./model"], s, range(2)), cross):
        assert np.allclose(a[0], b[0], rtol=1e-6, atol=1e-7)
    r = subprocess.run(["make", "-q"], cwd=d)  # nothing changed: up to date
    assert r.returncode == 0


def test_valgrind_is_clean(digits_export):
    _need("valgrind")
    s, d = digits_export
    g = s.graph
    np.save(d / "v0.npy", s.data.samples[0][0].reshape(g.tensors[g.inputs[0]].shape))
    (d / "vout").mkdir(exist_ok=True)
    r = subprocess.run(["valgrind", "-q", "--error-exitcode=1", "--leak-check=full", "./model", "v0.npy", "vout"],
                       cwd=d, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]


def test_fp32_export_matches_onnxruntime(tmp_path):
    """Every op at fp32 (the DLA's ops disabled, the DSP at fp32): the program equals onnxruntime."""
    import onnxruntime as ort

    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla")
    for k in sorted({op.kind for op in s.graph.ops}):
        if k in s.soc.processor("dla").ops:
            s.set_support("dla", k, False)
    s.set_bits("fp32", processor="dsp")
    assert set(s.result.bits) == {"fp32"}
    d = tmp_path / "fp32"
    s.export(d)
    make(d)
    got = _run_all(d, ["./model"], s, range(16))
    sess = ort.InferenceSession(str(DIGITS_ONNX))
    name = sess.get_inputs()[0].name
    for i, out in enumerate(got):
        want = sess.run(None, {name: s.data.samples[i][0].reshape(1, 1, 8, 8)})[0]
        assert np.allclose(out[0], want, rtol=1e-5, atol=1e-6), np.max(np.abs(out[0] - want))


def test_export_is_byte_identical_across_processes(tmp_path):
    code = ("import sys, npukit; s = npukit.Study(sys.argv[1], 'tda4vm-like'); "
            "s.set_bits('int16', processor='c7x'); s.export(sys.argv[2])")  # fmt: skip
    outs = []
    for seed in ("1", "4242"):
        d = tmp_path / f"e{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        r = subprocess.run([sys.executable, "-c", code, str(DIGITS_ONNX), str(d)], env=env, capture_output=True,
                           text=True, cwd=str(ROOT), timeout=300)  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        outs.append({p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()})
    assert outs[0].keys() == outs[1].keys() and all(outs[0][k] == outs[1][k] for k in outs[0])


HOSTILE = ['a "quote" */ end', "#define X 1", "line\\\nnext", "// c++", "int", "return", "ünï/名前/🙂", "../../x", "main"]


def _chain(names, inp, out):
    from onnx import TensorProto, numpy_helper
    from onnx import helper as h

    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), names[0] + "_w")
    nodes = [h.make_node("Conv", [inp, names[0] + "_w"], ["c0"], name=names[0], pads=[1, 1, 1, 1])]
    prev = "c0"
    for k, nm in enumerate(names[1:]):
        o = out if k == len(names) - 2 else f"t{k}"
        nodes.append(h.make_node("Relu" if k % 2 == 0 else "Sigmoid", [prev], [o], name=nm))
        prev = o
    m = onnx_model(nodes, [tensor_info(inp, [1, 3, 8, 8])], [tensor_info(out, [1, 8, 8, 8], TensorProto.FLOAT)], [w])
    return m


C_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')  # a C string literal on one line


def test_hostile_names_compile_and_change_nothing(tmp_path):
    plain = save_onnx(_chain([f"n{i}" for i in range(len(HOSTILE))], "x", "y"), tmp_path / "plain.onnx")
    hostile = save_onnx(_chain(HOSTILE, 'in"put */\nv', "out int;"), tmp_path / "hostile.onnx")
    results = []
    for path in (plain, hostile):
        s = npukit.Study(path, "arm-dsp-dla", placement="first-fit")  # the names reach the DLA's wrapper too
        d = tmp_path / path.stem
        s.export(d)
        make(d)  # -std=c11 -Wall -Wextra -Werror
        results.append(_run_all(d, ["./model"], s, range(4)))
        files = sorted(d.glob("src/*.c")) + sorted(d.glob("include/*.h"))
        assert d / "src/partitions_nvdla.c" in files
        for f in files:
            for line in f.read_text().splitlines():
                assert not line.lstrip().startswith("#define X"), line  # no name starts a directive
                for name in HOSTILE:
                    if name in ("int", "return", "main") or name not in line:  # a bare keyword appears as C itself
                        continue
                    k = line.index(name)
                    # a name appears only inside a C string literal (the failed step's words; quotes,
                    # backslashes and line ends escaped), or inside a comment that it does not close
                    if any(m.start() < k and k + len(name) < m.end() for m in C_STRING.finditer(line)):
                        continue
                    assert "/*" in line[:k] and "*/" in line[k + len(name):] and "*/" not in name, line
    for a, b in zip(*results):
        assert np.array_equal(a[0], b[0])


def test_integer_path_within_one_lsb_on_every_sample(tmp_path):
    """The digits CNN without its softmax: every op on the DLA at int8 (conv, relu, pooling, FC), so
    the model's output is the integer path's own output.  On all 450 test images it is within 1 LSB
    of the simulation (the simulation computes in float, the kernels in integers: a value within
    float32 error of a rounding boundary may land one step away)."""
    import onnx

    m = onnx.load(str(DIGITS_ONNX))
    sm = next(n for n in m.graph.node if n.op_type == "Softmax")
    logits = sm.input[0]
    m.graph.node.remove(sm)
    del m.graph.output[:]
    m.graph.output.append(onnx.helper.make_tensor_value_info(logits, onnx.TensorProto.FLOAT, [1, 10]))
    path = save_onnx(m, tmp_path / "logits.onnx")
    shutil.copy(DIGITS_ONNX.with_suffix(".npz"), tmp_path / "logits.npz")
    s = npukit.Study(path, "arm-dsp-dla")
    assert set(s.result.plan.processor) == {"dla"} and set(s.result.bits) == {"int8"}
    d = tmp_path / "int8"
    s.export(d)
    make(d)
    n = len(s.data.samples)
    got = _run_all(d, ["./model"], s, range(n))
    ref = pipeline.simulate(s.result, s.data, range(n))
    c = s.project.files["src/partitions_nvdla.c"]
    scale = float(c.split("/* " + logits)[0].rsplit("NVDLA_ROW_MAJOR, 1, ", 1)[1].split("f,")[0])
    steps = np.array([np.max(np.abs(a[0] - np.asarray(b[0]))) / scale for a, b in zip(got, ref)])
    assert n == 450 and steps.max() <= 1.0 + 1e-3, steps.max()
    assert np.mean(steps < 1e-3) > 0.9  # most outputs are bit-exact


def test_int8_tflite_keeps_top1_and_accuracy(tmp_path):
    """The int8 TFLite digits (DLA int8, softmax on the DSP at int16): a softmax turns one int8 step
    of a logit into several steps of a probability, so the figures held are top-1 agreement (>= 99.5%)
    and accuracy (within 0.5 points) against the simulation, on all 450 images."""
    from conftest import DIGITS_INT8

    s = npukit.Study(DIGITS_INT8, "arm-dsp-dla")
    got, ref = _first_outputs(s, tmp_path / "int8")
    y = s.data.labels
    assert np.mean(got.argmax(1) == ref.argmax(1)) >= 0.995
    assert abs(np.mean(got.argmax(1) == y) - np.mean(ref.argmax(1) == y)) <= 0.005


@pytest.mark.slow
def test_mobilenet_int8_on_the_npu_within_one_lsb(tmp_path):
    s = npukit.Study(MOBILENET, "ethos-u55-256")
    d = tmp_path / "mnet"
    s.export(d)
    make(d)
    got = _run_all(d, ["./model"], s, range(8))
    ref = pipeline.simulate(s.result, s.data, range(8))
    for a, b in zip(got, ref):
        assert np.max(np.abs(a[0].astype(np.int32) - np.asarray(b[0]).astype(np.int32))) <= 1  # int8 output


def _residual_block(tmp_path):
    """conv + bias + relu, conv + bias, + the block's input: a residual block at the accelerator's
    bit-width, its biases not on the integer grid of their accumulators."""
    from onnx import helper as h

    x = tensor_info("x", [1, 8, 8, 8])
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv_a", pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c1"], ["r1"], name="relu_a"),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv_b", pads=[1, 1, 1, 1]),
             h.make_node("Add", ["c2", "x"], ["res"], name="residual")]  # fmt: skip
    inits = [initializer("w1", [8, 8, 3, 3], 1), initializer("b1", [8], 2), initializer("w2", [8, 8, 3, 3], 3),
             initializer("b2", [8], 4)]  # fmt: skip
    return save_onnx(onnx_model(nodes, [x], [tensor_info("res", [1, 8, 8, 8])], inits), tmp_path / "resid.onnx")


@pytest.mark.parametrize("placement", ["cost", "first-fit"])
@pytest.mark.parametrize("bits", ["int4", "int2"])
def test_low_bit_residual_block_matches_the_simulation(bits, placement, tmp_path):
    """riscv-accel at int4 / int2: the convs on the accelerator (the residual add too with
    first-fit; on the int8 host after a boundary with cost).  The C outputs are within one step of
    the output's grid of the simulation (the documented tolerance: float32 near a rounding
    boundary) and bit-exact on nearly every value.  A bias rounded to in_scale * w_scale (a
    sizeable part of an output step at 4 / 2 bits) used to move 1.6% (int4) / 8.9% (int2) of the
    values by one accelerator step: 17 / 86 steps of the int8 grid after the host's add."""
    from npukit.quant import act_params

    s = npukit.Study(_residual_block(tmp_path), "riscv-accel", placement=placement)
    s.set_bits(bits, processor="accel")
    procs = dict(zip(s.placement["name"], s.placement["processor"]))
    assert procs["conv_a"] == procs["conv_b"] == "accel"
    assert procs["residual"] == ("accel" if placement == "first-fit" else "riscv")
    assert "bias at in_scale*w_scale/2^" in s.code["src/weights.c"]  # the biases' finer grid (bias_shift)
    got, ref = _first_outputs(s, tmp_path / "export")
    g = s.graph
    out = g.outputs[0]
    lo, hi = pipeline.calibration(s.result.model, s.data)[out]
    step = float(act_params(lo, hi, s.result.bits[g.tensors[out].producer])[0])
    diff = np.abs(got.astype(np.float64) - ref)
    assert diff.max() <= step * (1 + 1e-4), diff.max() / step
    assert np.mean(diff <= 1e-5 * step) >= 0.99, np.mean(diff <= 1e-5 * step)


def test_fp16_matches_the_simulation_within_one_fp16_step(tmp_path):
    """DLA and DSP at fp16 (float arithmetic, every stored value rounded to binary16): the C program
    equals the simulation within one fp16 step of nearly every output value (a few steps at most),
    and bit-exact nearly everywhere."""
    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla").pin("/softmax/Softmax", "dsp")
    s.set_bits("fp16", processor="dla").set_bits("fp16", processor="dsp")
    assert set(s.result.bits) == {"fp16"}
    got, ref = _first_outputs(s, tmp_path / "fp16")
    step = np.spacing(np.abs(ref).astype(np.float16)).astype(np.float64)
    # below fp16's least normal (2^-14) the steps are subnormal (2^-24): a few of them apart there
    tol = np.where(np.abs(ref) >= 2.0**-14, step, 2.0**-20)
    diff = np.abs(got.astype(np.float64) - ref)
    # the softmax turns one fp16 step of a logit into a few steps of a small probability
    assert np.mean(diff <= tol) >= 0.999 and np.all(diff <= 4 * tol), float(np.max(diff / tol))
    assert np.mean(diff == 0) >= 0.99
    assert np.mean(got.argmax(1) == ref.argmax(1)) == 1.0


def test_two_host_convs_feeding_one_add_run_in_order(tmp_path):
    """Two convs of one input feeding one add, all on the host: the host's kernels are (conv_a,
    add) -- the add fused as conv_a's epilogue -- and (conv_b); by first op the first reads conv_b's
    output before conv_b runs, and the export failed with a KeyError (conv_b's output on 'arm').  The
    kernels now run in an order they can (conv_b first), and the program equals onnxruntime."""
    import onnxruntime as ort
    from onnx import helper as h

    x = tensor_info("x", [1, 4, 6, 6])
    nodes = [h.make_node("Conv", ["x", "wa", "ba"], ["ca"], name="conv_a", pads=[1, 1, 1, 1]),
             h.make_node("Conv", ["x", "wb", "bb"], ["cb"], name="conv_b", pads=[1, 1, 1, 1]),
             h.make_node("Add", ["ca", "cb"], ["y"], name="join")]  # fmt: skip
    inits = [initializer("wa", [4, 4, 3, 3], 1), initializer("ba", [4], 2), initializer("wb", [4, 4, 3, 3], 3),
             initializer("bb", [4], 4)]  # fmt: skip
    path = save_onnx(onnx_model(nodes, [x], [tensor_info("y", [1, 4, 6, 6])], inits), tmp_path / "two_convs.onnx")
    s = npukit.Study(path, "arm-dsp-dla", {"disabled": ["dla:conv2d", "dla:add", "dsp:conv2d", "dsp:add"]})
    assert set(s.plan.processor) == {"arm"} and set(s.result.bits) == {"fp32"}
    d = tmp_path / "export"
    s.export(d)
    make(d)
    got = _run_all(d, ["./model"], s, range(4))
    sess = ort.InferenceSession(str(path))
    for i, out in enumerate(got):
        want = sess.run(None, {"x": s.data.samples[i][0].reshape(1, 4, 6, 6)})[0]
        assert np.allclose(out[0], want, rtol=1e-5, atol=1e-5), np.max(np.abs(out[0] - want))
    model_c = s.code["src/model.c"]
    assert model_c.index("conv_b") < model_c.index("conv_a")  # (the kernel of conv_a and the add runs second)
