/*
 * Unit tests: faults of the streaming engine (libkern/stream).  Every kind
 * the seam injects (EIO, a short read, a digest mismatch, an allocation
 * failure), and the real ones it stands for (a record changed on disk, a
 * truncated file), fails the exact want that needed the record with the
 * record named, leaves the caller's lease untouched, leaves no slot valid
 * with wrong bytes (the audit rehashes every valid slot, and is shown to
 * catch a corrupted one), and the engine serves the record once the fault
 * is gone.
 */
#include "hb_base.h"
#include "harness.h"
#include "stream/hb_stream.h"
#include "stream/hb_stream_test.h"
#include "stream_fix.h"

#include <fcntl.h>
#include <unistd.h>

static bool same_record(const struct hb_xs_source *src, const struct hb_xs_lease *l)
{
	uint8_t *want = sfix_record(src, l->layer, l->expert);
	bool ok = want && l->record && !memcmp(want, l->record, (size_t)l->bytes);

	free(want);
	return ok;
}

static void use(struct hb_xs *s, const struct hb_xs_source *src, uint32_t layer, uint32_t expert)
{
	struct hb_xs_lease l;

	CHECK_EQ_INT(hb_xs_acquire(s, layer, expert, &l, NULL), HB_OK);
	CHECK(same_record(src, &l));
	CHECK_EQ_INT(hb_xs_release(s, &l, NULL), HB_OK);
}

static const struct {
	enum hb_xs_fault kind;
	int code;
	const char *name;
} kinds[] = {
	{HB_XS_FAULT_EIO, HB_ERR_IO, "eio"},
	{HB_XS_FAULT_SHORT, HB_ERR_SHORT, "short"},
	{HB_XS_FAULT_DIGEST, HB_ERR_DIGEST, "digest"},
	{HB_XS_FAULT_ALLOC, HB_ERR_NOMEM, "alloc"},
};

static uint64_t failures(const struct hb_xs_stats *st, enum hb_xs_fault k)
{
	switch (k) {
	case HB_XS_FAULT_EIO: return st->failed_io;
	case HB_XS_FAULT_SHORT: return st->failed_short;
	case HB_XS_FAULT_DIGEST: return st->failed_digest;
	default: return st->failed_alloc;
	}
}

static void every_fault_fails_the_want_and_leaves_the_cache_sound(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;

	sfix_geometry_aligned(&g, 2, 6);
	CHECK_EQ_INT(sfix_build("s.bin", 4096, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	for (size_t k = 0; k < HB_ARRAY_LEN(kinds); k++) {
		struct hb_xs_config c;
		struct hb_xs_stats st;
		struct hb_xs_route r;
		struct hb_xs_want w[2];
		struct hb_xs_lease l, sentinel;
		struct hb_error err;
		struct hb_xs *s;
		uint32_t ex[2] = {0, 4};
		size_t idx = 77;

		sfix_config(&c, &src, 3);
		s = sfix_open(&src, &c);
		/* two slots warm; the third has never held a record */
		use(s, &src, 0, 0);
		use(s, &src, 0, 1);
		hb_xs_test_fault_arm(s, kinds[k].kind, 1);
		hb_xs_route_init(&r, w, 2);
		CHECK_EQ_INT(hb_xs_route_begin(s, &r, 0, ex, 2, NULL), HB_OK);
		CHECK_EQ_INT(w[0].how, HB_XS_HIT);
		CHECK_EQ_INT(w[1].how, HB_XS_MISS);
		CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l, NULL), HB_OK);
		CHECK_EQ_U64(idx, 0);
		CHECK_EQ_INT(hb_xs_release(s, &l, NULL), HB_OK);
		/* the miss fails: the record named, the caller's lease and index
		 * untouched */
		memset(&l, 0xa5, sizeof(l));
		sentinel = l;
		idx = 77;
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l, &err), kinds[k].code);
		CHECK_STR(err.field, "expert_store.layer[0].expert[4]");
		CHECK(!memcmp(&l, &sentinel, sizeof(l)));
		CHECK_EQ_U64(idx, 77);
		if (kinds[k].kind == HB_XS_FAULT_DIGEST)
			CHECK(strstr(err.msg, "differs from hebrus.experts.record_sha256") != NULL);
		/* and keeps failing: the chunk cannot go on with a hole */
		CHECK_EQ_INT(hb_xs_route_next(s, &r, &idx, &l, NULL), kinds[k].code);
		hb_xs_route_end(s, &r);
		CHECK_EQ_U64(hb_xs_test_audit(s), 0);
		CHECK_EQ_INT(hb_xs_test_slot_of(s, 0, 4), -1);
		hb_xs_stats_get(s, &st);
		CHECK_EQ_U64(failures(&st, kinds[k].kind), 1);
		CHECK_STR(st.last_failure.field, "expert_store.layer[0].expert[4]");
		CHECK_EQ_U64(st.leases_taken, st.leases_released);
		/* the fault is gone: the same record, the right bytes */
		use(s, &src, 0, 4);
		use(s, &src, 0, 0);
		CHECK_EQ_U64(hb_xs_test_audit(s), 0);
		hb_xs_stats_get(s, &st);
		CHECK(st.resident_bytes <= c.budget_bytes);
		hb_xs_close(s);
	}
	hb_xs_source_release(&src);
}

