"""Build a small pre-LN transformer encoder stack as ONNX with onnx.helper.

Writes `transformer_encoder.onnx` (opset 20) next to this file.

  input   tokens   float32 [1,16,32]   (sequence 16, d_model 32)
  output  encoded  float32 [1,16,32]

Each of the N_LAYERS identical layers (names `layer{i}/...`):
  attn/ln -> q/k/v MatMul+Add -> Reshape/Transpose into 2 heads ->
  attn/qk MatMul (Q.K^T, K transposed straight to [1,2,16,16]) -> attn/scale Mul ->
  attn/softmax -> attn/av MatMul -> Transpose/Reshape merge heads ->
  attn/out MatMul+Add -> attn/residual Add ->
  ffn/ln -> ffn/fc1 MatMul+Add -> ffn/gelu (opset-20 Gelu) -> ffn/fc2 MatMul+Add -> ffn/residual Add
followed by one `final/ln`. Weights are seeded random (std 0.05).

N_LAYERS is chosen so that TVM's Relax ONNX importer followed by FoldConstant
gives >= 1000 relax.Call bindings in `main` (check_samples.py prints the count).
"""
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
OUT = HERE / "transformer_encoder.onnx"
SEED = 0
OPSET = 20
SEQ = 16
D_MODEL = 32
N_HEADS = 2
HEAD_DIM = D_MODEL // N_HEADS
D_FF = 64
N_LAYERS = 40
W_STD = 0.05


def build():
    rng = np.random.default_rng(SEED)
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def weight(name, shape):
        return const(name, (rng.standard_normal(shape) * W_STD).astype(np.float32))

    def node(op, inputs, name, **attrs):
        out = f"{name}_out"
        nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def layer_norm(x, name):
        g = const(f"{name}/gamma", np.ones(D_MODEL, dtype=np.float32))
        b = const(f"{name}/beta", np.zeros(D_MODEL, dtype=np.float32))
        return node("LayerNormalization", [x, g, b], name, axis=-1, epsilon=1e-5)

    def linear(x, name, din, dout):
        w = weight(f"{name}/weight", (din, dout))
        b = weight(f"{name}/bias", (dout,))
        y = node("MatMul", [x, w], f"{name}/matmul")
        return node("Add", [y, b], f"{name}/bias_add")

    # Shared shape constants (reused by every layer).
    split_shape = const("shape/split_heads", np.array([1, SEQ, N_HEADS, HEAD_DIM], dtype=np.int64))
    merge_shape = const("shape/merge_heads", np.array([1, SEQ, D_MODEL], dtype=np.int64))
    scale = const("const/attn_scale", np.array(1.0 / np.sqrt(HEAD_DIM), dtype=np.float32))

    x = "tokens"
    for i in range(N_LAYERS):
        p = f"layer{i}"
        h = layer_norm(x, f"{p}/attn/ln")
        q = linear(h, f"{p}/attn/q", D_MODEL, D_MODEL)
        k = linear(h, f"{p}/attn/k", D_MODEL, D_MODEL)
        v = linear(h, f"{p}/attn/v", D_MODEL, D_MODEL)
        q = node("Reshape", [q, split_shape], f"{p}/attn/q_split")
        k = node("Reshape", [k, split_shape], f"{p}/attn/k_split")
        v = node("Reshape", [v, split_shape], f"{p}/attn/v_split")
        q = node("Transpose", [q], f"{p}/attn/q_heads", perm=[0, 2, 1, 3])   # [1,H,S,Dh]
        k = node("Transpose", [k], f"{p}/attn/k_heads_t", perm=[0, 2, 3, 1])  # [1,H,Dh,S]
        v = node("Transpose", [v], f"{p}/attn/v_heads", perm=[0, 2, 1, 3])   # [1,H,S,Dh]
        s = node("MatMul", [q, k], f"{p}/attn/qk")                           # [1,H,S,S]
        s = node("Mul", [s, scale], f"{p}/attn/scale")
        a = node("Softmax", [s], f"{p}/attn/softmax", axis=-1)
        o = node("MatMul", [a, v], f"{p}/attn/av")                           # [1,H,S,Dh]
        o = node("Transpose", [o], f"{p}/attn/merge_transpose", perm=[0, 2, 1, 3])
        o = node("Reshape", [o, merge_shape], f"{p}/attn/merge_heads")
        o = linear(o, f"{p}/attn/out", D_MODEL, D_MODEL)
        x = node("Add", [x, o], f"{p}/attn/residual")

        h = layer_norm(x, f"{p}/ffn/ln")
        h = linear(h, f"{p}/ffn/fc1", D_MODEL, D_FF)
        h = node("Gelu", [h], f"{p}/ffn/gelu")
        h = linear(h, f"{p}/ffn/fc2", D_FF, D_MODEL)
        x = node("Add", [x, h], f"{p}/ffn/residual")

    x = layer_norm(x, "final/ln")
    nodes.append(helper.make_node("Identity", [x], ["encoded"], name="final/output"))

    graph = helper.make_graph(
        nodes, "transformer_encoder",
        inputs=[helper.make_tensor_value_info("tokens", TensorProto.FLOAT, [1, SEQ, D_MODEL])],
        outputs=[helper.make_tensor_value_info("encoded", TensorProto.FLOAT, [1, SEQ, D_MODEL])],
        initializer=inits,
    )
    opsets = [helper.make_opsetid("", OPSET)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="npukit-sample_models",
                              ir_version=helper.find_min_ir_version_for(opsets))
    model.doc_string = (f"npukit sample: {N_LAYERS}-layer transformer encoder, d_model {D_MODEL}, "
                        f"{N_HEADS} heads, d_ff {D_FF}, seq {SEQ}, seeded random weights")
    return model


def main():
    model = build()
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(OUT))

    import onnxruntime as ort
    sess = ort.InferenceSession(str(OUT), providers=["CPUExecutionProvider"])
    tok = np.random.default_rng(SEED + 1).standard_normal((1, SEQ, D_MODEL)).astype(np.float32)
    (y,) = sess.run(None, {"tokens": tok})
    ops = {}
    for n in model.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print(f"wrote {OUT.name} ({OUT.stat().st_size} bytes), opset {OPSET}, ir_version {model.ir_version}")
    print(f"layers {N_LAYERS}, onnx nodes: {len(model.graph.node)} {ops}")
    print(f"onnxruntime output {y.shape}, finite: {bool(np.isfinite(y).all())}, std {float(y.std()):.3f}")


if __name__ == "__main__":
    main()
