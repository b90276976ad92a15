/*
 * GPU tests (make test-gpu): the whole graph with the CUDA backend against
 * the CPU reference on the upstream fixtures test_run_oracle uses.  Each
 * set is converted (bf16 experts), loaded, and every prompt run twice,
 * once on each backend, as one prefill and then token-by-token decode of
 * the oracle's continuation.  Compared, GPU against CPU:
 *   logits        within 1e-3 (the bound), the largest printed
 *   routes        every layer's top-k ids in rank order, identical
 *   QSA           every selection identical, except at a row the fixture
 *                 marks tie-dependent (qsa/tie bit 0): a difference there
 *                 is counted and printed, and what follows it (that layer
 *                 and later, that position and later) is not compared
 * The device graph runs each prompt alone (the recurrent delta rule) and
 * the prompts as batches (its chunked form, HB_CUDA_GDN=chunked).  The
 * chunked form's kernel is also run alone against the CPU's scan: longer
 * sequences, decays down to 0, outputs and states within 2e-5 of the
 * larger of 1 and the array's largest magnitude.
 * Then fail-closed on a session: an injected device error fails the
 * chunk, and the digest and frontier are what they were.
 * Without nvcc at build time, or without a device, each case skips.
 */
#include "hb_base.h"
#include "harness.h"
#include "backend/hb_backend.h"
#include "graph/hb_model.h"
#include "graph/hb_session.h"
#include "hb-convert/hb_convert.h"
#include "hb_pool.h"
#include "oracle.h"
#ifdef HB_WITH_CUDA
#include "hb_cuda.h"
#include "hb_cuda_kern.h"
#include <cuda_runtime_api.h>
#endif

#include <math.h>

#ifdef HB_WITH_CUDA
#define MAXT 128

struct cap {
	size_t N, L, k, maxsel;
	uint64_t pos0;
	int32_t *ids, *sel, *cnt; /* [L][N][k], [L][N][maxsel], [L][N] */
	float *logits;            /* [N][V] */
};

static void observe(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct cap *c = ctx;
	size_t t = (size_t)(pos - c->pos0), l = (size_t)layer;

	if (layer < 0 || pos < c->pos0 || t >= c->N)
		return;
	if (kind == HB_OBS_ROUTES)
		memcpy(c->ids + (l * c->N + t) * c->k, data, (n < c->k ? n : c->k) * 4);
	if (kind == HB_OBS_QSA) {
		c->cnt[l * c->N + t] = (int32_t)n;
		memcpy(c->sel + (l * c->N + t) * c->maxsel, data, (n < c->maxsel ? n : c->maxsel) * 4);
	}
}

static struct hb_model *load(const char *set)
{
	struct hb_model *m = NULL;
	struct hb_convert_opts co;
	char src[4096];

	snprintf(src, sizeof(src), "%s/tests/fixtures/upstream/%s/checkpoint", hb_test_srcdir(), set);
	memset(&co, 0, sizeof(co));
	co.src_dir = src;
	co.out_path = "a.gguf";
	co.expert_codec = HB_CONV_EXPERTS_BF16;
	co.ple_codec = HB_CONV_PLE_BF16;
	CHECK_EQ_INT(hb_convert(&co, NULL, NULL), HB_OK);
	CHECK_EQ_INT(hb_model_load("a.gguf", &m, NULL), HB_OK);
	return m;
}

/* prompt p's prefill then its decode inputs, one backend; false on failure */
static bool run(const struct hb_model *m, struct hb_pool *pool, const int32_t *toks, size_t T,
		const int64_t *dec, size_t S, struct cap *c, bool graph)
{
	size_t V = (size_t)m->vocab_physical;
	struct hb_session *s = NULL;
	bool ok = true;

	c->N = T + S, c->pos0 = 0;
	c->L = (size_t)m->cfg.num_layers;
	c->k = (size_t)m->cfg.num_experts_per_tok;
	c->maxsel = (size_t)(m->cfg.indexer_budget + m->cfg.indexer_compress_ratio);
	c->ids = calloc(c->L * c->N * c->k, 4);
	c->sel = calloc(c->L * c->N * c->maxsel, 4);
	c->cnt = calloc(c->L * c->N, 4);
	c->logits = calloc(c->N * V, 4);
	CHECK_EQ_INT(hb_session_create(m, pool, 256, &s, NULL), HB_OK);
	if (!s)
		return false;
	/* routes and logits alone: the device runs whole chunks on its graph */
	if (graph)
		hb_session_observe_only(s, 1u << HB_OBS_ROUTES | 1u << HB_OBS_ROUTE_WEIGHTS | 1u << HB_OBS_LOGITS);
	ok = hb_session_forward(s, toks, T, c->logits, observe, c, NULL) == HB_OK;
	for (size_t i = 0; ok && i < S; i++) {
		int32_t tok = (int32_t)dec[i];
		ok = hb_session_forward(s, &tok, 1, c->logits + (T + i) * V, observe, c, NULL) == HB_OK;
	}
	CHECK(ok);
	hb_session_free(s);
	return ok;
}

