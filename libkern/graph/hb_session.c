/*
 * hb_session.c: session lifecycle and the forward driver (see hb_session.h).
 *
 * Per chunk: embeddings repeated over the hc streams; per layer the PLE
 * injection (PLE layers), the attention hyper-connection around Gated
 * DeltaNet or QSA, the MLP hyper-connection around the sparse MoE; then the
 * final stream mixer and lm_head.  Matrix products take the whole chunk at
 * once; recurrences (convolutions, the delta rule, QSA caches) advance token
 * by token inside it, so a chunking never changes the arithmetic of a token.
 */
#include "hb_base.h"
#include "hb_io.h"
#include "hb_publish.h"
#include "hb_session_int.h"
#include "hb_session_test.h"
#include "hb_sha256.h"
#include "math/hb_math.h"

#include <fcntl.h>
#include <math.h>
#include <unistd.h>

/* every change of a session's public state takes a new one, so that a
 * device holding a state can tell it is still current (hb_dev_chunk.h) */
static uint64_t epochs;

uint64_t hb_session_new_epoch(void)
{
	return __atomic_add_fetch(&epochs, 1, __ATOMIC_RELAXED);
}

static size_t max3(size_t a, size_t b, size_t c)
{
	size_t m = a > b ? a : b;
	return m > c ? m : c;
}

/* The widest row any stage writes per token; every workspace row is this. */
static size_t max_projection(const struct hb_qwen_config *c)
{
	size_t H = (size_t)c->hidden_size, hcH = (size_t)c->hc_count * H;
	size_t kd = (size_t)(c->linear_num_key_heads * c->linear_key_head_dim);
	size_t vd = (size_t)(c->linear_num_value_heads * c->linear_value_head_dim);
	size_t nv = (size_t)c->linear_num_value_heads;
	size_t m = max3(hcH, 2 * kd + vd, 2 * nv + vd);
	m = max3(m, (size_t)(2 * c->num_heads * c->head_dim), (size_t)(2 * c->num_kv_heads * c->head_dim));
	m = max3(m, (size_t)((c->indexer_n_heads + 1) * c->indexer_head_dim), (size_t)c->ple_embed_dim);
	m = max3(m, (size_t)c->num_experts, 2 * (size_t)c->moe_intermediate_size + H);
	m = max3(m, 2 * (size_t)c->shared_expert_intermediate_size, (size_t)c->hc_lowrank);
	return m + 16;
}

static void ws_free(struct hb_session *s)
{
	free(s->x), free(s->xn), free(s->mixed), free(s->inj), free(s->y);
	free(s->big), free(s->big2), free(s->big3), free(s->experts);
	free(s->route_ids), free(s->route_w), free(s->out_logits);
	free(s->ejob), free(s->ejob_rows);
	s->ejob = NULL;
	s->ejob_rows = NULL;
	s->out_logits = NULL;
	s->x = s->xn = s->mixed = s->inj = s->y = s->big = s->big2 = s->big3 = s->experts = NULL;
	s->route_ids = NULL;
	s->route_w = NULL;
	s->ws_T = 0;
}

/*
 * malloc, and with touch every page written once (scratch: any bytes).
 * The writes are volatile: GCC turns malloc followed by a memset of zeros
 * into calloc, which writes nothing to memory fresh from the kernel, so
 * the pages were faulted in by the first chunk after all (seen in a
 * profile of the bench model's prefill: faults in the experts' gathers
 * and the products' stores).
 */
static void *ws_get(size_t bytes, bool touch)
{
	volatile unsigned char *p = malloc(bytes);

	if (p && touch && bytes) {
		for (size_t i = 0; i < bytes; i += 4096)
			p[i] = 0;
		p[bytes - 1] = 0;
	}
	return (void *)p;
}

/* Grow the chunk workspace to T tokens (only when a larger chunk comes);
 * touch: fault its pages in now rather than in the chunk that uses them. */
static int ws_reserve(struct hb_session *s, size_t T, bool touch, struct hb_error *err)
{
	const struct hb_qwen_config *c = &s->m->cfg;
	size_t H = (size_t)c->hidden_size, hcH = (size_t)c->hc_count * H, k = (size_t)c->num_experts_per_tok;
	size_t workers = (size_t)hb_pool_size(s->pool);

	if (T <= s->ws_T)
		return HB_OK;
	ws_free(s);
	s->x = ws_get(T * hcH * sizeof(float), touch);
	s->xn = ws_get(T * hcH * sizeof(float), touch);
	s->mixed = ws_get(T * H * sizeof(float), touch);
	s->inj = ws_get(T * (size_t)c->hc_count * sizeof(float), touch);
	s->y = ws_get(T * H * sizeof(float), touch);
	s->big = ws_get(T * s->max_proj * sizeof(float), touch);
	s->big2 = ws_get(T * s->max_proj * sizeof(float), touch);
	s->big3 = ws_get(T * s->max_proj * sizeof(float), touch);
	s->experts = ws_get(T * k * H * sizeof(float), touch);
	s->route_ids = ws_get(T * k * sizeof(int32_t), touch);
	s->route_w = ws_get(T * k * sizeof(float), touch);
	s->out_logits = ws_get(T * (size_t)s->m->vocab_physical * sizeof(float), touch);
	/* expert jobs only for chunks of at most HB_EJOB_T tokens: a larger
	 * chunk splits each expert's rows over the pool instead */
	s->ejob_T = T < HB_EJOB_T ? T : HB_EJOB_T;
	s->ejob_stride = s->ejob_T * (2 * H + 2 * (size_t)c->moe_intermediate_size);
	s->ejob = ws_get(workers * s->ejob_stride * sizeof(float), touch);
	s->ejob_rows = ws_get(workers * s->ejob_T * sizeof(uint32_t), touch);
	if (s->fail_alloc) {
		s->fail_alloc = false;
		free(s->out_logits);
		s->out_logits = NULL;
	}
	if (!s->out_logits || !s->x || !s->xn || !s->mixed || !s->inj || !s->y || !s->big || !s->big2 || !s->big3 ||
	    !s->experts || !s->route_ids || !s->route_w || !s->ejob || !s->ejob_rows) {
		ws_free(s);
		return hb_error_set(err, HB_ERR_NOMEM, "session", "cannot allocate the workspace of a %zu-token chunk", T);
	}
	s->ws_T = T;
	return HB_OK;
}

