/*
 * hb_simd_avx512_tile.h: the AVX-512 register tiles of hb_simd_avx512.c,
 * shared by its two compilations (with and without AVX512-VBMI, which only
 * changes how affine4 nibbles become table indices).  The includer defines
 * struct a4s, a4_prep() and a4_16() first; see hb_simd_avx512.c for the
 * canonical-order argument.  Internal to libkern/backend/simd.
 */
#ifndef HB_SIMD_AVX512_TILE_H
#define HB_SIMD_AVX512_TILE_H

/* the tile loops must unroll completely, or the accumulators live in memory */
#define UNROLL _Pragma("GCC unroll 8")
#define MAXR 4
#define MAXT 6
/* up to 12 tokens run as whole-row tiles (two token tiles re-reading four
 * rows from L1) rather than through panels: bench T = 10 0.33 -> 0.37 */
#define DIRECT_T 12
/* whole rows are prefetched a tile at least this many bytes on: a tile of
 * short rows (the bench model's 512 and 256 columns) one tile on was too
 * near to hide memory (bf16 T = 1 over 256 x 512 and 512 x 256 matrices
 * from memory: 18.4 -> 20.0 GB/s median on one core) */
#define ROWS_AHEAD 8192

INL float tree(__m512 v)
{
	__m256 lo = _mm512_castps512_ps256(v);
	__m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
	__m256 s8 = _mm256_add_ps(lo, hi);
	__m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
	__m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
	return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/*
 * tree() of four registers at once, as four floats in order: the same
 * additions of the same lanes (each level pairs lane i with lane i + 8,
 * + 4, + 2, + 1 of one register, the lower lane first, as tree() does),
 * with the registers' halves gathered by shuffles so that one addition
 * serves two or four of them: 14 operations where four trees take about
 * 36 (a 4 x 6 tile over 256 columns spent a quarter of its vector
 * operations in its trees).
 */
INL __m128 tree4(__m512 v0, __m512 v1, __m512 v2, __m512 v3)
{
	/* 256-bit halves: [v0 lo | v1 lo] + [v0 hi | v1 hi] */
	__m512 s01 = _mm512_add_ps(_mm512_shuffle_f32x4(v0, v1, 0x44), _mm512_shuffle_f32x4(v0, v1, 0xee));
	__m512 s23 = _mm512_add_ps(_mm512_shuffle_f32x4(v2, v3, 0x44), _mm512_shuffle_f32x4(v2, v3, 0xee));
	/* 128-bit halves of each: block k of s4 is register k's four lanes */
	__m512 s4 = _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88), _mm512_shuffle_f32x4(s01, s23, 0xdd));
	/* lane i + lane i + 2, then lane 0 + lane 1, within each block */
	__m512 s2 = _mm512_add_ps(s4, _mm512_permute_ps(s4, 0xee));
	__m512 s1 = _mm512_add_ps(s2, _mm512_permute_ps(s2, 0x55));
	const __m512i first = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);

	return _mm512_castps512_ps128(_mm512_permutexvar_ps(first, s1));
}

/* 16 weights from element i (bf16/f16/f32 rows, a float panel) */
INL __m512 ld16(int type, const uint8_t *p, size_t i)
{
	const void *q = p + (type == HB_W_F32 || type == HB_W_PANEL ? 4 : 2) * i;

	if (type == HB_W_F32 || type == HB_W_PANEL)
		return _mm512_loadu_ps(q);
	if (type == HB_W_BF16)
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(q)), 16));
	return _mm512_cvtph_ps(_mm256_loadu_si256(q));
}

/* the same for the k lanes of a ragged tail, zero past it (never read) */
INL __m512 ld16_tail(int type, const uint8_t *p, size_t i, __mmask16 k)
{
	const void *q = p + (type == HB_W_F32 || type == HB_W_PANEL ? 4 : 2) * i;

	if (type == HB_W_F32 || type == HB_W_PANEL)
		return _mm512_maskz_loadu_ps(k, q);
	if (type == HB_W_BF16)
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, q)), 16));
	return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, q));
}

/*
 * Token b's activations at column c (a multiple of 16): rows of ldx floats,
 * or packed (xpk), each 16-column block's TT token vectors side by side so
 * every load is the tile's one pointer plus a constant (as rows, the TT
 * token pointers did not fit the general registers beside the weight rows'
 * and were kept in vector registers: bench bf16 T = 5 from L2 0.43 of the
 * FMA peak where T = 6 ran at 0.62).
 */
