/*
 * Unit tests: the seam's pool-parallel forms give the bits of their serial
 * forms (issue 15: "Results do not depend on the number of threads").
 *
 *   hb_gdn_scan           T tokens, value heads over the pool, against T
 *                         calls of hb_gdn_step: state and outputs bit for
 *                         bit, on every kernel path this processor has,
 *                         with no pool and pools of 1, 2 and 3 threads;
 *                         hb_gdn_scan_from the same bits from another
 *                         state (left untouched), and a non-finite state
 *                         reported;
 *   hb_qsa_select_batch   a block of queries (no groups, fewer groups than
 *                         kept, thousands of groups in several slices,
 *                         exact score ties) against hb_qsa_select per query:
 *                         counts and rows identical;
 *   hb_qsa_attend_batch   every (query, head) against hb_qsa_attend, and
 *                         hb_qsa_attend against the j-outer loop it replaced
 *                         (the value sums reordered for vectorisation, each
 *                         sum's operations unchanged): bit for bit.
 * The shapes are chosen above the sizes where the batch forms go parallel
 * (hb_gdn.c, hb_qsa.c), and each comparison also checks that the outputs
 * moved, so a no-op on both sides cannot pass.
 */
#include "hb_base.h"
#include "harness.h"
#include "backend/hb_backend.h"
#include "backend/simd/hb_simd.h"
#include "hb_pool.h"
#include "math/hb_math.h"

#include <math.h>

static uint32_t rng = 424242;
static float frand(void)
{
	rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
	return (float)(rng % 20001) / 10000.0f - 1.0f;
}

static void fill(float *x, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = lo + (hi - lo) * (frand() + 1.0f) / 2.0f;
}

/* pools of 1, 2 and 3 threads, and none (index 0) */
static struct hb_pool *pools[4];

static bool pools_up(void)
{
	for (unsigned i = 1; i < 4; i++)
		if (!pools[i] && hb_pool_create(i, &pools[i], NULL))
			return false;
	return true;
}

/* ------------------------------------------------------------ GDN */

struct gdn_shape {
	size_t nk, nv, dk, dv, T;
};

static bool gdn_case(int path, const struct gdn_shape *g, struct hb_pool *pool)
{
	size_t kd = g->nk * g->dk, ld = 2 * kd + g->nv * g->dv + 3, ldo = g->nv * g->dv + 5;
	size_t slen = g->nv * g->dk * g->dv;
	float *S0 = malloc(slen * sizeof(float)), *S1 = malloc(slen * sizeof(float));
	float *Sf = malloc(slen * sizeof(float)), *S2 = malloc(slen * sizeof(float));
	float *x = malloc(g->T * ld * sizeof(float)), *beta = malloc(g->T * g->nv * sizeof(float));
	float *decay = malloc(g->T * g->nv * sizeof(float));
	float *o0 = calloc(g->T * ldo, sizeof(float)), *o1 = calloc(g->T * ldo, sizeof(float));
	float *o2 = calloc(g->T * ldo, sizeof(float));
	float qscale = 1.0f / sqrtf((float)g->dk);
	bool same = false, moved = false, from_ok = false, bad_seen = false;

	if (!S0 || !S1 || !Sf || !S2 || !x || !beta || !decay || !o0 || !o1 || !o2)
		goto done;
	fill(S0, slen, -0.5f, 0.5f);
	memcpy(S1, S0, slen * sizeof(float));
	memcpy(Sf, S0, slen * sizeof(float));
	memset(S2, 0xff, slen * sizeof(float)); /* NaNs: the scan must overwrite every head */
	fill(x, g->T * ld, -1, 1);
	fill(beta, g->T * g->nv, 0.05f, 0.95f);
	fill(decay, g->T * g->nv, 0.5f, 1.0f);
	CHECK_EQ_INT(hb_kernel_force(path, NULL), HB_OK);
	for (size_t t = 0; t < g->T; t++) {
		const float *xt = x + t * ld;
		hb_gdn_step(S0, xt, xt + kd, xt + 2 * kd, beta + t * g->nv, decay + t * g->nv, g->nk, g->nv, g->dk,
			    g->dv, qscale, o0 + t * ldo);
	}
	hb_gdn_scan(pool, S1, x, ld, beta, decay, g->T, g->nk, g->nv, g->dk, g->dv, qscale, o1, ldo);
	same = !memcmp(S0, S1, slen * sizeof(float)) && !memcmp(o0, o1, g->T * ldo * sizeof(float));
	for (size_t i = 0; i < g->T * ldo; i++)
		moved |= o1[i] != 0;
	/* from another state: the same bits, the source untouched, finite */
	{
		float *keep = malloc(slen * sizeof(float));
		bool fin;
		CHECK(keep != NULL);
		memcpy(keep, Sf, slen * sizeof(float));
		fin = hb_gdn_scan_from(pool, S2, Sf, x, ld, beta, decay, g->T, g->nk, g->nv, g->dk, g->dv, qscale, o2,
				       ldo);
		from_ok = fin && !memcmp(S0, S2, slen * sizeof(float)) && !memcmp(o0, o2, g->T * ldo * sizeof(float)) &&
			  !memcmp(keep, Sf, slen * sizeof(float));
		/* a non-finite value in the last head's last cell is reported,
		 * from another state and in place */
		Sf[slen - 1] = INFINITY;
		bad_seen = !hb_gdn_scan_from(pool, S2, Sf, x, ld, beta, decay, g->T, g->nk, g->nv, g->dk, g->dv, qscale,
					     o2, ldo) &&
			   !hb_gdn_scan_from(pool, Sf, Sf, x, ld, beta, decay, g->T, g->nk, g->nv, g->dk, g->dv, qscale,
					     o2, ldo);
		free(keep);
	}
done:
	free(S0), free(S1), free(Sf), free(S2), free(x), free(beta), free(decay), free(o0), free(o1), free(o2);
	return same && moved && from_ok && bad_seen;
}