int hb_session_reserve(struct hb_session *s, size_t T, struct hb_error *err)
{
	return ws_reserve(s, T < s->cap ? T : (size_t)s->cap, true, err);
}

/* ------------------------------------------------------------ banks */

static void bank_free(struct hb_bank *b, size_t L)
{
	for (size_t i = 0; i < L; i++) {
		if (b->gdn)
			free(b->gdn[i].conv), free(b->gdn[i].S);
		if (b->ple)
			free(b->ple[i].conv);
	}
	free(b->gdn), free(b->ple), free(b->groups);
	memset(b, 0, sizeof(*b));
}

static size_t gdn_conv_len(const struct hb_qwen_config *c)
{
	size_t cd = (size_t)(2 * c->linear_num_key_heads * c->linear_key_head_dim +
			     c->linear_num_value_heads * c->linear_value_head_dim);
	return (c->linear_conv_kernel > 1 ? (size_t)c->linear_conv_kernel - 1 : 1) * cd;
}

static size_t gdn_S_len(const struct hb_qwen_config *c)
{
	return (size_t)(c->linear_num_value_heads * c->linear_key_head_dim * c->linear_value_head_dim);
}

static size_t ple_conv_len(const struct hb_qwen_config *c)
{
	size_t sl = (size_t)((c->ple_conv_kernel_size - 1) * c->ngram_size);
	return (sl ? sl : 1) * (size_t)(c->hc_count * c->hidden_size);
}

static bool bank_alloc(struct hb_bank *b, const struct hb_qwen_config *c)
{
	size_t L = (size_t)c->num_layers;

	b->gdn = calloc(L, sizeof(*b->gdn));
	b->ple = calloc(L, sizeof(*b->ple));
	b->groups = calloc(L, sizeof(*b->groups));
	if (!b->gdn || !b->ple || !b->groups)
		return false;
	for (size_t i = 0; i < L; i++) {
		if (c->layer_kind[i] == HB_LAYER_LINEAR) {
			b->gdn[i].conv = calloc(gdn_conv_len(c), sizeof(float));
			b->gdn[i].S = calloc(gdn_S_len(c), sizeof(float));
			if (!b->gdn[i].conv || !b->gdn[i].S)
				return false;
		}
		if (hb_qwen_ple_index(c, (uint32_t)i + 1) >= 0) {
			b->ple[i].conv = calloc(ple_conv_len(c), sizeof(float));
			if (!b->ple[i].conv)
				return false;
		}
	}
	return true;
}

/* The state of an empty sequence: zero recurrences, an EOS n-gram context
 * (upstream starts PLE history as EOS tokens). */
static void bank_clear(struct hb_bank *b, const struct hb_qwen_config *c)
{
	for (size_t i = 0; i < (size_t)c->num_layers; i++) {
		if (b->gdn[i].conv) {
			memset(b->gdn[i].conv, 0, gdn_conv_len(c) * sizeof(float));
			memset(b->gdn[i].S, 0, gdn_S_len(c) * sizeof(float));
		}
		if (b->ple[i].conv) {
			memset(b->ple[i].conv, 0, ple_conv_len(c) * sizeof(float));
			for (size_t j = 0; j < 8; j++)
				b->ple[i].hist[j] = (int32_t)c->eos_token_ids[0];
		}
		b->groups[i] = 0;
	}
}

/* src into dst; the GDN recurrent states only when with_S (a chunk's GDN
 * layers read theirs from the public bank: hb_gdn_scan_from) */
static void bank_copy(struct hb_bank *dst, const struct hb_bank *src, const struct hb_qwen_config *c, bool with_S)
{
	for (size_t i = 0; i < (size_t)c->num_layers; i++) {
		if (src->gdn[i].conv) {
			memcpy(dst->gdn[i].conv, src->gdn[i].conv, gdn_conv_len(c) * sizeof(float));
			if (with_S)
				memcpy(dst->gdn[i].S, src->gdn[i].S, gdn_S_len(c) * sizeof(float));
		}
		if (src->ple[i].conv) {
			memcpy(dst->ple[i].conv, src->ple[i].conv, ple_conv_len(c) * sizeof(float));
			memcpy(dst->ple[i].hist, src->ple[i].hist, sizeof(src->ple[i].hist));
		}
		dst->groups[i] = src->groups[i];
	}
}

/* ------------------------------------------------------------ lifecycle */

