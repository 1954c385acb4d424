/* npk_ref_elementwise.c -- broadcasting binary ops and unary activations (float compute). */
#include "npk_ref_internal.h"

/* ---- binary -------------------------------------------------------------------------------- */

static float npk__binop(int32_t op, float x, float y)
{
    switch (op) {
    case NPK_ADD: return x + y;
    case NPK_SUBTRACT: return x - y;
    case NPK_MULTIPLY: return x * y;
    case NPK_MAXIMUM: return (x != x || x > y) ? x : y; /* NaN propagates like numpy */
    case NPK_MINIMUM: return (x != x || x < y) ? x : y;
    default: return x / y;
    }
}

/* Is ``vo`` the broadcast shape of ``va`` and ``vb`` (numpy's rule: dims aligned from the last,
 * each pair equal or one of them 1)? */
static int32_t npk__broadcast_shape(const npk_view *va, const npk_view *vb, const npk_view *vo)
{
    if (vo->rank < va->rank || vo->rank < vb->rank) {
        return NPK_ERR_SHAPE;
    }
    for (int32_t d = 0; d < vo->rank; ++d) {
        int32_t ia = d - (vo->rank - va->rank), ib = d - (vo->rank - vb->rank);
        int32_t da = ia >= 0 ? va->shape[ia] : 1, db = ib >= 0 ? vb->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            return NPK_ERR_SHAPE;
        }
        if (vo->shape[d] != (da == 1 ? db : da)) {
            return NPK_ERR_SHAPE;
        }
    }
    return NPK_OK;
}

int32_t npk_binary(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out, const npk_binary_params *p)
{
    npk_view va, vb, vo;
    if (p == NULL) {
        return NPK_ERR_NULL;
    }
    NPK_TRY(npk__view(a, &va));
    NPK_TRY(npk__view(b, &vb));
    NPK_TRY(npk__view(out, &vo));
    if (p->op < NPK_ADD || p->op > NPK_DIVIDE) {
        return NPK_ERR_PARAM;
    }
    NPK_TRY(npk__broadcast_shape(&va, &vb, &vo));
    const int has_act = npk__has_act(p->act_min, p->act_max);
    int32_t idx[NPK_MAX_RANK] = {0};
    if (vo.numel > 0) {
        do {
            float y = npk__binop(p->op, npk__load(&va, npk__off_bcast(&va, idx, vo.rank)),
                                 npk__load(&vb, npk__off_bcast(&vb, idx, vo.rank)));
            if (has_act) {
                y = y < p->act_min ? p->act_min : y;
                y = y > p->act_max ? p->act_max : y;
            }
            npk__store(&vo, npk__off(&vo, idx), y);
        } while (npk__next(idx, vo.shape, vo.rank));
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}

static int32_t npk__binary_op(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out, int32_t op)
{
    npk_binary_params p;
    p.op = op;
    p.act_min = 0.0f;
    p.act_max = 0.0f;
    return npk_binary(a, b, out, &p);
}

int32_t npk_add(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out) { return npk__binary_op(a, b, out, NPK_ADD); }
int32_t npk_subtract(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out) { return npk__binary_op(a, b, out, NPK_SUBTRACT); }
int32_t npk_multiply(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out) { return npk__binary_op(a, b, out, NPK_MULTIPLY); }
int32_t npk_maximum(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out) { return npk__binary_op(a, b, out, NPK_MAXIMUM); }
int32_t npk_minimum(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out) { return npk__binary_op(a, b, out, NPK_MINIMUM); }
int32_t npk_divide(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out) { return npk__binary_op(a, b, out, NPK_DIVIDE); }

/* ---- the model's own integer arithmetic (wraps) ------------------------------------------- */

static int npk__plain_int(int32_t dtype)
{
    return dtype == NPK_S8 || dtype == NPK_S16 || dtype == NPK_S32 || dtype == NPK_S64 || dtype == NPK_U8;
}

/* u modulo 2^bits of `dtype`, as that dtype's value (two's complement for the signed ones). */
static int64_t npk__wrap(uint64_t u, int32_t dtype)
{
    if (dtype == NPK_U8) {
        return (int64_t)(u & 0xFFu);
    }
    const int bits = dtype == NPK_S8 ? 8 : dtype == NPK_S16 ? 16 : dtype == NPK_S32 ? 32 : 64;
    const uint64_t mask = bits == 64 ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1);
    u &= mask;
    if (u >> (bits - 1)) { /* negative: -(2^bits - u), without a signed overflow */
        return -(int64_t)(~u & mask) - 1;
    }
    return (int64_t)u;
}