#define XAT(b, c) (xpk ? x + ((c) / 16 * (size_t)TT + (size_t)(b)) * 16 : x + (size_t)(b) * ldx + (c))

/*
 * Columns [c0, c1) of y[t][r + a] for a < R, t < TT.  The 16 lanes of each
 * output live in accm between calls (accm + a * acc_ld + b * 16; a store
 * and a load of float lanes are exact, so splitting the columns into chunks
 * changes no bit); c0 == 0 starts them at +0, c1 == cols finishes them
 * into y through the tree.  accm NULL: the whole row in one call.  bad[a]
 * collects whether row a met an affine4 group that does not decode.
 * type HB_W_PANEL: w is a widened panel holding columns [c0, c1) only.
 */
INL void tile_k(int type, int R, int TT, const struct hb_wmat *w, uint64_t r, const float *x, size_t ldx, int xpk,
		size_t c0, size_t c1, float *accm, size_t acc_ld, unsigned char *bad, float *y, size_t ldy)
{
	const uint8_t *base = (const uint8_t *)w->data + r * w->row_bytes;
	size_t n = (size_t)w->cols, rb = (size_t)w->row_bytes, i = c0;
	size_t wo = type == HB_W_PANEL ? c0 : 0; /* the weights' column origin */
	/* whole rows: the tile prefetched is `ahead` rows on (ROWS_AHEAD) */
	size_t ahead = (ROWS_AHEAD + (size_t)R * rb - 1) / ((size_t)R * rb) * (size_t)R;
	__m512 acc[MAXR][MAXT];

	UNROLL
	for (int a = 0; a < R; a++)
		UNROLL
		for (int b = 0; b < TT; b++)
			acc[a][b] = accm && c0 ? _mm512_loadu_ps(accm + (size_t)a * acc_ld + (size_t)b * 16)
					       : _mm512_setzero_ps();
	if (type == HB_W_AFFINE4_G64) {
		/* row by row within a group: one table live at a time, so the
		 * tile can be as wide as for the other types */
		for (size_t g = c0 / HB_A4_GROUP; g < c1 / HB_A4_GROUP; g++) {
UNROLL
			for (int a = 0; a < R; a++) {
				struct a4s q;
				/* 16 groups (576 bytes) ahead: the four rows' streams
				 * outran the hardware prefetcher (3.1 GB/s out of cache
				 * vs 7.6 in cache on one core, T = 1) */
				_mm_prefetch((const char *)(base + (size_t)a * rb + (g + 16) * HB_A4_GROUP_BYTES), _MM_HINT_T0);
				if (!a4_prep(base + (size_t)a * rb + g * HB_A4_GROUP_BYTES, &q))
					bad[a] = 1;
UNROLL
				for (int blk = 0; blk < 4; blk++) {
					__m512 wv = a4_16(&q, blk);
					size_t c = g * HB_A4_GROUP + (size_t)blk * 16;
UNROLL
					for (int b = 0; b < TT; b++)
						acc[a][b] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(XAT(b, c)),
									    acc[a][b]);
				}
			}
		}
	} else {
		for (; i + 16 <= c1; i += 16) {
			__m512 wv[MAXR];
			UNROLL
			for (int a = 0; a < R; a++) {
				/* whole rows (decode, small batches): a later tile's
				 * rows at this column, once a cache line, so a tile
				 * starts warm instead of on four cold streams (bench
				 * bf16 T = 6 from memory: 0.33 -> 0.41 of the FMA
				 * peak); a chunk of a blocked row: 1 KiB ahead */
				if (type != HB_W_PANEL && !accm && (type == HB_W_F32 || !(i & 31)))
					_mm_prefetch((const char *)(base + (ahead + (size_t)a) * rb) + (type == HB_W_F32 ? 4 : 2) * i,
						     _MM_HINT_T0);
				else if (type != HB_W_PANEL && accm)
					_mm_prefetch((const char *)(base + (size_t)a * rb) + (type == HB_W_F32 ? 4 : 2) * i + 1024,
						     _MM_HINT_T0);
				wv[a] = ld16(type, base + (size_t)a * rb, i - wo);
			}
			UNROLL
			for (int b = 0; b < TT; b++) {
				__m512 xv = _mm512_loadu_ps(XAT(b, i));
				UNROLL
				for (int a = 0; a < R; a++)
					acc[a][b] = _mm512_fmadd_ps(wv[a], xv, acc[a][b]);
			}
		}
		if (i < c1) { /* the ragged tail: only in the last chunk */
			__mmask16 k = (__mmask16)((1u << (c1 - i)) - 1);
			__m512 wv[MAXR];
			UNROLL
			for (int a = 0; a < R; a++)
				wv[a] = ld16_tail(type, base + (size_t)a * rb, i - wo, k);
			UNROLL
			for (int b = 0; b < TT; b++) {
				__m512 xv = _mm512_maskz_loadu_ps(k, XAT(b, i));
				UNROLL
				for (int a = 0; a < R; a++)
					acc[a][b] = _mm512_mask3_fmadd_ps(wv[a], xv, acc[a][b], k);
			}
		}
	}
	if (accm && c1 < n) {
		UNROLL
		for (int a = 0; a < R; a++)
			UNROLL
			for (int b = 0; b < TT; b++)
				_mm512_storeu_ps(accm + (size_t)a * acc_ld + (size_t)b * 16, acc[a][b]);
		return;
	}
	if (R == 4) {
		UNROLL
		for (int b = 0; b < TT; b++) {
			float *yb = y + (size_t)b * ldy + r;
			_mm_storeu_ps(yb, tree4(acc[0][b], acc[1][b], acc[2][b], acc[3][b]));
			UNROLL
			for (int a = 0; a < 4; a++)
				if (bad[a])
					yb[a] = NAN;
		}
		return;
	}
	UNROLL
	for (int a = 0; a < R; a++)
		UNROLL
		for (int b = 0; b < TT; b++)
			y[(size_t)b * ldy + r + (size_t)a] = bad[a] ? NAN : tree(acc[a][b]);
}

