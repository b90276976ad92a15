/*
 * hb_simd_avx2.c: the canonical order of hb_simd.h on AVX2 + FMA + F16C
 * (the baseline of x86 servers since 2013; AMD Zen 3 stops here).  The 16
 * lanes of one (row, token) output are two 8-float registers, lanes 0-7 and
 * 8-15, so element i still lands in lane i mod 16 and the tree's first
 * level (L[j] + L[j + 8]) is the sum of the two registers.  A ragged tail
 * is one step on zero-padded copies whose result is blended into the lanes
 * it owns, leaving the others exactly as they were.
 *
 * Whole rows (decode, few tokens) in tiles of R = 2 rows x TT = 3 tokens:
 * 12 accumulator registers of 16, plus two widened weight vectors and one
 * activation vector.  Prefill is blocked over rows, tokens and column
 * chunks as AVX-512's is (hb_simd_block.h), with tiles of its own that run
 * one half of the lanes at a time (half_tile).
 *
 * Compiled with -mavx2 -mfma -mf16c (Makefile); without them the table is
 * NULL and dispatch never comes here.
 */
#include "hb_base.h"
#include "hb_simd_int.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>
#include <math.h>

#define INL static inline __attribute__((always_inline))
/* the tile loops must unroll completely, or the accumulators live in memory */
#define UNROLL _Pragma("GCC unroll 8")

/* bf16 bits to float, inline: a call here would spill every accumulator */
INL float bf16f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}
#define MAXR 2
#define MAXT 3

INL float tree(__m256 l0, __m256 l1)
{
	__m256 s8 = _mm256_add_ps(l0, l1);
	__m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
	__m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
	return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* all ones in lanes j < k of 8 (k <= 0: none): a ragged tail's own lanes */
INL __m256i lanes_below(int k)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* 8 weights from element i of a bf16, f16 or f32 row */
INL __m256 ld8(int type, const uint8_t *p, size_t i)
{
	const void *q = p + (type == HB_W_F32 ? 4 : 2) * i;

	if (type == HB_W_F32)
		return _mm256_loadu_ps(q);
	if (type == HB_W_BF16)
		return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(q)), 16));
	return _mm256_cvtph_ps(_mm_loadu_si128(q));
}

/* the 16 nibbles of an affine4 block as bytes, in weight order */
INL __m128i a4_bytes(const uint8_t *grp, int blk)
{
	const __m128i m = _mm_set1_epi8(0x0f);
	__m128i b = _mm_loadl_epi64((const void *)(grp + 8 * blk));

	return _mm_unpacklo_epi8(_mm_and_si128(b, m), _mm_and_si128(_mm_srli_epi16(b, 4), m));
}

/* weights 8h .. 8h + 7 of a block: scale * q + bias, two roundings */
INL __m256 a4_8(__m128i q, int h, __m256 sc, __m256 bi)
{
	__m256 qf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(h ? _mm_srli_si128(q, 8) : q));

	return _mm256_add_ps(_mm256_mul_ps(qf, sc), bi);
}

/*
 * Whole rows [r, r + R) for tokens t < TT into y[t][r + a] (rows_direct of
 * hb_simd_block.h; c0 is 0, c1 the row's length and accm NULL there: the
 * blocked path has its own tiles, half_tile below).  bad[a] collects
 * whether row a met an affine4 group that does not decode.
 */
