/*
 * hb-replay/together.c: hb-replay label --together N, the labeller's engine
 * that runs N transcripts at a time as one batch (hb_session_forward_batch:
 * on the GPU their chunks are one pass, so every expert sees all their
 * rows), then hands the labeller each transcript's routes in its turn.
 *
 * The labeller still asks for one transcript after another, chunk by chunk
 * (dataset/hb_replay_label.c); this engine is told the whole order first
 * (plan), and when the labeller begins a transcript that has not run, it
 * runs that one and the next N - 1 of the order together, each in the
 * labeller's own chunks, and keeps their routes until asked.  Each
 * session's chunks are the ones a sequential run gives it, so its routes
 * are the same (on the CPU reference, bit for bit: tests/cli/together.bats).
 */
#include "hb_base.h"
#include "hb_replay_cli.h"

/* one transcript run ahead: its routes [pos][layer][k] */
struct ahead {
	const struct hb_transcript *t;
	int32_t *ids;
	float *w;
	uint8_t *seen;
	struct replay_together *owner;
	int32_t last[64]; /* the routes of the (layer, position) whose weights come next */
	size_t k;
	int rc;
};

static void ahead_free(struct ahead *a)
{
	free(a->ids), free(a->w), free(a->seen);
	memset(a, 0, sizeof(*a));
}

static void observe(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct ahead *a = ctx;
	uint32_t L = a->owner->layers, k = a->owner->k;
	size_t at;

	if (a->rc)
		return;
	if (kind == HB_OBS_ROUTES) {
		a->k = n < 64 ? n : 64;
		memcpy(a->last, data, a->k * sizeof(int32_t));
	} else if (kind == HB_OBS_ROUTE_WEIGHTS) {
		if (layer < 0 || (uint32_t)layer >= L || pos >= a->t->n_tokens || n != k || a->k != k) {
			a->rc = HB_ERR_INTERNAL;
			return;
		}
		at = (size_t)pos * L + (size_t)layer;
		if (a->seen[at]) {
			a->rc = HB_ERR_INTERNAL;
			return;
		}
		a->seen[at] = 1;
		memcpy(a->ids + at * k, a->last, k * sizeof(int32_t));
		memcpy(a->w + at * k, data, k * sizeof(float));
	}
}

int replay_together_plan(void *ctx, const struct hb_transcript *const *order, size_t n, uint64_t chunk_tokens,
			 struct hb_error *err)
{
	struct replay_together *g = ctx;

	free(g->order);
	g->order = malloc((n ? n : 1) * sizeof(*g->order));
	if (!g->order)
		return hb_error_set(err, HB_ERR_NOMEM, "labels", "out of memory");
	memcpy(g->order, order, n * sizeof(*order));
	g->n_order = n, g->next = 0, g->chunk = chunk_tokens;
	return HB_OK;
}

/* the routes' room for transcript t in slot a, and its session */
static int ahead_open(struct replay_together *g, size_t slot, const struct hb_transcript *t, struct hb_error *err)
{
	struct ahead *a = &g->slot[slot];
	size_t cells = (size_t)t->n_tokens * g->layers;
	int rc;

	ahead_free(a);
	a->t = t, a->owner = g;
	a->ids = malloc((cells ? cells : 1) * g->k * sizeof(int32_t));
	a->w = malloc((cells ? cells : 1) * g->k * sizeof(float));
	a->seen = calloc(cells ? cells : 1, 1);
	if (!a->ids || !a->w || !a->seen)
		return hb_error_set(err, HB_ERR_NOMEM, "labels",
				    "out of memory holding %" PRIu64 " positions' routes for --together",
				    t->n_tokens);
	if ((rc = replay_session_fit(&g->ss[slot], g->m, g->pool, t->n_tokens, err)))
		return rc;
	hb_session_observe_only(g->ss[slot], 1u << HB_OBS_ROUTES | 1u << HB_OBS_ROUTE_WEIGHTS);
	return HB_OK;
}

