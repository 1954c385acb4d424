"""The canonical form of normalisations and clamps at import (frontends/canon_norms.py,
canon_clamps.py, onnx_convert's Min / Max): an instance norm, a group norm and a clamp give the same
ops, weight names and placement from an ONNX file as from a .pt2 of the same model.  Every module is
run by TVM and compared with onnxruntime and torch."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import initializer, onnx_model, save_onnx, tensor_info
from test_canonical import _close, _vm_run

import npukit

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
nn = torch.nn


def _ort(path, **feeds):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _both(model, args, tmp_path, name, opset=17, names=("x",)):
    """(onnx path, pt2 path) of ``model``: torch's ONNX exporter (legacy, as make_families) and torch.export."""
    onnx_path, pt2_path = tmp_path / f"{name}.onnx", tmp_path / f"{name}.pt2"
    torch.onnx.export(model, args, str(onnx_path), opset_version=opset, dynamo=False, input_names=list(names))
    torch.export.save(torch.export.export(model, args), str(pt2_path))
    return onnx_path, pt2_path


def _names(g, op) -> list[str]:
    return [g.tensors[t].name for t in op.inputs[1:]]


class Normed(nn.Module):
    def __init__(self, norm: str, affine: bool = True):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.GroupNorm(4, 8, affine=affine) if norm == "group" else nn.InstanceNorm2d(8, affine=affine)
        if affine:
            with torch.no_grad():
                self.norm.weight.uniform_(0.5, 1.5)
                self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return torch.relu(self.norm(self.conv(x)))


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("norm,kind", [("instance", "instance_norm"), ("group", "group_norm")])
def test_a_norm_is_one_op_from_onnx_as_from_pt2(tmp_path, norm, kind, batch):
    """TVM imports ONNX InstanceNormalization as eight ops, and torch's ONNX export of GroupNorm
    (Reshape, InstanceNormalization, Reshape, Mul, Add) as fourteen; a .pt2 gives one op (an
    instance norm of a batch of two: between two reshapes).  Both are now the one op, on the same
    axes and epsilon, with gamma and beta under the names the file gives them."""
    torch.manual_seed(0)
    model, x = Normed(norm).eval(), torch.randn(batch, 3, 6, 6)
    onnx_path, pt2_path = _both(model, (x,), tmp_path, f"{norm}{batch}")
    want, ref = model(x).detach().numpy(), _ort(onnx_path, x=x.numpy())
    ops = {}
    for path in (onnx_path, pt2_path):
        imp = npukit.import_model(path)
        g = imp.graph
        assert [op.kind for op in g.ops] == ["conv2d", "add", kind, "relu"]
        op = ops[path.suffix] = g.ops[2]
        assert {k: op.attrs[k] for k in ("axes", "channel_axis", "epsilon", "center", "scale")} == {
            "axes": (2, 3), "channel_axis": 1, "epsilon": 1e-5, "center": True, "scale": True}  # fmt: skip
        assert op.attrs.get("num_groups") == (4 if kind == "group_norm" else None)
        got = _vm_run(imp.mod, x.numpy())
        _close(got, want, 1e-5)
        _close(got, ref, 1e-5)
        if path is pt2_path:
            assert _names(g, op) == ["norm.weight", "norm.bias"]
    import onnx

    m = onnx.load(str(onnx_path))
    g = npukit.import_model(onnx_path).graph
    if kind == "instance_norm":
        assert ops[".onnx"].name == "/norm/InstanceNormalization" and _names(g, ops[".onnx"]) == ["norm.weight", "norm.bias"]
        return
    # the exporter folds the unsqueezed gamma and beta into initializers of its own names: those
    mul, add = (next(n for n in m.graph.node if n.op_type == t) for t in ("Mul", "Add"))
    assert ops[".onnx"].name == "/norm/Add" and _names(g, ops[".onnx"]) == [mul.input[1], add.input[1]]
    grouped = "part of a GroupNorm written as an instance norm of its groups between two reshapes: imported as one group_norm op"
    affine = ("part of a group_norm whose gamma and beta are applied after it: imported as one group_norm op named after "
              "the node that makes its output ('/norm/Add')")  # fmt: skip
    assert {k: g.elided[k] for k in ("/norm/Reshape", "/norm/InstanceNormalization", "/norm/Reshape_1", "/norm/Mul")} == {
        "/norm/Reshape": grouped, "/norm/InstanceNormalization": grouped, "/norm/Reshape_1": affine, "/norm/Mul": affine}  # fmt: skip


