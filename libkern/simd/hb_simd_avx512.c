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
 * Compiled with -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -mf16c
 * (Makefile); without them the table is NULL and dispatch never comes here.
 */
#include "hb_base.h"
#include "hb_simd_int.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__) && \
	defined(__F16C__)

#include <immintrin.h>
#include <math.h>

#define INL static inline __attribute__((always_inline))
/* the tile loops must unroll completely, or the accumulators live in memory */
#define UNROLL _Pragma("GCC unroll 8")
#define MAXR 4
#define MAXT 6

INL float tree(__m512 v)
{
	__m256 lo = _mm512_castps512_ps256(v);
	__m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
	__m256 s8 = _mm256_add_ps(lo, hi);
	__m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
	__m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
	return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* 16 weights from element i (bf16/f16/f32 rows) */
INL __m512 ld16(int type, const uint8_t *p, size_t i)
{
	const void *q = p + (type == HB_W_F32 ? 4 : 2) * i;

	if (type == HB_W_F32)
		return _mm512_loadu_ps(q);
	if (type == HB_W_BF16)
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(q)), 16));
	return _mm512_cvtph_ps(_mm256_loadu_si256(q));
}

/* the same for the k lanes of a ragged tail, zero past it (never read) */
INL __m512 ld16_tail(int type, const uint8_t *p, size_t i, __mmask16 k)
{
	const void *q = p + (type == HB_W_F32 ? 4 : 2) * i;

	if (type == HB_W_F32)
		return _mm512_maskz_loadu_ps(k, q);
	if (type == HB_W_BF16)
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, q)), 16));
	return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, q));
}

/*
 * One affine4 group, prepared: lut[q] = scale * q + bias for q < 16 (a
 * multiply and an add: the two roundings of hb_affine4_decode, and no FMA,
 * which would differ where scale * q overflows), and the nibbles as bytes in
 * weight order, each byte's low four bits the index (VPERMPS reads only
 * those, so the high nibble left in the low byte needs no mask).  Returns
 * whether the scale and bias are finite (the row's outputs are NaN if not).
 */
INL bool a4_prep(const uint8_t *gp, __m512 *lut, __m256i *u0, __m256i *u1)
{
	const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	uint32_t sbits;
	__m512i sb;
	__m256i b, h;

	memcpy(&sbits, gp + 32, 4); /* scale bits low, bias bits high */
	sb = _mm512_set1_epi32((int)sbits);
	*lut = _mm512_add_ps(_mm512_mul_ps(iota, _mm512_castsi512_ps(_mm512_slli_epi32(sb, 16))),
			     _mm512_castsi512_ps(_mm512_and_si512(sb, _mm512_set1_epi32((int)0xffff0000u))));
	b = _mm256_loadu_si256((const void *)gp);
	h = _mm256_srli_epi16(b, 4);
	*u0 = _mm256_unpacklo_epi8(b, h); /* q0-15 | q32-47 */
	*u1 = _mm256_unpackhi_epi8(b, h); /* q16-31 | q48-63 */
	return (sbits & 0x7f80u) != 0x7f80u && (sbits & 0x7f800000u) != 0x7f800000u;
}

/* weights 16 blk .. 16 blk + 15 of a prepared group */
INL __m512 a4_16(__m512 lut, __m256i u0, __m256i u1, int blk)
{
	__m128i q = blk == 0 ? _mm256_castsi256_si128(u0)
		    : blk == 1 ? _mm256_castsi256_si128(u1)
		    : blk == 2 ? _mm256_extracti128_si256(u0, 1)
			       : _mm256_extracti128_si256(u1, 1);

	return _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(q), lut);
}

