/*
 * Unit tests: the streaming engine's record cache (libkern/stream): the
 * budget is exact under pressure, a lease is released exactly once and
 * pins its slot, LRU and the score policy evict what they say, --expert-cache
 * parses, and the AFN-019 metrics come out of the counters exactly as
 * defined (on a clock the test sets, so every value is known in advance).
 */
#include "hb_base.h"
#include "harness.h"
#include "stream/hb_stream.h"
#include "stream/hb_stream_test.h"
#include "stream_fix.h"

#include <math.h>

/* acquire (layer, expert), check its bytes against the file, release */
static void use(struct hb_xs *s, const struct hb_xs_source *src, uint32_t layer, uint32_t expert)
{
	struct hb_xs_lease l;
	uint8_t *want = sfix_record(src, layer, expert);

	CHECK(want != NULL);
	CHECK_EQ_INT(hb_xs_acquire(s, layer, expert, &l, NULL), HB_OK);
	CHECK(l.id != 0);
	CHECK(want && l.record && !memcmp(l.record, want, (size_t)l.bytes));
	CHECK_EQ_INT(hb_xs_release(s, &l, NULL), HB_OK);
	free(want);
}

static uint32_t held_slots(struct hb_xs *s)
{
	uint32_t n = 0;
	struct hb_xs_slot_info in;

	for (uint32_t i = 0; i < hb_xs_slots(s); i++) {
		CHECK_EQ_INT(hb_xs_slot_get(s, i, &in), HB_OK);
		n += in.state != HB_XS_SLOT_FREE;
	}
	return n;
}

