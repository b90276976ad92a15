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
#include "hb_session_int.h"

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
	free(s->route_ids), free(s->route_w);
	s->x = s->xn = s->mixed = s->inj = s->y = s->big = s->big2 = s->big3 = s->experts = NULL;
	s->route_ids = NULL;
	s->route_w = NULL;
	s->ws_T = 0;
}

/* Grow the chunk workspace to T tokens (only when a larger chunk comes). */
static int ws_reserve(struct hb_session *s, size_t T, struct hb_error *err)
{
	const struct hb_qwen_config *c = &s->m->cfg;
	size_t H = (size_t)c->hidden_size, hcH = (size_t)c->hc_count * H, k = (size_t)c->num_experts_per_tok;

	if (T <= s->ws_T)
		return HB_OK;
	ws_free(s);
	s->x = malloc(T * hcH * sizeof(float));
	s->xn = malloc(T * hcH * sizeof(float));
	s->mixed = malloc(T * H * sizeof(float));
	s->inj = malloc(T * (size_t)c->hc_count * sizeof(float));
	s->y = malloc(T * H * sizeof(float));
	s->big = malloc(T * s->max_proj * sizeof(float));
	s->big2 = malloc(T * s->max_proj * sizeof(float));
	s->big3 = malloc(T * s->max_proj * sizeof(float));
	s->experts = malloc(T * k * H * sizeof(float));
	s->route_ids = malloc(T * k * sizeof(int32_t));
	s->route_w = malloc(T * k * sizeof(float));
	if (!s->x || !s->xn || !s->mixed || !s->inj || !s->y || !s->big || !s->big2 || !s->big3 ||
	    !s->experts || !s->route_ids || !s->route_w) {
		ws_free(s);
		return hb_error_set(err, HB_ERR_NOMEM, "session", "cannot allocate the workspace of a %zu-token chunk", T);
	}
	s->ws_T = T;
	return HB_OK;
}

int hb_session_create(const struct hb_model *m, struct hb_pool *pool, uint64_t max_tokens,
		      struct hb_session **out, struct hb_error *err)
{
	const struct hb_qwen_config *c = &m->cfg;
	struct hb_session *s = calloc(1, sizeof(*s));
	size_t L = (size_t)c->num_layers, hcH = (size_t)(c->hc_count * c->hidden_size);
	size_t ratio = (size_t)(c->qsa ? c->indexer_compress_ratio : 1);
	bool fail = false;

	if (!s)
		return hb_error_set(err, HB_ERR_NOMEM, "session", "out of memory");
	s->m = m;
	s->pool = pool;
	s->cap = max_tokens;
	s->max_proj = max_projection(c);
	s->gdn = calloc(L, sizeof(*s->gdn));
	s->qsa = calloc(L, sizeof(*s->qsa));
	s->ple = calloc(L, sizeof(*s->ple));
	s->scratch = malloc((size_t)hb_pool_size(pool) * s->max_proj * sizeof(float) + 64);
	s->tok = malloc(s->max_proj * sizeof(float));
	s->tok2 = malloc(s->max_proj * sizeof(float));
	s->sel = malloc((size_t)(c->indexer_budget + 2 * ratio + 8) * sizeof(int32_t) * 2);
	s->scores = malloc((size_t)(max_tokens / ratio + 1) * sizeof(float));
	s->probs = malloc((size_t)(c->indexer_budget + ratio + 8) * sizeof(float));
	fail = !s->gdn || !s->qsa || !s->ple || !s->scratch || !s->tok || !s->tok2 || !s->sel ||
	       !s->scores || !s->probs;
	for (size_t i = 0; !fail && i < L; i++) {
		if (c->layer_kind[i] == HB_LAYER_LINEAR) {
			size_t cd = (size_t)(2 * c->linear_num_key_heads * c->linear_key_head_dim +
					     c->linear_num_value_heads * c->linear_value_head_dim);
			size_t K = (size_t)c->linear_conv_kernel;
			s->gdn[i].conv = calloc((K > 1 ? K - 1 : 1) * cd, sizeof(float));
			s->gdn[i].S = calloc((size_t)(c->linear_num_value_heads * c->linear_key_head_dim *
						      c->linear_value_head_dim), sizeof(float));
			fail = !s->gdn[i].conv || !s->gdn[i].S;
		} else {
			size_t kvw = (size_t)(c->num_kv_heads * c->head_dim);
			s->qsa[i].k = calloc(max_tokens * kvw, sizeof(float));
			s->qsa[i].v = calloc(max_tokens * kvw, sizeof(float));
			s->qsa[i].raw = calloc(max_tokens * (size_t)c->indexer_head_dim, sizeof(float));
			s->qsa[i].pooled = calloc((max_tokens / ratio + 1) * (size_t)c->indexer_head_dim, sizeof(float));
			fail = !s->qsa[i].k || !s->qsa[i].v || !s->qsa[i].raw || !s->qsa[i].pooled;
		}
		if (!fail && hb_qwen_ple_index(c, (uint32_t)i + 1) >= 0) {
			size_t sl = (size_t)((c->ple_conv_kernel_size - 1) * c->ngram_size);
			s->ple[i].conv = calloc((sl ? sl : 1) * hcH, sizeof(float));
			/* upstream starts the n-gram context as EOS tokens */
			for (size_t j = 0; j < 8; j++)
				s->ple[i].hist[j] = (int32_t)c->eos_token_ids[0];
			fail = !s->ple[i].conv;
		}
	}
	if (!fail && m->ple && hb_ple_scratch_init(&s->ple_scratch, m->ple, err)) {
		hb_session_free(s);
		return err ? err->code : HB_ERR_NOMEM;
	}
	if (fail) {
		hb_session_free(s);
		return hb_error_set(err, HB_ERR_NOMEM, "session", "cannot allocate state for %" PRIu64 " tokens",
				    max_tokens);
	}
	*out = s;
	return HB_OK;
}