/* order[next ..] (at most `slots`) run together, chunk by chunk */
static int run_ahead(struct replay_together *g, struct hb_error *err)
{
	size_t n = g->n_order - g->next < g->slots ? g->n_order - g->next : g->slots;
	struct hb_session **ss = calloc(n, sizeof(*ss));
	const int32_t **tok = calloc(n, sizeof(*tok));
	size_t *len = calloc(n, sizeof(*len));
	void **ctx = calloc(n, sizeof(*ctx));
	int rc = HB_OK;

	if (!ss || !tok || !len || !ctx)
		rc = hb_error_set(err, HB_ERR_NOMEM, "labels", "out of memory");
	for (size_t i = 0; !rc && i < n; i++)
		rc = ahead_open(g, i, g->order[g->next + i], err);
	for (uint64_t pos = 0; !rc; pos += g->chunk) {
		size_t live = 0;
		for (size_t i = 0; i < n; i++) {
			const struct hb_transcript *t = g->slot[i].t;
			if (pos >= t->n_tokens)
				continue;
			ss[live] = g->ss[i], tok[live] = t->tokens + pos, ctx[live] = &g->slot[i];
			len[live] = t->n_tokens - pos < g->chunk ? (size_t)(t->n_tokens - pos) : (size_t)g->chunk;
			if (pos + len[live] == t->n_tokens) /* its last chunk: no state kept after it */
				hb_session_final(g->ss[i]);
			live++;
		}
		if (!live)
			break;
		rc = hb_session_forward_batch(ss, live, tok, len, NULL, observe, ctx, err);
	}
	for (size_t i = 0; !rc && i < n; i++) {
		const struct ahead *a = &g->slot[i];
		if (a->rc)
			rc = hb_error_set(err, HB_ERR_INTERNAL, "labels", "a route could not be recorded");
		for (size_t c = 0; !rc && c < (size_t)a->t->n_tokens * g->layers; c++)
			if (!a->seen[c])
				rc = hb_error_set(err, HB_ERR_INTERNAL, "labels",
						  "the batch left position %zu layer %zu without a route", c / g->layers,
						  c % g->layers);
	}
	g->n_slots = rc ? 0 : n;
	g->next += n;
	free(ss), free(tok), free(len), free(ctx);
	return rc;
}

int replay_together_begin(void *ctx, const struct hb_transcript *t, struct hb_error *err)
{
	struct replay_together *g = ctx;
	int rc;

	for (size_t i = 0; i < g->n_slots; i++)
		if (g->slot[i].t == t) {
			g->cur = i, g->pos = 0;
			return HB_OK;
		}
	if (g->next >= g->n_order || g->order[g->next] != t)
		return hb_error_set(err, HB_ERR_INTERNAL, "labels", "the labeller asked for a transcript out of its plan");
	if ((rc = run_ahead(g, err)))
		return rc;
	g->cur = 0, g->pos = 0;
	return HB_OK;
}

/* the next n positions of the current transcript, from what ran ahead */
int replay_together_forward(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit, void *emit_ctx,
			    struct hb_error *err)
{
	struct replay_together *g = ctx;
	const struct ahead *a = g->cur < g->n_slots ? &g->slot[g->cur] : NULL;

	if (!a || g->pos + n > a->t->n_tokens || memcmp(tokens, a->t->tokens + g->pos, n * sizeof(int32_t)))
		return hb_error_set(err, HB_ERR_INTERNAL, "labels", "the labeller asked for positions that did not run");
	for (size_t p = g->pos; p < g->pos + n; p++)
		for (uint32_t l = 0; l < g->layers; l++) {
			size_t at = (p * g->layers + l) * g->k;
			if (emit(emit_ctx, l, p, a->ids + at, a->w + at, g->k))
				return hb_error_set(err, HB_ERR_INTERNAL, "labels", "a route could not be recorded");
		}
	g->pos += n;
	return HB_OK;
}

int replay_together_init(struct replay_together *g, const struct hb_model *m, struct hb_pool *pool, size_t slots,
			 struct hb_error *err)
{
	memset(g, 0, sizeof(*g));
	g->m = m, g->pool = pool, g->slots = slots;
	g->layers = (uint32_t)m->cfg.num_layers, g->k = (uint32_t)m->cfg.num_experts_per_tok;
	g->slot = calloc(slots, sizeof(*g->slot));
	g->ss = calloc(slots, sizeof(*g->ss));
	if (!g->slot || !g->ss || g->k > 64)
		return hb_error_set(err, g->k > 64 ? HB_ERR_UNSUPPORTED : HB_ERR_NOMEM, "labels",
				    g->k > 64 ? "more than 64 routes a token" : "out of memory");
	return HB_OK;
}

void replay_together_free(struct replay_together *g)
{
	for (size_t i = 0; g->slot && i < g->slots; i++) {
		ahead_free(&g->slot[i]);
		hb_session_free(g->ss[i]);
	}
	free(g->slot), free(g->ss), free(g->order);
	memset(g, 0, sizeof(*g));
}