/* one tile of TT tokens, TT a run-time count 1..6 made a constant; x as
 * rows of ldx floats (xpk 0) or packed (xpk 1, see rows_direct) */
INL void tile_x(int type, int R, int TT, const struct hb_wmat *w, uint64_t r, const float *x, size_t ldx, int xpk,
		size_t c0, size_t c1, float *accm, size_t acc_ld, unsigned char *bad, float *y, size_t ldy)
{
	switch (TT) {
	case 1:
		tile_k(type, R, 1, w, r, x, ldx, xpk, c0, c1, accm, acc_ld, bad, y, ldy);
		break;
	case 2:
		tile_k(type, R, 2, w, r, x, ldx, xpk, c0, c1, accm, acc_ld, bad, y, ldy);
		break;
	case 3:
		tile_k(type, R, 3, w, r, x, ldx, xpk, c0, c1, accm, acc_ld, bad, y, ldy);
		break;
	case 4:
		tile_k(type, R, 4, w, r, x, ldx, xpk, c0, c1, accm, acc_ld, bad, y, ldy);
		break;
	case 5:
		tile_k(type, R, 5, w, r, x, ldx, xpk, c0, c1, accm, acc_ld, bad, y, ldy);
		break;
	default:
		tile_k(type, R, 6, w, r, x, ldx, xpk, c0, c1, accm, acc_ld, bad, y, ldy);
		break;
	}
}

INL void tile_tt(int type, int R, int TT, const struct hb_wmat *w, uint64_t r, const float *x, size_t ldx,
		 size_t c0, size_t c1, float *accm, size_t acc_ld, unsigned char *bad, float *y, size_t ldy)
{
	tile_x(type, R, TT, w, r, x, ldx, 0, c0, c1, accm, acc_ld, bad, y, ldy);
}