def test_a_norm_without_affine_is_one_op_from_onnx_as_from_pt2(tmp_path):
    torch.manual_seed(1)
    for norm, kind in (("instance", "instance_norm"), ("group", "group_norm")):
        model, x = Normed(norm, affine=False).eval(), torch.randn(1, 3, 6, 6)
        onnx_path, pt2_path = _both(model, (x,), tmp_path, f"{norm}_plain")
        for path in (onnx_path, pt2_path):
            imp = npukit.import_model(path)
            assert [op.kind for op in imp.graph.ops] == ["conv2d", "add", kind, "relu"]
            _close(_vm_run(imp.mod, x.numpy()), model(x).detach().numpy(), 1e-5)


@pytest.mark.parametrize("opset", [18, 21])
def test_onnx_group_normalization_is_one_group_norm(tmp_path, opset):
    """GroupNormalization-21 imports as a group_norm without gamma and beta, then a multiply and an
    add; -18 (gamma and beta per group) as one group_norm.  Both: one op, the node's, its gamma and
    beta under the initializers' names."""
    from onnx import helper as h

    size = 4 if opset < 21 else 8
    m = onnx_model([h.make_node("GroupNormalization", ["x", "gn.scale", "gn.bias"], ["y"], num_groups=4, epsilon=1e-3, name="gn")],
                   [tensor_info("x", [2, 8, 5, 6])], [tensor_info("y", [2, 8, 5, 6])],
                   [initializer("gn.scale", [size], 1), initializer("gn.bias", [size], 2)], opset=opset)  # fmt: skip
    path = save_onnx(m, tmp_path / f"gn{opset}.onnx")
    imp = npukit.import_model(path)
    g = imp.graph
    assert [(op.name, op.kind) for op in g.ops] == [("gn", "group_norm")]
    assert _names(g, g.ops[0]) == ["gn.scale", "gn.bias"] and g.ops[0].attrs["num_groups"] == 4
    assert g.ops[0].attrs["epsilon"] == 1e-3 and g.ops[0].attrs["scale"] and g.ops[0].attrs["center"]
    x = np.random.default_rng(3).standard_normal((2, 8, 5, 6)).astype(np.float32)
    _close(_vm_run(imp.mod, x), _ort(path, x=x), 1e-5)


def _arith_instance_norm(tmp_path, also_out: bool):
    """InstanceNorm written node by node (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add over
    H and W, gamma and beta [C, 1, 1]); ``also_out``: the Div's output is a graph output too."""
    from onnx import TensorProto
    from onnx import helper as h

    eps = h.make_tensor("eps", TensorProto.FLOAT, [], [1e-5])
    two = h.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    nodes = [h.make_node("ReduceMean", ["x"], ["mu"], axes=[2, 3], keepdims=1, name="mean"),
             h.make_node("Sub", ["x", "mu"], ["d"], name="sub"),
             h.make_node("Pow", ["d", "two"], ["d2"], name="pow"),
             h.make_node("ReduceMean", ["d2"], ["var"], axes=[2, 3], keepdims=1, name="var"),
             h.make_node("Add", ["var", "eps"], ["ve"], name="add_eps"),
             h.make_node("Sqrt", ["ve"], ["sd"], name="sqrt"),
             h.make_node("Div", ["d", "sd"], ["n"], name="div"),
             h.make_node("Mul", ["n", "in.scale"], ["s"], name="scale"),
             h.make_node("Add", ["s", "in.bias"], ["y"], name="shift")]  # fmt: skip
    outs = [tensor_info("y", [1, 6, 4, 5])] + ([tensor_info("n", [1, 6, 4, 5])] if also_out else [])
    m = onnx_model(nodes, [tensor_info("x", [1, 6, 4, 5])], outs,
                   [eps, two, initializer("in.scale", [6, 1, 1], 1), initializer("in.bias", [6, 1, 1], 2)], opset=13)  # fmt: skip
    return save_onnx(m, tmp_path / f"arith_in_{also_out}.onnx")


