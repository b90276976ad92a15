/*
 * hb-run/outputs.c: the run's dumps.  --dump-routes: the observer turns
 * each layer's routes and weights into hebrus-trace(5) records; a file is
 * published whole or not at all, stdout ("-") streamed.  --dump-logits:
 * float32 rows, one per evaluated position, published whole.
 */
#include "hb_base.h"
#include "hb_run_cli.h"

#include <unistd.h>

void run_observe(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct run *r = ctx;

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
	if (r->trace) {
		struct hb_error ignored;
		hb_trace_writer_close(r->trace, &ignored);
	}
	if (r->logits_open)
		hb_publish_abort(&r->logits);
	if (r->routes_open)
		hb_publish_abort(&r->routes);
}
