/* npk_ref_norm.c -- softmax, log_softmax, layer_norm, batch_norm, group_norm (float compute, double sums). */
#include "npk_ref_internal.h"

static int32_t npk__softmax(const npk_tensor *in, const npk_tensor *out, int32_t axis, int log_form)
{
    npk_view vi, vo;
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (!npk__same_shape(&vi, &vo)) {
        return NPK_ERR_SHAPE;
    }
    if (vi.rank == 0) {
        return NPK_ERR_SHAPE;
    }
    int32_t ax;
    NPK_TRY(npk__axis(axis, vi.rank, &ax));
    int32_t rshape[NPK_MAX_RANK];
    for (int32_t d = 0; d < vi.rank; ++d) {
        rshape[d] = d == ax ? 1 : vi.shape[d];
    }
    const int32_t L = vi.shape[ax];
    int32_t idx[NPK_MAX_RANK] = {0};
    if (vi.numel > 0) {
        do {
            float mx = -INFINITY;
            for (int32_t i = 0; i < L; ++i) {
                idx[ax] = i;
                float x = npk__load(&vi, npk__off(&vi, idx));
                mx = (x > mx || x != x) ? x : mx;
            }
            double sum = 0.0;
            for (int32_t i = 0; i < L; ++i) {
                idx[ax] = i;
                sum += (double)expf(npk__load(&vi, npk__off(&vi, idx)) - mx);
            }
            for (int32_t i = 0; i < L; ++i) {
                idx[ax] = i;
                float x = npk__load(&vi, npk__off(&vi, idx)) - mx;
                float y = log_form ? (float)((double)x - log(sum)) : (float)((double)expf(x) / sum);
                npk__store(&vo, npk__off(&vo, idx), y);
            }
            idx[ax] = 0;
        } while (npk__next(idx, rshape, vi.rank));
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}

int32_t npk_softmax(const npk_tensor *in, const npk_tensor *out, int32_t axis) { return npk__softmax(in, out, axis, 0); }
int32_t npk_log_softmax(const npk_tensor *in, const npk_tensor *out, int32_t axis) { return npk__softmax(in, out, axis, 1); }

int32_t npk_layer_norm(const npk_tensor *in, const npk_tensor *out, const npk_layer_norm_params *p)
{
    npk_view vi, vo;
    if (p == NULL) {
        return NPK_ERR_NULL;
    }
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (!npk__same_shape(&vi, &vo)) {
        return NPK_ERR_SHAPE;
    }
    if (p->num_axes < 1 || p->num_axes > vi.rank || !(p->eps >= 0.0f)) {
        return NPK_ERR_PARAM;
    }
    const int32_t r = vi.rank, k = p->num_axes;
    int32_t oshape[NPK_MAX_RANK], ishape[NPK_MAX_RANK];
    int32_t inner = 1;
    for (int32_t d = 0; d < r; ++d) {
        oshape[d] = d < r - k ? vi.shape[d] : 1;
        ishape[d] = d < r - k ? 1 : vi.shape[d];
        inner *= ishape[d];
    }
    if (vi.numel == 0) {
        return NPK_OK;
    }
    int32_t oidx[NPK_MAX_RANK] = {0};
    do {
        int32_t iidx[NPK_MAX_RANK] = {0}, idx[NPK_MAX_RANK];
        double sum = 0.0, sq = 0.0;
        do {
            for (int32_t d = 0; d < r; ++d) {
                idx[d] = oidx[d] + iidx[d];
            }
            sum += (double)npk__load(&vi, npk__off(&vi, idx));
        } while (npk__next(iidx, ishape, r));
        const double mean = sum / (double)inner;
        do {
            for (int32_t d = 0; d < r; ++d) {
                idx[d] = oidx[d] + iidx[d];
            }
            double dx = (double)npk__load(&vi, npk__off(&vi, idx)) - mean;
            sq += dx * dx;
        } while (npk__next(iidx, ishape, r));
        const double inv = 1.0 / sqrt(sq / (double)inner + (double)p->eps);
        int32_t j = 0;
        do {
            for (int32_t d = 0; d < r; ++d) {
                idx[d] = oidx[d] + iidx[d];
            }
            double y = ((double)npk__load(&vi, npk__off(&vi, idx)) - mean) * inv;
            y = y * (p->gamma ? (double)p->gamma[j] : 1.0) + (p->beta ? (double)p->beta[j] : 0.0);
            npk__store(&vo, npk__off(&vo, idx), (float)y);
            ++j;
        } while (npk__next(iidx, ishape, r));
    } while (npk__next(oidx, oshape, r));
    npk__fill_pad(&vo);
    return NPK_OK;
}

int32_t npk_batch_norm(const npk_tensor *in, const npk_tensor *out, const npk_batch_norm_params *p)
{
    npk_view vi, vo;
    if (p == NULL) {
        return NPK_ERR_NULL;
    }
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (!npk__same_shape(&vi, &vo)) {
        return NPK_ERR_SHAPE;
    }
    if (p->mean == NULL || p->var == NULL) {
        return NPK_ERR_NULL;
    }
    int32_t ax;
    NPK_TRY(npk__axis(p->axis, vi.rank, &ax));
    if (!(p->eps >= 0.0f)) {
        return NPK_ERR_PARAM;
    }
    int32_t idx[NPK_MAX_RANK] = {0};
    if (vi.numel > 0) {
        do {
            const int32_t c = idx[ax];
            double y = ((double)npk__load(&vi, npk__off(&vi, idx)) - (double)p->mean[c]) /
                       sqrt((double)p->var[c] + (double)p->eps);
            y = y * (p->gamma ? (double)p->gamma[c] : 1.0) + (p->beta ? (double)p->beta[c] : 0.0);
            npk__store(&vo, npk__off(&vo, idx), (float)y);
        } while (npk__next(idx, vi.shape, vi.rank));
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}

int32_t npk_group_norm(const npk_tensor *in, const npk_tensor *out, const npk_group_norm_params *p)
{
    npk_view vi, vo;
    if (p == NULL) {
        return NPK_ERR_NULL;
    }
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (!npk__same_shape(&vi, &vo)) {
        return NPK_ERR_SHAPE;
    }
    if (vi.rank < 2) {
        return NPK_ERR_SHAPE;
    }
    const int32_t r = vi.rank, channels = vi.shape[1], groups = p->num_groups;
    if (groups < 1 || channels % groups != 0 || !(p->eps >= 0.0f)) {
        return NPK_ERR_PARAM;
    }
    if (vi.numel == 0) {
        return NPK_OK;
    }
    const int32_t per = channels / groups;
    int32_t gshape[NPK_MAX_RANK];  /* one group of one sample: its channels and every later axis */
    int32_t count = 1;
    for (int32_t d = 0; d < r; ++d) {
        gshape[d] = d == 0 ? 1 : d == 1 ? per : vi.shape[d];
        count *= gshape[d];
    }
    for (int32_t n = 0; n < vi.shape[0]; ++n) {
        for (int32_t g = 0; g < groups; ++g) {
            int32_t gidx[NPK_MAX_RANK] = {0}, idx[NPK_MAX_RANK];
            double sum = 0.0, sq = 0.0;
            do {
                for (int32_t d = 0; d < r; ++d) {
                    idx[d] = gidx[d];
                }
                idx[0] = n;
                idx[1] = g * per + gidx[1];
                sum += (double)npk__load(&vi, npk__off(&vi, idx));
            } while (npk__next(gidx, gshape, r));
            const double mean = sum / (double)count;
            do {
                for (int32_t d = 0; d < r; ++d) {
                    idx[d] = gidx[d];
                }
                idx[0] = n;
                idx[1] = g * per + gidx[1];
                double dx = (double)npk__load(&vi, npk__off(&vi, idx)) - mean;
                sq += dx * dx;
            } while (npk__next(gidx, gshape, r));
            const double inv = 1.0 / sqrt(sq / (double)count + (double)p->eps);
            do {
                for (int32_t d = 0; d < r; ++d) {
                    idx[d] = gidx[d];
                }
                idx[0] = n;
                const int32_t c = g * per + gidx[1];
                idx[1] = c;
                double y = ((double)npk__load(&vi, npk__off(&vi, idx)) - mean) * inv;
                y = y * (p->gamma ? (double)p->gamma[c] : 1.0) + (p->beta ? (double)p->beta[c] : 0.0);
                npk__store(&vo, npk__off(&vo, idx), (float)y);
            } while (npk__next(gidx, gshape, r));
        }
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}
