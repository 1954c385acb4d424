"""Build a tiny single-class object detector as ONNX with onnx.helper (no torch).

Writes `tiny_detector.onnx` (opset 17) next to this file.

  input   image            float32 [1,3,64,64]
  outputs selected_indices int64   [num_selected,3]  NonMaxSuppression result
                                    (batch, class, index into the 16 candidates)
          topk_scores      float32 [1,1,16]          sigmoid scores of the candidates
          topk_boxes       float32 [1,16,4]          candidate boxes [x1,y1,x2,y2]

Graph: backbone of 5 Conv+Relu layers (64x64 -> 8x8, three stride-2 convs),
a 1x1 head conv to 5 channels (4 box + 1 score), box decoding against an 8x8
anchor grid (boxes are valid: x1<x2, y1<y2, normalised to [0,1]), Sigmoid on the
scores, TopK(k=16) picks candidates, Gather takes their boxes, and
NonMaxSuppression runs on the 16 candidates. Weights are seeded random: the
detections mean nothing, the op structure is the point (conv backbone for an
accelerator, TopK + NMS post-processing for the host).
"""
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
OUT = HERE / "tiny_detector.onnx"
SEED = 0
OPSET = 17
GRID = 8
TOPK = 16
MAX_OUT = 8
IOU_THR = 0.5
SCORE_THR = 0.05

# (name, in_ch, out_ch, kernel, stride)
BACKBONE = [
    ("conv1", 3, 8, 3, 1),    # 64x64
    ("conv2", 8, 16, 3, 2),   # 32x32
    ("conv3", 16, 16, 3, 1),  # 32x32
    ("conv4", 16, 32, 3, 2),  # 16x16
    ("conv5", 32, 32, 3, 2),  # 8x8
]
HEAD_CH = 32


