/* arm_nnfunctions.h -- the subset of the public CMSIS-NN API that npukit's exports call.
 *
 * Signatures follow Arm's CMSIS-NN (v6 and later, TensorFlow Lite Micro semantics): int8 NHWC
 * tensors, input_offset = -input zero point, output_offset = +output zero point, per-channel
 * (conv) or per-tensor (fully connected) requantization with CMSIS-NN's rounding
 * (doubling high multiply rounding half up, then a rounding right shift half away from zero),
 * then the activation clamp.  npukit's reference implementation is npk_cmsis_nn.c; link Arm's
 * library instead by replacing these files with Arm's CMSIS-NN/Include and Source.
 * Written by npukit from the documented API; not Arm's file.
 */
#ifndef ARM_NNFUNCTIONS_H
#define ARM_NNFUNCTIONS_H

#include "arm_nn_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Convolution, any groups (groups = input_dims->c / filter_dims->c).
 * input [N, H, W, C_in], filter [C_out, KH, KW, C_in / groups], bias int32 [C_out] (or NULL),
 * output [N, OH, OW, C_out]. */
arm_cmsis_nn_status arm_convolve_wrapper_s8(const cmsis_nn_context *ctx, const cmsis_nn_conv_params *conv_params, const cmsis_nn_per_channel_quant_params *quant_params, const cmsis_nn_dims *input_dims, const int8_t *input_data, const cmsis_nn_dims *filter_dims, const int8_t *filter_data, const cmsis_nn_dims *bias_dims, const int32_t *bias_data, const cmsis_nn_dims *output_dims, int8_t *output_data);

/* Scratch bytes arm_convolve_wrapper_s8 may need (see docs/kernel-library.md). */
int32_t arm_convolve_wrapper_s8_get_buffer_size(const cmsis_nn_conv_params *conv_params, const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims);

/* Depthwise convolution: input [N, H, W, C_in], filter [1, KH, KW, C_out] with
 * C_out = C_in * ch_mult, bias int32 [C_out] (or NULL), output [N, OH, OW, C_out]. */
arm_cmsis_nn_status arm_depthwise_conv_wrapper_s8(const cmsis_nn_context *ctx, const cmsis_nn_dw_conv_params *dw_conv_params, const cmsis_nn_per_channel_quant_params *quant_params, const cmsis_nn_dims *input_dims, const int8_t *input_data, const cmsis_nn_dims *filter_dims, const int8_t *filter_data, const cmsis_nn_dims *bias_dims, const int32_t *bias_data, const cmsis_nn_dims *output_dims, int8_t *output_data);

int32_t arm_depthwise_conv_wrapper_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params, const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims);

/* Fully connected: input [N, accum_depth] (input_dims->n batches), filter_dims->n = accum_depth,
 * filter_dims->c = C_out, filter data [C_out][accum_depth], bias int32 [C_out] (or NULL),
 * output [N, C_out]. */
arm_cmsis_nn_status arm_fully_connected_s8(const cmsis_nn_context *ctx, const cmsis_nn_fc_params *fc_params, const cmsis_nn_per_tensor_quant_params *quant_params, const cmsis_nn_dims *input_dims, const int8_t *input_data, const cmsis_nn_dims *filter_dims, const int8_t *filter_data, const cmsis_nn_dims *bias_dims, const int32_t *bias_data, const cmsis_nn_dims *output_dims, int8_t *output_data);

int32_t arm_fully_connected_s8_get_buffer_size(const cmsis_nn_dims *filter_dims);

/* Row sums of a [vector_rows][vector_cols] int8 matrix times lhs_offset, plus bias (if not NULL):
 * the kernel-sum buffer Arm's Helium (MVE) fully connected kernel reads from ctx->buf. */
arm_cmsis_nn_status arm_vector_sum_s8(int32_t *vector_sum_buf, const int32_t vector_cols, const int32_t vector_rows, const int8_t *vector_data, const int32_t lhs_offset, const int32_t *bias_data);

/* Max / average pooling on [N, H, W, C] (filter_dims h, w = window); padding taps are skipped;
 * the average divides by the number of taps inside the input, rounding half away from zero. */
arm_cmsis_nn_status arm_max_pool_s8(const cmsis_nn_context *ctx, const cmsis_nn_pool_params *pool_params, const cmsis_nn_dims *input_dims, const int8_t *input_data, const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims, int8_t *output_data);

arm_cmsis_nn_status arm_avgpool_s8(const cmsis_nn_context *ctx, const cmsis_nn_pool_params *pool_params, const cmsis_nn_dims *input_dims, const int8_t *input_data, const cmsis_nn_dims *filter_dims, const cmsis_nn_dims *output_dims, int8_t *output_data);

int32_t arm_avgpool_s8_get_buffer_size(const int dim_dst_width, const int ch_src);

/* Softmax over rows of row_size int8 values; output scale 1/256, zero point -128.  mult / shift /
 * diff_min come from the input scale (npukit.codegen.kernels.cmsis_softmax_params). */
void arm_softmax_s8(const int8_t *input, const int32_t num_rows, const int32_t row_size, const int32_t mult, const int32_t shift, const int32_t diff_min, int8_t *output);

/* out = clamp(requant(requant((in1 + off1) << left_shift, m1, s1) + requant((in2 + off2) << left_shift, m2, s2), out_mult, out_shift) + out_offset). */
arm_cmsis_nn_status arm_elementwise_add_s8(const int8_t *input_1_vect, const int8_t *input_2_vect, const int32_t input_1_offset, const int32_t input_1_mult, const int32_t input_1_shift, const int32_t input_2_offset, const int32_t input_2_mult, const int32_t input_2_shift, const int32_t left_shift, int8_t *output, const int32_t out_offset, const int32_t out_mult, const int32_t out_shift, const int32_t out_activation_min, const int32_t out_activation_max, const int32_t block_size);

/* out = clamp(requant((in1 + off1) * (in2 + off2), out_mult, out_shift) + out_offset). */
arm_cmsis_nn_status arm_elementwise_mul_s8(const int8_t *input_1_vect, const int8_t *input_2_vect, const int32_t input_1_offset, const int32_t input_2_offset, int8_t *output, const int32_t out_offset, const int32_t out_mult, const int32_t out_shift, const int32_t out_activation_min, const int32_t out_activation_max, const int32_t block_size);

#ifdef __cplusplus
}
#endif

#endif /* ARM_NNFUNCTIONS_H */
