/* npk_ref_sort.c -- topk, sort, argsort (heap based, no scratch memory) and ONNX NMS. */
#include "npk_ref_internal.h"

/* ---- ranking rows along an axis ------------------------------------------------------------ */

/* Heap slots live along the axis of `slot` (at row `srow`).  With by_index they hold indices
 * into the row `vrow` of `val` and rank by (value, index); otherwise they are the values. */
typedef struct {
    const npk_view *val;
    const int32_t *vrow;
    const npk_view *slot;
    const int32_t *srow;
    int32_t ax;
    int descending;
    int by_index;
} npk__rank;

static int32_t npk__at(const npk_view *v, const int32_t *row, int32_t ax, int32_t j)
{
    int32_t idx[NPK_MAX_RANK];
    for (int32_t d = 0; d < v->rank; ++d) {
        idx[d] = row[d];
    }
    idx[ax] = j;
    return npk__off(v, idx);
}

/* sign of (x - y) with NaN above every number */
static int npk__cmp_off(const npk_view *v, int32_t ox, int32_t oy)
{
    if (!npk__is_float(v->dtype)) {
        int64_t a = npk__load_int(v, ox), b = npk__load_int(v, oy);
        return (a > b) - (a < b);
    }
    float a = npk__load(v, ox), b = npk__load(v, oy);
    int na = a != a, nb = b != b;
    if (na || nb) {
        return na - nb;
    }
    return (a > b) - (a < b);
}

/* does element i (value position / index) come before element j in the requested order? */
static int npk__before_idx(const npk__rank *r, int64_t i, int64_t j)
{
    int c = npk__cmp_off(r->val, npk__at(r->val, r->vrow, r->ax, (int32_t)i), npk__at(r->val, r->vrow, r->ax, (int32_t)j));
    if (r->descending) {
        c = -c;
    }
    return c < 0 || (c == 0 && i < j);
}

static int npk__less(const npk__rank *r, int32_t a, int32_t b)
{
    int32_t oa = npk__at(r->slot, r->srow, r->ax, a), ob = npk__at(r->slot, r->srow, r->ax, b);
    if (r->by_index) {
        return npk__before_idx(r, npk__load_int(r->slot, oa), npk__load_int(r->slot, ob));
    }
    int c = npk__cmp_off(r->slot, oa, ob);
    return r->descending ? c > 0 : c < 0;
}

static void npk__swap(const npk__rank *r, int32_t a, int32_t b)
{
    int32_t oa = npk__at(r->slot, r->srow, r->ax, a), ob = npk__at(r->slot, r->srow, r->ax, b);
    int32_t es = npk__elem_size(r->slot->dtype);
    char *base = (char *)r->slot->data, tmp[8];
    memcpy(tmp, base + (size_t)oa * es, (size_t)es);
    memcpy(base + (size_t)oa * es, base + (size_t)ob * es, (size_t)es);
    memcpy(base + (size_t)ob * es, tmp, (size_t)es);
}

static void npk__sift(const npk__rank *r, int32_t root, int32_t n)
{
    for (;;) {
        int32_t c = 2 * root + 1;
        if (c >= n) {
            return;
        }
        if (c + 1 < n && npk__less(r, c, c + 1)) {
            ++c;
        }
        if (!npk__less(r, root, c)) {
            return;
        }
        npk__swap(r, root, c);
        root = c;
    }
}

static void npk__heapsort(const npk__rank *r, int32_t n)
{
    for (int32_t i = n / 2 - 1; i >= 0; --i) {
        npk__sift(r, i, n);
    }
    for (int32_t e = n - 1; e > 0; --e) {
        npk__swap(r, 0, e);
        npk__sift(r, 0, e);
    }
}

/* shape of the rows: the axis collapsed to 1 */
static void npk__row_shape(const npk_view *v, int32_t ax, int32_t *rshape)
{
    for (int32_t d = 0; d < v->rank; ++d) {
        rshape[d] = d == ax ? 1 : v->shape[d];
    }
}

