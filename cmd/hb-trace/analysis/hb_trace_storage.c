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

enum state { FREE, WAIT, LATENCY, READY, PIPE, CHECK };
#define NONE UINT32_MAX
#define NEVER UINT64_MAX

struct req {
	uint8_t state, cls;
	uint64_t lat_rem, lat_end, chk_rem, chk_end;
	uint64_t xfer_rem;         /* units (HB_TSTORE_UNITS a ns of the whole pipe) */
	uint64_t order, ready_order, tag;
};

struct hb_tstore {
	struct hb_tstore_params p;
	struct req *r;
	uint32_t n, *act, nact, *freelist, nfree;
	uint32_t slots, piped;     /* slots held; transfers on the pipe */
	uint64_t now, settled, seq, rseq; /* settled: when the pipe's progress was last counted */
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
	if (p->engine && (!p->shared || (p->reserved && p->reserved >= p->depth)))
		return hb_error_set(err, HB_ERR_INVALID, "storage", "the engine discipline needs the shared pipe and a "
				    "reserve below the depth (%u of %u)", p->reserved, p->depth);
	if (p->shared && p->depth > HB_TSTORE_MAX_SHARED)
		return hb_error_set(err, HB_ERR_INVALID, "storage", "a shared pipe takes a queue depth of at most %u, not %u",
				    HB_TSTORE_MAX_SHARED, p->depth);
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
	return q->state == LATENCY || q->state == READY || q->state == PIPE || q->state == CHECK;
}

/* Is a before b in its queue: higher class, then earlier arrival. */
static bool before(const struct req *a, uint64_t ka, const struct req *b, uint64_t kb)
{
	return a->cls < b->cls || (a->cls == b->cls && ka < kb);
}

/* Count the pipe's progress up to now: each of the n transfers on it
 * moved HB_TSTORE_UNITS / n units a ns (exact for n <= 16). */
static void settle(struct hb_tstore *st)
{
	uint64_t per = st->piped ? (st->now - st->settled) * (HB_TSTORE_UNITS / st->piped) : 0;

	if (per)
		for (uint32_t i = 0; i < st->nact; i++) {
			struct req *q = &st->r[st->act[i]];
			if (q->state == PIPE)
				q->xfer_rem = q->xfer_rem > per ? q->xfer_rem - per : 0;
		}
	st->settled = st->now;
}

static void pipe_off(struct hb_tstore *st, struct req *q)
{
	q->state = READY;
	st->piped--;
}

static void pipe_on(struct hb_tstore *st, struct req *q)
{
	q->state = PIPE;
	st->piped++;
}

