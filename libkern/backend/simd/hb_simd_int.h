/*
 * hb_simd_int.h: what each code path of hb_simd exports (internal to
 * libkern/backend/simd).  A path the build could not compile (no x86, or a compiler
 * without the -m flags) returns NULL from its table function.
 */
#ifndef HB_SIMD_INT_H
#define HB_SIMD_INT_H

#include "hb_simd.h"

struct hb_kern_ops {
	void (*rows)(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx,
		     size_t T, float *y, size_t ldy);
	float (*dot)(const float *a, const float *b, size_t n);
	void (*gdn_heads)(float *S, const float *S0, const float *q, const float *k, const float *v,
			  const float *beta, const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, size_t h0,
			  size_t h1, float qscale, float *o);
	void (*silu_mul)(const float *g, const float *u, size_t n, float *out);
	void (*sigmoid)(const float *x, size_t n, float *out);
};

const struct hb_kern_ops *hb_kern_ops_portable(void);
/* hb_simd_portable.c: silu_mul and sigmoid by hb_silu and hb_sigmoid,
 * element by element (the vector paths' ragged tails too) */
void hb_kern_silu_mul_scalar(const float *g, const float *u, size_t n, float *out);
void hb_kern_sigmoid_scalar(const float *x, size_t n, float *out);
const struct hb_kern_ops *hb_kern_ops_avx2(void);
/* hb_simd_avx2_act.c: AVX2's silu_mul and sigmoid (the scalar ones off x86) */
void hb_kern_avx2_silu_mul(const float *g, const float *u, size_t n, float *out);
void hb_kern_avx2_sigmoid(const float *x, size_t n, float *out);
const struct hb_kern_ops *hb_kern_ops_avx512(void);
const struct hb_kern_ops *hb_kern_ops_avx512vbmi(void);
/* hb_simd_avx512_vbmi.c: whether it was compiled with VBMI, and its rows */
bool hb_kern_avx512vbmi_built(void);
void hb_kern_avx512vbmi_rows_a4(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx,
				size_t T, float *y, size_t ldy);

/*
 * Not a matrix's type: a float32 weight panel that hb_simd_block.h widened
 * from a matrix, rows of its pseudo-matrix KC floats apart, holding columns
 * [c0, c1) of the tile call that reads it (element i at float i - c0).
 */
#define HB_W_PANEL 0x70

/* The affine4-g64 group: 32 nibble bytes, bf16 scale, bf16 bias. */
#define HB_A4_GROUP 64
#define HB_A4_GROUP_BYTES 36

/* Whether a bf16 bit pattern is an infinity or a NaN (exponent all ones). */
static inline bool hb_bf16_nonfinite(uint16_t h)
{
	return (h & 0x7f80u) == 0x7f80u;
}

static inline uint16_t hb_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

#endif
