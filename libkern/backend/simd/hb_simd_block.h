/*
 * hb_simd_block.h: how a vector path's register tiles cover a product
 * (shared by hb_simd_avx2.c and hb_simd_avx512_tile.h, which differ only in
 * their tiles).  The includer defines INL, MAXR and MAXT (the tile's rows
 * and tokens) and tile_tt(type, R, TT, w, r, x, ldx, c0, c1, accm, acc_ld,
 * bad, y, ldy): columns [c0, c1) of an R x TT tile, its partial lanes kept
 * in accm between chunks (NULL: the whole row at once).  Every output is
 * computed by one tile over its columns in order, so the covering changes
 * no bit.  Internal to libkern/backend/simd.
 */
#ifndef HB_SIMD_BLOCK_H
#define HB_SIMD_BLOCK_H

/*
 * Tokens are cut into ceil(T / MAXT) tiles as equal as can be (20 with
 * MAXT 6: 5 5 5 5, not 6 6 6 2, whose narrow tile has too few FMAs per
 * load): the width of the next tile when `left` tokens remain for `tiles`.
 */
INL int tile_tokens(size_t left, size_t tiles)
{
	return (int)((left + tiles - 1) / tiles);
}

/*
 * Few tokens (decode, small expert batches): each tile runs whole rows.
 * The weights stream once; the activations of <= DIRECT_T tokens sit in L1.
 * An includer with its own (HB_ROWS_DIRECT_OWN) defines it after this header.
 */
INL void rows_direct(int type, const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx,
		     size_t T, float *y, size_t ldy);
#ifndef HB_ROWS_DIRECT_OWN
INL void rows_direct(int type, const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx,
		     size_t T, float *y, size_t ldy)
{
	size_t n = (size_t)w->cols;

	for (uint64_t r = r0; r < r1;) {
		int R = r + MAXR <= r1 ? MAXR : 1;
		size_t nt = (T + MAXT - 1) / MAXT;
		for (size_t t = 0, j = 0; j < nt; j++) {
			int TT = tile_tokens(T - t, nt - j);
			unsigned char bad[MAXR] = {0};
			if (R == MAXR)
				tile_tt(type, MAXR, TT, w, r, x + t * ldx, ldx, 0, n, NULL, 0, bad, y + t * ldy, ldy);
			else
				tile_tt(type, 1, TT, w, r, x + t * ldx, ldx, 0, n, NULL, 0, bad, y + t * ldy, ldy);
			t += (size_t)TT;
		}
		r += (uint64_t)R;
	}
}
#endif

/*
 * Many tokens (prefill): a whole row's activations for a tile's tokens
 * (AVX-512's 6: 60 KiB at 2560 columns; AVX2's 3: 30 KiB) no longer fit L1,
 * and re-reading them from L2 for every tile of rows capped AVX-512's 4 x 6
 * tile near 0.25 of the FMA peak (bench/run.sh, real widths).  So the work
 * is blocked: RB rows x TB tokens at a time, columns in chunks of KC (KC x
 * 6 tokens x 4 bytes = 6 KiB of activations and KC x RB weights, both in
 * L1), partial lanes kept in accm between chunks (RB x TB x 16 floats,
 * 96 KiB of the thread's stack).
 *
 * The RB x KC weights of a chunk are widened once into a float panel (32
 * KiB of the stack, L1/L2 resident) and every token tile of the block runs
 * from it (type HB_W_PANEL): widening bf16 took 8 shuffle/shift µops per 16
 * columns beside a 4 x 6 tile's 24 FMAs on the same ports, now once per
 * block instead of once per tile.  The panel holds the very floats the
 * tile would widen in its registers, in the same order, so no bit changes.
 * A panel, never a widened copy of a matrix.
 */
#ifndef RB /* an includer may set RB, TB and KC for its caches */
#define RB 32
#endif
#ifndef DIRECT_T /* the most tokens rows_direct takes (an includer may set it) */
#define DIRECT_T MAXT
#endif
#ifndef TB
#define TB 48
#endif
#ifndef KC
#define KC 256
#endif

