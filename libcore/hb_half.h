/*
 * hb_half.h: bfloat16, IEEE float16 and FP8 E4M3 conversions.
 *
 * Narrowing conversions round to nearest, ties to even, as PyTorch does;
 * NaN stays NaN (quiet, sign kept) and infinities stay infinities, so a
 * converter never turns a poisoned weight into a finite one.  Widening
 * conversions are exact.
 */
#ifndef HB_HALF_H
#define HB_HALF_H

#include "hb_base.h"

float hb_bf16_to_f32(uint16_t h);
uint16_t hb_f32_to_bf16(float f);
float hb_f16_to_f32(uint16_t h);
uint16_t hb_f32_to_f16(float f);
/* FP8 E4M3 "fn" (no infinities, S.1111.111 is NaN), as torch.float8_e4m3fn. */
float hb_fp8e4m3_to_f32(uint8_t v);

/* Bulk widening, for rows of weights. */
void hb_bf16_to_f32_n(const uint16_t *in, float *out, size_t n);
void hb_f16_to_f32_n(const uint16_t *in, float *out, size_t n);

#endif
