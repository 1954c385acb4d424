"""A resize by a scale factor whose output size is not a whole multiple of the input's (5 x 5 by 2.7 to
13 x 13): torch and ONNX Runtime map output pixel x to input x / scale, TVM's resize2d to x * in / out.
Nearest-neighbour resizes now give torch's / ONNX Runtime's values bit for bit (in the simulation and
in the generated C); linear ones, which resize2d cannot compute, are refused in the model's words."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_cli_error, onnx_model, run_cli, save_onnx, tensor_info
from test_codegen import _first_outputs

import npukit
from npukit import pipeline

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
F = torch.nn.functional


class Up(torch.nn.Module):
    def __init__(self, scale, mode="nearest"):
        super().__init__()
        self.scale, self.mode = scale, mode

    def forward(self, x):
        return F.interpolate(x, scale_factor=self.scale, mode=self.mode)


def _files(tmp_path, model, x):
    onnx_path, pt2_path = tmp_path / "up.onnx", tmp_path / "up.pt2"
    torch.onnx.export(model, (x,), str(onnx_path), opset_version=17, dynamo=False, input_names=["x"])
    torch.export.save(torch.export.export(model, (x,)), str(pt2_path))
    return onnx_path, pt2_path


def _simulated(path, xs):
    s = npukit.Study(path, "arm-dsp-dla")
    s.set_data(xs)
    return s, np.stack([np.asarray(o[0]) for o in pipeline.simulate_float(s.result, s.data, range(len(xs)))])


# before: max |simulation - torch| 3.75 (5 x 5 by 2.7), 3.71 (9 x 9 by 0.6), 5.21 (7 x 7 by 1.3, 2.2) here
@pytest.mark.parametrize("n, scale", [(5, 2.7), (9, 0.6), (7, (1.3, 2.2))])
def test_nearest_resize_by_a_scale_gives_torch_and_onnxruntime_values(tmp_path, n, scale):
    model = Up(scale).eval()
    xs = np.random.default_rng(0).standard_normal((3, 1, 2, n, n)).astype(np.float32)
    with torch.no_grad():
        want = np.stack([model(torch.from_numpy(x)).numpy() for x in xs])
    onnx_path, pt2_path = _files(tmp_path, model, torch.from_numpy(xs[0]))
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    assert np.array_equal(np.stack([sess.run(None, {"x": x})[0] for x in xs]), want)  # the references agree
    for path in (onnx_path, pt2_path):
        s, got = _simulated(path, xs)
        assert [op.kind for op in s.graph.ops] == ["take", "take"], path.name  # one gather per axis
        assert np.array_equal(got, want), (path.name, float(np.abs(got - want).max()))


def test_nearest_resize_by_a_scale_in_the_generated_c(tmp_path):
    model = Up(2.7).eval()
    xs = np.random.default_rng(1).standard_normal((2, 1, 2, 5, 5)).astype(np.float32)
    with torch.no_grad():
        want = np.stack([model(torch.from_numpy(x)).numpy().ravel() for x in xs])
    for path in _files(tmp_path, model, torch.from_numpy(xs[0])):
        s, _ = _simulated(path, xs)
        got, sim = _first_outputs(s, tmp_path / f"export_{path.suffix[1:]}")
        assert np.array_equal(got, want) and np.array_equal(sim, want), path.name


@pytest.mark.parametrize("n, scale", [(4, 2.0), (6, 1.5), (8, 0.5)])
def test_a_scale_with_a_whole_output_size_stays_one_resize(tmp_path, n, scale):
    model = Up(scale).eval()
    x = torch.randn(1, 2, n, n)
    with torch.no_grad():
        want = model(x).numpy()[None]
    for path in _files(tmp_path, model, x):
        s, got = _simulated(path, x.numpy()[None])
        assert [op.kind for op in s.graph.ops] == ["resize2d"], path.name
        assert np.array_equal(got, want), path.name


def _onnx_resize(tmp_path, opset, scales, **attrs):
    from onnx import TensorProto, helper

    op = "Upsample" if opset < 10 else "Resize"
    ins = ["x", "s"] if opset < 11 else ["x", "", "s"]
    shape = [1, 2, 5, 6]
    out = [int(np.float32(d) * np.float32(k)) for d, k in zip(shape, scales)]
    m = onnx_model([helper.make_node(op, ins, ["y"], name="up", **attrs)], [tensor_info("x", shape)],
                   [tensor_info("y", out)], [helper.make_tensor("s", TensorProto.FLOAT, [4], scales)],
                   opset=opset)  # fmt: skip
    return save_onnx(m, tmp_path / f"resize{opset}.onnx", infer_shapes=False)


@pytest.mark.parametrize("opset, scales, attrs", [
    (19, [1, 1, 1.7, 2.3], {}),  # half_pixel, round_prefer_floor: ONNX's defaults
    (19, [1, 1, 1.7, 0.45], {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "ceil"}),
    (19, [1, 1, 0.7, 1.3], {"coordinate_transformation_mode": "pytorch_half_pixel", "nearest_mode": "round_prefer_ceil"}),
    (19, [1, 1, 2.3, 1.7], {"coordinate_transformation_mode": "tf_half_pixel_for_nn", "nearest_mode": "floor"}),
    (10, [1, 1, 1.7, 0.6], {}),  # Resize-10: down where it enlarges, up where it shrinks (left to TVM before)
    (9, [1, 1, 1.5, 2.3], {}),  # Upsample-9
])  # fmt: skip
def test_onnx_nearest_resize_by_a_scale_matches_onnxruntime_in_every_mode(tmp_path, opset, scales, attrs):
    path = _onnx_resize(tmp_path, opset, scales, mode="nearest", **attrs)
    xs = np.random.default_rng(2).standard_normal((2, 1, 2, 5, 6)).astype(np.float32)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = np.stack([sess.run(None, {"x": x})[0] for x in xs])
    s, got = _simulated(path, xs)
    assert {op.kind for op in s.graph.ops} == {"take"}
    assert np.array_equal(got, want), float(np.abs(got - want).max())


def test_a_linear_resize_by_a_scale_is_refused_naming_the_node(tmp_path):
    model = Up(2.7, "bilinear").eval()
    onnx_path, pt2_path = _files(tmp_path, model, torch.randn(1, 2, 5, 5))
    why = ("a linear resize by a scale whose product with the input size is not whole (height 5 -> 13 by 2.7, width "
           "5 -> 13 by 2.7): the reference samples input coordinate x / scale, TVM's resize2d x * in / out, which "
           "gives other values; npukit refuses it rather than study wrong values. Give the output size instead of the "
           "scale (interpolate(size=...), Resize's sizes), or a scale that makes it whole")  # fmt: skip
    for path, node in ((onnx_path, "'/Resize' (Resize)"),
                       (pt2_path, "'upsample_bilinear2d' (aten.upsample_bilinear2d.vec; inputs 'x')")):  # fmt: skip
        with pytest.raises(npukit.UnsupportedOpError) as e:
            npukit.Study(path, "arm-dsp-dla")
        assert str(e.value) == f"{path}: node {node}: {why}"
        # one line: TVM logged "BlockBuilder destroyed with remaining blocks!" after it while the
        # error's context kept the importer's frames alive
        assert assert_cli_error(run_cli("inspect", path)) == f"{path}: node {node}: {why}"
    path = _onnx_resize(tmp_path, 19, [1, 1, 1.7, 2.3], mode="linear")
    with pytest.raises(npukit.UnsupportedOpError) as e:
        npukit.import_model(path)
    assert str(e.value).startswith(f"{path}: node 'up' (Resize): a linear resize by a scale whose product with the "
                                   "input size is not whole (height 5 -> 8 by 1.7, width 6 -> 13 by 2.3)")  # fmt: skip