INL void tile_k(int type, int R, int TT, const struct hb_wmat *w, uint64_t r, const float *x, size_t ldx,
		size_t c0, size_t c1, float *accm, size_t acc_ld, unsigned char *bad, float *y, size_t ldy)
{
	const uint8_t *base = (const uint8_t *)w->data + r * w->row_bytes;
	size_t rb = (size_t)w->row_bytes, i = c0;
	__m256 acc[MAXR][MAXT][2];

	(void)accm, (void)acc_ld;

	UNROLL
	for (int a = 0; a < R; a++)
		UNROLL
		for (int b = 0; b < TT; b++)
			UNROLL
			for (int h = 0; h < 2; h++)
				acc[a][b][h] = _mm256_setzero_ps();
	if (type == HB_W_AFFINE4_G64) {
		for (size_t g = c0 / HB_A4_GROUP; g < c1 / HB_A4_GROUP; g++) {
			__m256 sc[MAXR], bi[MAXR];
			UNROLL
			for (int a = 0; a < R; a++) {
				const uint8_t *gp = base + (size_t)a * rb + g * HB_A4_GROUP_BYTES;
				/* software prefetch, as in hb_simd_avx512_tile.h */
				_mm_prefetch((const char *)(gp + 16 * HB_A4_GROUP_BYTES), _MM_HINT_T0);
				uint16_t s = hb_le16(gp + 32), o = hb_le16(gp + 34);
				if (hb_bf16_nonfinite(s) || hb_bf16_nonfinite(o))
					bad[a] = 1;
				sc[a] = _mm256_set1_ps(bf16f(s));
				bi[a] = _mm256_set1_ps(bf16f(o));
			}
			UNROLL
			for (int blk = 0; blk < 4; blk++) {
				__m128i q[MAXR];
				size_t c = g * HB_A4_GROUP + (size_t)blk * 16;
				UNROLL
				for (int a = 0; a < R; a++)
					q[a] = a4_bytes(base + (size_t)a * rb + g * HB_A4_GROUP_BYTES, blk);
				UNROLL
				for (int h = 0; h < 2; h++) {
					__m256 wv[MAXR];
					UNROLL
					for (int a = 0; a < R; a++)
						wv[a] = a4_8(q[a], h, sc[a], bi[a]);
					UNROLL
					for (int b = 0; b < TT; b++) {
						__m256 xv = _mm256_loadu_ps(x + (size_t)b * ldx + c + 8 * (size_t)h);
						UNROLL
						for (int a = 0; a < R; a++)
							acc[a][b][h] = _mm256_fmadd_ps(wv[a], xv, acc[a][b][h]);
					}
				}
			}
		}
	} else {
		for (; i + 16 <= c1; i += 16) {
			UNROLL
			for (int a = 0; a < R; a++)
				_mm_prefetch((const char *)(base + (size_t)a * rb) + (type == HB_W_F32 ? 4 : 2) * i + 1024,
					     _MM_HINT_T0);
			UNROLL
			for (int h = 0; h < 2; h++) {
				__m256 wv[MAXR];
				UNROLL
				for (int a = 0; a < R; a++)
					wv[a] = ld8(type, base + (size_t)a * rb, i + 8 * (size_t)h);
				UNROLL
				for (int b = 0; b < TT; b++) {
					__m256 xv = _mm256_loadu_ps(x + (size_t)b * ldx + i + 8 * (size_t)h);
					UNROLL
					for (int a = 0; a < R; a++)
						acc[a][b][h] = _mm256_fmadd_ps(wv[a], xv, acc[a][b][h]);
				}
			}
		}
		if (i < c1) {
			/* the tail (only in the last chunk) on zero-padded copies;
			 * lanes past n keep their sums */
			size_t m = c1 - i, es = type == HB_W_F32 ? 4 : 2;
			uint8_t wt[MAXR][64];
			float xt[MAXT][16];
			UNROLL
			for (int a = 0; a < R; a++) {
				memset(wt[a], 0, sizeof(wt[a]));
				memcpy(wt[a], base + (size_t)a * rb + es * i, es * m);
			}
			UNROLL
			for (int b = 0; b < TT; b++) {
				memset(xt[b], 0, sizeof(xt[b]));
				memcpy(xt[b], x + (size_t)b * ldx + i, 4 * m);
			}
			UNROLL
			for (int h = 0; h < 2; h++) {
				__m256 keep = _mm256_castsi256_ps(lanes_below((int)m - 8 * h));
				__m256 wv[MAXR];
				UNROLL
				for (int a = 0; a < R; a++)
					wv[a] = ld8(type, wt[a], 8 * (size_t)h);
				UNROLL
				for (int b = 0; b < TT; b++) {
					__m256 xv = _mm256_loadu_ps(xt[b] + 8 * h);
					UNROLL
					for (int a = 0; a < R; a++)
						acc[a][b][h] = _mm256_blendv_ps(
							acc[a][b][h], _mm256_fmadd_ps(wv[a], xv, acc[a][b][h]), keep);
				}
			}
		}
	}
	UNROLL
	for (int a = 0; a < R; a++)
		UNROLL
		for (int b = 0; b < TT; b++)
			y[(size_t)b * ldy + r + (size_t)a] = bad[a] ? NAN : tree(acc[a][b][0], acc[a][b][1]);
}

