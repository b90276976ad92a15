/*
 * hb_stream_route.c: exact wants (a route's experts, delivered as they
 * arrive), predictions, and cancellation.
 *
 * A want is decided once, when the router names it: a hit (the record is
 * valid: AFN-019's "ready before its deadline", the deadline being that
 * moment), joined (a read is queued or in flight: it is promoted to P0),
 * or a miss (a P0 read now, or when a slot frees).  The slot of a wanted
 * record is pinned from then until the caller takes it as a lease, so a
 * record that arrived cannot be evicted before it is used.  The time a
 * caller blocks in hb_xs_route_next is the exposed wait.
 */
#include "hb_base.h"
#include "hb_stream_int.h"

#include <math.h>

void hb_xs_route_init(struct hb_xs_route *r, struct hb_xs_want *storage, size_t cap)
{
	memset(r, 0, sizeof(*r));
	r->w = storage;
	r->cap = cap;
	r->token_mask = 1;
}

/* Bind want w to its record if it is valid (a hit) or being read (joined);
 * false when it is neither.  first says whether to count it. */
static bool bind(struct hb_xs *s, struct hb_xs_route *r, struct hb_xs_want *w, bool first)
{
	int32_t key = (int32_t)(r->layer * s->experts + w->expert);
	int32_t slot = s->where[key], ti;
	struct xs_slot *sl;

	if (slot != XS_NONE && (s->slots[slot].state == HB_XS_SLOT_VALID ||
				s->slots[slot].state == HB_XS_SLOT_LEASED)) {
		sl = &s->slots[slot];
		sl->pins++;
		xs_slot_refresh_state(sl);
		w->slot = (uint32_t)slot;
		w->gen = sl->gen;
		w->state = HB_XS_W_READY;
		w->ready_seq = ++s->ready_seq;
		if (first) {
			w->how = HB_XS_HIT;
			s->st.hits++;
		}
		xs_slot_consume(s, slot);
		return true;
	}
	if (slot != XS_NONE && s->slots[slot].state == HB_XS_SLOT_READING) {
		sl = &s->slots[slot];
		ti = sl->ticket;
		sl->pins++;
		s->tickets[ti].t.leases++;
		xs_ticket_promote(s, ti);
		w->slot = (uint32_t)slot;
		w->gen = sl->gen;
		w->ticket_id = s->tickets[ti].t.id;
		w->state = HB_XS_W_READ;
		if (first) {
			w->how = HB_XS_JOINED;
			s->st.joined++;
		}
		return true;
	}
	return false;
}

/* A miss: a P0 read into a slot taken now, or a wait for one. */
static void issue(struct hb_xs *s, struct hb_xs_route *r, struct hb_xs_want *w, bool first)
{
	int32_t slot, ti;
	struct xs_slot *sl;

	if (first) {
		w->how = HB_XS_MISS;
		s->st.misses++;
	}
	slot = xs_slot_take(s, HB_XS_P0);
	ti = slot == XS_NONE ? XS_NONE : xs_ticket_new(s, HB_XS_P0, slot, r->layer, w->expert);
	if (ti == XS_NONE) {
		if (slot != XS_NONE)
			xs_slot_free(s, slot);
		if (first || w->state != HB_XS_W_SLOT)
			s->st.slot_waits++;
		w->state = HB_XS_W_SLOT;
		return;
	}
	sl = &s->slots[slot];
	s->tickets[ti].group = r->group;
	s->tickets[ti].t.owner = r->owner;
	s->tickets[ti].t.owner_gen = r->owner_gen;
	s->tickets[ti].t.phase = r->phase;
	s->tickets[ti].t.token_pos = r->token_pos;
	s->tickets[ti].t.token_mask = r->token_mask;
	s->tickets[ti].t.deadline_ns = w->need_ns;
	s->tickets[ti].t.leases = 1;
	sl->pins = 1;
	w->slot = (uint32_t)slot;
	w->gen = sl->gen;
	w->ticket_id = s->tickets[ti].t.id;
	w->state = HB_XS_W_READ;
	xs_ticket_enqueue(s, ti);
}

