/* A small program over the kernel libraries, built natively and for the cross targets by
 * tests/test_kernels_build.py: the same inputs (from a fixed LCG) through integer and float
 * kernels, all results printed, so that the outputs of two targets can be compared line by line.
 * Lines starting with "i " hold integer results (must be bit-identical), "f " float results. */
#include <stdio.h>
#include <string.h>

#include "arm_nnfunctions.h"
#include "nvdla.h"
#include "xi_dsp.h"

static uint32_t lcg_state = 12345u;
static int32_t lcg(int32_t lo, int32_t hi) /* inclusive */
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lo + (int32_t)((lcg_state >> 8) % (uint32_t)(hi - lo + 1));
}

static void print_i(const char *name, const int8_t *v, int n)
{
    printf("i %s", name);
    for (int i = 0; i < n; ++i) {
        printf(" %d", v[i]);
    }
    printf("\n");
}

static void print_i64(const char *name, const int64_t *v, int n)
{
    printf("i %s", name);
    for (int i = 0; i < n; ++i) {
        printf(" %lld", (long long)v[i]);
    }
    printf("\n");
}

static void print_f(const char *name, const float *v, int n)
{
    printf("f %s", name);
    for (int i = 0; i < n; ++i) {
        printf(" %.9e", (double)v[i]);
    }
    printf("\n");
}

static int failures = 0;
static void check(const char *what, int32_t st)
{
    if (st != 0) {
        printf("error %s %d\n", what, (int)st);
        failures++;
    }
}

