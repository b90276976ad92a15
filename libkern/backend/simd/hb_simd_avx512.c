/*
 * hb_simd_avx512.c: the canonical order of hb_simd.h on AVX-512 F/BW/VL:
 * one 16-float register is the 16 lanes of one (row, token) output, so
 * element i lands in lane i mod 16 by construction; a ragged tail is one
 * masked step (_mm512_mask3_fmadd_ps keeps the lanes past the end exactly
 * as they were) and the tree is the natural halving 512 -> 256 -> 128 -> 64
 * -> 32 bits.
 *
 * Products are register tiles of R rows x TT tokens: each weight vector is
 * widened once (bf16: zero-extend and shift; f16: VCVTPH2PS; affine4: a
 * 16-entry table scale * q + bias per group, looked up by VPERMPS with the
 * nibbles as indices) and used for TT tokens.  R = 4, TT = 6 keeps the 24
 * accumulators in the 32 registers.
 *
 * The register tiles themselves are in hb_simd_avx512_tile.h, shared with
 * hb_simd_avx512_vbmi.c (path "avx512vbmi": the same arithmetic with the
 * affine4 nibble indices from VPMULTISHIFTQB).
 *
 * Compiled with -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -mf16c
 * (Makefile); without them the table is NULL and dispatch never comes here.
 */
#include "hb_base.h"
#include "hb_simd_int.h"
#include "math/hb_math.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__) && \
	defined(__F16C__)

#include <immintrin.h>
#include <math.h>

#define INL static inline __attribute__((always_inline))

/*
 * One affine4 group, prepared: lut[q] = scale * q + bias for q < 16 (a
 * multiply and an add: the two roundings of hb_affine4_decode, and no FMA,
 * which would differ where scale * q overflows), and the nibbles as bytes in
 * weight order, each byte's low four bits the index (VPERMPS reads only
 * those, so the high nibble left in the low byte needs no mask).  Returns
 * whether the scale and bias are finite (the row's outputs are NaN if not).
 */
struct a4s {
	__m512 lut;
	__m256i u0, u1; /* q0-15 | q32-47 and q16-31 | q48-63 */
};

INL bool a4_prep(const uint8_t *gp, struct a4s *q)
{
	const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	uint32_t sbits;
	__m512i sb;
	__m256i b, h;

	memcpy(&sbits, gp + 32, 4); /* scale bits low, bias bits high */
	sb = _mm512_set1_epi32((int)sbits);
	q->lut = _mm512_add_ps(_mm512_mul_ps(iota, _mm512_castsi512_ps(_mm512_slli_epi32(sb, 16))),
			     _mm512_castsi512_ps(_mm512_and_si512(sb, _mm512_set1_epi32((int)0xffff0000u))));
	b = _mm256_loadu_si256((const void *)gp);
	h = _mm256_srli_epi16(b, 4);
	q->u0 = _mm256_unpacklo_epi8(b, h);
	q->u1 = _mm256_unpackhi_epi8(b, h);
	return (sbits & 0x7f80u) != 0x7f80u && (sbits & 0x7f800000u) != 0x7f800000u;
}

/* weights 16 blk .. 16 blk + 15 of a prepared group */
INL __m512 a4_16(const struct a4s *q, int blk)
{
	__m128i b = blk == 0 ? _mm256_castsi256_si128(q->u0)
		    : blk == 1 ? _mm256_castsi256_si128(q->u1)
		    : blk == 2 ? _mm256_extracti128_si256(q->u0, 1)
			       : _mm256_extracti128_si256(q->u1, 1);

	return _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(b), q->lut);
}

#include "hb_simd_avx512_tile.h"

static void rows_f32(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx, size_t T,
		     float *y, size_t ldy)
{
	rows_t(HB_W_F32, w, r0, r1, x, ldx, T, y, ldy);
}

static void rows_bf16(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx, size_t T,
		      float *y, size_t ldy)
{
	rows_t(HB_W_BF16, w, r0, r1, x, ldx, T, y, ldy);
}

static void rows_f16(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx, size_t T,
		     float *y, size_t ldy)
{
	rows_t(HB_W_F16, w, r0, r1, x, ldx, T, y, ldy);
}

static void rows_a4(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx, size_t T,
		    float *y, size_t ldy)
{
	if (T == 1 && rows_a4_one(w, r0, r1, x, y))
		return;
	rows_t(HB_W_AFFINE4_G64, w, r0, r1, x, ldx, T, y, ldy);
}

static void rows(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx, size_t T,
		 float *y, size_t ldy)
{
	switch (w->type) {
	case HB_W_F32:
		rows_f32(w, r0, r1, x, ldx, T, y, ldy);
		return;
	case HB_W_BF16:
		rows_bf16(w, r0, r1, x, ldx, T, y, ldy);
		return;
	case HB_W_F16:
		rows_f16(w, r0, r1, x, ldx, T, y, ldy);
		return;
	case HB_W_AFFINE4_G64:
		rows_a4(w, r0, r1, x, ldx, T, y, ldy);
		return;
	}
}

/* the same with affine4 on the VBMI decode (hb_simd_avx512_vbmi.c) */
static void rows_vbmi(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx, size_t T,
		      float *y, size_t ldy)
{
	if (w->type == HB_W_AFFINE4_G64)
		hb_kern_avx512vbmi_rows_a4(w, r0, r1, x, ldx, T, y, ldy);
	else
		rows(w, r0, r1, x, ldx, T, y, ldy);
}