static int32_t npk__sort(const npk_tensor *in, const npk_tensor *out, int32_t axis, int32_t descending, int by_index)
{
    npk_view vi, vo;
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (!npk__same_shape(&vi, &vo) || vi.rank == 0) {
        return NPK_ERR_SHAPE;
    }
    if (by_index && !npk__is_index(vo.dtype)) {
        return NPK_ERR_DTYPE;
    }
    int32_t ax, rshape[NPK_MAX_RANK], row[NPK_MAX_RANK] = {0};
    NPK_TRY(npk__axis(axis, vi.rank, &ax));
    npk__row_shape(&vi, ax, rshape);
    const int32_t L = vi.shape[ax];
    npk__rank r = {&vi, row, &vo, row, ax, descending != 0, by_index};
    if (vi.numel == 0) {
        return NPK_OK;
    }
    do {
        for (int32_t j = 0; j < L; ++j) {
            if (by_index) {
                npk__store_int(&vo, npk__at(&vo, row, ax, j), j);
            } else {
                npk__xfer(&vi, npk__at(&vi, row, ax, j), &vo, npk__at(&vo, row, ax, j));
            }
        }
        npk__heapsort(&r, L);
    } while (npk__next(row, rshape, vi.rank));
    npk__fill_pad(&vo);
    return NPK_OK;
}

int32_t npk_sort(const npk_tensor *in, const npk_tensor *out, int32_t axis, int32_t descending)
{
    return npk__sort(in, out, axis, descending, 0);
}

int32_t npk_argsort(const npk_tensor *in, const npk_tensor *out, int32_t axis, int32_t descending)
{
    return npk__sort(in, out, axis, descending, 1);
}

int32_t npk_topk(const npk_tensor *in, const npk_tensor *values, const npk_tensor *indices, const npk_topk_params *p)
{
    npk_view vi, vv, vx;
    if (p == NULL || indices == NULL) {
        return NPK_ERR_NULL;
    }
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(indices, &vx));
    if (values != NULL) {
        NPK_TRY(npk__view(values, &vv));
        if (!npk__same_shape(&vv, &vx)) {
            return NPK_ERR_SHAPE;
        }
    }
    if (!npk__is_index(vx.dtype)) {
        return NPK_ERR_DTYPE;
    }
    if (vi.rank == 0 || vx.rank != vi.rank) {
        return NPK_ERR_SHAPE;
    }
    int32_t ax, rshape[NPK_MAX_RANK], row[NPK_MAX_RANK] = {0};
    NPK_TRY(npk__axis(p->axis, vi.rank, &ax));
    for (int32_t d = 0; d < vi.rank; ++d) {
        if (d != ax && vx.shape[d] != vi.shape[d]) {
            return NPK_ERR_SHAPE;
        }
    }
    const int32_t L = vi.shape[ax], k = vx.shape[ax];
    if (k > L) {
        return NPK_ERR_SHAPE;
    }
    npk__row_shape(&vi, ax, rshape);
    npk__rank r = {&vi, row, &vx, row, ax, p->largest != 0, 1};
    if (vx.numel == 0) {
        return NPK_OK;
    }
    do {
        /* a heap of the k best so far whose root is the last of them in the requested order */
        for (int32_t j = 0; j < k; ++j) {
            npk__store_int(&vx, npk__at(&vx, row, ax, j), j);
        }
        for (int32_t i = k / 2 - 1; i >= 0; --i) {
            npk__sift(&r, i, k);
        }
        for (int32_t j = k; j < L; ++j) {
            int32_t root = npk__at(&vx, row, ax, 0);
            if (npk__before_idx(&r, j, npk__load_int(&vx, root))) {
                npk__store_int(&vx, root, j);
                npk__sift(&r, 0, k);
            }
        }
        for (int32_t e = k - 1; e > 0; --e) {
            npk__swap(&r, 0, e);
            npk__sift(&r, 0, e);
        }
        if (values != NULL) {
            for (int32_t j = 0; j < k; ++j) {
                int32_t src = (int32_t)npk__load_int(&vx, npk__at(&vx, row, ax, j));
                npk__xfer(&vi, npk__at(&vi, row, ax, src), &vv, npk__at(&vv, row, ax, j));
            }
        }
    } while (npk__next(row, rshape, vi.rank));
    npk__fill_pad(&vx);
    if (values != NULL) {
        npk__fill_pad(&vv);
    }
    return NPK_OK;
}