@pytest.mark.parametrize("also_out", [False, True])
def test_an_instance_norm_written_node_by_node_is_one_op(tmp_path, also_out):
    """Nine nodes over H and W are one instance_norm, named after the node that makes its output, its
    gamma and beta the model's (reshaped to [C]); when the normalized value is read elsewhere (a graph
    output) the nodes stay as written."""
    path = _arith_instance_norm(tmp_path, also_out)
    imp = npukit.import_model(path)
    g = imp.graph
    if also_out:
        assert [op.kind for op in g.ops] == ["mean", "subtract", "power", "mean", "add", "sqrt", "divide", "multiply", "add"]
    else:
        assert [(op.name, op.kind) for op in g.ops] == [("shift", "instance_norm")]
        assert _names(g, g.ops[0]) == ["in.scale", "in.bias"] and g.ops[0].attrs["axes"] == (2, 3)
        assert g.elided["pow"] == ("part of an instance normalization written as arithmetic: imported as one instance_norm "
                                   "op named after the node that makes its output ('shift')")  # fmt: skip
    x = np.random.default_rng(4).standard_normal((1, 6, 4, 5)).astype(np.float32)
    _close(_vm_run(imp.mod, x), _ort(path, x=x), 1e-5)


class Clamps(nn.Module):
    """torch.minimum of two inputs, a ReLU6 written as maximum / minimum with numbers, a maximum of
    three, and torch.clamp with per-channel tensor bounds."""

    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.linspace(-1, 1, 8).reshape(8, 1, 1))
        self.register_buffer("lo", torch.linspace(-0.9, -0.2, 8).reshape(8, 1, 1))

    def forward(self, x, y):
        a = torch.minimum(x, y)
        b = torch.minimum(torch.maximum(a, torch.tensor(0.0)), torch.tensor(6.0))
        c = torch.maximum(torch.maximum(b, x), self.w)
        return torch.clamp(c, min=self.lo, max=torch.tensor(0.8))


def test_min_max_and_clamps_give_the_same_ops_from_onnx_as_from_pt2(tmp_path):
    """TVM imports ONNX Min / Max as broadcast_to + stack + a reduction (a constant operand stored at
    the output's size); a .pt2 gives torch.minimum / maximum one op each, and torch.clamp with a tensor
    bound a maximum, a minimum and a clip without bounds.  Now both are one minimum / maximum per
    pair, a clamp by a number one clip (Max(x, 0) then Min(., 6): one clip [0, 6]), and every bound
    constant at its own size."""
    torch.manual_seed(2)
    model, x, y = Clamps().eval(), torch.randn(1, 8, 6, 6), torch.randn(1, 8, 1, 6)
    onnx_path, pt2_path = _both(model, (x, y), tmp_path, "clamps", names=("x", "y"))
    want, ref = model(x, y).numpy(), _ort(onnx_path, x=x.numpy(), y=y.numpy())
    for path in (onnx_path, pt2_path):
        imp = npukit.import_model(path)
        g = imp.graph
        assert [op.kind for op in g.ops] == ["minimum", "clip", "maximum", "maximum", "maximum", "clip"]
        assert (g.ops[1].attrs["min"], g.ops[1].attrs["max"]) == (0.0, 6.0)
        assert (g.ops[5].attrs["min"], g.ops[5].attrs["max"]) == (-np.inf, float(np.float32(0.8)))  # a float32 tensor
        assert sorted(t.size for t in g.tensors.values() if t.kind == "const") == [8, 8]
        got = _vm_run(imp.mod, x.numpy(), y.numpy())
        _close(got, want, 1e-6)
        _close(got, ref, 1e-6)
    assert [g for g in npukit.import_model(pt2_path).graph.tensors.values() if g.kind == "const"][0].name == "w"


