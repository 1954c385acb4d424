"""Make the bundled TFLite sample models. Needs TensorFlow: run it with the
TensorFlow venv, e.g. `/work/tfvenv/bin/python make_tflite.py` (see make_all.sh).
Nothing else in npukit needs TensorFlow; the .tflite files it writes are committed.

Writes (next to this file):
  mobilenet_v1_025_int8.tflite  MobileNet-v1 style net, width 0.25, input 1x96x96x3,
                                13 depthwise-separable blocks, 10 classes, seeded random
                                weights (untrained), full-integer int8 (int8 in/out)
  mobilenet_v1_025_int8.npz           x float32 [32,1,96,96,3]: the seeded representative inputs,
                                tflite_out int8 [32,1,10]: the TFLite interpreter's outputs for
                                them (input quantized with the model's input scale/zero point)
  digits_cnn_float.tflite       Keras CNN on the 8x8 digits (NHWC 1x8x8x1), float32
  digits_cnn_int8.tflite        same network, full-integer int8 (int8 in/out),
                                representative data = the training images
  digits_cnn_float.npz / digits_cnn_int8.npz          x float32 [N,8,8,1], y int64 [N]: the held-out test split

All models have a fixed batch of 1: a Keras model with a dynamic batch converts to
an int8 TFLite that carries SHAPE ops, which TVM's from_tflite refuses for quantized
models.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_DETERMINISTIC_OPS", "1")
os.environ.setdefault("PYTHONHASHSEED", "0")

import contextlib  # noqa: E402
import io  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _digits_data import load_split  # noqa: E402

SEED = 0
N_MOBILENET_CALIB = 32
DIGITS_EPOCHS = 20
DIGITS_BATCH = 32

keras = tf.keras
layers = keras.layers

# tf.lite.Interpreter is deprecated in favour of ai_edge_litert, but it is what this venv has.
warnings.filterwarnings("ignore", message=r".*tf.lite.Interpreter is deprecated.*")
warnings.filterwarnings("ignore", message=r".*Statistics for quantized inputs were expected.*")


def set_determinism():
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(SEED)
    tf.config.experimental.enable_op_determinism()


# --------------------------------------------------------------------------- MobileNet

# (pointwise filters at width 1.0, depthwise stride) for the 13 blocks of MobileNet v1.
MOBILENET_BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
                    (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1)]


def build_mobilenet(batch_size=1, alpha=0.25, input_hw=96, classes=10):
    inp = keras.Input((input_hw, input_hw, 3), batch_size=batch_size, name="image")
    conv_init = "he_normal"
    # momentum=0: one training-mode pass sets the moving statistics to that batch's (see
    # init_mobilenet); it has no effect on inference or on the converted model.
    bn = dict(momentum=0.0, epsilon=1e-3)
    x = layers.Conv2D(int(32 * alpha), 3, strides=2, padding="same", use_bias=False,
                      kernel_initializer=conv_init, name="conv1")(inp)
    x = layers.BatchNormalization(name="conv1_bn", **bn)(x)
    x = layers.ReLU(6.0, name="conv1_relu")(x)
    for i, (filters, stride) in enumerate(MOBILENET_BLOCKS, start=1):
        x = layers.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False,
                                   depthwise_initializer=conv_init, name=f"conv_dw_{i}")(x)
        x = layers.BatchNormalization(name=f"conv_dw_{i}_bn", **bn)(x)
        x = layers.ReLU(6.0, name=f"conv_dw_{i}_relu")(x)
        x = layers.Conv2D(int(filters * alpha), 1, padding="same", use_bias=False,
                          kernel_initializer=conv_init, name=f"conv_pw_{i}")(x)
        x = layers.BatchNormalization(name=f"conv_pw_{i}_bn", **bn)(x)
        x = layers.ReLU(6.0, name=f"conv_pw_{i}_relu")(x)
    x = layers.GlobalAveragePooling2D(keepdims=True, name="global_pool")(x)   # [1,1,1,C]
    x = layers.Conv2D(classes, 1, padding="same", kernel_initializer=conv_init, name="conv_preds")(x)
    x = layers.Reshape((classes,), name="reshape_preds")(x)
    out = layers.Softmax(name="predictions")(x)
    return keras.Model(inp, out, name="mobilenet_v1_025_96")


def init_mobilenet(images):
    """Seeded random MobileNet with data-dependent BatchNorm statistics, batch fixed at 1.

    Random weights alone make the signal fade with depth, so every input would give the
    same output. Instead: random gamma/beta, then one training-mode forward pass over the
    calibration images sets each BN layer's moving mean/variance to the statistics of its
    input (momentum 0). Activations then stay well scaled through all 13 blocks, the way
    they do in a trained network, and folding the BNs gives realistic conv weights/biases.
    """
    rng = np.random.default_rng(SEED)
    free = build_mobilenet(batch_size=None)
    for layer in free.layers:
        if isinstance(layer, layers.BatchNormalization):
            gamma, beta, mean, var = layer.get_weights()
            c = gamma.shape[0]
            layer.set_weights([rng.uniform(0.5, 1.5, c).astype(np.float32),
                               rng.normal(0.0, 0.2, c).astype(np.float32), mean, var])
    free(images, training=True)
    model = build_mobilenet(batch_size=1)
    model.set_weights(free.get_weights())
    return model


def mobilenet_calibration_images(n=N_MOBILENET_CALIB, hw=96):
    """Seeded synthetic "images", float32 [n,1,hw,hw,3] in [-1, 1] (MobileNet preprocessing).

    Each image is a blocky low-frequency colour pattern (6x6 cells) with its own
    contrast and brightness plus pixel noise, so that the 32 inputs really differ
    after global pooling (pure i.i.d. noise gives 32 near-identical outputs).
    Pixels stay on the 8-bit grid (v / 127.5 - 1), which also lets the .npz compress.
    """
    rng = np.random.default_rng(SEED)
    cells = rng.uniform(0.0, 255.0, (n, 6, 6, 3))
    pattern = np.kron(cells, np.ones((1, hw // 6, hw // 6, 1)))             # [n,hw,hw,3]
    contrast = rng.uniform(0.3, 1.0, (n, 1, 1, 1))
    brightness = rng.uniform(-60.0, 60.0, (n, 1, 1, 3))
    noise = rng.normal(0.0, 12.0, pattern.shape)
    pixels = np.clip(np.round(128.0 + contrast * (pattern - 128.0) + brightness + noise), 0, 255)
    return (pixels.astype(np.float32) / np.float32(127.5) - np.float32(1.0))[:, None].astype(np.float32)


# --------------------------------------------------------------------------- digits

def build_digits(batch_size=None):
    inp = keras.Input((8, 8, 1), batch_size=batch_size, name="input")
    x = layers.Conv2D(8, 3, padding="same", activation="relu", name="conv1")(inp)
    x = layers.Conv2D(16, 3, padding="same", activation="relu", name="conv2")(x)
    x = layers.MaxPooling2D(2, name="pool")(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(64, activation="relu", name="fc1")(x)
    x = layers.Dense(10, name="fc2")(x)
    out = layers.Softmax(name="probs")(x)
    return keras.Model(inp, out, name="digits_cnn")


# --------------------------------------------------------------------------- helpers

def convert(model, representative=None):
    """Convert a fixed-batch Keras model; full-integer int8 if representative is given."""
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if representative is not None:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]

        def gen():
            for sample in representative:
                yield [sample.astype(np.float32)]

        converter.representative_dataset = gen
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    # from_keras_model exports a temporary SavedModel and prints its signature; keep that quiet.
    with contextlib.redirect_stdout(io.StringIO()):
        return converter.convert()


def tflite_ops(buf):
    """Op histogram of a .tflite flatbuffer, using the interpreter's op details."""
    interp = tf.lite.Interpreter(model_content=buf)
    ops = {}
    for d in interp._get_ops_details():  # noqa: SLF001 - only used for printing
        ops[d["op_name"]] = ops.get(d["op_name"], 0) + 1
    return ops


