"""Verify the bundled sample models. Run with the default python (no TensorFlow).

For every file in this folder it checks:
  * .onnx  onnx.checker (full_check), runs in onnxruntime, imports with
           tvm.relax.frontend.onnx.from_onnx(keep_params_in_input=False) + FoldConstant
  * .tflite imports with tvm.relax.frontend.tflite.from_tflite(tflite.Model.GetRootAsModel(buf, 0))
           + FoldConstant
  * .pt2   torch.export.load + tvm.relax.frontend.torch.from_exported_program + FoldConstant
and prints the number of relax.Call bindings in `main` and the relax op names.

It also
  * measures the digits accuracy with onnxruntime (digits_cnn.onnx), torch (digits_cnn.pt2)
    and compares it with the numbers make_digits.py / make_tflite.py print (EXPECTED below);
  * unless --no-run: compiles the small models with TVM (llvm) and runs them: digits ONNX,
    pt2 and both digits .tflite on the whole test split (accuracy), the detector against
    onnxruntime (NMS indices, scores, boxes).

Exit status is non-zero if anything fails.
"""
import argparse
import sys
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MAX_BYTES = 3 * 1024 * 1024
MIN_TRANSFORMER_CALLS = 1000

# Test-split accuracies printed by the generators (the data split and training are
# deterministic, so these are exact; update them if a generator is changed on purpose).
EXPECTED = {
    "digits_cnn.onnx": 443,          # of 450, make_digits.py (onnxruntime)
    "digits_cnn_float.tflite": 439,  # of 450, make_tflite.py (tf.lite.Interpreter)
    "digits_cnn_int8.tflite": 440,   # of 450, make_tflite.py (tf.lite.Interpreter)
}

ONNX_FILES = ["digits_cnn.onnx", "tiny_detector.onnx", "transformer_encoder.onnx"]
TFLITE_FILES = ["digits_cnn_float.tflite", "digits_cnn_int8.tflite", "mobilenet_v1_025_int8.tflite"]
PT2_FILES = ["digits_cnn.pt2"]
DATA_FILES = ["digits_cnn.npz", "digits_cnn_float.npz", "digits_cnn_int8.npz", "mobilenet_v1_025_int8.npz"]

warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=DeprecationWarning)


# --------------------------------------------------------------------------- helpers

def relax_calls(mod):
    """Counter of op names over the relax.Call bindings of mod['main']."""
    import tvm
    from tvm import relax

    ops = Counter()
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, relax.Call):
                op = value.op
                ops[op.name if isinstance(op, tvm.ir.Op) else f"<{type(op).__name__}>"] += 1
    return ops


def static_params(mod):
    """Describe main's parameters; raise if any shape is symbolic."""
    out = []
    for p in mod["main"].params:
        # TVM 0.27: Var.ty (a relax TensorType) and Var.name; older TVM: struct_info / name_hint.
        ty = p.ty if hasattr(p, "ty") else p.struct_info
        name = p.name if hasattr(p, "name") else p.name_hint
        shape = [int(d) for d in ty.shape.values]  # int() fails on a symbolic dim
        out.append(f"{name}:{ty.dtype}{shape}")
    return out


def fold(mod):
    from tvm import relax
    return relax.transform.FoldConstant()(mod)


def to_numpy(x):
    if isinstance(x, (list, tuple)) or type(x).__name__ == "Array":
        return [to_numpy(v) for v in x]
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


def tvm_vm(mod):
    import tvm
    from tvm import relax
    ex = tvm.compile(mod, target="llvm")
    return relax.VirtualMachine(ex, tvm.cpu())


def tvm_run(vm, *arrays):
    import tvm
    out = vm["main"](*[tvm.runtime.tensor(a) for a in arrays])
    return to_numpy(out)


def onnx_ops(model):
    return Counter(n.op_type for n in model.graph.node)


# --------------------------------------------------------------------------- checks

class Report:
    def __init__(self):
        self.rows = []      # (file, format, relax_calls, notes)
        self.failures = []
        self.opsets = {}    # file -> Counter

    def fail(self, name, msg):
        print(f"  FAIL {name}: {msg}")
        self.failures.append((name, msg))


