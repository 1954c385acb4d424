/* npk_ref_matmul.c -- matmul / dense with numpy batch broadcasting. */
#include "npk_ref_internal.h"

/* Matrix geometry of one operand: rows x cols with element strides, plus its batch rank. */
typedef struct {
    int32_t rows, cols;
    int32_t srow, scol;
    int32_t batch;
} npk__mat;

static void npk__mat_of(const npk_view *v, int transpose, npk__mat *m)
{
    /* logical last two dims (rows, cols); a rank-1 operand is one row (a) / one column (b) */
    if (v->rank >= 2) {
        m->rows = v->shape[v->rank - 2];
        m->cols = v->shape[v->rank - 1];
        m->srow = v->stride[v->rank - 2];
        m->scol = v->stride[v->rank - 1];
        m->batch = v->rank - 2;
    } else {
        m->rows = 1;
        m->cols = v->shape[0];
        m->srow = 0;
        m->scol = v->stride[0];
        m->batch = 0;
    }
    if (transpose) { /* swap so that rows x cols is the logical (K x N) of b */
        int32_t t = m->rows;
        m->rows = m->cols;
        m->cols = t;
        t = m->srow;
        m->srow = m->scol;
        m->scol = t;
    }
}

/* offset of batch index `bidx` (rank bo, broadcast) with the matrix dims at 0 */
static int32_t npk__batch_off(const npk_view *v, int32_t batch, const int32_t *bidx, int32_t bo)
{
    int32_t idx[NPK_MAX_RANK] = {0};
    for (int32_t d = 0; d < batch; ++d) {
        idx[d] = v->shape[d] == 1 ? 0 : bidx[d + bo - batch];
    }
    return npk__off(v, idx);
}