static void place(struct hb_xs *s, struct hb_xs_route *r, struct hb_xs_want *w, bool first)
{
	if (!bind(s, r, w, first))
		issue(s, r, w, first);
}

int hb_xs_route_begin(struct hb_xs *s, struct hb_xs_route *r, uint32_t layer, const uint32_t *experts,
		      size_t n, struct hb_error *err)
{
	uint64_t seen[HB_EM_MAX_EXPERTS / 64] = {0};
	uint64_t now;

	if (r->active)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.route", "the route is already active");
	if (layer >= s->layers)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.route.layer",
				    "layer %u of a store of %u layers", layer, s->layers);
	if (n > r->cap || n > s->experts)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.route",
				    "%zu experts for a route of %zu", n, r->cap);
	for (size_t i = 0; i < n; i++) {
		if (experts[i] >= s->experts)
			return hb_error_set(err, HB_ERR_INVALID, "expert_cache.route.expert",
					    "expert %u of a store of %u", experts[i], s->experts);
		if (seen[experts[i] / 64] >> (experts[i] % 64) & 1)
			return hb_error_set(err, HB_ERR_INVALID, "expert_cache.route.expert",
					    "expert %u named twice", experts[i]);
		seen[experts[i] / 64] |= 1ull << (experts[i] % 64);
	}
	pthread_mutex_lock(&s->mu);
	now = xs_now(s);
	r->layer = layer;
	r->n = n;
	r->taken = 0;
	r->group = 0;
	hb_error_clear(&r->err);
	if (!r->token_mask)
		r->token_mask = 1;
	/* the hits and joins first, pinned, so that a miss of this same route
	 * never evicts a record another of its wants is about to hit */
	for (size_t i = 0; i < n; i++) {
		struct hb_xs_want *w = &r->w[i];
		memset(w, 0, sizeof(*w));
		w->expert = experts[i];
		w->need_ns = now;
		w->state = HB_XS_W_SLOT;
		w->how = HB_XS_MISS;
		s->st.wants++;
		if (!bind(s, r, w, true))
			w->slot = UINT32_MAX;
	}
	for (size_t i = 0; i < n; i++)
		if (r->w[i].slot == UINT32_MAX)
			issue(s, r, &r->w[i], true);
	xs_extent_route(s, r); /* records or the extent (H5): groups the misses */
	r->active = true;
	r->next = s->routes;
	s->routes = r;
	pthread_mutex_unlock(&s->mu);
	return HB_OK;
}

/* Every slot is held and nothing in the engine can free one: the caller
 * would wait for itself. */
static bool stuck(struct hb_xs *s, const struct hb_xs_route *r)
{
	if (s->inflight || s->queued[0] || s->queued[1] || s->queued[2])
		return false;
	if (xs_slots_obtainable(s))
		return false;
	for (const struct hb_xs_route *o = s->routes; o; o = o->next)
		if (o != r)
			return false;
	return !xs_leases_of_others(s, r->owner);
}

int hb_xs_route_next(struct hb_xs *s, struct hb_xs_route *r, size_t *index, struct hb_xs_lease *l,
		     struct hb_error *err)
{
	uint64_t t0 = 0;
	int rc;

