/*
 * Unit tests: route trace shards (libstore/trace/hb_trace.h, hebrus-trace(5)).
 *
 * A round trip of many records across several chunks; the exact bytes of a
 * one-record shard, built here field by field from the documented layout
 * with an independent bitwise CRC-32 (not zlib's), so that the writer and
 * the page are checked against each other rather than against themselves;
 * every defect the reader names, each with its id, error code, byte offset
 * and the "last good record" ordinal; reading through a pipe.
 *
 * The multi-chunk shard used by the defect cases: top_k 3, 4 layers,
 * 9 experts, record bytes 40 + 8 x 3 = 64, 4 records per chunk, 10 records:
 * header 0..127, chunk 0 at 128 (24 + 256 bytes), chunk 1 at 408, chunk 2
 * (2 records) at 688, end 840.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_io.h"
#include "trace/hb_trace.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

/* ------------------------------------------------------------ helpers */

/* Bitwise CRC-32 (reflected, polynomial 0xEDB88320, init and final xor ~0). */
static uint32_t crc32_ref(const uint8_t *p, size_t n)
{
	uint32_t c = 0xFFFFFFFFu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int b = 0; b < 8; b++)
			c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
	}
	return ~c;
}

static void le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

struct collected {
	uint64_t n;
	struct hb_route r[64];
};

static int collect(void *ctx, const struct hb_trace_header *h, const struct hb_route *r)
{
	struct collected *c = ctx;
	(void)h;
	if (c->n < HB_ARRAY_LEN(c->r))
		c->r[c->n] = *r;
	c->n++;
	return 0;
}

/* Record i of the multi-chunk shards: every field depends on i. */
static void make_route(struct hb_route *r, uint64_t i, uint32_t top_k, uint32_t layers, uint32_t experts)
{
	memset(r, 0, sizeof(*r));
	r->sequence = 1000 + i / 7;
	r->ordinal = i;
	r->layer = (uint32_t)(i % layers);
	r->lineage = i % 3 == 0;
	r->proposal = r->lineage ? 0x100000000ull + i : 0;
	r->candidate = r->lineage ? (int32_t)i - 5 : -1;
	r->accepted = r->lineage ? (int32_t)(i % 4) : -1;
	for (uint32_t k = 0; k < top_k; k++) {
		r->ids[k] = (uint32_t)((i * 7 + k * 3) % experts);
		r->weights[k] = 1.0f / (float)(k + 1) + (float)i * 0.001f;
	}
}

static bool same_route(const struct hb_route *a, const struct hb_route *b, uint32_t top_k)
{
	if (a->sequence != b->sequence || a->ordinal != b->ordinal || a->layer != b->layer ||
	    a->lineage != b->lineage || a->proposal != b->proposal || a->candidate != b->candidate ||
	    a->accepted != b->accepted)
		return false;
	return !memcmp(a->ids, b->ids, top_k * 4) && !memcmp(a->weights, b->weights, top_k * 4);
}

static struct hb_trace_header small_header(uint32_t top_k, uint32_t layers, uint32_t experts)
{
	struct hb_trace_header h;
	memset(&h, 0, sizeof(h));
	h.top_k = top_k;
	h.layers = layers;
	h.experts = experts;
	for (int i = 0; i < 32; i++) {
		h.artifact[i] = (uint8_t)(0xA0 + i);
		h.text[i] = (uint8_t)(0x10 + i);
	}
	h.owner = 0x0807060504030201ull;
	h.generation = 77;
	return h;
}

/* Write n records of make_route to path, chunk_records per chunk. */
static int write_shard(const char *path, uint32_t top_k, uint32_t layers, uint32_t experts,
		       uint32_t chunk_records, uint64_t n)
{
	struct hb_trace_header h = small_header(top_k, layers, experts);
	struct hb_trace_writer *w = NULL;
	struct hb_route r;
	struct hb_error err;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), rc;

	hb_error_clear(&err);
	if (fd < 0)
		return -1;
	rc = hb_trace_writer_open(&w, fd, path, &h, chunk_records, &err);
	for (uint64_t i = 0; !rc && i < n; i++) {
		make_route(&r, i, top_k, layers, experts);
		rc = hb_trace_write(w, &r, &err);
	}
	if (w) {
		int c = hb_trace_writer_close(w, &err);
		rc = rc ? rc : c;
	}
	close(fd);
	return rc;
}

