"""The canonical form at import (npukit/tvm/frontends/canon.py): what each rule matches, what it makes,
the names it keeps and the values it keeps, on small models exported by torch (ONNX and .pt2) or
written with onnx.helper.  Every module is run by TVM and compared with torch / onnxruntime."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import initializer, onnx_model, save_onnx, tensor_info

import npukit

torch = pytest.importorskip("torch")
nn = torch.nn


def _vm_run(mod, *xs):
    import tvm
    from tvm import relax

    target = tvm.target.Target({"kind": "llvm"})
    ex = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    out = relax.VirtualMachine(ex, tvm.cpu())["main"](*[tvm.runtime.tensor(x) for x in xs])
    while not hasattr(out, "numpy"):
        out = out[0]
    return out.numpy()


def _export(model, x, tmp_path, name):
    """(onnx path, pt2 path) of ``model`` exported as make_families does (legacy exporter, opset 17)."""
    torch.manual_seed(0)
    model = model.eval()
    onnx_path, pt2_path = tmp_path / f"{name}.onnx", tmp_path / f"{name}.pt2"
    torch.onnx.export(model, (x,), str(onnx_path), opset_version=17, dynamo=False, input_names=["x"])
    torch.export.save(torch.export.export(model, (x,)), str(pt2_path))
    return onnx_path, pt2_path


def _close(got, ref, rel=1e-5):
    assert np.abs(got - ref).max() <= rel * max(np.abs(ref).max(), 1e-6), np.abs(got - ref).max()


def _with_stats(model):
    torch.manual_seed(0)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return model.eval()


class ConvBN(nn.Module):
    def __init__(self, bias):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3, padding=1, bias=bias), nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


@pytest.mark.parametrize("bias", [False, True])
def test_batch_norm_after_conv_folds_into_its_weights_and_bias(tmp_path, bias):
    torch.manual_seed(0)
    model, x = _with_stats(ConvBN(bias)), torch.randn(1, 3, 8, 8)
    with torch.no_grad():
        ref = model(x).numpy()
    onnx_path, pt2_path = _export(model, x, tmp_path, "convbn")
    g = npukit.import_model(pt2_path).graph
    assert [(op.name, op.kind) for op in g.ops] == [("conv", "conv2d"), ("conv/add", "add"), ("relu", "relu")]
    assert g.elided["bn"] == "batch normalization folded into the weights and bias of 'conv' at import (inference form)"
    assert [op.kind for op in npukit.import_model(onnx_path).graph.ops] == ["conv2d", "add", "relu"]
    for path in (onnx_path, pt2_path):
        _close(_vm_run(npukit.import_model(path).mod, x.numpy()), ref)


class LinearBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.bn = nn.Linear(8, 4), nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(self.fc(x))


def test_batch_norm_after_a_linear_layer_folds_into_the_matmul(tmp_path):
    torch.manual_seed(0)
    model, x = _with_stats(LinearBN()), torch.randn(2, 8)
    with torch.no_grad():
        ref = model(x).numpy()
    onnx_path, pt2_path = _export(model, x, tmp_path, "linbn")
    imp = npukit.import_model(pt2_path)
    assert [(op.name, op.kind) for op in imp.graph.ops] == [("fc", "matmul"), ("fc/add", "add")]
    assert "bn" in imp.graph.elided
    _close(_vm_run(imp.mod, x.numpy()), ref)
    # the ONNX of the same network: TVM's frontend binds the batch norm's three outputs to a tuple and
    # reads the normalized one back from it; it folds all the same (it stayed an op of its own)
    imp = npukit.import_model(onnx_path)
    assert [op.kind for op in imp.graph.ops] == ["matmul", "add"]
    assert imp.graph.elided["/bn/BatchNormalization"].startswith("batch normalization folded into the weights and bias")
    _close(_vm_run(imp.mod, x.numpy()), ref)


class ConvBNReadTwice(ConvBN):
    def forward(self, x):
        y = self.conv(x)
        return self.bn(y) + y


def test_batch_norm_stays_when_the_conv_output_is_read_elsewhere(tmp_path):
    model, x = _with_stats(ConvBNReadTwice(False)), torch.randn(1, 3, 8, 8)
    _, pt2_path = _export(model, x, tmp_path, "convbn2")
    assert [op.kind for op in npukit.import_model(pt2_path).graph.ops] == ["conv2d", "batch_norm", "add"]


# ---------------------------------------------------------------------------------------------
# GELU written as erf arithmetic (ONNX before opset 20 has no Gelu)


def _gelu_graph(order: str, half: float = 0.5):
    from onnx import helper as h
    from onnx import numpy_helper

    c = {"sqrt2": math.sqrt(2.0), "inv": 1 / math.sqrt(2.0), "one": 1.0, "half": half}
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in c.items()]
    if order == "torch":  # what torch's exporter writes: Div, Erf, Add, Mul(x, .), Mul(., 0.5)
        nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="fc"),
                 h.make_node("Div", ["m", "sqrt2"], ["d"], name="gelu/Div"),
                 h.make_node("Erf", ["d"], ["e"], name="gelu/Erf"),
                 h.make_node("Add", ["e", "one"], ["a"], name="gelu/Add"),
                 h.make_node("Mul", ["m", "a"], ["p"], name="gelu/Mul"),
                 h.make_node("Mul", ["p", "half"], ["y"], name="gelu/Mul_1")]  # fmt: skip
    else:  # constants first, x * 0.5 first, the division written as a product
        nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="fc"),
                 h.make_node("Mul", ["inv", "m"], ["d"], name="gelu/scale"),
                 h.make_node("Erf", ["d"], ["e"], name="gelu/Erf"),
                 h.make_node("Add", ["one", "e"], ["a"], name="gelu/Add"),
                 h.make_node("Mul", ["half", "m"], ["p"], name="gelu/half"),
                 h.make_node("Mul", ["a", "p"], ["y"], name="gelu/out")]  # fmt: skip
    return onnx_model(nodes, [tensor_info("x", [2, 8])], [tensor_info("y", [2, 4])],
                      [initializer("w", [8, 4]), *inits])  # fmt: skip


@pytest.mark.parametrize(("order", "out"), [("torch", "gelu/Mul_1"), ("other", "gelu/out")])
def test_erf_gelu_becomes_one_gelu_named_after_its_output_node(tmp_path, order, out):
    import onnxruntime as ort

    path = save_onnx(_gelu_graph(order), tmp_path / f"gelu_{order}.onnx")
    imp = npukit.import_model(path)
    assert [(op.name, op.kind) for op in imp.graph.ops] == [("fc", "matmul"), (out, "gelu")]
    parts = sorted(k for k, v in imp.graph.elided.items() if v.startswith("part of a GELU"))
    assert parts == sorted({"gelu/Div", "gelu/scale", "gelu/Erf", "gelu/Add", "gelu/Mul", "gelu/half"} - {out}
                           & {n.name for n in _gelu_graph(order).graph.node})  # fmt: skip
    assert imp.graph.elided["gelu/Erf"].endswith(f"named after the node that makes its output ({out!r})")
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    ref = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    _close(_vm_run(imp.mod, x), ref, 1e-4)


def test_erf_arithmetic_that_is_not_gelu_stays(tmp_path):
    path = save_onnx(_gelu_graph("torch", half=0.4), tmp_path / "not_gelu.onnx")
    kinds = [op.kind for op in npukit.import_model(path).graph.ops]
    assert kinds == ["matmul", "divide", "erf", "add", "multiply", "multiply"]


# ---------------------------------------------------------------------------------------------
# roll, chunk, split, clip


class Roll(nn.Module):
    def forward(self, x):
        return torch.relu(torch.roll(x, shifts=(1, -2), dims=(2, 3)))


def test_roll_is_slices_and_a_concat_from_both_formats(tmp_path):
    x = torch.randn(1, 2, 5, 6)
    onnx_path, pt2_path = _export(Roll(), x, tmp_path, "roll")
    want = ["strided_slice", "strided_slice", "concat"] * 2 + ["relu"]
    for path in (onnx_path, pt2_path):
        imp = npukit.import_model(path)
        assert [op.kind for op in imp.graph.ops] == want, path.name
        _close(_vm_run(imp.mod, x.numpy()), torch.relu(torch.roll(x, (1, -2), (2, 3))).numpy(), 0)
    names = [op.name for op in npukit.import_model(pt2_path).graph.ops]
    assert names[5] == "roll" and all(n.startswith("roll/") for n in names[:5])


class EdgePads(nn.Module):
    def forward(self, x):
        a = nn.functional.pad(x, (2, 1, 0, 3), mode="reflect")
        b = nn.functional.pad(x, (1, 2, 3, 0), mode="replicate")
        c = nn.functional.pad(x[0, :, :, :3], (0, 2), mode="reflect")
        return torch.relu(a + b), c


def test_reflect_and_replicate_pads_are_one_pad_from_both_formats(tmp_path):
    """torch.export's reflection / replication pad arrives as one ``take`` of a computed index per
    padded axis (two gathers of a 2-D pad, a gather kernel in the generated code) where the ONNX
    export is one ``Pad``: m1.pt2 gave 21 ops with 4 ``take`` against the ONNX file's 19.  Both now
    give one ``pad`` per ``F.pad``, with the same widths and modes, and TVM runs them as torch does."""
    x = torch.randn(1, 2, 5, 4)
    want = [("add", None, None), ("pad", "reflect", (0, 0, 0, 0, 0, 2)), ("pad", "reflect", (0, 0, 0, 0, 0, 3, 2, 1)),
            ("pad", "replicate", (0, 0, 0, 0, 3, 0, 1, 2)), ("relu", None, None), ("strided_slice", None, None),
            ("take", None, None)]  # fmt: skip (in the order each exporter lists them: sorted here)
    ref = EdgePads()(x)
    for path in _export(EdgePads(), x, tmp_path, "pads"):
        imp = npukit.import_model(path)
        got = [(op.kind, op.attrs.get("pad_mode"), op.attrs.get("pad_width")) for op in imp.graph.ops]
        assert sorted(got, key=repr) == want, path.name
    import tvm
    from tvm import relax

    target = tvm.target.Target({"kind": "llvm"})
    ex = tvm.compile(imp.mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    outs = relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x.numpy()))
    _close(outs[0].numpy(), ref[0].numpy(), 0)
    _close(outs[1].numpy(), ref[1].numpy(), 0)


def test_a_gather_that_is_no_pad_stays_a_gather():
    from npukit.tvm.frontends.canon_moves import _pad_of_index

    assert _pad_of_index(np.array([1, 0, 1, 2, 3, 2]), 4) == ("reflect", 1, 1)
    assert _pad_of_index(np.array([0, 0, 1, 2, 3, 3, 3]), 4) == ("replicate", 1, 2)
    assert _pad_of_index(np.array([3, 0, 1, 2, 3, 0]), 4) == ("circular", 1, 1)
    assert _pad_of_index(np.array([2, 0, 1, 2, 3]), 4) is None  # neither edge, mirror nor wrap
    assert _pad_of_index(np.array([3, 2, 1, 0, 1, 2, 3]), 4) == ("reflect", 3, 0)
    assert _pad_of_index(np.array([0, 1, 2, 3]), 4) is None  # no padding: not a pad
    assert _pad_of_index(np.array([0, 1, 2, 3, 2, 1, 0, 1]), 4) is None  # reflect wider than the axis


class GridSample(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 1)

    def forward(self, x):
        grid = torch.tanh(self.conv(x)[:, :, :3, :]).permute(0, 2, 3, 1)  # [N, 3, 5, 2]
        return nn.functional.grid_sample(x, grid, align_corners=False)


def test_a_torch_grid_sample_reads_its_grid_as_torch_does(tmp_path):
    """torch's grid is [N, H_out, W_out, 2] and Relax's grid_sample reads [N, 2, H_out, W_out]: TVM's
    torch converter passed the grid as it is, so the .pt2 imported with an output of shape
    (1, 2, 3, 2) (the program wrote that, of the wrong samples) where torch and the ONNX export give
    (1, 2, 3, 5).  Both formats now give the same ops and TVM runs them as torch does."""
    torch.manual_seed(0)
    x = torch.randn(1, 2, 4, 5)
    net = GridSample().eval()
    want = net(x).detach().numpy()
    for path in _export(net, x, tmp_path, "grid"):
        imp = npukit.import_model(path)
        assert [op.kind for op in imp.graph.ops] == ["conv2d", "add", "strided_slice", "tanh", "grid_sample"], path.name
        got = _vm_run(imp.mod, x.numpy())
        assert got.shape == want.shape == (1, 2, 3, 5), path.name
        _close(got, want)


class LastStep(nn.Module):
    def forward(self, x):
        return (torch.relu(x) + 1.0)[:, -1] * 3.0


def test_an_index_from_the_end_is_counted_from_the_start_in_both_formats(tmp_path):
    """``x[:, -1]``: torch.export's select(-1) became take(x, -1), which TVM's take reads before the
    tensor (the generated C and the simulation gave numbers from outside it); the ONNX importer
    counts a Gather's -1 from the start.  Both formats now take index 7 of 8."""
    x = torch.rand(1, 8, 4)
    want = LastStep()(x).numpy()
    for path in _export(LastStep(), x, tmp_path, "last"):
        imp = npukit.import_model(path)
        assert [op.kind for op in imp.graph.ops] == ["relu", "add", "take", "multiply"], path.name
        assert "R.const(7, \"int64\")" in imp.mod.script(), path.name
        _close(_vm_run(imp.mod, x.numpy()), want, 0)