static int64_t npk__int_binop(int32_t op, int64_t x, int64_t y, int32_t dtype)
{
    const uint64_t ux = (uint64_t)x, uy = (uint64_t)y; /* unsigned: the wrap-around is defined */
    switch (op) {
    case NPK_ADD: return npk__wrap(ux + uy, dtype);
    case NPK_SUBTRACT: return npk__wrap(ux - uy, dtype);
    case NPK_MULTIPLY: return npk__wrap(ux * uy, dtype);
    case NPK_MAXIMUM: return npk__wrap((uint64_t)(x > y ? x : y), dtype);
    case NPK_MINIMUM: return npk__wrap((uint64_t)(x < y ? x : y), dtype);
    default:
        if (y == 0) {
            return 0;
        }
        if (y == -1) { /* x / -1 = -x, which overflows for the minimum: wraps */
            return npk__wrap((uint64_t)0 - ux, dtype);
        }
        return npk__wrap((uint64_t)(x / y), dtype); /* C truncates toward zero */
    }
}

int32_t npk_binary_int(const npk_tensor *a, const npk_tensor *b, const npk_tensor *out, int32_t op)
{
    npk_view va, vb, vo;
    NPK_TRY(npk__view(a, &va));
    NPK_TRY(npk__view(b, &vb));
    NPK_TRY(npk__view(out, &vo));
    if (!npk__plain_int(va.dtype) || !npk__plain_int(vb.dtype) || !npk__plain_int(vo.dtype)) {
        return NPK_ERR_DTYPE;
    }
    if (op < NPK_ADD || op > NPK_DIVIDE) {
        return NPK_ERR_PARAM;
    }
    NPK_TRY(npk__broadcast_shape(&va, &vb, &vo));
    int32_t idx[NPK_MAX_RANK] = {0};
    if (vo.numel > 0) {
        do {
            int64_t q = npk__int_binop(op, npk__load_int(&va, npk__off_bcast(&va, idx, vo.rank)),
                                       npk__load_int(&vb, npk__off_bcast(&vb, idx, vo.rank)), vo.dtype);
            npk__store_int(&vo, npk__off(&vo, idx), q); /* in range already: stored as it is */
        } while (npk__next(idx, vo.shape, vo.rank));
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}

int32_t npk_unary_int(const npk_tensor *in, const npk_tensor *out, int32_t op, int64_t lo, int64_t hi)
{
    npk_view vi, vo;
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (!npk__plain_int(vi.dtype) || !npk__plain_int(vo.dtype)) {
        return NPK_ERR_DTYPE;
    }
    if (op != NPK_RELU && op != NPK_CLIP && op != NPK_NEGATIVE && op != NPK_ABS) {
        return NPK_ERR_PARAM;
    }
    if (!npk__same_shape(&vi, &vo)) {
        return NPK_ERR_SHAPE;
    }
    int32_t idx[NPK_MAX_RANK] = {0};
    if (vo.numel > 0) {
        do {
            int64_t x = npk__load_int(&vi, npk__off(&vi, idx));
            uint64_t r;
            switch (op) {
            case NPK_RELU: r = (uint64_t)(x > 0 ? x : 0); break;
            case NPK_CLIP: r = (uint64_t)(x < lo ? lo : (x > hi ? hi : x)); break;
            case NPK_NEGATIVE: r = (uint64_t)0 - (uint64_t)x; break;
            default: r = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x; break;
            }
            npk__store_int(&vo, npk__off(&vo, idx), npk__wrap(r, vo.dtype));
        } while (npk__next(idx, vo.shape, vo.rank));
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}

/* ---- unary --------------------------------------------------------------------------------- */

static float npk__unop(const npk_unary_params *p, float x)
{
    switch (p->op) {
    case NPK_RELU: return x > 0.0f ? x : (x != x ? x : 0.0f);
    case NPK_CLIP: return x < p->lo ? p->lo : (x > p->hi ? p->hi : x);
    case NPK_LEAKY_RELU: return x >= 0.0f ? x : p->alpha * x;
    case NPK_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case NPK_TANH: return tanhf(x);
    /* erfc / the logistic form keep full relative precision where 1 + erf / 1 + tanh cancel */
    case NPK_GELU: return 0.5f * x * erfcf(-x * 0.70710678118654752f);
    case NPK_GELU_TANH: return x / (1.0f + expf(-1.5957691216057308f * (x + 0.044715f * x * x * x)));
    case NPK_EXP: return expf(x);
    case NPK_SILU: return x / (1.0f + expf(-x));
    case NPK_HARDSWISH: {
        float r = x + 3.0f;
        r = r < 0.0f ? 0.0f : (r > 6.0f ? 6.0f : r);
        return x * r / 6.0f;
    }
    case NPK_NEGATIVE: return -x;
    case NPK_ABS: return fabsf(x);
    case NPK_SQRT: return sqrtf(x);
    default: return 1.0f / sqrtf(x);
    }
}

int32_t npk_unary(const npk_tensor *in, const npk_tensor *out, const npk_unary_params *p)
{
    npk_view vi, vo;
    if (p == NULL) {
        return NPK_ERR_NULL;
    }
    NPK_TRY(npk__view(in, &vi));
    NPK_TRY(npk__view(out, &vo));
    if (p->op < NPK_RELU || p->op > NPK_RSQRT) {
        return NPK_ERR_PARAM;
    }
    if (!npk__same_shape(&vi, &vo)) {
        return NPK_ERR_SHAPE;
    }
    int32_t idx[NPK_MAX_RANK] = {0};
    if (vo.numel > 0) {
        do {
            npk__store(&vo, npk__off(&vo, idx), npk__unop(p, npk__load(&vi, npk__off(&vi, idx))));
        } while (npk__next(idx, vo.shape, vo.rank));
    }
    npk__fill_pad(&vo);
    return NPK_OK;
}

static int32_t npk__unary_op(const npk_tensor *in, const npk_tensor *out, int32_t op, float alpha, float lo, float hi)
{
    npk_unary_params p;
    p.op = op;
    p.alpha = alpha;
    p.lo = lo;
    p.hi = hi;
    return npk_unary(in, out, &p);
}

int32_t npk_relu(const npk_tensor *in, const npk_tensor *out) { return npk__unary_op(in, out, NPK_RELU, 0, 0, 0); }
int32_t npk_clip(const npk_tensor *in, const npk_tensor *out, float lo, float hi) { return npk__unary_op(in, out, NPK_CLIP, 0, lo, hi); }
int32_t npk_leaky_relu(const npk_tensor *in, const npk_tensor *out, float alpha) { return npk__unary_op(in, out, NPK_LEAKY_RELU, alpha, 0, 0); }
int32_t npk_sigmoid(const npk_tensor *in, const npk_tensor *out) { return npk__unary_op(in, out, NPK_SIGMOID, 0, 0, 0); }
int32_t npk_tanh(const npk_tensor *in, const npk_tensor *out) { return npk__unary_op(in, out, NPK_TANH, 0, 0, 0); }
int32_t npk_gelu(const npk_tensor *in, const npk_tensor *out) { return npk__unary_op(in, out, NPK_GELU, 0, 0, 0); }
int32_t npk_gelu_tanh(const npk_tensor *in, const npk_tensor *out) { return npk__unary_op(in, out, NPK_GELU_TANH, 0, 0, 0); }
int32_t npk_exp(const npk_tensor *in, const npk_tensor *out) { return npk__unary_op(in, out, NPK_EXP, 0, 0, 0); }
int32_t npk_silu(const npk_tensor *in, const npk_tensor *out) { return npk__unary_op(in, out, NPK_SILU, 0, 0, 0); }
int32_t npk_hardswish(const npk_tensor *in, const npk_tensor *out) { return npk__unary_op(in, out, NPK_HARDSWISH, 0, 0, 0); }
int32_t npk_negative(const npk_tensor *in, const npk_tensor *out) { return npk__unary_op(in, out, NPK_NEGATIVE, 0, 0, 0); }
int32_t npk_abs(const npk_tensor *in, const npk_tensor *out) { return npk__unary_op(in, out, NPK_ABS, 0, 0, 0); }
int32_t npk_sqrt(const npk_tensor *in, const npk_tensor *out) { return npk__unary_op(in, out, NPK_SQRT, 0, 0, 0); }
int32_t npk_rsqrt(const npk_tensor *in, const npk_tensor *out) { return npk__unary_op(in, out, NPK_RSQRT, 0, 0, 0); }
