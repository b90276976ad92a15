/*
 * hb_math.c: the graph's per-token arithmetic (see hb_math.h).
 */
#include "hb_base.h"
#include "hb_math.h"

#include <math.h>

void hb_rmsnorm_zc(const float *x, const float *w, size_t n, size_t group, double eps, float *out)
{
	for (size_t g0 = 0; g0 < n; g0 += group) {
		float ss = 0;
		float inv;
		for (size_t i = 0; i < group; i++)
			ss += x[g0 + i] * x[g0 + i];
		inv = 1.0f / sqrtf(ss / (float)group + (float)eps);
		for (size_t i = 0; i < group; i++)
			out[g0 + i] = (x[g0 + i] * inv) * (1.0f + w[g0 + i]);
	}
}

void hb_rmsnorm_w(const float *x, const float *w, size_t n, double eps, float *out)
{
	float ss = 0, inv;

	for (size_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	inv = 1.0f / sqrtf(ss / (float)n + (float)eps);
	for (size_t i = 0; i < n; i++)
		out[i] = w[i] * (x[i] * inv);
}

void hb_l2norm(float *x, size_t n, double eps)
{
	float ss = 0, inv;

	for (size_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	inv = 1.0f / sqrtf(ss + (float)eps);
	for (size_t i = 0; i < n; i++)
		x[i] *= inv;
}

const double hb_expf_table[16] = {
	0x1.0000000000000p+0, 0x1.0b5586cf9890fp+0, 0x1.172b83c7d517bp+0, 0x1.2387a6e756238p+0,
	0x1.306fe0a31b715p+0, 0x1.3dea64c123422p+0, 0x1.4bfdad5362a27p+0, 0x1.5ab07dd485429p+0,
	0x1.6a09e667f3bcdp+0, 0x1.7a11473eb0187p+0, 0x1.8ace5422aa0dbp+0, 0x1.9c49182a3f090p+0,
	0x1.ae89f995ad3adp+0, 0x1.c199bdd85529cp+0, 0x1.d5818dcfba487p+0, 0x1.ea4afa2a490dap+0,
};

/* one statement an operation (no contraction can merge two), the order
 * the vector lanes follow.  Cloned for FMA processors: there fma() is the
 * instruction in line, elsewhere libm's call; both are the exact fused
 * operation, so the clones agree bit for bit */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("fma", "default")))
#endif
float hb_expf(float x)
{
	double xd = (double)x, z, kd, r, p, s;
	uint64_t kb, sb;
	int64_t k;

	if (isnan(x))
		return x;
	if (x > HB_EXPF_HI)
		return INFINITY;
	if (x < HB_EXPF_LO)
		return 0.0f;
	z = xd * HB_EXPF_INV_LN2_16;
	kd = z + HB_EXPF_SHIFT;
	memcpy(&kb, &kd, 8);
	k = (int64_t)(kb - HB_EXPF_SHIFT_BITS); /* |k| <= 2400 */
	kd = kd - HB_EXPF_SHIFT;
	r = fma(-kd, HB_EXPF_LN2_16, xd);
	p = fma(r, HB_EXPF_C5, HB_EXPF_C4);
	p = fma(p, r, HB_EXPF_C3);
	p = fma(p, r, HB_EXPF_C2);
	p = fma(p, r, 1.0);
	p = fma(p, r, 1.0);
	memcpy(&sb, &hb_expf_table[k & 15], 8);
	sb += (uint64_t)(k >> 4) << 52; /* 2^(k/16): k >> 4 into the exponent (floor division) */
	memcpy(&s, &sb, 8);
	return (float)(s * p);
}

float hb_sigmoid(float x)
{
	return 1.0f / (1.0f + hb_expf(-x));
}

float hb_silu(float x)
{
	return x * hb_sigmoid(x);
}

float hb_softplus(float x)
{
	return x > 20.0f ? x : log1pf(expf(x));
}

void hb_softmax(float *x, size_t n)
{
	float m = -INFINITY, s = 0;

	for (size_t i = 0; i < n; i++)
		m = x[i] > m ? x[i] : m;
	for (size_t i = 0; i < n; i++) {
		x[i] = expf(x[i] - m);
		s += x[i];
	}
	for (size_t i = 0; i < n; i++)
		x[i] /= s;
}

/*
 * hb_all_finite: an exponent of all ones (inf, NaN) is
 * the one that carries into bit 31 when 1 is added to it, so OR-ing that
 * sum over the words finds one; blocks of 64 with no branch are what the
 * compiler turns into vector code (isfinite() branched on every value, and
 * a decode token checks every GDN state: 5% of the small bench model's
 * decode thread).
 */
bool hb_all_finite(const float *x, size_t n)
{
	uint32_t acc = 0;
	size_t i = 0;

	for (; i + 64 <= n; i += 64) {
		uint32_t blk = 0;
		for (size_t j = 0; j < 64; j++) {
			uint32_t b;
			memcpy(&b, x + i + j, sizeof(b));
			blk |= (b & 0x7f800000u) + 0x00800000u;
		}
		if (blk & 0x80000000u)
			return false;
	}
	for (; i < n; i++) {
		uint32_t b;
		memcpy(&b, x + i, sizeof(b));
		acc |= (b & 0x7f800000u) + 0x00800000u;
	}
	return !(acc & 0x80000000u);
}