int hb_session_create(const struct hb_model *m, struct hb_pool *pool, uint64_t max_tokens,
		      struct hb_session **out, struct hb_error *err)
{
	const struct hb_qwen_config *c = &m->cfg;
	struct hb_session *s = calloc(1, sizeof(*s));
	size_t L = (size_t)c->num_layers;
	size_t ratio = (size_t)(c->qsa ? c->indexer_compress_ratio : 1);
	size_t keep = (size_t)(c->qsa ? c->indexer_budget / ratio : 0);
	size_t rows_ld = c->qsa ? hb_qsa_rows_ld(c) : 8;
	bool fail;
	int rc = hb_backend_start(err);

	if (rc) {
		free(s);
		return rc;
	}
	if (!s)
		return hb_error_set(err, HB_ERR_NOMEM, "session", "out of memory");
	s->m = m;
	s->pool = pool;
	s->cap = max_tokens;
	s->obs_kinds = UINT32_MAX; /* every kind, until the caller says (hb_session_observe_only) */
	s->epoch = hb_session_new_epoch();
	s->max_proj = max_projection(c);
	s->qsa = calloc(L, sizeof(*s->qsa));
	s->tokens = calloc(max_tokens ? max_tokens : 1, sizeof(int32_t));
	s->scratch = malloc((size_t)hb_pool_size(pool) * s->max_proj * sizeof(float) + 64);
	s->tok = malloc(s->max_proj * sizeof(float));
	s->flat = hb_moe_flat_new(c);
	s->tok2 = malloc(s->max_proj * sizeof(float));
	s->sel = malloc((HB_QSA_BLOCK * (keep + rows_ld) + rows_ld) * sizeof(int32_t));
	s->scores_ld = (size_t)(max_tokens / ratio + 1);
	s->scores = malloc(HB_QSA_BLOCK * s->scores_ld * sizeof(float));
	s->probs = malloc((size_t)hb_pool_size(pool) * rows_ld * sizeof(float));
	s->qout = malloc(2 * HB_QSA_BLOCK * (size_t)(c->num_heads * c->head_dim) * sizeof(float) + 64);
	s->qnorm = s->qout ? s->qout + HB_QSA_BLOCK * (size_t)(c->num_heads * c->head_dim) : NULL;
	fail = !s->qsa || !s->tokens || !s->scratch || !s->tok || !s->flat || !s->tok2 || !s->sel || !s->scores ||
	       !s->probs || !s->qout || !bank_alloc(&s->bank[0], c) || !bank_alloc(&s->bank[1], c);
	for (size_t i = 0; !fail && i < L; i++) {
		if (c->layer_kind[i] != HB_LAYER_SPARSE)
			continue;
		size_t kvw = (size_t)(c->num_kv_heads * c->head_dim);
		s->qsa[i].k = calloc(max_tokens * kvw, sizeof(float));
		s->qsa[i].v = calloc(max_tokens * kvw, sizeof(float));
		s->qsa[i].raw = calloc(max_tokens * (size_t)c->indexer_head_dim, sizeof(float));
		s->qsa[i].pooled = calloc((max_tokens / ratio + 1) * (size_t)c->indexer_head_dim, sizeof(float));
		fail = !s->qsa[i].k || !s->qsa[i].v || !s->qsa[i].raw || !s->qsa[i].pooled;
	}
	s->xs_u = calloc((size_t)c->num_experts, sizeof(*s->xs_u));
	fail |= !s->xs_u;
	if (!fail && m->xs) {
		s->xs_w = calloc((size_t)c->num_experts, sizeof(*s->xs_w));
		fail = !s->xs_w || hb_xs_prev_init(&s->xs_prev, (uint32_t)L, (uint32_t)c->num_experts_per_tok, NULL);
	}
	if (!fail && m->ple) {
		s->ple_scratch = calloc(hb_pool_size(pool), sizeof(*s->ple_scratch));
		s->ple_ids = malloc(HB_PLE_ROWS_BLOCK * HB_PLE_MAX_HEADS * sizeof(*s->ple_ids));
		s->ple_req = malloc(HB_PLE_ROWS_BLOCK * HB_PLE_MAX_HEADS * sizeof(*s->ple_req));
		fail = !s->ple_scratch || !s->ple_ids || !s->ple_req;
		for (unsigned i = 0; !fail && i < hb_pool_size(pool); i++)
			if (hb_ple_scratch_init(&s->ple_scratch[i], m->ple, err)) {
				hb_session_free(s);
				return err ? err->code : HB_ERR_NOMEM;
			}
	}
	if (fail) {
		hb_session_free(s);
		return hb_error_set(err, HB_ERR_NOMEM, "session", "cannot allocate state for %" PRIu64 " tokens",
				    max_tokens);
	}
	bank_clear(&s->bank[0], c);
	bank_clear(&s->bank[1], c);
	*out = s;
	return HB_OK;
}

void hb_session_free(struct hb_session *s)
{
	if (!s)
		return;
	for (uint64_t i = 0; s->qsa && i < s->m->cfg.num_layers; i++)
		free(s->qsa[i].k), free(s->qsa[i].v), free(s->qsa[i].raw), free(s->qsa[i].pooled);
	free(s->qsa);
	bank_free(&s->bank[0], (size_t)s->m->cfg.num_layers);
	bank_free(&s->bank[1], (size_t)s->m->cfg.num_layers);
	for (unsigned i = 0; s->ple_scratch && i < hb_pool_size(s->pool); i++)
		hb_ple_scratch_release(&s->ple_scratch[i]);
	free(s->ple_scratch), free(s->ple_ids), free(s->ple_req);
	ws_free(s);
	hb_session_dev_free(s);
	free(s->xs_w), free(s->xs_u);
	hb_xs_prev_release(&s->xs_prev);
	free(s->tokens);
	hb_moe_flat_free(s->flat);
	free(s->scratch), free(s->tok), free(s->tok2), free(s->sel), free(s->scores), free(s->probs);
	free(s->qout);
	free(s);
}