/* y[t][r + a] for a < R, t < TT over the whole row */
INL void tile(int type, int R, int TT, const struct hb_wmat *w, uint64_t r, const float *x, size_t ldx,
	      float *y, size_t ldy)
{
	const uint8_t *base = (const uint8_t *)w->data + r * w->row_bytes;
	size_t n = (size_t)w->cols, rb = (size_t)w->row_bytes, i = 0;
	__m512 acc[MAXR][MAXT];
	unsigned bad = 0;

	UNROLL
	for (int a = 0; a < R; a++)
		UNROLL
		for (int b = 0; b < TT; b++)
			acc[a][b] = _mm512_setzero_ps();
	if (type == HB_W_AFFINE4_G64) {
		/* row by row within a group: one table live at a time, so the
		 * tile can be as wide as for the other types */
		for (size_t g = 0; g < n / HB_A4_GROUP; g++) {
UNROLL
			for (int a = 0; a < R; a++) {
				__m512 lut;
				__m256i u0, u1;
				if (!a4_prep(base + (size_t)a * rb + g * HB_A4_GROUP_BYTES, &lut, &u0, &u1))
					bad |= 1u << a;
UNROLL
				for (int blk = 0; blk < 4; blk++) {
					__m512 wv = a4_16(lut, u0, u1, blk);
					size_t c = g * HB_A4_GROUP + (size_t)blk * 16;
UNROLL
					for (int b = 0; b < TT; b++)
						acc[a][b] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + (size_t)b * ldx + c),
									    acc[a][b]);
				}
			}
		}
	} else {
		for (; i + 16 <= n; i += 16) {
			__m512 wv[MAXR];
			UNROLL
			for (int a = 0; a < R; a++)
				wv[a] = ld16(type, base + (size_t)a * rb, i);
			UNROLL
			for (int b = 0; b < TT; b++) {
				__m512 xv = _mm512_loadu_ps(x + (size_t)b * ldx + i);
				UNROLL
				for (int a = 0; a < R; a++)
					acc[a][b] = _mm512_fmadd_ps(wv[a], xv, acc[a][b]);
			}
		}
		if (i < n) {
			__mmask16 k = (__mmask16)((1u << (n - i)) - 1);
			__m512 wv[MAXR];
			UNROLL
			for (int a = 0; a < R; a++)
				wv[a] = ld16_tail(type, base + (size_t)a * rb, i, k);
			UNROLL
			for (int b = 0; b < TT; b++) {
				__m512 xv = _mm512_maskz_loadu_ps(k, x + (size_t)b * ldx + i);
				UNROLL
				for (int a = 0; a < R; a++)
					acc[a][b] = _mm512_mask3_fmadd_ps(wv[a], xv, acc[a][b], k);
			}
		}
	}
	UNROLL
	for (int a = 0; a < R; a++)
		UNROLL
		for (int b = 0; b < TT; b++)
			y[(size_t)b * ldy + r + (size_t)a] = (bad >> a) & 1 ? NAN : tree(acc[a][b]);
}

/* all T tokens of rows r .. r + R - 1, TT at a time, the rest in one tile */
INL void rows_r(int type, int R, const struct hb_wmat *w, uint64_t r, const float *x, size_t ldx, size_t T,
		float *y, size_t ldy)
{
	const int TT = 6;
	size_t t = 0;

	for (; t + (size_t)TT <= T; t += (size_t)TT)
		tile(type, R, TT, w, r, x + t * ldx, ldx, y + t * ldy, ldy);
	switch (T - t) {
	case 0:
		break;
	case 1:
		tile(type, R, 1, w, r, x + t * ldx, ldx, y + t * ldy, ldy);
		break;
	case 2:
		tile(type, R, 2, w, r, x + t * ldx, ldx, y + t * ldy, ldy);
		break;
	case 3:
		tile(type, R, 3, w, r, x + t * ldx, ldx, y + t * ldy, ldy);
		break;
	case 4:
		tile(type, R, 4, w, r, x + t * ldx, ldx, y + t * ldy, ldy);
		break;
	default:
		tile(type, R, 5, w, r, x + t * ldx, ldx, y + t * ldy, ldy);
		break;
	}
}

INL void rows_t(int type, const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx,
		size_t T, float *y, size_t ldy)
{
	uint64_t r = r0;

	for (; r + MAXR <= r1; r += MAXR)
		rows_r(type, MAXR, w, r, x, ldx, T, y, ldy);
	for (; r < r1; r++)
		rows_r(type, 1, w, r, x, ldx, T, y, ldy);
}

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

static const struct hb_kern_ops ops = { rows, dot };

const struct hb_kern_ops *hb_kern_ops_avx512(void)
{
	return &ops;
}

#else

const struct hb_kern_ops *hb_kern_ops_avx512(void)
{
	return NULL;
}

#endif
