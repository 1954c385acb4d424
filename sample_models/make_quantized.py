"""onnxruntime's static int8 quantization of the digits CNN, in both of its formats.

    digits_cnn_qdq.onnx    quantize_static(..., quant_format=QuantFormat.QDQ)
    digits_cnn_qop.onnx    quantize_static(..., quant_format=QuantFormat.QOperator)  (QLinearConv,
                           QLinearMatMul / QGemm, QLinearGlobalAveragePool ... as onnxruntime writes them)

Calibration: the ``calib`` array of ``digits_cnn.npz`` (64 images), MinMax, per-tensor, QUInt8
activations and QInt8 weights (onnxruntime's defaults).  Both files import into npukit (the
QOperator one is rewritten to the QDQ form at import) and give the same placement on arm-dsp-dla.
Deterministic: same bytes every run.  Needs onnxruntime.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


class _Calib:
    def __init__(self, x: np.ndarray, name: str):
        self.items = iter([{name: x[i : i + 1].astype(np.float32)} for i in range(len(x))])

    def get_next(self):
        return next(self.items, None)


def make(src: Path, data: Path, out_dir: Path = HERE) -> dict[str, Path]:
    import onnx
    from onnxruntime.quantization import QuantFormat, quantize_static

    name = onnx.load(str(src)).graph.input[0].name
    calib = np.load(data)["calib"]
    out = {}
    for fmt, suffix in ((QuantFormat.QDQ, "qdq"), (QuantFormat.QOperator, "qop")):
        path = out_dir / f"{src.stem}_{suffix}.onnx"
        quantize_static(str(src), str(path), _Calib(calib, name), quant_format=fmt)
        m = onnx.load(str(path))  # drop the producer version so the bytes do not depend on onnxruntime's release
        m.producer_version = ""
        onnx.save(m, str(path))
        out[suffix] = path
    return out


def main() -> int:
    for k, p in make(HERE / "digits_cnn.onnx", HERE / "digits_cnn.npz").items():
        print(f"{k}: {p.name} {p.stat().st_size:,} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
