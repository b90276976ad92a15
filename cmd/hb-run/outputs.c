/*
 * hb-run/outputs.c: the run's dumps.  --dump-routes: the observer turns
 * each layer's routes and weights into hebrus-trace(5) records; a file is
 * published whole or not at all, stdout ("-") streamed.  --dump-logits:
 * float32 rows, one per evaluated position, published whole.
 */
#include "hb_base.h"
#include "hb_run_cli.h"

#include "hb_json.h"

#include <unistd.h>

void run_observe(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct run *r = ctx;

	if (r->learned_open) /* first: its hints go out before the layer's mixer runs */
		hb_learned_observe(&r->learned, kind, layer, pos, data);
	if (r->taps_open)
		hb_taps_observe(&r->taps, kind, layer, pos, data);
	if (r->shadow_on && kind == HB_OBS_ROUTES && layer >= 0)
		hb_shadow_route(&r->shadow, (uint32_t)layer, pos, data, n);
	run_xst_observe(r, kind, layer, pos);
	if (!r->trace || r->trace_rc)
		return;
	if (kind == HB_OBS_ROUTES) {
		memset(&r->pending, 0, sizeof(r->pending));
		r->pending.sequence = r->c->sequence;
		r->pending.ordinal = pos;
		r->pending.layer = (uint32_t)layer;
		for (size_t i = 0; i < n && i < HB_TRACE_MAX_TOPK; i++)
			r->pending.ids[i] = (uint32_t)((const int32_t *)data)[i];
	} else if (kind == HB_OBS_ROUTE_WEIGHTS) {
		memcpy(r->pending.weights, data, n * sizeof(float));
		r->trace_rc = hb_trace_write(r->trace, &r->pending, &r->trace_err);
	}
}

/* ------------------------------------------------------------ predictors */

void run_shadow_setup(struct run *r, struct cli *c)
{
	if (!c->xs.cache)
		return;
	hb_shadow_init(&r->shadow);
	r->shadow_on = true;
}

/* The engine has one ticket observer; the shadow accounting and the
 * stream trace share it. */
static void engine_observe(void *ctx, enum hb_xs_event ev, const struct hb_xs_ticket *t)
{
	struct run *r = ctx;

	if (r->shadow_on)
		hb_shadow_ticket(&r->shadow, ev, t);
	if (r->xst)
		run_xst_ticket(r->xst, ev, t);
}

void run_engine_observer(struct run *r, struct cli *c)
{
	if (!r->shadow_on && !r->xst)
		return;
	c->xs.observe = engine_observe;
	c->xs.observe_ctx = r;
}

int run_learned_open(struct run *r, struct hb_error *err)
{
	static const uint8_t no_text[32]; /* hb-run records no tokenizer digest (hebrus-trace(5)) */
	int rc;

	if (!r->c->xs.learned)
		return HB_OK;
	if ((rc = hb_learned_open(&r->learned, r->c->xs.learned, r->m, no_text, r->c->has_thread, r->c->thread, err)))
		return rc;
	r->learned_open = true;
	return HB_OK;
}

int run_taps_open(struct run *r, struct hb_pool *pool, size_t np, struct hb_error *err)
{
	const struct cli *c = r->c;
	struct hb_taps_config tc;
	int rc;

	if (!c->features && !c->router_ahead && !c->deadlines)
		return HB_OK;
	memset(&tc, 0, sizeof(tc));
	tc.features = c->features, tc.router_ahead = c->router_ahead, tc.deadlines = c->deadlines;
	tc.feature_width = (uint32_t)c->feature_width, tc.feature_seed = c->feature_seed;
	tc.split_name = c->split_name ? c->split_name : "runtime";
	tc.chunk_cap = np;
	tc.owner = c->owner, tc.thread = c->thread, tc.has_thread = c->has_thread;
	tc.generation = (uint32_t)c->generation;
	if (c->split_file && (rc = hb_taps_split_id(c->split_file, tc.split_id, err)))
		return rc;
	if ((rc = hb_taps_open(&r->taps, &tc, r->m, pool, err))) {
		hb_taps_close(&r->taps, false, NULL, NULL);
		return rc;
	}
	r->taps_open = true;
	r->taps.prompt_tokens = np;
	hb_taps_sequence(&r->taps, c->sequence, c->owner, c->has_thread ? c->thread : 0);
	return HB_OK;
}

