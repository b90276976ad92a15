/*
 * fp_ref.h: test-only references for the float formats and the affine4
 * error bound, written from the format definitions and the contract text
 * of hb_half.h / hb_affine4.h, never from libcore/libstore code (fp_ref.c
 * calls no library function), so the converter's tests can build their
 * expectations without the code they test.
 */
#ifndef HB_TEST_FP_REF_H
#define HB_TEST_FP_REF_H

#include "hb_base.h"

/* float32 bits -> bfloat16 bits, round to nearest, ties to even, on the
 * integer bits; NaN stays a quiet NaN with its sign (hb_half.h),
 * infinities stay infinite, a finite value past the largest bf16 rounds to
 * infinity, subnormals round like every other value. */
uint16_t fp_ref_bf16_rne_bits(uint32_t f32);
uint16_t fp_ref_bf16_rne(float f);
/* bfloat16 -> float32, exact (the upper half of the float32 word). */
float fp_ref_bf16_to_f32(uint16_t h);
/* IEEE binary16 -> double, exact, from sign, exponent and fraction. */
double fp_ref_f16_to_double(uint16_t h);
uint32_t fp_ref_f32_bits(float f);
float fp_ref_bits_f32(uint32_t u);

/*
 * The worst reconstruction error of affine4 over a group spanning
 * [lo, hi], derived in double from the encoding rule of hb_affine4.h
 * (bias = bf16(lo), scale = bf16(f32((hi - lo) / 15)), q = clamp(rne((w -
 * bias) / scale), 0, 15), decode bias + scale q in float32), with this
 * file's bf16 rounding:
 *
 *   inside the grid [bias, top], top = bias + 15 scale: scale / 2, plus
 *     15 scale 2^-50 for the double quotient's rounding near a half step;
 *   below the grid (lo < bias): bias - lo;
 *   above the grid (hi > top): hi - top;
 *   scale 0 (a constant or near-constant group): max(|lo - bias|, |hi - bias|);
 *   plus the float32 decode's single rounding: 2^-24 max(|bias|, |top|),
 *     and 2^-150 for a result in the subnormal range.
 *
 * The largest case applies to every weight of the group, so it bounds the
 * maximum.  INFINITY when the parameters do not fit bf16 (the encoder
 * refuses such a group).
 */
double fp_ref_affine4_bound(float lo, float hi);

#endif
