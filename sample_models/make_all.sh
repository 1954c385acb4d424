#!/usr/bin/env bash
# Regenerate every bundled sample model in this folder, then verify them all.
#
#   PYTHON     python with torch, onnx, onnxruntime, scikit-learn, tflite, apache-tvm
#              (default: python)
#   TF_PYTHON  python with tensorflow + scikit-learn, used ONLY for make_tflite.py
#              (default: /work/tfvenv/bin/python)
#   SKIP_TFLITE=1  keep the committed .tflite files (no TensorFlow needed)
#   SKIP_CHECK=1   do not run check_samples.py at the end
#
# Every generator is deterministic: rerunning rewrites byte-identical files.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

PYTHON="${PYTHON:-python}"
TF_PYTHON="${TF_PYTHON:-/work/tfvenv/bin/python}"

run() {
    echo
    echo "### $*"
    "$@"
}

run "$PYTHON" make_digits.py
run "$PYTHON" make_detector.py
run "$PYTHON" make_transformer.py
run "$PYTHON" make_quantized.py
run "$PYTHON" make_families.py

if [ "${SKIP_TFLITE:-0}" = "1" ]; then
    echo
    echo "### SKIP_TFLITE=1: keeping the committed .tflite files"
else
    if ! "$TF_PYTHON" -c "import tensorflow" >/dev/null 2>&1; then
        echo "error: '$TF_PYTHON' cannot import tensorflow; set TF_PYTHON to a python with" >&2
        echo "       tensorflow, or SKIP_TFLITE=1 to keep the committed .tflite files" >&2
        exit 1
    fi
    run "$TF_PYTHON" make_tflite.py
fi

if [ "${SKIP_CHECK:-0}" != "1" ]; then
    run "$PYTHON" check_samples.py
fi