uint64_t hb_session_frontier(const struct hb_session *s)
{
	return s->frontier;
}

uint64_t hb_session_capacity(const struct hb_session *s)
{
	return s->cap;
}

const struct hb_session_counters *hb_session_counters(const struct hb_session *s)
{
	return &s->ctr;
}

int hb_session_set_start(struct hb_session *s, uint64_t first, struct hb_error *err)
{
	if (s->frontier != s->base)
		return hb_error_diag(err, "session-not-empty", HB_ERR_INVALID, "session", false, 0,
				     "the first position can only be set on an empty session");
	if (first > UINT64_MAX - s->cap)
		return hb_error_diag(err, "session-start-range", HB_ERR_INVALID, "first position", false, 0,
				     "position %" PRIu64 " leaves no room for the session's %" PRIu64
				     " positions before 2^64",
				     first, (uint64_t)s->cap);
	s->base = s->frontier = first;
	s->epoch = hb_session_new_epoch();
	return HB_OK;
}

void hb_session_test_fault(struct hb_session *s, int (*fn)(void *, const char *), void *ctx)
{
	s->fault = fn;
	s->fault_ctx = ctx;
}

void hb_session_test_poison(struct hb_session *s)
{
	if (s->x && s->ws_T)
		s->x[0] = NAN;
}

void hb_session_test_fail_alloc(struct hb_session *s)
{
	ws_free(s);
	s->fail_alloc = true;
}

void hb_session_test_workspace(const struct hb_session *s, void (*each)(void *ctx, const void *p, size_t bytes),
			       void *ctx)
{
	const struct hb_qwen_config *c = &s->m->cfg;
	size_t T = s->ws_T, H = (size_t)c->hidden_size, hcH = (size_t)c->hc_count * H;
	size_t k = (size_t)c->num_experts_per_tok, workers = (size_t)hb_pool_size(s->pool);

	if (!T)
		return;
	each(ctx, s->x, T * hcH * sizeof(float));
	each(ctx, s->xn, T * hcH * sizeof(float));
	each(ctx, s->mixed, T * H * sizeof(float));
	each(ctx, s->y, T * H * sizeof(float));
	each(ctx, s->big, T * s->max_proj * sizeof(float));
	each(ctx, s->big2, T * s->max_proj * sizeof(float));
	each(ctx, s->big3, T * s->max_proj * sizeof(float));
	each(ctx, s->experts, T * k * H * sizeof(float));
	each(ctx, s->out_logits, T * (size_t)s->m->vocab_physical * sizeof(float));
	each(ctx, s->ejob, workers * s->ejob_stride * sizeof(float));
}

/* ------------------------------------------------------------ the chunk */

static int stage(struct hb_session *s, const char *name, struct hb_error *err)
{
	if (s->fault && s->fault(s->fault_ctx, name))
		return hb_error_diag(err, "session-fault", HB_ERR_FAULT, "session", false, 0,
				     "injected failure after stage %s", name);
	return HB_OK;
}

/* Every value the chunk would publish, checked before publication. */
static bool chunk_finite(const struct hb_session *s, size_t T)
{
	const struct hb_qwen_config *c = &s->m->cfg;
	const struct hb_bank *b = &s->bank[1 - s->pub];
	uint64_t rel = s->pos - s->base;

	/* a device chunk's streams stay on the device, which checked them */
	if (s->gdn_bad || (s->dev_ran ? !s->dev_finite : !hb_all_finite(s->x, T * (size_t)(c->hc_count * c->hidden_size))) ||
	    (s->want_logits && !hb_all_finite(s->out_logits + (s->last_logits ? T - 1 : 0) * (size_t)s->m->vocab_physical,
					      (s->last_logits ? 1 : T) * (size_t)s->m->vocab_physical)))
		return false;
	/* a final chunk's state stayed on the device (hb_session_final): the
	 * session never reads it, and what it published came from the streams */
	for (size_t i = 0; (!s->dev_ran || s->dev_kept) && i < (size_t)c->num_layers; i++) {
		if (b->gdn[i].conv && !hb_all_finite(b->gdn[i].conv, gdn_conv_len(c)))
			return false; /* the recurrent states: checked by hb_gdn_scan_from (gdn_bad) */
		if (b->ple[i].conv && !hb_all_finite(b->ple[i].conv, ple_conv_len(c)))
			return false;
		if (s->qsa[i].k) {
			size_t kvw = (size_t)(c->num_kv_heads * c->head_dim);
			if (!hb_all_finite(s->qsa[i].k + rel * kvw, T * kvw) ||
			    !hb_all_finite(s->qsa[i].v + rel * kvw, T * kvw))
				return false;
		}
	}
	return true;
}

