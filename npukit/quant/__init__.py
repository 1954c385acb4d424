"""Bit-widths and their numeric error (numpy only, no tvm): the quantization scheme (``scheme``),
the data the error is measured on (``data``), and the error figures (``error``).  The scheme is
stated in ``npukit.quant.scheme``'s docstring (docs/quantization.md says the same)."""

from .data import CALIB_SAMPLES, DEFAULT_RANDOM_SAMPLES, Data, index_limit, load_npz, make_data, random_data, sidecar
from .error import PER_OP_SAMPLES, ErrorModel, ErrorResult, is_class_output, max_abs, snr_db
from .scheme import INT_BITS, act_params, quantize_weight, rounded_ops

__all__ = [
    "CALIB_SAMPLES", "DEFAULT_RANDOM_SAMPLES", "Data", "ErrorModel", "ErrorResult", "INT_BITS", "PER_OP_SAMPLES",
    "act_params", "index_limit", "is_class_output", "load_npz", "make_data", "max_abs", "quantize_weight",
    "random_data", "rounded_ops", "sidecar", "snr_db",
]  # fmt: skip
