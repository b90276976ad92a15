/*
 * Unit tests: the streaming engine's scheduler (libkern/stream).
 *
 * A replayed schedule proves that P1/P2 reads never delay a P0: the test
 * is the device (a caller-driven engine, reads of fixed virtual duration),
 * runs the same P0 arrivals with and without a flood of predictions, and
 * requires every P0 to start at the same step in both; the same schedule
 * with no depth reserved for P0 delays some, so the comparison can fail.
 * Then: random completion orders under tiny budgets deliver exactly the
 * file's bytes; cancellation releases a slot exactly once; a cancelled or
 * stale read never publishes into a slot; promotion; real threads.
 */
#include "hb_base.h"
#include "harness.h"
#include "stream/hb_stream.h"
#include "stream/hb_stream_test.h"
#include "stream_fix.h"

static bool same_record(const struct hb_xs_source *src, const struct hb_xs_lease *l)
{
	uint8_t *want = sfix_record(src, l->layer, l->expert);
	bool ok = want && l->record && l->bytes == src->layout.record_bytes &&
		  !memcmp(want, l->record, (size_t)l->bytes);

	free(want);
	return ok;
}

/* ------------------------------------------------------------ schedule replay */

#define STEPS 120
#define NP0 20
#define DEPTH 4

/* what the observer sees: the queue discipline, checked at every dispatch */
struct watch {
	int p0_queued, low_inflight, violations, low_dispatches;
	unsigned reserved;
};

static void watch_events(void *ctx, enum hb_xs_event ev, const struct hb_xs_ticket *t)
{
	struct watch *w = ctx;

	if (ev == HB_XS_EV_ISSUE && t->prio == HB_XS_P0)
		w->p0_queued++;
	if (ev == HB_XS_EV_DISPATCH) {
		if (t->prio == HB_XS_P0) {
			w->p0_queued--;
			return;
		}
		w->low_dispatches++;
		if (w->p0_queued > 0)
			w->violations++; /* a prediction started while a P0 waited */
		if (++w->low_inflight > DEPTH - (int)w->reserved)
			w->violations++;
	}
	if (ev == HB_XS_EV_COMPLETE && t->prio != HB_XS_P0)
		w->low_inflight--;
}

struct flight {
	uint64_t id;
	int finish;
};

/*
 * The schedule: a P0 of one expert every 3 steps (layers 0-1, each read 4
 * steps long, so at most 2 P0 in flight: within a reserve of 2), and from
 * step 0 to 59 three predictions a step (one P1, two P2, layers 2-3, each
 * read 5 steps long: enough to fill every reader all the time).  p0_start
 * receives the step each P0 started.
 */
static void replay(const struct hb_xs_source *src, unsigned reserved, bool predictions, int *p0_start,
		   struct watch *w)
{
	struct hb_xs_config c;
	struct hb_xs *s;
	struct flight fl[DEPTH];
	size_t nfl = 0;
	struct hb_xs_route r[NP0];
	struct hb_xs_want wants[NP0];
	bool open_route[NP0] = {false};
	struct hb_xs_stats st;