	if (!r->active)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.route", "the route is not active");
	pthread_mutex_lock(&s->mu);
	for (;;) {
		size_t best = SIZE_MAX;
		bool moved = false;
		if (r->err.code) {
			if (err && !err->code)
				*err = r->err;
			rc = r->err.code;
			break;
		}
		for (size_t i = 0; i < r->n; i++)
			if (r->w[i].state == HB_XS_W_READY &&
			    (best == SIZE_MAX || r->w[i].ready_seq < r->w[best].ready_seq))
				best = i;
		if (best != SIZE_MAX) {
			struct hb_xs_want *w = &r->w[best];
			struct xs_slot *sl = &s->slots[w->slot];
			if ((rc = xs_lease_add(s, (int32_t)w->slot, r->owner, l, err)))
				break;
			sl->pins--;
			xs_slot_refresh_state(sl);
			w->state = HB_XS_W_TAKEN;
			r->taken++;
			*index = best;
			break;
		}
		if (r->taken == r->n) {
			rc = HB_XS_DONE;
			break;
		}
		for (size_t i = 0; i < r->n; i++)
			if (r->w[i].state == HB_XS_W_SLOT) {
				place(s, r, &r->w[i], false);
				moved |= r->w[i].state != HB_XS_W_SLOT;
			}
		if (moved)
			continue;
		if (!t0)
			t0 = xs_now(s);
		if (!s->cfg.threads && xs_pump(s))
			continue;
		if (!s->cfg.threads ? !s->pumping : stuck(s, r)) {
			rc = hb_error_set(err, HB_ERR_UNSUPPORTED, "expert_cache",
					  "the budget holds %u records and this wave's leases hold them all: "
					  "release leases before asking for more, or raise --expert-cache",
					  s->nslots);
			break;
		}
		/* an I/O thread, or another caller's wait that is reading (several
		 * callers may share a route: the graph's expert jobs), wakes us */
		pthread_cond_wait(&s->done_cv, &s->mu);
	}
	if (t0) {
		uint64_t waited = xs_now(s) - t0;
		s->st.exposed_ns += waited;
		s->token_exposed += waited;
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

void hb_xs_route_end(struct hb_xs *s, struct hb_xs_route *r)
{
	if (!r->active)
		return;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < r->n; i++) {
		struct hb_xs_want *w = &r->w[i];
		struct xs_slot *sl;
		/* a pin belongs to the want until it is taken; the read it waits
		 * on goes on and its record becomes an ordinary cache entry */
		if (w->state != HB_XS_W_READY && w->state != HB_XS_W_READ)
			continue;
		sl = &s->slots[w->slot];
		if (sl->gen == w->gen && sl->pins) {
			sl->pins--;
			xs_slot_refresh_state(sl);
		}
	}
	for (struct hb_xs_route **p = &s->routes; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	r->active = false;
	r->next = NULL;
	pthread_cond_broadcast(&s->done_cv);
	pthread_mutex_unlock(&s->mu);
}

int hb_xs_acquire(struct hb_xs *s, uint32_t layer, uint32_t expert, struct hb_xs_lease *l,
		  struct hb_error *err)
{
	struct hb_xs_want w;
	struct hb_xs_route r;
	size_t idx;
	int rc;

	hb_xs_route_init(&r, &w, 1);
	if ((rc = hb_xs_route_begin(s, &r, layer, &expert, 1, err)))
		return rc;
	rc = hb_xs_route_next(s, &r, &idx, l, err);
	hb_xs_route_end(s, &r);
	if (rc == HB_XS_DONE)
		rc = hb_error_set(err, HB_ERR_INTERNAL, "expert_cache", "a route of one ended empty");
	return rc;
}

/* ------------------------------------------------------------ predictions */

static void mark_pred(struct xs_slot *sl, const struct hb_xs_hint *h)
{
	if (sl->pred_prio == XS_NO_PRED || h->prio < sl->pred_prio)
		sl->pred_prio = h->prio;
	if (h->confidence > sl->pred_conf || sl->pred_token != h->token_pos)
		sl->pred_conf = h->confidence;
	sl->pred_token = h->token_pos;
}

int hb_xs_prefetch(struct hb_xs *s, const struct hb_xs_hint *hint, struct hb_xs_handle *h,
		   struct hb_error *err)
{
	int32_t key, slot, ti;
	int out;

	if (hint->layer >= s->layers || hint->expert >= s->experts)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.hint",
				    "layer %u expert %u outside the store", hint->layer, hint->expert);
	if (hint->prio != HB_XS_P1 && hint->prio != HB_XS_P2)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.hint.prio",
				    "a prediction is P1 or P2, not %u", hint->prio);
	if (!(hint->confidence >= 0 && hint->confidence <= 1))
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.hint.confidence",
				    "confidence must lie in [0, 1]");
	pthread_mutex_lock(&s->mu);
	key = (int32_t)(hint->layer * s->experts + hint->expert);
	slot = s->where[key];
	if (h)
		h->index = UINT32_MAX, h->id = 0;
	if (slot != XS_NONE && s->slots[slot].state != HB_XS_SLOT_READING) {
		mark_pred(&s->slots[slot], hint);
		s->st.prefetch_hits++;
		out = HB_XS_PF_HIT;
	} else if (slot != XS_NONE) {
		ti = s->slots[slot].ticket;
		mark_pred(&s->slots[slot], hint);
		xs_ticket_upgrade(s, ti, hint->prio);
		if (h)
			h->index = (uint32_t)ti, h->id = s->tickets[ti].t.id;
		s->st.prefetch_joined++;
		out = HB_XS_PF_JOINED;
	} else if ((slot = xs_slot_take(s, hint->prio)) == XS_NONE ||
		   (ti = xs_ticket_new(s, hint->prio, slot, hint->layer, hint->expert)) == XS_NONE) {
		if (slot != XS_NONE)
			xs_slot_free(s, slot);
		s->st.prefetch_rejected++;
		out = HB_XS_PF_REJECTED;
	} else {
		struct hb_xs_ticket *t = &s->tickets[ti].t;
		t->owner = hint->owner;
		t->owner_gen = hint->owner_gen;
		t->phase = hint->phase;
		t->token_pos = hint->token_pos;
		t->token_mask = hint->token_mask ? hint->token_mask : 1;
		t->confidence = hint->confidence;
		t->deadline_ns = hint->deadline_ns;
		mark_pred(&s->slots[slot], hint);
		if (h)
			h->index = (uint32_t)ti, h->id = t->id;
		xs_ticket_enqueue(s, ti);
		out = HB_XS_PF_ISSUED;
	}
	pthread_mutex_unlock(&s->mu);
	return out;
}

