/* npk_cmsis_nn.c -- npukit's portable reference implementation of the CMSIS-NN functions in
 * arm_nnfunctions.h, written from the documented TensorFlow Lite Micro / CMSIS-NN semantics.
 * Replace it (and the two headers) with Arm's CMSIS-NN to run the optimized kernels. */
#include "arm_nnfunctions.h"

#include <stddef.h>

/* ---- fixed-point arithmetic (TFLite / CMSIS-NN definitions) -------------------------------- */

/* floor(x / 2^s) without relying on the implementation-defined >> of negative numbers */
static int64_t npk_cm_floor_shift(int64_t x, int32_t s)
{
    if (x >= 0) {
        return x >> s;
    }
    uint64_t m = (uint64_t)0 - (uint64_t)x;
    return -(int64_t)((m + (((uint64_t)1 << s) - 1)) >> s);
}


/* saturating rounding doubling high multiply: round(a * b / 2^31), half away from zero */
static int32_t npk_cm_high_mul(int32_t a, int32_t b)
{
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    int64_t p = (int64_t)a * b;
    int64_t nudge = p >= 0 ? ((int64_t)1 << 30) : (1 - ((int64_t)1 << 30));
    return (int32_t)((p + nudge) / ((int64_t)1 << 31)); /* C division truncates toward zero */
}

/* x / 2^e rounded half away from zero, e in [0, 31] */
static int32_t npk_cm_div_pot(int32_t x, int32_t e)
{
    if (e <= 0) {
        return x;
    }
    if (e > 31) {
        e = 31;
    }
    const int32_t mask = (int32_t)(((uint32_t)1 << e) - 1u);
    const int32_t rem = (int32_t)((uint32_t)x & (uint32_t)mask);
    const int32_t res = (int32_t)npk_cm_floor_shift(x, e);
    const int32_t threshold = (mask >> 1) + (res < 0 ? 1 : 0);
    return res + (rem > threshold ? 1 : 0);
}

/* x * 2^e, saturating, e in [1, 30] */
static int32_t npk_cm_mul_pot(int32_t x, int32_t e)
{
    const int32_t threshold = (int32_t)(((uint32_t)1 << (31 - e)) - 1u);
    if (x > threshold) {
        return INT32_MAX;
    }
    if (x < -threshold) {
        return INT32_MIN;
    }
    return (int32_t)((uint32_t)x << e);
}

/* CMSIS-NN requantization of v by multiplier * 2^(shift - 31).  By default as CMSIS-NN's default
   build (and TensorFlow Lite's): left shift, doubling high multiply rounding half up, rounding right
   shift (half away from zero) -- two roundings.  Built with CMSIS_NN_USE_SINGLE_ROUNDING, CMSIS-NN's
   documented build option: one rounding, half up, of the exact 64-bit product (the same option must
   be set when linking Arm's library). */
static int32_t npk_cm_requantize(int32_t v, int32_t multiplier, int32_t shift)
{
#ifdef CMSIS_NN_USE_SINGLE_ROUNDING
    const int32_t total = 31 - shift; /* shift <= 30, so total >= 1 */
    const int64_t half_units = npk_cm_floor_shift((int64_t)v * multiplier, total - 1);
    return (int32_t)npk_cm_floor_shift(half_units + 1, 1);
#else
    /* (x * multiplier + 2^30) / 2^31 rounded down: the doubling high multiply without saturation */
    const int32_t left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    const int32_t x = (int32_t)((uint32_t)v << left);
    const int32_t high = (int32_t)npk_cm_floor_shift((int64_t)x * multiplier + ((int64_t)1 << 30), 31);
    return npk_cm_div_pot(high, right);
#endif
}