	memset(w, 0, sizeof(*w));
	w->reserved = reserved;
	sfix_config(&c, src, 24);
	c.depth = DEPTH;
	c.reserved_p0 = reserved;
	c.reserve_slots = 4;
	c.observe = watch_events;
	c.observe_ctx = w;
	s = sfix_open(src, &c);
	for (int i = 0; i < NP0; i++)
		p0_start[i] = -1;
	for (int t = 0; t < STEPS; t++) {
		struct hb_xs_ticket tk;
		/* 1. reads that finish now, then the P0s they made ready */
		for (size_t i = 0; i < nfl;)
			if (fl[i].finish == t) {
				CHECK_EQ_INT(hb_xs_test_complete(s, fl[i].id), HB_OK);
				fl[i] = fl[--nfl];
			} else {
				i++;
			}
		for (int i = 0; i < NP0; i++) {
			struct hb_xs_lease l;
			size_t idx;
			if (!open_route[i] || wants[i].state != HB_XS_W_READY)
				continue;
			CHECK_EQ_INT(hb_xs_route_next(s, &r[i], &idx, &l, NULL), HB_OK);
			CHECK(same_record(src, &l));
			CHECK_EQ_INT(hb_xs_release(s, &l, NULL), HB_OK);
			CHECK_EQ_INT(hb_xs_route_next(s, &r[i], &idx, &l, NULL), HB_XS_DONE);
			hb_xs_route_end(s, &r[i]);
			open_route[i] = false;
		}
		/* 2. arrivals */
		if (t % 3 == 0 && t / 3 < NP0) {
			int i = t / 3;
			uint32_t e = (uint32_t)i / 2;
			hb_xs_route_init(&r[i], &wants[i], 1);
			CHECK_EQ_INT(hb_xs_route_begin(s, &r[i], (uint32_t)i % 2, &e, 1, NULL), HB_OK);
			CHECK_EQ_INT(wants[i].how, HB_XS_MISS);
			open_route[i] = true;
		}
		for (int q = 0; predictions && t < 60 && q < 3; q++) {
			int j = (3 * t + q) % 32;
			struct hb_xs_hint h = {.layer = 2 + (uint32_t)j / 16, .expert = (uint32_t)j % 16,
					       .prio = q ? HB_XS_P2 : HB_XS_P1, .confidence = 0.5f};
			CHECK(hb_xs_prefetch(s, &h, NULL, NULL) >= 0);
		}
		/* 3. free readers take what the scheduler gives them */
		while (nfl < DEPTH && hb_xs_test_dispatch(s, &tk) == 0) {
			fl[nfl].id = tk.id;
			fl[nfl].finish = t + (tk.prio == HB_XS_P0 ? 4 : 5);
			nfl++;
			if (tk.prio == HB_XS_P0)
				p0_start[(tk.expert * 2) + tk.layer] = t;
		}
		CHECK(nfl <= DEPTH);
	}
	for (int i = 0; i < NP0; i++)
		CHECK(!open_route[i]);
	hb_xs_stats_get(s, &st);
	CHECK_EQ_U64(st.slot_waits, 0);
	CHECK_EQ_U64(hb_xs_test_audit(s), 0);
	hb_xs_close(s);
}

static void p0_never_waits_behind_predictions(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	int alone[NP0], flooded[NP0], unreserved[NP0];
	struct watch w0, w1, w2;
	int delayed = 0;

	sfix_geometry_aligned(&g, 4, 16);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	replay(&src, 2, false, alone, &w0);
	replay(&src, 2, true, flooded, &w1);
	replay(&src, 0, true, unreserved, &w2);
	for (int i = 0; i < NP0; i++) {
		/* alone, every P0 starts on arrival; with the flood, the same */
		CHECK_EQ_INT(alone[i], 3 * i);
		CHECK_EQ_INT(flooded[i], alone[i]);
		delayed += unreserved[i] > alone[i];
	}
	CHECK_EQ_INT(w1.violations, 0);
	/* the flood really ran beside the P0s */
	CHECK(w1.low_dispatches >= 40);
	/* without the reserve the same flood does delay P0: the comparison
	 * above is one that can fail */
	CHECK(delayed > 0);
	CHECK(w2.low_dispatches >= 40);
	hb_xs_source_release(&src);
}

