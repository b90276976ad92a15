/*
 * hb_simd_avx2_act.c: the AVX2 path's activations, hb_kern_silu_mul and
 * hb_kern_sigmoid (hb_simd.h), eight floats at a time.  hb_expf (hb_math.c)
 * computes in double; here its operations run on two registers of four
 * double lanes each, in its order, with the same fused steps, so every
 * lane gives hb_expf's bits, and the float sigmoid and products that
 * follow are hb_sigmoid's and hb_silu's.  A ragged tail calls those
 * functions themselves.
 *
 * Compiled with -mavx2 -mfma (Makefile); without them the path's table
 * keeps the scalar functions.
 */
#include "hb_base.h"
#include "hb_simd_int.h"
#include "math/hb_math.h"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>
#include <math.h>

#define INL static inline __attribute__((always_inline))

/* hb_expf's arithmetic on four double lanes (arguments already in range) */
INL __m256d exp4(__m256d x)
{
	__m256d z = _mm256_mul_pd(x, _mm256_set1_pd(HB_EXPF_INV_LN2_16));
	__m256d kd = _mm256_add_pd(z, _mm256_set1_pd(HB_EXPF_SHIFT)), r, p, t;
	__m256i k = _mm256_sub_epi64(_mm256_castpd_si256(kd), _mm256_set1_epi64x((long long)HB_EXPF_SHIFT_BITS));
	__m256i j = _mm256_and_si256(k, _mm256_set1_epi64x(15));

	kd = _mm256_sub_pd(kd, _mm256_set1_pd(HB_EXPF_SHIFT));
	r = _mm256_fnmadd_pd(kd, _mm256_set1_pd(HB_EXPF_LN2_16), x); /* fma(-kd, ln2/16, x) */
	p = _mm256_fmadd_pd(r, _mm256_set1_pd(HB_EXPF_C5), _mm256_set1_pd(HB_EXPF_C4));
	p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(HB_EXPF_C3));
	p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(HB_EXPF_C2));
	p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
	p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
	t = _mm256_i64gather_pd(hb_expf_table, j, 8);
	/*
	 * (k >> 4) << 52 without AVX2's missing 64-bit arithmetic shift:
	 * k - (k & 15) is 16 (k >> 4) exactly, negative k too, and << 48 of
	 * that is the same word modulo 2^64
	 */
	t = _mm256_castsi256_pd(
		_mm256_add_epi64(_mm256_castpd_si256(t), _mm256_slli_epi64(_mm256_sub_epi64(k, j), 48)));
	return _mm256_mul_pd(t, p);
}

/* hb_expf on 8 floats: NaN gives x, above HB_EXPF_HI +inf, below HB_EXPF_LO +0 */
INL __m256 exp8(__m256 x)
{
	__m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
	__m256 hi = _mm256_cmp_ps(x, _mm256_set1_ps(HB_EXPF_HI), _CMP_GT_OQ);
	__m256 lo = _mm256_cmp_ps(x, _mm256_set1_ps(HB_EXPF_LO), _CMP_LT_OQ);
	__m256 xs = _mm256_andnot_ps(_mm256_or_ps(nan, _mm256_or_ps(hi, lo)), x);
	__m128 a = _mm256_cvtpd_ps(exp4(_mm256_cvtps_pd(_mm256_castps256_ps128(xs))));
	__m128 b = _mm256_cvtpd_ps(exp4(_mm256_cvtps_pd(_mm256_extractf128_ps(xs, 1))));
	__m256 e = _mm256_insertf128_ps(_mm256_castps128_ps256(a), b, 1);

	e = _mm256_blendv_ps(e, _mm256_set1_ps(INFINITY), hi);
	e = _mm256_andnot_ps(lo, e);
	return _mm256_blendv_ps(e, x, nan);
}

/* hb_sigmoid: 1 / (1 + e^-x), -x the sign flipped as C's unary minus */
INL __m256 sigmoid8(__m256 x)
{
	const __m256 one = _mm256_set1_ps(1.0f);
	__m256 e = exp8(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)));

	return _mm256_div_ps(one, _mm256_add_ps(one, e));
}

/* out = hb_silu(g) * u: g * sigmoid(g), then * u */
void hb_kern_avx2_silu_mul(const float *g, const float *u, size_t n, float *out)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 gv = _mm256_loadu_ps(g + i), uv = _mm256_loadu_ps(u + i);
		_mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(gv, sigmoid8(gv)), uv));
	}
	hb_kern_silu_mul_scalar(g + i, u + i, n - i, out + i);
}

void hb_kern_avx2_sigmoid(const float *x, size_t n, float *out)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i, sigmoid8(_mm256_loadu_ps(x + i)));
	hb_kern_sigmoid_scalar(x + i, n - i, out + i);
}

#else

void hb_kern_avx2_silu_mul(const float *g, const float *u, size_t n, float *out)
{
	hb_kern_silu_mul_scalar(g, u, n, out);
}

void hb_kern_avx2_sigmoid(const float *x, size_t n, float *out)
{
	hb_kern_sigmoid_scalar(x, n, out);
}

#endif