static int run_chunk(struct hb_session *s, const int32_t *tokens, size_t T, hb_observe_fn obs,
		     void *obs_ctx, struct hb_error *err)
{
	const struct hb_model *m = s->m;
	const struct hb_qwen_config *c = &m->cfg;
	size_t H = (size_t)c->hidden_size, hc = (size_t)c->hc_count, hcH = hc * H;
	char name[48];
	int rc;

	for (size_t t = 0; t < T; t++) {
		hb_wmat_row(&m->embed, (uint64_t)tokens[t], s->x + t * hcH);
		for (size_t k = 1; k < hc; k++)
			memcpy(s->x + t * hcH + k * H, s->x + t * hcH, H * sizeof(float));
	}
	if ((rc = stage(s, "embed", err)))
		return rc;
	for (uint32_t l = 0; l < c->num_layers; l++) {
		const struct hb_layer_weights *L = &m->layers[l];
		if (L->has_ple) {
			if ((rc = hb_ple_forward(s, l, tokens, T, obs, obs_ctx, err)))
				return rc;
			snprintf(name, sizeof(name), "layer%u.ple", l);
			if ((rc = stage(s, name, err)))
				return rc;
		}
		hb_hc_forward(s, &L->attn_hc, T, true);
		if (obs) /* the predictors' taps (AFN-021): read, never changed */
			for (size_t t = 0; t < T; t++)
				obs(obs_ctx, HB_OBS_PRE_ATTN, (int32_t)l, s->pos + t, s->mixed + t * H, H);
		if (L->kind == HB_LAYER_LINEAR)
			hb_gdn_forward(s, l, T);
		else
			hb_qsa_forward(s, l, T, obs, obs_ctx);
		hb_hc_inject(s, T);
		snprintf(name, sizeof(name), "layer%u.mixer", l);
		if ((rc = stage(s, name, err)))
			return rc;
		hb_hc_forward(s, &L->mlp_hc, T, true);
		if (obs)
			for (size_t t = 0; t < T; t++)
				obs(obs_ctx, HB_OBS_PRE_MOE, (int32_t)l, s->pos + t, s->mixed + t * H, H);
		if ((rc = hb_moe_forward(s, l, T, obs, obs_ctx, err)))
			return rc;
		hb_hc_inject(s, T);
		snprintf(name, sizeof(name), "layer%u.moe", l);
		if ((rc = stage(s, name, err)))
			return rc;
		if (obs)
			for (size_t t = 0; t < T; t++)
				obs(obs_ctx, HB_OBS_HIDDEN, (int32_t)l, s->pos + t, s->x + t * hcH, hcH);
	}
	hb_hc_forward(s, &m->mixer, T, false);
	if ((rc = stage(s, "final", err)))
		return rc;
	/* the vocabulary projection is the largest matrix of a token; a caller
	 * that takes no logits (replay, rewind, restore) does not pay for it */
	if (s->want_logits && s->last_logits)
		hb_matmul(s->pool, &m->lm_head, s->mixed + (T - 1) * (size_t)m->cfg.hidden_size, 1,
			  s->out_logits + (T - 1) * (size_t)m->vocab_physical, s->scratch);
	else if (s->want_logits)
		hb_matmul(s->pool, &m->lm_head, s->mixed, T, s->out_logits, s->scratch);
	return stage(s, "logits", err);
}

/* Check a chunk of T tokens and prepare its private bank (nothing public
 * changes; a failure leaves the session as it was). */
/* the refusal of a spent session's operations */
static int spent(struct hb_error *err)
{
	return hb_error_diag(err, "session-spent", HB_ERR_INVALID, "session", false, 0,
			     "the session's last chunk has run (hb_session_final): it has no state to go on from");
}

void hb_session_final(struct hb_session *s)
{
	s->final_next = true;
}

bool hb_session_spent(const struct hb_session *s)
{
	return s->spent;
}

static int chunk_open(struct hb_session *s, const int32_t *tokens, size_t T, bool want_logits, struct hb_error *err)
{
	const struct hb_model *m = s->m;
	struct hb_bank *priv = &s->bank[1 - s->pub];
	int rc;

	if (s->spent)
		return spent(err);
	if (T > s->cap - (s->frontier - s->base))
		return hb_error_diag(err, "session-context-full", HB_ERR_INVALID, "session", false, 0,
				     "%zu more tokens after %" PRIu64 " exceed the %" PRIu64 "-token context",
				     T, s->frontier - s->base, s->cap);
	for (size_t t = 0; t < T; t++)
		if (tokens[t] < 0 || (uint64_t)tokens[t] >= m->vocab_physical)
			return hb_error_diag(err, "session-token-range", HB_ERR_INVALID, "tokens", false, 0,
					     "token %d at %zu is outside [0, %" PRIu64 ")", tokens[t], t,
					     m->vocab_physical);
	if ((rc = ws_reserve(s, T, false, err)))
		return rc;
	/* the private bank starts as a copy of the public one (the GDN states
	 * as each GDN layer starts: every layer of a chunk runs) */
	bank_copy(priv, &s->bank[s->pub], &m->cfg, false);
	s->gdn_from = s->bank[s->pub].gdn;
	s->gdn_bad = false;
	s->gdn = priv->gdn;
	s->ple = priv->ple;
	s->groups = priv->groups;
	s->pos = s->frontier;
	s->want_logits = want_logits;
	s->dev_ran = false;
	return HB_OK;
}

