/*
 * hb_layer_mix.c: the hyper-connections, the PLE injection and the sparse
 * MoE block of a Qwen4Exp decoder layer, transcribed from upstream's
 * Qwen4ExpTextGatedResidual, Qwen4ExpTextPLELayer / NGramEmbedding and
 * Qwen4ExpTextSparseMoeBlock (transformers 5.17.0), float32 throughout.
 */
#include "hb_base.h"
#include "backend/hb_backend.h"
#include "backend/simd/hb_simd.h"
#include "hb_session_int.h"
#include "math/hb_math.h"
#include "stream/hb_stream_expert.h"

#include <math.h>
#include <pthread.h>

/* ------------------------------------------------------------ item ranges */

struct each_ctx {
	struct hb_session *s;
	size_t n, per;
	hb_range_fn fn;
	void *ctx;
};

static int each_job(void *ctx, size_t job, unsigned worker)
{
	const struct each_ctx *e = ctx;
	size_t i0 = job * e->per, i1 = i0 + e->per < e->n ? i0 + e->per : e->n;

	(void)worker;
	e->fn(e->s, i0, i1, e->ctx);
	return HB_OK;
}

void hb_each(struct hb_session *s, size_t n, hb_range_fn fn, void *ctx)
{
	unsigned workers = s->pool ? hb_pool_size(s->pool) : 1;
	struct each_ctx e = { s, n, 0, fn, ctx };

	if (workers < 2 || n < 2) {
		fn(s, 0, n, ctx);
		return;
	}
	e.per = (n + 4 * (size_t)workers - 1) / (4 * (size_t)workers); /* about 4 ranges a worker */
	hb_pool_run(s->pool, (n + e.per - 1) / e.per, each_job, &e);
}

/* ------------------------------------------------------------ hyper-connections */

static void hc_norm(struct hb_session *s, size_t t0, size_t t1, void *ctx)
{
	const struct hb_hc_weights *w = ctx;
	const struct hb_qwen_config *c = &s->m->cfg;
	size_t H = (size_t)c->hidden_size, hcH = (size_t)c->hc_count * H;

	for (size_t t = t0; t < t1; t++)
		hb_rmsnorm_zc(s->x + t * hcH, w->norm, hcH, H, c->rms_norm_eps, s->xn + t * hcH);
}

static void hc_silu(struct hb_session *s, size_t t0, size_t t1, void *ctx)
{
	size_t hc = (size_t)s->m->cfg.hc_count, R = (size_t)s->m->cfg.hc_lowrank;

	(void)ctx;
	for (size_t i = t0 * R; i < t1 * R; i++)
		s->big[i] = hb_silu(s->big[i] / (float)hc);
}

static void hc_mix(struct hb_session *s, size_t t0, size_t t1, void *ctx)
{
	size_t H = (size_t)s->m->cfg.hidden_size, hc = (size_t)s->m->cfg.hc_count, hcH = hc * H;

	(void)ctx;
	for (size_t t = t0; t < t1; t++) {
		const float *xn = s->xn + t * hcH, *mix = s->big2 + t * hcH;
		float *out = s->mixed + t * H;
		hb_kern_sigmoid(mix, hcH, s->big2 + t * hcH); /* the gates, in place */
		/* stream by stream over the row: each out[j] sums k = 0..hc-1 in
		 * order from +0, as one accumulator would, but vectorises */
		for (size_t j = 0; j < H; j++)
			out[j] = 0;
		for (size_t k = 0; k < hc; k++)
			for (size_t j = 0; j < H; j++)
				out[j] += mix[k * H + j] * xn[k * H + j];
		for (size_t j = 0; j < H; j++)
			out[j] /= (float)hc;
	}
}

/* mixed = mean_s(sigmoid(up(silu(down(xn) / hc))) * xn), inj = 2 sigmoid(inject(xn) / hc);
 * the per-token loops over the pool (hb_each) */