static void gdn_scan_matches_steps(void)
{
	/* T * nv * dk * dv at or above hb_gdn.c's 16384 goes parallel; the
	 * last shape stays below it (the serial branch); dv 20 and 40 leave
	 * scalar columns after the 16-wide vectors */
	static const struct gdn_shape shapes[] = {
		{2, 6, 32, 40, 17}, {1, 3, 16, 20, 64}, {4, 8, 64, 64, 1}, {2, 4, 16, 16, 3}, {2, 2, 8, 12, 2},
	};
	size_t cases = 0;
	int start = hb_kernel_path();

	CHECK(pools_up());
	for (int path = 0; path < HB_KERNEL_NPATHS; path++) {
		if (!hb_kernel_path_usable(path))
			continue;
		for (size_t s = 0; s < HB_ARRAY_LEN(shapes); s++)
			for (int p = 0; p < 4; p++) {
				if (!gdn_case(path, &shapes[s], pools[p]))
					hb_check_fail(__FILE__, __LINE__,
						      "gdn %s nk %zu nv %zu dk %zu dv %zu T %zu pool %d: scan != steps",
						      hb_kernel_path_name(path), shapes[s].nk, shapes[s].nv, shapes[s].dk,
						      shapes[s].dv, shapes[s].T, p);
				cases++;
			}
	}
	CHECK_EQ_INT(hb_kernel_force(start, NULL), HB_OK);
	printf("# gdn scan: %zu cases bit-identical to token-at-a-time steps\n", cases);
}

/* ------------------------------------------------------------ QSA selection */

enum { HEADS = 4, DIM = 32, RATIO = 4, KEEP = 16, NQ = 16, MAXG = 3000 };
#define ROWS_LD (KEEP * RATIO + RATIO + 8)

struct sel_ws {
	float *pooled, *iq, *scores;
	int32_t *heap, *rows;
	uint64_t groups[NQ], visible[NQ];
	size_t n[NQ];
};

