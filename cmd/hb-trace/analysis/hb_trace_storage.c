/*
 * hb_trace_storage.c: the preemptive-priority storage model
 * (hb_trace_storage.h).  Requests in flight are few (at most the distinct
 * records a step and its predictions name), so each event scans them;
 * clarity beats a calendar queue here.  Ties at one instant are broken by
 * arrival order, never by request id (ids are recycled), so a P0-only
 * replay meets the same ties.
 */
#include "hb_base.h"
#include "hb_trace_storage.h"

#include <math.h>

enum state { FREE, WAIT, LATENCY, READY, PIPE };
#define NONE UINT32_MAX
#define NEVER UINT64_MAX

struct req {
	uint8_t state, cls;
	uint64_t lat_rem, lat_end, xfer_rem;
	uint64_t order, ready_order, tag;
};

struct hb_tstore {
	struct hb_tstore_params p;
	struct req *r;
	uint32_t n, *act, nact, *freelist, nfree;
	uint32_t slots, pipe;
	uint64_t now, pipe_start, seq, rseq;
	hb_tstore_done_fn done;
	void *done_ctx;
	hb_tstore_log_fn log;
	void *log_ctx;
};

uint64_t hb_tstore_transfer_ns(const struct hb_tstore_params *p, uint64_t bytes)
{
	return (uint64_t)ceil((double)bytes * 1e9 / p->bandwidth);
}

uint64_t hb_tstore_now(const struct hb_tstore *st)
{
	return st->now;
}

int hb_tstore_create(struct hb_tstore **out, const struct hb_tstore_params *p, uint32_t max_requests,
		     hb_tstore_done_fn done, void *done_ctx, struct hb_error *err)
{
	struct hb_tstore *st;

	*out = NULL;
	if (!(p->bandwidth > 0) || !p->depth || !max_requests)
		return hb_error_set(err, HB_ERR_INVALID, "storage", "bandwidth and queue depth must be positive");
	st = calloc(1, sizeof(*st));
	if (!st)
		return hb_error_set(err, HB_ERR_NOMEM, "storage", "out of memory");
	st->r = calloc(max_requests, sizeof(*st->r));
	st->act = malloc(max_requests * sizeof(*st->act));
	st->freelist = malloc(max_requests * sizeof(*st->freelist));
	if (!st->r || !st->act || !st->freelist) {
		hb_tstore_free(st);
		return hb_error_set(err, HB_ERR_NOMEM, "storage", "out of memory");
	}
	st->p = *p;
	st->n = max_requests;
	for (uint32_t i = 0; i < max_requests; i++)
		st->freelist[i] = max_requests - 1 - i;
	st->nfree = max_requests;
	st->pipe = NONE;
	st->done = done, st->done_ctx = done_ctx;
	*out = st;
	return HB_OK;
}

void hb_tstore_free(struct hb_tstore *st)
{
	if (st) {
		free(st->r), free(st->act), free(st->freelist);
		free(st);
	}
}

void hb_tstore_set_log(struct hb_tstore *st, hb_tstore_log_fn fn, void *ctx)
{
	st->log = fn, st->log_ctx = ctx;
}

static bool holds_slot(const struct req *q)
{
	return q->state == LATENCY || q->state == READY || q->state == PIPE;
}

/* Is a before b in its queue: higher class, then earlier arrival. */
static bool before(const struct req *a, uint64_t ka, const struct req *b, uint64_t kb)
{
	return a->cls < b->cls || (a->cls == b->cls && ka < kb);
}

static void pipe_stop(struct hb_tstore *st)
{
	struct req *q = &st->r[st->pipe];
	q->xfer_rem -= st->now - st->pipe_start;
	q->state = READY;
	st->pipe = NONE;
}

static void release_slot(struct hb_tstore *st, uint32_t id)
{
	struct req *q = &st->r[id];
	if (q->state == PIPE)
		pipe_stop(st);
	q->state = WAIT;
	q->lat_rem = st->p.latency_ns; /* a lost slot repeats the latency phase */
	st->slots--;
}

static void take_slot(struct hb_tstore *st, uint32_t id)
{
	struct req *q = &st->r[id];
	q->state = LATENCY;
	q->lat_end = st->now + q->lat_rem;
	st->slots++;
}

static void dispatch(struct hb_tstore *st)
{
	for (;;) { /* slots */
		uint32_t w = NONE, v = NONE;
		for (uint32_t i = 0; i < st->nact; i++) {
			struct req *q = &st->r[st->act[i]];
			if (q->state == WAIT && (w == NONE || before(q, q->order, &st->r[w], st->r[w].order)))
				w = st->act[i];
		}
		if (w == NONE)
			break;
		if (st->slots < st->p.depth) {
			take_slot(st, w);
			continue;
		}
		for (uint32_t i = 0; i < st->nact; i++) { /* the lowest holder: last in queue order */
			struct req *q = &st->r[st->act[i]];
			if (holds_slot(q) && (v == NONE || before(&st->r[v], st->r[v].order, q, q->order)))
				v = st->act[i];
		}
		if (v == NONE || st->r[v].cls <= st->r[w].cls)
			break;
		release_slot(st, v);
		take_slot(st, w);
	}
	{ /* pipe */
		uint32_t b = NONE;
		for (uint32_t i = 0; i < st->nact; i++) {
			struct req *q = &st->r[st->act[i]];
			if (q->state == READY &&
			    (b == NONE || before(q, q->ready_order, &st->r[b], st->r[b].ready_order)))
				b = st->act[i];
		}
		if (b == NONE)
			return;
		if (st->pipe != NONE && st->r[st->pipe].cls <= st->r[b].cls)
			return;
		if (st->pipe != NONE)
			pipe_stop(st);
		st->pipe = b;
		st->pipe_start = st->now;
		st->r[b].state = PIPE;
	}
}

