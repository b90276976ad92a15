/*
 * hb_stream_cache.c: the record cache: which slot a new read takes, what
 * is evicted, the first-use accounting of AFN-019's metrics, and leases.
 * Every function here runs with the engine's mutex held.
 *
 * Eviction.  LRU is the control (AFN-019: "plain LRU is only a control").
 * The score policy estimates stall removed per byte,
 *     score = P(use before eviction) x expected exposed latency / bytes,
 * with P from two signals: the record's exact uses, decayed by half every
 * freq_halflife tokens (f / (f + 1)), scaled by how soon its layer runs
 * again in the forward order ((L - d) / L, d = 0 for the next layer); and
 * a prediction still pending for the current or a later token, which
 * counts its confidence.  The expected latency is the running mean of P0
 * issue-to-ready; every record of a store has the same size, so for one
 * engine the order is P's, and the other two factors are kept so that the
 * number means what the note says when records of several stores share a
 * budget.  Ties go to the least recently used.
 */
#include "hb_base.h"
#include "hb_stream_int.h"

#include <math.h>

void xs_slot_refresh_state(struct xs_slot *sl)
{
	if (sl->state == HB_XS_SLOT_VALID || sl->state == HB_XS_SLOT_LEASED)
		sl->state = sl->leases + sl->pins ? HB_XS_SLOT_LEASED : HB_XS_SLOT_VALID;
}

void xs_slot_free(struct hb_xs *s, int32_t slot)
{
	struct xs_slot *sl = &s->slots[slot];

	if (sl->key != XS_NONE && s->where[sl->key] == slot)
		s->where[sl->key] = XS_NONE;
	sl->key = XS_NONE;
	sl->ticket = XS_NONE;
	sl->state = HB_XS_SLOT_FREE;
	sl->gen++;
	sl->leases = sl->pins = 0;
	sl->predicted = sl->used = false;
	sl->pred_prio = XS_NO_PRED;
	s->st.slot_releases++;
}

static bool evictable(const struct xs_slot *sl)
{
	return sl->state == HB_XS_SLOT_VALID && !sl->pins && !sl->leases;
}

static bool pending_pred(const struct hb_xs *s, const struct xs_slot *sl)
{
	return sl->pred_prio != XS_NO_PRED && sl->pred_token >= s->cur_token;
}

static double decayed(const struct hb_xs *s, int32_t key)
{
	uint64_t age = s->cur_token > s->freq_tok[key] ? s->cur_token - s->freq_tok[key] : 0;
	unsigned h = s->cfg.freq_halflife ? s->cfg.freq_halflife : 1;

	return s->freq[key] * exp2(-(double)age / h);
}

static double score(const struct hb_xs *s, const struct xs_slot *sl)
{
	uint32_t layer = (uint32_t)sl->key / s->experts;
	/* layers until this one runs again: 0 for the next */
	uint32_t d = (layer + s->layers - s->cur_layer - 1) % s->layers;
	double f = decayed(s, sl->key);
	double p = f / (f + 1.0) * (double)(s->layers - d) / s->layers;
	double cost = s->miss_samples ? s->mean_miss_ns : 1.0;

	if (pending_pred(s, sl) && sl->pred_conf > p)
		p = sl->pred_conf;
	return p * cost / (double)s->slot_bytes;
}

/* The slot to evict for a read of class prio, or XS_NONE.  A prediction
 * never evicts a record whose own prediction of an equal or better class
 * is still pending. */
static int32_t victim(struct hb_xs *s, uint8_t prio)
{
	int32_t best = XS_NONE;
	double best_score = 0;

	for (uint32_t i = 0; i < s->nslots; i++) {
		const struct xs_slot *sl = &s->slots[i];
		double sc = 0;
		if (!evictable(sl))
			continue;
		if (prio > HB_XS_P0 && pending_pred(s, sl) && sl->pred_prio <= prio)
			continue;
		if (s->cfg.policy == HB_XS_POLICY_SCORE)
			sc = score(s, sl);
		if (best == XS_NONE || sc < best_score ||
		    (sc == best_score && sl->last_use < s->slots[best].last_use)) {
			best = (int32_t)i;
			best_score = sc;
		}
	}
	return best;
}

static void evict(struct hb_xs *s, int32_t slot)
{
	struct xs_slot *sl = &s->slots[slot];

	s->st.evictions++;
	if (sl->predicted && !sl->used) {
		s->st.evictions_unused++;
		s->st.bytes_rejected += sl->phys;
	}
	xs_slot_free(s, slot);
}

/* A queued ticket of a class worse than prio whose slot may be taken: the
 * worst class, the newest; XS_NONE when none. */
static int32_t stealable(struct hb_xs *s, uint8_t prio)
{
	for (int p = HB_XS_PRIOS - 1; p > prio; p--) {
		int32_t best = XS_NONE;
		for (int32_t ti = s->qhead[p]; ti != XS_NONE; ti = s->tickets[ti].qnext)
			if (!s->slots[s->tickets[ti].t.slot].pins &&
			    (best == XS_NONE || s->tickets[ti].t.id > s->tickets[best].t.id))
				best = ti;
		if (best != XS_NONE)
			return best;
	}
	return XS_NONE;
}