static bool cancellable(struct hb_xs *s, int32_t ti)
{
	const struct xs_ticket *tk = &s->tickets[ti];

	return tk->live && !tk->cancelled && tk->t.prio != HB_XS_P0 && !s->slots[tk->t.slot].pins;
}

int hb_xs_cancel(struct hb_xs *s, const struct hb_xs_handle *h, struct hb_error *err)
{
	int rc = HB_OK;

	pthread_mutex_lock(&s->mu);
	if (h->index >= s->nslots || s->tickets[h->index].t.id != h->id || !s->tickets[h->index].live ||
	    s->tickets[h->index].cancelled)
		rc = hb_error_set(err, HB_ERR_INVALID, "expert_cache.ticket",
				  "ticket %" PRIu64 " is not live (completed or cancelled already)", h->id);
	else if (!cancellable(s, (int32_t)h->index))
		rc = hb_error_set(err, HB_ERR_INVALID, "expert_cache.ticket",
				  "ticket %" PRIu64 " is exact now: an exact want waits on it", h->id);
	else
		xs_ticket_cancel(s, (int32_t)h->index);
	pthread_cond_broadcast(&s->done_cv);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

size_t hb_xs_cancel_owner(struct hb_xs *s, uint64_t owner, uint64_t below_gen)
{
	size_t n = 0;

	pthread_mutex_lock(&s->mu);
	for (uint32_t i = 0; i < s->nslots; i++)
		if (cancellable(s, (int32_t)i) && s->tickets[i].t.owner == owner &&
		    s->tickets[i].t.owner_gen < below_gen) {
			xs_ticket_cancel(s, (int32_t)i);
			n++;
		}
	pthread_cond_broadcast(&s->done_cv);
	pthread_mutex_unlock(&s->mu);
	return n;
}