/* ---- non-maximum suppression --------------------------------------------------------------- */

typedef struct {
    float xmin, ymin, xmax, ymax;
} npk__box;

static npk__box npk__box_at(const npk_view *v, int32_t b, int32_t i, int32_t center)
{
    int32_t base = b * v->stride[0] + i * v->stride[1];
    float c0 = npk__load(v, base), c1 = npk__load(v, base + v->stride[2]);
    float c2 = npk__load(v, base + 2 * v->stride[2]), c3 = npk__load(v, base + 3 * v->stride[2]);
    npk__box r;
    if (center) { /* [x_center, y_center, width, height] */
        r.xmin = c0 - c2 / 2.0f;
        r.xmax = c0 + c2 / 2.0f;
        r.ymin = c1 - c3 / 2.0f;
        r.ymax = c1 + c3 / 2.0f;
    } else { /* [y1, x1, y2, x2], any two opposite corners */
        r.ymin = c0 < c2 ? c0 : c2;
        r.ymax = c0 < c2 ? c2 : c0;
        r.xmin = c1 < c3 ? c1 : c3;
        r.xmax = c1 < c3 ? c3 : c1;
    }
    return r;
}

/* IoU(a, b) > threshold, with empty intersections and degenerate boxes never suppressing */
static int npk__suppresses(npk__box a, npk__box b, float threshold)
{
    float ix0 = a.xmin > b.xmin ? a.xmin : b.xmin, ix1 = a.xmax < b.xmax ? a.xmax : b.xmax;
    float iy0 = a.ymin > b.ymin ? a.ymin : b.ymin, iy1 = a.ymax < b.ymax ? a.ymax : b.ymax;
    if (ix1 <= ix0 || iy1 <= iy0) {
        return 0;
    }
    float inter = (ix1 - ix0) * (iy1 - iy0);
    float area_a = (a.xmax - a.xmin) * (a.ymax - a.ymin), area_b = (b.xmax - b.xmin) * (b.ymax - b.ymin);
    float uni = area_a + area_b - inter;
    if (inter <= 0.0f || area_a <= 0.0f || area_b <= 0.0f || uni <= 0.0f) {
        return 0;
    }
    return inter / uni > threshold;
}

int32_t npk_nms_workspace_size(int32_t num_boxes)
{
    return num_boxes > 0 ? num_boxes * (int32_t)sizeof(int32_t) : 0;
}

/* is candidate (s, i) after (ps, pi) in the order score desc, index asc? */
static int npk__after(float s, int32_t i, float ps, int32_t pi) { return s < ps || (s == ps && i > pi); }

/* ws[a] comes before ws[b] (score desc, index asc) */
static int npk__ws_less(const int32_t *ws, int32_t a, int32_t b, const npk_view *vs, int32_t sbase)
{
    float sa = npk__load(vs, sbase + ws[a] * vs->stride[2]), sb = npk__load(vs, sbase + ws[b] * vs->stride[2]);
    return npk__after(sb, ws[b], sa, ws[a]);
}

static void npk__ws_sift(int32_t *ws, int32_t root, int32_t n, const npk_view *vs, int32_t sbase)
{
    for (;;) {
        int32_t c = 2 * root + 1;
        if (c >= n) {
            return;
        }
        if (c + 1 < n && npk__ws_less(ws, c, c + 1, vs, sbase)) {
            ++c;
        }
        if (!npk__ws_less(ws, root, c, vs, sbase)) {
            return;
        }
        int32_t t = ws[root];
        ws[root] = ws[c];
        ws[c] = t;
        root = c;
    }
}