def check_onnx(name, rep, run):
    import onnx
    import onnxruntime as ort
    from tvm.relax.frontend.onnx import from_onnx

    path = HERE / name
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    opset = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    print(f"  onnx: opset {opset}, ir_version {model.ir_version}, {len(model.graph.node)} nodes "
          f"{dict(onnx_ops(model))}")
    print(f"  onnx inputs {[(i.name, [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim]) for i in model.graph.input]}"
          f" outputs {[o.name for o in model.graph.output]}")

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {}
    for inp in sess.get_inputs():
        shape = [int(d) for d in inp.shape]  # fails on a symbolic dim
        feeds[inp.name] = np.random.default_rng(1).random(shape, dtype=np.float32)
    ort_out = sess.run(None, feeds)
    print(f"  onnxruntime: ran, outputs {[tuple(o.shape) for o in ort_out]}")

    t0 = time.time()
    mod = from_onnx(model, keep_params_in_input=False)
    raw = sum(relax_calls(mod).values())
    mod = fold(mod)
    ops = relax_calls(mod)
    n_calls = sum(ops.values())
    print(f"  tvm from_onnx + FoldConstant: {time.time() - t0:.1f}s, params {static_params(mod)}")
    print(f"  relax calls {n_calls} ({raw} before FoldConstant): {dict(sorted(ops.items()))}")
    rep.opsets[name] = ops
    notes = [f"{raw} calls before FoldConstant"]

    if name == "digits_cnn.onnx":
        data = np.load(HERE / "digits_cnn.npz")
        x, y = data["x"], data["y"]
        preds = np.array([int(np.argmax(sess.run(None, {"input": x[i:i + 1]})[0])) for i in range(len(x))])
        correct = int((preds == y).sum())
        notes.append(f"onnxruntime acc {correct}/{len(y)} = {correct / len(y):.4f}")
        if correct != EXPECTED[name]:
            rep.fail(name, f"onnxruntime accuracy {correct} != expected {EXPECTED[name]}")
        if run:
            vm = tvm_vm(mod)
            tv = np.array([int(np.argmax(tvm_run(vm, x[i:i + 1]))) for i in range(len(x))])
            tc = int((tv == y).sum())
            notes.append(f"TVM acc {tc}/{len(y)}")
            if tc != correct:
                rep.fail(name, f"TVM accuracy {tc} != onnxruntime {correct}")
    elif name == "tiny_detector.onnx":
        need = {"relax.topk", "relax.vision.all_class_non_max_suppression", "relax.nn.conv2d"}
        if not need <= set(ops):
            rep.fail(name, f"missing relax ops {need - set(ops)}")
        notes.append(f"ORT NMS kept {ort_out[0].shape[0]} of 16")
        if run:
            vm = tvm_vm(mod)
            tv = tvm_run(vm, feeds["image"])
            same_idx = tv[0].shape == ort_out[0].shape and np.array_equal(tv[0], ort_out[0])
            err = max(float(np.abs(tv[1] - ort_out[1]).max()), float(np.abs(tv[2] - ort_out[2]).max()))
            notes.append(f"TVM run: NMS indices {'==' if same_idx else '!='} ORT, max |diff| {err:.1e}")
            fn = mod["main"]
            ret = fn.ret_ty if hasattr(fn, "ret_ty") else fn.ret_struct_info  # TVM 0.27 / older
            print(f"  relax return type: {ret}")
            print(f"  TVM run: selected {tv[0].shape} {tv[0][:, 2].tolist()} vs ORT {ort_out[0][:, 2].tolist()}")
            if not same_idx or err > 1e-4:
                rep.fail(name, "TVM output differs from onnxruntime")
    elif name == "transformer_encoder.onnx":
        if n_calls < MIN_TRANSFORMER_CALLS:
            rep.fail(name, f"only {n_calls} relax calls (< {MIN_TRANSFORMER_CALLS})")
        if run:
            t0 = time.time()
            vm = tvm_vm(mod)
            tv = tvm_run(vm, feeds["tokens"])
            err = float(np.abs(tv - ort_out[0]).max())
            notes.append(f"TVM run max |diff| vs ORT {err:.1e} (compile+run {time.time() - t0:.0f}s)")
            if err > 1e-3:
                rep.fail(name, f"TVM output differs from onnxruntime by {err}")
    return n_calls, "; ".join(notes)