/* one tile of TT tokens, TT a run-time count 1..3 made a constant */
INL void tile_tt(int type, int R, int TT, const struct hb_wmat *w, uint64_t r, const float *x, size_t ldx,
		 size_t c0, size_t c1, float *accm, size_t acc_ld, unsigned char *bad, float *y, size_t ldy)
{
	if (TT >= 3)
		tile_k(type, R, 3, w, r, x, ldx, c0, c1, accm, acc_ld, bad, y, ldy);
	else if (TT == 2)
		tile_k(type, R, 2, w, r, x, ldx, c0, c1, accm, acc_ld, bad, y, ldy);
	else
		tile_k(type, R, 1, w, r, x, ldx, c0, c1, accm, acc_ld, bad, y, ldy);
}

/*
 * Rows [r, r + R), columns [c0, c1) widened into pan (row a at pan + a *
 * ld), each weight the float tile_k would widen in a register, and bad[a]
 * set for a row with an affine4 group that does not decode.
 */
INL void panel_fill(int type, const struct hb_wmat *w, uint64_t r, size_t R, size_t c0, size_t c1, float *pan,
		    size_t ld, unsigned char *bad)
{
	size_t rb = (size_t)w->row_bytes;

	for (size_t a = 0; a < R; a++) {
		const uint8_t *base = (const uint8_t *)w->data + (r + a) * rb;
		float *p = pan + a * ld;
		size_t i = c0;
		if (type == HB_W_AFFINE4_G64) {
			for (size_t g = c0 / HB_A4_GROUP; g < c1 / HB_A4_GROUP; g++) {
				const uint8_t *gp = base + g * HB_A4_GROUP_BYTES;
				uint16_t s = hb_le16(gp + 32), o = hb_le16(gp + 34);
				__m256 sc = _mm256_set1_ps(bf16f(s)), bi = _mm256_set1_ps(bf16f(o));
				_mm_prefetch((const char *)(gp + 16 * HB_A4_GROUP_BYTES), _MM_HINT_T0);
				if (hb_bf16_nonfinite(s) || hb_bf16_nonfinite(o))
					bad[a] = 1;
				UNROLL
				for (int blk = 0; blk < 4; blk++) {
					__m128i q = a4_bytes(gp, blk);
					UNROLL
					for (int h = 0; h < 2; h++)
						_mm256_storeu_ps(p + (g * HB_A4_GROUP - c0) + (size_t)blk * 16 + 8 * (size_t)h,
								 a4_8(q, h, sc, bi));
				}
			}
			continue;
		}
		for (; i + 8 <= c1; i += 8) {
			_mm_prefetch((const char *)base + 2 * i + 1024, _MM_HINT_T0);
			_mm256_storeu_ps(p + (i - c0), ld8(type, base, i));
		}
		if (i < c1) { /* fewer than 8: through a zero-padded copy */
			uint8_t wt[16] = {0};
			float f[8];
			memcpy(wt, base + 2 * i, 2 * (c1 - i));
			_mm256_storeu_ps(f, ld8(type, wt, 0));
			memcpy(p + (i - c0), f, 4 * (c1 - i));
		}
	}
}

