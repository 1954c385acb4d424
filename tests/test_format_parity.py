"""One network, several files: ONNX at opsets 11, 13 and 17 (torch's legacy exporter) and a .pt2
(torch.export) give the same ops, MACs and placement, and the module still computes the torch
model's output.  A small attention block (LayerNorm, qkv Linear, unbind, scaled QK^T, softmax,
AV, out-projection, GELU MLP) and a resize to a given size."""

from __future__ import annotations

import numpy as np
import pytest

import npukit
from npukit.opset import work

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional
OPSETS = (11, 13, 17)


class Attention(nn.Module):
    def __init__(self, d=32, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 64), nn.Linear(64, d)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        a = ((q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5).softmax(-1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Upsample(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 2, 1)

    def forward(self, x):
        return F.interpolate(self.conv(x), size=(8, 8), mode="bilinear", align_corners=False)


def _export(model, x, folder, name):
    torch.manual_seed(0)
    model = model.eval()
    paths = []
    for opset in OPSETS:
        p = folder / f"{name}_{opset}.onnx"
        torch.onnx.export(model, (x,), str(p), opset_version=opset, dynamo=False, input_names=["x"])
        paths.append(p)
    p = folder / f"{name}.pt2"
    torch.export.save(torch.export.export(model, (x,)), str(p))
    return paths + [p]


def _vm_run(mod, x):
    import tvm
    from tvm import relax

    target = tvm.target.Target({"kind": "llvm"})
    ex = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    out = relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x))
    while not hasattr(out, "numpy"):
        out = out[0]
    return out.numpy()


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    torch.manual_seed(0)
    model, x = Attention(), torch.randn(1, 8, 32)
    return _export(model, x, tmp_path_factory.mktemp("attn"), "attn"), model, x


# the ops of the attention block, the same from every file: softmax one op (ONNX before opset 13
# coerces it to 2-D: reshape, softmax, reshape), unbind one split and a squeeze per piece (torch.export:
# one strided slice per piece)
ATTENTION_OPS = [
    "layer_norm", "matmul", "add", "reshape", "permute_dims", "split", "squeeze", "squeeze", "squeeze",
    "permute_dims", "matmul", "multiply", "softmax", "matmul", "permute_dims", "reshape", "matmul", "add", "add",
    "layer_norm", "matmul", "add", "gelu", "matmul", "add", "add",
]  # fmt: skip
# MACs per matmul, by hand: qkv 8*32*96, QK^T 2 heads * 8*8*16, AV 2*8*16*8, proj 8*32*32, fc1 8*32*64,
# fc2 8*64*32
ATTENTION_MACS = [24576, 2048, 2048, 8192, 16384, 16384]


def test_attention_has_the_same_ops_and_macs_from_every_file(attention):
    paths, model, x = attention
    with torch.no_grad():
        ref = model(x).numpy()
    for path in paths:
        imported = npukit.import_model(path)
        g = imported.graph
        assert [op.kind for op in g.ops] == ATTENTION_OPS, path.name
        assert [work(op, g).macs for op in g.ops if op.kind == "matmul"] == ATTENTION_MACS, path.name
        got = _vm_run(imported.mod, x.numpy())
        assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max(), path.name
    names = {p.name: [op.name for op in npukit.import_model(p).graph.ops if op.kind in ("softmax", "split")]
             for p in paths}  # fmt: skip
    assert names["attn_11.onnx"] == names["attn_13.onnx"] == ["/Split", "/Softmax"]
    assert names["attn.pt2"] == ["unbind/split", "softmax"]


@pytest.mark.parametrize("policy", ["first-fit", "cost"])
def test_attention_places_the_same_from_every_file(attention, policy):
    tables = [npukit.Study(p, "arm-dsp-dla", placement=policy) for p in attention[0]]
    placed = [list(s.placement["processor"]) for s in tables]
    assert all(p == placed[0] for p in placed)
    lat = [s.totals["latency_us"] for s in tables]
    assert max(lat) - min(lat) <= 1e-9 * max(lat)
    if policy == "first-fit":  # the DSP is the first processor that takes softmax
        assert placed[0][ATTENTION_OPS.index("softmax")] == "dsp"