static void budget_is_exact_under_pressure(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_stats st;
	struct hb_xs *s;
	struct hb_error err;
	uint64_t slot;

	sfix_geometry_aligned(&g, 3, 8);
	CHECK_EQ_INT(sfix_build("s.bin", 8192, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	slot = hb_xs_slot_bytes(&src);
	CHECK_EQ_U64(slot, 12288); /* aligned records: the slot is the record */
	sfix_config(&c, &src, 5);
	c.budget_bytes += slot - 1; /* a partial slot is not a slot */
	s = sfix_open(&src, &c);
	CHECK_EQ_U64(hb_xs_slots(s), 5);
	/* every record once, predictions flooding in between: never more than
	 * five slots hold anything, and their bytes never exceed the budget */
	for (uint32_t l = 0; l < 3; l++)
		for (uint32_t e = 0; e < 8; e++) {
			struct hb_xs_hint h = {.layer = (l + 1) % 3, .expert = 7 - e, .prio = HB_XS_P2,
					       .confidence = 0.5f};
			CHECK(hb_xs_prefetch(s, &h, NULL, NULL) >= 0);
			use(s, &src, l, e);
			CHECK(held_slots(s) <= 5);
			hb_xs_stats_get(s, &st);
			CHECK(st.resident_bytes <= c.budget_bytes);
		}
	hb_xs_stats_get(s, &st);
	CHECK_EQ_U64(st.resident_bytes, 5 * slot);
	CHECK_EQ_U64(st.slots, 5);
	CHECK(st.evictions >= 24 - 5);
	CHECK_EQ_U64(hb_xs_test_audit(s), 0);
	hb_xs_close(s);

	/* less than one slot is refused, naming the option */
	c.budget_bytes = slot - 1;
	hb_error_clear(&err);
	s = NULL;
	CHECK_EQ_INT(hb_xs_open(&src, &c, &s, &err), HB_ERR_INVALID);
	CHECK(s == NULL);
	CHECK_STR(err.field, "expert_cache");
	/* more than the store holds is capped at one slot per record */
	c.budget_bytes = 1000 * slot;
	s = sfix_open(&src, &c);
	CHECK_EQ_U64(hb_xs_slots(s), 24);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

static void unaligned_records_read_their_whole_span(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_stats st;
	struct hb_xs *s;

	sfix_geometry_unaligned(&g, 2, 9);
	CHECK_EQ_INT(sfix_build("u.bin", 4096, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	CHECK_EQ_U64(src.layout.record_bytes, 2304);
	/* a record of 2,304 bytes at any 256-byte phase fits two blocks */
	CHECK_EQ_U64(hb_xs_slot_bytes(&src), 8192);
	sfix_config(&c, &src, 2);
	s = sfix_open(&src, &c);
	for (uint32_t l = 0; l < 2; l++)
		for (uint32_t e = 0; e < 9; e++)
			use(s, &src, l, e);
	hb_xs_stats_get(s, &st);
	CHECK_EQ_U64(st.bytes_logical, 18 * 2304);
	CHECK(st.bytes_physical > st.bytes_logical);
	CHECK_EQ_U64(st.bytes_physical % 4096, 0);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

static void budget_parse(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_error err;
	uint64_t b = 0;
	bool all = false;

	sfix_geometry_aligned(&g, 2, 10);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	CHECK_EQ_INT(hb_xs_budget_parse("all", &src, &b, &all, NULL), HB_OK);
	CHECK(all);
	CHECK_EQ_U64(b, 20 * 12288);
	CHECK_EQ_INT(hb_xs_budget_parse("100%", &src, &b, &all, NULL), HB_OK);
	CHECK(!all);
	CHECK_EQ_U64(b, 20 * 12288);
	/* 25% of 20 records is 5; 12.5% is 2.5, rounded down to 2 slots */
	CHECK_EQ_INT(hb_xs_budget_parse("25%", &src, &b, &all, NULL), HB_OK);
	CHECK_EQ_U64(b, 5 * 12288);
	CHECK_EQ_INT(hb_xs_budget_parse("12.5%", &src, &b, &all, NULL), HB_OK);
	CHECK_EQ_U64(b, 2 * 12288);
	CHECK_EQ_INT(hb_xs_budget_parse("36864", &src, &b, &all, NULL), HB_OK);
	CHECK_EQ_U64(b, 3 * 12288);
	CHECK_EQ_INT(hb_xs_budget_parse("40K", &src, &b, &all, NULL), HB_OK);
	CHECK_EQ_U64(b, 3 * 12288);
	CHECK_EQ_INT(hb_xs_budget_parse("1MiB", &src, &b, &all, NULL), HB_OK);
	CHECK_EQ_U64(b, 20 * 12288); /* more than the store: all of it */
	const char *bad[] = {"0", "12287", "abc", "101%", "0%", "%", "-5", "5X", "nan%", ""};
	for (size_t i = 0; i < HB_ARRAY_LEN(bad); i++) {
		hb_error_clear(&err);
		CHECK(hb_xs_budget_parse(bad[i], &src, &b, &all, &err) < 0);
		CHECK_STR(err.field, "expert_cache");
	}
	hb_xs_source_release(&src);
}

static void lease_is_released_exactly_once(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_stats st;
	struct hb_xs_lease a, copy, b;
	struct hb_xs_slot_info in;
	struct hb_error err;
	struct hb_xs *s;
	uint8_t *want;

	sfix_geometry_aligned(&g, 2, 6);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	sfix_config(&c, &src, 2);
	s = sfix_open(&src, &c);
	CHECK_EQ_INT(hb_xs_acquire(s, 1, 4, &a, NULL), HB_OK);
	copy = a;
	CHECK_EQ_INT(hb_xs_slot_get(s, a.slot, &in), HB_OK);
	CHECK_EQ_INT(in.state, HB_XS_SLOT_LEASED);
	CHECK_EQ_INT(in.leases, 1);
	/* a leased slot is never the victim: with one other slot, three more
	 * records pass through it while (1, 4) stays */
	want = sfix_record(&src, 1, 4);
	for (uint32_t e = 0; e < 3; e++) {
		CHECK_EQ_INT(hb_xs_acquire(s, 0, e, &b, NULL), HB_OK);
		CHECK(b.slot != a.slot);
		CHECK_EQ_INT(hb_xs_release(s, &b, NULL), HB_OK);
	}
	CHECK(want && !memcmp(a.record, want, (size_t)a.bytes));
	free(want);
	CHECK_EQ_INT(hb_xs_release(s, &a, NULL), HB_OK);
	CHECK_EQ_U64(a.id, 0);
	/* again, and through a copy of the handle: refused, nothing changes */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_xs_release(s, &copy, &err), HB_ERR_INVALID);
	CHECK_STR(err.field, "expert_cache");
	CHECK_EQ_INT(hb_xs_release(s, &a, NULL), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_xs_slot_get(s, copy.slot, &in), HB_OK);
	CHECK_EQ_INT(in.state, HB_XS_SLOT_VALID);
	CHECK_EQ_INT(in.leases, 0);
	hb_xs_stats_get(s, &st);
	CHECK_EQ_U64(st.leases_taken, 4);
	CHECK_EQ_U64(st.leases_released, 4);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

/* which of the keys are resident */
static unsigned resident(struct hb_xs *s, uint32_t layer, uint32_t expert)
{
	return hb_xs_test_slot_of(s, layer, expert) >= 0;
}

static struct hb_xs *policy_engine(const struct hb_xs_source *src, enum hb_xs_policy p)
{
	struct hb_xs_config c;

	sfix_config(&c, src, 3);
	c.policy = p;
	return sfix_open(src, &c);
}

static void lru_and_score_evict_differently(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs *s;

	sfix_geometry_aligned(&g, 3, 8);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	/* frequency: A = (0,0) used on tokens 0, 1, 2; B = (0,1) on token 3,
	 * C = (0,2) on token 4; then D = (0,3) needs a slot on token 5.  LRU
	 * drops A (the oldest); the score keeps A (three uses, 2.52 after
	 * decay to token 5, against B's 0.92 and C's 0.96) and drops B. */
	for (int p = 0; p < 2; p++) {
		s = policy_engine(&src, p ? HB_XS_POLICY_SCORE : HB_XS_POLICY_LRU);
		for (uint64_t t = 0; t < 3; t++) {
			hb_xs_set_position(s, t, 0);
			use(s, &src, 0, 0);
		}
		hb_xs_set_position(s, 3, 0);
		use(s, &src, 0, 1);
		hb_xs_set_position(s, 4, 0);
		use(s, &src, 0, 2);
		hb_xs_set_position(s, 5, 0);
		use(s, &src, 0, 3);
		CHECK_EQ_INT(resident(s, 0, 0), p ? 1 : 0);
		CHECK_EQ_INT(resident(s, 0, 1), p ? 0 : 1);
		CHECK_EQ_INT(resident(s, 0, 2), 1);
		hb_xs_close(s);
	}
	/* layer distance: X = (1,5) and Y = (0,5) used once on the same token,
	 * X first; the pass is at layer 0, so layer 1 runs next and layer 0
	 * last.  LRU drops X; the score drops Y (weight 1/3 against 3/3). */
	for (int p = 0; p < 2; p++) {
		s = policy_engine(&src, p ? HB_XS_POLICY_SCORE : HB_XS_POLICY_LRU);
		hb_xs_set_position(s, 9, 0);
		use(s, &src, 1, 5);
		use(s, &src, 0, 5);
		use(s, &src, 2, 5);
		hb_xs_set_position(s, 9, 0);
		use(s, &src, 2, 6);
		CHECK_EQ_INT(resident(s, 1, 5), p ? 1 : 0);
		CHECK_EQ_INT(resident(s, 0, 5), p ? 0 : 1);
		hb_xs_close(s);
	}
	/* a pending prediction counts its confidence: P = (2,7) predicted with
	 * 0.9 for the current token outlives two records used once */
	s = policy_engine(&src, HB_XS_POLICY_SCORE);
	{
		struct hb_xs_hint h = {.layer = 2, .expert = 7, .prio = HB_XS_P1, .confidence = 0.9f,
				       .token_pos = 4};
		struct hb_xs_ticket t;
		hb_xs_set_position(s, 4, 1);
		CHECK_EQ_INT(hb_xs_prefetch(s, &h, NULL, NULL), HB_XS_PF_ISSUED);
		CHECK_EQ_INT(hb_xs_test_dispatch(s, &t), 0);
		CHECK_EQ_INT(hb_xs_test_complete(s, t.id), HB_OK);
		use(s, &src, 1, 0);
		use(s, &src, 1, 1);
		use(s, &src, 1, 2);
		CHECK_EQ_INT(resident(s, 2, 7), 1);
		CHECK_EQ_INT(resident(s, 1, 0), 0);
	}
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

static uint64_t fake_ns;
static uint64_t fake_clock(void *ctx)
{
	(void)ctx;
	return fake_ns;
}
/* a read takes 384 ns of the fake clock: the lower bound of its bucket */
static void advance_on_dispatch(void *ctx, enum hb_xs_event ev, const struct hb_xs_ticket *t)
{
	(void)ctx, (void)t;
	if (ev == HB_XS_EV_DISPATCH)
		fake_ns += 384;
}

static void metrics_follow_their_definitions(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_stats st;
	struct hb_xs_metrics m;
	struct hb_xs_ticket t;
	struct hb_xs_route r;
	struct hb_xs_want w[2];
	struct hb_xs_lease l;
	struct hb_xs *s;
	size_t idx;
	uint32_t ex[2] = {1, 2};
	cJSON *obj;

	sfix_geometry_aligned(&g, 2, 4);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	sfix_config(&c, &src, 8);
	c.observe = advance_on_dispatch;
	s = sfix_open(&src, &c);
	hb_xs_test_set_clock(s, fake_clock, NULL);
	/* a P1 for (0,1) issued at 1000 with deadline 5000, ready at 1384 */
	fake_ns = 1000;
	{
		struct hb_xs_hint h = {.layer = 0, .expert = 1, .prio = HB_XS_P1, .confidence = 0.8f,
				       .deadline_ns = 5000};
		CHECK_EQ_INT(hb_xs_prefetch(s, &h, NULL, NULL), HB_XS_PF_ISSUED);
	}
	CHECK_EQ_INT(hb_xs_test_dispatch(s, &t), 0);
	CHECK_EQ_INT(hb_xs_test_complete(s, t.id), HB_OK);
	/* at 2000 the router names (0,1), a hit, and (0,2), a miss */
	fake_ns = 2000;
	hb_xs_route_init(&r, w, 2);
	CHECK_EQ_INT(hb_xs_route_begin(s, &r, 0, ex, 2, NULL), HB_OK);
	CHECK_EQ_INT(w[0].how, HB_XS_HIT);
	CHECK_EQ_INT(w[1].how, HB_XS_MISS);
	CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l, NULL), HB_OK);
	CHECK_EQ_U64(idx, 0);
	CHECK_EQ_INT(hb_xs_release(s, &l, NULL), HB_OK);
	/* the miss is read inside the wait: 384 ns exposed */
	CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l, NULL), HB_OK);
	CHECK_EQ_U64(idx, 1);
	CHECK_EQ_INT(hb_xs_release(s, &l, NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l, NULL), HB_XS_DONE);
	hb_xs_route_end(s, &r);
	/* a P2 nobody uses */
	{
		struct hb_xs_hint h = {.layer = 1, .expert = 3, .prio = HB_XS_P2, .confidence = 0.1f};
		CHECK_EQ_INT(hb_xs_prefetch(s, &h, NULL, NULL), HB_XS_PF_ISSUED);
	}
	CHECK_EQ_INT(hb_xs_test_dispatch(s, &t), 0);
	CHECK_EQ_INT(hb_xs_test_complete(s, t.id), HB_OK);

	hb_xs_stats_get(s, &st);
	hb_xs_metrics_get(&st, &m);
	CHECK_EQ_U64(st.wants, 2);
	CHECK_EQ_U64(st.hits, 1);
	CHECK_EQ_U64(st.misses, 1);
	CHECK_EQ_U64(st.bytes_predicted, 2 * 12288);
	CHECK_EQ_U64(st.bytes_useful, 12288);
	CHECK_EQ_U64(st.bytes_exact, 12288);
	CHECK_EQ_U64(st.bytes_served, 2 * 12288);
	CHECK_EQ_U64(st.exact_io_ns, 2 * 384);
	CHECK_EQ_U64(st.exposed_ns, 384);
	CHECK(m.timely_recall == 0.5);
	CHECK(m.useful_prefetch_ratio == 0.5);
	CHECK(m.byte_amplification == 1.5);
	CHECK(m.hidden_fraction == 0.5);
	CHECK_EQ_U64(m.ready_p50_ns, 384);
	CHECK_EQ_U64(m.ready_p99_ns, 384);
	/* the P0's deadline is the moment the router named it: late by 384;
	 * the P1 had 5000 - 1384 of slack */
	CHECK_EQ_U64(st.deadlines, 2);
	CHECK_EQ_U64(st.late, 1);
	CHECK_EQ_INT(st.slack_min_ns, -384);
	CHECK_EQ_INT(st.slack_sum_ns, 5000 - 1384 - 384);
	CHECK(isnan(m.exposed_per_token_ns)); /* no token was marked */

	obj = cJSON_CreateObject();
	CHECK_EQ_INT(hb_xs_stats_json(&st, obj), HB_OK);
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(obj, "timely_recall")) == 0.5);
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(obj, "hidden_fraction")) == 0.5);
	CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(obj, "bytes_useful")) == 12288);
	CHECK(cJSON_IsNull(cJSON_GetObjectItem(obj, "exposed_per_token_ns")));
	cJSON_Delete(obj);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

