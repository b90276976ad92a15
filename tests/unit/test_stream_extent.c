/*
 * Unit tests: prefill extent streaming (AFN-019 H5, libkern/stream/
 * hb_stream_extent.c).  The decision on constructed inputs at both sides
 * of the crossover and at it; extent windows deliver every record with
 * the bytes the file holds (aligned records and records that share
 * blocks; caller-driven oldest-first, a seeded random order, and I/O
 * workers), the ring counted in the budget, decode never reading an
 * extent; a budget too small for the ring reads records; and every fault
 * the seam injects into a window (EIO, a short read, a digest mismatch,
 * an allocation failure) fails the route with the window or the record
 * named, leaves no slot valid with wrong bytes, and the same route
 * succeeds once the fault is reset.
 */
#include "hb_base.h"
#include "harness.h"
#include "stream/hb_stream.h"
#include "stream/hb_stream_test.h"
#include "stream_fix.h"

#include <math.h>

static void decide_at_both_sides_of_the_crossover(void)
{
	/* 512 records of 3 MiB; records read at 1 GB/s, windows at 2 GB/s */
	const uint64_t rec = 3u << 20;
	struct hb_xs_extent_in in = {.mode = HB_XS_EXTENT_AUTO, .ring = true, .phase = HB_XS_PHASE_PREFILL,
				     .misses = 400, .miss_bytes = 400 * rec, .span_bytes = 512 * rec,
				     .record_bps = 1e9, .extent_bps = 2e9};
	struct hb_xs_extent_out out;

	/* 400 of 512: 1.26 s of records against 0.81 s of extent */
	hb_xs_extent_decide(&in, &out);
	CHECK(out.extent);
	CHECK_EQ_INT(out.why, HB_XS_WHY_CHEAPER);
	CHECK(fabs(out.record_s - 400.0 * rec / 1e9) < 1e-9);
	CHECK(fabs(out.extent_s - 512.0 * rec / 2e9) < 1e-9);
	/* 200 of 512 spread over the whole layer: 0.63 s against 0.81 s */
	in.misses = 200, in.miss_bytes = 200 * rec;
	hb_xs_extent_decide(&in, &out);
	CHECK(!out.extent);
	CHECK_EQ_INT(out.why, HB_XS_WHY_DEARER);
	/* exactly at the crossover (256 of 512 at half the rate): records */
	in.misses = 256, in.miss_bytes = 256 * rec;
	hb_xs_extent_decide(&in, &out);
	CHECK(!out.extent);
	CHECK_EQ_INT(out.why, HB_XS_WHY_DEARER);
	/* one record more: the extent */
	in.misses = 257, in.miss_bytes = 257 * rec;
	hb_xs_extent_decide(&in, &out);
	CHECK(out.extent);
	/* the same 200 misses, adjacent (span = their bytes): the extent */
	in.misses = 200, in.miss_bytes = in.span_bytes = 200 * rec;
	hb_xs_extent_decide(&in, &out);
	CHECK_EQ_INT(out.why, HB_XS_WHY_CHEAPER);
	/* equal rates: only a span without gaps is not dearer, and then
	 * not cheaper either (strictly less is required) */
	in.extent_bps = in.record_bps;
	hb_xs_extent_decide(&in, &out);
	CHECK_EQ_INT(out.why, HB_XS_WHY_DEARER);
	in.extent_bps = 2e9;
	/* a rate not measured (0, NaN, infinite): records, and why */
	double bad[] = {0, NAN, INFINITY, -1};
	for (size_t i = 0; i < HB_ARRAY_LEN(bad); i++) {
		in.record_bps = bad[i];
		hb_xs_extent_decide(&in, &out);
		CHECK(!out.extent);
		CHECK_EQ_INT(out.why, HB_XS_WHY_UNMEASURED);
		in.record_bps = 1e9;
		in.extent_bps = bad[i];
		hb_xs_extent_decide(&in, &out);
		CHECK_EQ_INT(out.why, HB_XS_WHY_UNMEASURED);
		in.extent_bps = 2e9;
	}
	/* the gates before the rates, in order */
	in.misses = 1, in.miss_bytes = in.span_bytes = rec;
	hb_xs_extent_decide(&in, &out);
	CHECK_EQ_INT(out.why, HB_XS_WHY_FEW);
	in.misses = 400, in.miss_bytes = 400 * rec, in.span_bytes = 512 * rec;
	in.mode = HB_XS_EXTENT_ALWAYS;
	in.record_bps = 1e12; /* always: whatever the rates say */
	hb_xs_extent_decide(&in, &out);
	CHECK(out.extent);
	CHECK_EQ_INT(out.why, HB_XS_WHY_ALWAYS);
	in.phase = HB_XS_PHASE_DECODE;
	hb_xs_extent_decide(&in, &out);
	CHECK(!out.extent);
	CHECK_EQ_INT(out.why, HB_XS_WHY_NOT_PREFILL);
	in.ring = false;
	hb_xs_extent_decide(&in, &out);
	CHECK_EQ_INT(out.why, HB_XS_WHY_NO_RING);
	in.mode = HB_XS_EXTENT_OFF;
	hb_xs_extent_decide(&in, &out);
	CHECK(!out.extent);
	CHECK_EQ_INT(out.why, HB_XS_WHY_OFF);
	/* the names the JSON and the man page use */
	CHECK_STR(hb_xs_extent_why_name(HB_XS_WHY_CHEAPER), "cheaper");
	CHECK_STR(hb_xs_extent_why_name(HB_XS_WHY_NO_RING), "no_ring");
	CHECK_STR(hb_xs_extent_name(HB_XS_EXTENT_AUTO), "auto");
	{
		enum hb_xs_extent e = HB_XS_EXTENT_OFF;
		struct hb_error err;
		CHECK_EQ_INT(hb_xs_extent_parse("always", &e, NULL), HB_OK);
		CHECK_EQ_INT(e, HB_XS_EXTENT_ALWAYS);
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_xs_extent_parse("sometimes", &e, &err), HB_ERR_INVALID);
		CHECK_STR(err.field, "prefill_extent");
	}
}

