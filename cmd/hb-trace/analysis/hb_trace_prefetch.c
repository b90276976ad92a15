/*
 * hb_trace_prefetch.c: the prefetch simulation (hb_trace_prefetch.h).
 *
 * Every (layer, expert) key is in one state: absent, cached (LRU), staged
 * (a completed prediction awaiting its layer's next step) or in flight
 * (one request at most).  Records are processed one step behind the input
 * so that the oracle can see the next step.
 */
#include "hb_base.h"
#include "hb_trace_prefetch.h"
#include "hb_trace_input.h"

#include <math.h>

enum kstate { ABSENT, CACHED, STAGED, INFLIGHT };
#define NIL UINT32_MAX

static const char *const pnames[HB_TPF_PREDICTORS] = { "none", "prev", "adjacent", "oracle", "engine" };

const char *hb_tpf_predictor_name(enum hb_tpf_predictor p)
{
	return (unsigned)p < HB_TPF_PREDICTORS ? pnames[p] : NULL;
}

int hb_tpf_predictor_parse(const char *name, enum hb_tpf_predictor *out)
{
	for (int i = 0; i < HB_TPF_PREDICTORS; i++)
		if (!strcmp(name, pnames[i])) {
			*out = (enum hb_tpf_predictor)i;
			return HB_OK;
		}
	return HB_ERR_INVALID;
}

void hb_tpf_opts_default(struct hb_tpf_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->storage.latency_ns = 100000;
	o->storage.bandwidth = 2e9;
	o->storage.depth = 8;
	o->attn_fraction = 0.5;
	o->cache_budget = UINT64_MAX; /* resolved to layers x top_k */
}

struct hb_tpf {
	struct hb_trace_header h;
	struct hb_tpf_opts o;
	struct hb_tstore *st;
	uint32_t keys;
	uint8_t *state, *predicted, *promoted, *orphan, *cls, *cls0;
	uint32_t *req, *mark, tick;
	uint64_t *submit;
	uint32_t *prev, *next, head, tail; /* LRU, head = most recent */
	uint64_t cached, budget;
	uint64_t xfer_ns, attn_ns, rest_ns, now, per_layer0;
	uint64_t *layer_records;
	uint32_t *last_ids;          /* prev: the latest record's experts, per layer */
	uint8_t *last_have;
	struct hb_tpf_inject *inj;   /* engine: sorted by step, phase, offset */
	size_t ninj;
	struct hb_route pending;
	bool have_pending;
	struct hb_tpf_result res;
	int err_rc;
	struct hb_error *err;
};

/* ------------------------------------------------------------ cache */

static void lru_unlink(struct hb_tpf *p, uint32_t x)
{
	if (p->prev[x] != NIL)
		p->next[p->prev[x]] = p->next[x];
	else
		p->head = p->next[x];
	if (p->next[x] != NIL)
		p->prev[p->next[x]] = p->prev[x];
	else
		p->tail = p->prev[x];
}

static void lru_front(struct hb_tpf *p, uint32_t x)
{
	p->prev[x] = NIL;
	p->next[x] = p->head;
	if (p->head != NIL)
		p->prev[p->head] = x;
	p->head = x;
	if (p->tail == NIL)
		p->tail = x;
}

static void cache_insert(struct hb_tpf *p, uint32_t x)
{
	if (!p->budget) {
		p->state[x] = ABSENT; /* used once, then dropped */
		return;
	}
	if (p->cached == p->budget) {
		uint32_t v = p->tail;
		lru_unlink(p, v);
		p->state[v] = ABSENT;
		p->cached--;
	}
	lru_front(p, x);
	p->state[x] = CACHED;
	p->cached++;
}

static void cache_touch(struct hb_tpf *p, uint32_t x)
{
	if (p->head != x) {
		lru_unlink(p, x);
		lru_front(p, x);
	}
}

/* ------------------------------------------------------------ storage */