uint32_t xs_slots_obtainable(struct hb_xs *s)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->nslots; i++) {
		const struct xs_slot *sl = &s->slots[i];
		if (sl->state == HB_XS_SLOT_FREE || evictable(sl))
			n++;
		else if (sl->state == HB_XS_SLOT_READING && sl->ticket != XS_NONE && !sl->pins &&
			 s->tickets[sl->ticket].t.state == HB_XS_T_QUEUED &&
			 s->tickets[sl->ticket].t.prio > HB_XS_P0)
			n++;
	}
	return n;
}

int32_t xs_slot_take(struct hb_xs *s, uint8_t prio)
{
	int32_t pick = XS_NONE, ti;

	if (prio > HB_XS_P0 && xs_slots_obtainable(s) <= s->reserve_slots)
		return XS_NONE;
	/* a free slot, one whose buffer exists first (no allocation) */
	for (uint32_t i = 0; i < s->nslots; i++)
		if (s->slots[i].state == HB_XS_SLOT_FREE) {
			if (s->slots[i].buf)
				return (int32_t)i;
			if (pick == XS_NONE)
				pick = (int32_t)i;
		}
	if (pick != XS_NONE)
		return pick;
	pick = victim(s, prio);
	if (pick != XS_NONE) {
		evict(s, pick);
		return pick;
	}
	ti = stealable(s, prio);
	if (ti == XS_NONE)
		return XS_NONE;
	pick = (int32_t)s->tickets[ti].t.slot;
	xs_ticket_cancel(s, ti);
	return pick;
}

void xs_slot_consume(struct hb_xs *s, int32_t slot)
{
	struct xs_slot *sl = &s->slots[slot];

	sl->last_use = ++s->use_clock;
	s->freq[sl->key] = decayed(s, sl->key) + 1.0;
	s->freq_tok[sl->key] = s->cur_token;
	sl->pred_prio = XS_NO_PRED;
	if (sl->used)
		return;
	/* the first exact use of this read: AFN-019's useful bytes, served
	 * bytes and exact I/O wall time are per read, not per want */
	sl->used = true;
	s->st.bytes_served += s->record_bytes;
	s->st.exact_io_ns += sl->read_ns;
	if (sl->predicted)
		s->st.bytes_useful += sl->phys;
}

/* ------------------------------------------------------------ leases */

int xs_lease_add(struct hb_xs *s, int32_t slot, uint64_t owner, struct hb_xs_lease *l,
		 struct hb_error *err)
{
	struct xs_slot *sl = &s->slots[slot];

	for (uint32_t i = 0; i < s->lease_cap; i++) {
		struct xs_lease_rec *r = &s->leases[i];
		if (r->id)
			continue;
		r->id = ++s->next_lease_id;
		r->slot = (uint32_t)slot;
		r->gen = sl->gen;
		r->owner = owner;
		sl->leases++;
		xs_slot_refresh_state(sl);
		l->id = r->id;
		l->slot = (uint32_t)slot;
		l->gen = sl->gen;
		l->layer = (uint32_t)sl->key / s->experts;
		l->expert = (uint32_t)sl->key % s->experts;
		l->record = sl->buf + sl->rec_off;
		l->bytes = s->record_bytes;
		s->st.leases_taken++;
		return HB_OK;
	}
	s->st.lease_refusals++;
	return hb_error_set(err, HB_ERR_UNSUPPORTED, "expert_cache",
			    "%u leases are held: release some before taking more", s->lease_cap);
}

bool xs_leases_of_others(struct hb_xs *s, uint64_t owner)
{
	for (uint32_t i = 0; i < s->lease_cap; i++)
		if (s->leases[i].id && s->leases[i].owner != owner)
			return true;
	return false;
}

int hb_xs_release(struct hb_xs *s, struct hb_xs_lease *l, struct hb_error *err)
{
	int rc = HB_OK;

	pthread_mutex_lock(&s->mu);
	for (uint32_t i = 0; l->id && i < s->lease_cap; i++) {
		struct xs_lease_rec *r = &s->leases[i];
		struct xs_slot *sl;
		if (r->id != l->id)
			continue;
		sl = &s->slots[r->slot];
		/* a leased slot is never freed, so its generation cannot move */
		if (sl->gen != r->gen || !sl->leases) {
			rc = hb_error_set(err, HB_ERR_INTERNAL, "expert_cache",
					  "lease %" PRIu64 " names slot %u of another generation", l->id, r->slot);
			goto out;
		}
		sl->leases--;
		xs_slot_refresh_state(sl);
		r->id = 0;
		l->id = 0;
		s->st.leases_released++;
		pthread_cond_broadcast(&s->done_cv);
		goto out;
	}
	rc = hb_error_set(err, HB_ERR_INVALID, "expert_cache",
			  "lease %" PRIu64 " is not held (released already)", l->id);
out:
	pthread_mutex_unlock(&s->mu);
	return rc;
}