static int read_shard(const char *path, struct collected *c, struct hb_trace_header *h,
		      uint64_t *records, struct hb_error *err)
{
	int fd = open(path, O_RDONLY), rc;

	hb_error_clear(err);
	memset(c, 0, sizeof(*c));
	if (fd < 0)
		return -1;
	rc = hb_trace_read(fd, path, collect, c, h, records, err);
	close(fd);
	return rc;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	char *data = NULL;
	if (hb_read_file(path, 1u << 24, &data, len, NULL))
		return NULL;
	return (uint8_t *)data;
}

static void put_file(const char *path, const uint8_t *b, size_t n)
{
	CHECK_EQ_INT(hb_test_write_file(path, b, n), 0);
}

/* ------------------------------------------------------------ round trip */

static void round_trip_many_chunks(void)
{
	const uint32_t top_k = 10, layers = 8, experts = 128, per_chunk = 7;
	const uint64_t n = 60;
	const uint32_t rb = 40 + 8 * top_k;
	struct hb_trace_header h, want = small_header(top_k, layers, experts);
	struct collected c;
	struct hb_error err;
	uint64_t records = 0, pos = 128, chunks = 0, seen = 0;
	uint8_t *b;
	size_t len = 0;

	CHECK_EQ_U64(hb_trace_record_bytes(top_k), rb);
	CHECK_EQ_INT(write_shard("t.trace", top_k, layers, experts, per_chunk, n), HB_OK);
	CHECK_EQ_INT(read_shard("t.trace", &c, &h, &records, &err), HB_OK);
	CHECK_EQ_U64(records, n);
	CHECK_EQ_U64(c.n, n);
	CHECK_EQ_U64(h.version, 1);
	CHECK_EQ_U64(h.top_k, top_k);
	CHECK_EQ_U64(h.layers, layers);
	CHECK_EQ_U64(h.experts, experts);
	CHECK_EQ_U64(h.record_bytes, rb);
	CHECK(!memcmp(h.artifact, want.artifact, 32));
	CHECK(!memcmp(h.text, want.text, 32));
	CHECK_EQ_U64(h.owner, want.owner);
	CHECK_EQ_U64(h.generation, want.generation);
	for (uint64_t i = 0; i < n && i < c.n; i++) {
		struct hb_route r;
		make_route(&r, i, top_k, layers, experts);
		if (!same_route(&r, &c.r[i], top_k))
			hb_check_fail(__FILE__, __LINE__, "record %" PRIu64 " differs after the round trip", i);
	}
	/* without lineage the reader sees proposal 0 and positions -1 */
	CHECK(!c.r[1].lineage && c.r[1].proposal == 0 && c.r[1].candidate == -1 && c.r[1].accepted == -1);
	/* 60 records of 7 per chunk: 8 full chunks and one of 4, walked here */
	b = slurp("t.trace", &len);
	CHECK(b != NULL);
	while (b && pos + 24 <= len) {
		uint32_t count = rd32(b + pos + 8);
		CHECK(!memcmp(b + pos, "HBCHUNK1", 8));
		CHECK_EQ_U64(count, chunks < 8 ? 7 : 4);
		CHECK_EQ_U64(rd32(b + pos + 16), (uint64_t)count * rb);
		CHECK_EQ_U64(rd32(b + pos + 12), crc32_ref(b + pos + 24, (size_t)count * rb));
		seen += count;
		pos += 24 + (uint64_t)count * rb;
		chunks++;
	}
	CHECK_EQ_U64(chunks, 9);
	CHECK_EQ_U64(seen, n);
	CHECK_EQ_U64(pos, len);
	CHECK_EQ_U64(len, 128 + 9 * 24 + n * rb);
	free(b);
}

/* An empty shard is its header alone, and reads as zero records. */
static void empty_shard_is_the_header(void)
{
	struct hb_trace_header h;
	struct collected c;
	struct hb_error err;
	uint64_t records = 99;
	uint8_t *b;
	size_t len = 0;

	CHECK_EQ_INT(write_shard("e.trace", 2, 1, 2, 4, 0), HB_OK);
	b = slurp("e.trace", &len);
	CHECK_EQ_U64(len, 128);
	CHECK_EQ_INT(read_shard("e.trace", &c, &h, &records, &err), HB_OK);
	CHECK_EQ_U64(records, 0);
	free(b);
}

/* ------------------------------------------------------------ exact bytes */