/* heapsort the candidate indices ws[0..m) into score-descending, index-ascending order */
static void npk__ws_sort(int32_t *ws, int32_t m, const npk_view *vs, int32_t sbase)
{
    for (int32_t i = m / 2 - 1; i >= 0; --i) {
        npk__ws_sift(ws, i, m, vs, sbase);
    }
    for (int32_t e = m - 1; e > 0; --e) {
        int32_t t = ws[0];
        ws[0] = ws[e];
        ws[e] = t;
        npk__ws_sift(ws, 0, e, vs, sbase);
    }
}

int32_t npk_nms(const npk_tensor *boxes, const npk_tensor *scores, const npk_tensor *selected, int64_t *num_selected, const npk_nms_params *p)
{
    npk_view vb, vs, vx;
    if (p == NULL || num_selected == NULL) {
        return NPK_ERR_NULL;
    }
    *num_selected = 0;
    NPK_TRY(npk__view(boxes, &vb));
    NPK_TRY(npk__view(scores, &vs));
    NPK_TRY(npk__view(selected, &vx));
    if (vb.rank != 3 || vs.rank != 3 || vx.rank != 2 || vb.shape[2] != 4 || vx.shape[1] != 3 ||
        vs.shape[0] != vb.shape[0] || vs.shape[2] != vb.shape[1]) {
        return NPK_ERR_SHAPE;
    }
    if (!npk__is_index(vx.dtype)) {
        return NPK_ERR_DTYPE;
    }
    const int32_t B = vb.shape[0], N = vb.shape[1], C = vs.shape[1], cap = vx.shape[0];
    const int64_t max_out = p->max_output_boxes_per_class;
    const int center = p->center_point_box != 0;
    int32_t *ws = (int32_t *)p->workspace;
    int64_t count = 0;
    for (int32_t b = 0; b < B; ++b) {
        for (int32_t c = 0; c < C; ++c) {
            const int32_t sbase = b * vs.stride[0] + c * vs.stride[1];
            const int64_t first = count; /* rows of this (b, c) start here */
            int32_t m = 0, pos = 0, prev_i = -1;
            float prev_s = INFINITY;
            if (max_out <= 0) {
                continue;
            }
            if (ws != NULL) { /* candidates above the threshold, best first */
                for (int32_t i = 0; i < N; ++i) {
                    if (npk__load(&vs, sbase + i * vs.stride[2]) > p->score_threshold) {
                        ws[m++] = i;
                    }
                }
                npk__ws_sort(ws, m, &vs, sbase);
            }
            for (;;) {
                int32_t i = -1;
                float s = 0.0f;
                if (ws != NULL) {
                    if (pos >= m) break;
                    i = ws[pos++];
                    s = npk__load(&vs, sbase + i * vs.stride[2]);
                } else { /* the next candidate in order after (prev_s, prev_i) */
                    for (int32_t j = 0; j < N; ++j) {
                        float sj = npk__load(&vs, sbase + j * vs.stride[2]);
                        if (!(sj > p->score_threshold) || !npk__after(sj, j, prev_s, prev_i)) continue;
                        if (i < 0 || npk__after(s, i, sj, j)) { i = j; s = sj; }
                    }
                    if (i < 0) break;
                    prev_s = s;
                    prev_i = i;
                }
                npk__box cand = npk__box_at(&vb, b, i, center);
                int keep = 1;
                for (int64_t r = first; r < count && keep; ++r) {
                    int32_t kept = (int32_t)npk__load_int(&vx, (int32_t)r * vx.stride[0] + 2 * vx.stride[1]);
                    keep = !npk__suppresses(npk__box_at(&vb, b, kept, center), cand, p->iou_threshold);
                }
                if (!keep) continue;
                if (count >= cap) {
                    *num_selected = count;
                    return NPK_ERR_CAPACITY;
                }
                int32_t ro = (int32_t)count * vx.stride[0];
                npk__store_int(&vx, ro, b);
                npk__store_int(&vx, ro + vx.stride[1], c);
                npk__store_int(&vx, ro + 2 * vx.stride[1], i);
                ++count;
                if (count - first >= max_out) break;
            }
        }
    }
    *num_selected = count;
    return NPK_OK;
}