static void on_done(void *ctx, uint32_t id, uint64_t tag, uint64_t at)
{
	struct hb_tpf *p = ctx;
	uint32_t x = (uint32_t)tag;

	if (p->o.event) {
		struct hb_tpf_event ev;
		memset(&ev, 0, sizeof(ev));
		ev.layer = x / p->h.experts;
		ev.expert = x % p->h.experts;
		ev.cls = p->cls[x];
		ev.cls_issued = p->cls0[x];
		ev.predicted = p->predicted[x];
		ev.promoted = p->promoted[x];
		ev.submit = ev.dispatch = p->submit[x];
		ev.done = at;
		p->o.event(p->o.event_ctx, &ev);
	}
	if (!p->predicted[x] || p->promoted[x]) {
		cache_insert(p, x);
	} else if (p->orphan[x]) {
		p->state[x] = ABSENT;
		p->res.predicted_wasted++;
	} else {
		p->state[x] = STAGED;
	}
	p->orphan[x] = p->promoted[x] = 0;
}

static int request(struct hb_tpf *p, uint32_t x, enum hb_tstore_class c, bool predicted)
{
	int rc = hb_tstore_submit(p->st, c, p->o.storage.latency_ns, p->xfer_ns, p->o.storage.check_ns, x, &p->req[x],
				  p->err);
	if (rc)
		return rc;
	p->state[x] = INFLIGHT;
	p->predicted[x] = predicted;
	p->promoted[x] = p->orphan[x] = 0;
	p->cls[x] = p->cls0[x] = (uint8_t)c;
	p->submit[x] = hb_tstore_now(p->st);
	if (predicted)
		p->res.predicted_reads++, p->res.predicted_bytes += p->o.record_bytes;
	else
		p->res.exact_reads++, p->res.exact_bytes += p->o.record_bytes;
	return HB_OK;
}

static int predict(struct hb_tpf *p, uint32_t layer, const uint32_t *ids, uint32_t n, enum hb_tstore_class c)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t x = layer * p->h.experts + ids[i];
		int rc;
		if (p->state[x] == INFLIGHT && p->predicted[x])
			p->orphan[x] = 0; /* predicted again: keep it */
		if (p->state[x] != ABSENT)
			continue;
		if ((rc = request(p, x, c, true)))
			return rc;
	}
	return HB_OK;
}

/* ------------------------------------------------------------ engine reads */

static int inj_cmp(const void *a, const void *b)
{
	const struct hb_tpf_inject *x = a, *y = b;
	if (x->token != y->token)
		return x->token < y->token ? -1 : 1;
	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	if (x->phase != y->phase)
		return x->phase < y->phase ? -1 : 1;
	if (x->offset_ns != y->offset_ns)
		return x->offset_ns < y->offset_ns ? -1 : 1;
	return 0;
}

