/* npk_ref_conv.c -- conv2d (regular, grouped, depthwise; float and integer paths). */
#include "npk_ref_internal.h"

static int32_t npk__conv_check(const npk_view *vi, const npk_view *vo, const npk_conv2d_params *p)
{
    if (vi->rank != 4 || vo->rank != 4) {
        return NPK_ERR_SHAPE;
    }
    if (p->stride_h < 1 || p->stride_w < 1 || p->dilation_h < 1 || p->dilation_w < 1 || p->groups < 1 ||
        p->kernel_h < 1 || p->kernel_w < 1 || p->pad_top < 0 || p->pad_left < 0 || p->pad_bottom < 0 ||
        p->pad_right < 0) {
        return NPK_ERR_PARAM;
    }
    if (vi->shape[1] % p->groups != 0 || vo->shape[1] % p->groups != 0) {
        return NPK_ERR_SHAPE;
    }
    int32_t eh = vi->shape[2] + p->pad_top + p->pad_bottom - p->dilation_h * (p->kernel_h - 1) - 1;
    int32_t ew = vi->shape[3] + p->pad_left + p->pad_right - p->dilation_w * (p->kernel_w - 1) - 1;
    if (eh < 0 || ew < 0) {
        return NPK_ERR_SHAPE;
    }
    if (vo->shape[0] != vi->shape[0] || vo->shape[2] != eh / p->stride_h + 1 || vo->shape[3] != ew / p->stride_w + 1) {
        return NPK_ERR_SHAPE;
    }
    if (p->weights == NULL) {
        return NPK_ERR_NULL;
    }
    return NPK_OK;
}

int32_t npk_conv2d(const npk_tensor *in, const npk_tensor *out, const npk_conv2d_params *p)
{
    npk_view vi, vo;
    if (p == NULL) {
        return NPK_ERR_NULL;
    }
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    NPK_TRY(npk__conv_check(&vi, &vo, p));
    const int is_float = npk__is_float(vi.dtype);
    if (is_float) {
        if (!npk__is_float(vo.dtype) || !npk__is_float(p->weight_dtype)) {
            return NPK_ERR_DTYPE;
        }
    } else {
        if (!npk__is_qact(vi.dtype) || !npk__is_qact(vo.dtype) || !npk__is_quant(p->weight_dtype)) {
            return NPK_ERR_DTYPE;
        }
        if (p->multiplier == NULL || p->shift == NULL) {
            return NPK_ERR_NULL;
        }
        const int64_t taps = (int64_t)(vi.shape[1] / p->groups) * p->kernel_h * p->kernel_w;
        if (p->bias_shift < 0 || p->bias_shift > NPK__BIAS_SHIFT_MAX ||
            (p->bias_shift > 0 && (vi.dtype == NPK_S16 || p->weight_dtype == NPK_S16 || taps >= NPK__BIAS_SHIFT_TAPS))) {
            return NPK_ERR_PARAM;
        }
        for (int32_t oc = 0; oc < vo.shape[1]; ++oc) {
            if (p->multiplier[oc] < 0) {
                return NPK_ERR_QUANT;
            }
        }
    }
    const int wide = vi.dtype == NPK_S16 || p->weight_dtype == NPK_S16; /* int64 bias */
    const int32_t N = vi.shape[0], C = vi.shape[1], H = vi.shape[2], W = vi.shape[3];
    const int32_t OC = vo.shape[1], OH = vo.shape[2], OW = vo.shape[3];
    const int32_t ICg = C / p->groups, OCg = OC / p->groups;
    const int32_t KH = p->kernel_h, KW = p->kernel_w;
    const int has_act = npk__has_act(p->act_min, p->act_max);
    int64_t qlo = 0, qhi = 0;
    if (!is_float) {
        npk__act_bounds(&vo, p->act_min, p->act_max, &qlo, &qhi);
    }
    for (int32_t n = 0; n < N; ++n) {
        for (int32_t oc = 0; oc < OC; ++oc) {
            const int32_t c0 = (oc / OCg) * ICg;
            for (int32_t oh = 0; oh < OH; ++oh) {
                for (int32_t ow = 0; ow < OW; ++ow) {
                    double facc = 0.0;
                    int64_t iacc = 0;
                    for (int32_t kh = 0; kh < KH; ++kh) {
                        const int32_t ih = oh * p->stride_h - p->pad_top + kh * p->dilation_h;
                        if (ih < 0 || ih >= H) {
                            continue;
                        }
                        for (int32_t kw = 0; kw < KW; ++kw) {
                            const int32_t iw = ow * p->stride_w - p->pad_left + kw * p->dilation_w;
                            if (iw < 0 || iw >= W) {
                                continue;
                            }
                            const int32_t wbase = ((oc * KH + kh) * KW + kw) * ICg;
                            const int32_t ibase = n * vi.stride[0] + ih * vi.stride[2] + iw * vi.stride[3];
                            for (int32_t ic = 0; ic < ICg; ++ic) {
                                const int32_t off = ibase + npk__coff(&vi, c0 + ic);
                                if (is_float) {
                                    facc += (double)npk__load(&vi, off) *
                                            (double)npk__weight_f(p->weights, p->weight_dtype, wbase + ic);
                                } else {
                                    iacc += (npk__load_int(&vi, off) - vi.zero) *
                                            (int64_t)npk__weight_q(p->weights, p->weight_dtype, wbase + ic);
                                }
                            }
                        }
                    }
                    const int32_t ooff = n * vo.stride[0] + npk__coff(&vo, oc) + oh * vo.stride[2] + ow * vo.stride[3];
                    if (is_float) {
                        float y = (float)(facc + (p->bias ? (double)((const float *)p->bias)[oc] : 0.0));
                        if (has_act) {
                            y = y < p->act_min ? p->act_min : y;
                            y = y > p->act_max ? p->act_max : y;
                        }
                        npk__store(&vo, ooff, y);
                    } else {
                        iacc *= (int64_t)1 << p->bias_shift; /* exact: checked above */
                        if (p->bias) {
                            iacc += wide ? ((const int64_t *)p->bias)[oc] : (int64_t)((const int32_t *)p->bias)[oc];
                        }
                        int64_t r = npk_apply_multiplier(iacc, p->multiplier[oc], p->shift[oc] - p->bias_shift);
                        npk__store_int(&vo, ooff, npk__clamp_out(r, vo.zero, qlo, qhi));
                    }
                }
            }
        }
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}