/* the prompts' runs as batches (hb_session_forward_batch): their prefills
 * as one pass, then each decode step of every prompt that has one as one
 * pass; routes and logits only (the device graph's kinds) */
static bool run_batch(const struct hb_model *m, struct hb_pool *pool, size_t n, int32_t (*toks)[MAXT], const size_t *T,
		      int64_t *const *dec, const size_t *S, struct cap *c)
{
	size_t V = (size_t)m->vocab_physical, most = 0;
	struct hb_session *s[3] = {NULL, NULL, NULL}, *bs[3];
	const int32_t *bt[3];
	int32_t step[3];
	size_t bn[3];
	float *bl[3];
	void *bc[3];
	bool ok = true;

	for (size_t i = 0; i < n; i++) {
		c[i].N = T[i] + S[i], c[i].pos0 = 0, c[i].L = (size_t)m->cfg.num_layers;
		c[i].k = (size_t)m->cfg.num_experts_per_tok, c[i].maxsel = 1;
		c[i].ids = calloc(c[i].L * c[i].N * c[i].k, 4);
		c[i].sel = calloc(c[i].L * c[i].N, 4), c[i].cnt = calloc(c[i].L * c[i].N, 4);
		c[i].logits = calloc(c[i].N * V, 4);
		CHECK_EQ_INT(hb_session_create(m, pool, 256, &s[i], NULL), HB_OK);
		if (!s[i])
			return false;
		hb_session_observe_only(s[i], 1u << HB_OBS_ROUTES | 1u << HB_OBS_ROUTE_WEIGHTS | 1u << HB_OBS_LOGITS);
		bs[i] = s[i], bt[i] = toks[i], bn[i] = T[i], bl[i] = c[i].logits, bc[i] = &c[i];
		most = S[i] > most ? S[i] : most;
	}
	ok = hb_session_forward_batch(bs, n, bt, bn, bl, observe, bc, NULL) == HB_OK;
	for (size_t j = 0; ok && j < most; j++) {
		size_t b = 0;
		for (size_t i = 0; i < n; i++)
			if (j < S[i]) {
				step[b] = (int32_t)dec[i][j];
				bs[b] = s[i], bt[b] = &step[b], bn[b] = 1, bl[b] = c[i].logits + (T[i] + j) * V, bc[b] = &c[i];
				b++;
			}
		ok = hb_session_forward_batch(bs, b, bt, bn, bl, observe, bc, NULL) == HB_OK;
	}
	CHECK(ok);
	for (size_t i = 0; i < n; i++)
		hb_session_free(s[i]);
	return ok;
}

static void cap_free(struct cap *c)
{
	free(c->ids), free(c->sel), free(c->cnt), free(c->logits);
}

/* the fixture's tie bit for layer l at position t (prefill rows, then decode) */
static bool tie_marked(const struct oracle *o, int p, size_t l, size_t t, size_t T)
{
	char name[64];
	size_t n;
	uint64_t dims[4];
	int32_t *tie;
	bool on;

	snprintf(name, sizeof(name), "%s/p%d/qsa/tie/L%02zu", t < T ? "pre" : "dec", p, l);
	tie = oracle_array(o, name, &n, dims);
	on = tie && (t < T ? t : t - T) < n && (tie[t < T ? t : t - T] & 1);
	free(tie);
	return on;
}