/* the first engine read of step (token, layer) */
static size_t inj_first(const struct hb_tpf *p, uint64_t token, uint32_t layer)
{
	size_t lo = 0, hi = p->ninj;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct hb_tpf_inject *m = &p->inj[mid];
		if (m->token < token || (m->token == token && m->layer < layer))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* the engine reads of this step at `phase`, from *i on, each at base +
 * its offset (at most cap); advances *i past them */
static int inj_issue(struct hb_tpf *p, const struct hb_route *r, size_t *i, uint8_t phase, uint64_t base,
		     uint64_t cap)
{
	for (; *i < p->ninj; ++*i) {
		const struct hb_tpf_inject *q = &p->inj[*i];
		uint64_t at;
		uint32_t id;
		int rc;
		if (q->token != r->ordinal || q->layer != r->layer || q->phase != phase)
			break;
		at = base + (q->offset_ns < cap ? q->offset_ns : cap);
		if (at > hb_tstore_now(p->st))
			hb_tstore_advance(p->st, at);
		id = q->expert;
		if ((rc = predict(p, q->target_layer, &id, 1, (enum hb_tstore_class)q->cls)))
			return rc;
	}
	return HB_OK;
}

/* ------------------------------------------------------------ steps */

static int run_step(struct hb_tpf *p, const struct hb_route *r, const struct hb_route *nx)
{
	const uint32_t k = p->h.top_k, E = p->h.experts, base = r->layer * E;
	uint64_t S = p->now, R = S + p->attn_ns, W = R, needed = 0;
	size_t ii = p->ninj ? inj_first(p, r->ordinal, r->layer) : 0;
	uint32_t t;
	int rc;

	if (p->o.predictor == HB_TPF_PREV && r->layer == 0)
		for (uint32_t l = 0; l < p->h.layers; l++)
			if (p->last_have[l] && (rc = predict(p, l, p->last_ids + (size_t)l * k, k, HB_TS_P2)))
				return rc;
	if ((rc = inj_issue(p, r, &ii, HB_TPF_BEFORE_ROUTER, S, p->attn_ns)))
		return rc;
	hb_tstore_advance(p->st, R);
	if (++p->tick == 0) {
		memset(p->mark, 0, p->keys * sizeof(*p->mark));
		p->tick = 1;
	}
	t = p->tick;
	for (uint32_t i = 0; i < k; i++) {
		uint32_t x = base + r->ids[i];
		p->mark[x] = t;
		switch (p->state[x]) {
		case CACHED:
			p->res.cache_hits++;
			cache_touch(p, x);
			break;
		case STAGED:
			needed++;
			p->res.staged_hits++;
			p->res.predicted_consumed++, p->res.consumed_bytes += p->o.record_bytes;
			cache_insert(p, x);
			break;
		case INFLIGHT:
			needed++;
			p->res.late++;
			if (p->predicted[x] && !p->promoted[x]) {
				p->res.predicted_consumed++, p->res.consumed_bytes += p->o.record_bytes;
				p->promoted[x] = 1;
				p->orphan[x] = 0;
			}
			p->cls[x] = HB_TS_P0;
			hb_tstore_promote(p->st, p->req[x], HB_TS_P0);
			break;
		default:
			needed++;
			if ((rc = request(p, x, HB_TS_P0, false)))
				return rc;
		}
	}
	p->res.exact += k;
	p->res.exact_io_ns += hb_tstore_idle_ns(&p->o.storage, needed, p->xfer_ns);
	/* predictions for this layer that this step did not use are wasted */
	for (uint32_t e = 0; e < E; e++) {
		uint32_t x = base + e;
		if (p->mark[x] == t)
			continue;
		if (p->state[x] == STAGED)
			p->state[x] = ABSENT, p->res.predicted_wasted++;
		else if (p->state[x] == INFLIGHT && p->predicted[x] && !p->promoted[x])
			p->orphan[x] = 1;
	}
	if (p->o.predictor == HB_TPF_ADJACENT && r->layer + 1 < p->h.layers &&
	    (rc = predict(p, r->layer + 1, r->ids, k, HB_TS_P1)))
		return rc;
	if (p->o.predictor == HB_TPF_ORACLE && nx && (rc = predict(p, nx->layer, nx->ids, k, HB_TS_P1)))
		return rc;
	if ((rc = inj_issue(p, r, &ii, HB_TPF_AT_ROUTER, R, 0)))
		return rc;
	for (uint32_t i = 0; i < k; i++) {
		uint32_t x = base + r->ids[i];
		if (p->state[x] == INFLIGHT) {
			uint64_t done = hb_tstore_wait(p->st, p->req[x]);
			W = done > W ? done : W;
		}
	}
	if (p->err_rc)
		return p->err_rc;
	p->res.exposed_ns += W - R;
	if (r->ordinal >= p->o.from_token) {
		p->res.window_exposed_ns += W - R;
		p->res.window_tokens += r->layer == 0;
	}
	p->now = W + p->rest_ns;
	if ((rc = inj_issue(p, r, &ii, HB_TPF_AFTER_READY, W, p->rest_ns)))
		return rc;
	hb_tstore_advance(p->st, p->now);
	memcpy(p->last_ids + (size_t)r->layer * k, r->ids, k * sizeof(uint32_t));
	p->last_have[r->layer] = 1;
	if (p->o.event) {
		struct hb_tpf_event ev;
		memset(&ev, 0, sizeof(ev));
		ev.is_step = true;
		ev.token = r->ordinal;
		ev.layer = r->layer;
		ev.start = S, ev.router = R, ev.ready = W, ev.end = p->now;
		ev.moe = R, ev.exposed = W - R, ev.tokens = 1;
		p->o.event(p->o.event_ctx, &ev);
	}
	p->res.steps++;
	return HB_OK;
}

/* ------------------------------------------------------------ api */

void hb_tpf_free(struct hb_tpf *p)
{
	if (!p)
		return;
	hb_tstore_free(p->st);
	free(p->state), free(p->predicted), free(p->promoted), free(p->orphan), free(p->cls), free(p->cls0);
	free(p->req), free(p->mark), free(p->submit), free(p->prev), free(p->next), free(p->layer_records);
	free(p->last_ids), free(p->last_have), free(p->inj);
	free(p);
}

int hb_tpf_create(struct hb_tpf **out, const struct hb_trace_header *h, const struct hb_tpf_opts *o,
		  struct hb_error *err)
{
	struct hb_tpf *p;
	int rc;

	*out = NULL;
	if (!o->record_bytes || !(o->layer_time_s >= 0) || !(o->attn_fraction >= 0 && o->attn_fraction <= 1) ||
	    (unsigned)o->predictor >= HB_TPF_PREDICTORS)
		return hb_error_set(err, HB_ERR_INVALID, "prefetch-sim",
				    "needs record bytes > 0, layer time >= 0 and attention fraction in [0, 1]");
	p = calloc(1, sizeof(*p));
	if (!p)
		return hb_error_set(err, HB_ERR_NOMEM, "prefetch-sim", "out of memory");
	p->h = *h;
	p->o = *o;
	p->err = err;
	p->keys = h->layers * h->experts;
	p->budget = o->cache_budget == UINT64_MAX ? (uint64_t)h->layers * h->top_k : o->cache_budget;
	if (p->budget > p->keys)
		p->budget = p->keys;
	p->state = calloc(p->keys, 1), p->predicted = calloc(p->keys, 1), p->promoted = calloc(p->keys, 1);
	p->orphan = calloc(p->keys, 1), p->cls = calloc(p->keys, 1), p->cls0 = calloc(p->keys, 1);
	p->req = calloc(p->keys, sizeof(*p->req)), p->mark = calloc(p->keys, sizeof(*p->mark));
	p->submit = calloc(p->keys, sizeof(*p->submit));
	p->prev = malloc(p->keys * sizeof(*p->prev)), p->next = malloc(p->keys * sizeof(*p->next));
	p->layer_records = calloc(h->layers, sizeof(*p->layer_records));
	p->last_ids = calloc((size_t)h->layers * h->top_k, sizeof(*p->last_ids));
	p->last_have = calloc(h->layers, 1);
	if (!p->last_ids || !p->last_have ||
	    !p->state || !p->predicted || !p->promoted || !p->orphan || !p->cls || !p->cls0 || !p->req || !p->mark ||
	    !p->submit || !p->prev || !p->next || !p->layer_records) {
		hb_tpf_free(p);
		return hb_error_set(err, HB_ERR_NOMEM, "prefetch-sim", "out of memory");
	}
	if (o->predictor == HB_TPF_ENGINE && o->ninject) {
		p->inj = malloc(o->ninject * sizeof(*p->inj));
		if (!p->inj) {
			hb_tpf_free(p);
			return hb_error_set(err, HB_ERR_NOMEM, "prefetch-sim", "out of memory");
		}
		for (size_t i = 0; i < o->ninject; i++) {
			const struct hb_tpf_inject *q = &o->inject[i];
			if (q->layer >= h->layers || q->target_layer >= h->layers || q->expert >= h->experts ||
			    q->phase > HB_TPF_AFTER_READY || (q->cls != HB_TS_P1 && q->cls != HB_TS_P2)) {
				hb_tpf_free(p);
				return hb_error_set(err, HB_ERR_INVALID, "prefetch-sim",
						    "engine read %zu: layer %u, record (%u, %u), phase %u or class %u "
						    "out of range", i, q->layer, q->target_layer, q->expert, q->phase, q->cls);
			}
			p->inj[i] = *q;
		}
		p->ninj = o->ninject;
		qsort(p->inj, p->ninj, sizeof(*p->inj), inj_cmp);
	}
	p->head = p->tail = NIL;
	/* one request per key at most */
	if ((rc = hb_tstore_create(&p->st, &o->storage, p->keys, on_done, p, err))) {
		hb_tpf_free(p);
		return rc;
	}
	if (o->p0_log)
		hb_tstore_set_log(p->st, o->p0_log, o->p0_log_ctx);
	p->xfer_ns = hb_tstore_transfer_ns(&o->storage, o->record_bytes);
	p->attn_ns = (uint64_t)llround(o->layer_time_s * o->attn_fraction * 1e9);
	p->rest_ns = (uint64_t)llround(o->layer_time_s * 1e9) - p->attn_ns;
	*out = p;
	return HB_OK;
}

int hb_tpf_add(struct hb_tpf *p, const struct hb_route *r, struct hb_error *err)
{
	int rc = HB_OK;

	p->err = err;
	p->layer_records[r->layer]++;
	if (p->have_pending)
		rc = run_step(p, &p->pending, r);
	p->pending = *r;
	p->have_pending = true;
	return rc;
}

int hb_tpf_finish(struct hb_tpf *p, struct hb_tpf_result *out, struct hb_error *err)
{
	struct hb_tpf_result *R = &p->res;
	uint64_t tokens = p->layer_records[0], total;
	int rc;

	p->err = err;
	if (p->have_pending && (rc = run_step(p, &p->pending, NULL)))
		return rc;
	p->have_pending = false;
	for (uint32_t l = 1; l < p->h.layers; l++)
		if (p->layer_records[l] != tokens)
			return hb_error_diag(err, hb_trace_input_diag_id(HB_TRI_ORDER), HB_ERR_UNSUPPORTED, "trace", false, 0,
					     "layer %u has %" PRIu64 " records and layer 0 has %" PRIu64
					     "; per-token figures need every token at every layer",
					     l, p->layer_records[l], tokens);
	hb_tstore_drain(p->st);
	R->tokens = tokens;
	R->end_ns = p->now;
	total = R->exact_bytes + R->predicted_bytes;
	R->timely_recall = R->exact ? (double)(R->cache_hits + R->staged_hits) / (double)R->exact : NAN;
	R->prefetch_recall = R->exact > R->cache_hits
				     ? (double)R->staged_hits / (double)(R->exact - R->cache_hits) : NAN;
	R->useful_ratio = R->predicted_bytes ? (double)R->consumed_bytes / (double)R->predicted_bytes : NAN;
	R->bytes_per_token = tokens ? (double)total / (double)tokens : NAN;
	R->read_amplification = R->exact_bytes + R->consumed_bytes
					? (double)total / (double)(R->exact_bytes + R->consumed_bytes) : NAN;
	R->hidden_fraction = R->exact_io_ns ? 1.0 - (double)R->exposed_ns / (double)R->exact_io_ns : NAN;
	R->exposed_per_token_s = tokens ? (double)R->exposed_ns / (double)tokens / 1e9 : NAN;
	*out = *R;
	return HB_OK;
}
