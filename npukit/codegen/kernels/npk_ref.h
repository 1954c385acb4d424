/* npk_ref.h -- npukit's reference kernel library (portable C11, no malloc, no global state).
 *
 * Every accelerator in an npukit SoC profile names a kernel library prefix (nvdla, xi_dsp, ...);
 * the exported project calls `<prefix>_conv2d(...)` and friends, thin wrappers over the `npk_*`
 * functions declared here.  docs/kernel-library.md explains every convention in full; in short:
 *
 * - A tensor is described by an `npk_tensor`: data pointer, dtype, logical shape (rank <= 6),
 *   physical layout, and the affine quantization (scale, zero) of integer dtypes.
 * - Rank-4 tensors have semantic dims (N, C, H, W): `shape` is ALWAYS given in that order, and
 *   `layout` says how the elements lie in memory: NPK_NCHW (row-major), NPK_NHWC or NPK_TILED
 *   (N, ceil(C/B), H, W, B) with channel block B = `block`; the channel padding of a TILED
 *   tensor holds zero (the zero point for integer dtypes).  Other ranks are plain row-major.
 * - Integer tensors are affine: real = scale * (q - zero).  Float tensors ignore scale/zero.
 *   Index outputs (topk, argsort, nms) are written as plain integers, ignoring scale/zero.
 * - S4 / S2 activations hold one value per int8_t (ranges [-8, 7] and [-2, 1]); S4 / S2 WEIGHTS
 *   are packed: two per byte, low nibble first / four per byte, lowest bits first, sign-extended,
 *   over the weight array's flat element order.
 * - Stores to integer tensors round half away from zero and saturate to the dtype's range,
 *   except in npk_binary_int / npk_unary_int: the model's own integer arithmetic (plain integers,
 *   no quantization) wraps modulo 2^bits, as ONNX, TVM and C compute it.
 * - Every kernel returns 0 (NPK_OK) or a nonzero npk_status naming what was wrong.
 * - Outputs must not overlap inputs, except that elementwise kernels (unary, binary, convert,
 *   round_to_bits) may write over an input with the same dtype, shape and layout.
 *
 * Each public declaration below is one line; npukit's Python side parses them to generate the
 * prefixed wrappers, so keep that style when editing.
 */
#ifndef NPK_REF_H
#define NPK_REF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NPK_MAX_RANK 6
#define NPK_MAX_INPUTS 64

/* Status codes returned by every kernel. */
enum {
    NPK_OK = 0,
    NPK_ERR_NULL = 1,      /* a required pointer is NULL */
    NPK_ERR_DTYPE = 2,     /* dtype (or dtype combination) not supported by this kernel */
    NPK_ERR_SHAPE = 3,     /* rank / shape / output shape inconsistent with the operation */
    NPK_ERR_LAYOUT = 4,    /* layout invalid for the rank, or block < 1 for NPK_TILED */
    NPK_ERR_QUANT = 5,     /* integer tensor with scale <= 0 / not finite, or multiplier < 0 */
    NPK_ERR_PARAM = 6,     /* a params field out of range (stride 0, axis out of range, ...) */
    NPK_ERR_CAPACITY = 7   /* an output's capacity was too small (nms); the output is truncated */
};

/* Element types. */
enum {
    NPK_F32 = 0,   /* float */
    NPK_F16 = 1,   /* IEEE binary16 stored as uint16_t; converted in software, round to nearest even */
    NPK_S16 = 2,   /* int16_t, affine */
    NPK_S8 = 3,    /* int8_t, affine */
    NPK_S4 = 4,    /* activations: one int8_t per value in [-8, 7]; weights: packed 2 per byte */
    NPK_S2 = 5,    /* activations: one int8_t per value in [-2, 1]; weights: packed 4 per byte */
    NPK_S32 = 6,   /* int32_t, affine (scale 1, zero 0 for plain integers) */
    NPK_S64 = 7,   /* int64_t, affine (scale 1, zero 0 for plain integers) */
    NPK_U8 = 8,    /* uint8_t, affine */
    NPK_BOOL = 9   /* uint8_t 0 / 1; scale and zero ignored */
};