/*
 * The blocked path's own tiles and rule, below, and its own block sizes.
 * AVX2's processors have 32 KiB of L1 data (Zen 2 and 3, Haswell to
 * Skylake), where AVX-512's 32 x 256 panel is the whole L1: a 4-row tile's
 * weights went back to L2 between the two halves of its lanes.  An 8 x 512
 * panel (16 KiB) and a tile's 3 activation rows (6 KiB) stay in L1, and a
 * half tile runs 32 steps between its lanes' trips to accm instead of 16.
 * bf16 with at most 12 tokens runs whole rows (rows_direct): the widening
 * repeated per 3 tokens costs less than the panel and the lanes' trips;
 * affine4's unpacking per 3 tokens costs more (direct only to MAXT).
 * Measured on a Zen 3 EPYC (2026-12-07, one core; the two builds in one
 * process, their calls alternated, median of 150-200 paired time ratios),
 * against hb_simd_block.h's sizes with the halves in two passes: bf16
 * 1.32x at T = 128 over 256 x 2560, 1.37x at 512 x 512; T = 20 1.37-1.45x,
 * T = 10 1.50-1.82x (1024 x 2560, 2048 x 640 and 2048 x 512, each weight
 * from memory once a call); affine4 1.25-1.30x, 1.31-1.40x, 1.27-1.43x
 * (and 2.35x and 1.96x over 256 columns, which ran direct before); f32
 * 1.18-1.62x and f16 1.34-1.71x over the same shapes (f32 0.98x at T =
 * 128 over 1024 x 256).
 * In the same way: RB 16 with KC 256 gained 0-8 % where these gained
 * 6-47 % (both with the halves together); direct rows to 6 tokens were
 * 7-13 % slower at T = 10, and to 20 tokens 0-11 % slower at T = 20; and
 * at T = 128 over 1024 x 256, the blocked path is 1.17x the direct one
 * (hb_simd_block.h's rule would run it direct: it has one chunk).
 */
#define HB_BLOCK_CHUNK_OWN
#define HB_DIRECT_OK_OWN
#define RB 8
#define KC 512
#define DIRECT_T 12
#include "hb_simd_block.h"

INL bool direct_ok(int type, size_t T, size_t n)
{
	(void)n;
	return T <= (type == HB_W_AFFINE4_G64 ? MAXT : DIRECT_T);
}

/*
 * The blocked path's tiles (hb_simd_block.h: float weights, a panel or an
 * f32 matrix, columns [c0, c1) of a chunk, lanes kept in accm between
 * chunks).  Lane j of an output sums the elements i = j mod 16 in
 * increasing i, and lanes 0-7 and 8-15 never meet before the tree, so a
 * chunk can run the half of lanes 0-7 over all its columns, then the half
 * of lanes 8-15: each output needs one register, not two, and a tile of
 * 4 rows x 3 tokens keeps 12 accumulators, 3 activations and a weight
 * vector in the 16 registers, 7 loads per 12 FMAs (the 2 x 3 tile of
 * both halves: 10 loads).  Same operations per lane, same bits.
 */
#define HR 4
#define HT 3