struct tally {
	double logit_err;
	unsigned routes, route_diff, qsa, qsa_diff, qsa_tie_diff;
};

/* graph: b came from the device graph, which gives no QSA selections */
static void compare(const struct oracle *o, const struct hb_model *m, int p, size_t T, const struct cap *a,
		    const struct cap *b, struct tally *ty, bool graph)
{
	size_t V = (size_t)m->vocab_physical, L = a->L, k = a->k;
	bool taint = false;
	size_t tl = 0, tt = 0;

	for (size_t t = 0; t < a->N; t++) {
		for (size_t l = 0; l < L; l++) {
			size_t r = l * a->N + t;
			if (taint && l >= tl && t >= tt)
				continue;
			ty->routes++;
			if (memcmp(a->ids + r * k, b->ids + r * k, k * 4)) {
				ty->route_diff++;
				printf("# route difference: p%d layer %zu position %zu\n", p, l, t);
			}
			if (graph || (!a->cnt[r] && !b->cnt[r]))
				continue;
			ty->qsa++;
			if (a->cnt[r] == b->cnt[r] && !memcmp(a->sel + r * a->maxsel, b->sel + r * a->maxsel,
							      (size_t)a->cnt[r] * 4))
				continue;
			if (tie_marked(o, p, l, t, T)) {
				ty->qsa_tie_diff++;
				printf("# qsa difference at a fixture tie: p%d layer %zu position %zu\n", p, l, t);
				if (!taint)
					taint = true, tl = l, tt = t;
			} else {
				ty->qsa_diff++;
				printf("# qsa difference: p%d layer %zu position %zu (%d vs %d rows)\n", p, l, t,
				       a->cnt[r], b->cnt[r]);
			}
		}
		if (!(taint && t >= tt))
			ty->logit_err = hb_test_max_nan(ty->logit_err, oracle_max_abs_diff(a->logits + t * V,
											b->logits + t * V, V));
	}
}

