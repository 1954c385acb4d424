"""topk, sort, argsort (ties: lower index first) and ONNX NonMaxSuppression, against numpy and
onnxruntime."""

from __future__ import annotations

import ctypes
import zlib
from ctypes import c_int32, c_int64

import numpy as np
import pytest
from kernels_lib import ALL_DTYPES, NmsParams, T, TopkParams, call, lib, ok, rand_tensor


def rng_for(*key):
    return np.random.default_rng(zlib.crc32("/".join(map(str, key)).encode()))


def order(vals: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable order along axis; descending keeps index order among ties; NaN above every number."""
    v = np.moveaxis(vals, axis, -1)
    idx = np.broadcast_to(np.arange(v.shape[-1]), v.shape)
    nan = np.isnan(v) if v.dtype.kind == "f" else np.zeros(v.shape, bool)
    key = np.where(nan, 0, v).astype(np.float64)
    if descending:
        perm = np.lexsort((idx, -key, ~nan), axis=-1)
    else:
        perm = np.lexsort((idx, key, nan), axis=-1)
    return np.moveaxis(perm, -1, axis)


def tied_tensor(rng, shape, dtype, layout="nchw"):
    """Few distinct values, so that ties are everywhere."""
    if dtype in ("f32", "f16"):
        return T(shape, dtype, layout).set_real(rng.integers(-3, 3, shape) * 0.5)
    return rand_tensor(rng, shape, dtype, layout).set_raw(rng.integers(-2, 2, shape))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_sort_and_argsort_stable(dtype):
    rng = rng_for("sort", dtype)
    x = tied_tensor(rng, (2, 7, 3, 5), dtype, "tiled")
    raw = x.raw()
    for axis in (1, 3, -2):
        for desc in (0, 1):
            perm = order(raw if dtype != "f16" else x.real(), axis % 4, bool(desc))
            idx = T(x.shape, "s64", "nhwc")
            ok("argsort", x.p, idx.p, c_int32(axis), c_int32(desc))
            np.testing.assert_array_equal(idx.raw(), perm)
            vals = T(x.shape, dtype, "nchw", scale=x.scale, zero=x.zero)
            ok("sort", x.p, vals.p, c_int32(axis), c_int32(desc))
            np.testing.assert_array_equal(vals.raw(), np.take_along_axis(raw, perm, axis % 4))
    assert call("argsort", x.p, T(x.shape, "f32").p, c_int32(1), c_int32(0)) == 2


def test_sort_nan_and_int32_indices():
    x = T((9,), "f32").set_real([3, np.nan, -1, 3, -np.inf, np.nan, 0, -0.0, np.inf])
    for desc in (0, 1):
        idx = T((9,), "s32")
        ok("argsort", x.p, idx.p, c_int32(0), c_int32(desc))
        np.testing.assert_array_equal(idx.raw(), order(x.raw(), 0, bool(desc)))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_topk_ties(dtype):
    rng = rng_for("topk", dtype)
    x = tied_tensor(rng, (3, 11, 4), dtype)
    raw = x.raw() if dtype != "f16" else x.real()
    for axis in (1, -1, 0):
        n = x.shape[axis]
        for k in (1, 3, n):
            for largest in (1, 0):
                perm = order(raw, axis % 3, bool(largest))
                want_idx = np.take(perm, np.arange(k), axis=axis % 3)
                shape = list(x.shape)
                shape[axis] = k
                idx = T(shape, "s64")
                vals = T(shape, dtype, scale=x.scale, zero=x.zero)
                ok("topk", x.p, vals.p, idx.p, ctypes.byref(TopkParams(axis, largest)))
                np.testing.assert_array_equal(idx.raw(), want_idx)
                np.testing.assert_array_equal(vals.raw(), np.take_along_axis(x.raw(), want_idx, axis % 3))
    ok("topk", x.p, None, T((3, 2, 4), "s32").p, ctypes.byref(TopkParams(1, 1)))  # values may be omitted
    assert call("topk", x.p, None, T((3, 12, 4), "s64").p, ctypes.byref(TopkParams(1, 1))) == 3


def test_topk_layouts():
    rng = rng_for("topk-layout")
    x = rand_tensor(rng, (2, 9, 3, 4), "f32", "tiled")
    idx = T((2, 4, 3, 4), "s64", "tiled", block=3)
    vals = T((2, 4, 3, 4), "f16", "nhwc")
    ok("topk", x.p, vals.p, idx.p, ctypes.byref(TopkParams(1, 1)))
    want = order(x.raw(), 1, True)[:, :4]
    np.testing.assert_array_equal(idx.raw(), want)
    np.testing.assert_array_equal(
        vals.real(), np.take_along_axis(x.raw(), want, 1).astype(np.float16).astype(np.float32)
    )
    assert idx.padding_ok()


# ---------------------------------------------------------------------------------------------
# NMS


def iou_suppresses(a, b, center, thr):
    def corners(bx):
        if center:
            return bx[0] - bx[2] / 2, bx[1] - bx[3] / 2, bx[0] + bx[2] / 2, bx[1] + bx[3] / 2
        return min(bx[1], bx[3]), min(bx[0], bx[2]), max(bx[1], bx[3]), max(bx[0], bx[2])

    ax0, ay0, ax1, ay1 = corners(a)
    bx0, by0, bx1, by1 = corners(b)
    ix0, iy0, ix1, iy1 = max(ax0, bx0), max(ay0, by0), min(ax1, bx1), min(ay1, by1)
    if ix1 <= ix0 or iy1 <= iy0:
        return False
    inter = (ix1 - ix0) * (iy1 - iy0)
    area_a, area_b = (ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0)
    union = area_a + area_b - inter
    if area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return inter / union > thr


def nms_ref(boxes, scores, max_out, iou_thr, score_thr, center):
    """ONNX NonMaxSuppression, re-implemented from the operator's documented semantics."""
    rows = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            cand = [i for i in np.lexsort((np.arange(len(s)), -s)) if s[i] > score_thr]
            kept = []
            for i in cand:
                if len(kept) >= max_out:
                    break
                if not any(iou_suppresses(boxes[b, k], boxes[b, i], center, iou_thr) for k in kept):
                    kept.append(i)
            rows += [(b, c, i) for i in kept]
    return np.array(rows, np.int64).reshape(-1, 3)


def make_boxes(rng, b, n, center):
    ctr = rng.uniform(0, 10, (b, n, 2))
    size = rng.uniform(0.5, 4, (b, n, 2))
    if center:
        return np.concatenate([ctr, size], -1).astype(np.float32)
    y1x1, y2x2 = ctr - size / 2, ctr + size / 2
    flip = rng.random((b, n, 1)) < 0.3  # some boxes with their corners given the other way round
    out = np.where(flip, np.concatenate([y2x2, y1x1], -1), np.concatenate([y1x1, y2x2], -1))
    return out.astype(np.float32)


def run_nms(boxes, scores, max_out, iou, sthr, center, capacity, workspace):
    sel = T((capacity, 3), "s64")
    count = c_int64(-1)
    ws = None
    if workspace:
        f = lib().npk_nms_workspace_size
        f.restype = ctypes.c_int32
        ws = np.zeros(f(c_int32(boxes.shape[1])) // 4, np.int32)
    p = NmsParams(int(center), max_out, iou, sthr, None if ws is None else ws.ctypes.data_as(ctypes.c_void_p))
    st = call(
        "nms",
        T(boxes.shape).set_real(boxes).p,
        T(scores.shape).set_real(scores).p,
        sel.p,
        ctypes.byref(count),
        ctypes.byref(p),
    )
    return st, sel.raw()[: count.value]


@pytest.mark.parametrize("workspace", [True, False])
@pytest.mark.parametrize("center", [0, 1])
def test_nms_against_reference_and_onnxruntime(center, workspace):
    rng = rng_for("nms", center, workspace)
    boxes = make_boxes(rng, 2, 40, center)
    scores = rng.uniform(0, 1, (2, 3, 40)).astype(np.float32)
    for max_out, iou, sthr in [(5, 0.5, 0.2), (100, 0.3, 0.0), (0, 0.5, 0.0), (3, 0.9, 0.6)]:
        want = nms_ref(boxes.astype(np.float64), scores, max_out, iou, sthr, center)
        st, got = run_nms(boxes, scores, max_out, iou, sthr, center, 500, workspace)
        assert st == 0
        np.testing.assert_array_equal(got, want)
        ort = ort_nms(boxes, scores, max_out, iou, sthr, center)
        if ort is not None:
            np.testing.assert_array_equal(got, ort)


def test_nms_capacity_and_ties():
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 1.05], [5, 5, 6, 6], [5, 5, 6, 6]]], np.float32)
    scores = np.array([[[0.9, 0.9, 0.8, 0.8]]], np.float32)  # equal scores: lower box index first
    st, got = run_nms(boxes, scores, 10, 0.5, 0.0, 0, 10, True)
    assert st == 0
    np.testing.assert_array_equal(got, [[0, 0, 0], [0, 0, 2]])
    st, got = run_nms(boxes, scores, 10, 0.5, 0.0, 0, 1, False)
    assert st == 7 and got.tolist() == [[0, 0, 0]]


def ort_nms(boxes, scores, max_out, iou, sthr, center):
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "sthr"], ["sel"],
                            center_point_box=int(center))  # fmt: skip
    graph = helper.make_graph(
        [node], "nms",
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, boxes.shape),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, scores.shape)],
        [helper.make_tensor_value_info("sel", TensorProto.INT64, None)],
        [helper.make_tensor("max", TensorProto.INT64, [1], [max_out]),
         helper.make_tensor("iou", TensorProto.FLOAT, [1], [iou]),
         helper.make_tensor("sthr", TensorProto.FLOAT, [1], [sthr])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"boxes": boxes, "scores": scores})[0]