/* half h of rows [0, R) x tokens [0, TT); wp: row 0's weight of column c0 */
INL void half_tile(bool pan, int R, int TT, int h, const uint8_t *wp, size_t wld, const float *x, size_t ldx,
		   size_t c0, size_t c1, size_t n, float *accm, size_t acc_ld, const unsigned char *bad, float *y,
		   size_t ldy)
{
	size_t full = c0 + (c1 - c0) / 16 * 16, i = c0 + 8 * (size_t)h;
	__m256 acc[HR][HT];

	UNROLL
	for (int a = 0; a < R; a++)
		UNROLL
		for (int b = 0; b < TT; b++)
			acc[a][b] = c0 ? _mm256_loadu_ps(accm + (size_t)a * acc_ld + (size_t)b * 16 + 8 * h)
				       : _mm256_setzero_ps();
	for (; i < full; i += 16) {
		__m256 xv[HT];
		UNROLL
		for (int b = 0; b < TT; b++)
			xv[b] = _mm256_loadu_ps(x + (size_t)b * ldx + i);
		UNROLL
		for (int a = 0; a < R; a++) {
			const float *wr = (const float *)(wp + (size_t)a * wld) + (i - c0);
			if (!pan) /* an f32 matrix streams from memory: 1 KiB ahead */
				_mm_prefetch((const char *)wr + 1024, _MM_HINT_T0);
			__m256 wv = _mm256_loadu_ps(wr);
			UNROLL
			for (int b = 0; b < TT; b++)
				acc[a][b] = _mm256_fmadd_ps(wv, xv[b], acc[a][b]);
		}
	}
	int k = (int)(c1 - full) - 8 * h; /* this half's lanes of a ragged tail */
	if (k > 0) {
		__m256i m = lanes_below(k);
		__m256 keep = _mm256_castsi256_ps(m);
		i = full + 8 * (size_t)h;
		UNROLL
		for (int a = 0; a < R; a++) {
			__m256 wv = _mm256_maskload_ps((const float *)(wp + (size_t)a * wld) + (i - c0), m);
			UNROLL
			for (int b = 0; b < TT; b++) {
				__m256 xv = _mm256_maskload_ps(x + (size_t)b * ldx + i, m);
				acc[a][b] = _mm256_blendv_ps(acc[a][b], _mm256_fmadd_ps(wv, xv, acc[a][b]), keep);
			}
		}
	}
	if (c1 < n || h == 0) {
		UNROLL
		for (int a = 0; a < R; a++)
			UNROLL
			for (int b = 0; b < TT; b++)
				_mm256_storeu_ps(accm + (size_t)a * acc_ld + (size_t)b * 16 + 8 * h, acc[a][b]);
		return;
	}
	UNROLL
	for (int a = 0; a < R; a++)
		UNROLL
		for (int b = 0; b < TT; b++)
			y[(size_t)b * ldy + (size_t)a] =
				bad[a] ? NAN : tree(_mm256_loadu_ps(accm + (size_t)a * acc_ld + (size_t)b * 16), acc[a][b]);
}

/* R and TT, run-time counts 1..HR and 1..HT, made constants */
INL void half_tile_rt(bool pan, int R, int TT, int h, const uint8_t *wp, size_t wld, const float *x, size_t ldx,
		      size_t c0, size_t c1, size_t n, float *accm, size_t acc_ld, const unsigned char *bad, float *y,
		      size_t ldy)
{
#define HALF(RR, TTT) half_tile(pan, RR, TTT, h, wp, wld, x, ldx, c0, c1, n, accm, acc_ld, bad, y, ldy)
#define HALF_R(RR)                  \
	do {                        \
		if (TT >= 3)        \
			HALF(RR, 3); \
		else if (TT == 2)   \
			HALF(RR, 2); \
		else                \
			HALF(RR, 1); \
	} while (0)
	if (R >= 4)
		HALF_R(4);
	else if (R == 3)
		HALF_R(3);
	else if (R == 2)
		HALF_R(2);
	else
		HALF_R(1);
#undef HALF_R
#undef HALF
}

/*
 * A tile's two halves run one after the other, while its weight rows and
 * activations are in L1 (a 64-byte line holds both halves of 16 columns);
 * half 1 of the last chunk reads half 0's lanes from accm for the tree.
 */
INL void block_chunk(int tt, const struct hb_wmat *tw, uint64_t rb0, uint64_t rb1, uint64_t o, size_t tb0,
		     size_t tb1, const float *x, size_t ldx, size_t c0, size_t c1, float *accm, unsigned char *bad,
		     float *y, size_t ldy)
{
	bool pan = tt == HB_W_PANEL;
	size_t wld = (size_t)tw->row_bytes, n = (size_t)tw->cols;
	/* a panel holds the chunk's columns from 0; a matrix from column 0 */
	size_t wc0 = pan ? 0 : c0;

	for (size_t t = tb0; t < tb1; t += HT) {
		int TT = tb1 - t < HT ? (int)(tb1 - t) : HT;
		for (uint64_t r = rb0; r < rb1;) {
			size_t ro = (size_t)(r - rb0);
			int R = rb1 - r < HR ? (int)(rb1 - r) : HR;
			const uint8_t *wp = (const uint8_t *)tw->data + (size_t)(r - o) * wld + 4 * wc0;
			for (int h = 0; h < 2; h++)
				half_tile_rt(pan, R, TT, h, wp, wld, x + t * ldx, ldx, c0, c1, n,
					     accm + (ro * TB + (t - tb0)) * 16, TB * 16, bad + ro, y + t * ldy + r, ldy);
			r += (uint64_t)R;
		}
	}
}