static void parity(const char *set)
{
	struct hb_error err;
	struct oracle o;
	struct hb_model *m;
	struct hb_pool *pool = NULL;
	const struct hb_device_ops *dev;
	struct tally ty = {0, 0, 0, 0, 0, 0}, tg = {0, 0, 0, 0, 0, 0}, tb = {0, 0, 0, 0, 0, 0};
	struct hb_cuda_stats st;
	uint64_t chunks = 0, warm = 0;
	/* the prompts kept for the batch: tokens, decode inputs, the CPU's runs */
	int32_t toks[3][MAXT];
	int64_t *dec[3] = {NULL, NULL, NULL};
	size_t T[3], S[3], np = 0;
	int prompt[3];
	struct cap a[3], bat[3];

	hb_error_clear(&err);
	setenv("HB_CUDA_GRAPH", "1", 1); /* the device graph, beside the seam's operations */
	if (hb_cuda_start(&err)) {
		hb_test_skip("no usable CUDA device: %s", err.msg);
		return;
	}
	dev = hb_backend_device();
	m = load(set);
	CHECK(oracle_open(&o, set));
	CHECK_EQ_INT(hb_pool_create(2, &pool, NULL), HB_OK);
	if (m)
		hb_cuda_resident(m->map, m->map_len);
	for (int p = 0; m && p < 3; p++) {
		char name[64];
		uint64_t dims[4];
		int64_t *ids;
		struct cap b, g;
		snprintf(name, sizeof(name), "pre/p%d/ids", p);
		ids = oracle_array(&o, name, &T[np], dims);
		snprintf(name, sizeof(name), "dec/p%d/in_ids", p);
		dec[np] = oracle_array(&o, name, &S[np], dims);
		if (!ids || !dec[np] || T[np] > MAXT) {
			free(ids), free(dec[np]);
			continue;
		}
		for (size_t t = 0; t < T[np]; t++)
			toks[np][t] = (int32_t)ids[t];
		free(ids);
		hb_backend_set_device(NULL);
		memset(&a[np], 0, sizeof(a[np])), memset(&b, 0, sizeof(b)), memset(&g, 0, sizeof(g));
		bool ok = run(m, pool, toks[np], T[np], dec[np], S[np], &a[np], false);
		hb_backend_set_device(dev);
		hb_cuda_stats(&st);
		chunks = st.chunks, warm = st.warm_chunks;
		ok = run(m, pool, toks[np], T[np], dec[np], S[np], &b, false) && ok;
		hb_cuda_stats(&st);
		CHECK_EQ_U64(st.chunks, chunks); /* every kind observed: the seam's operations */
		ok = run(m, pool, toks[np], T[np], dec[np], S[np], &g, true) && ok;
		hb_cuda_stats(&st);
		CHECK_EQ_U64(st.chunks, chunks + 1 + S[np]); /* the prefill and every decode step */
		CHECK_EQ_U64(st.warm_chunks - warm, S[np]);    /* each step found its state on the device */
		if (ok)
			compare(&o, m, p, T[np], &a[np], &b, &ty, false), compare(&o, m, p, T[np], &a[np], &g, &tg, true);
		prompt[np++] = p;
		cap_free(&b), cap_free(&g);
	}
	/* the prompts together: one pass per step of the batch */
	if (np > 1) {
		size_t most = 0;
		for (size_t i = 0; i < np; i++)
			most = S[i] > most ? S[i] : most;
		hb_cuda_stats(&st);
		chunks = st.chunks;
		setenv("HB_CUDA_GDN", "chunked", 1); /* the batches take the delta rule's chunked form */
		bool bok = run_batch(m, pool, np, toks, T, dec, S, bat);
		unsetenv("HB_CUDA_GDN");
		if (bok)
			for (size_t i = 0; i < np; i++)
				compare(&o, m, prompt[i], T[i], &a[i], &bat[i], &tb, true);
		hb_cuda_stats(&st);
		CHECK_EQ_U64(st.chunks, chunks + 1 + most); /* one pass a step, whatever the sequences */
		for (size_t i = 0; i < np; i++)
			cap_free(&bat[i]);
	}
	for (size_t i = 0; i < np; i++)
		cap_free(&a[i]), free(dec[i]);
	printf("# %s on %s: largest |logit gpu - cpu| %.3e; routes %u/%u identical; qsa %u/%u identical, "
	       "%u differences at fixture ties\n", set, dev ? dev->name : "?", ty.logit_err, ty.routes - ty.route_diff,
	       ty.routes, ty.qsa - ty.qsa_diff - ty.qsa_tie_diff, ty.qsa, ty.qsa_tie_diff);
	printf("# %s on the device graph: largest |logit gpu - cpu| %.3e; routes %u/%u identical\n", set,
	       tg.logit_err, tg.routes - tg.route_diff, tg.routes);
	printf("# %s as batches on the device graph, the delta rule chunked: largest |logit gpu - cpu| %.3e; routes %u/%u identical\n", set,
	       tb.logit_err, tb.routes - tb.route_diff, tb.routes);
	CHECK(tb.routes > 0);
	CHECK(tb.logit_err <= 1e-3);
	CHECK_EQ_INT(tb.route_diff, 0);
	CHECK(tg.routes > 0);
	CHECK(tg.logit_err <= 1e-3);
	CHECK_EQ_INT(tg.route_diff, 0);
	CHECK(ty.routes > 0);
	CHECK(ty.logit_err <= 1e-3);
	CHECK_EQ_INT(ty.route_diff, 0);
	CHECK_EQ_INT(ty.qsa_diff, 0);
	CHECK_EQ_INT(hb_cuda_error(NULL), HB_OK);
	oracle_close(&o);
	hb_pool_destroy(pool);
	hb_model_free(m);
	hb_cuda_stop();
}
#endif