int run_taps_chunk(struct run *r, struct hb_error *err)
{
	return r->taps_open ? hb_taps_chunk_done(&r->taps, err) : HB_OK;
}

int run_shadow_json(struct run *r, cJSON *j)
{
	cJSON *o;
	int rc;

	if (!r->shadow_on)
		return HB_OK;
	if (!(o = cJSON_AddObjectToObject(j, "shadow")))
		return HB_ERR_NOMEM;
	if (r->learned_open &&
	    ((rc = hb_json_add_u64(o, "learned_hints", r->learned.hints)) ||
	     (rc = hb_json_add_u64(o, "learned_issued", r->learned.issued)) ||
	     (rc = hb_json_add_u64(o, "learned_rejected", r->learned.rejected)) ||
	     (rc = hb_json_add_u64(o, "learned_compute_ns", r->learned.compute_ns))))
		return rc;
	return hb_shadow_json(&r->shadow, o);
}

static int open_trace(struct run *r, struct hb_error *err)
{
	struct hb_trace_header h;
	int fd = STDOUT_FILENO;

	memset(&h, 0, sizeof(h));
	h.top_k = (uint32_t)r->m->cfg.num_experts_per_tok;
	h.layers = (uint32_t)r->m->cfg.num_layers;
	h.experts = (uint32_t)r->m->cfg.num_experts;
	memcpy(h.artifact, r->m->artifact_sha, 32);
	h.owner = r->c->owner;
	h.generation = (uint32_t)r->c->generation;
	h.has_thread = r->c->has_thread;
	h.thread = r->c->thread;
	/* a file is published whole or not at all, like --dump-logits; a
	 * reader of stdout sees the chunk CRCs and a missing end instead */
	if (strcmp(r->c->dump_routes, "-")) {
		int rc = hb_publish_begin(&r->routes, r->c->dump_routes, HB_PUBLISH_REPLACE, err);
		if (rc)
			return rc;
		r->routes_open = true;
		fd = r->routes.fd;
	}
	return hb_trace_writer_open(&r->trace, fd, r->c->dump_routes, &h, 4096, err);
}

int run_outputs_open(struct run *r, struct hb_error *err)
{
	int rc;

	if (r->c->dump_routes && (rc = open_trace(r, err)))
		return rc;
	if ((rc = run_xst_open(r, err)))
		return rc;
	if (r->c->dump_logits) {
		if ((rc = hb_publish_begin(&r->logits, r->c->dump_logits, HB_PUBLISH_REPLACE, err)))
			return rc;
		r->logits_open = true;
	}
	return HB_OK;
}

int run_dump_logits(struct run *r, const float *logits, size_t rows, struct hb_error *err)
{
	if (!r->logits_open)
		return HB_OK;
	return hb_publish_write(&r->logits, logits, rows * (size_t)r->m->vocab_physical * sizeof(float), err);
}

int run_outputs_commit(struct run *r, struct hb_error *err)
{
	int rc;

	if (r->taps_open) {
		struct hb_xs_stats st;
		if (r->m->xs)
			hb_xs_stats_get(r->m->xs, &st);
		r->taps_open = false;
		if ((rc = hb_taps_close(&r->taps, true, r->m->xs ? &st : NULL, err)))
			return rc;
	}

	if (r->trace_rc) {
		*err = r->trace_err;
		return r->trace_rc;
	}
	if (r->trace && (rc = hb_trace_writer_close(r->trace, err))) {
		r->trace = NULL;
		return rc;
	}
	r->trace = NULL;
	if (r->routes_open) {
		r->routes_open = false;
		if ((rc = hb_publish_commit(&r->routes, NULL, NULL, err)))
			return rc;
	}
	if (r->logits_open) {
		r->logits_open = false;
		if ((rc = hb_publish_commit(&r->logits, NULL, NULL, err)))
			return rc;
	}
	return run_xst_commit(r, err);
}

void run_outputs_abort(struct run *r)
{
	if (r->taps_open)
		hb_taps_close(&r->taps, false, NULL, NULL);
	r->taps_open = false;
	if (r->learned_open)
		hb_learned_release(&r->learned);
	r->learned_open = false;

	if (r->trace) {
		struct hb_error ignored;
		hb_trace_writer_close(r->trace, &ignored);
	}
	if (r->logits_open)
		hb_publish_abort(&r->logits);
	if (r->routes_open)
		hb_publish_abort(&r->routes);
}