/*
 * Decode (one token) of a bf16 matrix: weight-bound.  tile_k read about 9
 * GB/s a core where a plain vector read of the same mapping does 18; our
 * reading (no hardware counters on the machine it was measured on) is
 * that the cache lines in flight are capped by the load queue, which
 * tile_k fills with about 8 loads per 64-byte line: two 128-bit loads per
 * 16 weights, two activation loads per 16 columns shared by only 2 rows,
 * and a software prefetch per row.  Here 16 weights come in one 256-bit
 * load, widened by a qword permute and two word interleaves with zero
 * (bf16 to float is the 16 bits placed above 16 zero bits) into the very
 * registers ld8 gives for columns i and i + 8, and 4 rows share the
 * activation loads: 3 loads a line.  The FMA chains and the tree are
 * tile_k's, so the bits are too.
 *
 * A software prefetch a line per row, DECODE_AHEAD bytes of tiles on (into
 * the next matrix when the rows run out: a prefetch never faults): on a
 * Zen 3 EPYC (2-core VM, 2026-12-07), where the hardware's streams alone
 * gave T = 1 over a 512 MiB matrix 0.78 of the stream read, it reads at
 * 0.92-1.03 (bench/kernels); over 256 x 512 and 512 x 256 expert matrices
 * from memory, one core, 8.4 -> 9.6 GB/s best (4 KiB ahead 9.1-9.9, 16 KiB
 * 8.9-9.6); hb-run decode, one thread, A B B A: the bench's small model
 * 53.3 -> 60.8 tok/s median, the real widths (bf16) 10.3 -> 11.8.
 */
INL void bf16_16(const uint8_t *p, __m256 *lo, __m256 *hi)
{
	__m256i v = _mm256_permute4x64_epi64(_mm256_loadu_si256((const void *)p), 0xd8);

	*lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), v));
	*hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), v));
}

#define DR 4
#define DECODE_AHEAD 8192

/* rows [r, r + R) of a bf16 matrix for one token, whole rows */
INL void decode_bf16_tile(int R, const struct hb_wmat *w, uint64_t r, const float *x, float *y)
{
	const uint8_t *base = (const uint8_t *)w->data + r * w->row_bytes;
	size_t rb = (size_t)w->row_bytes, n = (size_t)w->cols, i = 0;
	const uint8_t *pf = base + (DECODE_AHEAD + DR * rb - 1) / (DR * rb) * DR * rb;
	__m256 acc[DR][2];

	UNROLL
	for (int a = 0; a < R; a++)
		acc[a][0] = acc[a][1] = _mm256_setzero_ps();
	for (; i + 16 <= n; i += 16) {
		__m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
		UNROLL
		for (int a = 0; a < R; a++) {
			__m256 w0, w1;
			if (!(i & 31))
				_mm_prefetch((const char *)(pf + (size_t)a * rb + 2 * i), _MM_HINT_T0);
			bf16_16(base + (size_t)a * rb + 2 * i, &w0, &w1);
			acc[a][0] = _mm256_fmadd_ps(w0, x0, acc[a][0]);
			acc[a][1] = _mm256_fmadd_ps(w1, x1, acc[a][1]);
		}
	}
	if (i < n) { /* tile_k's tail: zero-padded copies, lanes past n kept */
		size_t m = n - i;
		float xt[16] = {0};
		memcpy(xt, x + i, 4 * m);
		UNROLL
		for (int a = 0; a < R; a++) {
			uint8_t wt[32] = {0};
			__m256 wv[2];
			memcpy(wt, base + (size_t)a * rb + 2 * i, 2 * m);
			bf16_16(wt, &wv[0], &wv[1]);
			UNROLL
			for (int h = 0; h < 2; h++) {
				__m256 keep = _mm256_castsi256_ps(lanes_below((int)m - 8 * h));
				acc[a][h] = _mm256_blendv_ps(
					acc[a][h], _mm256_fmadd_ps(wv[h], _mm256_loadu_ps(xt + 8 * h), acc[a][h]), keep);
			}
		}
	}
	UNROLL
	for (int a = 0; a < R; a++)
		y[r + (size_t)a] = tree(acc[a][0], acc[a][1]);
}

