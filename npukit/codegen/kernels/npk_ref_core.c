/* npk_ref_core.c -- descriptors and views, element access, fixed point, weights, fused clamps. */
#include "npk_ref_internal.h"

/* ---- dtypes -------------------------------------------------------------------------------- */

int64_t npk__qmin(int32_t dtype)
{
    switch (dtype) {
    case NPK_S16: return -32768;
    case NPK_S8: return -128;
    case NPK_S4: return -8;
    case NPK_S2: return -2;
    case NPK_S32: return INT32_MIN;
    case NPK_S64: return INT64_MIN;
    default: return 0; /* U8, BOOL */
    }
}

int64_t npk__qmax(int32_t dtype)
{
    switch (dtype) {
    case NPK_S16: return 32767;
    case NPK_S8: return 127;
    case NPK_S4: return 7;
    case NPK_S2: return 1;
    case NPK_S32: return INT32_MAX;
    case NPK_S64: return INT64_MAX;
    case NPK_U8: return 255;
    default: return 1; /* BOOL */
    }
}

int32_t npk__elem_size(int32_t dtype)
{
    switch (dtype) {
    case NPK_F32: case NPK_S32: return 4;
    case NPK_F16: case NPK_S16: return 2;
    case NPK_S64: return 8;
    default: return 1;
    }
}

/* ---- views --------------------------------------------------------------------------------- */

int32_t npk__view(const npk_tensor *t, npk_view *v)
{
    if (t == NULL) {
        return NPK_ERR_NULL;
    }
    if (t->rank < 0 || t->rank > NPK_MAX_RANK) {
        return NPK_ERR_SHAPE;
    }
    if (t->dtype < NPK_F32 || t->dtype > NPK_BOOL) {
        return NPK_ERR_DTYPE;
    }
    memset(v, 0, sizeof(*v));
    v->data = t->data;
    v->dtype = t->dtype;
    v->rank = t->rank;
    v->scale = t->scale;
    v->zero = t->zero;
    int64_t numel = 1;
    for (int32_t d = 0; d < t->rank; ++d) {
        if (t->shape[d] < 0) {
            return NPK_ERR_SHAPE;
        }
        v->shape[d] = t->shape[d];
        numel *= t->shape[d];
        if (numel > INT32_MAX) {
            return NPK_ERR_SHAPE;
        }
    }
    v->numel = (int32_t)numel;
    if (t->layout != NPK_ROW_MAJOR && (t->rank != 4 || (t->layout != NPK_NHWC && t->layout != NPK_TILED))) {
        return NPK_ERR_LAYOUT;
    }
    if (t->layout == NPK_TILED && t->block < 1) {
        return NPK_ERR_LAYOUT;
    }
    if (!npk__is_float(t->dtype) && t->dtype != NPK_BOOL) {
        if (!(t->scale > 0.0f) || !isfinite(t->scale)) {
            return NPK_ERR_QUANT;
        }
        if (t->zero < npk__qmin(t->dtype) || t->zero > npk__qmax(t->dtype)) {
            return NPK_ERR_QUANT;
        }
    }
    if (t->data == NULL && numel > 0) {
        return NPK_ERR_NULL;
    }
    const int32_t *s = v->shape;
    if (t->layout == NPK_NHWC) {
        v->stride[1] = 1;
        v->stride[3] = s[1];
        v->stride[2] = s[3] * s[1];
        v->stride[0] = s[2] * s[3] * s[1];
    } else if (t->layout == NPK_TILED) {
        int32_t b = t->block;
        int64_t cb = ((int64_t)s[1] + b - 1) / b;
        if ((int64_t)s[0] * cb * b * s[2] * s[3] > INT32_MAX) {
            return NPK_ERR_SHAPE;
        }
        v->block = b;
        v->stride[3] = b;
        v->stride[2] = s[3] * b;
        v->stride[1] = s[2] * s[3] * b;
        v->stride[0] = (int32_t)(cb * s[2] * s[3] * b);
    } else {
        int32_t st = 1;
        for (int32_t d = t->rank - 1; d >= 0; --d) {
            v->stride[d] = st;
            st *= s[d];
        }
    }
    return NPK_OK;
}

int npk__same_shape(const npk_view *a, const npk_view *b)
{
    if (a->rank != b->rank) {
        return 0;
    }
    for (int32_t d = 0; d < a->rank; ++d) {
        if (a->shape[d] != b->shape[d]) {
            return 0;
        }
    }
    return 1;
}

int32_t npk__axis(int32_t axis, int32_t rank, int32_t *out)
{
    if (axis < 0) {
        axis += rank;
    }
    if (axis < 0 || axis >= rank) {
        return NPK_ERR_PARAM;
    }
    *out = axis;
    return NPK_OK;
}

const char *npk_status_str(int32_t status)
{
    switch (status) {
    case NPK_OK: return "ok";
    case NPK_ERR_NULL: return "null pointer";
    case NPK_ERR_DTYPE: return "unsupported dtype";
    case NPK_ERR_SHAPE: return "inconsistent shape";
    case NPK_ERR_LAYOUT: return "invalid layout";
    case NPK_ERR_QUANT: return "invalid quantization";
    case NPK_ERR_PARAM: return "parameter out of range";
    case NPK_ERR_CAPACITY: return "output capacity exceeded";
    default: return "unknown status";
    }
}