void hb_hc_forward(struct hb_session *s, const struct hb_hc_weights *w, size_t T, bool combine)
{
	size_t hc = (size_t)s->m->cfg.hc_count;
	/* the injection's product beside down's, which reads the same xn */
	struct hb_mm in[] = { { &w->down, s->xn, s->big }, { &w->inject, s->xn, s->inj } };

	hb_each(s, T, hc_norm, (void *)w);
	hb_matmul_group(s->pool, in, combine ? 2 : 1, T);
	hb_each(s, T, hc_silu, NULL);
	hb_matmul(s->pool, &w->up, s->big, T, s->big2, s->scratch);
	hb_each(s, T, hc_mix, NULL);
	if (!combine)
		return;
	for (size_t i = 0; i < T * hc; i++)
		s->inj[i] = 2.0f * hb_sigmoid(s->inj[i] / (float)hc);
}

static void hc_add(struct hb_session *s, size_t t0, size_t t1, void *ctx)
{
	size_t H = (size_t)s->m->cfg.hidden_size, hc = (size_t)s->m->cfg.hc_count;

	(void)ctx;
	for (size_t t = t0; t < t1; t++)
		for (size_t k = 0; k < hc; k++)
			for (size_t j = 0; j < H; j++)
				s->x[t * hc * H + k * H + j] += s->y[t * H + j] * s->inj[t * hc + k];
}

/* streams += block output x injection weight, per stream */
void hb_hc_inject(struct hb_session *s, size_t T)
{
	hb_each(s, T, hc_add, NULL);
}

/* ------------------------------------------------------------ PLE */

/*
 * Upstream's _shift_right_ignore_eos: token i - shift, unless an EOS lies
 * in [i - shift, i - 1] (the segment restarts after every EOS), then EOS.
 */
static int32_t shifted(const int32_t *full, size_t i, size_t shift, int32_t eos)
{
	for (size_t p = i - shift; p < i; p++)
		if (full[p] == eos)
			return eos;
	return full[i - shift];
}

static void ple_row_ids(const struct hb_ple_table_hash *h, const int32_t *full, size_t i,
			int32_t eos, uint64_t hpn, int64_t *ids)
{
	size_t k = 0;

	for (uint32_t n = 2; n <= h->ngram_size; n++) {
		uint64_t mixed = (uint64_t)full[i] * h->multipliers[0];
		for (uint32_t sft = 1; sft < n; sft++)
			mixed ^= (uint64_t)shifted(full, i, sft, eos) * h->multipliers[sft];
		for (uint64_t j = 0; j < hpn; j++, k++)
			ids[k] = (int64_t)(mixed % h->head_sizes[k] + h->head_offsets[k]);
	}
}

/*
 * A block's PLE rows, read over the pool a page at a time: the rows are
 * sorted by page, and each page that any of them lies on is read once,
 * checked against its digest and every row on it decoded from that one
 * snapshot, by one worker in its own scratch (AFN-003's single-snapshot
 * rule: a row copied out comes from the bytes that were hashed, never
 * from another read).  Rows of one n-gram, or of n-grams sharing a page,
 * then cost one read and one SHA-256 of a page between them, and a decode
 * step's pages are spread over the workers too.  Every row is tried, so
 * the failure reported is the first in (token, head) order whichever
 * worker met it, with the rows before it counted.
 */
struct ple_read {
	struct hb_session *s;
	const struct hb_ple_weights *w;
	const int64_t *ids;          /* [n][heads] */
	const struct hb_ple_req *req; /* [nreq] by page, then index */
	float *emb;                  /* [n][P] */
	size_t n, heads, width, P, nreq, per; /* per: requests a job */
	size_t first_bad;            /* flat (token, head) index of the first failure, or n * heads */
	size_t pages;                /* pages read, by all the jobs */
	struct hb_error err;
	pthread_mutex_t mu;
};

static void ple_failed(struct ple_read *r, size_t at, const struct hb_error *e)
{
	pthread_mutex_lock(&r->mu);
	if (at < r->first_bad)
		r->first_bad = at, r->err = *e;
	pthread_mutex_unlock(&r->mu);
}