/* Physical layouts (rank-4 tensors only; every other rank must use NPK_ROW_MAJOR). */
enum {
    NPK_ROW_MAJOR = 0,
    NPK_NCHW = 0,
    NPK_NHWC = 1,
    NPK_TILED = 2   /* (N, ceil(C/B), H, W, B) */
};

/* A tensor descriptor.  For rank 4, shape = {N, C, H, W} whatever the layout. */
typedef struct {
    void *data;                   /* first element, aligned to the element size (8 bytes for S64) */
    int32_t dtype;                /* NPK_F32 ... NPK_BOOL */
    int32_t rank;                 /* 0 .. NPK_MAX_RANK; rank 0 is a scalar */
    int32_t shape[NPK_MAX_RANK];  /* logical dims; entries past rank are ignored */
    int32_t layout;               /* NPK_ROW_MAJOR / NPK_NCHW, NPK_NHWC, NPK_TILED */
    int32_t block;                /* channel block B of NPK_TILED, ignored otherwise */
    float scale;                  /* integer dtypes: real = scale * (q - zero); must be > 0 */
    int32_t zero;                 /* zero point, in the dtype's own (signed) range */
} npk_tensor;

/* ---- tensor helpers ------------------------------------------------------------------------ */

/* A short name of a status code ("ok", "unsupported dtype", ...), for error messages. */
const char *npk_status_str(int32_t status);

/* Number of logical elements (product of the dims; 1 for rank 0). */
int32_t npk_tensor_numel(const npk_tensor *t);
/* Bytes the physical buffer occupies (TILED: channels padded up to a multiple of the block). */
int32_t npk_tensor_bytes(const npk_tensor *t);
/* IEEE binary16 <-> binary32 (round to nearest even; overflow to infinity; NaN stays NaN). */
uint16_t npk_f32_to_f16(float value);
float npk_f16_to_f32(uint16_t bits);
/* round(acc * multiplier * 2^(shift - 31)), rounding half away from zero, exact (96-bit product),
   saturated to int64.  multiplier in [0, 2^31 - 1] (normally [2^30, 2^31)), shift in [-63, 62]. */
int64_t npk_apply_multiplier(int64_t acc, int32_t multiplier, int32_t shift);

/* ---- conv2d -------------------------------------------------------------------------------- */

/* conv2d: in [N, C_in, H, W] -> out [N, C_out, OH, OW], any layouts.
 *   OH = (H + pad_top + pad_bottom - dilation_h * (kernel_h - 1) - 1) / stride_h + 1 (same for W).
 *   groups divides C_in and C_out; depthwise is groups = C_in (C_out = multiplier * C_in).
 *   weights: OHWI [C_out][kernel_h][kernel_w][C_in / groups], dtype weight_dtype.
 * Float path (in F32/F16, out F32/F16, weights F32/F16): double accumulation; bias float[C_out]
 *   (or NULL); multiplier / shift unused.
 * Integer path (in S16/S8/S4/S2, out S16/S8/S4/S2, weights S16/S8/S4/S2, symmetric per output
 *   channel): acc = (sum (q_in - in.zero) * w_q) * 2^bias_shift + bias[oc], bias int32_t[C_out]
 *   (int64_t[C_out] when the input or the weights are S16) at scale
 *   in.scale * w_scale[oc] / 2^bias_shift, or NULL;
 *   q_out = npk_apply_multiplier(acc, multiplier[oc], shift[oc] - bias_shift) + out.zero, then
 *   clamped.  multiplier / shift come from npukit.codegen.kernels.quantize_multiplier(
 *   in.scale * w_scale[oc] / out.scale) whatever bias_shift is.  bias_shift is in 0 .. 24, 0
 *   when an operand is S16, and above 0 allows at most 2^22 - 1 products per output (int64 stays
 *   exact), else NPK_ERR_PARAM.  It is the bias's finer grid: at 4 or 2 bits in.scale * w_scale
 *   is a large fraction of out.scale, and a bias rounded to it moves outputs by up to half that.
 * act_min / act_max: fused activation clamp in the OUTPUT's real domain (-INFINITY / INFINITY
 *   or 0 / 0 for none; relu = [0, INFINITY], relu6 = [0, 6]).  Integer outputs clamp q to
 *   [round(act_min / out.scale) + out.zero, round(act_max / out.scale) + out.zero]. */