static float dot(const float *a, const float *b, size_t n)
{
	__m512 acc = _mm512_setzero_ps();
	size_t i = 0;

	for (; i + 16 <= n; i += 16)
		acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
	if (i < n) {
		__mmask16 k = (__mmask16)((1u << (n - i)) - 1);
		acc = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(k, a + i), _mm512_maskz_loadu_ps(k, b + i), acc, k);
	}
	return tree(acc);
}

#include "hb_simd_gdn.h"

/* hb_expf (hb_math.h) on eight lanes: its operations, in its order */
INL __m512d exp8(__m512d x)
{
	const __m512d t0 = _mm512_loadu_pd(hb_expf_table), t1 = _mm512_loadu_pd(hb_expf_table + 8);
	__m512d z = _mm512_mul_pd(x, _mm512_set1_pd(HB_EXPF_INV_LN2_16));
	__m512d kd = _mm512_add_pd(z, _mm512_set1_pd(HB_EXPF_SHIFT)), r, p, t;
	__m512i k = _mm512_sub_epi64(_mm512_castpd_si512(kd), _mm512_set1_epi64((long long)HB_EXPF_SHIFT_BITS));

	kd = _mm512_sub_pd(kd, _mm512_set1_pd(HB_EXPF_SHIFT));
	r = _mm512_fnmadd_pd(kd, _mm512_set1_pd(HB_EXPF_LN2_16), x); /* fma(-kd, ln2/16, x) */
	p = _mm512_fmadd_pd(r, _mm512_set1_pd(HB_EXPF_C5), _mm512_set1_pd(HB_EXPF_C4));
	p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(HB_EXPF_C3));
	p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(HB_EXPF_C2));
	p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
	p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
	t = _mm512_permutex2var_pd(t0, _mm512_and_si512(k, _mm512_set1_epi64(15)), t1);
	t = _mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(t), _mm512_slli_epi64(_mm512_srai_epi64(k, 4), 52)));
	return _mm512_mul_pd(t, p);
}

/* hb_expf on 16 floats: NaN gives x, above HB_EXPF_HI +inf, below HB_EXPF_LO +0 */
INL __m512 exp16(__m512 x)
{
	__mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
	__mmask16 hi = _mm512_cmp_ps_mask(x, _mm512_set1_ps(HB_EXPF_HI), _CMP_GT_OQ);
	__mmask16 lo = _mm512_cmp_ps_mask(x, _mm512_set1_ps(HB_EXPF_LO), _CMP_LT_OQ);
	__m512 xs = _mm512_mask_blend_ps((__mmask16)(nan | hi | lo), x, _mm512_setzero_ps());
	__m256 a = _mm512_cvtpd_ps(exp8(_mm512_cvtps_pd(_mm512_castps512_ps256(xs))));
	__m256 b = _mm512_cvtpd_ps(exp8(_mm512_cvtps_pd(
		_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xs), 1)))));
	__m512 e = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(a)),
						       _mm256_castps_pd(b), 1));

	e = _mm512_mask_blend_ps(hi, e, _mm512_set1_ps(INFINITY));
	e = _mm512_mask_blend_ps(lo, e, _mm512_setzero_ps());
	return _mm512_mask_blend_ps(nan, e, x);
}

/* hb_sigmoid: 1 / (1 + e^-x), -x the sign flipped as C's unary minus */
INL __m512 sigmoid16(__m512 x)
{
	const __m512 one = _mm512_set1_ps(1.0f);
	__m512 e = exp16(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN))));

	return _mm512_div_ps(one, _mm512_add_ps(one, e));
}

INL __mmask16 first(size_t left)
{
	return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

/* out = hb_silu(g) * u: g * sigmoid(g), then * u, as hb_math.c */
static void silu_mul(const float *g, const float *u, size_t n, float *out)
{
	for (size_t i = 0; i < n; i += 16) {
		__mmask16 k = first(n - i);
		__m512 gv = _mm512_maskz_loadu_ps(k, g + i), uv = _mm512_maskz_loadu_ps(k, u + i);
		_mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(_mm512_mul_ps(gv, sigmoid16(gv)), uv));
	}
}

static void sigmoid(const float *x, size_t n, float *out)
{
	for (size_t i = 0; i < n; i += 16) {
		__mmask16 k = first(n - i);
		_mm512_mask_storeu_ps(out + i, k, sigmoid16(_mm512_maskz_loadu_ps(k, x + i)));
	}
}

static const struct hb_kern_ops ops = { rows, dot, gdn_heads, silu_mul, sigmoid };
static const struct hb_kern_ops ops_vbmi = { rows_vbmi, dot, gdn_heads, silu_mul, sigmoid };

const struct hb_kern_ops *hb_kern_ops_avx512(void)
{
	return &ops;
}

const struct hb_kern_ops *hb_kern_ops_avx512vbmi(void)
{
	return hb_kern_avx512vbmi_built() ? &ops_vbmi : NULL;
}

#else

const struct hb_kern_ops *hb_kern_ops_avx512(void)
{
	return NULL;
}

const struct hb_kern_ops *hb_kern_ops_avx512vbmi(void)
{
	return NULL;
}

#endif