def build():
    rng = np.random.default_rng(SEED)
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    x = "image"
    for name, cin, cout, k, s in BACKBONE:
        fan_in = cin * k * k
        w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (rng.standard_normal(cout) * 0.05).astype(np.float32)
        const(f"backbone/{name}/weight", w)
        const(f"backbone/{name}/bias", b)
        nodes.append(helper.make_node(
            "Conv", [x, f"backbone/{name}/weight", f"backbone/{name}/bias"], [f"backbone/{name}/out"],
            name=f"backbone/{name}", kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4))
        nodes.append(helper.make_node(
            "Relu", [f"backbone/{name}/out"], [f"backbone/{name}/relu_out"], name=f"backbone/{name}/relu"))
        x = f"backbone/{name}/relu_out"

    # Head: 1x1 conv -> 4 box channels + 1 score channel.
    wh = (rng.standard_normal((5, HEAD_CH, 1, 1)) * np.sqrt(1.0 / HEAD_CH)).astype(np.float32)
    bh = np.array([0.0, 0.0, 0.0, 0.0, -0.5], dtype=np.float32)
    const("head/conv/weight", wh)
    const("head/conv/bias", bh)
    nodes.append(helper.make_node("Conv", [x, "head/conv/weight", "head/conv/bias"], ["head/conv_out"],
                                  name="head/conv", kernel_shape=[1, 1]))
    const("head/split_sizes", np.array([4, 1], dtype=np.int64))
    nodes.append(helper.make_node("Split", ["head/conv_out", "head/split_sizes"],
                                  ["head/box_map", "head/score_map"], name="head/split", axis=1))

    # Boxes: [1,4,8,8] -> [1,4,64] -> [1,64,4], decoded against an anchor grid.
    const("head/box_shape", np.array([1, 4, GRID * GRID], dtype=np.int64))
    nodes.append(helper.make_node("Reshape", ["head/box_map", "head/box_shape"], ["head/box_flat"],
                                  name="head/box_reshape"))
    nodes.append(helper.make_node("Transpose", ["head/box_flat"], ["head/box_raw"],
                                  name="head/box_transpose", perm=[0, 2, 1]))
    nodes.append(helper.make_node("Sigmoid", ["head/box_raw"], ["head/box_sig"], name="head/box_sigmoid"))
    const("decode/starts_xy", np.array([0], dtype=np.int64))
    const("decode/ends_xy", np.array([2], dtype=np.int64))
    const("decode/starts_wh", np.array([2], dtype=np.int64))
    const("decode/ends_wh", np.array([4], dtype=np.int64))
    const("decode/axes", np.array([2], dtype=np.int64))
    nodes.append(helper.make_node("Slice", ["head/box_sig", "decode/starts_xy", "decode/ends_xy", "decode/axes"],
                                  ["decode/xy"], name="decode/slice_xy"))
    nodes.append(helper.make_node("Slice", ["head/box_sig", "decode/starts_wh", "decode/ends_wh", "decode/axes"],
                                  ["decode/wh"], name="decode/slice_wh"))
    # centre = anchor + (xy - 0.5) / GRID ; half size = wh * 0.5 + 0.05
    # (boxes of neighbouring cells overlap, so NMS really suppresses some candidates)
    gy, gx = np.meshgrid(np.arange(GRID), np.arange(GRID), indexing="ij")
    anchors = np.stack([(gx.ravel() + 0.5) / GRID, (gy.ravel() + 0.5) / GRID], axis=-1)[None]
    const("decode/anchors", anchors.astype(np.float32))                       # [1,64,2]
    const("decode/half", np.array(0.5, dtype=np.float32))
    const("decode/inv_grid", np.array(1.0 / GRID, dtype=np.float32))
    const("decode/size_scale", np.array(0.5, dtype=np.float32))
    const("decode/min_half", np.array(0.05, dtype=np.float32))
    nodes += [
        helper.make_node("Sub", ["decode/xy", "decode/half"], ["decode/xy_c"], name="decode/xy_center"),
        helper.make_node("Mul", ["decode/xy_c", "decode/inv_grid"], ["decode/xy_off"], name="decode/xy_scale"),
        helper.make_node("Add", ["decode/anchors", "decode/xy_off"], ["decode/ctr"], name="decode/add_anchor"),
        helper.make_node("Mul", ["decode/wh", "decode/size_scale"], ["decode/wh_s"], name="decode/wh_scale"),
        helper.make_node("Add", ["decode/wh_s", "decode/min_half"], ["decode/half_wh"], name="decode/wh_min"),
        helper.make_node("Sub", ["decode/ctr", "decode/half_wh"], ["decode/x1y1"], name="decode/top_left"),
        helper.make_node("Add", ["decode/ctr", "decode/half_wh"], ["decode/x2y2"], name="decode/bottom_right"),
        helper.make_node("Concat", ["decode/x1y1", "decode/x2y2"], ["boxes"], name="decode/concat", axis=2),
    ]

    # Scores: [1,1,8,8] -> [1,1,64] -> sigmoid.
    const("head/score_shape", np.array([1, 1, GRID * GRID], dtype=np.int64))
    nodes.append(helper.make_node("Reshape", ["head/score_map", "head/score_shape"], ["head/score_flat"],
                                  name="head/score_reshape"))
    nodes.append(helper.make_node("Sigmoid", ["head/score_flat"], ["scores"], name="head/sigmoid"))

    # Post-processing: TopK candidates, gather their boxes, NMS.
    const("post/k", np.array([TOPK], dtype=np.int64))
    nodes.append(helper.make_node("TopK", ["scores", "post/k"], ["topk_scores", "post/topk_indices"],
                                  name="post/topk", axis=-1, largest=1, sorted=1))
    const("post/idx_shape", np.array([TOPK], dtype=np.int64))
    nodes.append(helper.make_node("Reshape", ["post/topk_indices", "post/idx_shape"], ["post/cand_idx"],
                                  name="post/flatten_indices"))
    nodes.append(helper.make_node("Gather", ["boxes", "post/cand_idx"], ["topk_boxes"],
                                  name="post/gather_boxes", axis=1))
    const("post/max_output_boxes_per_class", np.array([MAX_OUT], dtype=np.int64))
    const("post/iou_threshold", np.array([IOU_THR], dtype=np.float32))
    const("post/score_threshold", np.array([SCORE_THR], dtype=np.float32))
    nodes.append(helper.make_node(
        "NonMaxSuppression",
        ["topk_boxes", "topk_scores", "post/max_output_boxes_per_class", "post/iou_threshold",
         "post/score_threshold"],
        ["selected_indices"], name="post/nms", center_point_box=0))

    graph = helper.make_graph(
        nodes, "tiny_detector",
        inputs=[helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 64, 64])],
        outputs=[
            helper.make_tensor_value_info("selected_indices", TensorProto.INT64, ["num_selected", 3]),
            helper.make_tensor_value_info("topk_scores", TensorProto.FLOAT, [1, 1, TOPK]),
            helper.make_tensor_value_info("topk_boxes", TensorProto.FLOAT, [1, TOPK, 4]),
        ],
        initializer=inits,
    )
    opsets = [helper.make_opsetid("", OPSET)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="npukit-sample_models",
                              ir_version=helper.find_min_ir_version_for(opsets))
    model.doc_string = "npukit sample: tiny detector (seeded random weights), conv backbone + TopK + NMS"
    return model


def main():
    model = build()
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(OUT))

    import onnxruntime as ort
    sess = ort.InferenceSession(str(OUT), providers=["CPUExecutionProvider"])
    img = np.random.default_rng(SEED + 1).random((1, 3, 64, 64), dtype=np.float32)
    sel, sc, bx = sess.run(None, {"image": img})
    ops = {}
    for n in model.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print(f"wrote {OUT.name} ({OUT.stat().st_size} bytes), opset {OPSET}, ir_version {model.ir_version}")
    print(f"onnx nodes: {len(model.graph.node)} {ops}")
    print(f"onnxruntime on a seeded random image: selected_indices {sel.shape}, "
          f"top scores {[round(float(v), 3) for v in sc[0, 0, :4]]}, boxes valid: "
          f"{bool(np.all(bx[..., 2] > bx[..., 0]) and np.all(bx[..., 3] > bx[..., 1]))}")
    print(f"NMS kept candidates {sel[:, 2].tolist()} of {TOPK} (max_output_boxes_per_class={MAX_OUT}, "
          f"iou_threshold={IOU_THR}, score_threshold={SCORE_THR})")


if __name__ == "__main__":
    main()