def test_onnx_min_max_of_several_inputs(tmp_path):
    """Min / Max of three inputs (broadcast) are two minimum / maximum ops of the node; Max(x, 0) one
    clip; the values are onnxruntime's."""
    from onnx import TensorProto
    from onnx import helper as h

    zero = h.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    m = onnx_model([h.make_node("Min", ["x", "y", "w"], ["a"], name="mn3"), h.make_node("Max", ["a", "zero"], ["z"], name="relu")],
                   [tensor_info("x", [1, 8, 6, 6]), tensor_info("y", [1, 1, 6, 6])], [tensor_info("z", [1, 8, 6, 6])],
                   [zero, initializer("w", [8, 1, 1], 3)])  # fmt: skip
    path = save_onnx(m, tmp_path / "min3.onnx")
    imp = npukit.import_model(path)
    g = imp.graph
    assert [(op.name, op.kind) for op in g.ops] == [("mn3/minimum", "minimum"), ("mn3", "minimum"), ("relu", "clip")]
    assert [(t.name, t.shape) for t in g.tensors.values() if t.kind == "const"] == [("w", (8, 1, 1))]
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((1, 8, 6, 6)).astype(np.float32), rng.standard_normal((1, 1, 6, 6)).astype(np.float32)
    np.testing.assert_array_equal(_vm_run(imp.mod, x, y), _ort(path, x=x, y=y))


class Net(nn.Module):
    """Conv blocks with GroupNorm and InstanceNorm, a 1x1 head and a ReLU6 written as maximum / minimum."""

    def __init__(self):
        super().__init__()
        self.c1, self.n1 = nn.Conv2d(3, 16, 3, padding=1), nn.GroupNorm(4, 16)
        self.c2, self.n2 = nn.Conv2d(16, 16, 3, padding=1), nn.InstanceNorm2d(16, affine=True)
        self.head = nn.Conv2d(16, 8, 1)

    def forward(self, x):
        y = torch.relu(self.n2(self.c2(torch.relu(self.n1(self.c1(x))))))
        return torch.minimum(torch.maximum(self.head(y), torch.zeros(())), torch.full((), 6.0))


@pytest.mark.parametrize("placement", ["cost", "first-fit"])
@pytest.mark.parametrize("soc", ["hexagon-like", "tda4vm-like"])
def test_onnx_and_pt2_place_and_cost_alike(tmp_path, soc, placement):
    """The same network from both files: the same ops on the same processors, the same latency; in
    the profile's order of preference the norms run on the vector processor that takes them (QNN's
    GroupNorm / InstanceNorm on the HVX, TIDL's instance norm on the C7x)."""
    torch.manual_seed(4)
    model, x = Net().eval(), torch.randn(1, 3, 16, 16)
    studies = [npukit.Study(p, soc, placement=placement) for p in _both(model, (x,), tmp_path, "net")]
    kinds = [[op.kind for op in s.graph.ops] for s in studies]
    assert kinds[0] == kinds[1] == ["conv2d", "add", "group_norm", "relu", "conv2d", "add", "instance_norm", "relu",
                                    "conv2d", "add", "clip"]  # fmt: skip
    a, b = ((tuple(s.plan.processor), tuple(s.plan.pattern), s.totals["partitions"]) for s in studies)
    assert a == b
    assert studies[0].totals["latency_us"] == pytest.approx(studies[1].totals["latency_us"], rel=1e-12)
    if placement == "first-fit":
        where = {op.kind: p for op, p in zip(studies[0].graph.ops, studies[0].plan.processor)}
        assert (where["group_norm"], where["instance_norm"]) == {"hexagon-like": ("hvx", "hvx"),
                                                                 "tda4vm-like": ("c7x", "c7x")}[soc]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("soc", ["hexagon-like", "vsi-npu"])
def test_the_norms_lower_to_kernel_calls_and_agree(tmp_path, soc):
    """On the accelerator the group norm and the instance norm are each one npk_group_norm call (an
    instance norm: as many groups as channels); the built program agrees with the simulation."""
    torch.manual_seed(4)
    model, x = Net().eval(), torch.randn(1, 3, 16, 16)
    onnx_path, _ = _both(model, (x,), tmp_path, "net", opset=13)
    s = npukit.Study(onnx_path, soc, placement="first-fit")
    where = dict(zip(s.placement["name"], s.placement["processor"]))
    acc = {"hexagon-like": "hvx", "vsi-npu": "npu"}[soc]
    assert (where["/n1/Add"], where["/n2/InstanceNormalization"]) == (acc, acc)
    r = s.build(tmp_path / "e", samples=4)
    assert r["outputs_agree"], r["mismatches"]
    code = "".join(v for k, v in s.code.items() if k.startswith("src/partitions_"))
    lib = s.soc.processor(acc).kernel_library
    assert code.count(f"{lib}_group_norm(") == 2 and f"{lib}_group_norm_params" in code