static void realshape_gpu_matches_cpu(void)
{
#ifdef HB_WITH_CUDA
	parity("realshape");
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

static void general_gpu_matches_cpu(void)
{
#ifdef HB_WITH_CUDA
	parity("general");
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

#ifdef HB_WITH_CUDA
static uint64_t lcg = 0x9e3779b97f4a7c15u;

static float unit(void) /* in [-1, 1) */
{
	lcg = lcg * 6364136223846793005u + 1442695040888963407u;
	return (float)((lcg >> 40) / (double)(1u << 23)) - 1.0f;
}

static float *dev_copy(const float *h, size_t n)
{
	void *d = NULL;

	CHECK_EQ_INT(cudaMalloc(&d, n * 4 + 4), cudaSuccess);
	if (d && h)
		CHECK_EQ_INT(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice), cudaSuccess);
	return d;
}

static float max_abs(const float *a, size_t n)
{
	float m = 0;

	for (size_t i = 0; i < n; i++)
		m = (float)hb_test_max_nan(m, fabsf(a[i]));
	return m;
}

/* the largest |a - b| over the larger of 1 and max |a| */
static double rel_err(const float *a, const float *b, size_t n)
{
	double e = 0, m = max_abs(a, n);

	for (size_t i = 0; i < n; i++)
		e = hb_test_max_nan(e, fabs((double)a[i] - b[i]));
	return e / (m > 1 ? m : 1);
}

/* one shape: the sequences' rows one batch, the CPU's scan per sequence against hbk_gdn_chunked */
static double chunked_case(size_t nk, size_t nv, size_t dk, size_t dv, const uint32_t *lens, uint32_t n, int decays)
{
	struct hbk_seqs sq;
	size_t T = 0, ld = 2 * nk * dk + nv * dv + 3, ldo = nv * dv + 1, ns = nv * dk * dv;
	double worst = 0;

	sq.n = n, sq.s_stride = ns;
	for (uint32_t j = 0; j < n; j++)
		sq.off[j] = (uint32_t)T, sq.len[j] = lens[j], T += lens[j];
	float *qkv = malloc(T * ld * 4), *beta = malloc(T * nv * 4), *g = malloc(T * nv * 4), *dec = malloc(T * nv * 4);
	float *S = malloc(n * ns * 4), *Sc = malloc(n * ns * 4), *oc = calloc(T * ldo, 4), *og = calloc(T * ldo, 4);
	for (size_t i = 0; i < T * ld; i++)
		qkv[i] = unit();
	for (size_t t = 0; t < T; t++) /* unit keys and queries, as the graph's norms leave them */
		for (size_t h = 0; h < 2 * nk; h++) {
			float *x = qkv + t * ld + h * dk, ss = 0;
			for (size_t d = 0; d < dk; d++)
				ss += x[d] * x[d];
			for (size_t d = 0; d < dk; d++)
				x[d] /= sqrtf(ss);
		}
	for (size_t i = 0; i < T * nv; i++) {
		beta[i] = 0.5f + 0.5f * unit();
		/* decays: mostly 0.6 to 1; with decays set, some exactly 1 and some that round to 0 */
		g[i] = decays && i % 97 == 5 ? -200.0f : decays && i % 31 == 2 ? 0.0f : -0.25f * (1 + unit());
		dec[i] = expf(g[i]);
	}
	for (size_t i = 0; i < n * ns; i++)
		S[i] = 0.5f * unit();
	memcpy(Sc, S, n * ns * 4);
	hb_backend_set_device(NULL);
	for (uint32_t j = 0; j < n; j++)
		hb_gdn_scan(NULL, Sc + j * ns, qkv + sq.off[j] * ld, ld, beta + sq.off[j] * nv, dec + sq.off[j] * nv,
			    lens[j], nk, nv, dk, dv, 1.0f / sqrtf((float)dk), oc + sq.off[j] * ldo, ldo);
	float *dS = dev_copy(S, n * ns), *dq = dev_copy(qkv, T * ld), *db = dev_copy(beta, T * nv);
	float *dg = dev_copy(g, T * nv), *dO = dev_copy(og, T * ldo), *scr = dev_copy(NULL, hbk_gdn_chunked_scratch(&sq, nv, dk, dv));
	CHECK_EQ_INT(hbk_gdn_chunked(dS, dq, ld, db, dg, &sq, nk, nv, dk, dv, 1.0f / sqrtf((float)dk), dO, ldo, scr), 0);
	CHECK_EQ_INT(cudaMemcpy(S, dS, n * ns * 4, cudaMemcpyDeviceToHost), cudaSuccess);
	CHECK_EQ_INT(cudaMemcpy(og, dO, T * ldo * 4, cudaMemcpyDeviceToHost), cudaSuccess);
	worst = hb_test_max_nan(rel_err(oc, og, T * ldo), rel_err(Sc, S, n * ns));
	for (size_t t = 0; t < T; t++) /* the row padding untouched */
		CHECK(og[t * ldo + ldo - 1] == 0);
	printf("# chunked delta rule nk=%zu nv=%zu dk=%zu dv=%zu, %u sequences of %zu rows: worst |err| / max(1, max|ref|) "
	       "%.3g\n", nk, nv, dk, dv, n, T, worst);
	cudaFree(dS), cudaFree(dq), cudaFree(db), cudaFree(dg), cudaFree(dO), cudaFree(scr);
	free(qkv), free(beta), free(g), free(dec), free(S), free(Sc), free(oc), free(og);
	return worst;
}
#endif

/* The delta rule's chunked form (hb_cuda_gdnc.cu) against the CPU's
 * recurrent scan: spans whole and partial, several sequences a launch,
 * key widths padded (100 of 128), decays of 1 and of 0. */
static void the_chunked_delta_rule_matches_the_cpu(void)
{
#ifdef HB_WITH_CUDA
	static const uint32_t l1[] = {150, 64}, l2[] = {1, 130, 63}, l3[] = {65}, l4[] = {200};
	struct hb_error err;

	hb_error_clear(&err);
	if (hb_cuda_start(&err)) {
		hb_test_skip("no usable CUDA device: %s", err.msg);
		return;
	}
	CHECK(chunked_case(16, 48, 128, 128, l1, 2, 1) <= 2e-5);
	CHECK(chunked_case(2, 6, 64, 96, l2, 3, 1) <= 2e-5);
	CHECK(chunked_case(1, 1, 32, 40, l3, 1, 0) <= 2e-5);
	CHECK(chunked_case(4, 8, 100, 24, l4, 1, 1) <= 2e-5);
	hb_cuda_stop();
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

/*
 * The indexer's scores on tiles (hbk_qsa_score_tiles) against the warp
 * kernel it replaces, through hbk_qsa_select_batch: every score bit for
 * bit, so every selection the same.  Both widths it is built for, one
 * head and sixteen, queries and groups off the tiles' sizes, queries
 * reaching different numbers of groups (a tile's end past some of them).
 */
#if defined(HB_WITH_CUDA) && !defined(HB_CUDA_EMULATED)
static size_t scores_case(size_t nq, size_t heads, size_t dim, uint64_t most, size_t *compared)
{
	size_t iq_ld = heads * dim + 3, keep = 24, ratio = 4, rows_ld = keep * ratio + ratio, differ = 0;
	float *iq = malloc(nq * iq_ld * 4), *pooled = malloc(most * dim * 4), *sc[2];
	uint64_t *groups = malloc(nq * 8), *visible = malloc(nq * 8);
	int32_t *rows[2], *cnt[2];
	void *dg, *dv, *df, *dr[2], *dc[2], *ds[2];

	for (size_t i = 0; i < nq * iq_ld; i++)
		iq[i] = unit();
	for (size_t i = 0; i < most * dim; i++)
		pooled[i] = unit();
	for (size_t i = 0; i < nq; i++) {
		groups[i] = i + 1 == nq ? most : 1 + (lcg >> 33) % most, lcg = lcg * 6364136223846793005u + 1;
		visible[i] = groups[i] * ratio + i % ratio;
	}
	float *diq = dev_copy(iq, nq * iq_ld), *dp = dev_copy(pooled, most * dim);
	CHECK_EQ_INT(cudaMalloc(&dg, nq * 8), cudaSuccess);
	CHECK_EQ_INT(cudaMalloc(&dv, nq * 8), cudaSuccess);
	CHECK_EQ_INT(cudaMalloc(&df, nq * most * 4), cudaSuccess);
	CHECK_EQ_INT(cudaMemcpy(dg, groups, nq * 8, cudaMemcpyHostToDevice), cudaSuccess);
	CHECK_EQ_INT(cudaMemcpy(dv, visible, nq * 8, cudaMemcpyHostToDevice), cudaSuccess);
	for (int f = 0; f < 2; f++) {
		int was = hbk_qsa_tiles;
		CHECK_EQ_INT(cudaMalloc(&ds[f], nq * most * 4), cudaSuccess);
		CHECK_EQ_INT(cudaMalloc(&dr[f], nq * rows_ld * 4), cudaSuccess);
		CHECK_EQ_INT(cudaMalloc(&dc[f], nq * 4), cudaSuccess);
		CHECK_EQ_INT(cudaMemset(ds[f], 0x7f, nq * most * 4), cudaSuccess);
		hbk_qsa_tiles = f == 0;
		CHECK_EQ_INT(hbk_qsa_select_batch(nq, diq, iq_ld, heads, dim, dp, dg, dv, most, keep, ratio, ds[f], most,
						  df, dr[f], rows_ld, dc[f]),
			     cudaSuccess);
		hbk_qsa_tiles = was;
		sc[f] = malloc(nq * most * 4), rows[f] = malloc(nq * rows_ld * 4), cnt[f] = malloc(nq * 4);
		CHECK_EQ_INT(cudaMemcpy(sc[f], ds[f], nq * most * 4, cudaMemcpyDeviceToHost), cudaSuccess);
		CHECK_EQ_INT(cudaMemcpy(rows[f], dr[f], nq * rows_ld * 4, cudaMemcpyDeviceToHost), cudaSuccess);
		CHECK_EQ_INT(cudaMemcpy(cnt[f], dc[f], nq * 4, cudaMemcpyDeviceToHost), cudaSuccess);
	}
	for (size_t i = 0; i < nq; i++) {
		differ += memcmp(sc[0] + i * most, sc[1] + i * most, groups[i] * 4) != 0;
		differ += cnt[0][i] != cnt[1][i] ||
			  memcmp(rows[0] + i * rows_ld, rows[1] + i * rows_ld, (size_t)cnt[0][i] * 4) != 0;
		*compared += groups[i];
	}
	for (int f = 0; f < 2; f++)
		free(sc[f]), free(rows[f]), free(cnt[f]), cudaFree(ds[f]), cudaFree(dr[f]), cudaFree(dc[f]);
	free(iq), free(pooled), free(groups), free(visible);
	cudaFree(diq), cudaFree(dp), cudaFree(dg), cudaFree(dv), cudaFree(df);
	return differ;
}
#endif

static void the_tiled_indexer_scores_are_the_warp_kernels(void)
{
#if defined(HB_CUDA_EMULATED)
	hb_test_skip("the device emulated: no device kernels to compare");
#elif defined(HB_WITH_CUDA)
	struct hb_error err;
	size_t compared = 0;

	hb_error_clear(&err);
	if (hb_cuda_start(&err)) {
		hb_test_skip("no usable CUDA device: %s", err.msg);
		return;
	}
	CHECK_EQ_INT((int)scores_case(100, 16, 128, 700, &compared), 0);
	CHECK_EQ_INT((int)scores_case(1, 16, 128, 1, &compared), 0);
	CHECK_EQ_INT((int)scores_case(37, 3, 64, 65, &compared), 0);
	CHECK_EQ_INT((int)scores_case(17, 1, 128, 300, &compared), 0);
	printf("# indexer scores: %zu compared, tiles against the warp kernel\n", compared);
	CHECK(compared > 0);
	hb_cuda_stop();
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

/* hb_session_final on the device graph: the last chunk's logits and
 * routes are the same bytes as a kept chunk's, its state is not copied
 * back (fewer bytes come down), and the session is spent. */
static void a_final_chunk_leaves_its_state_on_the_device(void)
{
#ifdef HB_WITH_CUDA
	struct hb_error err;
	struct hb_model *m;
	struct hb_session *s[2] = {NULL, NULL};
	struct hb_cuda_stats st0, st1;
	uint64_t down[2];
	int32_t toks[40];
	float *lg[2];
	size_t V;

	hb_error_clear(&err);
	setenv("HB_CUDA_GRAPH", "1", 1);
	if (hb_cuda_start(&err)) {
		hb_test_skip("no usable CUDA device: %s", err.msg);
		return;
	}
	m = load("general");
	if (!m)
		return;
	hb_cuda_resident(m->map, m->map_len);
	V = (size_t)m->vocab_physical;
	for (size_t t = 0; t < 40; t++)
		toks[t] = (int32_t)((t * 7919 + 13) % V);
	for (int i = 0; i < 2; i++) {
		lg[i] = malloc(40 * V * sizeof(float));
		CHECK_EQ_INT(hb_session_create(m, NULL, 64, &s[i], NULL), HB_OK);
		hb_session_observe_only(s[i], 1u << HB_OBS_LOGITS);
		if (i)
			hb_session_final(s[i]);
		hb_cuda_stats(&st0);
		CHECK_EQ_INT(hb_session_forward(s[i], toks, 40, lg[i], NULL, NULL, NULL), HB_OK);
		hb_cuda_stats(&st1);
		CHECK_EQ_U64(st1.chunks - st0.chunks, 1);
		down[i] = st1.bytes_out - st0.bytes_out;
	}
	CHECK(!memcmp(lg[0], lg[1], 40 * V * sizeof(float)));
	CHECK(down[1] < down[0]);
	CHECK(!hb_session_spent(s[0]));
	CHECK(hb_session_spent(s[1]));
	printf("# a final chunk: %" PRIu64 " bytes down, a kept one %" PRIu64 "\n", down[1], down[0]);
	for (int i = 0; i < 2; i++)
		hb_session_free(s[i]), free(lg[i]);
	hb_model_free(m);
	hb_cuda_stop();
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

/* A device error in the middle of a chunk: the chunk fails, the session's
 * digest and frontier are as before, the device's error is kept; on the
 * seam's operations and on the device graph (graph). */
#ifdef HB_WITH_CUDA
static void device_error_case(bool graph)
{
	struct hb_error err;
	struct hb_model *m;
	struct hb_session *s = NULL;
	struct hb_cuda_stats st0, st1;
	uint8_t before[32], after[32];
	int32_t toks[6] = {1, 2, 3, 4, 5, 6};

	hb_error_clear(&err);
	setenv("HB_CUDA_GRAPH", graph ? "1" : "0", 1);
	if (hb_cuda_start(&err)) {
		hb_test_skip("no usable CUDA device: %s", err.msg);
		return;
	}
	m = load("realshape");
	if (!m)
		return;
	hb_cuda_resident(m->map, m->map_len);
	CHECK_EQ_INT(hb_session_create(m, NULL, 64, &s, NULL), HB_OK);
	hb_cuda_stats(&st0);
	CHECK_EQ_INT(hb_session_forward(s, toks, 3, NULL, NULL, NULL, NULL), HB_OK);
	hb_cuda_stats(&st1);
	CHECK_EQ_U64(st1.chunks - st0.chunks, graph ? 1 : 0);
	hb_session_digest(s, before);
	for (uint64_t at = 1; at <= 40; at += 13) {
		hb_cuda_test_fail_at(at);
		hb_error_clear(&err);
		CHECK(hb_session_forward(s, toks + 3, 3, NULL, NULL, NULL, &err) != HB_OK);
		hb_session_digest(s, after);
		CHECK(!memcmp(before, after, 32));
		CHECK_EQ_U64(hb_session_frontier(s), 3);
		CHECK_EQ_INT(hb_cuda_error(NULL), HB_ERR_FAULT);
		/* the device is failed for good: a fresh start recovers it */
		hb_cuda_stop();
		CHECK_EQ_INT(hb_cuda_start(NULL), HB_OK);
		hb_cuda_resident(m->map, m->map_len);
	}
	CHECK_EQ_INT(hb_session_forward(s, toks + 3, 3, NULL, NULL, NULL, NULL), HB_OK);
	CHECK_EQ_U64(hb_session_frontier(s), 6);
	hb_session_free(s);
	hb_model_free(m);
	hb_cuda_stop();
}
#endif

static void a_device_error_leaves_the_session_unchanged(void)
{
#ifdef HB_WITH_CUDA
	device_error_case(false);
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

static void a_device_error_in_the_graph_leaves_the_session_unchanged(void)
{
#ifdef HB_WITH_CUDA
	device_error_case(true);
#else
	hb_test_skip("built without nvcc: the CUDA backend is not compiled");
#endif
}

HB_TEST_MAIN(T(realshape_gpu_matches_cpu), T(general_gpu_matches_cpu), T(the_chunked_delta_rule_matches_the_cpu),
	     T(the_tiled_indexer_scores_are_the_warp_kernels), T(a_final_chunk_leaves_its_state_on_the_device),
	     T(a_device_error_leaves_the_session_unchanged),
	     T(a_device_error_in_the_graph_leaves_the_session_unchanged))