def tflite_io(model):
    """[(name, dtype, shape, scale, zero_point)] for the subgraph inputs."""
    import tflite
    sub = model.Subgraphs(0)
    type_names = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
    rows = []
    for i in range(sub.InputsLength()):
        t = sub.Tensors(sub.Inputs(i))
        q = t.Quantization()
        scale = float(q.Scale(0)) if q is not None and q.ScaleLength() else None
        zp = int(q.ZeroPoint(0)) if q is not None and q.ZeroPointLength() else None
        rows.append((t.Name().decode(), type_names[t.Type()].lower(), [int(d) for d in t.ShapeAsNumpy()],
                     scale, zp))
    return rows


def tflite_ops(model):
    import tflite
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    ops = Counter()
    sub = model.Subgraphs(0)
    for i in range(sub.OperatorsLength()):
        code = model.OperatorCodes(sub.Operators(i).OpcodeIndex())
        ops[names[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())]] += 1
    return ops


def check_tflite(name, rep, run):
    import tflite
    from tvm.relax.frontend.tflite import from_tflite

    buf = (HERE / name).read_bytes()
    model = tflite.Model.GetRootAsModel(buf, 0)
    ins = tflite_io(model)
    print(f"  tflite: {dict(tflite_ops(model))}, inputs {ins}")
    t0 = time.time()
    mod = from_tflite(model)
    raw = sum(relax_calls(mod).values())
    mod = fold(mod)
    ops = relax_calls(mod)
    n_calls = sum(ops.values())
    print(f"  tvm from_tflite + FoldConstant: {time.time() - t0:.1f}s, params {static_params(mod)}")
    print(f"  relax calls {n_calls} ({raw} before FoldConstant): {dict(sorted(ops.items()))}")
    rep.opsets[name] = ops
    notes = [f"{raw} calls before FoldConstant"]

    if name.startswith("digits_cnn") and run:
        data = np.load(HERE / "digits_cnn_float.npz")
        x, y = data["x"], data["y"]
        _, dtype, _, scale, zp = ins[0]
        vm = tvm_vm(mod)
        correct = 0
        for i in range(len(x)):
            sample = x[i:i + 1]
            if dtype == "int8":
                sample = np.clip(np.round(sample / scale) + zp, -128, 127).astype(np.int8)
            correct += int(np.argmax(tvm_run(vm, sample)) == y[i])
        notes.append(f"TVM acc {correct}/{len(y)} (TFLite interpreter: {EXPECTED[name]}/{len(y)})")
        # float must agree exactly; int8 rounding in TVM's QDQ lowering may move a sample or two
        tolerance = 0 if dtype == "float32" else 2
        if abs(correct - EXPECTED[name]) > tolerance:
            rep.fail(name, f"TVM accuracy {correct}/{len(y)} vs TFLite {EXPECTED[name]}/{len(y)}")
    elif name.startswith("mobilenet") and run:
        data = np.load(HERE / "mobilenet_v1_025_int8.npz")
        calib, ref = data["x"], data["tflite_out"]
        _, dtype, shape, scale, zp = ins[0]
        vm = tvm_vm(mod)
        outs = []
        for sample in calib:
            q = np.clip(np.round(sample / scale) + zp, -128, 127).astype(np.int8).reshape(shape)
            outs.append(tvm_run(vm, q))
        outs = np.stack(outs).astype(np.int32)
        diff = int(np.abs(outs - ref.astype(np.int32)).max())
        same_top = int((outs.reshape(len(outs), -1).argmax(1) == ref.reshape(len(ref), -1).argmax(1)).sum())
        notes.append(f"TVM vs TFLite on {len(calib)} calib inputs: max |diff| {diff} LSB, "
                     f"same argmax {same_top}/{len(calib)}")
        if diff > 2:
            rep.fail(name, f"TVM int8 output differs from TFLite by {diff} LSB")
    return n_calls, "; ".join(notes)


