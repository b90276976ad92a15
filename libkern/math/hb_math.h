/*
 * hb_math.h: the per-token float32 arithmetic the graph computes itself,
 * between the calls it makes through the kernel seam
 * (libkern/backend/hb_backend.h): norms, activations, softmax, dot.
 *
 * These cost O(width) per token, against O(width x rows) for the seam's
 * operations, so they stay above the seam and every backend shares them; a
 * GPU backend that keeps activations on the device would take them behind
 * the seam as fused operations, and then the seam grows by those, not this
 * header.  The CPU backend uses them too (hb_dot, hb_softmax), so its
 * results and the graph's agree bit for bit.
 */
#ifndef HB_MATH_H
#define HB_MATH_H

#include "hb_base.h"

/*
 * Dot product accumulated in eight float lanes so that the compiler can
 * vectorise it; the summation order is fixed, so a result never depends on
 * the thread count or the caller.  Inline: the matrix products call it once
 * per row and input, and it was inlined into them before the seam existed.
 */
static inline float hb_dot(const float *a, const float *b, size_t n)
{
	float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		for (int k = 0; k < 8; k++)
			acc[k] += a[i + (size_t)k] * b[i + (size_t)k];
	for (; i < n; i++)
		acc[i % 8] += a[i] * b[i];
	return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* Zero-centred RMSNorm: out = x / rms(x) * (1 + w), per group of `group`
 * values (group == n: one group).  out may alias x. */
void hb_rmsnorm_zc(const float *x, const float *w, size_t n, size_t group, double eps,
		   float *out);
/* Plain RMSNorm with weight w (the gated GDN norm's first half). */
void hb_rmsnorm_w(const float *x, const float *w, size_t n, double eps, float *out);
/* x * rsqrt(sum(x^2) + eps) in place (upstream's l2norm). */
void hb_l2norm(float *x, size_t n, double eps);

/*
 * e^x for a float, the project's own rather than libm's (whose bits may
 * change between libm versions and have no vector twin here): in double,
 * x = k ln2/16 + r with |r| <= ln2/32, 2^(k/16) as a table entry times a
 * power of two put into the exponent, e^r by a degree-5 polynomial, then
 * one rounding to float.  The double result is within about 2e-13 of e^x,
 * so the float is the correctly rounded one but for a few inputs a 1e-5
 * of the time (1 ulp off then).  NaN gives x; above HB_EXPF_HI +inf, below
 * HB_EXPF_LO +0.  backend/simd repeats exactly these operations in vector
 * lanes (hb_kern_silu_mul), so every path gives the same bits.
 */
float hb_expf(float x);
extern const double hb_expf_table[16]; /* 2^(j/16), correctly rounded */
#define HB_EXPF_HI 88.8f              /* e^x overflows float above 88.7228 */
#define HB_EXPF_LO (-104.0f)          /* and is below half the least subnormal under -103.97 */
#define HB_EXPF_INV_LN2_16 0x1.71547652b82fep+4 /* 16 / ln 2 */
#define HB_EXPF_LN2_16 0x1.62e42fefa39efp-5     /* ln 2 / 16 */
#define HB_EXPF_SHIFT 0x1.8p52                  /* z + shift: z rounded to an integer, in the low bits */
#define HB_EXPF_SHIFT_BITS 0x4338000000000000ull
/* e^r, |r| <= ln2/32: 1 + r(1 + r(C2 + r(C3 + r(C4 + r C5)))), Taylor's coefficients */
#define HB_EXPF_C2 0.5
#define HB_EXPF_C3 (1.0 / 6)
#define HB_EXPF_C4 (1.0 / 24)
#define HB_EXPF_C5 (1.0 / 120)

/* silu(x) = x * sigmoid(x), sigmoid(x) = 1 / (1 + hb_expf(-x)), in float */
float hb_silu(float x);
float hb_sigmoid(float x);
/* torch.nn.functional.softplus with beta 1, threshold 20. */
float hb_softplus(float x);
/* In-place softmax over n values (max-subtracted). */
void hb_softmax(float *x, size_t n);
/* Whether x[0..n) are all finite (no inf, no NaN). */
bool hb_all_finite(const float *x, size_t n);

#endif