/* After the chunk ran (rc its result): every value it would publish is finite. */
static int chunk_close(struct hb_session *s, size_t T, int rc, struct hb_error *err)
{
	s->gdn_from = NULL;
	if (!rc && !chunk_finite(s, T))
		rc = hb_error_diag(err, "session-nonfinite", HB_ERR_NONFINITE, "session", false, 0,
				   "a value of the chunk is not finite; nothing was published");
	return rc; /* on failure the private bank is discarded by the next chunk's copy */
}

/* Run tokens[0..T) on the private bank; publishes nothing.  On success
 * the chunk's values are finite and s->out_logits holds its rows (when
 * want_logits). */
static int chunk_private(struct hb_session *s, const int32_t *tokens, size_t T, bool want_logits,
			 hb_observe_fn obs, void *obs_ctx, struct hb_error *err)
{
	int rc = chunk_open(s, tokens, T, want_logits, err);

	if (rc)
		return rc;
	s->dev_ran = hb_session_dev_chunks(&s, 1, &tokens, &T, obs, &obs_ctx, &rc, err);
	if (!s->dev_ran)
		rc = run_chunk(s, tokens, T, obs, obs_ctx, err);
	return chunk_close(s, T, rc, err);
}

/* Publication: the token run, the caller's logits, then one flip. */
static void chunk_publish(struct hb_session *s, const int32_t *tokens, size_t T, float *logits,
			  hb_observe_fn obs, void *obs_ctx)
{
	const struct hb_model *m = s->m;

	memcpy(s->tokens + (s->frontier - s->base), tokens, T * sizeof(int32_t));
	if (logits && s->last_logits) {
		memcpy(logits, s->out_logits + (T - 1) * (size_t)m->vocab_physical, (size_t)m->vocab_physical * sizeof(float));
		if (obs)
			obs(obs_ctx, HB_OBS_LOGITS, -1, s->pos + T - 1, logits, (size_t)m->vocab_physical);
	} else if (logits) {
		memcpy(logits, s->out_logits, T * (size_t)m->vocab_physical * sizeof(float));
		if (obs)
			for (size_t t = 0; t < T; t++)
				obs(obs_ctx, HB_OBS_LOGITS, -1, s->pos + t, logits + t * m->vocab_physical,
				    (size_t)m->vocab_physical);
	}
	s->pub = 1 - s->pub;
	s->frontier += T;
	s->epoch = s->dev_ran ? s->dev_epoch : hb_session_new_epoch();
	s->ctr.tokens += T;
	s->spent = s->final_next;
	s->final_next = false;
}

int hb_session_forward(struct hb_session *s, const int32_t *tokens, size_t T, float *logits,
		       hb_observe_fn obs, void *obs_ctx, struct hb_error *err)
{
	int rc;

	if (!T)
		return HB_OK;
	if ((rc = chunk_private(s, tokens, T, logits != NULL, obs, obs_ctx, err)))
		return rc;
	chunk_publish(s, tokens, T, logits, obs, obs_ctx);
	return HB_OK;
}

int hb_session_forward_last(struct hb_session *s, const int32_t *tokens, size_t T, float *last,
			    hb_observe_fn obs, void *obs_ctx, struct hb_error *err)
{
	int rc;

	if (!T)
		return HB_OK;
	if (!last)
		return hb_error_set(err, HB_ERR_INVALID, "logits", "forward_last needs a row for the logits");
	s->last_logits = true;
	rc = chunk_private(s, tokens, T, true, obs, obs_ctx, err);
	if (!rc)
		chunk_publish(s, tokens, T, last, obs, obs_ctx);
	s->last_logits = false;
	return rc;
}

int hb_session_forward_batch(struct hb_session *const *ss, size_t n, const int32_t *const *tokens,
			     const size_t *T, float *const *logits, hb_observe_fn obs, void *const *obs_ctx,
			     struct hb_error *err)
{
	bool dev;
	int rc = HB_OK;

	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < i; j++)
			if (ss[j] == ss[i])
				return hb_error_diag(err, "session-batch", HB_ERR_INVALID, "session", false, 0,
						     "session %zu of the batch is session %zu again", i, j);
		if (!T[i] || ss[i]->m != ss[0]->m)
			return hb_error_diag(err, "session-batch", HB_ERR_INVALID, "session", false, 0,
					     "session %zu of the batch has %s", i,
					     T[i] ? "another model" : "no tokens");
	}
	for (size_t i = 0; i < n; i++)
		if ((rc = chunk_open(ss[i], tokens[i], T[i], logits && logits[i], err))) {
			while (i--)
				ss[i]->gdn_from = NULL;
			return rc;
		}
	dev = hb_session_dev_chunks(ss, n, tokens, T, obs, obs_ctx, &rc, err);
	for (size_t i = 0; i < n; i++) {
		ss[i]->dev_ran = dev;
		if (!dev && !rc)
			rc = run_chunk(ss[i], tokens[i], T[i], obs, obs_ctx ? obs_ctx[i] : NULL, err);
	}
	for (size_t i = 0; i < n; i++) /* every session's, even past a failure: each closes its chunk */
		rc = chunk_close(ss[i], T[i], rc, err);
	if (rc)
		return rc; /* no session published */
	for (size_t i = 0; i < n; i++)
		chunk_publish(ss[i], tokens[i], T[i], logits ? logits[i] : NULL, obs, obs_ctx ? obs_ctx[i] : NULL);
	return HB_OK;
}