/* the pages whose first request lies in [job * per, (job + 1) * per) */
static int ple_read_job(void *ctx, size_t job, unsigned worker)
{
	struct ple_read *r = ctx;
	struct hb_ple_store *ple = r->s->m->ple;
	struct hb_ple_scratch *sc = &r->s->ple_scratch[worker];
	const struct hb_ple_req *q = r->req;
	size_t i = job * r->per, end = (job + 1) * r->per < r->nreq ? (job + 1) * r->per : r->nreq, pages = 0;

	while (i > 0 && i < end && q[i].page == q[i - 1].page)
		i++; /* that page is the earlier job's */
	for (; i < end; pages++) {
		uint64_t page = q[i].page;
		struct hb_error e;
		hb_error_clear(&e);
		if (hb_ple_page_verify(ple, page, sc, &e)) {
			ple_failed(r, q[i].at, &e); /* the page's first row in order */
			while (i < r->nreq && q[i].page == page)
				i++;
			continue;
		}
		for (; i < r->nreq && q[i].page == page; i++) {
			size_t at = q[i].at, t = at / r->heads, k = at % r->heads;
			hb_error_clear(&e);
			if (hb_ple_snapshot_row_f32(ple, sc, r->w->first_row + (uint64_t)r->ids[at],
						    r->emb + t * r->P + k * r->width, r->width, &e))
				ple_failed(r, at, &e);
		}
	}
	pthread_mutex_lock(&r->mu);
	r->pages += pages;
	pthread_mutex_unlock(&r->mu);
	return HB_OK;
}