int32_t npk_matmul(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out, const npk_matmul_params *p)
{
    npk_view va, vb, vo;
    if (p == NULL || b == NULL) {
        return NPK_ERR_NULL;
    }
    NPK_TRY(npk__view(a, &va));
    NPK_TRY(npk__view(out, &vo));
    if (p->b_const) {
        npk_tensor bw = *b; /* weights: scale / zero are not used */
        bw.scale = 1.0f;
        bw.zero = 0;
        if (b->layout != NPK_ROW_MAJOR) {
            return NPK_ERR_LAYOUT;
        }
        if (b->dtype == NPK_S4 || b->dtype == NPK_S2) {
            bw.dtype = NPK_S8; /* packed: addressed by flat index below */
        }
        NPK_TRY(npk__view(&bw, &vb));
        vb.dtype = b->dtype;
    } else {
        NPK_TRY(npk__view(b, &vb));
    }
    if (va.rank < 1 || vb.rank < 1) {
        return NPK_ERR_SHAPE;
    }
    npk__mat ma, mb;
    npk__mat_of(&va, 0, &ma);
    npk__mat_of(&vb, p->transpose_b && vb.rank >= 2, &mb);
    if (vb.rank == 1) { /* a vector b is one column of K */
        mb.rows = vb.shape[0];
        mb.cols = 1;
        mb.srow = vb.stride[0];
        mb.scol = 0;
    }
    const int32_t M = ma.rows, K = ma.cols, N = mb.cols;
    if (mb.rows != K) {
        return NPK_ERR_SHAPE;
    }
    const int32_t bo = ma.batch > mb.batch ? ma.batch : mb.batch;
    const int32_t orank = bo + (va.rank >= 2) + (vb.rank >= 2);
    if (vo.rank != orank) {
        return NPK_ERR_SHAPE;
    }
    int32_t bshape[NPK_MAX_RANK] = {0};
    for (int32_t i = 0; i < bo; ++i) {
        int32_t ia = i - (bo - ma.batch), ib = i - (bo - mb.batch);
        int32_t da = ia >= 0 ? va.shape[ia] : 1, db = ib >= 0 ? vb.shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            return NPK_ERR_SHAPE;
        }
        bshape[i] = da == 1 ? db : da;
        if (vo.shape[i] != bshape[i]) {
            return NPK_ERR_SHAPE;
        }
    }
    if ((va.rank >= 2 && vo.shape[bo] != M) || (vb.rank >= 2 && vo.shape[orank - 1] != N)) {
        return NPK_ERR_SHAPE;
    }
    const int32_t som = va.rank >= 2 ? vo.stride[bo] : 0;
    const int32_t son = vb.rank >= 2 ? vo.stride[orank - 1] : 0;

    const int is_float = npk__is_float(va.dtype);
    if (is_float) {
        if (!npk__is_float(vb.dtype) || !npk__is_float(vo.dtype)) {
            return NPK_ERR_DTYPE;
        }
    } else {
        if (!npk__is_qact(va.dtype) || !(p->b_const ? npk__is_quant(vb.dtype) : npk__is_qact(vb.dtype)) || !npk__is_qact(vo.dtype)) {
            return NPK_ERR_DTYPE;
        }
        if (p->multiplier == NULL || p->shift == NULL) {
            return NPK_ERR_NULL;
        }
        if (p->bias_shift < 0 || p->bias_shift > NPK__BIAS_SHIFT_MAX ||
            (p->bias_shift > 0 && (va.dtype == NPK_S16 || vb.dtype == NPK_S16 || K >= NPK__BIAS_SHIFT_TAPS))) {
            return NPK_ERR_PARAM;
        }
        for (int32_t n = 0; n < (p->b_const ? N : 1); ++n) {
            if (p->multiplier[n] < 0) {
                return NPK_ERR_QUANT;
            }
        }
    }
    const int wide = va.dtype == NPK_S16 || vb.dtype == NPK_S16;
    const int32_t zb = p->b_const ? 0 : vb.zero;
    const int has_act = npk__has_act(p->act_min, p->act_max);
    int64_t qlo = 0, qhi = 0;
    if (!is_float) {
        npk__act_bounds(&vo, p->act_min, p->act_max, &qlo, &qhi);
    }
    if (vo.numel == 0) {
        return NPK_OK;
    }
    int32_t bidx[NPK_MAX_RANK] = {0};
    do {
        const int32_t abase = npk__batch_off(&va, ma.batch, bidx, bo);
        const int32_t bbase = npk__batch_off(&vb, mb.batch, bidx, bo);
        const int32_t obase = npk__batch_off(&vo, bo, bidx, bo);
        for (int32_t m = 0; m < M; ++m) {
            for (int32_t n = 0; n < N; ++n) {
                double facc = 0.0;
                int64_t iacc = 0;
                for (int32_t k = 0; k < K; ++k) {
                    const int32_t aoff = abase + m * ma.srow + k * ma.scol;
                    const int32_t boff = bbase + k * mb.srow + n * mb.scol;
                    if (is_float) {
                        float bv = p->b_const ? npk__weight_f(vb.data, vb.dtype, boff) : npk__load(&vb, boff);
                        facc += (double)npk__load(&va, aoff) * (double)bv;
                    } else {
                        int64_t bq = p->b_const ? npk__weight_q(vb.data, vb.dtype, boff) : npk__load_int(&vb, boff);
                        iacc += (npk__load_int(&va, aoff) - va.zero) * (bq - zb);
                    }
                }
                const int32_t ooff = obase + m * som + n * son;
                if (is_float) {
                    float y = (float)(facc + (p->bias ? (double)((const float *)p->bias)[n] : 0.0));
                    if (has_act) {
                        y = y < p->act_min ? p->act_min : y;
                        y = y > p->act_max ? p->act_max : y;
                    }
                    npk__store(&vo, ooff, y);
                } else {
                    iacc *= (int64_t)1 << p->bias_shift; /* exact: checked above */
                    if (p->bias) {
                        iacc += wide ? ((const int64_t *)p->bias)[n] : (int64_t)((const int32_t *)p->bias)[n];
                    }
                    const int32_t qi = p->b_const ? n : 0;
                    int64_t r = npk_apply_multiplier(iacc, p->multiplier[qi], p->shift[qi] - p->bias_shift);
                    npk__store_int(&vo, ooff, npk__clamp_out(r, vo.zero, qlo, qhi));
                }
            }
        }
    } while (npk__next(bidx, bshape, bo));
    npk__fill_pad(&vo);
    return NPK_OK;
}