int hb_session_verify(struct hb_session *s, const int32_t *tokens, size_t T, float *logits,
		      hb_session_decide_fn decide, void *decide_ctx, hb_observe_fn obs, void *obs_ctx,
		      size_t *kept, struct hb_error *err)
{
	size_t keep;
	int rc;

	*kept = 0;
	if (!T || !logits || !decide)
		return hb_error_diag(err, "session-verify", HB_ERR_INVALID, "session", false, 0,
				     "a verified chunk needs tokens, a logits buffer and a decision");
	if ((rc = chunk_private(s, tokens, T, true, obs, obs_ctx, err)))
		return rc;
	keep = decide(decide_ctx, s->out_logits, T);
	if (keep > T)
		return hb_error_diag(err, "session-verify", HB_ERR_INVALID, "session", false, 0,
				     "the decision keeps %zu of %zu tokens", keep, T);
	if (keep == T) {
		chunk_publish(s, tokens, T, logits, NULL, NULL);
		*kept = T;
		return HB_OK;
	}
	/* the rejected suffix is rolled back by never publishing the chunk:
	 * its private bank and its QSA rows past the frontier belong to no
	 * one; the kept prefix is recomputed as a chunk of its own (there is
	 * no per-token snapshot of the recurrent state to publish from) */
	memcpy(logits, s->out_logits, T * (size_t)s->m->vocab_physical * sizeof(float));
	if (keep && (rc = hb_session_forward(s, tokens, keep, NULL, NULL, NULL, err)))
		return rc;
	*kept = keep;
	return HB_OK;
}

/* ------------------------------------------------------------ state identity */

void hb_session_digest(const struct hb_session *s, uint8_t out[32])
{
	const struct hb_qwen_config *c = &s->m->cfg;
	const struct hb_bank *b = &s->bank[s->pub];
	uint64_t n = s->frontier - s->base, ratio = c->qsa ? c->indexer_compress_ratio : 1;
	struct hb_sha256 h;

	if (s->spent) {
		memset(out, 0xff, 32);
		return;
	}
	hb_sha256_init(&h);
	hb_sha256_update(&h, s->m->artifact_sha, 32);
	hb_sha256_update(&h, &s->base, sizeof(s->base));
	hb_sha256_update(&h, &s->frontier, sizeof(s->frontier));
	hb_sha256_update(&h, s->tokens, (size_t)n * sizeof(int32_t));
	for (size_t i = 0; i < (size_t)c->num_layers; i++) {
		if (b->gdn[i].S) {
			hb_sha256_update(&h, b->gdn[i].conv, gdn_conv_len(c) * sizeof(float));
			hb_sha256_update(&h, b->gdn[i].S, gdn_S_len(c) * sizeof(float));
		}
		if (b->ple[i].conv) {
			hb_sha256_update(&h, b->ple[i].conv, ple_conv_len(c) * sizeof(float));
			hb_sha256_update(&h, b->ple[i].hist, sizeof(b->ple[i].hist));
		}
		if (s->qsa[i].k) {
			size_t kvw = (size_t)(c->num_kv_heads * c->head_dim), ihd = (size_t)c->indexer_head_dim;
			hb_sha256_update(&h, &b->groups[i], sizeof(b->groups[i]));
			hb_sha256_update(&h, s->qsa[i].k, (size_t)n * kvw * sizeof(float));
			hb_sha256_update(&h, s->qsa[i].v, (size_t)n * kvw * sizeof(float));
			hb_sha256_update(&h, s->qsa[i].raw, (size_t)n * ihd * sizeof(float));
			hb_sha256_update(&h, s->qsa[i].pooled, (size_t)(b->groups[i]) * ihd * sizeof(float));
		}
	}
	(void)ratio;
	hb_sha256_final(&h, out);
}

/* ------------------------------------------------------------ lifecycle ops */

int hb_session_reset(struct hb_session *s, struct hb_error *err)
{
	bank_clear(&s->bank[s->pub], &s->m->cfg);
	s->frontier = s->base;
	s->spent = s->final_next = false;
	s->epoch = hb_session_new_epoch();
	(void)err;
	return HB_OK;
}

/* Move a candidate's state into s (the candidate was built privately). */
static void adopt(struct hb_session *s, struct hb_session *cand)
{
	struct hb_session tmp = *s;
	/* swap everything that holds state; keep s's identity (pool, hooks) */
	s->bank[0] = cand->bank[0];
	s->bank[1] = cand->bank[1];
	s->pub = cand->pub;
	s->qsa = cand->qsa;
	s->tokens = cand->tokens;
	s->frontier = cand->frontier;
	s->base = cand->base;
	s->epoch = cand->epoch; /* the same state: a device holding it holds s's now */
	cand->bank[0] = tmp.bank[0];
	cand->bank[1] = tmp.bank[1];
	cand->qsa = tmp.qsa;
	cand->tokens = tmp.tokens;
	hb_session_free(cand);
}

int hb_session_rewind(struct hb_session *s, uint64_t to, struct hb_error *err)
{
	struct hb_session *cand = NULL;
	int rc;

	if (s->spent)
		return spent(err);
	if (to < s->base || to > s->frontier)
		return hb_error_diag(err, "session-rewind", HB_ERR_INVALID, "session", false, 0,
				     "cannot rewind to %" PRIu64 " outside [%" PRIu64 ", %" PRIu64 "]",
				     to, s->base, s->frontier);
	if ((rc = hb_session_create(s->m, s->pool, s->cap, &cand, err)))
		return rc;
	cand->base = cand->frontier = s->base;
	/* replay in chunks: partition invariance makes the state identical */
	for (uint64_t done = 0; done < to - s->base;) {
		size_t n = (size_t)(to - s->base - done < 512 ? to - s->base - done : 512);
		if ((rc = hb_session_forward(cand, s->tokens + done, n, NULL, NULL, NULL, err))) {
			hb_session_free(cand);
			return rc;
		}
		done += n;
	}
	adopt(s, cand);
	return HB_OK;
}