typedef struct {
    int32_t stride_h, stride_w;
    int32_t dilation_h, dilation_w;
    int32_t pad_top, pad_left, pad_bottom, pad_right;
    int32_t groups;
    int32_t kernel_h, kernel_w;
    int32_t weight_dtype;          /* NPK_F32/F16 (float inputs) or NPK_S16/S8/S4/S2 (integer inputs) */
    const void *weights;           /* OHWI; S4/S2 packed */
    const void *bias;              /* float / int32_t / int64_t [C_out], or NULL */
    const int32_t *multiplier;     /* [C_out], integer path */
    const int32_t *shift;          /* [C_out], integer path */
    float act_min, act_max;        /* fused clamp, output real domain */
    int32_t bias_shift;            /* integer path: the bias has 2^bias_shift steps per product step */
} npk_conv2d_params;

int32_t npk_conv2d(const npk_tensor *in, const npk_tensor *out, const npk_conv2d_params *p);

/* ---- matmul / dense ------------------------------------------------------------------------ */

/* out[..., M, N] = a[..., M, K] x b[..., K, N] (+ bias[N]); batch dims broadcast like numpy's
 * matmul (rank-1 a or b are promoted the same way).  With transpose_b, b is stored [..., N, K].
 * b_const = 1: b holds constant weights, quantized symmetric per output column n (b.scale and
 *   b.zero ignored; S4/S2 packed over b's flat element order; layout must be row-major);
 *   multiplier / shift / bias are [N].  b_const = 0: b is an activation (affine, S4/S2 one per
 *   byte), multiplier / shift are a single value from quantize_multiplier(a.scale * b.scale /
 *   out.scale), bias (if any) is [N] at scale a.scale * b.scale.
 * Integer accumulation: sum (q_a - a.zero) * (q_b - b.zero), times 2^bias_shift, plus the bias
 * (int32_t, or int64_t when a or b is S16) at that scale / 2^bias_shift, requantized with
 * shift - bias_shift (bias_shift as in conv2d).  Float path: double accumulation, bias float[N].
 * act_min / act_max as in conv2d. */
typedef struct {
    int32_t b_const;               /* 1: b is constant weights (per-column quantized), 0: activation */
    int32_t transpose_b;           /* 1: b stored [..., N, K] */
    const void *bias;              /* [N] or NULL */
    const int32_t *multiplier;     /* integer path: [N] (b_const) or [1] */
    const int32_t *shift;
    float act_min, act_max;
    int32_t bias_shift;            /* integer path: the bias has 2^bias_shift steps per product step */
} npk_matmul_params;

int32_t npk_matmul(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out, const npk_matmul_params *p);

/* ---- elementwise --------------------------------------------------------------------------- */

/* Binary ops with numpy broadcasting (shapes aligned on the right, size-1 dims stretch; the
 * output has the broadcast shape).  Computed in float on real values: integer inputs are
 * dequantized, the result is rounded to the output's grid.  divide by zero follows IEEE float
 * (an integer output saturates).  act_min / act_max clamp the real result (-INFINITY/INFINITY
 * for none). */
enum { NPK_ADD = 0, NPK_SUBTRACT = 1, NPK_MULTIPLY = 2, NPK_MAXIMUM = 3, NPK_MINIMUM = 4, NPK_DIVIDE = 5 };

typedef struct {
    int32_t op;                    /* NPK_ADD ... NPK_DIVIDE */
    float act_min, act_max;
} npk_binary_params;

int32_t npk_binary(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out, const npk_binary_params *p);
int32_t npk_add(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out);
int32_t npk_subtract(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out);
int32_t npk_multiply(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out);
int32_t npk_maximum(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out);
int32_t npk_minimum(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out);
int32_t npk_divide(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out);

/* The model's own integer arithmetic: a binary op of plain integers (an ONNX Add / Sub / Mul / Div /
 * Max / Min of int8, int32 ... tensors that carry no quantization), as ONNX, onnxruntime, TVM and C
 * compute it.  op is NPK_ADD ... NPK_DIVIDE; a, b and out are S8 / S16 / S32 / S64 / U8 (else
 * NPK_ERR_DTYPE), broadcast as in npk_binary; their scale and zero are ignored (the stored integers
 * are the values).  The result is exact and WRAPS to out's dtype (two's complement, modulo 2^bits:
 * int8 100 + 100 = -56) where npk_binary, computing on quantized real values, saturates.  divide
 * truncates toward zero; x / 0 gives 0 (undefined in C and in the model). */