class Normed(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.ln = nn.LayerNorm(8, eps=1e-5)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return torch.relu(self.ln(self.fc(x)))


@pytest.mark.parametrize("opset", [13, 17])
def test_a_layer_norm_is_one_op_whatever_the_opset(tmp_path, opset):
    """Before opset 17 torch's ONNX exporter writes LayerNorm as nine ops (mean, subtract, power, mean,
    add, sqrt, divide, multiply, add): a ViT took 102 ops in place of 62 and +69% latency on
    tda4vm-like.  They import as the one layer_norm opset 17 and a .pt2 give."""
    torch.manual_seed(0)
    model, x = Normed().eval(), torch.randn(1, 5, 8)
    path = tmp_path / f"ln{opset}.onnx"
    torch.onnx.export(model, (x,), str(path), opset_version=opset, dynamo=False, input_names=["x"])
    imp = npukit.import_model(path)
    assert [op.kind for op in imp.graph.ops] == ["matmul", "add", "layer_norm", "relu"]
    ln = imp.graph.ops[2]
    assert ln.attrs["epsilon"] == pytest.approx(1e-5) and [imp.graph.tensors[t].name for t in ln.inputs[1:]] == [
        "ln.weight", "ln.bias"]  # fmt: skip
    _close(_vm_run(imp.mod, x.numpy()), model(x).detach().numpy())


class Pieces(nn.Module):
    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        c, d = x.split([1, 3], dim=1)
        return torch.cat([b, a, torch.relu(c), d], dim=1)


def test_chunk_is_slices_and_split_stays_a_split_in_both_formats(tmp_path):
    x = torch.randn(1, 4, 3, 3)
    onnx_path, pt2_path = _export(Pieces(), x, tmp_path, "pieces")
    for path in (onnx_path, pt2_path):
        imp = npukit.import_model(path)
        assert sorted(op.kind for op in imp.graph.ops) == ["concat", "relu", "split", "strided_slice",
                                                           "strided_slice"], path.name  # fmt: skip
        _close(_vm_run(imp.mod, x.numpy()), Pieces()(x).numpy(), 0)


@pytest.mark.parametrize(("hi", "want_hi"), [(6.0, 6.0), (float("nan"), math.inf)])
def test_onnx_clip_with_constant_bounds_is_one_clip(tmp_path, hi, want_hi):
    import onnxruntime as ort
    from onnx import helper as h
    from onnx import numpy_helper

    inits = [numpy_helper.from_array(np.asarray(0.0, np.float32), "lo"),
             numpy_helper.from_array(np.asarray(hi, np.float32), "hi")]  # fmt: skip
    m = onnx_model([h.make_node("Clip", ["x", "lo", "hi"], ["y"], name="relu6")], [tensor_info("x", [1, 8])],
                   [tensor_info("y", [1, 8])], inits)  # fmt: skip
    path = save_onnx(m, tmp_path / "clip.onnx")
    imp = npukit.import_model(path)
    (op,) = imp.graph.ops
    assert (op.name, op.kind, op.attrs["min"], op.attrs["max"]) == ("relu6", "clip", 0.0, want_hi)
    x = (np.arange(8, dtype=np.float32) - 2) * 2
    _close(_vm_run(imp.mod, x[None]), ort.InferenceSession(str(path)).run(None, {"x": x[None]})[0], 0)


class PoolAmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2, ceil_mode=True)  # stride written as []
        return y.amax(dim=(2, 3)), y.amin(dim=1, keepdim=True)


