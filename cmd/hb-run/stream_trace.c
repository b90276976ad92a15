/*
 * hb-run/stream_trace.c: --stream-trace FILE, the streaming engine's
 * per-chunk, per-layer-step and per-read records (hebrus-trace(5), STREAM
 * TRACE), published whole after the run.
 *
 * Three sources, none of them in the engine's core: the engine's observer
 * (every completed read: a read record), the session's observer taps
 * (PRE_ATTN, PRE_MOE, ROUTES and HIDDEN of the chunk's first or last token
 * time a layer step), and snapshots of the engine's counters around each
 * layer step and each chunk (hb_xs_stats_since: the step's and the chunk's
 * counters).  Lock order: the engine's lock, then ours (the observer runs
 * under the engine's); so no engine call is made while ours is held.
 */
#include "hb_base.h"
#include "hb_run_cli.h"
#include "trace/hb_xstrace.h"

#include <pthread.h>
#include <time.h>

struct xst_run {
	pthread_mutex_t mu;
	struct hb_xst_writer w;
	struct hb_xst_header h;
	uint64_t origin;
	int rc;
	struct hb_error err;
	/* the chunk being run */
	uint64_t first, last, begin;
	uint32_t tokens;
	int phase;
	bool have_slack;
	int64_t slack_min;
	struct hb_xs_stats chunk0, layer0, now, d;
	uint64_t t_start, t_moe, t_routed;
	/* the step's wall wait: the last exact (or promoted) read of its layer
	 * to be ready after the router's decision (absolute ns; mu) */
	bool in_step;
	uint32_t step_layer;
	uint64_t routed_abs, ready_abs;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rel(const struct xst_run *x, uint64_t t)
{
	return t > x->origin ? t - x->origin : 0;
}

/* mu held */
static void put(struct xst_run *x, const struct hb_xst_rec *rec)
{
	if (!x->rc)
		x->rc = hb_xst_write(&x->w, &x->h, rec, &x->err);
}

/* From the engine's observer (run_engine_observer): a read record per
 * completed ticket. */
void run_xst_ticket(struct xst_run *x, enum hb_xs_event ev, const struct hb_xs_ticket *t)
{
	struct hb_xst_rec rec;

	if (ev != HB_XS_EV_COMPLETE)
		return;
	memset(&rec, 0, sizeof(rec));
	rec.kind = HB_XST_READ;
	rec.v[HB_XST_R_TOKEN] = t->token_pos;
	rec.v[HB_XST_R_LAYER] = t->layer;
	rec.v[HB_XST_R_EXPERT] = t->expert;
	pthread_mutex_lock(&x->mu);
	if (!x->origin) { /* before the prompt, or after the commit */
		pthread_mutex_unlock(&x->mu);
		return;
	}
	rec.v[HB_XST_R_CLASS] = t->prio_issued;
	rec.v[HB_XST_R_CLASS_END] = t->prio;
	rec.v[HB_XST_R_STATE] = t->state;
	rec.v[HB_XST_R_FLAGS] = (t->exact ? HB_XST_READ_EXACT : 0) |
				(t->prio_issued != HB_XS_P0 && t->prio == HB_XS_P0 ? HB_XST_READ_PROMOTED : 0) |
				(t->extent ? HB_XST_READ_EXTENT : 0);
	rec.v[HB_XST_R_ISSUE] = rel(x, t->issue_ns);
	rec.v[HB_XST_R_START] = rel(x, t->start_ns > t->issue_ns ? t->start_ns : t->issue_ns);
	rec.v[HB_XST_R_READY] = rel(x, t->ready_ns > t->start_ns ? t->ready_ns : t->start_ns);
	if (rec.v[HB_XST_R_READY] < rec.v[HB_XST_R_START])
		rec.v[HB_XST_R_READY] = rec.v[HB_XST_R_START];
	rec.v[HB_XST_R_DEADLINE] = t->deadline_ns ? rel(x, t->deadline_ns) : 0;
	rec.v[HB_XST_R_BYTES] = t->bytes_physical ? t->bytes_physical : t->bytes;
	if (x->in_step && t->state == HB_XS_T_DONE && t->layer == x->step_layer && t->prio == HB_XS_P0 &&
	    t->ready_ns > x->ready_abs)
		x->ready_abs = t->ready_ns;
	if (t->deadline_ns && t->state == HB_XS_T_DONE) {
		int64_t slack = (int64_t)t->deadline_ns - (int64_t)t->ready_ns;
		if (!x->have_slack || slack < x->slack_min)
			x->slack_min = slack;
		x->have_slack = true;
	}
	put(x, &rec);
	pthread_mutex_unlock(&x->mu);
}

int run_xst_setup(struct run *r, struct hb_error *err)
{
	struct xst_run *x;

	if (!r->c->stream_trace)
		return HB_OK;
	if (!(x = calloc(1, sizeof(*x))))
		return hb_error_set(err, HB_ERR_NOMEM, "--stream-trace", "out of memory");
	pthread_mutex_init(&x->mu, NULL);
	r->xst = x;
	return HB_OK;
}

int run_xst_open(struct run *r, struct hb_error *err)
{
	struct xst_run *x = r->xst;
	struct hb_xs_config cfg;
	struct hb_xs_stats st;
	const struct hb_model *m = r->m;

	if (!x)
		return HB_OK;
	if (!m->xs)
		return hb_error_set(err, HB_ERR_INVALID, "--stream-trace",
				    "nothing streams: the experts are resident (--expert-cache all)");
	hb_xs_config_default(&cfg); /* what hb_cli_xs_apply opened the engine with */
	hb_xs_stats_get(m->xs, &st);
	x->h.layers = (uint32_t)m->cfg.num_layers;
	x->h.experts = (uint32_t)m->cfg.num_experts;
	x->h.top_k = (uint32_t)m->cfg.num_experts_per_tok;
	x->h.slots = st.slots;
	x->h.slot_bytes = st.slot_bytes;
	x->h.budget_bytes = st.budget_bytes;
	x->h.depth = cfg.depth;
	x->h.threads = cfg.threads;
	x->h.predictor = (uint32_t)m->xs_predict;
	x->h.policy = (uint32_t)hb_xs_policy_of(m->xs);
	x->h.direct = !strncmp(hb_xs_io_mode(m->xs), "direct", 6);
	memcpy(x->h.artifact, m->artifact_sha, HB_SHA256_BYTES);
	x->h.version = HB_XST_VERSION;
	return hb_xst_writer_init(&x->w, &x->h, err);
}

void run_xst_chunk_begin(struct run *r, uint64_t first, size_t tokens, bool decode)
{
	struct xst_run *x = r->xst;

	if (!x)
		return;
	hb_xs_stats_get(r->m->xs, &x->chunk0);
	pthread_mutex_lock(&x->mu);
	if (!x->origin)
		x->origin = mono_ns();
	x->first = first, x->last = first + tokens - 1, x->tokens = (uint32_t)tokens;
	x->phase = decode ? 1 : 0;
	x->have_slack = false, x->slack_min = 0;
	x->begin = rel(x, mono_ns());
	pthread_mutex_unlock(&x->mu);
}

void run_xst_chunk_end(struct run *r)
{
	struct xst_run *x = r->xst;
	struct hb_xst_rec rec;
	struct hb_xs_stats *d;

	if (!x)
		return;
	hb_xs_stats_get(r->m->xs, &x->now);
	hb_xs_stats_since(&x->now, &x->chunk0, &x->d);
	d = &x->d;
	memset(&rec, 0, sizeof(rec));
	rec.kind = HB_XST_TOKEN;
	rec.v[HB_XST_T_TOKEN] = x->first;
	rec.v[HB_XST_T_TOKENS] = x->tokens;
	rec.v[HB_XST_T_PHASE] = (uint64_t)x->phase;
	rec.v[HB_XST_T_BYTES_EXACT] = d->bytes_exact;
	rec.v[HB_XST_T_BYTES_PREDICTED] = d->bytes_predicted;
	rec.v[HB_XST_T_BYTES_REJECTED] = d->bytes_rejected;
	/* useful bytes of this chunk may be of predictions read before it */
	rec.v[HB_XST_T_BYTES_USEFUL] = d->bytes_useful < d->bytes_predicted ? d->bytes_useful : d->bytes_predicted;
	rec.v[HB_XST_T_WANTS] = d->hits + d->joined + d->misses;
	rec.v[HB_XST_T_HITS] = d->hits;
	rec.v[HB_XST_T_JOINED] = d->joined;
	rec.v[HB_XST_T_MISSES] = d->misses;
	rec.v[HB_XST_T_READS] = d->ready.n;
	rec.v[HB_XST_T_P50] = hb_xs_hist_quantile(&d->ready, 0.50);
	rec.v[HB_XST_T_P95] = hb_xs_hist_quantile(&d->ready, 0.95);
	rec.v[HB_XST_T_P99] = hb_xs_hist_quantile(&d->ready, 0.99);
	rec.v[HB_XST_T_DEADLINES] = d->deadlines;
	rec.v[HB_XST_T_LATE] = d->late < d->deadlines ? d->late : d->deadlines;
	rec.v[HB_XST_T_EXPOSED] = d->exposed_ns;
	rec.v[HB_XST_T_EXACT_IO] = d->exact_io_ns;
	pthread_mutex_lock(&x->mu);
	rec.v[HB_XST_T_BEGIN] = x->begin;
	rec.v[HB_XST_T_END] = rel(x, mono_ns());
	if (d->deadlines) {
		rec.v[HB_XST_T_SLACK_SUM] = (uint64_t)d->slack_sum_ns;
		rec.v[HB_XST_T_SLACK_MIN] = (uint64_t)(x->have_slack ? x->slack_min : 0);
	}
	put(x, &rec);
	pthread_mutex_unlock(&x->mu);
}

/* The session's taps (run_observe): time the layer steps of the chunk. */
void run_xst_observe(struct run *r, enum hb_observe kind, int32_t layer, uint64_t pos)
{
	struct xst_run *x = r->xst;
	struct hb_xst_rec rec;
	struct hb_xs_stats *d;

	if (!x || layer < 0)
		return;
	if (kind == HB_OBS_PRE_ATTN && pos == x->first) {
		hb_xs_stats_get(r->m->xs, &x->layer0);
		x->t_start = rel(x, mono_ns());
	} else if (kind == HB_OBS_PRE_MOE && pos == x->first) {
		x->t_moe = rel(x, mono_ns());
	} else if (kind == HB_OBS_ROUTES && pos == x->last) {
		uint64_t now = mono_ns();
		x->t_routed = rel(x, now);
		pthread_mutex_lock(&x->mu);
		x->in_step = true;
		x->step_layer = (uint32_t)layer;
		x->routed_abs = x->ready_abs = now;
		pthread_mutex_unlock(&x->mu);
	} else if (kind == HB_OBS_HIDDEN && pos == x->last) {
		uint64_t end = rel(x, mono_ns());
		hb_xs_stats_get(r->m->xs, &x->now);
		hb_xs_stats_since(&x->now, &x->layer0, &x->d);
		d = &x->d;
		memset(&rec, 0, sizeof(rec));
		rec.kind = HB_XST_LAYER;
		rec.v[HB_XST_L_TOKEN] = x->first;
		rec.v[HB_XST_L_LAYER] = (uint64_t)layer;
		rec.v[HB_XST_L_TOKENS] = x->tokens;
		rec.v[HB_XST_L_START] = x->t_start;
		rec.v[HB_XST_L_MOE] = x->t_moe > x->t_start ? x->t_moe : x->t_start;
		rec.v[HB_XST_L_ROUTED] = x->t_routed > rec.v[HB_XST_L_MOE] ? x->t_routed : rec.v[HB_XST_L_MOE];
		pthread_mutex_lock(&x->mu);
		x->in_step = false;
		rec.v[HB_XST_L_READY] = rel(x, x->ready_abs);
		pthread_mutex_unlock(&x->mu);
		if (rec.v[HB_XST_L_READY] < rec.v[HB_XST_L_ROUTED])
			rec.v[HB_XST_L_READY] = rec.v[HB_XST_L_ROUTED];
		rec.v[HB_XST_L_END] = end > rec.v[HB_XST_L_READY] ? end : rec.v[HB_XST_L_READY];
		rec.v[HB_XST_L_EXPOSED] = d->exposed_ns;
		rec.v[HB_XST_L_WANTS] = d->hits + d->joined + d->misses;
		rec.v[HB_XST_L_HITS] = d->hits;
		rec.v[HB_XST_L_JOINED] = d->joined;
		rec.v[HB_XST_L_MISSES] = d->misses;
		pthread_mutex_lock(&x->mu);
		put(x, &rec);
		pthread_mutex_unlock(&x->mu);
	}
}

int run_xst_commit(struct run *r, struct hb_error *err)
{
	struct xst_run *x = r->xst;
	int rc;

	if (!x)
		return HB_OK;
	/* the engine still runs reads (predictions) that may call on_ticket */
	pthread_mutex_lock(&x->mu);
	if (x->rc) {
		*err = x->err;
		rc = x->rc;
	} else {
		rc = hb_publish_buf(r->c->stream_trace, x->w.p, x->w.len, HB_PUBLISH_REPLACE, err);
	}
	x->origin = 0; /* nothing more is recorded */
	pthread_mutex_unlock(&x->mu);
	return rc;
}

void run_xst_free(struct run *r)
{
	struct xst_run *x = r->xst;

	if (!x)
		return;
	hb_xst_writer_release(&x->w);
	pthread_mutex_destroy(&x->mu);
	free(x);
	r->xst = NULL;
}