int32_t npk_binary_int(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out, int32_t op);

/* Unary ops (same logical shape in and out), computed in float on real values:
 *   relu max(x, 0); clip min(max(x, lo), hi); leaky_relu x >= 0 ? x : alpha * x;
 *   sigmoid 1 / (1 + exp(-x)); tanh; gelu x/2 (1 + erf(x / sqrt 2)) (computed as x/2 erfc(-x / sqrt 2));
 *   gelu_tanh x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (computed as x sigmoid(2 sqrt(2/pi) (...)));
 *   exp; silu x * sigmoid(x);
 *   hardswish x * min(max(x + 3, 0), 6) / 6; negative -x; abs; sqrt; rsqrt 1 / sqrt(x). */
enum {
    NPK_RELU = 0, NPK_CLIP = 1, NPK_LEAKY_RELU = 2, NPK_SIGMOID = 3, NPK_TANH = 4, NPK_GELU = 5,
    NPK_GELU_TANH = 6, NPK_EXP = 7, NPK_SILU = 8, NPK_HARDSWISH = 9, NPK_NEGATIVE = 10, NPK_ABS = 11,
    NPK_SQRT = 12, NPK_RSQRT = 13
};

typedef struct {
    int32_t op;                    /* NPK_RELU ... NPK_RSQRT */
    float alpha;                   /* leaky_relu slope */
    float lo, hi;                  /* clip bounds (real domain) */
} npk_unary_params;

int32_t npk_unary(const npk_tensor *in, const npk_tensor *out, const npk_unary_params *p);
int32_t npk_relu(const npk_tensor *in, const npk_tensor *out);
int32_t npk_clip(const npk_tensor *in, const npk_tensor *out, float lo, float hi);
int32_t npk_leaky_relu(const npk_tensor *in, const npk_tensor *out, float alpha);
int32_t npk_sigmoid(const npk_tensor *in, const npk_tensor *out);
int32_t npk_tanh(const npk_tensor *in, const npk_tensor *out);
int32_t npk_gelu(const npk_tensor *in, const npk_tensor *out);
int32_t npk_gelu_tanh(const npk_tensor *in, const npk_tensor *out);
int32_t npk_exp(const npk_tensor *in, const npk_tensor *out);
int32_t npk_silu(const npk_tensor *in, const npk_tensor *out);
int32_t npk_hardswish(const npk_tensor *in, const npk_tensor *out);
int32_t npk_negative(const npk_tensor *in, const npk_tensor *out);
int32_t npk_abs(const npk_tensor *in, const npk_tensor *out);
int32_t npk_sqrt(const npk_tensor *in, const npk_tensor *out);
int32_t npk_rsqrt(const npk_tensor *in, const npk_tensor *out);

/* The model's own integer arithmetic on one tensor: NPK_RELU, NPK_CLIP (to [lo, hi]), NPK_NEGATIVE or
 * NPK_ABS of plain integers (S8 / S16 / S32 / S64 / U8 in and out, scale and zero ignored), exact
 * and wrapped to out's dtype like npk_binary_int (int8 -(-128) = abs(-128) = -128, as in C, ONNX
 * and TVM); any other op NPK_ERR_PARAM.  lo / hi are read by NPK_CLIP only. */
int32_t npk_unary_int(const npk_tensor *in, const npk_tensor *out, int32_t op, int64_t lo, int64_t hi);

/* ---- pooling and reductions ---------------------------------------------------------------- */

/* max_pool2d / avg_pool2d on [N, C, H, W] -> [N, C, OH, OW]; window taps at
 *   h = oh * stride_h - pad_top + kh * dilation_h (kh < kernel_h), same for w.
 *   OH = floor_or_ceil((H + pad_top + pad_bottom - dilation_h * (kernel_h - 1) - 1) / stride_h) + 1;
 *   with ceil_mode a last window that would start at or past H + pad_top is dropped (PyTorch).
 * max: padding never wins (taps outside [0, H) are skipped).
 * avg: the sum of the taps inside the input divided by the number of those taps, or with
 *   count_include_pad by the number of taps inside [-pad_top, H + pad_bottom) x [...].
 * A window without any tap inside the input (possible with large padding) yields, like TVM, the
 * lowest finite value for max (the dtype's minimum for integer outputs) and 0 for avg. */