/*
 * Rows [r, r + R), columns [c0, c1) widened into pan (row a at pan + a *
 * ld), each weight the float the tiles above would widen in a register,
 * and bad[a] set for a row with an affine4 group that does not decode.
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
				struct a4s q;
				_mm_prefetch((const char *)(base + (g + 16) * HB_A4_GROUP_BYTES), _MM_HINT_T0);
				if (!a4_prep(base + g * HB_A4_GROUP_BYTES, &q))
					bad[a] = 1;
UNROLL
				for (int blk = 0; blk < 4; blk++)
					_mm512_storeu_ps(p + (g * HB_A4_GROUP - c0) + (size_t)blk * 16, a4_16(&q, blk));
			}
			continue;
		}
		for (; i + 16 <= c1; i += 16) {
			_mm_prefetch((const char *)base + 2 * i + 1024, _MM_HINT_T0);
			_mm512_storeu_ps(p + (i - c0), ld16(type, base, i));
		}
		if (i < c1) {
			__mmask16 k = (__mmask16)((1u << (c1 - i)) - 1);
			_mm512_mask_storeu_ps(p + (i - c0), k, ld16_tail(type, base, i, k));
		}
	}
}

/*
 * Affine4 rows for one token (decode), with no shuffle to make the nibble
 * indices.  A block's 16 nibbles are 8 bytes, broadcast to every 64-bit
 * lane by the load itself; a per-dword shift (VPSRLVD, not the shuffle
 * port VPERMPS needs) leaves nibble m of the low dword in lane 2m and
 * nibble 8 + m of the high dword in lane 2m + 1.  So register lane j holds
 * element pi(j) of its block, pi(2m) = m, pi(2m + 1) = 8 + m, in every
 * block: lane j is still the chain of canonical lane pi(j) in increasing
 * element order, once the activations are laid out the same way (xp,
 * permuted once a call) and the lanes are put back in canonical order
 * before the tree.  Same products, same chains, same tree: same bits.
 * A row with a group that does not decode is found from its sum (below)
 * rather than by a check a group: one vector operation fewer in ~5.
 */
#define A4_ONE_MAXCOLS 4096
#define A4_AHEAD ROWS_AHEAD

/* whether every group of an affine4 row has a finite scale and bias */
static bool a4_row_decodes(const uint8_t *row, size_t groups)
{
	for (size_t g = 0; g < groups; g++) {
		const uint8_t *gp = row + g * HB_A4_GROUP_BYTES;
		if (hb_bf16_nonfinite(hb_le16(gp + 32)) || hb_bf16_nonfinite(hb_le16(gp + 34)))
			return false;
	}
	return true;
}

INL void a4_one_tile(int R, const struct hb_wmat *w, uint64_t r, size_t ahead, const float *xp, float *y)
{
	const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	const __m512i shift = _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);
	const __m512i canon = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
	const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
	const uint8_t *base = (const uint8_t *)w->data + r * w->row_bytes;
	size_t rb = (size_t)w->row_bytes, groups = (size_t)w->cols / HB_A4_GROUP;
	/* the R rows `ahead` rows on are contiguous: one pass over them, R
	 * groups' bytes a group, points at most a line apart so every line is
	 * fetched (every other group of each row, as before, skipped one line
	 * in nine: bench 640 x 2560 from memory, with the row check below,
	 * 31 -> 37.5 GFLOP/s) */
	const char *pf = (const char *)(base + ahead * rb);
	__m512 acc[MAXR];

	UNROLL
	for (int a = 0; a < R; a++)
		acc[a] = _mm512_setzero_ps();
	for (size_t g = 0; g < groups; g++, pf += R * HB_A4_GROUP_BYTES) {
		UNROLL
		for (int j = 0; j * 64 < R * HB_A4_GROUP_BYTES; j++)
			_mm_prefetch(pf + j * 64, _MM_HINT_T0);
		UNROLL
		for (int a = 0; a < R; a++) {
			const uint8_t *gp = base + (size_t)a * rb + g * HB_A4_GROUP_BYTES;
			int32_t sbits;
			__m512i sb;
			__m512 lut;
			memcpy(&sbits, gp + 32, 4); /* scale bits low, bias bits high */
			sb = _mm512_set1_epi32(sbits);
			lut = _mm512_add_ps(_mm512_mul_ps(iota, _mm512_castsi512_ps(_mm512_slli_epi32(sb, 16))),
					    _mm512_castsi512_ps(_mm512_and_si512(sb, hi)));
			UNROLL
			for (int blk = 0; blk < 4; blk++) {
				int64_t v;
				memcpy(&v, gp + 8 * blk, 8);
				__m512i q = _mm512_srlv_epi32(_mm512_set1_epi64(v), shift);
				acc[a] = _mm512_fmadd_ps(_mm512_permutexvar_ps(q, lut),
							 _mm512_load_ps(xp + g * HB_A4_GROUP + (size_t)blk * 16), acc[a]);
			}
		}
	}
	/* a group whose scale or bias is not finite makes all its 64 weights
	 * inf or NaN (0 x inf is NaN), so the row's sum is not finite: only
	 * then are its scales looked at, and a row that does not decode is NaN */
	if (R == 4)
		_mm_storeu_ps(y + r, tree4(_mm512_permutexvar_ps(canon, acc[0]), _mm512_permutexvar_ps(canon, acc[1]),
					   _mm512_permutexvar_ps(canon, acc[2]), _mm512_permutexvar_ps(canon, acc[3])));
	else
		UNROLL
		for (int a = 0; a < R; a++)
			y[r + (size_t)a] = tree(_mm512_permutexvar_ps(canon, acc[a]));
	UNROLL
	for (int a = 0; a < R; a++)
		if (!isfinite(y[r + (size_t)a]) && !a4_row_decodes(base + (size_t)a * rb, groups))
			y[r + (size_t)a] = NAN;
}