/* Run a route of n experts of layer to its end, checking every record's
 * bytes against the file; the route's first error (0 when all served). */
static int route_all(struct hb_xs *s, const struct hb_xs_source *src, uint8_t phase, uint32_t layer,
		     const uint32_t *ex, size_t n, struct hb_error *err, enum hb_xs_extent_why *why)
{
	struct hb_xs_want w[64];
	struct hb_xs_route r;
	struct hb_xs_lease l;
	size_t idx, got = 0;
	int rc;

	hb_xs_route_init(&r, w, HB_ARRAY_LEN(w));
	r.phase = phase;
	CHECK_EQ_INT(hb_xs_route_begin(s, &r, layer, ex, n, NULL), HB_OK);
	*why = r.extent.why;
	while (!(rc = hb_xs_route_next(s, &r, &idx, &l, err))) {
		uint8_t *want = sfix_record(src, layer, ex[idx]);
		CHECK(l.layer == layer && l.expert == ex[idx]);
		CHECK(want && !memcmp(want, l.record, (size_t)l.bytes));
		free(want);
		CHECK_EQ_INT(hb_xs_release(s, &l, NULL), HB_OK);
		got++;
	}
	hb_xs_route_end(s, &r);
	if (rc == HB_XS_DONE)
		CHECK_EQ_U64(got, n);
	return rc == HB_XS_DONE ? 0 : rc;
}

/* a dense prefill route with gaps, and a sparse decode one */
static const uint32_t dense[] = {0, 1, 2, 3, 5, 6, 7, 9, 10, 11, 12, 14, 15, 16, 17, 18, 20, 21, 23};
static const uint32_t sparse[] = {4, 13, 22};