static void decode_bf16(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, float *y)
{
	uint64_t r = r0;

	for (; r + DR <= r1; r += DR)
		decode_bf16_tile(DR, w, r, x, y);
	switch (r1 - r) {
	case 3:
		decode_bf16_tile(3, w, r, x, y);
		break;
	case 2:
		decode_bf16_tile(2, w, r, x, y);
		break;
	case 1:
		decode_bf16_tile(1, w, r, x, y);
		break;
	}
}

/*
 * Decode (one token) of an affine4-g64 matrix: tile_k spent about 9
 * operations on each 8 weights' nibbles and values (unpack, widen, convert,
 * multiply, add) beside one FMA, so it ran at 0.22 of the stream read.
 * Here the 8 nibbles of half a block come from one broadcast 32-bit load,
 * shifted per lane by 0, 4, ..., 28 and masked (weight k of the half is
 * nibble k: low nibble first, as a4_bytes orders them), and scale * q +
 * bias is one FMA where that is the same value: scale is a bf16 (8
 * significant bits) and q < 16, so scale * q is exact in float32 unless it
 * overflows, and with |scale| < 2^124 (exponent field below 251) it cannot;
 * a group with a larger scale in any of the tile's rows takes the multiply
 * and the add, as tile_k does.  A4R rows share the activation loads; a
 * prefetch a line per row a tile DECODE_AHEAD on, as decode_bf16_tile.
 * The FMA chains and the tree are tile_k's, so the bits are too.
 * bench/kernels, one core of the Zen 3 VM, T = 1 over 512 MiB, of the
 * stream read (best / median, three interleaved runs): tile_k 0.20-0.22;
 * this with 1 row 0.27-0.39, 2 rows 0.29-0.37, 3 rows 0.20-0.24 and 4 rows
 * 0.21-0.28 (their accumulators, scales and biases spill past the 16
 * registers even with the scales broadcast from memory).
 */
#define A4R 2
INL __m256 a4_nibbles8(const uint8_t *p)
{
	const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
	uint32_t u;

	memcpy(&u, p, 4); /* x86: little-endian, as the format */
	__m256i v = _mm256_set1_epi32((int)u);

	return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(v, shifts), _mm256_set1_epi32(0x0f)));
}

INL void decode_a4_tile(int R, const struct hb_wmat *w, uint64_t r, const float *x, float *y)
{
	const uint8_t *base = (const uint8_t *)w->data + r * w->row_bytes;
	size_t rb = (size_t)w->row_bytes, groups = (size_t)w->cols / HB_A4_GROUP;
	const uint8_t *pf = base + (DECODE_AHEAD + A4R * rb - 1) / (A4R * rb) * A4R * rb;
	unsigned char bad[A4R] = {0};
	__m256 acc[A4R][2];

	UNROLL
	for (int a = 0; a < R; a++)
		acc[a][0] = acc[a][1] = _mm256_setzero_ps();
	for (size_t g = 0; g < groups; g++) {
		float sc[A4R], bi[A4R]; /* broadcast from memory at each use: registers are the accumulators' */
		bool fused = true;
		UNROLL
		for (int a = 0; a < R; a++) {
			const uint8_t *gp = base + (size_t)a * rb + g * HB_A4_GROUP_BYTES;
			uint16_t s = hb_le16(gp + 32), o = hb_le16(gp + 34);
			_mm_prefetch((const char *)(pf + (size_t)a * rb + g * HB_A4_GROUP_BYTES), _MM_HINT_T0);
			if (hb_bf16_nonfinite(s) || hb_bf16_nonfinite(o))
				bad[a] = 1;
			fused = fused && ((s >> 7) & 0xff) < 251;
			sc[a] = bf16f(s);
			bi[a] = bf16f(o);
		}
		UNROLL
		for (int blk = 0; blk < 4; blk++) {
			size_t c = g * HB_A4_GROUP + (size_t)blk * 16;
			UNROLL
			for (int h = 0; h < 2; h++) {
				__m256 xv = _mm256_loadu_ps(x + c + 8 * (size_t)h);
				UNROLL
				for (int a = 0; a < R; a++) {
					__m256 q = a4_nibbles8(base + (size_t)a * rb + g * HB_A4_GROUP_BYTES + 8 * blk + 4 * h);
					__m256 vs = _mm256_broadcast_ss(&sc[a]), vb = _mm256_broadcast_ss(&bi[a]);
					__m256 wv = fused ? _mm256_fmadd_ps(q, vs, vb) : _mm256_add_ps(_mm256_mul_ps(q, vs), vb);
					acc[a][h] = _mm256_fmadd_ps(wv, xv, acc[a][h]);
				}
			}
		}
	}
	UNROLL
	for (int a = 0; a < R; a++)
		y[r + (size_t)a] = bad[a] ? NAN : tree(acc[a][0], acc[a][1]);
}