/* rows [r0, r1) of an affine4 matrix times one token; false (nothing
 * done) when the columns are more than the permuted copy holds */
INL bool rows_a4_one(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, float *y)
{
	const __m512i pi = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
	float xp[A4_ONE_MAXCOLS] __attribute__((aligned(64)));
	size_t n = (size_t)w->cols, rb = (size_t)w->row_bytes;
	/* prefetch a tile's worth of rows at least A4_AHEAD bytes on: a short
	 * row (a small expert) puts the next tile too near to hide memory */
	size_t ahead = (A4_AHEAD + MAXR * rb - 1) / (MAXR * rb) * MAXR;

	if (n > A4_ONE_MAXCOLS)
		return false;
	for (size_t c = 0; c < n; c += 16)
		_mm512_store_ps(xp + c, _mm512_permutexvar_ps(pi, _mm512_loadu_ps(x + c)));
	for (uint64_t r = r0; r < r1;) {
		if (r + MAXR <= r1) {
			a4_one_tile(MAXR, w, r, ahead, xp, y);
			r += MAXR;
		} else {
			a4_one_tile(1, w, r, ahead, xp, y);
			r++;
		}
	}
	return true;
}

#define HB_ROWS_DIRECT_OWN
#define HB_DIRECT_OK_OWN
#include "hb_simd_block.h"

/*
 * rows_direct takes rows in blocks of about this many weight bytes, every
 * token tile over one block before the next: a row tile then writes its
 * outputs beside the previous tile's, in the same lines.  Row by row over
 * all token tiles instead, a short row's outputs (one 16-byte store a
 * token per tile) went to T lines a tile, all in one L1 set when the
 * output rows are a multiple of 4 KiB apart (ldy 2048 or 10240 floats),
 * and the 32-column hyper-connection product ran at 17 GFLOP/s.  Long
 * rows make one tile a block: the order of old.
 */
#define DIRECT_BLOCK (16u << 10)
/* ... when there are more tokens than this: with two token tiles, blocks
 * cost bf16 T = 10 over 256 x 512 + 512 x 256 from memory 10 % (the
 * second tile's pass over a block reads nothing from memory) */
#define DIRECT_BLOCK_T 24

/* the packed activations rows_direct keeps on its stack (256 KiB) */
#define XPACK_FLOATS (64 * 1024)
/* bf16, f16 and f32 (widened by a cheap shift or convert, again for every
 * token tile) run whole rows up to this many tokens when they pack in one
 * group, rather than through panels: bench bf16 256 x 512 from memory, T =
 * 18 0.40 -> 0.52 of the FMA peak, 640 x 2560 T = 24 0.55 -> 0.65; affine4
 * (a table lookup a weight) keeps DIRECT_T, where the panel decodes once */
#define DIRECT_T_WIDE 24

/* columns n, T tokens: whether rows_t takes the whole-row tiles */
INL bool direct_ok(int type, size_t T, size_t n)
{
	return T <= DIRECT_T || n <= KC ||
	       (type != HB_W_AFFINE4_G64 && T <= DIRECT_T_WIDE && T * ((n + 15) / 16 * 16) <= XPACK_FLOATS);
}