int32_t npk_tensor_numel(const npk_tensor *t)
{
    npk_view v;
    return npk__view(t, &v) == NPK_OK ? v.numel : 0;
}

int32_t npk_tensor_bytes(const npk_tensor *t)
{
    npk_view v;
    if (npk__view(t, &v) != NPK_OK) {
        return 0;
    }
    int64_t n = v.numel;
    if (v.block > 0) {
        n = (int64_t)v.shape[0] * v.stride[0];
    }
    return (int32_t)(n * npk__elem_size(v.dtype));
}

/* ---- fixed point --------------------------------------------------------------------------- */

int64_t npk_apply_multiplier(int64_t acc, int32_t multiplier, int32_t shift)
{
    if (acc == 0 || multiplier <= 0 || shift < -96) {
        return 0;
    }
    int neg = acc < 0;
    uint64_t mag = neg ? (uint64_t)0 - (uint64_t)acc : (uint64_t)acc;
    uint64_t m = (uint64_t)(uint32_t)multiplier;
    uint64_t lo = (mag & 0xffffffffu) * m; /* < 2^63 */
    uint64_t hi = (mag >> 32) * m;         /* < 2^63 */
    uint64_t p_lo = lo + (hi << 32);       /* 128-bit product (p_hi, p_lo) */
    uint64_t p_hi = (hi >> 32) + (p_lo < lo ? 1u : 0u);
    const uint64_t lim = (uint64_t)INT64_MAX;
    uint64_t res;
    int32_t r = 31 - shift;
    if (r > 0) {
        /* add 2^(r - 1), then shift right by r: rounds half away from zero on the magnitude */
        if (r - 1 < 64) {
            uint64_t t = p_lo + ((uint64_t)1 << (r - 1));
            p_hi += t < p_lo ? 1u : 0u;
            p_lo = t;
        } else {
            p_hi += (uint64_t)1 << (r - 1 - 64);
        }
        uint64_t res_hi;
        if (r < 64) {
            res = (p_lo >> r) | (p_hi << (64 - r));
            res_hi = p_hi >> r;
        } else {
            res = p_hi >> (r - 64);
            res_hi = 0;
        }
        if (res_hi != 0 || res > lim) {
            res = lim;
        }
    } else {
        int32_t l = -r;
        if (l > 62 || p_hi != 0 || (p_lo >> (63 - l)) != 0) {
            res = lim;
        } else {
            res = p_lo << l;
        }
    }
    return neg ? -(int64_t)res : (int64_t)res;
}

int64_t npk__round_sat(double x, int64_t lo, int64_t hi, int64_t nan_value)
{
    if (x != x) {
        return nan_value;
    }
    double r = round(x);
    if (r <= (double)lo) {
        return lo;
    }
    if (r >= (double)hi) {
        return hi;
    }
    return (int64_t)r;
}

/* ---- element access ------------------------------------------------------------------------ */

/* a - b saturated to int64 (b is a zero point, |b| < 2^31) */
static int64_t npk__sat_sub(int64_t a, int64_t b)
{
    if (b > 0 && a < INT64_MIN + b) {
        return INT64_MIN;
    }
    if (b < 0 && a > INT64_MAX + b) {
        return INT64_MAX;
    }
    return a - b;
}

/* clamp(round(x) + zero, qmin, qmax) of an integer dtype, without overflow */
static int64_t npk__quant(double x, int32_t dtype, int32_t zero)
{
    int64_t lo = npk__sat_sub(npk__qmin(dtype), zero), hi = npk__sat_sub(npk__qmax(dtype), zero);
    return npk__round_sat(x, lo, hi, 0) + zero;
}

int64_t npk__load_int(const npk_view *v, int32_t off)
{
    switch (v->dtype) {
    case NPK_S16: return ((const int16_t *)v->data)[off];
    case NPK_S8: case NPK_S4: case NPK_S2: return ((const int8_t *)v->data)[off];
    case NPK_S32: return ((const int32_t *)v->data)[off];
    case NPK_S64: return ((const int64_t *)v->data)[off];
    case NPK_U8: case NPK_BOOL: return ((const uint8_t *)v->data)[off];
    case NPK_F16: return (int64_t)npk_f16_to_f32(((const uint16_t *)v->data)[off]);
    default: return (int64_t)((const float *)v->data)[off];
    }
}

void npk__store_int(const npk_view *v, int32_t off, int64_t q)
{
    if (npk__is_float(v->dtype)) {
        npk__store(v, off, (float)q);
        return;
    }
    int64_t lo = npk__qmin(v->dtype), hi = npk__qmax(v->dtype);
    if (v->dtype == NPK_BOOL) {
        q = q != 0;
    }
    q = q < lo ? lo : (q > hi ? hi : q);
    switch (v->dtype) {
    case NPK_S16: ((int16_t *)v->data)[off] = (int16_t)q; break;
    case NPK_S8: case NPK_S4: case NPK_S2: ((int8_t *)v->data)[off] = (int8_t)q; break;
    case NPK_S32: ((int32_t *)v->data)[off] = (int32_t)q; break;
    case NPK_S64: ((int64_t *)v->data)[off] = q; break;
    default: ((uint8_t *)v->data)[off] = (uint8_t)q; break;
    }
}

