/* npk_ref_move.c -- reshape / copy, permute_dims, concat, split, strided_slice, resize2d. */
#include "npk_ref_internal.h"

int32_t npk_reshape(const npk_tensor *in, const npk_tensor *out)
{
    npk_view vi, vo;
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (vi.numel != vo.numel) {
        return NPK_ERR_SHAPE;
    }
    int32_t ii[NPK_MAX_RANK] = {0}, oi[NPK_MAX_RANK] = {0};
    for (int32_t k = 0; k < vi.numel; ++k) {
        npk__xfer(&vi, npk__off(&vi, ii), &vo, npk__off(&vo, oi));
        npk__next(ii, vi.shape, vi.rank);
        npk__next(oi, vo.shape, vo.rank);
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}

int32_t npk_copy(const npk_tensor *in, const npk_tensor *out) { return npk_reshape(in, out); }

int32_t npk_permute_dims(const npk_tensor *in, const npk_tensor *out, const int32_t *axes)
{
    npk_view vi, vo;
    if (axes == NULL) {
        return NPK_ERR_NULL;
    }
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (vi.rank != vo.rank) {
        return NPK_ERR_SHAPE;
    }
    int32_t ax[NPK_MAX_RANK], seen = 0;
    for (int32_t i = 0; i < vo.rank; ++i) {
        NPK_TRY(npk__axis(axes[i], vi.rank, &ax[i]));
        if (seen & (1 << ax[i])) {
            return NPK_ERR_PARAM;
        }
        seen |= 1 << ax[i];
        if (vo.shape[i] != vi.shape[ax[i]]) {
            return NPK_ERR_SHAPE;
        }
    }
    int32_t oi[NPK_MAX_RANK] = {0}, ii[NPK_MAX_RANK] = {0};
    if (vo.numel > 0) {
        do {
            for (int32_t i = 0; i < vo.rank; ++i) {
                ii[ax[i]] = oi[i];
            }
            npk__xfer(&vi, npk__off(&vi, ii), &vo, npk__off(&vo, oi));
        } while (npk__next(oi, vo.shape, vo.rank));
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}

/* Move the elements of `part` to / from `whole` at `offset` along `ax` (dir 0: part -> whole). */
static void npk__place(const npk_view *part, const npk_view *whole, int32_t ax, int32_t offset, int dir)
{
    int32_t pi[NPK_MAX_RANK] = {0}, wi[NPK_MAX_RANK];
    if (part->numel == 0) {
        return;
    }
    do {
        for (int32_t d = 0; d < part->rank; ++d) {
            wi[d] = pi[d] + (d == ax ? offset : 0);
        }
        if (dir == 0) {
            npk__xfer(part, npk__off(part, pi), whole, npk__off(whole, wi));
        } else {
            npk__xfer(whole, npk__off(whole, wi), part, npk__off(part, pi));
        }
    } while (npk__next(pi, part->shape, part->rank));
}

static int32_t npk__parts(const npk_tensor *const *parts, int32_t n, const npk_tensor *whole, int32_t axis, int dir)
{
    npk_view vw, vp;
    if (parts == NULL) {
        return NPK_ERR_NULL;
    }
    if (n < 1 || n > NPK_MAX_INPUTS) {
        return NPK_ERR_PARAM;
    }
    NPK_TRY(npk__view(whole, &vw));
    if (vw.rank == 0) {
        return NPK_ERR_SHAPE;
    }
    int32_t ax;
    NPK_TRY(npk__axis(axis, vw.rank, &ax));
    int32_t total = 0;
    for (int32_t j = 0; j < n; ++j) { /* validate everything before moving anything */
        NPK_TRY(npk__view(parts[j], &vp));
        if (vp.rank != vw.rank) {
            return NPK_ERR_SHAPE;
        }
        for (int32_t d = 0; d < vw.rank; ++d) {
            if (d != ax && vp.shape[d] != vw.shape[d]) {
                return NPK_ERR_SHAPE;
            }
        }
        total += vp.shape[ax];
    }
    if (total != vw.shape[ax]) {
        return NPK_ERR_SHAPE;
    }
    int32_t offset = 0;
    for (int32_t j = 0; j < n; ++j) {
        NPK_TRY(npk__view(parts[j], &vp));
        npk__place(&vp, &vw, ax, offset, dir);
        offset += vp.shape[ax];
        if (dir == 1) {
            npk__fill_pad(&vp);
        }
    }
    if (dir == 0) {
        npk__fill_pad(&vw);
    }
    return NPK_OK;
}

int32_t npk_concat(const npk_tensor *const *inputs, int32_t n, const npk_tensor *out, int32_t axis)
{
    return npk__parts(inputs, n, out, axis, 0);
}

int32_t npk_split(const npk_tensor *in, const npk_tensor *const *outputs, int32_t n, int32_t axis)
{
    return npk__parts(outputs, n, in, axis, 1);
}

int32_t npk_strided_slice(const npk_tensor *in, const npk_tensor *out, const npk_slice_params *p)
{
    npk_view vi, vo;
    if (p == NULL) {
        return NPK_ERR_NULL;
    }
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (vi.rank != vo.rank || p->num_axes < 0 || p->num_axes > vi.rank) {
        return NPK_ERR_SHAPE;
    }
    int32_t start[NPK_MAX_RANK], step[NPK_MAX_RANK], listed = 0;
    for (int32_t d = 0; d < vi.rank; ++d) {
        start[d] = 0;
        step[d] = 1;
    }
    for (int32_t i = 0; i < p->num_axes; ++i) {
        int32_t ax;
        NPK_TRY(npk__axis(p->axes[i], vi.rank, &ax));
        if (listed & (1 << ax)) {
            return NPK_ERR_PARAM;
        }
        listed |= 1 << ax;
        const int64_t dim = vi.shape[ax], s = p->strides[i];
        int64_t b = p->begin[i], e = p->end[i], count;
        if (s == 0 || s > INT32_MAX || s < -INT32_MAX) {
            return NPK_ERR_PARAM;
        }
        if (b < 0) {
            b += dim;
        }
        if (e < 0) {
            e += dim;
        }
        if (s > 0) {
            b = b < 0 ? 0 : (b > dim ? dim : b);
            e = e < 0 ? 0 : (e > dim ? dim : e);
            count = e > b ? (e - b + s - 1) / s : 0;
        } else {
            b = b < -1 ? -1 : (b > dim - 1 ? dim - 1 : b);
            e = e < -1 ? -1 : (e > dim - 1 ? dim - 1 : e);
            count = b > e ? (b - e + (-s) - 1) / (-s) : 0;
        }
        if (vo.shape[ax] != count) {
            return NPK_ERR_SHAPE;
        }
        start[ax] = (int32_t)b;
        step[ax] = (int32_t)s;
    }
    for (int32_t d = 0; d < vi.rank; ++d) {
        if (!(listed & (1 << d)) && vo.shape[d] != vi.shape[d]) {
            return NPK_ERR_SHAPE;
        }
    }
    int32_t oi[NPK_MAX_RANK] = {0}, ii[NPK_MAX_RANK];
    if (vo.numel > 0) {
        do {
            for (int32_t d = 0; d < vi.rank; ++d) {
                ii[d] = start[d] + oi[d] * step[d];
            }
            npk__xfer(&vi, npk__off(&vi, ii), &vo, npk__off(&vo, oi));
        } while (npk__next(oi, vo.shape, vo.rank));
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}

/* index into an axis of size n of a padded position j (j < 0 or j >= n), -1 for the constant */
static int32_t npk__pad_src(int32_t mode, int32_t j, int32_t n)
{
    switch (mode) {
    case NPK_PAD_REPLICATE: return j < 0 ? 0 : n - 1;
    case NPK_PAD_REFLECT: return j < 0 ? -j : 2 * (n - 1) - j;
    case NPK_PAD_CIRCULAR: return j < 0 ? j + n : j - n;
    default: return -1;
    }
}

int32_t npk_pad(const npk_tensor *in, const npk_tensor *out, const npk_pad_params *p)
{
    npk_view vi, vo;
    if (p == NULL) {
        return NPK_ERR_NULL;
    }
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (p->mode < NPK_PAD_CONSTANT || p->mode > NPK_PAD_CIRCULAR) {
        return NPK_ERR_PARAM;
    }
    if (vi.rank != vo.rank) {
        return NPK_ERR_SHAPE;
    }
    for (int32_t d = 0; d < vi.rank; ++d) {
        const int32_t b = p->before[d], a = p->after[d], n = vi.shape[d];
        if (b < 0 || a < 0) {
            return NPK_ERR_PARAM;
        }
        if ((int64_t)b + n + a != vo.shape[d]) {
            return NPK_ERR_SHAPE;
        }
        if (p->mode != NPK_PAD_CONSTANT && (b > 0 || a > 0)) {
            const int32_t lim = p->mode == NPK_PAD_REFLECT ? n - 1 : n;  /* reflect: the edge is not repeated */
            if (n == 0 || b > lim || a > lim) {
                return NPK_ERR_PARAM;
            }
        }
    }
    int32_t oi[NPK_MAX_RANK] = {0}, ii[NPK_MAX_RANK];
    if (vo.numel > 0) {
        do {
            int inside = 1;
            for (int32_t d = 0; d < vi.rank; ++d) {
                int32_t j = oi[d] - p->before[d];
                if (j < 0 || j >= vi.shape[d]) {
                    j = npk__pad_src(p->mode, j, vi.shape[d]);
                    inside = inside && j >= 0;
                }
                ii[d] = j;
            }
            if (inside) {
                npk__xfer(&vi, npk__off(&vi, ii), &vo, npk__off(&vo, oi));
            } else {
                npk__store(&vo, npk__off(&vo, oi), p->value);
            }
        } while (npk__next(oi, vo.shape, vo.rank));
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}

/* input coordinate of output pixel x */
static float npk__src_coord(int32_t mode, int32_t x, int32_t in, int32_t out)
{
    const float scale = (float)in / (float)out;
    switch (mode) {
    case NPK_ALIGN_CORNERS: return out > 1 ? (float)(in - 1) / (float)(out - 1) * (float)x : 0.0f;
    case NPK_ASYMMETRIC: return (float)x * scale;
    case NPK_PYTORCH_HALF_PIXEL: return out > 1 ? ((float)x + 0.5f) * scale - 0.5f : 0.0f;
    case NPK_TF_HALF_PIXEL_FOR_NN: return ((float)x + 0.5f) * scale;
    default: return ((float)x + 0.5f) * scale - 0.5f;
    }
}

static int32_t npk__clampi(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

static int32_t npk__nearest(int32_t mode, float x, int32_t in)
{
    float r;
    switch (mode) {
    case NPK_ROUND_PREFER_CEIL: r = floorf(x + 0.5f); break;
    case NPK_FLOOR: r = floorf(x); break;
    case NPK_CEIL: r = ceilf(x); break;
    case NPK_ROUND_HALF_EVEN: {
        const float f = floorf(x), d = x - f;
        r = d > 0.5f ? f + 1.0f : (d < 0.5f ? f : (fmodf(f, 2.0f) == 0.0f ? f : f + 1.0f));
        break;
    }
    default: r = ceilf(x - 0.5f); break;
    }
    if (r < 0.0f) {
        return 0;
    }
    return r > (float)(in - 1) ? in - 1 : (int32_t)r;
}

int32_t npk_resize2d(const npk_tensor *in, const npk_tensor *out, const npk_resize2d_params *p)
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
    if ((p->method != NPK_NEAREST && p->method != NPK_BILINEAR) || p->coord_mode < NPK_HALF_PIXEL ||
        p->coord_mode > NPK_TF_HALF_PIXEL_FOR_NN || p->nearest_mode < NPK_ROUND_PREFER_FLOOR || p->nearest_mode > NPK_ROUND_HALF_EVEN) {
        return NPK_ERR_PARAM;
    }
    const int32_t H = vi.shape[2], W = vi.shape[3], OH = vo.shape[2], OW = vo.shape[3];
    if ((H == 0 || W == 0) && vo.numel > 0) {
        return NPK_ERR_SHAPE;
    }
    for (int32_t n = 0; n < vo.shape[0]; ++n) {
        for (int32_t c = 0; c < vo.shape[1]; ++c) {
            const int32_t ib = n * vi.stride[0] + npk__coff(&vi, c);
            for (int32_t oh = 0; oh < OH; ++oh) {
                const float y = npk__src_coord(p->coord_mode, oh, H, OH);
                for (int32_t ow = 0; ow < OW; ++ow) {
                    const float x = npk__src_coord(p->coord_mode, ow, W, OW);
                    const int32_t ooff = n * vo.stride[0] + npk__coff(&vo, c) + oh * vo.stride[2] + ow * vo.stride[3];
                    if (p->method == NPK_NEAREST) {
                        int32_t iy = npk__nearest(p->nearest_mode, y, H), ix = npk__nearest(p->nearest_mode, x, W);
                        npk__xfer(&vi, ib + iy * vi.stride[2] + ix * vi.stride[3], &vo, ooff);
                        continue;
                    }
                    const float fy = floorf(y), fx = floorf(x);
                    const float ly = y - fy, lx = x - fx;
                    const int32_t y0 = npk__clampi((int32_t)fy, 0, H - 1), y1 = npk__clampi((int32_t)fy + 1, 0, H - 1);
                    const int32_t x0 = npk__clampi((int32_t)fx, 0, W - 1), x1 = npk__clampi((int32_t)fx + 1, 0, W - 1);
                    const float p00 = npk__load(&vi, ib + y0 * vi.stride[2] + x0 * vi.stride[3]);
                    const float p01 = npk__load(&vi, ib + y0 * vi.stride[2] + x1 * vi.stride[3]);
                    const float p10 = npk__load(&vi, ib + y1 * vi.stride[2] + x0 * vi.stride[3]);
                    const float p11 = npk__load(&vi, ib + y1 * vi.stride[2] + x1 * vi.stride[3]);
                    const float top = p00 + (p01 - p00) * lx;
                    const float bot = p10 + (p11 - p10) * lx;
                    npk__store(&vo, ooff, top + (bot - top) * ly);
                }
            }
        }
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}