typedef struct {
    int32_t kernel_h, kernel_w;
    int32_t stride_h, stride_w;
    int32_t dilation_h, dilation_w;
    int32_t pad_top, pad_left, pad_bottom, pad_right;
    int32_t ceil_mode;
    int32_t count_include_pad;
} npk_pool2d_params;

int32_t npk_max_pool2d(const npk_tensor *in, const npk_tensor *out, const npk_pool2d_params *p);
int32_t npk_avg_pool2d(const npk_tensor *in, const npk_tensor *out, const npk_pool2d_params *p);
/* Adaptive average pooling to out's [OH, OW]: bin i covers [floor(i*H/OH), ceil((i+1)*H/OH)). */
int32_t npk_adaptive_avg_pool2d(const npk_tensor *in, const npk_tensor *out);
/* Mean over H and W: out [N, C, 1, 1] (rank 4) or [N, C] (rank 2). */
int32_t npk_global_avg_pool2d(const npk_tensor *in, const npk_tensor *out);

/* Reductions over the axes set in the bit mask `axes` (bit i = logical axis i).  keepdims is
 * read from out: out.rank == in.rank keeps the reduced axes as size 1, otherwise they are
 * removed.  Sums and means accumulate in double. */
int32_t npk_reduce_sum(const npk_tensor *in, const npk_tensor *out, uint32_t axes);
int32_t npk_reduce_mean(const npk_tensor *in, const npk_tensor *out, uint32_t axes);
int32_t npk_reduce_max(const npk_tensor *in, const npk_tensor *out, uint32_t axes);
int32_t npk_reduce_min(const npk_tensor *in, const npk_tensor *out, uint32_t axes);

/* ---- normalization ------------------------------------------------------------------------- */

/* softmax / log_softmax along `axis` (negative counts from the end); max-subtracted, double sums. */
int32_t npk_softmax(const npk_tensor *in, const npk_tensor *out, int32_t axis);
int32_t npk_log_softmax(const npk_tensor *in, const npk_tensor *out, int32_t axis);

/* layer_norm over the last num_axes logical axes: y = (x - mean) / sqrt(var + eps) * gamma + beta,
 * biased variance; gamma / beta hold prod(last num_axes dims) floats in row-major order (NULL:
 * 1 / 0). */
typedef struct {
    int32_t num_axes;
    float eps;
    const float *gamma;
    const float *beta;
} npk_layer_norm_params;

int32_t npk_layer_norm(const npk_tensor *in, const npk_tensor *out, const npk_layer_norm_params *p);

/* Inference batch_norm along `axis` (1 for NCHW semantics):
 * y = (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c]  (gamma / beta NULL: 1 / 0). */
typedef struct {
    int32_t axis;
    float eps;
    const float *mean;
    const float *var;
    const float *gamma;
    const float *beta;
} npk_batch_norm_params;

int32_t npk_batch_norm(const npk_tensor *in, const npk_tensor *out, const npk_batch_norm_params *p);

/* group_norm along axis 1 (NCHW semantics) in num_groups groups of consecutive channels:
 * y = (x - mean) / sqrt(var + eps) * gamma[c] + beta[c], the mean and biased variance over the
 * group's channels and every axis after axis 1, for each index of axis 0; gamma / beta hold one
 * float per channel (NULL: 1 / 0).  An instance norm is num_groups = the number of channels. */
typedef struct {
    int32_t num_groups;
    float eps;
    const float *gamma;
    const float *beta;
} npk_group_norm_params;

int32_t npk_group_norm(const npk_tensor *in, const npk_tensor *out, const npk_group_norm_params *p);

/* ---- data movement ------------------------------------------------------------------------- */
/* All of these convert dtype / layout / quantization on the way like npk_convert (values of the
 * same dtype and quantization are copied bit-exactly). */