static bool sel_alloc(struct sel_ws *w)
{
	memset(w, 0, sizeof(*w));
	w->pooled = malloc((size_t)MAXG * DIM * sizeof(float));
	w->iq = malloc((size_t)NQ * HEADS * DIM * sizeof(float));
	w->scores = malloc((size_t)NQ * MAXG * sizeof(float));
	w->heap = malloc((size_t)NQ * KEEP * sizeof(int32_t));
	w->rows = malloc((size_t)NQ * ROWS_LD * sizeof(int32_t));
	return w->pooled && w->iq && w->scores && w->heap && w->rows;
}

static void sel_free(struct sel_ws *w)
{
	free(w->pooled), free(w->iq), free(w->scores), free(w->heap), free(w->rows);
}

/* the queries of one block: visible counts from none to MAXG groups */
static void sel_fill(struct sel_ws *w)
{
	static const uint64_t vis[NQ] = {1, 3, 4, 7, 9, 40, 64, 65, 66, 67, 500, 2047, 4096, 8001, 11999, 12000};

	fill(w->pooled, (size_t)MAXG * DIM, -1, 1);
	/* exact ties: groups 100..119 repeat group 7's key */
	for (size_t g = 100; g < 120; g++)
		memcpy(w->pooled + g * DIM, w->pooled + 7 * DIM, DIM * sizeof(float));
	fill(w->iq, (size_t)NQ * HEADS * DIM, -1, 1);
	for (size_t i = 0; i < NQ; i++)
		w->visible[i] = vis[i], w->groups[i] = vis[i] / RATIO;
}

static void select_batch_matches(void)
{
	struct sel_ws w;
	int32_t want[NQ][ROWS_LD], heap[KEEP];
	size_t wn[NQ];
	float *sc = malloc(MAXG * sizeof(float));
	size_t full = 0;

	CHECK(pools_up());
	CHECK(sel_alloc(&w) && sc);
	if (!sc || !w.pooled || !w.iq || !w.scores || !w.heap || !w.rows) {
		free(sc), sel_free(&w);
		return;
	}
	sel_fill(&w);
	for (size_t i = 0; i < NQ; i++) {
		wn[i] = hb_qsa_select(w.iq + i * HEADS * DIM, HEADS, DIM, w.pooled, w.groups[i], KEEP, RATIO,
				      w.visible[i], sc, heap, want[i]);
		full += wn[i] == KEEP * RATIO + w.visible[i] % RATIO;
	}
	/* the block has queries with fewer groups than kept and with more */
	CHECK_EQ_U64(wn[0], 1);
	CHECK(full >= 6);
	/* the whole block (a job a query), and its last 3 and last 1 (fewer
	 * queries than 4 a worker: group scores in slices over the pool) */
	for (size_t nq = NQ; nq; nq = nq == NQ ? 3 : nq == 3 ? 1 : 0)
		for (int p = 0; p < 4; p++) {
			size_t q0 = NQ - nq;
			struct hb_qsa_batch b = { nq, HEADS, DIM, w.iq + q0 * HEADS * DIM, HEADS * DIM, w.pooled,
						  w.groups + q0, w.visible + q0, KEEP, RATIO, w.scores, MAXG, w.heap, w.rows,
						  ROWS_LD, w.n };
			memset(w.rows, 0xff, (size_t)NQ * ROWS_LD * sizeof(int32_t));
			memset(w.n, 0, sizeof(w.n));
			hb_qsa_select_batch(pools[p], &b);
			for (size_t i = 0; i < nq; i++)
				if (w.n[i] != wn[q0 + i] ||
				    memcmp(w.rows + i * ROWS_LD, want[q0 + i], wn[q0 + i] * sizeof(int32_t)))
					hb_check_fail(__FILE__, __LINE__, "%zu queries, pool %d, query %zu (%" PRIu64
						      " groups): batch selection differs (%zu rows, want %zu)", nq, p, q0 + i,
						      w.groups[q0 + i], w.n[i], wn[q0 + i]);
		}
	printf("# qsa select: blocks of 16, 3 and 1 queries x 4 pools, %zu of the 16 at the full budget, identical "
	       "to single calls\n", full);
	free(sc);
	sel_free(&w);
}

/* ------------------------------------------------------------ QSA attention */