def check_pt2(name, rep, run):
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    torch.set_num_threads(1)
    ep = torch.export.load(str(HERE / name))
    sig = ep.graph_signature
    print(f"  torch.export: user inputs {list(sig.user_inputs)}, outputs {list(sig.user_outputs)}, "
          f"{sum(1 for n in ep.graph.nodes if n.op == 'call_function')} call_function nodes")
    t0 = time.time()
    mod = from_exported_program(ep, keep_params_as_input=False)
    raw_ops = relax_calls(mod)
    mod = fold(mod)
    ops = relax_calls(mod)
    n_calls = sum(ops.values())
    print(f"  tvm from_exported_program + FoldConstant: {time.time() - t0:.1f}s, params {static_params(mod)}")
    print(f"  relax calls {n_calls} ({sum(raw_ops.values())} before FoldConstant: {dict(sorted(raw_ops.items()))}): "
          f"{dict(sorted(ops.items()))}")
    rep.opsets[name] = ops

    data = np.load(HERE / "digits_cnn.npz")
    x, y = data["x"], data["y"]
    with torch.no_grad():
        preds = np.array([int(ep.module()(torch.from_numpy(x[i:i + 1])).argmax()) for i in range(len(x))])
    correct = int((preds == y).sum())
    notes = [f"{sum(raw_ops.values())} calls before FoldConstant", f"torch acc {correct}/{len(y)}"]
    if correct != EXPECTED["digits_cnn.onnx"]:
        rep.fail(name, f"torch accuracy {correct} != onnx {EXPECTED['digits_cnn.onnx']}")
    if run:
        vm = tvm_vm(mod)
        out = [tvm_run(vm, x[i:i + 1]) for i in range(len(x))]
        out = [o[0] if isinstance(o, list) else o for o in out]
        tc = int((np.array([int(np.argmax(o)) for o in out]) == y).sum())
        notes.append(f"TVM acc {tc}/{len(y)}")
        if tc != correct:
            rep.fail(name, f"TVM accuracy {tc} != torch {correct}")
    return n_calls, "; ".join(notes)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-run", action="store_true", help="only import, do not compile/run with TVM")
    args = ap.parse_args()
    run = not args.no_run

    import tvm
    rep = Report()
    print(f"tvm {tvm.__version__}")

    checks = ([(f, "onnx", check_onnx) for f in ONNX_FILES]
              + [(f, "tflite", check_tflite) for f in TFLITE_FILES]
              + [(f, "pt2", check_pt2) for f in PT2_FILES])
    for name, fmt, fn in checks:
        print(f"\n== {name}")
        path = HERE / name
        if not path.exists():
            rep.fail(name, "missing")
            rep.rows.append((name, fmt, "-", "missing", "FAIL"))
            continue
        n_before = len(rep.failures)
        try:
            n_calls, notes = fn(name, rep, run)
        except Exception as e:  # report and keep going
            traceback.print_exc()
            rep.fail(name, f"{type(e).__name__}: {e}")
            n_calls, notes = "-", ""
        status = "ok" if len(rep.failures) == n_before else "FAIL"
        rep.rows.append((name, fmt, n_calls, notes, status))

    print("\n== sizes")
    for f in sorted(HERE.iterdir()):
        if f.suffix in (".onnx", ".tflite", ".pt2", ".npz"):
            size = f.stat().st_size
            flag = "" if size < MAX_BYTES else "  <-- over 3 MB"
            print(f"  {f.name:32s} {size:>9d}{flag}")
            if size >= MAX_BYTES:
                rep.fail(f.name, "over 3 MB")
    for f in DATA_FILES:
        if not (HERE / f).exists():
            rep.fail(f, "missing")

    print("\n== relax op names per model")
    for name, ops in rep.opsets.items():
        print(f"  {name}: {sorted(ops)}")

    print("\n== summary")
    w = max(len(r[0]) for r in rep.rows)
    print(f"  {'file':{w}s}  {'format':6s}  {'relax calls':>11s}  status  notes")
    for name, fmt, n, notes, status in rep.rows:
        print(f"  {name:{w}s}  {fmt:6s}  {str(n):>11s}  {status:6s}  {notes}")
    if rep.failures:
        print(f"\n{len(rep.failures)} failure(s):")
        for name, msg in rep.failures:
            print(f"  {name}: {msg}")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