static int by_page(const void *a, const void *b)
{
	const struct hb_ple_req *x = a, *y = b;

	if (x->page != y->page)
		return x->page < y->page ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/* the block's rows located and sorted by page into r->req (a row outside
 * the store is a failure at its index) */
static void ple_plan(struct ple_read *r, struct hb_ple_req *req)
{
	const struct hb_ple_layout *l = hb_ple_store_layout(r->s->m->ple);
	size_t rows = r->n * r->heads;

	r->nreq = 0;
	for (size_t at = 0; at < rows; at++) {
		struct hb_ple_loc loc;
		struct hb_error e;
		hb_error_clear(&e);
		if (hb_ple_locate(l, r->w->first_row + (uint64_t)r->ids[at], &loc, &e)) {
			ple_failed(r, at, &e);
			continue;
		}
		req[r->nreq++] = (struct hb_ple_req){ loc.page, (uint32_t)at };
	}
	qsort(req, r->nreq, sizeof(*req), by_page);
	r->req = req;
}

/*
 * The chunk's PLE embedding rows of a layer into emb [T][ple_embed_dim],
 * read through the verified page API (AFN-003), with their observations;
 * the n-gram history is read, not advanced (hb_ple_history).
 */
int hb_ple_rows(struct hb_session *s, uint32_t layer, const int32_t *tokens, size_t T, float *emb,
		hb_observe_fn obs, void *ctx, struct hb_error *err)
{
	const struct hb_model *m = s->m;
	const struct hb_qwen_config *c = &m->cfg;
	const struct hb_ple_weights *w = &m->layers[layer].ple;
	const struct hb_ple_state *st = &s->ple[layer];
	size_t ctxn = (size_t)c->ngram_size - 1, heads = w->hash.heads, width = (size_t)w->hash.row_width;
	size_t P = (size_t)c->ple_embed_dim, workers = hb_pool_size(s->pool);
	int32_t eos = (int32_t)c->eos_token_ids[0];
	int32_t full[8 + HB_PLE_ROWS_BLOCK];
	struct ple_read r;

	memset(&r, 0, sizeof(r));
	r.s = s, r.w = w, r.ids = s->ple_ids, r.heads = heads, r.width = width, r.P = P;
	pthread_mutex_init(&r.mu, NULL);
	for (size_t t0 = 0; t0 < T; t0 += HB_PLE_ROWS_BLOCK) {
		size_t n = T - t0 < HB_PLE_ROWS_BLOCK ? T - t0 : HB_PLE_ROWS_BLOCK;
		for (size_t i = 0; i < ctxn; i++)
			full[i] = t0 == 0 ? st->hist[i] : tokens[t0 - ctxn + i];
		memcpy(full + ctxn, tokens + t0, n * sizeof(int32_t));
		/* the ids, and their observations in token order */
		for (size_t t = 0; t < n; t++) {
			ple_row_ids(&w->hash, full, ctxn + t, eos, (uint64_t)c->heads_per_ngram, s->ple_ids + t * heads);
			if (obs)
				obs(ctx, HB_OBS_PLE_ROWS, (int32_t)layer, s->pos + t0 + t, s->ple_ids + t * heads, heads);
		}
		r.emb = emb + t0 * P, r.n = n, r.first_bad = n * heads, r.pages = 0;
		ple_plan(&r, s->ple_req);
		r.per = (r.nreq + 4 * workers - 1) / (4 * workers); /* a few jobs a worker */
		if (workers > 1 && r.nreq > 1)
			hb_pool_run(s->pool, (r.nreq + r.per - 1) / r.per, ple_read_job, &r);
		else if (r.nreq)
			r.per = r.nreq, ple_read_job(&r, 0, 0);
		s->ctr.ple_rows_read += r.first_bad;
		s->ctr.ple_pages_read += r.pages;
		if (r.first_bad < n * heads) {
			pthread_mutex_destroy(&r.mu);
			if (err)
				*err = r.err;
			return r.err.code ? r.err.code : HB_ERR_INTERNAL;
		}
	}
	pthread_mutex_destroy(&r.mu);
	return HB_OK;
}

/* the n-gram history moves on by the chunk: the last ngram_size - 1 tokens seen */
void hb_ple_history(struct hb_session *s, uint32_t layer, const int32_t *tokens, size_t T)
{
	struct hb_ple_state *st = &s->ple[layer];
	size_t ctxn = (size_t)s->m->cfg.ngram_size - 1;

	for (size_t i = 0; i < ctxn; i++) {
		size_t from = T + i; /* index into hist ++ tokens */
		st->hist[i] = from < ctxn ? st->hist[from] : tokens[from - ctxn];
	}
}

int hb_ple_forward(struct hb_session *s, uint32_t layer, const int32_t *tokens, size_t T,
		   hb_observe_fn obs, void *ctx, struct hb_error *err)
{
	const struct hb_model *m = s->m;
	const struct hb_qwen_config *c = &m->cfg;
	const struct hb_ple_weights *w = &m->layers[layer].ple;
	struct hb_ple_state *st = &s->ple[layer];
	size_t H = (size_t)c->hidden_size, hc = (size_t)c->hc_count, hcH = hc * H;
	size_t K = (size_t)c->ple_conv_kernel_size;
	size_t dil = (size_t)c->ngram_size, state_len = (K - 1) * dil;
	float *emb = s->big, *key = s->big2, *val = s->big3;
	int rc;

	/* embeddings of every token of the chunk, read through the verified page API */
	if ((rc = hb_ple_rows(s, layer, tokens, T, emb, obs, ctx, err)))
		return rc;
	hb_matmul_group(s->pool, (struct hb_mm[]){ { &w->key, emb, key }, { &w->value, emb, val } }, 2,
			T); /* [T][hcH], [T][H] */
	for (size_t t = 0; t < T; t++) {
		float *kt = key + t * hcH, *q = s->xn + t * hcH, *gv = s->tok, *gvn = s->tok2;
		hb_rmsnorm_zc(kt, w->norm_key, hcH, H, c->rms_norm_eps, kt);
		hb_rmsnorm_zc(s->x + t * hcH, w->norm_query, hcH, H, c->rms_norm_eps, q);
		for (size_t k = 0; k < hc; k++) {
			float g = hb_dot(kt + k * H, q + k * H, H) / sqrtf((float)H);
			float mag = sqrtf(fabsf(g) > 1e-6f ? fabsf(g) : 1e-6f);
			float sg = hb_sigmoid(g > 0 ? mag : g < 0 ? -mag : 0.0f);
			for (size_t j = 0; j < H; j++)
				gv[k * H + j] = sg * val[t * H + j];
		}
		hb_rmsnorm_zc(gv, w->norm_conv, hcH, H, c->rms_norm_eps, gvn);
		/* dilated depthwise convolution over [state ... gvn], then silu */
		for (size_t ch = 0; ch < hcH; ch++) {
			float acc = 0;
			for (size_t j = 0; j < K; j++) {
				size_t back = (K - 1 - j) * dil;  /* how far before this token */
				float in = back == 0 ? gvn[ch] : st->conv[(state_len - back) * hcH + ch];
				acc += w->conv[ch * K + j] * in;
			}
			s->x[t * hcH + ch] += gv[ch] + hb_silu(acc);
		}
		/* the state keeps the last (K-1)*dilation normed inputs */
		if (state_len) {
			memmove(st->conv, st->conv + hcH, (state_len - 1) * hcH * sizeof(float));
			memcpy(st->conv + (state_len - 1) * hcH, gvn, hcH * sizeof(float));
		}
	}
	hb_ple_history(s, layer, tokens, T);
	return HB_OK;
}

/* ------------------------------------------------------------ MoE */

/* top-k of probs by descending probability, ties to the lower expert id */
static void top_k(const float *p, size_t E, size_t k, int32_t *ids)
{
	for (size_t r = 0; r < k; r++) {
		int32_t best = -1;
		for (size_t e = 0; e < E; e++) {
			bool taken = false;
			for (size_t q = 0; q < r && !taken; q++)
				taken = ids[q] == (int32_t)e;
			if (taken)
				continue;
			if (best < 0 || p[e] > p[best])
				best = (int32_t)e;
		}
		ids[r] = best;
	}
}

/* Expert e over the chunk's tokens routed to it: gathered, one batched
 * SwiGLU, each output into its (token, rank) row of s->experts. */
static void run_expert(struct hb_session *s, uint32_t e, size_t T, const struct hb_wmat *g,
		       const struct hb_wmat *u, const struct hb_wmat *d)
{
	const struct hb_qwen_config *c = &s->m->cfg;
	size_t H = (size_t)c->hidden_size, k = (size_t)c->num_experts_per_tok;
	size_t I = (size_t)c->moe_intermediate_size, n = 0;

	for (size_t t = 0; t < T; t++)
		for (size_t r = 0; r < k; r++)
			if (s->route_ids[t * k + r] == (int32_t)e) {
				memcpy(s->big2 + n * H, s->mixed + t * H, H * sizeof(float));
				s->big3[n] = (float)(t * k + r); /* where its output goes */
				n++;
			}
	if (!n)
		return;
	/* big is free again: the router probabilities are consumed.  down runs
	 * for all n tokens at once (each row decoded once, over the pool);
	 * gate and up are consumed by then, so big takes the n x H result */
	hb_swiglu(s->pool, g, u, d, s->big2, n, s->big, s->big + n * I, s->big2 + n * H, s->big, s->scratch);
	for (size_t i = 0; i < n; i++) {
		size_t slot = (size_t)s->big3[i];
		memcpy(s->experts + slot * H, s->big + i * H, H * sizeof(float));
	}
}

/*
 * Predictions move bytes only (AFN-019 H2): the router's top-k above is
 * what executes whatever they say.  previous: this chunk's last route of
 * the layer, hinted P2 for the next token's same layer.  router-ahead:
 * layer + 1's router on this layer's post-attention state (s->mixed),
 * each token's top-k hinted P1.  s->big is free here (the probabilities
 * of this layer's router are consumed).
 */
static void predict(struct hb_session *s, uint32_t layer, size_t T)
{
	const struct hb_model *m = s->m;
	size_t E = (size_t)m->cfg.num_experts, k = (size_t)m->cfg.num_experts_per_tok;
	uint32_t w = m->xs_ahead_width ? m->xs_ahead_width : (uint32_t)k;

	if (m->xs_predict == HB_XS_PRED_PREV_TOKEN) {
		hb_xs_prev_route(m->xs, &s->xs_prev, layer, s->pos + T - 1, s->route_ids + (T - 1) * k);
		return;
	}
	if (m->xs_predict != HB_XS_PRED_ROUTER_AHEAD || layer + 1 >= m->cfg.num_layers)
		return;
	hb_matmul(s->pool, &m->layers[layer + 1].moe.router, s->mixed, T, s->big, s->scratch);
	for (size_t t = 0; t < T; t++) {
		hb_softmax(s->big + t * E, E);
		hb_xs_router_ahead(m->xs, layer + 1, s->pos + t, s->big + t * E, (uint32_t)E, w, 0);
	}
}

/* ------------------------------------------------------------ expert jobs */

/*
 * A chunk of at most HB_EJOB_T tokens (decode, and prefill in chunks of
 * up to that): the chunk's experts and the shared expert run as jobs side
 * by side on the pool, each whole on one thread (hb_swiglu without a pool computes every output by the same
 * canonical kernels, so the bits are those of the row-split run), into
 * per-worker buffers, each routed output into its (token, rank) row.
 * Worth it when there are enough jobs to keep every worker busy; fewer,
 * and each expert's rows are split over the pool as before.
 */
struct ejobs {
	struct hb_session *s;
	uint32_t layer;
	size_t T, n;
	struct hb_xs_route *r; /* streamed, else the experts are s->xs_u[0..n) */
};

static void expert_job(struct hb_session *s, unsigned worker, uint32_t e, size_t T, const struct hb_wmat *g,
		       const struct hb_wmat *u, const struct hb_wmat *d)
{
	const struct hb_qwen_config *c = &s->m->cfg;
	size_t H = (size_t)c->hidden_size, k = (size_t)c->num_experts_per_tok;
	size_t I = (size_t)c->moe_intermediate_size, n = 0;
	float *x = s->ejob + worker * s->ejob_stride;
	float *gb = x + T * H, *ub = gb + T * I, *out = ub + T * I;
	uint32_t *rows = s->ejob_rows + worker * s->ejob_T;

	for (size_t t = 0; t < T; t++)
		for (size_t r = 0; r < k; r++)
			if (s->route_ids[t * k + r] == (int32_t)e) {
				memcpy(x + n * H, s->mixed + t * H, H * sizeof(float));
				rows[n++] = (uint32_t)(t * k + r);
			}
	if (!n)
		return;
	hb_swiglu(NULL, g, u, d, x, n, gb, ub, gb, out, NULL);
	for (size_t i = 0; i < n; i++)
		memcpy(s->experts + (size_t)rows[i] * H, out + i * H, H * sizeof(float));
}

static void shared_expert(struct hb_session *s, struct hb_pool *pool, const struct hb_moe_weights *w, size_t T)
{
	hb_swiglu(pool, &w->shared_gate, &w->shared_up, &w->shared_down, s->mixed, T, s->big, s->big2, s->big,
		  s->big2, s->scratch);
}

static int ejob_run(void *ctx, size_t job, unsigned worker)
{
	struct ejobs *j = ctx;
	struct hb_session *s = j->s;
	const struct hb_model *m = s->m;
	struct hb_wmat g, u, d;
	struct hb_xs_lease l;
	size_t idx;
	int rc;

	if (job == 0) { /* the shared expert: the largest job, first */
		shared_expert(s, NULL, &m->layers[j->layer].moe, j->T);
		return HB_OK;
	}
	if (!j->r) {
		hb_model_expert(m, j->layer, s->xs_u[job - 1], &g, &u, &d);
		expert_job(s, worker, s->xs_u[job - 1], j->T, &g, &u, &d);
		return HB_OK;
	}
	/* streamed: whichever record arrives next, one lease held at a time;
	 * a failure is the route's (r->err), read back after the jobs */
	memset(&l, 0, sizeof(l));
	if ((rc = hb_xs_route_next(m->xs, j->r, &idx, &l, NULL)))
		return rc == HB_XS_DONE ? HB_ERR_INTERNAL : rc;
	if ((rc = hb_xs_expert_views(m->xs, &l, &g, &u, &d, NULL))) {
		hb_xs_release(m->xs, &l, NULL);
		return rc;
	}
	expert_job(s, worker, s->xs_u[idx], j->T, &g, &u, &d);
	return hb_xs_release(m->xs, &l, NULL);
}

/* Whether this chunk's n experts and the shared one run as jobs. */
static bool ejobs_fit(const struct hb_session *s, size_t T, size_t n)
{
	unsigned workers = hb_pool_size(s->pool);

	if (workers < 2 || T > s->ejob_T || n + 1 < 2 * (size_t)workers)
		return false;
	/* streamed: every worker may hold a lease while another waits for a
	 * slot, so the budget must hold more records than there are workers */
	return !s->m->xs || hb_xs_slots(s->m->xs) > workers;
}

/* ------------------------------------------------------------ streamed */

/*
 * The routed experts from the streaming engine (hb_stream.h's plan): the
 * chunk's distinct experts in ascending id as one route, each lease turned
 * into views as it arrives, run, and released.  Arrival order cannot
 * change a bit: every expert writes only its own (token, rank) rows, and
 * the sum runs after, in rank order.  A failed read fails the chunk before
 * anything publishes; the route always ends, so no slot stays pinned.
 */
static int moe_streamed(struct hb_session *s, uint32_t layer, size_t T, size_t n, bool jobs,
			struct hb_error *err)
{
	const struct hb_model *m = s->m;
	size_t idx;
	struct hb_xs_route r;
	struct hb_xs_lease l;
	int rc;

	hb_xs_set_position(m->xs, s->pos, layer);
	hb_xs_route_init(&r, s->xs_w, (size_t)m->cfg.num_experts);
	r.owner = (uint64_t)(uintptr_t)s;
	r.owner_gen = s->frontier;
	r.phase = T > 1 ? HB_XS_PHASE_PREFILL : HB_XS_PHASE_DECODE;
	r.token_pos = s->pos;
	r.token_mask = T >= 64 ? UINT64_MAX : (1ull << T) - 1;
	if ((rc = hb_xs_route_begin(m->xs, &r, layer, s->xs_u, n, err)))
		return rc;
	predict(s, layer, T); /* after the exact reads are queued: P0 first */
	if (jobs) {
		struct ejobs j = {s, layer, T, n, &r};
		if ((rc = hb_pool_run(s->pool, n + 1, ejob_run, &j))) {
			if (r.err.code && err)
				*err = r.err;
			else
				hb_error_set(err, rc, "expert_cache", "an expert job failed");
		}
		hb_xs_route_end(m->xs, &r);
		return rc;
	}
	memset(&l, 0, sizeof(l));
	while (!(rc = hb_xs_route_next(m->xs, &r, &idx, &l, err))) {
		struct hb_wmat g, u, d;
		if ((rc = hb_xs_expert_views(m->xs, &l, &g, &u, &d, err))) {
			hb_xs_release(m->xs, &l, NULL);
			break;
		}
		run_expert(s, s->xs_u[idx], T, &g, &u, &d);
		if ((rc = hb_xs_release(m->xs, &l, err)))
			break;
	}
	hb_xs_route_end(m->xs, &r);
	return rc == HB_XS_DONE ? HB_OK : rc;
}

/* The chunk's distinct experts in ascending id into s->xs_u; their count. */
static size_t chunk_experts(struct hb_session *s, size_t T)
{
	size_t E = (size_t)s->m->cfg.num_experts, k = (size_t)s->m->cfg.num_experts_per_tok, n = 0;
	uint64_t seen[HB_EM_MAX_EXPERTS / 64] = {0};

	for (size_t i = 0; i < T * k; i++)
		seen[(uint32_t)s->route_ids[i] / 64] |= 1ull << ((uint32_t)s->route_ids[i] % 64);
	for (size_t e = 0; e < E; e++)
		if (seen[e / 64] >> (e % 64) & 1)
			s->xs_u[n++] = (uint32_t)e;
	return n;
}

/* tokens [t0, t1): the router's softmax over s->big, top-k, weights */
static void route(struct hb_session *s, size_t t0, size_t t1, void *ctx)
{
	const struct hb_qwen_config *c = &s->m->cfg;
	size_t E = (size_t)c->num_experts, k = (size_t)c->num_experts_per_tok;

	(void)ctx;
	for (size_t t = t0; t < t1; t++) {
		float *p = s->big + t * E, sum = 0;
		int32_t *ids = s->route_ids + t * k;
		float *wt = s->route_w + t * k;
		hb_softmax(p, E);
		top_k(p, E, k, ids);
		for (size_t r = 0; r < k; r++)
			sum += p[ids[r]];
		for (size_t r = 0; r < k; r++)
			wt[r] = c->norm_topk_prob ? p[ids[r]] / sum : p[ids[r]];
	}
}

struct moe_dev {
	const struct hb_model *m;
	uint32_t layer;
};

static void moe_dev_expert(const void *ctx, uint32_t e, struct hb_wmat *g, struct hb_wmat *u, struct hb_wmat *d)
{
	const struct moe_dev *c = ctx;

	hb_model_expert(c->m, c->layer, e, g, u, d);
}

/* The routed experts and their weighted sum into s->y in one device call
 * (hb_moe_batch), where a device takes them; never for streamed experts
 * (their views live only while leased). */
static bool moe_device(struct hb_session *s, uint32_t layer, size_t T, size_t n)
{
	const struct hb_device_ops *dev = hb_backend_device();
	struct moe_dev c = { s->m, layer };
	struct hb_moe_batch b = { T, (size_t)s->m->cfg.num_experts_per_tok, n, s->xs_u, moe_dev_expert, &c,
				  s->route_ids, s->route_w, s->mixed, s->y };

	return dev && dev->moe_experts && !s->m->xs && dev->moe_experts(&b);
}

/* y = the routed experts' outputs weighted, in route-rank order (tokens
 * [t0, t1): each token's sum is one job's, so the pool changes no bit) */
static void routed_sum(struct hb_session *s, size_t t0, size_t t1, void *ctx)
{
	const struct hb_qwen_config *c = &s->m->cfg;
	size_t H = (size_t)c->hidden_size, k = (size_t)c->num_experts_per_tok;

	(void)ctx;
	/* rank by rank over the whole row (each y[j] still sums ranks 0..k-1
	 * in order from +0: the same additions, in a loop that vectorises) */
	for (size_t t = t0; t < t1; t++) {
		float *y = s->y + t * H;
		for (size_t j = 0; j < H; j++)
			y[j] = 0;
		for (size_t r = 0; r < k; r++) {
			const float *e = s->experts + (t * k + r) * H;
			float w = s->route_w[t * k + r];
			for (size_t j = 0; j < H; j++)
				y[j] += e[j] * w;
		}
	}
}

/* y += sigmoid(shared gate) x the shared expert's output (big2, big3) */
static void shared_add(struct hb_session *s, size_t t0, size_t t1, void *ctx)
{
	size_t H = (size_t)s->m->cfg.hidden_size;

	(void)ctx;
	for (size_t t = t0; t < t1; t++) {
		float gw = hb_sigmoid(s->big3[t]);
		for (size_t j = 0; j < H; j++)
			s->y[t * H + j] += gw * s->big2[t * H + j];
	}
}

int hb_moe_forward(struct hb_session *s, uint32_t layer, size_t T, hb_observe_fn obs, void *ctx,
		   struct hb_error *err)
{
	const struct hb_model *m = s->m;
	const struct hb_qwen_config *c = &m->cfg;
	const struct hb_moe_weights *w = &m->layers[layer].moe;
	size_t k = (size_t)c->num_experts_per_tok, n;
	bool jobs, dev_sum;
	int rc;

	/* router: float32 softmax, top-k, renormalised (tokens over the
	 * pool), then the observations in token order */
	hb_matmul(s->pool, &w->router, s->mixed, T, s->big, s->scratch);
	hb_each(s, T, route, NULL);
	for (size_t t = 0; obs && t < T; t++) {
		obs(ctx, HB_OBS_ROUTES, (int32_t)layer, s->pos + t, s->route_ids + t * k, k);
		obs(ctx, HB_OBS_ROUTE_WEIGHTS, (int32_t)layer, s->pos + t, s->route_w + t * k, k);
	}
	/* group the chunk's tokens by expert: one batched pass per expert */
	n = chunk_experts(s, T);
	jobs = ejobs_fit(s, T, n);
	s->ctr.expert_evaluations += T * k; /* every (token, rank) once */
	dev_sum = moe_device(s, layer, T, n);
	if (dev_sum) {
		jobs = false; /* s->y holds the weighted sum */
	} else if (hb_moe_flat_fits(s, T)) {
		hb_moe_flat(s, layer, n);
		jobs = true; /* the shared expert is in big2 */
	} else if (m->xs) {
		if ((rc = moe_streamed(s, layer, T, n, jobs, err)))
			return rc;
	} else if (jobs) {
		struct ejobs j = {s, layer, T, n, NULL};
		hb_pool_run(s->pool, n + 1, ejob_run, &j);
	} else {
		for (size_t i = 0; i < n; i++) {
			struct hb_wmat g, u, d;
			hb_model_expert(m, layer, s->xs_u[i], &g, &u, &d);
			run_expert(s, s->xs_u[i], T, &g, &u, &d);
		}
	}
	/* weighted sum in route-rank order (the device's, above, is the same
	 * sum), then the gated shared expert; both per token over the pool */
	if (!dev_sum)
		hb_each(s, T, routed_sum, NULL);
	if (!jobs) /* else a job computed it into big2 */
		shared_expert(s, s->pool, w, T);
	hb_matmul(s->pool, &w->shared_gate_w, s->mixed, T, s->big3, s->scratch);
	hb_each(s, T, shared_add, NULL);
	return HB_OK;
}