def test_resize_to_sizes_imports_at_opset_11(tmp_path):
    """torch writes ``interpolate(size=...)`` as Resize(x, roi, <empty scales tensor>, sizes) at every
    opset; TVM's converter refused the empty scales ("Only one of scales and sizes can be provided")."""
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    model, x = Upsample(), torch.randn(1, 4, 4, 4)
    paths = _export(model, x, tmp_path, "up")
    sess = ort.InferenceSession(str(paths[0]), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"x": x.numpy()})[0]
    for path in paths:
        imported = npukit.import_model(path)
        assert [op.kind for op in imported.graph.ops] == ["conv2d", "add", "resize2d"], path.name
        assert imported.graph.tensors[imported.graph.ops[-1].outputs[0]].shape == (1, 2, 8, 8)
        assert np.abs(_vm_run(imported.mod, x.numpy()) - ref).max() <= 1e-5, path.name


class Activations(nn.Module):
    """PReLU with a slope per channel and with one slope; softmax and log-softmax over the channels."""

    def __init__(self):
        super().__init__()
        self.conv, self.prelu, self.prelu1 = nn.Conv2d(3, 4, 1), nn.PReLU(4), nn.PReLU(1)
        with torch.no_grad():
            self.prelu.weight.copy_(torch.tensor([0.1, 0.2, 0.3, 0.4]))
            self.prelu1.weight.fill_(0.25)

    def forward(self, x):
        y = self.prelu1(self.prelu(self.conv(x)))
        return F.softmax(y, dim=1) + F.log_softmax(y, dim=1)


def test_prelu_and_softmax_over_channels_are_one_op_from_every_file(tmp_path):
    """torch.export's PReLU came as greater / multiply / where (3 ops, ONNX: 1 prelu); ONNX before
    opset 13 wrote softmax over a dimension other than the last as Transpose, Softmax, Transpose."""
    torch.manual_seed(0)
    model, x = Activations(), torch.randn(1, 3, 4, 5)
    with torch.no_grad():
        ref = model(x).numpy()
    studies = []
    for path in _export(model, x, tmp_path, "act"):
        imported = npukit.import_model(path)
        g = imported.graph
        assert [op.kind for op in g.ops] == ["conv2d", "add", "prelu", "prelu", "softmax", "log_softmax", "add"], path
        prelus = [op for op in g.ops if op.kind == "prelu"]
        assert [g.tensors[op.inputs[1]].shape for op in prelus] == [(4,), (1,)], path.name
        assert [op.attrs["axis"] for op in g.ops if op.kind in ("softmax", "log_softmax")] == [1, 1], path.name
        assert np.abs(_vm_run(imported.mod, x.numpy()) - ref).max() <= 1e-5 * np.abs(ref).max(), path.name
        studies.append(npukit.Study(path, "tda4vm-like", placement="first-fit"))
    placed = [list(s.placement["processor"]) for s in studies]
    assert all(p == placed[0] for p in placed)