def tflite_accuracy(buf, x, y):
    interp = tf.lite.Interpreter(model_content=buf, num_threads=1)
    interp.allocate_tensors()
    inp = interp.get_input_details()[0]
    out = interp.get_output_details()[0]
    correct = 0
    for i in range(len(x)):
        sample = x[i:i + 1]
        if inp["dtype"] == np.int8:
            scale, zp = inp["quantization"]
            sample = np.clip(np.round(sample / scale) + zp, -128, 127).astype(np.int8)
        interp.set_tensor(inp["index"], sample)
        interp.invoke()
        correct += int(np.argmax(interp.get_tensor(out["index"])[0]) == y[i])
    return correct / len(x)


def tflite_run_int8(buf, samples):
    """Run a full-int8 model on float samples (quantized with the input params)."""
    interp = tf.lite.Interpreter(model_content=buf, num_threads=1)
    interp.allocate_tensors()
    inp = interp.get_input_details()[0]
    out = interp.get_output_details()[0]
    scale, zp = inp["quantization"]
    outs = []
    for sample in samples:
        q = np.clip(np.round(sample / scale) + zp, -128, 127).astype(np.int8)
        interp.set_tensor(inp["index"], q)
        interp.invoke()
        outs.append(interp.get_tensor(out["index"]).copy())
    return np.stack(outs)


