/* arm_nn_types.h -- the public CMSIS-NN parameter types, as npukit's exported projects use them.
 *
 * Declared after Arm's CMSIS-NN public API (arm_nn_types.h, arm_nnfunctions.h, v6 and later) so
 * that a project can link Arm's optimized library instead of npukit's reference implementation
 * (npk_cmsis_nn.c): drop these two headers and the .c file and point the include path at Arm's
 * CMSIS-NN/Include.  Written by npukit from the documented API; not Arm's file.
 */
#ifndef ARM_NN_TYPES_H
#define ARM_NN_TYPES_H

#include <stdint.h>

/* Return codes. */
typedef enum {
    ARM_CMSIS_NN_SUCCESS = 0,
    ARM_CMSIS_NN_ARG_ERROR = -1,
    ARM_CMSIS_NN_NO_IMPL_ERROR = -2,
    ARM_CMSIS_NN_FAILURE = -3
} arm_cmsis_nn_status;

/* Width and height of a tile (stride, padding, dilation). */
typedef struct {
    int32_t w;
    int32_t h;
} cmsis_nn_tile;

/* Scratch buffer handed to a kernel; size from the matching *_get_buffer_size(). */
typedef struct {
    void *buf;
    int32_t size;
} cmsis_nn_context;

/* Tensor dimensions: n is the batch (or the output channels of a filter), NHWC order. */
typedef struct {
    int32_t n;
    int32_t h;
    int32_t w;
    int32_t c;
} cmsis_nn_dims;

/* Per output channel requantization: real multiplier = multiplier * 2^(shift - 31). */
typedef struct {
    int32_t *multiplier;
    int32_t *shift;
} cmsis_nn_per_channel_quant_params;

/* One requantization for the whole tensor. */
typedef struct {
    int32_t multiplier;
    int32_t shift;
} cmsis_nn_per_tensor_quant_params;

/* Fused activation: the quantized output is clamped to [min, max]. */
typedef struct {
    int32_t min;
    int32_t max;
} cmsis_nn_activation;

/* Convolution: input_offset = -input zero point, output_offset = +output zero point; padding is
   the top / left padding (the output dims imply the rest). */
typedef struct {
    int32_t input_offset;
    int32_t output_offset;
    cmsis_nn_tile stride;
    cmsis_nn_tile padding;
    cmsis_nn_tile dilation;
    cmsis_nn_activation activation;
} cmsis_nn_conv_params;

/* Depthwise convolution: output channel = input channel * ch_mult + m. */
typedef struct {
    int32_t input_offset;
    int32_t output_offset;
    int32_t ch_mult;
    cmsis_nn_tile stride;
    cmsis_nn_tile padding;
    cmsis_nn_tile dilation;
    cmsis_nn_activation activation;
} cmsis_nn_dw_conv_params;

/* Pooling. */
typedef struct {
    cmsis_nn_tile stride;
    cmsis_nn_tile padding;
    cmsis_nn_activation activation;
} cmsis_nn_pool_params;

/* Fully connected: filter_offset is 0 (symmetric weights). */
typedef struct {
    int32_t input_offset;
    int32_t filter_offset;
    int32_t output_offset;
    cmsis_nn_activation activation;
} cmsis_nn_fc_params;

#endif /* ARM_NN_TYPES_H */
