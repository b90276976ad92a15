/*
 * hb-trace/engine-reads.c: the predicted reads a streamed run issued (its
 * stream trace's P1 and P2 read records), each placed in the layer step
 * of the run's main thread that was running when it was issued, for
 * prefetch-sim's predictor engine: the simulator then replays the run's
 * own predictions against its storage model instead of a predictor of its
 * own, so that simulated and measured wait differ by the model alone.
 *
 * A read issued before its step's router decided keeps its offset from
 * the step's start; one issued after the step's records were ready keeps
 * its offset from that point; one in between is placed at the router
 * (the engine issues router-ahead's reads there).  A read issued between
 * steps (sampling, the head) goes to the start of the next step.  A step
 * of several tokens (a prefill chunk) is the simulator's step of its last
 * token: the simulator replays a chunk token by token.
 */
#include "hb_base.h"
#include "hb_trace_cli.h"

struct er_step {
	uint64_t token, start, routed, ready, end;
	uint32_t layer;
};

struct er_read {
	uint64_t issue;
	uint32_t layer, expert;
	uint8_t cls;
};

struct er_ctx {
	struct er_step *steps;
	size_t nsteps, cap_steps;
	struct er_read *reads;
	size_t nreads, cap_reads;
};

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
	size_t c;
	void *q;

	if (n < *cap)
		return HB_OK;
	c = *cap ? *cap * 2 : 1024;
	if (!(q = realloc(*p, c * size)))
		return HB_ERR_NOMEM;
	*p = q, *cap = c;
	return HB_OK;
}

static int collect(void *ctx, const struct hb_xst_header *h, uint64_t index, const struct hb_xst_rec *r)
{
	struct er_ctx *x = ctx;

	(void)h, (void)index;
	if (r->kind == HB_XST_LAYER) {
		struct er_step *s;
		if (grow((void **)&x->steps, &x->cap_steps, x->nsteps, sizeof(*x->steps)))
			return HB_ERR_NOMEM;
		s = &x->steps[x->nsteps++];
		/* the chunk's last token: a prefill chunk's step is the
		 * simulator's step of that token */
		s->token = r->v[HB_XST_L_TOKEN] + (r->v[HB_XST_L_TOKENS] ? r->v[HB_XST_L_TOKENS] - 1 : 0);
		s->layer = (uint32_t)r->v[HB_XST_L_LAYER];
		s->start = r->v[HB_XST_L_START], s->routed = r->v[HB_XST_L_ROUTED];
		s->ready = r->v[HB_XST_L_READY], s->end = r->v[HB_XST_L_END];
	} else if (r->kind == HB_XST_READ && r->v[HB_XST_R_CLASS] > 0) {
		struct er_read *q;
		if (grow((void **)&x->reads, &x->cap_reads, x->nreads, sizeof(*x->reads)))
			return HB_ERR_NOMEM;
		q = &x->reads[x->nreads++];
		q->issue = r->v[HB_XST_R_ISSUE];
		q->layer = (uint32_t)r->v[HB_XST_R_LAYER];
		q->expert = (uint32_t)r->v[HB_XST_R_EXPERT];
		q->cls = (uint8_t)r->v[HB_XST_R_CLASS];
	}
	return 0;
}

static int by_start(const void *a, const void *b)
{
	const struct er_step *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* the last step starting at or before t (nsteps when none does) */
static size_t step_at(const struct er_ctx *x, uint64_t t)
{
	size_t lo = 0, hi = x->nsteps;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (x->steps[mid].start <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : x->nsteps;
}

static void place(const struct er_ctx *x, const struct er_read *q, struct hb_tpf_inject *o)
{
	size_t i = step_at(x, q->issue);
	const struct er_step *s;

	o->target_layer = q->layer, o->expert = q->expert, o->cls = q->cls;
	o->phase = HB_TPF_BEFORE_ROUTER, o->offset_ns = 0;
	if (i == x->nsteps || q->issue >= x->steps[i].end) {
		/* before the first step or between two: the next step's start */
		i = i == x->nsteps ? 0 : i + 1;
		if (i == x->nsteps)
			i = x->nsteps - 1, o->phase = HB_TPF_AFTER_READY, o->offset_ns = UINT64_MAX;
		s = &x->steps[i];
		o->token = s->token, o->layer = s->layer;
		return;
	}
	s = &x->steps[i];
	o->token = s->token, o->layer = s->layer;
	if (q->issue < s->routed)
		o->offset_ns = q->issue - s->start;
	else if (q->issue < s->ready)
		o->phase = HB_TPF_AT_ROUTER;
	else
		o->phase = HB_TPF_AFTER_READY, o->offset_ns = q->issue - s->ready;
}

int trace_engine_reads(const struct cli *c, const char *path, struct hb_tpf_inject **out, size_t *n,
		       struct hb_error *err)
{
	struct er_ctx x = { 0 };
	struct hb_xst_header h;
	int rc;

	*out = NULL, *n = 0;
	rc = trace_stream_walk(c, path, collect, &x, &h, err);
	if (rc == HB_ERR_NOMEM && !err->code)
		hb_error_set(err, rc, path, "out of memory");
	if (!rc && x.nreads && !x.nsteps)
		rc = hb_error_set(err, HB_ERR_UNSUPPORTED, path, "holds predicted reads but no layer step to place them in");
	if (!rc && x.nreads && !(*out = malloc(x.nreads * sizeof(**out))))
		rc = hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
	if (!rc) {
		qsort(x.steps, x.nsteps, sizeof(*x.steps), by_start);
		for (size_t i = 0; i < x.nreads; i++)
			place(&x, &x.reads[i], &(*out)[i]);
		*n = x.nreads;
	}
	free(x.steps), free(x.reads);
	return rc;
}