@pytest.mark.parametrize("opset, op, mode, scales", [
    (10, "Resize", "nearest", [1, 1, 2, 2]), (10, "Resize", "nearest", [1, 1, 1.5, 2.5]),
    (10, "Resize", "nearest", [1, 1, 0.5, 0.5]), (10, "Resize", "linear", [1, 1, 2, 3]),
    (10, "Resize", "linear", [1, 1, 0.5, 0.5]), (9, "Upsample", "nearest", [1, 1, 2, 2]),
    (9, "Upsample", "linear", [1, 1, 2, 1.5]),
])  # fmt: skip
def test_resize_10_and_upsample_9_sample_as_onnxruntime(tmp_path, opset, op, mode, scales):
    """Resize-10 is (x, scales): TVM's converter read the scales as Resize-11's roi and failed ("Type
    <class 'NoneType'> for size is currently unsupported"); Upsample-9 takes its scales as an input:
    TVM's converter read an attribute ("object of type 'NoneType' has no len()") and, for Upsample-7's
    attribute, rounded nearest pixels where ONNX Runtime takes the one below (max |diff| 3.6 here)."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    x = np.random.default_rng(0).standard_normal((1, 2, 4, 6)).astype(np.float32)
    s = np.array(scales, np.float32)
    out = [int(np.floor(d * k)) for d, k in zip(x.shape, s)]
    g = helper.make_graph([helper.make_node(op, ["x", "s"], ["y"], name="up", mode=mode)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
                          [helper.make_tensor("s", TensorProto.FLOAT, [4], s)])  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    path = tmp_path / "up.onnx"
    path.write_bytes(m.SerializeToString())
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    imported = npukit.import_model(path)
    assert [(op.kind, op.name) for op in imported.graph.ops] == [("resize2d", "up")]
    got = _vm_run(imported.mod, x)
    assert got.shape == ref.shape and np.abs(got - ref).max() <= 1e-5


def test_the_zero_pad_before_an_average_pool_at_opset_9_is_no_op(tmp_path):
    """torch's ONNX export at opset 9 writes ``avg_pool2d`` as Pad (by 0 on every side) + AveragePool:
    one op more than every other opset and .pt2, and a different placement (arm-dsp-dla first-fit:
    the pad on arm between two DLA ops)."""

    class Pool(nn.Module):
        def forward(self, x):
            return F.avg_pool2d(torch.relu(x), 2) * 2

    x = torch.randn(1, 4, 8, 8)
    path = tmp_path / "pool9.onnx"
    torch.onnx.export(Pool(), (x,), str(path), opset_version=9, dynamo=False, input_names=["x"])
    g = npukit.import_model(path).graph
    assert [op.kind for op in g.ops] == ["relu", "avg_pool2d", "multiply"]
    assert g.elided["/Pad"] == "no computation of its own: an identity pad removed at import"


def test_shapes_after_a_group_norm_fold_at_opset_9(tmp_path):
    """torch's GroupNorm at opset 9 reshapes back by a Shape-1, whose value onnx's shape inference
    does not propagate: the shapes after it were unknown, so a later flatten's Shape -> Slice ->
    Concat stayed for TVM, whose Slice converter failed ("Cannot cast <class 'NoneType'> to list of
    Expr").  Folding repeats until nothing more folds."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.gn = nn.GroupNorm(2, 4)

        def forward(self, x):
            return F.max_pool2d(self.gn(x), 2).flatten(2).softmax(-1)

    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(1, 4, 8, 8)
    with torch.no_grad():
        ref = model(x).numpy()
    path = tmp_path / "gn9.onnx"
    torch.onnx.export(model, (x,), str(path), opset_version=9, dynamo=False, input_names=["x"])
    imported = npukit.import_model(path)
    g = imported.graph
    assert [op.kind for op in g.ops] == ["group_norm", "max_pool2d", "reshape", "softmax"]
    assert g.elided["/Slice"] == "computes a shape from the static input shapes: folded to a constant at import"
    assert np.abs(_vm_run(imported.mod, x.numpy()) - ref).max() <= 1e-5


@pytest.mark.parametrize("alpha_shape, slope_shape, axis", [((1, 1, 4), (4,), 3), ((1,), (1,), 3), ((4, 1, 1), (4,), 1)])
def test_a_tflite_prelu_is_one_op_with_its_own_slopes(tmp_path, alpha_shape, slope_shape, axis):
    """TVM's import of TFLite's PRELU flattens the input, broadcasts the slope to every element (a
    [1, 4, 4, 4] tensor's 4 slopes stored as 64) and reshapes back: 3 ops where ONNX's PRelu and
    torch.export's prelu are one, with the slopes of the one axis they vary along."""
    pytest.importorskip("tflite")
    from tflite_builder import Graph, Op, T, build

    alpha = np.arange(1, 1 + int(np.prod(alpha_shape)), dtype=np.float32).reshape(alpha_shape) / 10
    path = tmp_path / "prelu.tflite"
    path.write_bytes(build(Graph([T("x", (1, 4, 4, 4)), T("alpha", alpha_shape, data=alpha), T("y", (1, 4, 4, 4))],
                                 [Op("PRELU", ["x", "alpha"], ["y"])], ["x"], ["y"])))  # fmt: skip
    imported = npukit.import_model(path)
    g = imported.graph
    assert [(op.kind, op.name) for op in g.ops] == [("prelu", "y")]
    assert g.tensors[g.ops[0].inputs[1]].shape == slope_shape and g.ops[0].attrs["axis"] == axis
    x = np.random.default_rng(0).standard_normal((1, 4, 4, 4)).astype(np.float32)
    assert np.abs(_vm_run(imported.mod, x) - np.where(x > 0, x, x * alpha)).max() <= 1e-6


class Reductions(nn.Module):
    def forward(self, x):
        a = x.max(1, keepdim=True)[0] + (-x).max(1)[0].unsqueeze(1)  # (aten.min.dim: TVM has no import)
        return F.normalize(x, dim=1) * a + torch.linalg.vector_norm(x, dim=1, keepdim=True)


REDUCTION_OPS = ["max", "negative", "max", "expand_dims", "add", "multiply", "sum", "sqrt", "clip", "broadcast_to",
                 "divide", "multiply", "add"]  # fmt: skip


def test_max_over_a_dim_and_l2_norms_are_the_onnx_ops_from_pt2(tmp_path):
    """torch.export's ``x.max(dim)[0]`` came as a top-1 (whose indices nobody reads) [+ squeeze] and its
    ``linalg_vector_norm`` as abs, power 2, sum, power 0.5; ONNX has ReduceMax (keepdims
    0 or 1) and ReduceL2 (multiply, sum, sqrt).  The two norms of one tensor are one computation."""
    torch.manual_seed(0)
    model, x = Reductions(), torch.randn(2, 6, 3)
    with torch.no_grad():
        ref = model(x).numpy()
    for path in _export(model, x, tmp_path, "red")[1:]:  # (opset 11 has no ReduceL2 with this form)
        imported = npukit.import_model(path)
        kinds = [op.kind for op in imported.graph.ops]
        assert kinds == REDUCTION_OPS, (path.name, kinds)
        assert np.abs(_vm_run(imported.mod, x.numpy()) - ref).max() <= 1e-5 * np.abs(ref).max(), path.name


def test_a_max_whose_indices_are_read_stays_a_top_1(tmp_path):
    class ArgMax(nn.Module):
        def forward(self, x):
            v, i = x.max(1)
            return v + i.float()

    x = torch.randn(2, 6)
    path = tmp_path / "argmax.pt2"
    torch.export.save(torch.export.export(ArgMax(), (x,)), str(path))
    assert "topk" in [op.kind for op in npukit.import_model(path).graph.ops]


class GridSample(nn.Module):
    """A grid of [N, H_out, W_out, 2] (6 x 4) made from the input, sampling the features."""

    def __init__(self):
        super().__init__()
        self.conv, self.grid = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 2, 1)

    def forward(self, x):
        g = torch.tanh(self.grid(x)).permute(0, 2, 3, 1)
        return F.grid_sample(self.conv(x), g, mode="bilinear", padding_mode="border", align_corners=False)