static void decode_a4(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, float *y)
{
	uint64_t r = r0;

	for (; r + A4R <= r1; r += A4R)
		decode_a4_tile(A4R, w, r, x, y);
	for (; r < r1; r++) /* fewer than a tile: one row at a time */
		decode_a4_tile(1, w, r, x, y);
}

/*
 * Each type's direct and blocked paths are functions of their own: inlined
 * together, the register allocator's choices for one moved with the other's
 * changes (the affine4 direct tile at T = 3 ran 1.45x slower once the
 * blocked path's block sizes changed, with no change of its own).
 */
#define ONE_PATH(name, fn, type)                                                                                    \
	static __attribute__((noinline)) void name(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, \
						   size_t ldx, size_t T, float *y, size_t ldy)                        \
	{                                                                                                            \
		fn(type, w, r0, r1, x, ldx, T, y, ldy);                                                              \
	}
#define PATHS(name, type)                                                                                            \
	ONE_PATH(name##_direct, rows_direct, type)                                                                   \
	ONE_PATH(name##_blocked, rows_blocked, type)                                                                 \
	static void name(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx, size_t T,   \
			 float *y, size_t ldy)                                                                       \
	{                                                                                                            \
		if (direct_ok(type, T, (size_t)w->cols))                                                             \
			name##_direct(w, r0, r1, x, ldx, T, y, ldy);                                                 \
		else                                                                                                 \
			name##_blocked(w, r0, r1, x, ldx, T, y, ldy);                                                \
	}
PATHS(rows_f32, HB_W_F32)
PATHS(rows_bf16_many, HB_W_BF16)
PATHS(rows_f16, HB_W_F16)
PATHS(rows_a4_many, HB_W_AFFINE4_G64)
#undef PATHS
#undef ONE_PATH

static void rows_bf16(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx, size_t T,
		      float *y, size_t ldy)
{
	if (T == 1)
		decode_bf16(w, r0, r1, x, y);
	else
		rows_bf16_many(w, r0, r1, x, ldx, T, y, ldy);
}

static void rows_a4(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx, size_t T,
		    float *y, size_t ldy)
{
	if (T == 1 && !(w->cols % HB_A4_GROUP))
		decode_a4(w, r0, r1, x, y);
	else
		rows_a4_many(w, r0, r1, x, ldx, T, y, ldy);
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
	struct hb_wmat w = { a, HB_W_F32, 1, (uint64_t)n, (uint64_t)n * 4 };
	float y;

	rows_f32(&w, 0, 1, b, n, 1, &y, 1);
	return y;
}

#include "hb_simd_gdn.h"

static const struct hb_kern_ops ops = { rows, dot, gdn_heads, hb_kern_avx2_silu_mul, hb_kern_avx2_sigmoid };

const struct hb_kern_ops *hb_kern_ops_avx2(void)
{
	return &ops;
}

#else

const struct hb_kern_ops *hb_kern_ops_avx2(void)
{
	return NULL;
}

#endif