static void a_failed_prediction_is_counted_and_harmless(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_stats st;
	struct hb_xs_ticket t;
	struct hb_xs *s;
	struct hb_xs_hint h = {.layer = 1, .expert = 5, .prio = HB_XS_P2, .confidence = 0.4f};

	sfix_geometry_aligned(&g, 2, 6);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	sfix_config(&c, &src, 4);
	s = sfix_open(&src, &c);
	hb_xs_test_fault_arm(s, HB_XS_FAULT_DIGEST, 1);
	CHECK_EQ_INT(hb_xs_prefetch(s, &h, NULL, NULL), HB_XS_PF_ISSUED);
	CHECK_EQ_INT(hb_xs_test_dispatch(s, &t), 0);
	CHECK_EQ_INT(hb_xs_test_complete(s, t.id), HB_OK);
	CHECK_EQ_INT(hb_xs_test_slot_of(s, 1, 5), -1);
	hb_xs_stats_get(s, &st);
	CHECK_EQ_U64(st.failed_digest, 1);
	CHECK_EQ_U64(st.completed, 0);
	use(s, &src, 1, 5);
	CHECK_EQ_U64(hb_xs_test_audit(s), 0);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

static uint64_t record_offset(const struct hb_xs_source *src, uint32_t layer, uint32_t expert)
{
	return src->base + src->layout.layers[layer].data_offset + (uint64_t)expert * src->layout.record_bytes;
}

static void a_record_changed_on_disk_is_refused_by_name(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;

	sfix_geometry_aligned(&g, 2, 6);
	CHECK_EQ_INT(sfix_build("s.bin", 8192, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	/* through O_DIRECT (where the file system takes it) and buffered; the
	 * record (12,288 bytes) read whole, and in three chunks hashed as each
	 * arrives, with the changed byte in each chunk in turn */
	for (int mode = 0; mode < 8; mode++) {
		static const uint64_t where[4] = { 1000, 1000, 5000, 12287 };
		struct hb_xs_config c;
		struct hb_xs_lease l;
		struct hb_error err;
		struct hb_xs *s;
		uint64_t at = record_offset(&src, 1, 3) + where[mode / 2];
		uint8_t byte, flipped;
		int fd = open("s.bin", O_RDWR | O_CLOEXEC);

		CHECK(fd >= 0);
		CHECK(src.layout.record_bytes == 12288);
		sfix_config(&c, &src, 3);
		c.direct = mode % 2 ? HB_XS_DIRECT_OFF : HB_XS_DIRECT_AUTO;
		s = sfix_open(&src, &c);
		if (mode >= 2)
			hb_xs_test_read_chunk(s, 4096);
		CHECK_EQ_INT(pread(fd, &byte, 1, (off_t)at), 1);
		flipped = byte ^ 0x10;
		CHECK_EQ_INT(pwrite(fd, &flipped, 1, (off_t)at), 1);
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_xs_acquire(s, 1, 3, &l, &err), HB_ERR_DIGEST);
		CHECK_STR(err.field, "expert_store.layer[1].expert[3]");
		CHECK(err.has_offset);
		CHECK_EQ_U64(err.offset, record_offset(&src, 1, 3));
		CHECK(strstr(err.msg, "differs from hebrus.experts.record_sha256") != NULL);
		/* its neighbours are fine */
		use(s, &src, 1, 2);
		use(s, &src, 1, 4);
		CHECK_EQ_INT(hb_xs_test_slot_of(s, 1, 3), -1);
		/* the byte put back, the record is served */
		CHECK_EQ_INT(pwrite(fd, &byte, 1, (off_t)at), 1);
		use(s, &src, 1, 3);
		CHECK_EQ_U64(hb_xs_test_audit(s), 0);
		hb_xs_close(s);
		close(fd);
	}
	hb_xs_source_release(&src);
}

static void a_truncated_store_is_a_short_read(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_lease l;
	struct hb_error err;
	struct hb_xs *s;
	uint64_t last, end;
	uint8_t *tail;
	int fd;

	/* records of 2,304 bytes: the file ends inside a 4096-byte block, so
	 * the last record's aligned read runs past the end of the file */
	sfix_geometry_unaligned(&g, 2, 7);
	CHECK_EQ_INT(sfix_build("u.bin", 4096, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	last = record_offset(&src, 1, 6);
	end = last + src.layout.record_bytes;
	CHECK(end % 4096 != 0);
	sfix_config(&c, &src, 2);
	c.policy = HB_XS_POLICY_LRU;
	s = sfix_open(&src, &c);
	use(s, &src, 1, 6); /* whole, it reads */
	use(s, &src, 0, 0);
	use(s, &src, 0, 1); /* (1, 6) is evicted */
	CHECK_EQ_INT(hb_xs_test_slot_of(s, 1, 6), -1);
	tail = sfix_record(&src, 1, 6);
	fd = open("u.bin", O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0 && tail);
	CHECK_EQ_INT(ftruncate(fd, (off_t)(end - 100)), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_xs_acquire(s, 1, 6, &l, &err), HB_ERR_SHORT);
	CHECK_STR(err.field, "expert_store.layer[1].expert[6]");
	CHECK(strstr(err.msg, "100 bytes before the record") != NULL);
	CHECK_EQ_U64(hb_xs_test_audit(s), 0);
	/* the same read in 4096-byte chunks, hashed as they arrive (the record
	 * starts inside its first block and ends in the short last one) */
	hb_xs_test_read_chunk(s, 4096);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_xs_acquire(s, 1, 6, &l, &err), HB_ERR_SHORT);
	CHECK(strstr(err.msg, "100 bytes before the record") != NULL);
	CHECK_EQ_U64(hb_xs_test_audit(s), 0);
	/* the file whole again */
	CHECK_EQ_INT(pwrite(fd, tail, (size_t)src.layout.record_bytes, (off_t)last),
		     (long long)src.layout.record_bytes);
	use(s, &src, 1, 6);
	hb_xs_test_read_chunk(s, 0);
	use(s, &src, 0, 2);
	use(s, &src, 0, 3); /* (1, 6) is evicted again: read whole once more */
	use(s, &src, 1, 6);
	close(fd);
	free(tail);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

static void faults_under_worker_threads(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_stats st;
	struct hb_xs *s;

	sfix_geometry_aligned(&g, 2, 8);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	sfix_config(&c, &src, 8);
	c.threads = 2;
	c.depth = 2;
	s = sfix_open(&src, &c);
	for (size_t k = 0; k < HB_ARRAY_LEN(kinds); k++) {
		struct hb_xs_lease l;
		struct hb_error err;
		hb_xs_test_fault_arm(s, kinds[k].kind, 1);
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_xs_acquire(s, 1, (uint32_t)k, &l, &err), kinds[k].code);
		CHECK(strstr(err.field, "expert_store.layer[1].expert[") != NULL);
		CHECK_EQ_U64(hb_xs_test_fault_calls(s, kinds[k].kind), 1);
		use(s, &src, 1, (uint32_t)k);
	}
	CHECK_EQ_U64(hb_xs_test_audit(s), 0);
	hb_xs_stats_get(s, &st);
	CHECK_EQ_U64(st.failed_io, 1);
	CHECK_EQ_U64(st.failed_short, 1);
	CHECK_EQ_U64(st.failed_digest, 1);
	CHECK_EQ_U64(st.failed_alloc, 1);
	CHECK_EQ_U64(st.completed, 4);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

static void the_audit_catches_a_corrupted_slot(void)
{
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs *s;

	sfix_geometry_aligned(&g, 1, 4);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	sfix_config(&c, &src, 2);
	s = sfix_open(&src, &c);
	use(s, &src, 0, 2);
	CHECK_EQ_U64(hb_xs_test_audit(s), 0);
	CHECK_EQ_INT(hb_xs_test_corrupt(s, 0, 3), HB_ERR_NOTFOUND);
	CHECK_EQ_INT(hb_xs_test_corrupt(s, 0, 2), HB_OK);
	CHECK_EQ_U64(hb_xs_test_audit(s), 1);
	hb_xs_close(s);
	hb_xs_source_release(&src);
}

HB_TEST_MAIN(T(every_fault_fails_the_want_and_leaves_the_cache_sound), T(a_failed_prediction_is_counted_and_harmless),
	     T(a_record_changed_on_disk_is_refused_by_name), T(a_truncated_store_is_a_short_read),
	     T(faults_under_worker_threads), T(the_audit_catches_a_corrupted_slot))