void hb_session_free(struct hb_session *s)
{
	if (!s)
		return;
	for (uint64_t i = 0; i < s->m->cfg.num_layers; i++) {
		if (s->gdn)
			free(s->gdn[i].conv), free(s->gdn[i].S);
		if (s->qsa)
			free(s->qsa[i].k), free(s->qsa[i].v), free(s->qsa[i].raw), free(s->qsa[i].pooled);
		if (s->ple)
			free(s->ple[i].conv);
	}
	free(s->gdn), free(s->qsa), free(s->ple);
	if (s->m->ple)
		hb_ple_scratch_release(&s->ple_scratch);
	ws_free(s);
	free(s->scratch), free(s->tok), free(s->tok2), free(s->sel), free(s->scores), free(s->probs);
	free(s);
}

uint64_t hb_session_frontier(const struct hb_session *s)
{
	return s->pos;
}

const struct hb_session_counters *hb_session_counters(const struct hb_session *s)
{
	return &s->ctr;
}

int hb_session_forward(struct hb_session *s, const int32_t *tokens, size_t T, float *logits,
		       hb_observe_fn obs, void *obs_ctx, struct hb_error *err)
{
	const struct hb_model *m = s->m;
	const struct hb_qwen_config *c = &m->cfg;
	size_t H = (size_t)c->hidden_size, hc = (size_t)c->hc_count, hcH = hc * H;
	int rc;

	if (s->poisoned)
		return hb_error_diag(err, "session-poisoned", HB_ERR_INVALID, "session", false, 0,
				     "an earlier chunk failed midway; this session's state is not usable");
	if (!T)
		return HB_OK;
	if (T > s->cap - s->pos)
		return hb_error_diag(err, "session-context-full", HB_ERR_INVALID, "session", false, 0,
				     "%zu more tokens after %" PRIu64 " exceed the %" PRIu64 "-token context",
				     T, s->pos, s->cap);
	for (size_t t = 0; t < T; t++)
		if (tokens[t] < 0 || (uint64_t)tokens[t] >= m->vocab_physical)
			return hb_error_diag(err, "session-token-range", HB_ERR_INVALID, "tokens", false, 0,
					     "token %d at %zu is outside [0, %" PRIu64 ")", tokens[t], t,
					     m->vocab_physical);
	if ((rc = ws_reserve(s, T, err)))
		return rc;
	/* embeddings, repeated into every stream */
	for (size_t t = 0; t < T; t++) {
		hb_wmat_row(&m->embed, (uint64_t)tokens[t], s->x + t * hcH);
		for (size_t k = 1; k < hc; k++)
			memcpy(s->x + t * hcH + k * H, s->x + t * hcH, H * sizeof(float));
	}
	for (uint32_t l = 0; l < c->num_layers; l++) {
		const struct hb_layer_weights *L = &m->layers[l];
		if (L->has_ple && (rc = hb_ple_forward(s, l, tokens, T, obs, obs_ctx, err))) {
			s->poisoned = true;
			return rc;
		}
		hb_hc_forward(s, &L->attn_hc, T, true);
		if (L->kind == HB_LAYER_LINEAR)
			hb_gdn_forward(s, l, T);
		else
			hb_qsa_forward(s, l, T, obs, obs_ctx);
		hb_hc_inject(s, T);
		hb_hc_forward(s, &L->mlp_hc, T, true);
		hb_moe_forward(s, l, T, obs, obs_ctx);
		hb_hc_inject(s, T);
		if (obs)
			for (size_t t = 0; t < T; t++)
				obs(obs_ctx, HB_OBS_HIDDEN, (int32_t)l, s->pos + t, s->x + t * hcH, hcH);
	}
	hb_hc_forward(s, &m->mixer, T, false);
	if (logits) {
		hb_matmul(s->pool, &m->lm_head, s->mixed, T, logits, s->scratch);
		if (obs)
			for (size_t t = 0; t < T; t++)
				obs(obs_ctx, HB_OBS_LOGITS, -1, s->pos + t, logits + t * m->vocab_physical,
				    (size_t)m->vocab_physical);
	}
	s->pos += T;
	s->ctr.tokens += T;
	return HB_OK;
}