/* Element i (logical row-major order) of in goes to element i of out; same element count. */
int32_t npk_reshape(const npk_tensor *in, const npk_tensor *out);
int32_t npk_copy(const npk_tensor *in, const npk_tensor *out);
/* out.shape[i] = in.shape[axes[i]]; axes holds out.rank entries (negative counts from the end). */
int32_t npk_permute_dims(const npk_tensor *in, const npk_tensor *out, const int32_t *axes);
/* Concatenate n inputs (same rank, same dims except `axis`) along `axis`. */
int32_t npk_concat(const npk_tensor *const *inputs, int32_t n, const npk_tensor *out, int32_t axis);
/* Split along `axis` into n outputs; their sizes along the axis (which must add up to the input's)
 * encode the sections or indices of the model's split. */
int32_t npk_split(const npk_tensor *in, const npk_tensor *const *outputs, int32_t n, int32_t axis);

/* strided_slice: for each of the num_axes listed axes, elements begin, begin + stride, ... up to
 * (excluding) end; negative begin / end count from the end of the axis and are then clamped
 * (numpy / Relax semantics; stride < 0 walks backwards, INT64_MIN / INT64_MAX mean "from the
 * start / to the end").  Axes not listed are taken whole. */
typedef struct {
    int32_t num_axes;
    int32_t axes[NPK_MAX_RANK];
    int64_t begin[NPK_MAX_RANK];
    int64_t end[NPK_MAX_RANK];
    int64_t strides[NPK_MAX_RANK];
} npk_slice_params;

int32_t npk_strided_slice(const npk_tensor *in, const npk_tensor *out, const npk_slice_params *p);

/* pad: out.shape[d] = before[d] + in.shape[d] + after[d] for every axis d; the new elements are
 * `value` (NPK_PAD_CONSTANT), the nearest edge element (NPK_PAD_REPLICATE), the mirror image
 * without the edge (NPK_PAD_REFLECT: before[d], after[d] < in.shape[d]) or the other side of the
 * axis (NPK_PAD_CIRCULAR: before[d], after[d] <= in.shape[d]).  An empty axis can only be padded
 * with a constant. */
enum { NPK_PAD_CONSTANT = 0, NPK_PAD_REPLICATE = 1, NPK_PAD_REFLECT = 2, NPK_PAD_CIRCULAR = 3 };

typedef struct {
    int32_t mode;                  /* NPK_PAD_CONSTANT ... */
    int32_t before[NPK_MAX_RANK];
    int32_t after[NPK_MAX_RANK];
    float value;                   /* real value of the new elements (NPK_PAD_CONSTANT) */
} npk_pad_params;

int32_t npk_pad(const npk_tensor *in, const npk_tensor *out, const npk_pad_params *p);

/* resize2d [N, C, H, W] -> [N, C, OH, OW]: input coordinate of output pixel x (scale = W / OW):
 *   NPK_HALF_PIXEL (x + 0.5) * scale - 0.5; NPK_ALIGN_CORNERS (W - 1) / (OW - 1) * x (0 if OW == 1);
 *   NPK_ASYMMETRIC x * scale; NPK_PYTORCH_HALF_PIXEL like half_pixel but 0 when OW == 1;
 *   NPK_TF_HALF_PIXEL_FOR_NN (x + 0.5) * scale.
 * nearest: the coordinate rounded by nearest_mode (NPK_ROUND_HALF_EVEN is TVM's "round"), clamped to
 *   [0, W - 1];
 * bilinear: weights from floor(coordinate), neighbours clamped to the edges. */
enum { NPK_NEAREST = 0, NPK_BILINEAR = 1 };
enum { NPK_HALF_PIXEL = 0, NPK_ALIGN_CORNERS = 1, NPK_ASYMMETRIC = 2, NPK_PYTORCH_HALF_PIXEL = 3, NPK_TF_HALF_PIXEL_FOR_NN = 4 };
enum { NPK_ROUND_PREFER_FLOOR = 0, NPK_ROUND_PREFER_CEIL = 1, NPK_FLOOR = 2, NPK_CEIL = 3, NPK_ROUND_HALF_EVEN = 4 };

typedef struct {
    int32_t method;                /* NPK_NEAREST, NPK_BILINEAR */
    int32_t coord_mode;            /* NPK_HALF_PIXEL ... */
    int32_t nearest_mode;          /* NPK_ROUND_PREFER_FLOOR ... NPK_ROUND_HALF_EVEN (nearest only) */
} npk_resize2d_params;