def test_a_pool_without_a_stride_and_amax_amin_import_from_a_pt2(tmp_path):
    """``F.max_pool2d(x, 2, ceil_mode=True)`` (torch writes the stride as ``[]``) and ``amax`` / ``amin``
    failed TVM's PyTorch importer (a stride check; no converter) while their ONNX imported: now
    both formats give the same ops, and TVM runs both to torch's outputs."""
    torch.manual_seed(0)
    model, x = PoolAmax().eval(), torch.randn(1, 3, 9, 9)
    with torch.no_grad():
        ref = [r.numpy() for r in model(x)]
    onnx_path, pt2_path = _export(model, x, tmp_path, "poolamax")
    kinds = [[op.kind for op in npukit.import_model(p).graph.ops] for p in (onnx_path, pt2_path)]
    assert kinds[0] == kinds[1] == ["conv2d", "add", "relu", "max_pool2d", "max", "min"]
    import tvm
    from tvm import relax

    target = tvm.target.Target({"kind": "llvm"})
    for path in (onnx_path, pt2_path):
        mod = npukit.import_model(path).mod
        ex = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
        out = relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x.numpy()))
        for got, want in zip((out[0].numpy(), out[1].numpy()), ref, strict=True):
            _close(got, want)


def _residual_qdq(tmp_path, shared: bool):
    """int8 QDQ: x -> dequantize, read by a conv (-> quantize -> dequantize) and by the residual add
    after it (-> quantize); ``shared``: one DequantizeLinear for both readers, as onnxruntime's
    quantize_static writes it, else one per reader."""
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(1)
    dq_x = [h.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"], name="dq")]
    add_in = "xf" if shared else "xf2"
    if not shared:
        dq_x.append(h.make_node("DequantizeLinear", ["x", "s", "z"], ["xf2"], name="dq_add"))
    nodes = [*dq_x,
             h.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wf"], name="dq_w"),
             h.make_node("Conv", ["xf", "wf"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             h.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"], name="q_conv"),
             h.make_node("DequantizeLinear", ["cq", "s", "z"], ["cf"], name="dq_conv"),
             h.make_node("Add", ["cf", add_in], ["a"], name="add"),
             h.make_node("QuantizeLinear", ["a", "s", "z"], ["y"], name="q_add")]  # fmt: skip
    inits = [nh.from_array(np.array(0.05, np.float32), "s"), nh.from_array(np.array(-2, np.int8), "z"),
             nh.from_array(rng.integers(-60, 60, (8, 8, 3, 3)).astype(np.int8), "wq"),
             nh.from_array(np.array(0.01, np.float32), "ws"), nh.from_array(np.array(0, np.int8), "wz")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 8, 6, 6], TensorProto.INT8)], [tensor_info("y", [1, 8, 6, 6], TensorProto.INT8)],
                   inits, opset=13)  # fmt: skip
    return save_onnx(m, tmp_path / f"residual_{'shared' if shared else 'own'}.onnx")