int main(void)
{
    /* int8 conv 3x3, NHWC in -> TILED out (block 4, C_out 6 padded to 8), through the nvdla API */
    static int8_t x[1 * 5 * 5 * 3], y[1 * 2 * 5 * 5 * 4];
    static int8_t w8[6 * 3 * 3 * 3];
    static int32_t bias[6], mult[6], shift[6];
    for (int i = 0; i < (int)sizeof(x); ++i) x[i] = (int8_t)lcg(-128, 127);
    for (int i = 0; i < (int)sizeof(w8); ++i) w8[i] = (int8_t)lcg(-127, 127);
    for (int i = 0; i < 6; ++i) {
        bias[i] = lcg(-3000, 3000);
        mult[i] = lcg(1 << 30, 2147483647);
        shift[i] = -lcg(8, 11);
    }
    nvdla_tensor tx = {x, NVDLA_S8, 4, {1, 3, 5, 5}, NVDLA_NHWC, 0, 0.05f, -3};
    nvdla_tensor ty = {y, NVDLA_S8, 4, {1, 6, 5, 5}, NVDLA_TILED, 4, 0.1f, 2};
    nvdla_conv2d_params cp = {1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, NVDLA_S8, w8, bias, mult, shift, 0.0f, 6.0f, 0};
    check("conv s8", nvdla_conv2d(&tx, &ty, &cp));
    print_i("conv_s8", y, (int)sizeof(y));

    /* int4 depthwise conv with packed weights, through the xi_dsp API */
    static int8_t x4[1 * 4 * 6 * 6], y4[1 * 4 * 3 * 3];
    static uint8_t w4[(4 * 3 * 3 + 1) / 2];
    for (int i = 0; i < (int)sizeof(x4); ++i) x4[i] = (int8_t)lcg(-8, 7);
    for (int i = 0; i < (int)sizeof(w4); ++i) w4[i] = (uint8_t)lcg(0, 255);
    xi_dsp_tensor tx4 = {x4, XI_DSP_S4, 4, {1, 4, 6, 6}, XI_DSP_NCHW, 0, 0.2f, 1};
    xi_dsp_tensor ty4 = {y4, XI_DSP_S4, 4, {1, 4, 3, 3}, XI_DSP_NCHW, 0, 0.5f, -2};
    static int32_t shift4[4];
    for (int i = 0; i < 4; ++i) shift4[i] = -lcg(2, 4);
    xi_dsp_conv2d_params cp4 = {2, 2, 1, 1, 1, 1, 0, 0, 4, 3, 3, XI_DSP_S4, w4, NULL, mult, shift4, 0.0f, 0.0f, 0};
    check("conv s4", xi_dsp_conv2d(&tx4, &ty4, &cp4));
    print_i("conv_s4", y4, (int)sizeof(y4));

    /* float conv + softmax + layer norm */
    static float xf[1 * 3 * 6 * 6], wf[4 * 3 * 3 * 3], bf[4], yf[1 * 4 * 6 * 6], sf[1 * 4 * 6 * 6];
    for (int i = 0; i < (int)(sizeof(xf) / sizeof(float)); ++i) xf[i] = (float)lcg(-1000, 1000) / 1000.0f;
    for (int i = 0; i < (int)(sizeof(wf) / sizeof(float)); ++i) wf[i] = (float)lcg(-1000, 1000) / 3000.0f;
    for (int i = 0; i < 4; ++i) bf[i] = (float)lcg(-100, 100) / 100.0f;
    npk_tensor txf = {xf, NPK_F32, 4, {1, 3, 6, 6}, NPK_NCHW, 0, 1.0f, 0};
    npk_tensor tyf = {yf, NPK_F32, 4, {1, 4, 6, 6}, NPK_NHWC, 0, 1.0f, 0};
    npk_tensor tsf = {sf, NPK_F32, 4, {1, 4, 6, 6}, NPK_NCHW, 0, 1.0f, 0};
    npk_conv2d_params cpf = {1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, NPK_F32, wf, bf, NULL, NULL, 0.0f, 0.0f, 0};
    check("conv f32", npk_conv2d(&txf, &tyf, &cpf));
    print_f("conv_f32", yf, 20);
    check("softmax", npk_softmax(&tyf, &tsf, 1));
    print_f("softmax", sf, 20);
    npk_layer_norm_params lp = {2, 1e-5f, NULL, NULL};
    check("layer_norm", npk_layer_norm(&tyf, &tsf, &lp));
    print_f("layer_norm", sf, 20);
    check("gelu", npk_gelu(&tsf, &tsf));
    print_f("gelu", sf, 20);

    /* int16 matmul with int64 bias */
    static int16_t a16[3 * 8], b16[8 * 5], o16[3 * 5];
    static int64_t bias64[5];
    for (int i = 0; i < 24; ++i) a16[i] = (int16_t)lcg(-32768, 32767);
    for (int i = 0; i < 40; ++i) b16[i] = (int16_t)lcg(-32767, 32767);
    for (int i = 0; i < 5; ++i) bias64[i] = lcg(-1000000, 1000000) * 1000LL;
    npk_tensor ta = {a16, NPK_S16, 2, {3, 8}, NPK_ROW_MAJOR, 0, 1e-3f, 5};
    npk_tensor tb = {b16, NPK_S16, 2, {8, 5}, NPK_ROW_MAJOR, 0, 1.0f, 0};
    npk_tensor to = {o16, NPK_S16, 2, {3, 5}, NPK_ROW_MAJOR, 0, 0.5f, -7};
    npk_matmul_params mp = {1, 0, bias64, mult, shift, 0.0f, 0.0f, 0};
    int32_t m16[5], s16[5];
    for (int i = 0; i < 5; ++i) {
        m16[i] = mult[i];
        s16[i] = shift[i] - 12;
    }
    mp.multiplier = m16;
    mp.shift = s16;
    check("matmul s16", npk_matmul(&ta, &tb, &to, &mp));
    printf("i matmul_s16");
    for (int i = 0; i < 15; ++i) printf(" %d", o16[i]);
    printf("\n");

    /* topk and NMS */
    static float scores[1 * 2 * 12], boxes[1 * 12 * 4];
    static int64_t sel[30 * 3], topi[2 * 4];
    for (int i = 0; i < 24; ++i) scores[i] = (float)lcg(0, 1000) / 1000.0f;
    for (int i = 0; i < 12; ++i) {
        float cy = (float)lcg(0, 100) / 10.0f, cx = (float)lcg(0, 100) / 10.0f;
        boxes[i * 4 + 0] = cy;
        boxes[i * 4 + 1] = cx;
        boxes[i * 4 + 2] = cy + (float)lcg(5, 30) / 10.0f;
        boxes[i * 4 + 3] = cx + (float)lcg(5, 30) / 10.0f;
    }
    npk_tensor tsc = {scores, NPK_F32, 3, {1, 2, 12}, 0, 0, 1.0f, 0};
    npk_tensor tbx = {boxes, NPK_F32, 3, {1, 12, 4}, 0, 0, 1.0f, 0};
    npk_tensor tsel = {sel, NPK_S64, 2, {30, 3}, 0, 0, 1.0f, 0};
    npk_tensor ttop = {topi, NPK_S64, 3, {1, 2, 4}, 0, 0, 1.0f, 0};
    npk_topk_params tp = {2, 1};
    check("topk", npk_topk(&tsc, NULL, &ttop, &tp));
    print_i64("topk", topi, 8);
    int64_t count = 0;
    npk_nms_params np_ = {0, 4, 0.3f, 0.1f, NULL};
    check("nms", npk_nms(&tbx, &tsc, &tsel, &count, &np_));
    print_i64("nms", sel, (int)count * 3);

    /* CMSIS-NN conv and softmax */
    static int8_t cy[1 * 5 * 5 * 6], sm[2 * 10], smo[2 * 10];
    cmsis_nn_context ctx = {NULL, 0};
    cmsis_nn_conv_params ccp = {3, 2, {1, 1}, {1, 1}, {1, 1}, {-128, 127}};
    cmsis_nn_per_channel_quant_params cq = {mult, shift};
    cmsis_nn_dims din = {1, 5, 5, 3}, dfl = {6, 3, 3, 3}, dbi = {1, 1, 1, 6}, dout = {1, 5, 5, 6};
    check("arm conv", arm_convolve_wrapper_s8(&ctx, &ccp, &cq, &din, x, &dfl, w8, &dbi, bias, &dout, cy));
    print_i("arm_conv", cy, (int)sizeof(cy));
    for (int i = 0; i < 20; ++i) sm[i] = (int8_t)lcg(-128, 127);
    arm_softmax_s8(sm, 2, 10, 1717986918, 22, -3968, smo);
    print_i("arm_softmax", smo, 20);

    printf("failures %d\n", failures);
    return failures != 0;
}
