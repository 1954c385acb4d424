"""npukit's reference kernel libraries: the C that generated code calls, and its Python helpers.

* :func:`library_files` -- a vendor-style library (``nvdla``, ``xi_dsp``, ...) as
  ``relative path -> text``: ``<prefix>.h`` / ``<prefix>.c`` over the shared core ``npk_ref*``.
* :func:`cmsis_nn_files` -- the public CMSIS-NN API (``arm_nnfunctions.h``, ``arm_nn_types.h``)
  with npukit's implementation, for profiles whose library is CMSIS-NN.
* :func:`quantize_weights` / :func:`quantize_bias` -- integer weights (npukit's per-channel
  symmetric scheme, identical to the simulation's) and biases (:func:`bias_shift`: the finest
  grid an int32 bias can take);
* :func:`quantize_multiplier` / :func:`apply_multiplier` -- the (multiplier, shift) of a real
  requantization scale and the exact integer arithmetic npk_ref applies with it;
  :func:`cmsis_requantize`, :func:`cmsis_softmax_params`, :func:`cmsis_add_params`,
  :func:`cmsis_mul_params` for the CMSIS-NN kernels.
* :func:`pack_weights` / :func:`unpack_weights` -- S4 / S2 weight packing; :func:`c_array` -- C
  array literals.

docs/kernel-library.md documents the C API and every convention.  Numpy only; no tvm.
"""

from .arrays import c_array, pack_weights, unpack_weights
from .fixedpoint import (
    apply_multiplier,
    bias_shift,
    cmsis_add_params,
    cmsis_mul_params,
    cmsis_quantize_multiplier,
    cmsis_requantize,
    cmsis_softmax_params,
    quantize_bias,
    quantize_multiplier,
    quantize_multipliers,
    quantize_weights,
)
from .library import KernelLibraryError, check_prefix, cmsis_nn_files, core_files, library_files

__all__ = [
    "KernelLibraryError",
    "apply_multiplier",
    "bias_shift",
    "c_array",
    "check_prefix",
    "cmsis_add_params",
    "cmsis_mul_params",
    "cmsis_nn_files",
    "cmsis_quantize_multiplier",
    "cmsis_requantize",
    "cmsis_softmax_params",
    "core_files",
    "library_files",
    "pack_weights",
    "quantize_bias",
    "quantize_multiplier",
    "quantize_multipliers",
    "quantize_weights",
    "unpack_weights",
]
