/*
 * hb_simd_avx512.c: the canonical order of hb_simd.h on AVX-512 F/BW/VL:
 * one 16-float register is the 16 lanes of one (row, token) output, so
 * element i lands in lane i mod 16 by construction; a ragged tail is one
 * masked step (_mm512_mask3_fmadd_ps keeps the lanes past the end exactly
 * as they were) and the tree is the natural halving 512 -> 256 -> 128 -> 64
 * -> 32 bits.
 *
 * Products are register tiles of R rows x TT tokens: each weight vector is
 * widened once (bf16: zero-extend and shift; f16: VCVTPH2PS; affine4:
 * nibbles to bytes to dwords, then scale * q + bias as a multiply and an
 * add, the same two roundings as hb_affine4_decode) and used for TT tokens.
 * R = 4, TT = 6 (affine4: TT = 4, its per-row scale and bias take eight
 * registers) keeps every accumulator in the 32 registers.
 *
 * Compiled with -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -mf16c
 * (Makefile); without them the table is NULL and dispatch never comes here.
 */
#include "hb_base.h"
#include "hb_half.h"
#include "hb_simd_int.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__) && \
	defined(__F16C__)

#include <immintrin.h>
#include <math.h>

#define INL static inline __attribute__((always_inline))
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

/* weights 16 blk .. 16 blk + 15 of an affine4 group: nibble bytes 8 blk ..
 * 8 blk + 7, weight 2k low nibble of byte k, 2k + 1 the high one */
INL __m512 a4_16(const uint8_t *grp, int blk, __m512 sc, __m512 bi)
{
	const __m128i m = _mm_set1_epi8(0x0f);
	__m128i b = _mm_loadl_epi64((const void *)(grp + 8 * blk));
	__m128i q = _mm_unpacklo_epi8(_mm_and_si128(b, m), _mm_and_si128(_mm_srli_epi16(b, 4), m));
	__m512 qf = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q));

	/* not an FMA: scale * q may overflow, and decode rounds it first */
	return _mm512_add_ps(_mm512_mul_ps(qf, sc), bi);
}

INL __m512 bf16_bcast(uint16_t h)
{
	return _mm512_set1_ps(hb_bf16_to_f32(h));
}

/* y[t][r + a] for a < R, t < TT over the whole row */
INL void tile(int type, int R, int TT, const struct hb_wmat *w, uint64_t r, const float *x, size_t ldx,
	      float *y, size_t ldy)
{
	const uint8_t *base = (const uint8_t *)w->data + r * w->row_bytes;
	size_t n = (size_t)w->cols, rb = (size_t)w->row_bytes, i = 0;
	__m512 acc[MAXR][MAXT];
	unsigned bad = 0;

	for (int a = 0; a < R; a++)
		for (int b = 0; b < TT; b++)
			acc[a][b] = _mm512_setzero_ps();
	if (type == HB_W_AFFINE4_G64) {
		for (size_t g = 0; g < n / HB_A4_GROUP; g++) {
			__m512 sc[MAXR], bi[MAXR];
			for (int a = 0; a < R; a++) {
				const uint8_t *gp = base + (size_t)a * rb + g * HB_A4_GROUP_BYTES;
				uint16_t s = hb_le16(gp + 32), o = hb_le16(gp + 34);
				bad |= (unsigned)(hb_bf16_nonfinite(s) | hb_bf16_nonfinite(o)) << a;
				sc[a] = bf16_bcast(s);
				bi[a] = bf16_bcast(o);
			}
			for (int blk = 0; blk < 4; blk++) {
				__m512 wv[MAXR];
				size_t c = g * HB_A4_GROUP + (size_t)blk * 16;
				for (int a = 0; a < R; a++)
					wv[a] = a4_16(base + (size_t)a * rb + g * HB_A4_GROUP_BYTES, blk, sc[a], bi[a]);
				for (int b = 0; b < TT; b++) {
					__m512 xv = _mm512_loadu_ps(x + (size_t)b * ldx + c);
					for (int a = 0; a < R; a++)
						acc[a][b] = _mm512_fmadd_ps(wv[a], xv, acc[a][b]);
				}
			}
		}
	} else {
		for (; i + 16 <= n; i += 16) {
			__m512 wv[MAXR];
			for (int a = 0; a < R; a++)
				wv[a] = ld16(type, base + (size_t)a * rb, i);
			for (int b = 0; b < TT; b++) {
				__m512 xv = _mm512_loadu_ps(x + (size_t)b * ldx + i);
				for (int a = 0; a < R; a++)
					acc[a][b] = _mm512_fmadd_ps(wv[a], xv, acc[a][b]);
			}
		}
		if (i < n) {
			__mmask16 k = (__mmask16)((1u << (n - i)) - 1);
			__m512 wv[MAXR];
			for (int a = 0; a < R; a++)
				wv[a] = ld16_tail(type, base + (size_t)a * rb, i, k);
			for (int b = 0; b < TT; b++) {
				__m512 xv = _mm512_maskz_loadu_ps(k, x + (size_t)b * ldx + i);
				for (int a = 0; a < R; a++)
					acc[a][b] = _mm512_mask3_fmadd_ps(wv[a], xv, acc[a][b], k);
			}
		}
	}
	for (int a = 0; a < R; a++)
		for (int b = 0; b < TT; b++)
			y[(size_t)b * ldy + r + (size_t)a] = (bad >> a) & 1 ? NAN : tree(acc[a][b]);
}

/* all T tokens of rows r .. r + R - 1, TT at a time, the rest in one tile */
INL void rows_r(int type, int R, const struct hb_wmat *w, uint64_t r, const float *x, size_t ldx, size_t T,
		float *y, size_t ldy)
{
	const int TT = type == HB_W_AFFINE4_G64 ? 4 : 6;
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