static void histogram_quantiles(void)
{
	struct hb_xs_hist h;

	memset(&h, 0, sizeof(h));
	CHECK_EQ_U64(hb_xs_hist_quantile(&h, 0.5), 0);
	for (uint64_t v = 1; v <= 100; v++)
		hb_xs_hist_add(&h, v);
	/* 50 lies in [48, 52), 95 in [88, 96), 99 in [96, 104) */
	CHECK_EQ_U64(hb_xs_hist_quantile(&h, 0.50), 48);
	CHECK_EQ_U64(hb_xs_hist_quantile(&h, 0.95), 88);
	CHECK_EQ_U64(hb_xs_hist_quantile(&h, 0.99), 96);
	CHECK_EQ_U64(hb_xs_hist_quantile(&h, 1.0), 96);
	/* every bucket's lower bound is within 12.5% below its values */
	for (uint64_t v = 1; v < (1ull << 40); v = v * 3 + 1) {
		memset(&h, 0, sizeof(h));
		hb_xs_hist_add(&h, v);
		CHECK(hb_xs_hist_quantile(&h, 1.0) <= v);
		CHECK((double)hb_xs_hist_quantile(&h, 1.0) * 1.125 >= (double)v - 1e-9 * (double)v);
	}
	memset(&h, 0, sizeof(h));
	hb_xs_hist_add(&h, UINT64_MAX);
	CHECK_EQ_U64(hb_xs_hist_quantile(&h, 0.5), 15ull << 60);
}

HB_TEST_MAIN(T(budget_is_exact_under_pressure), T(unaligned_records_read_their_whole_span), T(budget_parse),
	     T(lease_is_released_exactly_once), T(lru_and_score_evict_differently),
	     T(metrics_follow_their_definitions), T(histogram_quantiles))