static void finish(struct hb_tstore *st, uint32_t id)
{
	struct req *q = &st->r[id];
	uint64_t tag = q->tag;

	if (q->cls == HB_TS_P0 && st->log)
		st->log(st->log_ctx, true, id, st->now, 0, 0);
	q->state = FREE;
	st->slots--;
	st->pipe = NONE;
	for (uint32_t i = 0; i < st->nact; i++)
		if (st->act[i] == id) {
			st->act[i] = st->act[--st->nact];
			break;
		}
	st->freelist[st->nfree++] = id;
	if (st->done)
		st->done(st->done_ctx, id, tag, st->now);
}

/* Process the next event if it happens at or before t; false if none. */
static bool step(struct hb_tstore *st, uint64_t t)
{
	uint64_t tp = st->pipe != NONE ? st->pipe_start + st->r[st->pipe].xfer_rem : NEVER;
	uint64_t tl = NEVER;
	uint32_t l = NONE;

	for (uint32_t i = 0; i < st->nact; i++) {
		struct req *q = &st->r[st->act[i]];
		if (q->state == LATENCY && (q->lat_end < tl || (l != NONE && q->lat_end == tl && q->order < st->r[l].order)))
			tl = q->lat_end, l = st->act[i];
	}
	if (tp <= tl && tp <= t) {
		st->now = tp;
		finish(st, st->pipe);
	} else if (tl != NEVER && tl <= t) {
		st->now = tl;
		st->r[l].state = READY;
		st->r[l].ready_order = ++st->rseq;
	} else {
		return false;
	}
	dispatch(st);
	return true;
}

void hb_tstore_advance(struct hb_tstore *st, uint64_t t)
{
	if (t < st->now)
		return;
	while (step(st, t))
		;
	st->now = t;
}

int hb_tstore_submit(struct hb_tstore *st, enum hb_tstore_class c, uint64_t latency_ns,
		     uint64_t transfer_ns, uint64_t tag, uint32_t *id, struct hb_error *err)
{
	uint32_t i;
	struct req *q;

	if (!st->nfree)
		return hb_error_set(err, HB_ERR_OVERFLOW, "storage", "more than %u requests in flight", st->n);
	i = st->freelist[--st->nfree];
	q = &st->r[i];
	memset(q, 0, sizeof(*q));
	q->state = WAIT;
	q->cls = (uint8_t)c;
	q->lat_rem = latency_ns;
	q->xfer_rem = transfer_ns;
	q->order = ++st->seq;
	q->tag = tag;
	st->act[st->nact++] = i;
	if (c == HB_TS_P0 && st->log)
		st->log(st->log_ctx, false, i, st->now, latency_ns, transfer_ns);
	dispatch(st);
	*id = i;
	return HB_OK;
}

void hb_tstore_promote(struct hb_tstore *st, uint32_t id, enum hb_tstore_class c)
{
	struct req *q = &st->r[id];
	uint32_t higher = 0;

	if (q->state == FREE || q->cls <= c)
		return;
	for (uint32_t i = 0; i < st->nact; i++) {
		const struct req *o = &st->r[st->act[i]];
		higher += st->act[i] != id && holds_slot(o) && o->cls <= c;
	}
	q->cls = (uint8_t)c;
	if (holds_slot(q) && higher >= st->p.depth)
		release_slot(st, id); /* the class it joins already fills every slot */
	q->order = ++st->seq; /* it arrives in its new class now: ties go by this */
	if (q->state == READY)
		q->ready_order = ++st->rseq;
	if (c == HB_TS_P0 && st->log) {
		uint64_t lat = q->state == WAIT ? q->lat_rem : q->state == LATENCY ? q->lat_end - st->now : 0;
		uint64_t rem = q->state == PIPE ? q->xfer_rem - (st->now - st->pipe_start) : q->xfer_rem;
		st->log(st->log_ctx, false, id, st->now, lat, rem);
	}
	dispatch(st);
}

bool hb_tstore_busy(const struct hb_tstore *st, uint32_t id)
{
	return id < st->n && st->r[id].state != FREE;
}

uint64_t hb_tstore_wait(struct hb_tstore *st, uint32_t id)
{
	while (st->r[id].state != FREE && step(st, NEVER - 1))
		;
	return st->now;
}

uint64_t hb_tstore_drain(struct hb_tstore *st)
{
	while (st->nact && step(st, NEVER - 1))
		;
	return st->now;
}

uint64_t hb_tstore_idle_ns(const struct hb_tstore_params *p, uint64_t n, uint64_t transfer_ns)
{
	/* equal requests, first come first served: request i takes a slot at
	 * s_i = 0 (i < depth) or done_{i-depth}, and finishes at
	 * max(s_i + latency, done_{i-1}) + transfer */
	uint64_t *done = NULL, last = 0;

	if (!n)
		return 0;
	done = malloc(n * sizeof(*done));
	if (!done)
		return NEVER;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t s = i < p->depth ? 0 : done[i - p->depth];
		uint64_t r = s + p->latency_ns;
		last = (r > last ? r : last) + transfer_ns;
		done[i] = last;
	}
	free(done);
	return last;
}
