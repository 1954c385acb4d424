/* npk_ref_internal.h -- helpers shared by the npk_ref_*.c files (not part of the public API).
 *
 * A `npk_view` is a validated tensor descriptor with element strides per logical dim, so that
 * every kernel can address element (i0, ..., i{r-1}) of any layout the same way:
 *   offset = sum_d idx[d] * stride[d], except that a TILED tensor's channel c (dim 1) contributes
 *   (c / block) * stride[1] + c % block.
 * Offsets count elements (not bytes) from `data`.
 */
#ifndef NPK_REF_INTERNAL_H
#define NPK_REF_INTERNAL_H

#include "npk_ref.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* Integer conv / matmul: the largest bias_shift, and the bound on the products per output that
 * keeps (sum of S8/S4/S2 products) * 2^bias_shift + bias exact in int64: one product is below
 * 2^16 (255 * 255), so the sum stays below 2^38 and the shifted sum below 2^62. */
#define NPK__BIAS_SHIFT_MAX 24
#define NPK__BIAS_SHIFT_TAPS ((int64_t)1 << 22)

typedef struct {
    void *data;
    int32_t dtype;
    int32_t rank;
    int32_t shape[NPK_MAX_RANK];
    int32_t stride[NPK_MAX_RANK];
    int32_t block;     /* > 0 only for NPK_TILED */
    float scale;
    int32_t zero;
    int32_t numel;
} npk_view;

/* Validate `t` and fill `v`; returns an npk status. */
int32_t npk__view(const npk_tensor *t, npk_view *v);

/* Element offset of a logical index. */
static inline int32_t npk__off(const npk_view *v, const int32_t *idx)
{
    int32_t off = 0;
    for (int32_t d = 0; d < v->rank; ++d) {
        if (d == 1 && v->block > 0) {
            off += (idx[1] / v->block) * v->stride[1] + idx[1] % v->block;
        } else {
            off += idx[d] * v->stride[d];
        }
    }
    return off;
}

/* Offset contribution of channel c of a rank-4 view. */
static inline int32_t npk__coff(const npk_view *v, int32_t c)
{
    return v->block > 0 ? (c / v->block) * v->stride[1] + c % v->block : c * v->stride[1];
}

/* Offset of an index of a higher-rank output `oidx` (rank orank) broadcast onto v (numpy rules). */
static inline int32_t npk__off_bcast(const npk_view *v, const int32_t *oidx, int32_t orank)
{
    int32_t idx[NPK_MAX_RANK];
    for (int32_t d = 0; d < v->rank; ++d) {
        int32_t od = d + orank - v->rank;
        idx[d] = v->shape[d] == 1 ? 0 : oidx[od];
    }
    return npk__off(v, idx);
}

/* Advance a row-major multi-index; returns 0 once it wraps around (iteration finished). */
static inline int npk__next(int32_t *idx, const int32_t *shape, int32_t rank)
{
    for (int32_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < shape[d]) {
            return 1;
        }
        idx[d] = 0;
    }
    return 0;
}

static inline int npk__is_float(int32_t dtype) { return dtype == NPK_F32 || dtype == NPK_F16; }
static inline int npk__is_quant(int32_t dtype)  /* the quantized weight dtypes of conv / matmul (symmetric) */
{
    return dtype == NPK_S16 || dtype == NPK_S8 || dtype == NPK_S4 || dtype == NPK_S2;
}
static inline int npk__is_qact(int32_t dtype)  /* the affine activation dtypes of conv / matmul (a zero point each) */
{
    return npk__is_quant(dtype) || dtype == NPK_U8;
}
static inline int npk__is_index(int32_t dtype) { return dtype == NPK_S64 || dtype == NPK_S32; }

int64_t npk__qmin(int32_t dtype);
int64_t npk__qmax(int32_t dtype);
int32_t npk__elem_size(int32_t dtype);

/* Round half away from zero and saturate to [lo, hi]; NaN gives `nan_value`. */
int64_t npk__round_sat(double x, int64_t lo, int64_t hi, int64_t nan_value);

/* Real value of an element / store a real value (quantizing, rounding fp16, saturating). */
float npk__load(const npk_view *v, int32_t off);
void npk__store(const npk_view *v, int32_t off, float x);
/* Raw integer of an element of an integer dtype / store a raw integer (saturating). */
int64_t npk__load_int(const npk_view *v, int32_t off);
void npk__store_int(const npk_view *v, int32_t off, int64_t q);
/* Copy one element between two views, converting dtype / quantization if they differ. */
void npk__xfer(const npk_view *src, int32_t soff, const npk_view *dst, int32_t doff);
/* Write zero (the zero point) into the channel padding of a TILED view. */
void npk__fill_pad(const npk_view *v);

/* One weight (flat element index i) of a weight array: real for float, raw integer for ints. */
float npk__weight_f(const void *w, int32_t dtype, int32_t i);
int32_t npk__weight_q(const void *w, int32_t dtype, int32_t i);

/* The fused clamp of conv / matmul / binary: 1 when [act_min, act_max] is a real clamp
   (act_min = act_max = 0 means none). */
int npk__has_act(float act_min, float act_max);
/* Quantized bounds [*lo, *hi] of an integer output with an optional real clamp. */
void npk__act_bounds(const npk_view *out, float act_min, float act_max, int64_t *lo, int64_t *hi);

/* q = r + zero clamped to [lo, hi] without overflow (lo, hi, zero are int32-sized). */
static inline int64_t npk__clamp_out(int64_t r, int32_t zero, int64_t lo, int64_t hi)
{
    if (r < lo - zero) {
        return lo;
    }
    if (r > hi - zero) {
        return hi;
    }
    return r + zero;
}

/* Normalize a possibly negative axis; returns NPK_OK or NPK_ERR_PARAM. */
int32_t npk__axis(int32_t axis, int32_t rank, int32_t *out);

/* Same logical shape? */
int npk__same_shape(const npk_view *a, const npk_view *b);

#define NPK_TRY(expr)            \
    do {                         \
        int32_t npk__s = (expr); \
        if (npk__s != NPK_OK) {  \
            return npk__s;       \
        }                        \
    } while (0)

#endif /* NPK_REF_INTERNAL_H */