@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_grid_sample_from_every_file_samples_as_torch(tmp_path, fmt):
    """torch's grid is [N, H_out, W_out, 2]; Relax's grid_sample takes [N, 2, H_out, W_out]. TVM's
    PyTorch converter passed torch's grid on unpermuted: the .pt2 imported with the output [1, 4, 4, 2]
    (the grid's last two dims) in place of [1, 4, 6, 4], with 7 ops where ONNX has 7 (its converter
    permutes the grid back, which cancels the model's permute)."""
    torch.manual_seed(0)
    model, x = GridSample().eval(), torch.randn(1, 3, 6, 4)
    with torch.no_grad():
        ref = model(x).numpy()
    path = tmp_path / f"gs.{fmt}"
    if fmt == "onnx":  # (ONNX has GridSample from opset 16)
        torch.onnx.export(model, (x,), str(path), opset_version=17, dynamo=False, input_names=["x"])
    else:
        torch.export.save(torch.export.export(model, (x,)), str(path))
    imported = npukit.import_model(path)
    g = imported.graph
    # the grid's permute and the grid_sample's permute back cancel: the same 6 ops from both files
    assert [op.kind for op in g.ops] == ["conv2d", "add", "tanh", "conv2d", "add", "grid_sample"], path.name
    assert g.tensors[g.ops[-1].outputs[0]].shape == (1, 4, 6, 4), path.name
    got = _vm_run(imported.mod, x.numpy())
    assert got.shape == ref.shape and np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max(), path.name