/* tokens [t0, t1) of x packed into xp for their tiles (XAT): tile j
 * (tokens t .. t + TT - 1) at xp + (t - t0) * nb * 16, block k of its
 * columns at + k * TT * 16, a ragged last block zero-filled past the end
 * (the tail's masked steps never read those lanes into a sum) */
INL void pack_tokens(const float *x, size_t ldx, size_t n, size_t t0, size_t t1, float *xp)
{
	size_t nb = (n + 15) / 16, nt = (t1 - t0 + MAXT - 1) / MAXT;

	for (size_t t = t0, j = 0; j < nt; j++) {
		int TT = tile_tokens(t1 - t, nt - j);
		float *d = xp + (t - t0) * nb * 16;
		for (size_t k = 0; k < nb; k++) {
			size_t c = k * 16;
			__mmask16 m = (__mmask16)(n - c >= 16 ? 0xffffu : (1u << (n - c)) - 1);
			for (int b = 0; b < TT; b++)
				_mm512_store_ps(d + (k * (size_t)TT + (size_t)b) * 16,
						_mm512_maskz_loadu_ps(m, x + (t + (size_t)b) * ldx + c));
		}
		t += (size_t)TT;
	}
}

/*
 * rows_direct of hb_simd_block.h with the activations packed first (XAT),
 * in groups of as many tokens as the buffer holds (all of them, but for a
 * long chunk of a narrow matrix, which then streams once a group; each
 * output is still one tile over all its columns in order, so the grouping
 * changes no bit).  The same tiles over the same floats: no bit changes.
 * One token needs no packing (its row is already that layout), and rows
 * too long for two tokens in the buffer run from x as it is.
 */
INL void rows_direct(int type, const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx,
		     size_t T, float *y, size_t ldy)
{
	size_t n = (size_t)w->cols, nb = (n + 15) / 16, G = T;
	int xpk = T > 1 && 2 * nb * 16 <= XPACK_FLOATS;
	float xp[XPACK_FLOATS] __attribute__((aligned(64)));
	/* rows a block: whole tiles, at least one; one when there are few
	 * token tiles (blocks then only starve the weights' stream) */
	uint64_t rblk = (uint64_t)(DIRECT_BLOCK / ((size_t)w->row_bytes * MAXR)) * MAXR;

	if (rblk < MAXR || T <= DIRECT_BLOCK_T)
		rblk = MAXR;

	if (xpk && T * nb * 16 > XPACK_FLOATS)
		G = XPACK_FLOATS / (nb * 16);
	for (size_t g0 = 0; g0 < T; g0 += G) {
		size_t g1 = T - g0 < G ? T : g0 + G, nt = (g1 - g0 + MAXT - 1) / MAXT;
		if (xpk)
			pack_tokens(x, ldx, n, g0, g1, xp);
		/* rows in blocks of about DIRECT_BLOCK weight bytes (whole
		 * tiles), each block over every token tile in turn */
		for (uint64_t b0 = r0, b1; b0 < r1; b0 = b1) {
			b1 = r1 - b0 > rblk ? b0 + rblk : r1;
			for (size_t t = g0, j = 0; j < nt; j++) {
				int TT = tile_tokens(g1 - t, nt - j);
				const float *xt = xpk ? xp + (t - g0) * nb * 16 : x + t * ldx;
				for (uint64_t r = b0; r < b1;) {
					int R = r + MAXR <= b1 ? MAXR : 1;
					unsigned char bad[MAXR] = {0};
					if (R == MAXR && xpk)
						tile_x(type, MAXR, TT, w, r, xt, 0, 1, 0, n, NULL, 0, bad, y + t * ldy, ldy);
					else if (R == MAXR)
						tile_x(type, MAXR, TT, w, r, xt, ldx, 0, 0, n, NULL, 0, bad, y + t * ldy, ldy);
					else if (xpk)
						tile_x(type, 1, TT, w, r, xt, 0, 1, 0, n, NULL, 0, bad, y + t * ldy, ldy);
					else
						tile_x(type, 1, TT, w, r, xt, ldx, 0, 0, n, NULL, 0, bad, y + t * ldy, ldy);
					r += (uint64_t)R;
				}
				t += (size_t)TT;
			}
		}
	}
}

#endif