def io_summary(buf):
    interp = tf.lite.Interpreter(model_content=buf)

    def fmt(d):
        scale, zp = d["quantization"]
        q = f" scale={scale:.6g} zero_point={zp}" if scale else ""
        return f"{d['name']} {np.dtype(d['dtype']).name}{[int(v) for v in d['shape']]}{q}"

    return ([fmt(d) for d in interp.get_input_details()], [fmt(d) for d in interp.get_output_details()])


def write(path, buf):
    path.write_bytes(buf)
    print(f"wrote {path.name} ({len(buf)} bytes)")
    ins, outs = io_summary(buf)
    print(f"  inputs {ins}\n  outputs {outs}\n  ops {tflite_ops(buf)}")


def main():
    set_determinism()
    print(f"tensorflow {tf.__version__}, keras {keras.__version__}")

    # MobileNet v1 0.25 @ 96x96, random weights, int8.
    calib = mobilenet_calibration_images()
    mnet = init_mobilenet(calib[:, 0])
    print(f"mobilenet params: {mnet.count_params()}")
    mnet_buf = convert(mnet, representative=calib)
    write(HERE / "mobilenet_v1_025_int8.tflite", mnet_buf)
    ref = tflite_run_int8(mnet_buf, calib)
    np.savez_compressed(HERE / "mobilenet_v1_025_int8.npz", x=calib, tflite_out=ref)
    print(f"wrote mobilenet_v1_025_int8.npz x{list(calib.shape)} tflite_out{list(ref.shape)}; "
          f"argmax histogram over the 32 inputs: {np.bincount(ref.reshape(len(ref), -1).argmax(1), minlength=10).tolist()}")

    # Digits CNN: train with a free batch dim, then copy weights into a batch-1 model.
    # Reseed so the digits model does not depend on how much randomness MobileNet used.
    keras.utils.set_random_seed(SEED + 1)
    x_tr, x_te, y_tr, y_te = load_split()
    x_tr, x_te = x_tr[..., None], x_te[..., None]          # NHWC
    train_model = build_digits(batch_size=None)
    train_model.compile(optimizer=keras.optimizers.Adam(2e-3),
                        loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    train_model.fit(x_tr, y_tr, epochs=DIGITS_EPOCHS, batch_size=DIGITS_BATCH, shuffle=True, verbose=0)
    keras_acc = float((np.argmax(train_model.predict(x_te, verbose=0), axis=1) == y_te).mean())
    print(f"keras digits test accuracy: {keras_acc:.4f}")
    model = build_digits(batch_size=1)
    model.set_weights(train_model.get_weights())

    float_buf = convert(model)
    write(HERE / "digits_cnn_float.tflite", float_buf)
    int8_buf = convert(model, representative=[x_tr[i:i + 1] for i in range(len(x_tr))])
    write(HERE / "digits_cnn_int8.tflite", int8_buf)
    # npukit data sidecars (<model stem>.npz); float x: npukit quantizes it for the int8 input
    for stem in ("digits_cnn_float", "digits_cnn_int8"):
        np.savez(HERE / f"{stem}.npz", x=x_te.astype(np.float32), y=y_te.astype(np.int64))
    print(f"wrote digits_cnn_float.npz, digits_cnn_int8.npz x{list(x_te.shape)}")

    acc_f = tflite_accuracy(float_buf, x_te, y_te)
    acc_q = tflite_accuracy(int8_buf, x_te, y_te)
    print(f"tflite test accuracy: float {acc_f:.4f}, int8 {acc_q:.4f} (N={len(y_te)})")
    if min(acc_f, acc_q) < 0.95:
        raise SystemExit("digits accuracy below 0.95")


if __name__ == "__main__":
    main()