static void one_record_exact_bytes(void)
{
	uint8_t want[128 + 24 + 56];
	uint8_t *rec = want + 152, *got;
	struct hb_trace_header h;
	struct hb_trace_writer *w = NULL;
	struct hb_route r;
	struct hb_error err;
	size_t len = 0;
	int fd;

	/* the shard, field by field from hebrus-trace(5) */
	memset(want, 0, sizeof(want));
	memcpy(want, "HBTRACE1", 8);
	le32(want + 8, 1);             /* version */
	le32(want + 12, 128);          /* header bytes */
	le32(want + 16, 2);            /* top_k */
	le32(want + 20, 3);            /* layers */
	le32(want + 24, 5);            /* experts */
	le32(want + 28, 56);           /* record bytes = 40 + 8 x 2 */
	for (int i = 0; i < 32; i++) {
		want[32 + i] = (uint8_t)i;          /* artifact digest */
		want[64 + i] = (uint8_t)(0x40 + i); /* tokenizer+template digest */
	}
	le64(want + 96, 0x0102030405060708ull); /* owner */
	le32(want + 104, 9);                    /* generation; 108..123 reserved zero */
	le32(want + 124, crc32_ref(want, 124));
	memcpy(want + 128, "HBCHUNK1", 8);
	le32(want + 136, 1);                    /* records */
	le64(want + 144, 56);                   /* payload bytes */
	le64(rec + 0, 0x1122334455667788ull);   /* sequence */
	le64(rec + 8, 42);                      /* token ordinal */
	le32(rec + 16, 2);                      /* layer */
	le32(rec + 20, 1);                      /* flags: lineage */
	le64(rec + 24, 7);                      /* proposal */
	le32(rec + 32, 0xFFFFFFFDu);            /* candidate -3 */
	le32(rec + 36, 4);                      /* accepted prefix */
	le32(rec + 40, 4);                      /* ids, rank order */
	le32(rec + 44, 1);
	le32(rec + 48, 0x3F400000u);            /* 0.75f */
	le32(rec + 52, 0x3E800000u);            /* 0.25f */
	le32(want + 140, crc32_ref(rec, 56));   /* payload CRC */

	/* the check values of the reference CRC itself */
	CHECK_EQ_U64(crc32_ref((const uint8_t *)"123456789", 9), 0xCBF43926u);

	memset(&h, 0, sizeof(h));
	h.top_k = 2;
	h.layers = 3;
	h.experts = 5;
	for (int i = 0; i < 32; i++) {
		h.artifact[i] = (uint8_t)i;
		h.text[i] = (uint8_t)(0x40 + i);
	}
	h.owner = 0x0102030405060708ull;
	h.generation = 9;
	memset(&r, 0, sizeof(r));
	r.sequence = 0x1122334455667788ull;
	r.ordinal = 42;
	r.layer = 2;
	r.lineage = true;
	r.proposal = 7;
	r.candidate = -3;
	r.accepted = 4;
	r.ids[0] = 4, r.ids[1] = 1;
	r.weights[0] = 0.75f, r.weights[1] = 0.25f;
	hb_error_clear(&err);
	fd = open("one.trace", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ_INT(hb_trace_writer_open(&w, fd, "one.trace", &h, 16, &err), HB_OK);
	CHECK_EQ_INT(hb_trace_write(w, &r, &err), HB_OK);
	CHECK_EQ_INT(hb_trace_writer_close(w, &err), HB_OK);
	close(fd);
	got = slurp("one.trace", &len);
	CHECK_EQ_U64(len, sizeof(want));
	for (size_t i = 0; got && i < len && i < sizeof(want); i++)
		if (got[i] != want[i]) {
			hb_check_fail(__FILE__, __LINE__, "byte %zu: got 0x%02x, the layout says 0x%02x", i,
				      got[i], want[i]);
			break;
		}
	free(got);

	/* and the reader accepts the hand-built bytes */
	{
		struct collected c;
		struct hb_trace_header rh;
		uint64_t records = 0;
		put_file("hand.trace", want, sizeof(want));
		CHECK_EQ_INT(read_shard("hand.trace", &c, &rh, &records, &err), HB_OK);
		CHECK_EQ_U64(records, 1);
		CHECK(same_route(&c.r[0], &r, 2));
		CHECK_EQ_U64(rh.owner, 0x0102030405060708ull);
		CHECK_EQ_U64(rh.generation, 9);
	}
}

/*
 * Version 2 (a thread in the header), field by field from the page: a
 * writer given a thread writes version 2, thread at 108, flags 1 at 116,
 * zero at 120..123; without one it writes version 1 whatever the thread
 * field holds.  The reader refuses an unknown flag, a thread without its
 * flag and a non-zero reserved byte, each at its offset, and reads a
 * version 2 header without the flag as naming no thread.
 */
static void version_2_carries_the_thread(void)
{
	struct hb_trace_header h = small_header(2, 3, 5), rh;
	struct hb_trace_writer *w = NULL;
	struct hb_error err;
	struct collected c;
	uint64_t records = 0;
	uint8_t *got, want[128];
	size_t len = 0;
	int fd;
	static const struct {
		const char *what;
		uint32_t off, value;
		uint64_t at;
	} bad[] = {
		{"flag bit 1", 116, 3, 116},
		{"flag bit 31", 116, 0x80000001u, 116},
		{"thread without its flag", 116, 0, 108},
		{"reserved byte 120", 120, 1, 120},
		{"reserved byte 123", 120, 0x01000000u, 123},
	};

	h.has_thread = true;
	h.thread = 0xF1E2D3C4B5A69788ull;
	hb_error_clear(&err);
	fd = open("v2.trace", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ_INT(hb_trace_writer_open(&w, fd, "v2.trace", &h, 16, &err), HB_OK);
	CHECK_EQ_INT(hb_trace_writer_close(w, &err), HB_OK);
	close(fd);
	got = slurp("v2.trace", &len);
	CHECK_EQ_U64(len, 128);
	if (!got || len != 128) {
		free(got);
		return;
	}
	memset(want, 0, sizeof(want));
	memcpy(want, "HBTRACE1", 8);
	le32(want + 8, 2);
	le32(want + 12, 128);
	le32(want + 16, 2);
	le32(want + 20, 3);
	le32(want + 24, 5);
	le32(want + 28, 56);
	memcpy(want + 32, h.artifact, 32);
	memcpy(want + 64, h.text, 32);
	le64(want + 96, h.owner);
	le32(want + 104, h.generation);
	le64(want + 108, 0xF1E2D3C4B5A69788ull); /* thread */
	le32(want + 116, 1);                      /* flags: thread present; 120..123 zero */
	le32(want + 124, crc32_ref(want, 124));
	CHECK(!memcmp(got, want, 128));
	free(got);
	CHECK_EQ_INT(read_shard("v2.trace", &c, &rh, &records, &err), HB_OK);
	CHECK_EQ_U64(rh.version, 2);
	CHECK(rh.has_thread);
	CHECK_EQ_U64(rh.thread, 0xF1E2D3C4B5A69788ull);
	CHECK_EQ_U64(rh.owner, h.owner);
	CHECK_EQ_U64(rh.generation, 77);
	for (size_t i = 0; i < HB_ARRAY_LEN(bad); i++) {
		uint8_t b[128];
		int rc;
		memcpy(b, want, 128);
		le32(b + bad[i].off, bad[i].value);
		le32(b + 124, crc32_ref(b, 124));
		put_file("bad2.trace", b, 128);
		rc = read_shard("bad2.trace", &c, &rh, &records, &err);
		if (rc != HB_ERR_FORMAT || !err.id || strcmp(err.id, "trace-header") || err.offset != bad[i].at)
			hb_check_fail(__FILE__, __LINE__, "%s: got rc %d id %s offset %" PRIu64 "; want trace-header at %" PRIu64,
				      bad[i].what, rc, err.id ? err.id : "(null)", err.offset, bad[i].at);
	}
	/* version 2 without the flag and with a zero thread names no thread */
	{
		uint8_t b[128];
		memcpy(b, want, 128);
		le64(b + 108, 0);
		le32(b + 116, 0);
		le32(b + 124, crc32_ref(b, 124));
		put_file("nothread.trace", b, 128);
		CHECK_EQ_INT(read_shard("nothread.trace", &c, &rh, &records, &err), HB_OK);
		CHECK_EQ_U64(rh.version, 2);
		CHECK(!rh.has_thread);
		CHECK_EQ_U64(rh.thread, 0);
	}
	/* without a thread the writer keeps to version 1 and its zero bytes */
	h.has_thread = false;
	fd = open("v1.trace", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ_INT(hb_trace_writer_open(&w, fd, "v1.trace", &h, 16, &err), HB_OK);
	CHECK_EQ_INT(hb_trace_writer_close(w, &err), HB_OK);
	close(fd);
	got = slurp("v1.trace", &len);
	CHECK(got && len == 128 && rd32(got + 8) == 1);
	for (int i = 108; got && len == 128 && i < 124; i++)
		CHECK_EQ_INT(got[i], 0);
	free(got);
	CHECK_EQ_INT(read_shard("v1.trace", &c, &rh, &records, &err), HB_OK);
	CHECK_EQ_U64(rh.version, 1);
	CHECK(!rh.has_thread);
	CHECK_EQ_U64(rh.thread, 0);
}

/* ------------------------------------------------------------ defects */

#define CH0 128u
#define CH1 408u
#define CH2 688u
#define SHARD_END 840u
#define RB 64u

enum edit { NONE, XOR8, SET32, SET64, CUT };

struct defect {
	const char *what;
	enum edit how;
	uint32_t off;
	uint64_t value;      /* XOR mask, value, or the length kept by CUT */
	int fix_header_crc;  /* recompute the header CRC after the edit */
	int fix_chunk_crc;   /* recompute chunk 1's payload CRC */
	int code;
	const char *id;
	uint64_t at;         /* the reported byte offset */
	uint64_t delivered;  /* records handed to the callback before the defect */
	const char *msg;     /* a fragment the message must hold, or NULL */
};

static const struct defect defects[] = {
	{"bad magic", XOR8, 0, 0x01, 0, 0, HB_ERR_FORMAT, "trace-magic", 0, 0, NULL},
	{"version 3", SET32, 8, 3, 1, 0, HB_ERR_UNSUPPORTED, "trace-version", 8, 0, "version 3"},
	{"version 0", SET32, 8, 0, 1, 0, HB_ERR_UNSUPPORTED, "trace-version", 8, 0, "version 0"},
	{"header CRC", XOR8, 40, 0x80, 0, 0, HB_ERR_FORMAT, "trace-header", 124, 0, "CRC"},
	{"stored header CRC", XOR8, 124, 0x01, 0, 0, HB_ERR_FORMAT, "trace-header", 124, 0, "CRC"},
	{"reserved byte 108", XOR8, 108, 0x01, 1, 0, HB_ERR_FORMAT, "trace-header", 108, 0, "reserved"},
	{"reserved byte 123", XOR8, 123, 0x20, 1, 0, HB_ERR_FORMAT, "trace-header", 123, 0, "reserved"},
	{"header bytes 129", SET32, 12, 129, 1, 0, HB_ERR_FORMAT, "trace-header", 12, 0, NULL},
	{"top_k 0", SET32, 16, 0, 1, 0, HB_ERR_FORMAT, "trace-header", 12, 0, NULL},
	{"top_k 65", SET32, 16, 65, 1, 0, HB_ERR_FORMAT, "trace-header", 12, 0, NULL},
	{"record bytes", SET32, 28, 65, 1, 0, HB_ERR_FORMAT, "trace-header", 12, 0, NULL},
	{"layers 0", SET32, 20, 0, 1, 0, HB_ERR_FORMAT, "trace-header", 12, 0, NULL},
	{"truncated header", CUT, 0, 100, 0, 0, HB_ERR_SHORT, "trace-truncated", 100, 0, "header"},
	{"truncated chunk header", CUT, 0, CH1 + 10, 0, 0, HB_ERR_SHORT, "trace-truncated", CH1 + 10, 4,
	 "last good record 3"},
	{"truncated payload", CUT, 0, CH1 + 24 + 100, 0, 0, HB_ERR_SHORT, "trace-truncated", CH1 + 24 + 100, 4,
	 "last good record 3"},
	{"truncated last chunk", CUT, 0, SHARD_END - 1, 0, 0, HB_ERR_SHORT, "trace-truncated", SHARD_END - 1, 8,
	 "last good record 7"},
	{"chunk CRC", XOR8, CH1 + 24 + 70, 0x04, 0, 0, HB_ERR_DIGEST, "trace-crc", CH1, 4, "last good record 3"},
	{"stored chunk CRC", XOR8, CH1 + 12, 0x01, 0, 0, HB_ERR_DIGEST, "trace-crc", CH1, 4, "last good record 3"},
	{"chunk magic", XOR8, CH1 + 3, 0x01, 0, 0, HB_ERR_FORMAT, "trace-chunk", CH1, 4, "last good record 3"},
	{"chunk of 0 records", SET32, CH1 + 8, 0, 0, 0, HB_ERR_FORMAT, "trace-chunk", CH1, 4, "last good record 3"},
	{"chunk count vs bytes", SET32, CH1 + 8, 3, 0, 0, HB_ERR_FORMAT, "trace-chunk", CH1, 4, "last good record 3"},
	{"chunk bytes vs count", SET64, CH1 + 16, 4 * RB + 1, 0, 0, HB_ERR_FORMAT, "trace-chunk", CH1, 4,
	 "last good record 3"},
	{"chunk over the limit", SET32, CH1 + 8, 65537, 0, 0, HB_ERR_FORMAT, "trace-chunk", CH1, 4,
	 "last good record 3"},
	{"trailing garbage", CUT, 0, SHARD_END + 5, 0, 0, HB_ERR_SHORT, "trace-truncated", SHARD_END + 5, 10,
	 "last good record 9"},
	/* record 6 = chunk 1, index 2: expert id 9 of 9, layer 4 of 4, unknown flag */
	{"expert out of range", SET32, CH1 + 24 + 2 * RB + 40 + 4, 9, 0, 1, HB_ERR_FORMAT, "trace-record",
	 CH1 + 24 + 2 * RB, 6, "record 6"},
	{"layer out of range", SET32, CH1 + 24 + 2 * RB + 16, 4, 0, 1, HB_ERR_FORMAT, "trace-record",
	 CH1 + 24 + 2 * RB, 6, "record 6"},
	{"unknown flag", SET32, CH1 + 24 + 2 * RB + 20, 2, 0, 1, HB_ERR_FORMAT, "trace-record",
	 CH1 + 24 + 2 * RB, 6, "record 6"},
};

static void damage(uint8_t *b, size_t *len, const struct defect *d)
{
	switch (d->how) {
	case XOR8: b[d->off] ^= (uint8_t)d->value; break;
	case SET32: le32(b + d->off, (uint32_t)d->value); break;
	case SET64: le64(b + d->off, d->value); break;
	case CUT: *len = (size_t)d->value; break;
	case NONE: break;
	}
	if (d->fix_header_crc)
		le32(b + 124, crc32_ref(b, 124));
	if (d->fix_chunk_crc)
		le32(b + CH1 + 12, crc32_ref(b + CH1 + 24, 4 * RB));
}

static void every_defect_is_named(void)
{
	uint8_t *good, buf[SHARD_END + 16];
	size_t len = 0;

	CHECK_EQ_INT(write_shard("good.trace", 3, 4, 9, 4, 10), HB_OK);
	good = slurp("good.trace", &len);
	CHECK_EQ_U64(len, SHARD_END);
	if (!good || len != SHARD_END)
		return;
	for (size_t i = 0; i < HB_ARRAY_LEN(defects); i++) {
		const struct defect *d = &defects[i];
		struct collected c;
		struct hb_trace_header h;
		struct hb_error err;
		uint64_t records = 0;
		size_t n = SHARD_END;
		int rc;

		memset(buf, 0x5A, sizeof(buf)); /* what "trailing garbage" keeps past the end */
		memcpy(buf, good, SHARD_END);
		damage(buf, &n, d);
		put_file("bad.trace", buf, n);
		rc = read_shard("bad.trace", &c, &h, &records, &err);
		if (rc != d->code || !err.id || strcmp(err.id, d->id) || !err.has_offset || err.offset != d->at ||
		    c.n != d->delivered || records != d->delivered || strcmp(err.field, "bad.trace") ||
		    (d->msg && !strstr(err.msg, d->msg)))
			hb_check_fail(__FILE__, __LINE__,
				      "%s: got rc %d id %s field %s offset %" PRIu64 " delivered %" PRIu64
				      "/%" PRIu64 " msg '%s'; want rc %d id %s offset %" PRIu64 " delivered %" PRIu64
				      " msg ~ '%s'",
				      d->what, rc, err.id ? err.id : "(null)", err.field, err.offset, c.n, records,
				      err.msg, d->code, d->id, d->at, d->delivered, d->msg ? d->msg : "");
	}
	free(good);
}

/*
 * The contract of hebrus-trace(5): a defect after delivered records names
 * the last good record, and one in the first chunk says no record was good
 * (it must not claim that record 0 was).
 */
static void defect_messages_name_the_last_good_record(void)
{
	uint8_t *good;
	size_t len = 0;
	struct collected c;
	struct hb_trace_header h;
	struct hb_error err;
	uint64_t records = 0;

	CHECK_EQ_INT(write_shard("good.trace", 3, 4, 9, 4, 10), HB_OK);
	good = slurp("good.trace", &len);
	if (!good || len != SHARD_END) {
		CHECK(false);
		free(good);
		return;
	}
	/* record 6 out of range: records 0..5 were delivered */
	le32(good + CH1 + 24 + 2 * RB + 40, 9);
	le32(good + CH1 + 12, crc32_ref(good + CH1 + 24, 4 * RB));
	put_file("rec.trace", good, len);
	CHECK_EQ_INT(read_shard("rec.trace", &c, &h, &records, &err), HB_ERR_FORMAT);
	CHECK(strstr(err.msg, "last good record 5") != NULL);
	/* chunk 0 fails its CRC: nothing was delivered */
	good[CH0 + 24] ^= 1;
	put_file("crc0.trace", good, len);
	CHECK_EQ_INT(read_shard("crc0.trace", &c, &h, &records, &err), HB_ERR_DIGEST);
	CHECK_EQ_U64(records, 0);
	CHECK(strstr(err.msg, "last good record 0") == NULL);
	CHECK(strstr(err.msg, "no good record") != NULL);
	free(good);
	/* record 1 carries no lineage: a proposal id there is a defect, not data */
	good = slurp("good.trace", &len);
	if (!good || len != SHARD_END) {
		CHECK(false);
		free(good);
		return;
	}
	le32(good + CH0 + 24 + RB + 24, 5);
	le32(good + CH0 + 12, crc32_ref(good + CH0 + 24, 4 * RB));
	put_file("lin.trace", good, len);
	CHECK_EQ_INT(read_shard("lin.trace", &c, &h, &records, &err), HB_ERR_FORMAT);
	CHECK_STR(err.id, "trace-record");
	CHECK(strstr(err.msg, "last good record 0") != NULL);
	free(good);
}

/* ------------------------------------------------------------ the writer */

static void writer_refuses_what_it_cannot_record(void)
{
	struct hb_trace_header h = small_header(3, 4, 9);
	struct hb_trace_writer *w = NULL;
	struct hb_route r;
	struct hb_error err;
	int fd = open("w.trace", O_WRONLY | O_CREAT | O_TRUNC, 0644);

	CHECK(fd >= 0);
	hb_error_clear(&err);
	h.top_k = 0;
	CHECK_EQ_INT(hb_trace_writer_open(&w, fd, "w.trace", &h, 4, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "trace-header");
	hb_error_clear(&err);
	h.top_k = HB_TRACE_MAX_TOPK + 1;
	CHECK_EQ_INT(hb_trace_writer_open(&w, fd, "w.trace", &h, 4, &err), HB_ERR_INVALID);
	hb_error_clear(&err);
	h.top_k = 3;
	CHECK_EQ_INT(hb_trace_writer_open(&w, fd, "w.trace", &h, 0, &err), HB_ERR_INVALID);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_trace_writer_open(&w, fd, "w.trace", &h, HB_TRACE_MAX_CHUNK_RECORDS + 1, &err),
		     HB_ERR_INVALID);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_trace_writer_open(&w, fd, "w.trace", &h, 4, &err), HB_OK);
	make_route(&r, 0, 3, 4, 9);
	r.layer = 4;
	CHECK_EQ_INT(hb_trace_write(w, &r, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "trace-record");
	hb_error_clear(&err);
	make_route(&r, 0, 3, 4, 9);
	r.ids[2] = 9;
	CHECK_EQ_INT(hb_trace_write(w, &r, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "trace-record");
	hb_error_clear(&err);
	make_route(&r, 1, 3, 4, 9);
	CHECK_EQ_INT(hb_trace_write(w, &r, &err), HB_OK);
	CHECK_EQ_INT(hb_trace_writer_close(w, &err), HB_OK);
	close(fd);
	{
		struct collected c;
		uint64_t records = 0;
		/* the refused records left nothing behind */
		CHECK_EQ_INT(read_shard("w.trace", &c, &h, &records, &err), HB_OK);
		CHECK_EQ_U64(records, 1);
		CHECK_EQ_U64(c.r[0].ordinal, 1);
	}
}

static void io_failures_are_trace_io(void)
{
	struct hb_trace_header h = small_header(3, 4, 9);
	struct hb_trace_writer *w = NULL;
	struct collected c;
	struct hb_error err;
	uint64_t records = 0;
	int fd = open("ro.trace", O_RDONLY | O_CREAT, 0644);

	CHECK(fd >= 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_trace_writer_open(&w, fd, "ro.trace", &h, 4, &err), HB_ERR_IO);
	CHECK_STR(err.id, "trace-io");
	close(fd);
	fd = open(".", O_RDONLY | O_DIRECTORY);
	CHECK(fd >= 0);
	hb_error_clear(&err);
	memset(&c, 0, sizeof(c));
	CHECK_EQ_INT(hb_trace_read(fd, "dir", collect, &c, &h, &records, &err), HB_ERR_IO);
	CHECK_STR(err.id, "trace-io");
	close(fd);
}

/* ------------------------------------------------------------ pipes */

struct pipe_writer {
	int fd;
	uint64_t n;
	int rc;
};

static void *pipe_write(void *arg)
{
	struct pipe_writer *p = arg;
	struct hb_trace_header h = small_header(10, 8, 128);
	struct hb_trace_writer *w = NULL;
	struct hb_route r;
	struct hb_error err;

	hb_error_clear(&err);
	p->rc = hb_trace_writer_open(&w, p->fd, "pipe", &h, 100, &err);
	for (uint64_t i = 0; !p->rc && i < p->n; i++) {
		make_route(&r, i, 10, 8, 128);
		p->rc = hb_trace_write(w, &r, &err);
	}
	if (w && !p->rc)
		p->rc = hb_trace_writer_close(w, &err);
	else if (w)
		hb_trace_writer_close(w, &err);
	close(p->fd);
	return NULL;
}

struct counting {
	uint64_t n, bad;
};

static int count_check(void *ctx, const struct hb_trace_header *h, const struct hb_route *r)
{
	struct counting *c = ctx;
	struct hb_route want;
	make_route(&want, c->n, h->top_k, h->layers, h->experts);
	if (!same_route(&want, r, h->top_k))
		c->bad++;
	c->n++;
	return 0;
}

/* 5000 records of 120 bytes (600 KB) do not fit a pipe buffer: both ends must stream. */
static void reads_from_a_pipe(void)
{
	int fds[2];
	pthread_t t;
	struct pipe_writer p = {0, 5000, -1};
	struct counting c = {0, 0};
	struct hb_trace_header h;
	struct hb_error err;
	uint64_t records = 0;

	CHECK_EQ_INT(pipe(fds), 0);
	p.fd = fds[1];
	CHECK_EQ_INT(pthread_create(&t, NULL, pipe_write, &p), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_trace_read(fds[0], "pipe", count_check, &c, &h, &records, &err), HB_OK);
	pthread_join(t, NULL);
	close(fds[0]);
	CHECK_EQ_INT(p.rc, HB_OK);
	CHECK_EQ_U64(records, 5000);
	CHECK_EQ_U64(c.n, 5000);
	CHECK_EQ_U64(c.bad, 0);
	CHECK_EQ_U64(h.top_k, 10);
}

/* A pipe that closes inside a chunk is a truncated shard, not a short one. */
static void a_pipe_cut_mid_chunk_is_truncated(void)
{
	uint8_t *good;
	size_t len = 0;
	int fds[2];
	struct collected c;
	struct hb_trace_header h;
	struct hb_error err;
	uint64_t records = 0;

	CHECK_EQ_INT(write_shard("good.trace", 3, 4, 9, 4, 10), HB_OK);
	good = slurp("good.trace", &len);
	CHECK(good && len == SHARD_END);
	CHECK_EQ_INT(pipe(fds), 0);
	/* 600 bytes fit the pipe buffer, so one thread can write then read */
	CHECK(write(fds[1], good, 600) == 600);
	close(fds[1]);
	hb_error_clear(&err);
	memset(&c, 0, sizeof(c));
	CHECK_EQ_INT(hb_trace_read(fds[0], "pipe", collect, &c, &h, &records, &err), HB_ERR_SHORT);
	close(fds[0]);
	CHECK_STR(err.id, "trace-truncated");
	CHECK_EQ_U64(err.offset, 600);
	CHECK_EQ_U64(records, 4);
	CHECK(strstr(err.msg, "last good record 3") != NULL);
	free(good);
}

/* The callback's non-zero value stops the walk and is returned. */
static int stop_at_two(void *ctx, const struct hb_trace_header *h, const struct hb_route *r)
{
	(void)h;
	(void)ctx;
	return r->ordinal == 2 ? 42 : 0;
}

static void the_callback_can_stop_the_walk(void)
{
	struct hb_trace_header h;
	struct hb_error err;
	uint64_t records = 0;
	int fd;

	CHECK_EQ_INT(write_shard("s.trace", 3, 4, 9, 4, 10), HB_OK);
	fd = open("s.trace", O_RDONLY);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_trace_read(fd, "s.trace", stop_at_two, NULL, &h, &records, &err), 42);
	CHECK_EQ_U64(records, 2);
	close(fd);
}

static void diag_ids_are_the_table(void)
{
	static const char *const want[] = {"trace-magic", "trace-version", "trace-header", "trace-truncated",
					   "trace-chunk", "trace-crc", "trace-record", "trace-io"};
	CHECK_EQ_U64(HB_TRD_COUNT, HB_ARRAY_LEN(want));
	for (size_t i = 0; i < HB_ARRAY_LEN(want); i++)
		CHECK_STR(hb_trace_diag_id((enum hb_trace_diag)i), want[i]);
	CHECK(hb_trace_diag_id(HB_TRD_COUNT) == NULL);
}

HB_TEST_MAIN(T(round_trip_many_chunks), T(empty_shard_is_the_header), T(one_record_exact_bytes),
	     T(version_2_carries_the_thread),
	     T(every_defect_is_named), T(defect_messages_name_the_last_good_record),
	     T(writer_refuses_what_it_cannot_record), T(io_failures_are_trace_io), T(reads_from_a_pipe),
	     T(a_pipe_cut_mid_chunk_is_truncated), T(the_callback_can_stop_the_walk),
	     T(diag_ids_are_the_table))