int hb_session_fork(const struct hb_session *s, struct hb_session **copy, struct hb_error *err)
{
	const struct hb_qwen_config *c = &s->m->cfg;
	struct hb_session *d = NULL;
	uint64_t n = s->frontier - s->base;
	int rc = s->spent ? spent(err) : hb_session_create(s->m, s->pool, s->cap, &d, err);

	if (rc)
		return rc;
	d->base = s->base;
	d->frontier = s->frontier;
	d->pub = 0;
	bank_copy(&d->bank[0], &s->bank[s->pub], c, true);
	memcpy(d->tokens, s->tokens, (size_t)n * sizeof(int32_t));
	for (size_t i = 0; i < (size_t)c->num_layers; i++) {
		size_t kvw = (size_t)(c->num_kv_heads * c->head_dim), ihd = (size_t)c->indexer_head_dim;
		if (!s->qsa[i].k)
			continue;
		memcpy(d->qsa[i].k, s->qsa[i].k, (size_t)n * kvw * sizeof(float));
		memcpy(d->qsa[i].v, s->qsa[i].v, (size_t)n * kvw * sizeof(float));
		memcpy(d->qsa[i].raw, s->qsa[i].raw, (size_t)n * ihd * sizeof(float));
		memcpy(d->qsa[i].pooled, s->qsa[i].pooled, (size_t)s->bank[s->pub].groups[i] * ihd * sizeof(float));
	}
	*copy = d;
	return HB_OK;
}

#define SESSION_MAGIC "HBSESS01"

/*
 * The serialised form keeps only what cannot be recomputed cheaply and
 * exactly: the artifact identity, the first position and the token run.
 * Restore replays the run (partition invariance makes that exact), so a
 * state file can never smuggle in state no execution produced.
 */
int hb_session_save(const struct hb_session *s, const char *path, struct hb_error *err)
{
	struct hb_publish p;
	uint64_t n = s->frontier - s->base;
	uint8_t digest[32];
	int rc = s->spent ? spent(err) : hb_publish_begin(&p, path, HB_PUBLISH_REPLACE, err);

	if (rc)
		return rc;
	hb_session_digest(s, digest);
	if ((rc = hb_publish_write(&p, SESSION_MAGIC, 8, err)) ||
	    (rc = hb_publish_write(&p, s->m->artifact_sha, 32, err)) ||
	    (rc = hb_publish_write(&p, &s->base, 8, err)) || (rc = hb_publish_write(&p, &n, 8, err)) ||
	    (rc = hb_publish_write(&p, s->tokens, (size_t)n * sizeof(int32_t), err)) ||
	    (rc = hb_publish_write(&p, digest, 32, err))) {
		hb_publish_abort(&p);
		return rc;
	}
	return hb_publish_commit(&p, NULL, NULL, err);
}

int hb_session_restore(struct hb_session *s, const char *path, struct hb_error *err)
{
	char *data = NULL;
	size_t len = 0;
	uint64_t base, n;
	struct hb_session *cand = NULL;
	uint8_t digest[32];
	int rc = hb_read_file(path, (uint64_t)s->cap * 4 + 128, &data, &len, err);

	if (rc)
		return rc;
	if (len < 88 || memcmp(data, SESSION_MAGIC, 8)) {
		rc = hb_error_diag(err, "session-file", HB_ERR_FORMAT, path, false, 0, "not a session file");
		goto out;
	}
	if (memcmp(data + 8, s->m->artifact_sha, 32)) {
		rc = hb_error_diag(err, "session-model", HB_ERR_CONTRACT, path, false, 0,
				   "the session belongs to another artifact");
		goto out;
	}
	memcpy(&base, data + 40, 8);
	memcpy(&n, data + 48, 8);
	if (n > s->cap || len != 56 + n * 4 + 32) {
		rc = hb_error_diag(err, "session-file", HB_ERR_FORMAT, path, false, 0,
				   "%" PRIu64 " tokens do not fit the file or the session", n);
		goto out;
	}
	if ((rc = hb_session_create(s->m, s->pool, s->cap, &cand, err)) ||
	    (rc = hb_session_set_start(cand, base, err))) {
		hb_session_free(cand);
		goto out;
	}
	for (uint64_t done = 0; done < n && !rc;) {
		size_t k = (size_t)(n - done < 512 ? n - done : 512);
		rc = hb_session_forward(cand, (const int32_t *)(data + 56) + done, k, NULL, NULL, NULL, err);
		done += k;
	}
	if (!rc) {
		hb_session_digest(cand, digest);
		if (memcmp(digest, data + 56 + n * 4, 32))
			rc = hb_error_diag(err, "session-digest", HB_ERR_DIGEST, path, false, 0,
					   "the replayed state does not match the saved digest");
	}
	if (rc) {
		hb_session_free(cand);
		goto out;
	}
	adopt(s, cand);
out:
	free(data);
	return rc;
}