def test_a_dequantize_two_ops_read_becomes_one_per_reader(tmp_path):
    """A DequantizeLinear read by a conv and by the add after it fused into neither pattern: it ran
    alone on the host between two CMSIS-NN calls.  Each reader now gets its own copy, named after
    the node, so the file places and costs as the one that writes a DequantizeLinear per reader."""
    import onnxruntime as ort

    shared, own = _residual_qdq(tmp_path, True), _residual_qdq(tmp_path, False)
    g = npukit.import_model(shared).graph
    assert [op.name for op in g.ops if op.kind == "dequantize"] == ["dq/dequantize", "dq", "dq_conv"]  # one node, two ops
    studies = [npukit.Study(p, "cortex-m7-cmsis-nn", placement="first-fit") for p in (shared, own)]
    assert [s.plan.pattern for s in studies][0][:2] == ("cmsis_nn.dequantize_conv2d_quantize", "")
    a, b = ((s.plan.processor, s.plan.pattern, s.totals["partitions"]) for s in studies)
    assert a == b
    assert studies[0].totals["latency_us"] == pytest.approx(studies[1].totals["latency_us"], rel=1e-12)
    x = np.random.default_rng(2).integers(-128, 128, (1, 8, 6, 6)).astype(np.int8)
    ref = ort.InferenceSession(str(shared), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = _vm_run(npukit.import_model(shared).mod, x)
    assert np.abs(got.astype(int) - ref.astype(int)).max() <= 1  # one step of rounding at most


@pytest.mark.parametrize("out_scale,fires", [(0.05, True), (0.1, False)])
def test_a_dequantize_view_quantize_of_one_scale_is_the_view_of_the_int8_tensor(tmp_path, out_scale, fires):
    """A QDQ model's flatten between two int8 layers (dequantize -> reshape -> quantize, one scale)
    moves the int8 tensor itself, as the int8 TFLite model does: no dequantize or quantize is left
    to run alone on the host.  With another output scale it is a requantization and stays."""
    import onnxruntime as ort
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    nodes = [h.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"], name="dq"),
             h.make_node("Flatten", ["xf"], ["f"], name="flatten"),
             h.make_node("QuantizeLinear", ["f", "s2", "z"], ["y"], name="q")]  # fmt: skip
    inits = [nh.from_array(np.array(0.05, np.float32), "s"), nh.from_array(np.array(out_scale, np.float32), "s2"),
             nh.from_array(np.array(3, np.int8), "z")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 4, 3, 3], TensorProto.INT8)], [tensor_info("y", [1, 36], TensorProto.INT8)],
                   inits, opset=13)  # fmt: skip
    path = save_onnx(m, tmp_path / "flatten_qdq.onnx")
    imp = npukit.import_model(path)
    kinds = [op.kind for op in imp.graph.ops]
    assert kinds == (["reshape"] if fires else ["dequantize", "reshape", "quantize"])
    if fires:
        assert imp.graph.elided["q"] == "a dequantize -> view -> quantize of one scale is the view of the integer tensor at import"
        assert [op.name for op in imp.graph.ops] == ["flatten"]
    x = np.random.default_rng(3).integers(-128, 128, (1, 4, 3, 3)).astype(np.int8)
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(_vm_run(imp.mod, x), ref)