float npk__load(const npk_view *v, int32_t off)
{
    switch (v->dtype) {
    case NPK_F32: return ((const float *)v->data)[off];
    case NPK_F16: return npk_f16_to_f32(((const uint16_t *)v->data)[off]);
    case NPK_BOOL: return ((const uint8_t *)v->data)[off] != 0 ? 1.0f : 0.0f;
    default: return (float)(npk__load_int(v, off) - v->zero) * v->scale;
    }
}

void npk__store(const npk_view *v, int32_t off, float x)
{
    switch (v->dtype) {
    case NPK_F32: ((float *)v->data)[off] = x; return;
    case NPK_F16: ((uint16_t *)v->data)[off] = npk_f32_to_f16(x); return;
    case NPK_BOOL: ((uint8_t *)v->data)[off] = x != 0.0f; return;
    default: {
        npk__store_int(v, off, npk__quant((double)(x / v->scale), v->dtype, v->zero));
        return;
    }
    }
}

void npk__xfer(const npk_view *src, int32_t soff, const npk_view *dst, int32_t doff)
{
    int same = src->dtype == dst->dtype &&
               (npk__is_float(src->dtype) || src->dtype == NPK_BOOL ||
                (src->scale == dst->scale && src->zero == dst->zero));
    if (same) {
        int32_t es = npk__elem_size(src->dtype);
        memcpy((char *)dst->data + (size_t)doff * es, (const char *)src->data + (size_t)soff * es, (size_t)es);
        return;
    }
    if (!npk__is_float(src->dtype) && !npk__is_float(dst->dtype) && src->dtype != NPK_BOOL &&
        dst->dtype != NPK_BOOL) {
        double real = (double)src->scale * (double)(npk__load_int(src, soff) - src->zero);
        npk__store_int(dst, doff, npk__quant(real / (double)dst->scale, dst->dtype, dst->zero));
        return;
    }
    npk__store(dst, doff, npk__load(src, soff));
}

void npk__fill_pad(const npk_view *v)
{
    if (v->block <= 0 || v->shape[1] % v->block == 0) {
        return;
    }
    int32_t cpad = ((v->shape[1] + v->block - 1) / v->block) * v->block;
    for (int32_t n = 0; n < v->shape[0]; ++n) {
        for (int32_t c = v->shape[1]; c < cpad; ++c) {
            for (int32_t h = 0; h < v->shape[2]; ++h) {
                for (int32_t w = 0; w < v->shape[3]; ++w) {
                    int32_t off = n * v->stride[0] + npk__coff(v, c) + h * v->stride[2] + w * v->stride[3];
                    if (npk__is_float(v->dtype)) {
                        npk__store(v, off, 0.0f);
                    } else {
                        npk__store_int(v, off, v->dtype == NPK_BOOL ? 0 : v->zero);
                    }
                }
            }
        }
    }
}

/* ---- weights and fused clamps -------------------------------------------------------------- */

int32_t npk__weight_q(const void *w, int32_t dtype, int32_t i)
{
    const uint8_t *b = (const uint8_t *)w;
    switch (dtype) {
    case NPK_S16: return ((const int16_t *)w)[i];
    case NPK_S8: return ((const int8_t *)w)[i];
    case NPK_S4: {
        int32_t nib = (b[i >> 1] >> ((i & 1) * 4)) & 0xf;
        return nib >= 8 ? nib - 16 : nib;
    }
    case NPK_S2: {
        int32_t two = (b[i >> 2] >> ((i & 3) * 2)) & 0x3;
        return two >= 2 ? two - 4 : two;
    }
    default: return 0;
    }
}

float npk__weight_f(const void *w, int32_t dtype, int32_t i)
{
    if (dtype == NPK_F32) {
        return ((const float *)w)[i];
    }
    if (dtype == NPK_F16) {
        return npk_f16_to_f32(((const uint16_t *)w)[i]);
    }
    return (float)npk__weight_q(w, dtype, i);
}

int npk__has_act(float act_min, float act_max)
{
    return !(act_min == 0.0f && act_max == 0.0f);
}

void npk__act_bounds(const npk_view *out, float act_min, float act_max, int64_t *lo, int64_t *hi)
{
    *lo = npk__qmin(out->dtype);
    *hi = npk__qmax(out->dtype);
    if (!npk__has_act(act_min, act_max)) {
        return;
    }
    if (act_min > -INFINITY) {
        int64_t q = npk__round_sat((double)(act_min / out->scale), INT32_MIN, INT32_MAX, INT32_MIN) + out->zero;
        *lo = q > *lo ? q : *lo;
    }
    if (act_max < INFINITY) {
        int64_t q = npk__round_sat((double)(act_max / out->scale), INT32_MIN, INT32_MAX, INT32_MAX) + out->zero;
        *hi = q < *hi ? q : *hi;
    }
}