class Nearest(nn.Module):
    def __init__(self, **how):
        super().__init__()
        self.conv, self.how = nn.Conv2d(2, 3, 1), how

    def forward(self, x):
        return F.interpolate(self.conv(x), mode="nearest", **self.how)


@pytest.mark.parametrize("how", [{"size": (5, 7)}, {"scale_factor": (2.0, 3.0)}])
def test_nearest_upsample_from_every_file_picks_torchs_pixels(tmp_path, how):
    """torch's "nearest" takes source pixel floor(dst * in / out) (ONNX: Resize nearest, asymmetric,
    floor). TVM's PyTorch converter wrote half_pixel and round: from 6 x 4 to 5 x 7 the .pt2 picked
    other pixels (max |diff| 1.42 against torch at size 5 x 7 here, the ONNX file 0; at whole scales the
    pixels agreed, the attributes did not)."""
    torch.manual_seed(0)
    model, x = Nearest(**how).eval(), torch.randn(1, 2, 6, 4)
    with torch.no_grad():
        ref = model(x).numpy()
    for path in _export(model, x, tmp_path, "near"):
        imported = npukit.import_model(path)
        op = imported.graph.ops[-1]
        assert (op.kind, op.attrs["coordinate_transformation_mode"], op.attrs["rounding_method"]) == (
            "resize2d", "asymmetric", "floor"), path.name
        assert imported.graph.tensors[op.outputs[0]].shape == ref.shape, path.name
        assert np.abs(_vm_run(imported.mod, x.numpy()) - ref).max() <= 1e-6, path.name


class SelfAttention(nn.Module):
    """nn.MultiheadAttention (batch_first) given three tensors (one layer norm called three times): its
    in-projection is three linears, torch.export splitting in_proj_weight into q / k / v."""

    def __init__(self, d=16):
        super().__init__()
        self.ln, self.mha = nn.LayerNorm(d), nn.MultiheadAttention(d, 2, batch_first=True)

    def forward(self, x):
        return x + self.mha(self.ln(x), self.ln(x), self.ln(x), need_weights=False)[0]


def test_multihead_attention_weights_are_transposed_at_import_from_pt2(tmp_path):
    """FoldConstant keeps a tuple of constants (``split(in_proj_weight)``) as a binding, so the
    transpose of each part stayed an op: 3 permute_dims in the .pt2's ops that the ONNX file's
    transposed weights do not have."""
    torch.manual_seed(0)
    model, x = SelfAttention(), torch.randn(1, 6, 16)
    with torch.no_grad():
        ref = model(x).numpy()
    p13 = tmp_path / "mha.onnx"
    torch.onnx.export(model.eval(), (x,), str(p13), opset_version=17, dynamo=False, input_names=["x"])
    pt2 = tmp_path / "mha.pt2"
    torch.export.save(torch.export.export(model, (x,)), str(pt2))
    graphs = [npukit.import_model(p).graph for p in (p13, pt2)]
    kinds = [sorted(op.kind for op in g.ops) for g in graphs]
    assert kinds[0] == kinds[1]
    macs = [[work(op, g).macs for op in g.ops if op.kind == "matmul"] for g in graphs]
    assert macs[0] == macs[1]
    g = graphs[1]
    assert not any(g.tensors[t].kind == "const" for op in g.ops if op.kind == "permute_dims" for t in op.inputs)
    assert {g.tensors[t].name for op in g.ops if op.kind == "matmul" for t in op.inputs
            if g.tensors[t].kind == "const"} >= {"mha.in_proj_weight", "mha.out_proj.weight"}  # fmt: skip
    assert np.abs(_vm_run(npukit.import_model(pt2).mod, x.numpy()) - ref).max() <= 1e-5