/* hb_qsa_attend as it was written before the value loop was turned */
/* noipa: with dim a known constant gcc 12 warns falsely inside hb_dot */
__attribute__((noipa)) static void attend_jouter(const float *q, const float *K, const float *V, size_t stride, size_t offset, size_t dim,
			  float scale, const int32_t *rows, size_t n, float *probs, float *out)
{
	for (size_t i = 0; i < n; i++)
		probs[i] = hb_dot(q, K + (size_t)rows[i] * stride + offset, dim) * scale;
	hb_softmax(probs, n);
	for (size_t j = 0; j < dim; j++) {
		float acc = 0;
		for (size_t i = 0; i < n; i++)
			acc += probs[i] * V[(size_t)rows[i] * stride + offset + j];
		out[j] = acc;
	}
}

enum { NH = 6, NKV = 2, HD = 40, NROWS = 12000 };

static void attend_batch_matches(void)
{
	struct sel_ws w;
	size_t stride = NKV * HD, qld = 2 * NH * HD, old = NH * HD + 3, cases = 0;
	float *K = malloc((size_t)NROWS * stride * sizeof(float)), *V = malloc((size_t)NROWS * stride * sizeof(float));
	float *q = malloc(NQ * qld * sizeof(float)), *out = malloc(NQ * old * sizeof(float));
	float *probs = malloc(3 * ROWS_LD * sizeof(float)), one[HD], ref[HD], pr[ROWS_LD];
	bool moved = false;

	CHECK(pools_up());
	CHECK(sel_alloc(&w) && K && V && q && out && probs);
	if (!K || !V || !q || !out || !probs || !w.pooled || !w.iq || !w.scores || !w.heap || !w.rows)
		goto done;
	sel_fill(&w);
	{
		struct hb_qsa_batch b = { NQ, HEADS, DIM, w.iq, HEADS * DIM, w.pooled, w.groups, w.visible, KEEP, RATIO,
					  w.scores, MAXG, w.heap, w.rows, ROWS_LD, w.n };
		hb_qsa_select_batch(NULL, &b);
	}
	fill(K, (size_t)NROWS * stride, -1, 1);
	fill(V, (size_t)NROWS * stride, -1, 1);
	fill(q, NQ * qld, -1, 1);
	for (int p = 0; p < 4; p++) {
		struct hb_qsa_attn a = { NQ, NH, NH / NKV, HD, q, qld, 2 * HD, K, V, stride, 0.17f, w.rows, ROWS_LD, w.n,
					 probs, ROWS_LD, out, old, false };
		memset(out, 0, NQ * old * sizeof(float));
		hb_qsa_attend_batch(pools[p], &a);
		for (size_t i = 0; i < NQ; i++)
			for (size_t h = 0; h < NH; h++) {
				const float *qh = q + i * qld + h * 2 * HD;
				const int32_t *r = w.rows + i * ROWS_LD;
				size_t off = (h / (NH / NKV)) * HD;
				hb_qsa_attend(qh, K, V, stride, off, HD, 0.17f, r, w.n[i], pr, one);
				attend_jouter(qh, K, V, stride, off, HD, 0.17f, r, w.n[i], pr, ref);
				if (memcmp(one, ref, sizeof(one)))
					hb_check_fail(__FILE__, __LINE__, "query %zu head %zu: hb_qsa_attend differs from the "
						      "j-outer loop", i, h);
				if (memcmp(out + i * old + h * HD, one, sizeof(one)))
					hb_check_fail(__FILE__, __LINE__, "pool %d query %zu head %zu: batch attention "
						      "differs", p, i, h);
				for (size_t j = 0; j < HD; j++)
					moved |= one[j] != 0;
				cases++;
			}
	}
	CHECK(moved);
	printf("# qsa attend: %zu (query, head) outputs identical to single calls and to the j-outer loop\n", cases);
done:
	free(K), free(V), free(q), free(out), free(probs);
	sel_free(&w);
}

static void release_pools(void)
{
	for (unsigned i = 1; i < 4; i++) {
		hb_pool_destroy(pools[i]);
		pools[i] = NULL;
	}
}

HB_TEST_MAIN(T(gdn_scan_matches_steps), T(select_batch_matches), T(attend_batch_matches), T(release_pools))