static void windows_deliver_verified_records(void)
{
	for (int geo = 0; geo < 2; geo++)
		for (int ord = 0; ord < 3; ord++)
			for (int mode = 0; mode < 3; mode++) {
				struct hb_em_geometry g;
				struct hb_xs_source src;
				struct hb_xs_config c;
				struct hb_xs_stats st;
				enum hb_xs_extent_why why;
				struct hb_xs *s;
				uint64_t slot;

				if (geo)
					sfix_geometry_unaligned(&g, 2, 24);
				else
					sfix_geometry_aligned(&g, 2, 24);
				CHECK_EQ_INT(sfix_build("s.bin", 4096, &g, HB_EM_CODEC_BF16, &src), HB_OK);
				slot = hb_xs_slot_bytes(&src);
				/* 32 slots of budget: a ring of 2 x 8 slots, 16 slots */
				sfix_config(&c, &src, 32);
				c.extent = (enum hb_xs_extent)mode;
				if (ord == 2)
					c.threads = 2, c.depth = 2;
				s = sfix_open(&src, &c);
				if (!s)
					continue;
				if (ord == 1)
					hb_xs_test_random_order(s, 11 + (uint64_t)mode);
				hb_xs_stats_get(s, &st);
				CHECK_EQ_U64(st.ring_bytes, mode ? 16 * slot : 0);
				CHECK_EQ_U64(st.slots, mode ? 16 : 32);
				CHECK(st.slots * slot + st.ring_bytes <= c.budget_bytes);
				CHECK_EQ_INT(route_all(s, &src, HB_XS_PHASE_PREFILL, 1, dense, HB_ARRAY_LEN(dense),
						       NULL, &why),
					     0);
				CHECK_EQ_INT(why, mode == 0 ? HB_XS_WHY_OFF
							    : mode == 2 ? HB_XS_WHY_ALWAYS : why);
				CHECK_EQ_INT(route_all(s, &src, HB_XS_PHASE_DECODE, 0, sparse, HB_ARRAY_LEN(sparse),
						       NULL, &why),
					     0);
				CHECK_EQ_INT(why, mode ? HB_XS_WHY_NOT_PREFILL : HB_XS_WHY_OFF);
				CHECK_EQ_U64(hb_xs_test_audit(s), 0);
				hb_xs_stats_get(s, &st);
				CHECK_EQ_U64(st.failed_io + st.failed_short + st.failed_digest + st.failed_alloc, 0);
				CHECK_EQ_U64(st.leases_taken, st.leases_released);
				CHECK(st.resident_bytes <= c.budget_bytes);
				if (mode == 2) {
					/* 19 misses in windows of at most 8 slots' bytes:
					 * 8 records aligned, a whole layer unaligned */
					CHECK(st.extent_reads >= (geo ? 1u : 3u));
					CHECK_EQ_U64(st.extent_records, HB_ARRAY_LEN(dense));
					CHECK(st.extent_gap_bytes > 0);
					CHECK_EQ_U64(st.record_reads, HB_ARRAY_LEN(sparse));
					CHECK_EQ_U64(st.extent_why[HB_XS_WHY_ALWAYS], 1);
				}
				if (mode == 0) {
					CHECK_EQ_U64(st.extent_reads, 0);
					CHECK_EQ_U64(st.record_reads, HB_ARRAY_LEN(dense) + HB_ARRAY_LEN(sparse));
					CHECK_EQ_U64(st.extent_why[HB_XS_WHY_OFF], 2);
				}
				if (mode == 1) {
					/* auto measured both rates at start-up, and decided */
					CHECK(st.probe_record_bytes > 0 && st.probe_extent_bytes > 0);
					CHECK_EQ_U64(st.extent_why[HB_XS_WHY_CHEAPER] + st.extent_why[HB_XS_WHY_DEARER] +
							     st.extent_why[HB_XS_WHY_UNMEASURED],
						     1);
				}
				hb_xs_close(s);
				hb_xs_source_release(&src);
			}
}