INL void block_chunk(int tt, const struct hb_wmat *tw, uint64_t rb0, uint64_t rb1, uint64_t o, size_t tb0,
		     size_t tb1, const float *x, size_t ldx, size_t c0, size_t c1, float *accm, unsigned char *bad,
		     float *y, size_t ldy);
#ifndef HB_BLOCK_CHUNK_OWN
/*
 * Columns [c0, c1) of rows [rb0, rb1) x tokens [tb0, tb1): MAXR x MAXT
 * tiles.  Row r is row r - o of tw (a panel: o = rb0; the matrix: 0).
 * An includer with other tiles for the blocked path defines
 * HB_BLOCK_CHUNK_OWN before this header and its own block_chunk after it.
 */
INL void block_chunk(int tt, const struct hb_wmat *tw, uint64_t rb0, uint64_t rb1, uint64_t o, size_t tb0,
		     size_t tb1, const float *x, size_t ldx, size_t c0, size_t c1, float *accm, unsigned char *bad,
		     float *y, size_t ldy)
{
	size_t nt = (tb1 - tb0 + MAXT - 1) / MAXT;
	for (size_t t = tb0, j = 0; j < nt; j++) {
		int TT = tile_tokens(tb1 - t, nt - j);
		for (uint64_t r = rb0; r < rb1;) {
			size_t ro = (size_t)(r - rb0);
			float *am = accm + (ro * TB + (t - tb0)) * 16;
			/* R a constant in each call, so the tile unrolls */
			if (r + MAXR <= rb1) {
				tile_tt(tt, MAXR, TT, tw, r - o, x + t * ldx, ldx, c0, c1, am, TB * 16, bad + ro,
					y + t * ldy + o, ldy);
				r += MAXR;
			} else {
				tile_tt(tt, 1, TT, tw, r - o, x + t * ldx, ldx, c0, c1, am, TB * 16, bad + ro,
					y + t * ldy + o, ldy);
				r++;
			}
		}
		t += (size_t)TT;
	}
}
#endif

INL void rows_blocked(int type, const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx,
		      size_t T, float *y, size_t ldy)
{
	size_t n = (size_t)w->cols;
	float accm[RB * TB * 16] __attribute__((aligned(64)));
	float pan[RB * KC] __attribute__((aligned(64)));
	bool use_pan = type != HB_W_F32;
	int tt = use_pan ? HB_W_PANEL : type;
	struct hb_wmat pw = { pan, HB_W_F32, RB, w->cols, KC * sizeof(float) };

	for (uint64_t rb0 = r0; rb0 < r1; rb0 += RB) {
		uint64_t rb1 = r1 - rb0 < RB ? r1 : rb0 + RB;
		for (size_t tb0 = 0; tb0 < T; tb0 += TB) {
			size_t tb1 = T - tb0 < TB ? T : tb0 + TB;
			unsigned char bad[RB] = {0};
			for (size_t c0 = 0; c0 < n; c0 += KC) {
				size_t c1 = n - c0 < KC ? n : c0 + KC;
				const struct hb_wmat *tw = use_pan ? &pw : w;
				if (use_pan)
					panel_fill(type, w, rb0, (size_t)(rb1 - rb0), c0, c1, pan, KC, bad);
				block_chunk(tt, tw, rb0, rb1, use_pan ? rb0 : 0, tb0, tb1, x, ldx, c0, c1, accm, bad, y,
					    ldy);
			}
		}
	}
}

#ifdef HB_DIRECT_OK_OWN /* the includer's rule, defined after this header */
INL bool direct_ok(int type, size_t T, size_t n);
#else
INL bool direct_ok(int type, size_t T, size_t n)
{
	(void)type;
	return T <= DIRECT_T || n <= KC;
}
#endif

INL void rows_t(int type, const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx,
		size_t T, float *y, size_t ldy)
{
	if (direct_ok(type, T, (size_t)w->cols))
		rows_direct(type, w, r0, r1, x, ldx, T, y, ldy);
	else
		rows_blocked(type, w, r0, r1, x, ldx, T, y, ldy);
}

#endif