static void queued_p0_jumps_the_queue(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_ticket t;
	struct hb_xs_route r;
	struct hb_xs_want w;
	struct hb_xs *s;
	unsigned q[3];
	uint32_t e = 9;

	sfix_geometry_aligned(&g, 2, 12);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	sfix_config(&c, &src, 12);
	c.depth = 2;
	c.reserved_p0 = 1;
	s = sfix_open(&src, &c);
	for (uint32_t i = 0; i < 5; i++) {
		struct hb_xs_hint h = {.layer = 1, .expert = i, .prio = HB_XS_P2, .confidence = 1};
		CHECK_EQ_INT(hb_xs_prefetch(s, &h, NULL, NULL), HB_XS_PF_ISSUED);
	}
	CHECK_EQ_INT(hb_xs_test_dispatch(s, &t), 0);
	CHECK_EQ_INT(t.prio, HB_XS_P2);
	/* the second reader is P0's: no prediction may take it */
	CHECK_EQ_INT(hb_xs_test_dispatch(s, &t), 1);
	hb_xs_route_init(&r, &w, 1);
	CHECK_EQ_INT(hb_xs_route_begin(s, &r, 0, &e, 1, NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_test_dispatch(s, &t), 0);
	CHECK_EQ_INT(t.prio, HB_XS_P0);
	CHECK_EQ_INT(t.layer, 0);
	CHECK_EQ_INT(t.expert, 9);
	CHECK(t.exact);
	hb_xs_test_queued(s, q);
	CHECK_EQ_INT(q[0], 0);
	CHECK_EQ_INT(q[2], 4);
	hb_xs_route_end(s, &r);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

static void predictions_leave_the_p0_reserve(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_lease a, b;
	struct hb_xs_stats st;
	struct hb_xs *s;
	struct hb_xs_hint h = {.layer = 1, .expert = 0, .prio = HB_XS_P1, .confidence = 0.9f};

	sfix_geometry_aligned(&g, 2, 8);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	sfix_config(&c, &src, 4);
	c.reserve_slots = 2;
	s = sfix_open(&src, &c);
	/* two slots leased: the other two are P0's reserve */
	CHECK_EQ_INT(hb_xs_acquire(s, 0, 0, &a, NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_acquire(s, 0, 1, &b, NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_prefetch(s, &h, NULL, NULL), HB_XS_PF_REJECTED);
	CHECK_EQ_INT(hb_xs_test_slot_of(s, 1, 0), -1);
	/* one released: one slot above the reserve, one prediction */
	CHECK_EQ_INT(hb_xs_release(s, &a, NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_prefetch(s, &h, NULL, NULL), HB_XS_PF_ISSUED);
	h.expert = 1;
	{
		struct hb_xs_ticket t;
		CHECK_EQ_INT(hb_xs_test_dispatch(s, &t), 0);
		CHECK_EQ_INT(t.expert, 0);
	}
	CHECK_EQ_INT(hb_xs_prefetch(s, &h, NULL, NULL), HB_XS_PF_REJECTED);
	hb_xs_stats_get(s, &st);
	CHECK_EQ_U64(st.prefetch_rejected, 2);
	/* an exact want still gets a slot at once */
	CHECK_EQ_INT(hb_xs_acquire(s, 0, 2, &a, NULL), HB_OK);
	CHECK(same_record(&src, &a));
	CHECK_EQ_INT(hb_xs_release(s, &a, NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_release(s, &b, NULL), HB_OK);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

/* ------------------------------------------------------------ completion orders */

static uint64_t rng_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Routes of up to 6 experts through 3 slots, completions in the order the
 * seed chooses (0: oldest first), predictions in between; returns a
 * signature of the arrival orders. */
static uint64_t run_orders(const struct hb_xs_source *src, uint64_t seed)
{
	struct hb_xs_config c;
	struct hb_xs_stats st;
	struct hb_xs *s;
	uint64_t x = 88172645463325252ull, sig = 1469598103934665603ull;

	sfix_config(&c, src, 3);
	c.reserve_slots = 1;
	s = sfix_open(src, &c);
	if (seed)
		hb_xs_test_random_order(s, seed);
	for (int k = 0; k < 12; k++) {
		uint32_t ex[6], n = 1 + (uint32_t)(rng_next(&x) % 6), layer = (uint32_t)k % 3;
		struct hb_xs_want w[6];
		struct hb_xs_route r;
		struct hb_xs_lease l;
		bool got[6] = {false};
		size_t idx, delivered = 0;
		int rc;
		for (uint32_t i = 0; i < n; i++) {
			bool dup;
			do {
				ex[i] = (uint32_t)(rng_next(&x) % src->layout.expert_count);
				dup = false;
				for (uint32_t j = 0; j < i; j++)
					dup |= ex[j] == ex[i];
			} while (dup);
		}
		/* a prediction for one of them, and one for another layer */
		{
			struct hb_xs_hint h = {.layer = layer, .expert = ex[n - 1], .prio = HB_XS_P1, .confidence = 0.7f};
			CHECK(hb_xs_prefetch(s, &h, NULL, NULL) >= 0);
			h.layer = (layer + 1) % 3;
			h.prio = HB_XS_P2;
			CHECK(hb_xs_prefetch(s, &h, NULL, NULL) >= 0);
		}
		hb_xs_route_init(&r, w, 6);
		CHECK_EQ_INT(hb_xs_route_begin(s, &r, layer, ex, n, NULL), HB_OK);
		while ((rc = hb_xs_route_next(s, &r, &idx, &l, NULL)) == HB_OK) {
			CHECK(idx < n && !got[idx]);
			got[idx] = true;
			CHECK_EQ_INT(l.layer, layer);
			CHECK_EQ_INT(l.expert, ex[idx]);
			CHECK(same_record(src, &l));
			CHECK_EQ_INT(hb_xs_release(s, &l, NULL), HB_OK);
			sig = (sig ^ (idx + 1)) * 1099511628211ull;
			delivered++;
		}
		CHECK_EQ_INT(rc, HB_XS_DONE);
		CHECK_EQ_U64(delivered, n);
		hb_xs_route_end(s, &r);
		CHECK_EQ_U64(hb_xs_test_audit(s), 0);
	}
	hb_xs_stats_get(s, &st);
	CHECK(st.resident_bytes <= c.budget_bytes);
	CHECK_EQ_U64(st.leases_taken, st.leases_released);
	hb_xs_close(s);
	return sig;
}

static void random_completion_orders_deliver_the_files_bytes(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	uint64_t fifo, sigs[12];
	int differ = 0;

	/* records of 2,304 bytes that share and straddle 4096-byte blocks */
	sfix_geometry_unaligned(&g, 3, 12);
	CHECK_EQ_INT(sfix_build("u.bin", 4096, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	fifo = run_orders(&src, 0);
	for (uint64_t seed = 1; seed <= 12; seed++) {
		sigs[seed - 1] = run_orders(&src, seed * 7919);
		differ += sigs[seed - 1] != fifo;
	}
	/* the orders really differed, so the identity above was tested */
	CHECK(differ > 0);
	hb_xs_source_release(&src);
}

static void budget_smaller_than_held_leases_is_refused(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_route r;
	struct hb_xs_want w[3];
	struct hb_xs_lease l[3];
	struct hb_error err;
	struct hb_xs *s;
	uint32_t ex[3] = {0, 1, 2};
	size_t idx;

	sfix_geometry_aligned(&g, 1, 4);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	/* with worker threads the waiter must see it too, not wait forever */
	sfix_config(&c, &src, 2);
	c.threads = 2;
	c.depth = 2;
	s = sfix_open(&src, &c);
	hb_xs_route_init(&r, w, 3);
	CHECK_EQ_INT(hb_xs_route_begin(s, &r, 0, ex, 3, NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l[0], NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l[1], NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l[2], &err), HB_ERR_UNSUPPORTED);
	CHECK_STR(err.field, "expert_cache");
	CHECK_EQ_INT(hb_xs_release(s, &l[1], NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l[2], NULL), HB_OK);
	CHECK(same_record(&src, &l[2]));
	CHECK_EQ_INT(hb_xs_release(s, &l[0], NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_release(s, &l[2], NULL), HB_OK);
	hb_xs_route_end(s, &r);
	hb_xs_close(s);

	sfix_config(&c, &src, 2);
	s = sfix_open(&src, &c);
	hb_xs_route_init(&r, w, 3);
	CHECK_EQ_INT(hb_xs_route_begin(s, &r, 0, ex, 3, NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l[0], NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l[1], NULL), HB_OK);
	/* both slots leased by this caller: waiting would wait for itself */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l[2], &err), HB_ERR_UNSUPPORTED);
	CHECK_STR(err.field, "expert_cache");
	CHECK_EQ_INT(hb_xs_release(s, &l[0], NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l[2], NULL), HB_OK);
	CHECK(same_record(&src, &l[2]));
	CHECK_EQ_INT(hb_xs_release(s, &l[1], NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_release(s, &l[2], NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l[0], NULL), HB_XS_DONE);
	hb_xs_route_end(s, &r);
	/* bad routes: duplicate, out of range, too many */
	hb_xs_route_init(&r, w, 3);
	ex[1] = 0;
	CHECK_EQ_INT(hb_xs_route_begin(s, &r, 0, ex, 2, NULL), HB_ERR_INVALID);
	ex[1] = 4;
	CHECK_EQ_INT(hb_xs_route_begin(s, &r, 0, ex, 2, NULL), HB_ERR_INVALID);
	ex[1] = 1;
	CHECK_EQ_INT(hb_xs_route_begin(s, &r, 1, ex, 2, NULL), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_xs_route_begin(s, &r, 0, ex, 4, NULL), HB_ERR_INVALID);
	CHECK(!r.active);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

/* ------------------------------------------------------------ cancellation */

static void cancel_queued_releases_its_slot_once(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_stats a, b;
	struct hb_xs_handle h;
	struct hb_xs_slot_info in;
	struct hb_xs_ticket t;
	struct hb_error err;
	struct hb_xs *s;
	struct hb_xs_hint hint = {.layer = 0, .expert = 3, .prio = HB_XS_P2, .confidence = 0.3f};
	int32_t slot;

	sfix_geometry_aligned(&g, 1, 6);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	sfix_config(&c, &src, 3);
	c.reserve_slots = 0;
	s = sfix_open(&src, &c);
	CHECK_EQ_INT(hb_xs_prefetch(s, &hint, &h, NULL), HB_XS_PF_ISSUED);
	slot = hb_xs_test_slot_of(s, 0, 3);
	CHECK(slot >= 0);
	hb_xs_stats_get(s, &a);
	CHECK_EQ_INT(hb_xs_cancel(s, &h, NULL), HB_OK);
	hb_xs_stats_get(s, &b);
	CHECK_EQ_U64(b.slot_releases, a.slot_releases + 1);
	CHECK_EQ_U64(b.cancelled_queued, 1);
	CHECK_EQ_INT(hb_xs_slot_get(s, (uint32_t)slot, &in), HB_OK);
	CHECK_EQ_INT(in.state, HB_XS_SLOT_FREE);
	CHECK_EQ_INT(hb_xs_test_slot_of(s, 0, 3), -1);
	/* again: refused, and nothing is released twice */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_xs_cancel(s, &h, &err), HB_ERR_INVALID);
	CHECK_STR(err.field, "expert_cache.ticket");
	hb_xs_stats_get(s, &a);
	CHECK_EQ_U64(a.slot_releases, b.slot_releases);
	/* it is never read */
	CHECK_EQ_INT(hb_xs_test_dispatch(s, &t), 1);
	/* a ticket an exact want waits on cannot be cancelled */
	{
		struct hb_xs_route r;
		struct hb_xs_want w;
		uint32_t e = 3;
		CHECK_EQ_INT(hb_xs_prefetch(s, &hint, &h, NULL), HB_XS_PF_ISSUED);
		hb_xs_route_init(&r, &w, 1);
		CHECK_EQ_INT(hb_xs_route_begin(s, &r, 0, &e, 1, NULL), HB_OK);
		CHECK_EQ_INT(w.how, HB_XS_JOINED);
		CHECK_EQ_INT(hb_xs_cancel(s, &h, NULL), HB_ERR_INVALID);
		hb_xs_route_end(s, &r);
	}
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

static void cancel_in_flight_drains_and_never_publishes(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_stats st;
	struct hb_xs_handle h;
	struct hb_xs_slot_info in;
	struct hb_xs_ticket t, t2;
	struct hb_xs_route r;
	struct hb_xs_want w;
	struct hb_xs_lease l;
	struct hb_xs *s;
	struct hb_xs_hint hint = {.layer = 0, .expert = 1, .prio = HB_XS_P1, .confidence = 0.9f};
	uint32_t e = 2;
	size_t idx;
	uint64_t releases;

	sfix_geometry_aligned(&g, 1, 4);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	sfix_config(&c, &src, 1);
	c.reserve_slots = 0;
	s = sfix_open(&src, &c);
	CHECK_EQ_INT(hb_xs_prefetch(s, &hint, &h, NULL), HB_XS_PF_ISSUED);
	CHECK_EQ_INT(hb_xs_test_dispatch(s, &t), 0);
	CHECK_EQ_INT(hb_xs_cancel(s, &h, NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_slot_get(s, t.slot, &in), HB_OK);
	CHECK_EQ_INT(in.state, HB_XS_SLOT_DRAINING);
	CHECK_EQ_INT(hb_xs_test_slot_of(s, 0, 1), -1);
	CHECK_EQ_INT(hb_xs_cancel(s, &h, NULL), HB_ERR_INVALID);
	hb_xs_stats_get(s, &st);
	releases = st.slot_releases;
	/* the only slot drains: an exact want must wait, not take it */
	hb_xs_route_init(&r, &w, 1);
	CHECK_EQ_INT(hb_xs_route_begin(s, &r, 0, &e, 1, NULL), HB_OK);
	CHECK_EQ_INT(w.state, HB_XS_W_SLOT);
	CHECK_EQ_INT(hb_xs_test_dispatch(s, &t2), 1);
	/* the read ends: nothing published, the slot released once */
	CHECK_EQ_INT(hb_xs_test_complete(s, t.id), HB_OK);
	CHECK_EQ_INT(hb_xs_slot_get(s, t.slot, &in), HB_OK);
	CHECK_EQ_INT(in.state, HB_XS_SLOT_FREE);
	CHECK_EQ_INT(hb_xs_test_slot_of(s, 0, 1), -1);
	hb_xs_stats_get(s, &st);
	CHECK_EQ_U64(st.slot_releases, releases + 1);
	CHECK_EQ_U64(st.cancelled_inflight, 1);
	CHECK_EQ_U64(st.stale_discards, 1);
	CHECK_EQ_U64(st.bytes_rejected, 12288);
	/* now the want gets the slot and the right bytes */
	CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l, NULL), HB_OK);
	CHECK(same_record(&src, &l));
	CHECK_EQ_INT(l.expert, 2);
	CHECK_EQ_INT(hb_xs_release(s, &l, NULL), HB_OK);
	hb_xs_route_end(s, &r);
	CHECK_EQ_U64(hb_xs_test_audit(s), 0);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

static void stale_completion_never_publishes(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_stats st;
	struct hb_xs_ticket t;
	struct hb_xs_slot_info in;
	struct hb_xs_lease l;
	struct hb_xs *s;
	struct hb_xs_hint hint = {.layer = 0, .expert = 0, .prio = HB_XS_P2, .confidence = 0.5f};

	sfix_geometry_aligned(&g, 1, 4);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	sfix_config(&c, &src, 2);
	c.reserve_slots = 0;
	s = sfix_open(&src, &c);
	CHECK_EQ_INT(hb_xs_prefetch(s, &hint, NULL, NULL), HB_XS_PF_ISSUED);
	CHECK_EQ_INT(hb_xs_test_dispatch(s, &t), 0);
	/* the completion finds its slot at another generation: discarded */
	CHECK_EQ_INT(hb_xs_test_complete_stale(s, t.id), 1);
	CHECK_EQ_INT(hb_xs_test_complete_stale(s, t.id), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_xs_slot_get(s, t.slot, &in), HB_OK);
	CHECK(in.state != HB_XS_SLOT_VALID && in.state != HB_XS_SLOT_LEASED);
	CHECK_EQ_INT(hb_xs_test_slot_of(s, 0, 0), -1);
	hb_xs_stats_get(s, &st);
	CHECK_EQ_U64(st.stale_discards, 1);
	CHECK_EQ_U64(st.completed, 0);
	/* the same record asked for exactly is read again, correctly */
	CHECK_EQ_INT(hb_xs_acquire(s, 0, 0, &l, NULL), HB_OK);
	CHECK(same_record(&src, &l));
	CHECK_EQ_INT(hb_xs_release(s, &l, NULL), HB_OK);
	hb_xs_stats_get(s, &st);
	CHECK_EQ_U64(st.misses, 1);
	CHECK_EQ_U64(hb_xs_test_audit(s), 0);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

static void cancel_owner_cancels_older_generations(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_route r;
	struct hb_xs_want w;
	struct hb_xs *s;
	uint32_t e = 5;

	sfix_geometry_aligned(&g, 1, 8);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	sfix_config(&c, &src, 8);
	c.reserve_slots = 0;
	s = sfix_open(&src, &c);
	for (uint32_t i = 0; i < 6; i++) {
		/* owner 7: generations 1, 2, 3, 1 (expert 5: joined below) ; owner 8: 1, 1 */
		static const uint64_t owner[6] = {7, 7, 7, 7, 8, 8};
		static const uint64_t gen[6] = {1, 2, 3, 1, 1, 1};
		struct hb_xs_hint h = {.layer = 0, .expert = i == 3 ? 5 : i, .prio = HB_XS_P2,
				       .confidence = 0.5f, .owner = owner[i], .owner_gen = gen[i]};
		if (i == 5)
			h.expert = 6;
		CHECK_EQ_INT(hb_xs_prefetch(s, &h, NULL, NULL), HB_XS_PF_ISSUED);
	}
	/* an exact want joins expert 5: it is exact now, and stays */
	hb_xs_route_init(&r, &w, 1);
	CHECK_EQ_INT(hb_xs_route_begin(s, &r, 0, &e, 1, NULL), HB_OK);
	CHECK_EQ_U64(hb_xs_cancel_owner(s, 7, 3), 2);
	CHECK_EQ_INT(hb_xs_test_slot_of(s, 0, 0), -1);
	CHECK_EQ_INT(hb_xs_test_slot_of(s, 0, 1), -1);
	CHECK(hb_xs_test_slot_of(s, 0, 2) >= 0);
	CHECK(hb_xs_test_slot_of(s, 0, 5) >= 0);
	CHECK(hb_xs_test_slot_of(s, 0, 4) >= 0);
	CHECK(hb_xs_test_slot_of(s, 0, 6) >= 0);
	CHECK_EQ_U64(hb_xs_cancel_owner(s, 7, 3), 0);
	hb_xs_route_end(s, &r);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

static void exact_want_promotes_a_queued_prediction(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_stats st;
	struct hb_xs_ticket t;
	struct hb_xs_route r;
	struct hb_xs_want w;
	struct hb_xs_lease l;
	struct hb_xs *s;
	uint32_t e = 4;
	size_t idx;

	sfix_geometry_aligned(&g, 1, 8);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	sfix_config(&c, &src, 8);
	c.depth = 2;
	c.reserved_p0 = 1;
	c.reserve_slots = 0;
	s = sfix_open(&src, &c);
	for (uint32_t i = 0; i < 5; i++) {
		struct hb_xs_hint h = {.layer = 0, .expert = i, .prio = HB_XS_P2, .confidence = 0.2f};
		CHECK_EQ_INT(hb_xs_prefetch(s, &h, NULL, NULL), HB_XS_PF_ISSUED);
	}
	hb_xs_route_init(&r, &w, 1);
	CHECK_EQ_INT(hb_xs_route_begin(s, &r, 0, &e, 1, NULL), HB_OK);
	CHECK_EQ_INT(w.how, HB_XS_JOINED);
	/* issued last, dispatched first, as P0, still counted as predicted */
	CHECK_EQ_INT(hb_xs_test_dispatch(s, &t), 0);
	CHECK_EQ_INT(t.expert, 4);
	CHECK_EQ_INT(t.prio, HB_XS_P0);
	CHECK_EQ_INT(t.prio_issued, HB_XS_P2);
	CHECK(!t.exact);
	CHECK_EQ_INT(hb_xs_test_complete(s, t.id), HB_OK);
	CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l, NULL), HB_OK);
	CHECK(same_record(&src, &l));
	CHECK_EQ_INT(hb_xs_release(s, &l, NULL), HB_OK);
	hb_xs_route_end(s, &r);
	hb_xs_stats_get(s, &st);
	CHECK_EQ_U64(st.promoted, 1);
	CHECK_EQ_U64(st.joined, 1);
	CHECK_EQ_U64(st.bytes_useful, 12288);
	CHECK_EQ_U64(st.bytes_exact, 0);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

/* ------------------------------------------------------------ threads */

static void worker_threads_deliver_the_files_bytes(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_stats st;
	struct hb_xs *s;
	struct hb_error err;
	uint64_t x = 0x2545f4914f6cdd1dull;
	char direct_mode[96];

	sfix_geometry_unaligned(&g, 4, 16);
	CHECK_EQ_INT(sfix_build("u.bin", 8192, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	sfix_config(&c, &src, 5);
	c.threads = 3;
	c.depth = 3;
	s = sfix_open(&src, &c);
	/* on this machine's file system O_DIRECT is taken or refused at open */
	snprintf(direct_mode, sizeof(direct_mode), "%s", hb_xs_io_mode(s));
	CHECK(!strcmp(direct_mode, "direct") ||
	      !strncmp(direct_mode, "buffered (O_DIRECT refused at open: ", 36));
	for (int k = 0; k < 40; k++) {
		uint32_t ex[5], n = 1 + (uint32_t)(rng_next(&x) % 5), layer = (uint32_t)(rng_next(&x) % 4);
		struct hb_xs_want w[5];
		struct hb_xs_route r;
		struct hb_xs_lease l;
		size_t idx, got = 0;
		int rc;
		for (uint32_t i = 0; i < n; i++)
			ex[i] = (uint32_t)((k * 5 + i * 3) % 16);
		for (uint32_t i = 0; i < 3; i++) {
			struct hb_xs_hint h = {.layer = (layer + 1) % 4, .expert = (uint32_t)(rng_next(&x) % 16),
					       .prio = i ? HB_XS_P2 : HB_XS_P1, .confidence = 0.5f};
			CHECK(hb_xs_prefetch(s, &h, NULL, NULL) >= 0);
		}
		hb_xs_set_position(s, (uint64_t)k, layer);
		hb_xs_route_init(&r, w, 5);
		CHECK_EQ_INT(hb_xs_route_begin(s, &r, layer, ex, n, NULL), HB_OK);
		while ((rc = hb_xs_route_next(s, &r, &idx, &l, NULL)) == HB_OK) {
			CHECK(same_record(&src, &l));
			CHECK_EQ_INT(hb_xs_release(s, &l, NULL), HB_OK);
			got++;
		}
		CHECK_EQ_INT(rc, HB_XS_DONE);
		CHECK_EQ_U64(got, n);
		hb_xs_route_end(s, &r);
	}
	CHECK_EQ_U64(hb_xs_test_audit(s), 0);
	hb_xs_stats_get(s, &st);
	CHECK(st.resident_bytes <= c.budget_bytes);
	CHECK_EQ_U64(st.leases_taken, st.leases_released);
	CHECK_EQ_U64(st.tokens, 40);
	hb_xs_close(s);

	/* buffered by configuration says so; O_DIRECT demanded agrees with
	 * what the automatic mode found */
	c.direct = HB_XS_DIRECT_OFF;
	s = sfix_open(&src, &c);
	CHECK_STR(hb_xs_io_mode(s), "buffered (configured)");
	hb_xs_close(s);
	c.direct = HB_XS_DIRECT_ON;
	hb_error_clear(&err);
	s = NULL;
	if (!strcmp(direct_mode, "direct")) {
		CHECK_EQ_INT(hb_xs_open(&src, &c, &s, &err), HB_OK);
		CHECK_STR(hb_xs_io_mode(s), "direct");
	} else {
		CHECK_EQ_INT(hb_xs_open(&src, &c, &s, &err), HB_ERR_IO);
	}
	hb_xs_close(s);
	/* configurations that cannot hold are refused */
	c.direct = HB_XS_DIRECT_AUTO;
	c.depth = 4; /* more than 3 threads */
	CHECK_EQ_INT(hb_xs_open(&src, &c, &s, NULL), HB_ERR_INVALID);
	c.depth = 3;
	c.reserved_p0 = 3;
	CHECK_EQ_INT(hb_xs_open(&src, &c, &s, NULL), HB_ERR_INVALID);
	hb_xs_source_release(&src);
}

HB_TEST_MAIN(T(p0_never_waits_behind_predictions), T(queued_p0_jumps_the_queue), T(predictions_leave_the_p0_reserve),
	     T(random_completion_orders_deliver_the_files_bytes), T(budget_smaller_than_held_leases_is_refused),
	     T(cancel_queued_releases_its_slot_once), T(cancel_in_flight_drains_and_never_publishes),
	     T(stale_completion_never_publishes), T(cancel_owner_cancels_older_generations),
	     T(exact_want_promotes_a_queued_prediction), T(worker_threads_deliver_the_files_bytes))