int32_t npk_resize2d(const npk_tensor *in, const npk_tensor *out, const npk_resize2d_params *p);

/* ---- sorting and selection ----------------------------------------------------------------- */

/* topk along `axis`: k = values.shape[axis] (or indices.shape[axis]); largest = 1 for the k
 * largest in descending order, 0 for the k smallest in ascending order; ties: lower index first.
 * indices (S64 or S32, plain integers) is required, values may be NULL. */
typedef struct {
    int32_t axis;
    int32_t largest;
} npk_topk_params;

int32_t npk_topk(const npk_tensor *in, const npk_tensor *values, const npk_tensor *indices, const npk_topk_params *p);
/* Stable sort / argsort along `axis` (ties keep index order, also when descending); argsort
 * writes S64 or S32 indices.  NaN compares above every number. */
int32_t npk_sort(const npk_tensor *in, const npk_tensor *out, int32_t axis, int32_t descending);
int32_t npk_argsort(const npk_tensor *in, const npk_tensor *out, int32_t axis, int32_t descending);

/* ONNX NonMaxSuppression.  boxes [B, N, 4]: center_point_box = 0 -> [y1, x1, y2, x2] (any two
 * opposite corners), 1 -> [x_center, y_center, width, height]; scores [B, C, N].  For every
 * batch b and class c: boxes with score > score_threshold, by descending score (ties: lower box
 * index first), are kept unless their IoU with an already kept box of (b, c) exceeds
 * iou_threshold; at most max_output_boxes_per_class per class (0: none).  Rows (b, c, box) go to
 * `selected` (S64 or S32, shape [capacity, 3]) in that order and *num_selected receives their
 * count.  If capacity is too small the rows that fit are written, *num_selected is the number
 * written and NPK_ERR_CAPACITY is returned.  workspace (NULL or npk_nms_workspace_size(N)
 * bytes, int32-aligned) makes it O(N log N) per class instead of O(N^2). */
typedef struct {
    int32_t center_point_box;
    int64_t max_output_boxes_per_class;
    float iou_threshold;
    float score_threshold;
    void *workspace;
} npk_nms_params;

int32_t npk_nms_workspace_size(int32_t num_boxes);
int32_t npk_nms(const npk_tensor *boxes, const npk_tensor *scores, const npk_tensor *selected, int64_t *num_selected, const npk_nms_params *p);

/* ---- conversion ---------------------------------------------------------------------------- */

/* Copy every logical element of in to out (same rank and dims), converting physical layout,
 * dtype and affine quantization: integer -> real = scale * (q - zero); real -> integer:
 * round half away from zero of real / scale, + zero, saturated; F16 rounds to nearest even;
 * BOOL stores x != 0.  Integer -> integer goes through double. */
int32_t npk_convert(const npk_tensor *in, const npk_tensor *out);
/* The same, with a check that documents the intent in generated code. */
int32_t npk_layout_convert(const npk_tensor *in, const npk_tensor *out);   /* same dtype and quantization */
int32_t npk_quantize(const npk_tensor *in, const npk_tensor *out);         /* float -> integer */
int32_t npk_dequantize(const npk_tensor *in, const npk_tensor *out);       /* integer -> float */
int32_t npk_requantize(const npk_tensor *in, const npk_tensor *out);       /* integer -> integer */

/* Fake quantization in place of `count` floats: x -> scale * (clamp(round(x / scale) + zero,
 * -2^(bits-1), 2^(bits-1) - 1) - zero) for bits in {2, 4, 8, 16} (npukit's signed storage of an
 * n-bit grid, zero in that convention), rounding half away from zero. */
int32_t npk_round_to_bits(float *data, int32_t count, int32_t bits, float scale, int32_t zero);
/* The same on `count` IEEE halves (a float16 tensor stored at an integer width): each widened to
 * float, rounded as above, and stored back to the nearest half (ties to even). */
int32_t npk_round_to_bits_f16(uint16_t *data, int32_t count, int32_t bits, float scale, int32_t zero);
/* x -> the nearest IEEE half (ties to even), back to float. */
int32_t npk_round_to_fp16(float *data, int32_t count);

#ifdef __cplusplus
}
#endif

#endif /* NPK_REF_H */