static int32_t npk_cm_clamp(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* exp(a) for a <= 0 in Q5.26 -> Q0.31 (gemmlowp's exp_on_negative_values): a Taylor polynomial
   around -1/8 on [-1/4, 0), times exp(-2^k) for every quarter-multiple bit of the remainder. */
static int32_t npk_cm_exp_on_negative(int32_t a)
{
    static const int32_t exp_neg_pow2[7] = {
        1672461947, /* exp(-1/4) */
        1302514674, /* exp(-1/2) */
        790015084,  /* exp(-1) */
        290630308,  /* exp(-2) */
        39332535,   /* exp(-4) */
        720401,     /* exp(-8) */
        242         /* exp(-16) */
    };
    const int32_t exp_minus_eighth = 1895147668; /* exp(-1/8) in Q0.31 */
    const int32_t one_third = 715827883;         /* 1/3 in Q0.31 */
    const int32_t quarter = 1 << 24;             /* 1/4 in Q5.26 */
    const int32_t a_mod = (int32_t)((uint32_t)a & (uint32_t)(quarter - 1)) - quarter; /* [-1/4, 0) */
    const int32_t remainder = a_mod - a;
    const int32_t x = a_mod * 32 + (1 << 28); /* Q0.31, shifted by +1/8 */
    const int32_t x2 = npk_cm_high_mul(x, x);
    const int32_t x3 = npk_cm_high_mul(x2, x);
    const int32_t x4 = npk_cm_high_mul(x2, x2);
    const int32_t x4_over_4 = npk_cm_div_pot(x4, 2);
    const int32_t poly = npk_cm_div_pot(npk_cm_high_mul(x4_over_4 + x3, one_third) + x2, 1);
    int32_t result = exp_minus_eighth + npk_cm_high_mul(exp_minus_eighth, x + poly);
    for (int32_t k = 0; k < 7; ++k) {
        if ((uint32_t)remainder & ((uint32_t)1 << (24 + k))) {
            result = npk_cm_high_mul(result, exp_neg_pow2[k]);
        }
    }
    return a == 0 ? INT32_MAX : result;
}

/* 1 / (1 + a) for a in [0, 1) in Q0.31 (three Newton-Raphson steps from 48/17 - 32/17 d). */
static int32_t npk_cm_one_over_one_plus_x(int32_t a)
{
    const int64_t sum = (int64_t)a + INT32_MAX;
    const int32_t half_den = (int32_t)((sum + (sum >= 0 ? 1 : -1)) / 2);
    int32_t x = 1515870810 + npk_cm_high_mul(half_den, -1010580540); /* Q2.29 */
    const int32_t one_q29 = 1 << 29;
    for (int32_t i = 0; i < 3; ++i) {
        x += npk_cm_mul_pot(npk_cm_high_mul(x, one_q29 - npk_cm_high_mul(half_den, x)), 2);
    }
    return npk_cm_mul_pot(x, 1);
}

/* a * b modulo 2^32 (CMSIS-NN multiplies in int32 and relies on the inputs staying in range) */
static int32_t npk_cm_wrap_mul(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }

static int32_t npk_cm_clz(uint32_t v)
{
    int32_t n = 0;
    if (v == 0) {
        return 32;
    }
    while (!(v & 0x80000000u)) {
        v <<= 1;
        ++n;
    }
    return n;
}

/* ---- convolution --------------------------------------------------------------------------- */

/* shared by the regular / grouped and the depthwise wrappers */
static arm_cmsis_nn_status npk_cm_conv(int32_t input_offset, int32_t output_offset, cmsis_nn_tile stride,
                                       cmsis_nn_tile padding, cmsis_nn_tile dilation, cmsis_nn_activation act,
                                       const int32_t *mult, const int32_t *shift, const cmsis_nn_dims *in_dims,
                                       const int8_t *in, int32_t kh_n, int32_t kw_n, const int8_t *filter,
                                       const int32_t *bias, const cmsis_nn_dims *out_dims, int8_t *out,
                                       int32_t depthwise, int32_t ch_mult, int32_t cin_group)
{
    const int32_t N = in_dims->n, H = in_dims->h, W = in_dims->w, C = in_dims->c;
    const int32_t OH = out_dims->h, OW = out_dims->w, OC = out_dims->c;
    if (stride.w < 1 || stride.h < 1 || dilation.w < 1 || dilation.h < 1 || cin_group < 1 || mult == NULL ||
        shift == NULL || in == NULL || filter == NULL || out == NULL) {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    const int32_t groups = depthwise ? C : C / cin_group;
    if ((!depthwise && (C % cin_group != 0 || OC % groups != 0)) || (depthwise && OC != C * ch_mult)) {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    const int32_t ocg = OC / groups;
    for (int32_t n = 0; n < N; ++n) {
        for (int32_t oh = 0; oh < OH; ++oh) {
            for (int32_t ow = 0; ow < OW; ++ow) {
                for (int32_t oc = 0; oc < OC; ++oc) {
                    const int32_t c0 = depthwise ? oc / ch_mult : (oc / ocg) * cin_group;
                    const int32_t cn = depthwise ? 1 : cin_group;
                    int32_t acc = bias ? bias[oc] : 0;
                    for (int32_t kh = 0; kh < kh_n; ++kh) {
                        const int32_t ih = oh * stride.h - padding.h + kh * dilation.h;
                        if (ih < 0 || ih >= H) {
                            continue;
                        }
                        for (int32_t kw = 0; kw < kw_n; ++kw) {
                            const int32_t iw = ow * stride.w - padding.w + kw * dilation.w;
                            if (iw < 0 || iw >= W) {
                                continue;
                            }
                            const int8_t *px = in + ((n * H + ih) * W + iw) * C + c0;
                            for (int32_t ic = 0; ic < cn; ++ic) {
                                int32_t w = depthwise ? filter[(kh * kw_n + kw) * OC + oc]
                                                      : filter[((oc * kh_n + kh) * kw_n + kw) * cin_group + ic];
                                acc += ((int32_t)px[ic] + input_offset) * w;
                            }
                        }
                    }
                    int32_t r = npk_cm_requantize(acc, mult[oc], shift[oc]) + output_offset;
                    out[((n * OH + oh) * OW + ow) * OC + oc] = (int8_t)npk_cm_clamp(r, act.min, act.max);
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}

arm_cmsis_nn_status arm_convolve_wrapper_s8(const cmsis_nn_context *ctx, const cmsis_nn_conv_params *conv_params, const cmsis_nn_per_channel_quant_params *quant_params, const cmsis_nn_dims *input_dims, const int8_t *input_data, const cmsis_nn_dims *filter_dims, const int8_t *filter_data, const cmsis_nn_dims *bias_dims, const int32_t *bias_data, const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)ctx;
    (void)bias_dims;
    if (conv_params == NULL || quant_params == NULL || input_dims == NULL || filter_dims == NULL || output_dims == NULL ||
        filter_dims->n != output_dims->c || filter_dims->c < 1) {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    return npk_cm_conv(conv_params->input_offset, conv_params->output_offset, conv_params->stride, conv_params->padding,
                       conv_params->dilation, conv_params->activation, quant_params->multiplier, quant_params->shift,
                       input_dims, input_data, filter_dims->h, filter_dims->w, filter_data, bias_data, output_dims,
                       output_data, 0, 1, filter_dims->c);
}

static int32_t npk_cm_align4(int32_t v) { return (v + 3) & ~3; }

int32_t arm_convolve_wrapper_s8_get_buffer_size(const cmsis_nn_conv_params *conv_params, const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims)
{
    (void)conv_params;
    (void)output_dims;
    /* two im2col columns of int16: what Arm's Cortex-M DSP build asks for; this file needs none */
    return 2 * (int32_t)sizeof(int16_t) * npk_cm_align4(input_dims->c * filter_dims->h * filter_dims->w);
}

arm_cmsis_nn_status arm_depthwise_conv_wrapper_s8(const cmsis_nn_context *ctx, const cmsis_nn_dw_conv_params *dw_conv_params, const cmsis_nn_per_channel_quant_params *quant_params, const cmsis_nn_dims *input_dims, const int8_t *input_data, const cmsis_nn_dims *filter_dims, const int8_t *filter_data, const cmsis_nn_dims *bias_dims, const int32_t *bias_data, const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)ctx;
    (void)bias_dims;
    if (dw_conv_params == NULL || quant_params == NULL || input_dims == NULL || filter_dims == NULL ||
        output_dims == NULL || dw_conv_params->ch_mult < 1 || filter_dims->c != output_dims->c) {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    return npk_cm_conv(dw_conv_params->input_offset, dw_conv_params->output_offset, dw_conv_params->stride,
                       dw_conv_params->padding, dw_conv_params->dilation, dw_conv_params->activation,
                       quant_params->multiplier, quant_params->shift, input_dims, input_data, filter_dims->h,
                       filter_dims->w, filter_data, bias_data, output_dims, output_data, 1, dw_conv_params->ch_mult, 1);
}

int32_t arm_depthwise_conv_wrapper_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params, const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims)
{
    (void)dw_conv_params;
    (void)output_dims;
    return 2 * (int32_t)sizeof(int16_t) * npk_cm_align4(input_dims->c * filter_dims->h * filter_dims->w);
}

/* ---- fully connected ----------------------------------------------------------------------- */

arm_cmsis_nn_status arm_fully_connected_s8(const cmsis_nn_context *ctx, const cmsis_nn_fc_params *fc_params, const cmsis_nn_per_tensor_quant_params *quant_params, const cmsis_nn_dims *input_dims, const int8_t *input_data, const cmsis_nn_dims *filter_dims, const int8_t *filter_data, const cmsis_nn_dims *bias_dims, const int32_t *bias_data, const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)ctx;
    (void)bias_dims;
    if (fc_params == NULL || quant_params == NULL || input_dims == NULL || filter_dims == NULL || output_dims == NULL ||
        input_data == NULL || filter_data == NULL || output_data == NULL) {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    const int32_t depth = filter_dims->n, oc_n = output_dims->c;
    for (int32_t b = 0; b < input_dims->n; ++b) {
        for (int32_t oc = 0; oc < oc_n; ++oc) {
            int32_t acc = bias_data ? bias_data[oc] : 0;
            for (int32_t k = 0; k < depth; ++k) {
                acc += ((int32_t)input_data[b * depth + k] + fc_params->input_offset) *
                       ((int32_t)filter_data[oc * depth + k] + fc_params->filter_offset);
            }
            int32_t r = npk_cm_requantize(acc, quant_params->multiplier, quant_params->shift) + fc_params->output_offset;
            output_data[b * oc_n + oc] = (int8_t)npk_cm_clamp(r, fc_params->activation.min, fc_params->activation.max);
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}

int32_t arm_fully_connected_s8_get_buffer_size(const cmsis_nn_dims *filter_dims)
{
    (void)filter_dims;
    return 0; /* Arm's Helium build wants filter_dims->c int32 kernel sums (arm_vector_sum_s8) */
}

arm_cmsis_nn_status arm_vector_sum_s8(int32_t *vector_sum_buf, const int32_t vector_cols, const int32_t vector_rows, const int8_t *vector_data, const int32_t lhs_offset, const int32_t *bias_data)
{
    if (vector_sum_buf == NULL || vector_data == NULL) {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    for (int32_t r = 0; r < vector_rows; ++r) {
        int32_t sum = 0;
        for (int32_t c = 0; c < vector_cols; ++c) {
            sum += vector_data[r * vector_cols + c];
        }
        vector_sum_buf[r] = sum * lhs_offset + (bias_data ? bias_data[r] : 0);
    }
    return ARM_CMSIS_NN_SUCCESS;
}

/* ---- pooling ------------------------------------------------------------------------------- */

static arm_cmsis_nn_status npk_cm_pool(const cmsis_nn_pool_params *pp, const cmsis_nn_dims *in_dims, const int8_t *in,
                                       const cmsis_nn_dims *f_dims, const cmsis_nn_dims *out_dims, int8_t *out, int is_max)
{
    if (pp == NULL || in_dims == NULL || f_dims == NULL || out_dims == NULL || in == NULL || out == NULL ||
        pp->stride.h < 1 || pp->stride.w < 1) {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    const int32_t N = in_dims->n > 0 ? in_dims->n : 1, H = in_dims->h, W = in_dims->w, C = in_dims->c;
    const int32_t OH = out_dims->h, OW = out_dims->w;
    for (int32_t n = 0; n < N; ++n) {
        for (int32_t oh = 0; oh < OH; ++oh) {
            for (int32_t ow = 0; ow < OW; ++ow) {
                for (int32_t c = 0; c < C; ++c) {
                    int32_t best = -128, sum = 0, count = 0;
                    for (int32_t kh = 0; kh < f_dims->h; ++kh) {
                        const int32_t ih = oh * pp->stride.h - pp->padding.h + kh;
                        if (ih < 0 || ih >= H) {
                            continue;
                        }
                        for (int32_t kw = 0; kw < f_dims->w; ++kw) {
                            const int32_t iw = ow * pp->stride.w - pp->padding.w + kw;
                            if (iw < 0 || iw >= W) {
                                continue;
                            }
                            const int32_t v = in[((n * H + ih) * W + iw) * C + c];
                            best = v > best ? v : best;
                            sum += v;
                            ++count;
                        }
                    }
                    int32_t r;
                    if (is_max) {
                        r = best;
                    } else if (count == 0) {
                        r = 0;
                    } else {
                        r = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
                    }
                    out[((n * OH + oh) * OW + ow) * C + c] = (int8_t)npk_cm_clamp(r, pp->activation.min, pp->activation.max);
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}

arm_cmsis_nn_status arm_max_pool_s8(const cmsis_nn_context *ctx, const cmsis_nn_pool_params *pool_params, const cmsis_nn_dims *input_dims, const int8_t *input_data, const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)ctx;
    return npk_cm_pool(pool_params, input_dims, input_data, filter_dims, output_dims, output_data, 1);
}

arm_cmsis_nn_status arm_avgpool_s8(const cmsis_nn_context *ctx, const cmsis_nn_pool_params *pool_params, const cmsis_nn_dims *input_dims, const int8_t *input_data, const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims, int8_t *output_data)
{
    (void)ctx;
    return npk_cm_pool(pool_params, input_dims, input_data, filter_dims, output_dims, output_data, 0);
}

int32_t arm_avgpool_s8_get_buffer_size(const int dim_dst_width, const int ch_src)
{
    (void)dim_dst_width;
    return ch_src * (int32_t)sizeof(int32_t); /* Arm's DSP build: one int32 sum per channel */
}

/* ---- softmax ------------------------------------------------------------------------------- */

void arm_softmax_s8(const int8_t *input, const int32_t num_rows, const int32_t row_size, const int32_t mult, const int32_t shift, const int32_t diff_min, int8_t *output)
{
    const int32_t accum_bits = 12; /* the sum of exponentials is kept in Q12.19 */
    const int32_t scale_up = (int32_t)((uint32_t)1 << shift);
    for (int32_t r = 0; r < num_rows; ++r) {
        const int8_t *row = input + r * row_size;
        int8_t *orow = output + r * row_size;
        int32_t max = row[0];
        for (int32_t i = 1; i < row_size; ++i) {
            max = row[i] > max ? row[i] : max;
        }
        int32_t sum = 0;
        for (int32_t i = 0; i < row_size; ++i) {
            const int32_t diff = row[i] - max;
            if (diff >= diff_min) {
                sum += npk_cm_div_pot(npk_cm_exp_on_negative(npk_cm_high_mul(npk_cm_wrap_mul(diff, scale_up), mult)), accum_bits);
            }
        }
        const int32_t headroom = npk_cm_clz((uint32_t)sum);
        const uint32_t normalized = sum > 0 ? (uint32_t)sum << headroom : 0u; /* (1 + x) in [1, 2) as Q1.31 */
        const int32_t scale = npk_cm_one_over_one_plus_x((int32_t)(normalized - 0x80000000u));
        const int32_t bits = accum_bits - headroom + 23; /* to the output grid of 1/256 */
        for (int32_t i = 0; i < row_size; ++i) {
            const int32_t diff = row[i] - max;
            if (diff >= diff_min) {
                const int32_t e = npk_cm_exp_on_negative(npk_cm_high_mul(npk_cm_wrap_mul(diff, scale_up), mult));
                orow[i] = (int8_t)npk_cm_clamp(npk_cm_div_pot(npk_cm_high_mul(scale, e), bits) - 128, -128, 127);
            } else {
                orow[i] = -128;
            }
        }
    }
}

/* ---- elementwise --------------------------------------------------------------------------- */

arm_cmsis_nn_status arm_elementwise_add_s8(const int8_t *input_1_vect, const int8_t *input_2_vect, const int32_t input_1_offset, const int32_t input_1_mult, const int32_t input_1_shift, const int32_t input_2_offset, const int32_t input_2_mult, const int32_t input_2_shift, const int32_t left_shift, int8_t *output, const int32_t out_offset, const int32_t out_mult, const int32_t out_shift, const int32_t out_activation_min, const int32_t out_activation_max, const int32_t block_size)
{
    for (int32_t i = 0; i < block_size; ++i) {
        int32_t a = (int32_t)((uint32_t)((int32_t)input_1_vect[i] + input_1_offset) << left_shift);
        int32_t b = (int32_t)((uint32_t)((int32_t)input_2_vect[i] + input_2_offset) << left_shift);
        a = npk_cm_requantize(a, input_1_mult, input_1_shift);
        b = npk_cm_requantize(b, input_2_mult, input_2_shift);
        int32_t s = npk_cm_requantize(a + b, out_mult, out_shift) + out_offset;
        output[i] = (int8_t)npk_cm_clamp(s, out_activation_min, out_activation_max);
    }
    return ARM_CMSIS_NN_SUCCESS;
}

arm_cmsis_nn_status arm_elementwise_mul_s8(const int8_t *input_1_vect, const int8_t *input_2_vect, const int32_t input_1_offset, const int32_t input_2_offset, int8_t *output, const int32_t out_offset, const int32_t out_mult, const int32_t out_shift, const int32_t out_activation_min, const int32_t out_activation_max, const int32_t block_size)
{
    for (int32_t i = 0; i < block_size; ++i) {
        int32_t p = ((int32_t)input_1_vect[i] + input_1_offset) * ((int32_t)input_2_vect[i] + input_2_offset);
        int32_t r = npk_cm_requantize(p, out_mult, out_shift) + out_offset;
        output[i] = (int8_t)npk_cm_clamp(r, out_activation_min, out_activation_max);
    }
    return ARM_CMSIS_NN_SUCCESS;
}