class SoftmaxOfTranspose(nn.Module):
    """Softmax over dim 1 of the model's own transpose, which another op reads too; an adaptive pool
    whose output size divides its input size."""

    def forward(self, x):
        z = F.adaptive_avg_pool2d(x, (2, 4)).reshape(1, 4, 8).transpose(1, 2)
        return torch.softmax(z, dim=1).sum(2) + z.mean(-1)


def test_softmax_of_a_transpose_and_an_adaptive_pool_are_one_form_from_every_file(tmp_path):
    """Before opset 13 torch's ONNX exporter cancels its own transpose before the softmax against the
    model's (Softmax(x, axis=2), Transpose: the transposes after the softmax), and torch.export keeps
    ``adaptive_avg_pool2d`` where ONNX has AveragePool: the ops differed by file."""
    torch.manual_seed(0)
    model, x = SoftmaxOfTranspose(), torch.randn(1, 4, 4, 8)
    with torch.no_grad():
        ref = model(x).numpy()
    forms = set()
    for path in _export(model, x, tmp_path, "smt"):
        imported = npukit.import_model(path)
        g = imported.graph
        forms.add(tuple(op.kind for op in g.ops))
        pool = next(op for op in g.ops if op.kind == "avg_pool2d")
        assert (pool.attrs["pool_size"], pool.attrs["strides"]) == ((2, 2), (2, 2)), path.name
        assert np.abs(_vm_run(imported.mod, x.numpy()) - ref).max() <= 1e-5 * np.abs(ref).max(), path.name
    assert forms == {("avg_pool2d", "reshape", "permute_dims", "softmax", "sum", "mean", "add")}, forms


class PaddedConv(nn.Module):
    def __init__(self, explicit: bool):
        super().__init__()
        self.explicit = explicit
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=0 if explicit else (1, 2))

    def forward(self, x):
        return self.conv(F.pad(x, (2, 2, 1, 1)) if self.explicit else x)


def test_a_zero_pad_before_a_conv_is_the_convs_padding(tmp_path):
    """A TFLite conv pads only SAME or VALID: a converter writes PAD + CONV_2D for torch's
    ``padding=1`` at stride 2, where ONNX and torch.export hold one conv (an extra op from TFLite)."""
    torch.manual_seed(0)
    padded, plain, x = PaddedConv(True).eval(), PaddedConv(False).eval(), torch.randn(1, 3, 9, 8)
    plain.conv.load_state_dict(padded.conv.state_dict())
    with torch.no_grad():
        ref = padded(x).numpy()
    for path in _export(padded, x, tmp_path, "pad") + _export(plain, x, tmp_path, "plain"):
        imported = npukit.import_model(path)
        g = imported.graph
        assert [op.kind for op in g.ops] == ["conv2d", "add"], path.name
        assert g.ops[0].attrs["padding"] == (1, 2, 1, 2), path.name
        assert work(g.ops[0], g).macs == 5 * 5 * 4 * 3 * 9, path.name
        assert np.abs(_vm_run(imported.mod, x.numpy()) - ref).max() <= 1e-5, path.name


def test_a_cropping_pad_before_a_conv_stays_a_pad(tmp_path):
    """F.pad with negative widths crops: it cannot become the conv's padding (a negative padding),
    so the pad stays an op and the imported model still computes torch's values."""

    class Cropped(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):
            return self.conv(F.pad(x, (-1, 0, 0, -2)))

    torch.manual_seed(0)
    model, x = Cropped().eval(), torch.randn(1, 3, 9, 8)
    with torch.no_grad():
        ref = model(x).numpy()
    path = tmp_path / "crop.pt2"
    torch.export.save(torch.export.export(model, (x,)), str(path))
    imported = npukit.import_model(path)
    g = imported.graph
    conv = next(op for op in g.ops if op.kind == "conv2d")
    assert conv.attrs["padding"] == (1, 1, 1, 1)
    assert [op.kind for op in g.ops][:2] != ["conv2d", "add"]  # the crop is an op before the conv
    assert ref.shape == (1, 4, 7, 7)
    assert np.abs(_vm_run(imported.mod, x.numpy()) - ref).max() <= 1e-5