static void small_budgets(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_stats st;
	enum hb_xs_extent_why why;
	struct hb_xs *s;

	sfix_geometry_aligned(&g, 2, 24);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	/* 8 slots: a ring of 2 x 2 slots and 4 slots for 19 misses */
	sfix_config(&c, &src, 8);
	c.extent = HB_XS_EXTENT_ALWAYS;
	s = sfix_open(&src, &c);
	if (s) {
		CHECK_EQ_INT(route_all(s, &src, HB_XS_PHASE_PREFILL, 0, dense, HB_ARRAY_LEN(dense), NULL, &why), 0);
		CHECK_EQ_INT(why, HB_XS_WHY_ALWAYS);
		hb_xs_stats_get(s, &st);
		CHECK_EQ_U64(st.slots, 4);
		CHECK(st.extent_reads > 0);
		CHECK(st.slot_waits > 0);
		CHECK_EQ_U64(hb_xs_test_audit(s), 0);
		hb_xs_close(s);
	}
	/* 7 slots: no ring fits (it would need 2 x 2 of budget / 4): records */
	sfix_config(&c, &src, 7);
	c.extent = HB_XS_EXTENT_ALWAYS;
	s = sfix_open(&src, &c);
	if (s) {
		CHECK_EQ_INT(route_all(s, &src, HB_XS_PHASE_PREFILL, 0, dense, HB_ARRAY_LEN(dense), NULL, &why), 0);
		CHECK_EQ_INT(why, HB_XS_WHY_NO_RING);
		hb_xs_stats_get(s, &st);
		CHECK_EQ_U64(st.slots, 7);
		CHECK_EQ_U64(st.ring_bytes, 0);
		CHECK_EQ_U64(st.extent_reads, 0);
		hb_xs_close(s);
	}
	hb_xs_source_release(&src);
}

static const struct {
	enum hb_xs_fault kind;
	int code;
	const char *field; /* a prefix */
} kinds[] = {
	{HB_XS_FAULT_EIO, HB_ERR_IO, "expert_store.layer[1].experts[0.."},
	{HB_XS_FAULT_SHORT, HB_ERR_SHORT, "expert_store.layer[1].experts[0.."},
	{HB_XS_FAULT_DIGEST, HB_ERR_DIGEST, "expert_store.layer[1].expert[0]"},
	{HB_XS_FAULT_ALLOC, HB_ERR_NOMEM, "expert_store.layer[1].expert[0]"},
};

static void faults_in_a_window_fail_the_route(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;

	sfix_geometry_unaligned(&g, 2, 24);
	CHECK_EQ_INT(sfix_build("s.bin", 4096, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	for (size_t k = 0; k < HB_ARRAY_LEN(kinds); k++)
		for (int ord = 0; ord < 2; ord++) {
			struct hb_xs_config c;
			struct hb_xs_stats st;
			struct hb_error err;
			enum hb_xs_extent_why why;
			struct hb_xs *s;

			sfix_config(&c, &src, 32);
			c.extent = HB_XS_EXTENT_ALWAYS;
			if (ord)
				c.threads = 2, c.depth = 2;
			s = sfix_open(&src, &c);
			if (!s)
				continue;
			hb_xs_test_fault_arm(s, kinds[k].kind, 1);
			hb_error_clear(&err);
			CHECK_EQ_INT(route_all(s, &src, HB_XS_PHASE_PREFILL, 1, dense, HB_ARRAY_LEN(dense), &err, &why),
				     kinds[k].code);
			CHECK(!strncmp(err.field, kinds[k].field, strlen(kinds[k].field)));
			CHECK_EQ_U64(hb_xs_test_audit(s), 0);
			/* the window's records are not valid: nothing half-read is kept */
			CHECK_EQ_INT(hb_xs_test_slot_of(s, 1, 0), -1);
			hb_xs_stats_get(s, &st);
			CHECK(st.failed_io + st.failed_short + st.failed_digest + st.failed_alloc >= 1);
			CHECK_EQ_U64(st.leases_taken, st.leases_released);
			/* the fault gone, the same route is served in full */
			hb_xs_test_fault_reset(s);
			CHECK_EQ_INT(route_all(s, &src, HB_XS_PHASE_PREFILL, 1, dense, HB_ARRAY_LEN(dense), NULL, &why),
				     0);
			CHECK_EQ_U64(hb_xs_test_audit(s), 0);
			hb_xs_stats_get(s, &st);
			CHECK(st.extent_reads > 0);
			CHECK(st.resident_bytes <= c.budget_bytes);
			hb_xs_close(s);
		}
	hb_xs_source_release(&src);
}

HB_TEST_MAIN(T(decide_at_both_sides_of_the_crossover), T(windows_deliver_verified_records), T(small_budgets),
	     T(faults_in_a_window_fail_the_route))
