/* npk_ref_convert.c -- fp16, the generic convert and its named forms, fake quantization. */
#include "npk_ref_internal.h"

/* ---- fp16 ---------------------------------------------------------------------------------- */

uint16_t npk_f32_to_f16(float value)
{
    uint32_t x;
    memcpy(&x, &value, sizeof(x));
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xffu) { /* inf / NaN (NaN stays a quiet NaN) */
        return (uint16_t)(sign | 0x7c00u | (man != 0 ? 0x200u | (man >> 13) : 0u));
    }
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 31) {
        return (uint16_t)(sign | 0x7c00u);
    }
    if (e >= 1) { /* normal half: round the 13 dropped mantissa bits to nearest even */
        uint32_t h = ((uint32_t)e << 10) | (man >> 13);
        uint32_t rem = man & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) {
            h += 1u; /* may carry into the exponent, up to infinity: correct */
        }
        return (uint16_t)(sign | h);
    }
    /* subnormal half (or zero): value = full * 2^(exp - 150), half units are 2^-24 */
    uint32_t full = man | 0x800000u;
    int32_t shift = 14 - e;
    if (exp == 0 || shift > 24) {
        return (uint16_t)sign;
    }
    uint32_t h = full >> shift;
    uint32_t rem = full & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) {
        h += 1u;
    }
    return (uint16_t)(sign | h);
}

float npk_f16_to_f32(uint16_t bits)
{
    uint32_t sign = ((uint32_t)bits & 0x8000u) << 16;
    uint32_t exp = ((uint32_t)bits >> 10) & 0x1fu;
    uint32_t man = (uint32_t)bits & 0x3ffu;
    float f;
    if (exp == 0) {
        f = (float)man * 5.9604644775390625e-8f; /* 2^-24, exact */
        return sign ? -f : f;
    }
    uint32_t x;
    if (exp == 31) {
        x = sign | 0x7f800000u | (man << 13);
    } else {
        x = sign | ((exp - 15u + 127u) << 23) | (man << 13);
    }
    memcpy(&f, &x, sizeof(f));
    return f;
}

/* ---- conversion ---------------------------------------------------------------------------- */

int32_t npk_convert(const npk_tensor *in, const npk_tensor *out)
{
    npk_view vi, vo;
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (!npk__same_shape(&vi, &vo)) {
        return NPK_ERR_SHAPE;
    }
    int32_t idx[NPK_MAX_RANK] = {0};
    if (vi.numel > 0) {
        do {
            npk__xfer(&vi, npk__off(&vi, idx), &vo, npk__off(&vo, idx));
        } while (npk__next(idx, vi.shape, vi.rank));
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}

int32_t npk_layout_convert(const npk_tensor *in, const npk_tensor *out)
{
    if (in == NULL || out == NULL) {
        return NPK_ERR_NULL;
    }
    if (in->dtype != out->dtype) {
        return NPK_ERR_DTYPE;
    }
    if (!npk__is_float(in->dtype) && in->dtype != NPK_BOOL && (in->scale != out->scale || in->zero != out->zero)) {
        return NPK_ERR_QUANT;
    }
    return npk_convert(in, out);
}

static int npk__is_affine_int(int32_t dtype) { return !npk__is_float(dtype) && dtype != NPK_BOOL; }

int32_t npk_quantize(const npk_tensor *in, const npk_tensor *out)
{
    if (in == NULL || out == NULL) {
        return NPK_ERR_NULL;
    }
    if (!npk__is_float(in->dtype) || !npk__is_affine_int(out->dtype)) {
        return NPK_ERR_DTYPE;
    }
    return npk_convert(in, out);
}

int32_t npk_dequantize(const npk_tensor *in, const npk_tensor *out)
{
    if (in == NULL || out == NULL) {
        return NPK_ERR_NULL;
    }
    if (!npk__is_affine_int(in->dtype) || !npk__is_float(out->dtype)) {
        return NPK_ERR_DTYPE;
    }
    return npk_convert(in, out);
}

int32_t npk_requantize(const npk_tensor *in, const npk_tensor *out)
{
    if (in == NULL || out == NULL) {
        return NPK_ERR_NULL;
    }
    if (!npk__is_affine_int(in->dtype) || !npk__is_affine_int(out->dtype)) {
        return NPK_ERR_DTYPE;
    }
    return npk_convert(in, out);
}

/* ---- fake quantization --------------------------------------------------------------------- */

/* the arguments of a fake quantization checked (NPK_OK or the status to return), its grid's
   signed bounds in *lo, *hi */
static int32_t npk__grid_args(const void *data, int32_t count, int32_t bits, float scale, int32_t zero,
                              int64_t *lo, int64_t *hi)
{
    if (count < 0) {
        return NPK_ERR_SHAPE;
    }
    if (data == NULL && count > 0) {
        return NPK_ERR_NULL;
    }
    if (bits != 2 && bits != 4 && bits != 8 && bits != 16) {
        return NPK_ERR_PARAM;
    }
    *lo = -((int64_t)1 << (bits - 1));
    *hi = ((int64_t)1 << (bits - 1)) - 1;
    if (!(scale > 0.0f) || !isfinite(scale) || zero < *lo || zero > *hi) {
        return NPK_ERR_QUANT;
    }
    return NPK_OK;
}

/* one value on the grid: scale * (clamp(round(x / scale) + zero, lo, hi) - zero), in float */
static inline float npk__on_grid(float x, int64_t lo, int64_t hi, float scale, int32_t zero)
{
    int64_t q = npk__round_sat((double)(x / scale), lo - zero, hi - zero, 0) + zero;
    return (float)(q - zero) * scale;
}

int32_t npk_round_to_bits(float *data, int32_t count, int32_t bits, float scale, int32_t zero)
{
    int64_t lo = 0, hi = 0;
    NPK_TRY(npk__grid_args(data, count, bits, scale, zero, &lo, &hi));
    for (int32_t i = 0; i < count; ++i) {
        data[i] = npk__on_grid(data[i], lo, hi, scale, zero);
    }
    return NPK_OK;
}

int32_t npk_round_to_bits_f16(uint16_t *data, int32_t count, int32_t bits, float scale, int32_t zero)
{
    int64_t lo = 0, hi = 0;
    NPK_TRY(npk__grid_args(data, count, bits, scale, zero, &lo, &hi));
    for (int32_t i = 0; i < count; ++i) { /* widened to float, rounded there, stored back as a half */
        data[i] = npk_f32_to_f16(npk__on_grid(npk_f16_to_f32(data[i]), lo, hi, scale, zero));
    }
    return NPK_OK;
}

int32_t npk_round_to_fp16(float *data, int32_t count)
{
    if (count < 0) {
        return NPK_ERR_SHAPE;
    }
    if (data == NULL && count > 0) {
        return NPK_ERR_NULL;
    }
    for (int32_t i = 0; i < count; ++i) {
        data[i] = npk_f16_to_f32(npk_f32_to_f16(data[i]));
    }
    return NPK_OK;
}