def _one_form(model, x, folder, name, form_of) -> tuple:
    """The form (``form_of(graph)``) of ``model`` imported from every file, each file's module
    computing torch's output; asserts every file gives one form, and returns it."""
    torch.manual_seed(0)
    with torch.no_grad():
        ref = model.eval()(x).numpy()
    forms = set()
    for path in _export(model, x, folder, name):
        imported = npukit.import_model(path)
        forms.add(form_of(imported.graph))
        assert np.abs(_vm_run(imported.mod, x.numpy()) - ref).max() <= 1e-5 * np.abs(ref).max(), path.name
    assert len(forms) == 1, forms
    return next(iter(forms))


class Pool1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 8, 5, padding=2)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return F.adaptive_avg_pool1d(y, 1).flatten(1) + y.amax(-1, keepdim=True).unsqueeze(2).mean((2, 3))


def test_a_1d_global_pool_is_one_mean_from_every_file(tmp_path):
    """torch.export runs a 1-D adaptive pool as the 2-D one on an unsqueezed input (expand_dims, mean
    over the unit axis and the length, squeeze); ONNX has GlobalAveragePool, one mean.  A reduction
    over an inserted axis of one element is the reduction without it."""
    torch.manual_seed(0)
    form = _one_form(Pool1d(), torch.randn(1, 3, 16), tmp_path, "pool1d", lambda g: tuple(op.kind for op in g.ops))
    assert form == ("conv1d", "add", "relu", "mean", "reshape", "max", "mean", "add")


class Pools1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 3, padding=1, groups=4)

    def forward(self, x):
        y = self.conv(x)
        a = F.max_pool1d(y, 3, stride=2, padding=1, dilation=2, ceil_mode=True)
        b = F.avg_pool1d(y, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
        c = F.adaptive_avg_pool1d(y, 4)
        return a.sum(-1) + b.sum(-1) + c.mean(-1)


def test_1d_pools_are_the_onnx_1d_pools_from_pt2(tmp_path):
    """torch.export runs ``max_pool1d`` / ``avg_pool1d`` (and a divisible adaptive pool) as the 2-D
    pool of an unsqueezed input (expand_dims, pool2d over (1, k), squeeze); ONNX has the 1-D pool.
    Strides, padding, dilation and the rounding mode carry over."""
    torch.manual_seed(0)
    form = _one_form(Pools1d(), torch.randn(1, 4, 16), tmp_path, "pools1d",
                     lambda g: tuple((op.kind, tuple(sorted(op.attrs.items()))) for op in g.ops
                                     if "pool" in op.kind or op.kind in ("expand_dims", "squeeze")))  # fmt: skip
    assert [k for k, _ in form] == ["max_pool1d", "avg_pool1d", "avg_pool1d"]


class Softplus(nn.Module):
    def forward(self, x):
        return F.mish(x) + F.softplus(2 * x)


def test_softplus_and_mish_are_one_form_from_every_file(tmp_path):
    """torch.export's softplus is ``where(x > 20, x, log(exp(x) + 1))``; TVM imports ONNX's Softplus as
    the stable ``max(x, 0) + log(exp(-|x|) + 1)``: the ops differed by file (a Mish too).  Values
    are torch's to within fp32 rounding, large inputs included."""
    torch.manual_seed(0)
    x = torch.cat([torch.randn(1, 24) * 4, torch.tensor([[-60.0, -20.0, 19.0, 21.0, 40.0, 90.0, 0.0, 1e-3]])], 1)
    form = _one_form(Softplus(), x, tmp_path, "softplus", lambda g: tuple(op.kind for op in g.ops))
    assert "where" not in form