static void release_slot(struct hb_tstore *st, uint32_t id)
{
	struct req *q = &st->r[id];
	if (q->state == PIPE)
		pipe_off(st, q); /* settled by the caller */
	if (q->state == CHECK)
		q->chk_rem = q->chk_end - st->now; /* kept, like transfer progress */
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
	settle(st);
	for (;;) { /* slots */
		uint32_t w = NONE, v = NONE;
		for (uint32_t i = 0; i < st->nact; i++) {
			struct req *q = &st->r[st->act[i]];
			if (q->state == WAIT && (w == NONE || before(q, q->order, &st->r[w], st->r[w].order)))
				w = st->act[i];
		}
		if (w == NONE)
			break;
		if (st->p.engine) { /* no preemption; P1/P2 leave the reserve */
			uint32_t low = 0;
			for (uint32_t i = 0; i < st->nact; i++)
				low += holds_slot(&st->r[st->act[i]]) && st->r[st->act[i]].cls > HB_TS_P0;
			if (st->slots < st->p.depth && (st->r[w].cls == HB_TS_P0 || low + st->p.reserved < st->p.depth)) {
				take_slot(st, w);
				continue;
			}
			break;
		}
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
	{ /* pipe: settled before it changes */
		uint32_t b = NONE;
		for (uint32_t i = 0; i < st->nact; i++) {
			struct req *q = &st->r[st->act[i]];
			if ((q->state == READY || q->state == PIPE) &&
			    (b == NONE || before(q, q->ready_order, &st->r[b], st->r[b].ready_order)))
				b = st->act[i];
		}
		if (b == NONE)
			return;
		if (!st->p.shared) { /* the first of the top class, alone */
			for (uint32_t i = 0; i < st->nact; i++) {
				struct req *q = &st->r[st->act[i]];
				if (q->state == PIPE && q->cls <= st->r[b].cls)
					return; /* it keeps the pipe */
			}
			for (uint32_t i = 0; i < st->nact; i++)
				if (st->r[st->act[i]].state == PIPE)
					pipe_off(st, &st->r[st->act[i]]);
			pipe_on(st, &st->r[b]);
			return;
		}
		for (uint32_t i = 0; i < st->nact; i++) { /* every ready one of the top class */
			struct req *q = &st->r[st->act[i]];
			bool mine = st->p.engine || q->cls == st->r[b].cls; /* the engine: every class at once */
			if (q->state == PIPE && !mine)
				pipe_off(st, q);
			else if (q->state == READY && mine)
				pipe_on(st, q);
		}
	}
}

static void finish(struct hb_tstore *st, uint32_t id)
{
	struct req *q = &st->r[id];
	uint64_t tag = q->tag;

	if (q->cls == HB_TS_P0 && st->log)
		st->log(st->log_ctx, true, id, st->now, 0, 0, 0);
	q->state = FREE;
	st->slots--;
	for (uint32_t i = 0; i < st->nact; i++)
		if (st->act[i] == id) {
			st->act[i] = st->act[--st->nact];
			break;
		}
	st->freelist[st->nfree++] = id;
	if (st->done)
		st->done(st->done_ctx, id, tag, st->now);
}

/* its transfer done: the check, or the end */
static void transferred(struct hb_tstore *st, uint32_t id)
{
	struct req *q = &st->r[id];

	q->xfer_rem = 0;
	if (!q->chk_rem) {
		finish(st, id);
		return;
	}
	q->state = CHECK;
	q->chk_end = st->now + q->chk_rem;
}

/* the earliest end of phase `state` (LATENCY or CHECK): ties by arrival */
static uint32_t earliest(const struct hb_tstore *st, uint8_t state, uint64_t *at)
{
	uint32_t b = NONE;

	*at = NEVER;
	for (uint32_t i = 0; i < st->nact; i++) {
		const struct req *q = &st->r[st->act[i]];
		uint64_t e = state == LATENCY ? q->lat_end : q->chk_end;
		if (q->state == state && (e < *at || (b != NONE && e == *at && q->order < st->r[b].order)))
			*at = e, b = st->act[i];
	}
	return b;
}

/* the transfer on the pipe that ends first (ties by arrival), and when */
static uint32_t pipe_next(const struct hb_tstore *st, uint64_t *at)
{
	uint32_t b = NONE;

	*at = NEVER;
	for (uint32_t i = 0; i < st->nact; i++) {
		const struct req *q = &st->r[st->act[i]];
		if (q->state == PIPE && (b == NONE || q->xfer_rem < st->r[b].xfer_rem ||
					 (q->xfer_rem == st->r[b].xfer_rem && q->order < st->r[b].order)))
			b = st->act[i];
	}
	if (b != NONE) /* ceil(rem / (UNITS / n)) ns after the last count */
		*at = st->settled + (st->r[b].xfer_rem * st->piped + HB_TSTORE_UNITS - 1) / HB_TSTORE_UNITS;
	return b;
}

/* Process the next event if it happens at or before t; false if none. */
static bool step(struct hb_tstore *st, uint64_t t)
{
	uint64_t tp, tl, tc;
	uint32_t pb = pipe_next(st, &tp), l = earliest(st, LATENCY, &tl), c = earliest(st, CHECK, &tc);

	if (tp <= tl && tp <= tc && tp <= t) {
		st->now = tp;
		settle(st);
		st->r[pb].xfer_rem = 0;
		pipe_off(st, &st->r[pb]);
		transferred(st, pb);
	} else if (tc <= tl && tc != NEVER && tc <= t) {
		st->now = tc;
		settle(st);
		finish(st, c);
	} else if (tl != NEVER && tl <= t) {
		st->now = tl;
		settle(st);
		if (!st->r[l].xfer_rem) { /* it lost its slot after its transfer */
			transferred(st, l);
		} else {
			st->r[l].state = READY;
			st->r[l].ready_order = ++st->rseq;
		}
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
	settle(st);
}

int hb_tstore_submit(struct hb_tstore *st, enum hb_tstore_class c, uint64_t latency_ns,
		     uint64_t transfer_ns, uint64_t check_ns, uint64_t tag, uint32_t *id, struct hb_error *err)
{
	/* units x sharers must fit 64 bits (pipe_next): about 1,600 s a transfer */
	if (transfer_ns > UINT64_MAX / HB_TSTORE_UNITS / HB_TSTORE_MAX_SHARED)
		return hb_error_set(err, HB_ERR_OVERFLOW, "storage", "a transfer of %" PRIu64 " ns is too long", transfer_ns);
	return hb_tstore_submit_units(st, c, latency_ns, transfer_ns * HB_TSTORE_UNITS, check_ns, tag, id, err);
}

int hb_tstore_submit_units(struct hb_tstore *st, enum hb_tstore_class c, uint64_t latency_ns,
			   uint64_t transfer_units, uint64_t check_ns, uint64_t tag, uint32_t *id,
			   struct hb_error *err)
{
	uint32_t i;
	struct req *q;

	if (transfer_units > UINT64_MAX / HB_TSTORE_MAX_SHARED)
		return hb_error_set(err, HB_ERR_OVERFLOW, "storage", "a transfer of %" PRIu64 " units is too long",
				    transfer_units);
	if (!st->nfree)
		return hb_error_set(err, HB_ERR_OVERFLOW, "storage", "more than %u requests in flight", st->n);
	i = st->freelist[--st->nfree];
	q = &st->r[i];
	memset(q, 0, sizeof(*q));
	q->state = WAIT;
	q->cls = (uint8_t)c;
	q->lat_rem = latency_ns;
	q->xfer_rem = transfer_units;
	q->chk_rem = check_ns;
	q->order = ++st->seq;
	q->tag = tag;
	st->act[st->nact++] = i;
	if (c == HB_TS_P0 && st->log)
		st->log(st->log_ctx, false, i, st->now, latency_ns, transfer_units, check_ns);
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
	settle(st);
	for (uint32_t i = 0; i < st->nact; i++) {
		const struct req *o = &st->r[st->act[i]];
		higher += st->act[i] != id && holds_slot(o) && o->cls <= c;
	}
	q->cls = (uint8_t)c;
	if (holds_slot(q) && higher >= st->p.depth && !st->p.engine)
		release_slot(st, id); /* the class it joins already fills every slot */
	q->order = ++st->seq; /* it arrives in its new class now: ties go by this */
	if (q->state == READY || q->state == PIPE)
		q->ready_order = ++st->rseq;
	if (c == HB_TS_P0 && st->log) {
		uint64_t lat = q->state == WAIT ? q->lat_rem : q->state == LATENCY ? q->lat_end - st->now : 0;
		uint64_t rem = q->xfer_rem; /* settled: dispatch counted the pipe at submit or advance */
		uint64_t chk = q->state == CHECK ? q->chk_end - st->now : q->chk_rem;
		st->log(st->log_ctx, false, id, st->now, lat, rem, chk);
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
	 * s_i = 0 (i < depth) or done_{i-depth}, its transfer ends at
	 * x_i = max(s_i + latency, x_{i-1}) + transfer and it is done (its
	 * slot free) at done_i = x_i + check.  A shared pipe keeps them in
	 * lockstep: batches of depth, each latency + its transfers + check. */
	uint64_t *done = NULL, x = 0;

	if (!n)
		return 0;
	if (p->shared)
		return (n + p->depth - 1) / p->depth * (p->latency_ns + p->check_ns) + n * transfer_ns;
	done = malloc(n * sizeof(*done));
	if (!done)
		return NEVER;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t s = i < p->depth ? 0 : done[i - p->depth];
		uint64_t r = s + p->latency_ns;
		x = (r > x ? r : x) + transfer_ns;
		done[i] = x + p->check_ns;
	}
	x = done[n - 1];
	free(done);
	return x;
}
