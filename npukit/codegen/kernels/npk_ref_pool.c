/* npk_ref_pool.c -- max / avg / adaptive / global pooling and axis reductions. */
#include "npk_ref_internal.h"

#include <float.h>

/* ---- pool2d -------------------------------------------------------------------------------- */

static int32_t npk__pool_extent(int32_t in, int32_t k, int32_t s, int32_t d, int32_t p0, int32_t p1, int32_t ceil_mode)
{
    int32_t span = in + p0 + p1 - d * (k - 1) - 1;
    if (span < 0) {
        return -1;
    }
    int32_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + p0) {
        o -= 1; /* the last window would start in the bottom / right padding */
    }
    return o;
}

static int32_t npk__pool2d(const npk_tensor *in, const npk_tensor *out, const npk_pool2d_params *p, int is_max)
{
    npk_view vi, vo;
    if (p == NULL) {
        return NPK_ERR_NULL;
    }
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (vi.rank != 4 || vo.rank != 4 || vi.shape[0] != vo.shape[0] || vi.shape[1] != vo.shape[1]) {
        return NPK_ERR_SHAPE;
    }
    if (p->kernel_h < 1 || p->kernel_w < 1 || p->stride_h < 1 || p->stride_w < 1 || p->dilation_h < 1 ||
        p->dilation_w < 1 || p->pad_top < 0 || p->pad_left < 0 || p->pad_bottom < 0 || p->pad_right < 0) {
        return NPK_ERR_PARAM;
    }
    const int32_t H = vi.shape[2], W = vi.shape[3];
    int32_t eh = npk__pool_extent(H, p->kernel_h, p->stride_h, p->dilation_h, p->pad_top, p->pad_bottom, p->ceil_mode);
    int32_t ew = npk__pool_extent(W, p->kernel_w, p->stride_w, p->dilation_w, p->pad_left, p->pad_right, p->ceil_mode);
    if (eh != vo.shape[2] || ew != vo.shape[3]) {
        return NPK_ERR_SHAPE;
    }
    for (int32_t n = 0; n < vo.shape[0]; ++n) {
        for (int32_t c = 0; c < vo.shape[1]; ++c) {
            for (int32_t oh = 0; oh < vo.shape[2]; ++oh) {
                for (int32_t ow = 0; ow < vo.shape[3]; ++ow) {
                    double sum = 0.0;
                    float best = 0.0f;
                    int32_t valid = 0, padded_h = 0, padded_w = 0;
                    for (int32_t kh = 0; kh < p->kernel_h; ++kh) {
                        int32_t ih = oh * p->stride_h - p->pad_top + kh * p->dilation_h;
                        padded_h += ih < H + p->pad_bottom;
                    }
                    for (int32_t kw = 0; kw < p->kernel_w; ++kw) {
                        int32_t iw = ow * p->stride_w - p->pad_left + kw * p->dilation_w;
                        padded_w += iw < W + p->pad_right;
                    }
                    for (int32_t kh = 0; kh < p->kernel_h; ++kh) {
                        int32_t ih = oh * p->stride_h - p->pad_top + kh * p->dilation_h;
                        if (ih < 0 || ih >= H) {
                            continue;
                        }
                        for (int32_t kw = 0; kw < p->kernel_w; ++kw) {
                            int32_t iw = ow * p->stride_w - p->pad_left + kw * p->dilation_w;
                            if (iw < 0 || iw >= W) {
                                continue;
                            }
                            float x = npk__load(&vi, n * vi.stride[0] + npk__coff(&vi, c) + ih * vi.stride[2] + iw * vi.stride[3]);
                            if (valid == 0 || x > best || x != x) {
                                best = (best != best) ? best : x;
                            }
                            sum += (double)x;
                            valid += 1;
                        }
                    }
                    float y;
                    if (valid == 0) { /* all taps in the padding: TVM's lowest value for max */
                        y = !is_max ? 0.0f : (vo.dtype == NPK_F16 ? -65504.0f : -FLT_MAX);
                    } else if (is_max) {
                        y = best;
                    } else {
                        int32_t count = p->count_include_pad ? padded_h * padded_w : valid;
                        y = (float)(sum / (double)count);
                    }
                    npk__store(&vo, n * vo.stride[0] + npk__coff(&vo, c) + oh * vo.stride[2] + ow * vo.stride[3], y);
                }
            }
        }
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}

int32_t npk_max_pool2d(const npk_tensor *in, const npk_tensor *out, const npk_pool2d_params *p) { return npk__pool2d(in, out, p, 1); }
int32_t npk_avg_pool2d(const npk_tensor *in, const npk_tensor *out, const npk_pool2d_params *p) { return npk__pool2d(in, out, p, 0); }

int32_t npk_adaptive_avg_pool2d(const npk_tensor *in, const npk_tensor *out)
{
    npk_view vi, vo;
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (vi.rank != 4 || vo.rank != 4 || vi.shape[0] != vo.shape[0] || vi.shape[1] != vo.shape[1]) {
        return NPK_ERR_SHAPE;
    }
    const int32_t H = vi.shape[2], W = vi.shape[3], OH = vo.shape[2], OW = vo.shape[3];
    if (OH < 1 || OW < 1 || H < 1 || W < 1) {
        return NPK_ERR_SHAPE;
    }
    for (int32_t n = 0; n < vo.shape[0]; ++n) {
        for (int32_t c = 0; c < vo.shape[1]; ++c) {
            for (int32_t oh = 0; oh < OH; ++oh) {
                int32_t h0 = (oh * H) / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
                for (int32_t ow = 0; ow < OW; ++ow) {
                    int32_t w0 = (ow * W) / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
                    double sum = 0.0;
                    for (int32_t h = h0; h < h1; ++h) {
                        for (int32_t w = w0; w < w1; ++w) {
                            sum += (double)npk__load(&vi, n * vi.stride[0] + npk__coff(&vi, c) + h * vi.stride[2] + w * vi.stride[3]);
                        }
                    }
                    float y = (float)(sum / (double)((h1 - h0) * (w1 - w0)));
                    npk__store(&vo, n * vo.stride[0] + npk__coff(&vo, c) + oh * vo.stride[2] + ow * vo.stride[3], y);
                }
            }
        }
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}

int32_t npk_global_avg_pool2d(const npk_tensor *in, const npk_tensor *out)
{
    npk_view vo;
    NPK_TRY(npk__view(out, &vo));
    if (vo.rank == 2) { /* [N, C]: mean over H, W without keepdims */
        return npk_reduce_mean(in, out, (1u << 2) | (1u << 3));
    }
    if (vo.rank != 4 || vo.shape[2] != 1 || vo.shape[3] != 1) {
        return NPK_ERR_SHAPE;
    }
    return npk_adaptive_avg_pool2d(in, out);
}

/* ---- reductions ---------------------------------------------------------------------------- */

enum { NPK__SUM = 0, NPK__MEAN = 1, NPK__MAX = 2, NPK__MIN = 3 };

static int32_t npk__reduce(const npk_tensor *in, const npk_tensor *out, uint32_t axes, int32_t kind)
{
    npk_view vi, vo;
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (vi.rank < 32 && (axes >> vi.rank) != 0) {
        return NPK_ERR_PARAM;
    }
    int32_t nred = 0;
    for (int32_t d = 0; d < vi.rank; ++d) {
        nred += (axes >> d) & 1u;
    }
    const int keep = vo.rank == vi.rank;
    if (!keep && vo.rank != vi.rank - nred) {
        return NPK_ERR_SHAPE;
    }
    /* out index -> in index: kept axes copy, reduced axes iterate over rshape */
    int32_t kshape[NPK_MAX_RANK], rshape[NPK_MAX_RANK], rcount = 1;
    for (int32_t d = 0, od = 0; d < vi.rank; ++d) {
        int red = (axes >> d) & 1u;
        kshape[d] = red ? 1 : vi.shape[d];
        rshape[d] = red ? vi.shape[d] : 1;
        rcount *= rshape[d];
        if (keep) {
            if (vo.shape[d] != kshape[d]) {
                return NPK_ERR_SHAPE;
            }
        } else if (!red) {
            if (vo.shape[od++] != vi.shape[d]) {
                return NPK_ERR_SHAPE;
            }
        }
    }
    if ((kind == NPK__MAX || kind == NPK__MIN) && rcount == 0 && vo.numel > 0) {
        return NPK_ERR_SHAPE; /* max / min of nothing */
    }
    int32_t kidx[NPK_MAX_RANK] = {0};
    if (vo.numel > 0) {
        do {
            int32_t ridx[NPK_MAX_RANK] = {0}, idx[NPK_MAX_RANK], oidx[NPK_MAX_RANK];
            double sum = 0.0;
            float best = 0.0f;
            int first = 1;
            if (rcount > 0) {
                do {
                    for (int32_t d = 0; d < vi.rank; ++d) {
                        idx[d] = kidx[d] + ridx[d];
                    }
                    float x = npk__load(&vi, npk__off(&vi, idx));
                    sum += (double)x;
                    if (first || x != x || (kind == NPK__MAX ? x > best : x < best)) {
                        best = (!first && best != best) ? best : x;
                    }
                    first = 0;
                } while (npk__next(ridx, rshape, vi.rank));
            }
            int32_t od = 0;
            for (int32_t d = 0; d < vi.rank; ++d) {
                if (keep || !((axes >> d) & 1u)) {
                    oidx[od++] = kidx[d];
                }
            }
            float y = kind == NPK__SUM ? (float)sum
                    : kind == NPK__MEAN ? (float)(sum / (double)rcount)
                    : best;
            npk__store(&vo, npk__off(&vo, oidx), y);
        } while (npk__next(kidx, kshape, vi.rank));
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}

int32_t npk_reduce_sum(const npk_tensor *in, const npk_tensor *out, uint32_t axes) { return npk__reduce(in, out, axes, NPK__SUM); }
int32_t npk_reduce_mean(const npk_tensor *in, const npk_tensor *out, uint32_t axes) { return npk__reduce(in, out, axes, NPK__MEAN); }
int32_t npk_reduce_max(const npk_tensor *in, const npk_tensor *out, uint32_t axes) { return npk__reduce(in, out, axes, NPK__MAX); }
int32_t npk_reduce_min(const npk_tensor *in, const npk_tensor *out, uint32_t axes) { return npk__reduce(in, out, axes, NPK__MIN); }
