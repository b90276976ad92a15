/*
 * Unit tests: stream trace shards (libstore/trace/hb_xstrace.h,
 * hebrus-trace(5) STREAM TRACE).
 *
 * A round trip of one record of each kind, with the header and a token
 * record's bytes checked at the offsets the page gives (an independent
 * bitwise CRC-32, not zlib's); then every refusal: each header field, each
 * frame defect, and each record rule, written (the writer refuses and
 * appends nothing) and read (a record forged past the writer, its CRC
 * made good, is refused naming the record, kind and field at its offset).
 */
#include "hb_base.h"
#include "harness.h"
#include "trace/hb_xstrace.h"

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

static uint64_t rd(const uint8_t *p, unsigned w)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < w; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void wr(uint8_t *p, uint64_t v, unsigned w)
{
	for (unsigned i = 0; i < w; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void header(struct hb_xst_header *h)
{
	memset(h, 0, sizeof(*h));
	h->version = 1;
	h->layers = 4, h->experts = 16, h->top_k = 2, h->slots = 8;
	h->slot_bytes = 8192, h->budget_bytes = 65536 + 100;
	h->depth = 4, h->threads = 4, h->predictor = 2, h->policy = 1, h->direct = true;
	for (int i = 0; i < 32; i++)
		h->artifact[i] = (uint8_t)(i * 7 + 1);
}

static void token_rec(struct hb_xst_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->kind = HB_XST_TOKEN;
	uint64_t v[] = { 12, 1, 1, 1000, 5000, 81920, 16384, 8192, 8192, 8, 5, 1, 2, 4, 100, 200, 300, 3, 0,
			 (uint64_t)-50, (uint64_t)-40, 777, 900 };
	memcpy(r->v, v, sizeof(v));
}

static void layer_rec(struct hb_xst_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->kind = HB_XST_LAYER;
	uint64_t v[] = { 12, 3, 1, 1000, 1500, 1600, 2500, 4000, 222, 2, 1, 1, 0 };
	memcpy(r->v, v, sizeof(v));
}

static void read_rec(struct hb_xst_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->kind = HB_XST_READ;
	uint64_t v[] = { 12, 3, 15, 1, 0, 2, HB_XST_READ_PROMOTED, 0, 1100, 1200, 1300, 1600, 8192 };
	memcpy(r->v, v, sizeof(v));
}

struct got {
	uint64_t n;
	struct hb_xst_rec r[8];
};

static int collect(void *ctx, const struct hb_xst_header *h, uint64_t index, const struct hb_xst_rec *r)
{
	struct got *g = ctx;
	(void)h;
	if (g->n < 8)
		g->r[g->n] = *r;
	g->n++;
	return 0;
}

static void build(struct hb_xst_writer *w, struct hb_xst_header *h)
{
	struct hb_xst_rec r;
	struct hb_error err;
	hb_error_clear(&err);

	header(h);
	CHECK_EQ_INT(hb_xst_writer_init(w, h, &err), HB_OK);
	token_rec(&r);
	CHECK_EQ_INT(hb_xst_write(w, h, &r, &err), HB_OK);
	layer_rec(&r);
	CHECK_EQ_INT(hb_xst_write(w, h, &r, &err), HB_OK);
	read_rec(&r);
	CHECK_EQ_INT(hb_xst_write(w, h, &r, &err), HB_OK);
}

static void round_trip_and_bytes(void)
{
	struct hb_xst_writer w;
	struct hb_xst_header h, back;
	struct hb_xst_rec want;
	struct got g = { 0 };
	struct hb_error err;
	uint64_t n = 0;
	hb_error_clear(&err);

	build(&w, &h);
	/* sizes: header 128, frames 16 + 176, 16 + 96, 16 + 64 */
	CHECK_EQ_U64(hb_xst_payload_bytes(HB_XST_TOKEN), 176);
	CHECK_EQ_U64(hb_xst_payload_bytes(HB_XST_LAYER), 96);
	CHECK_EQ_U64(hb_xst_payload_bytes(HB_XST_READ), 64);
	CHECK_EQ_U64(w.len, 128 + 192 + 112 + 80);
	CHECK(!memcmp(w.p, "HBXSTRC1", 8));
	CHECK_EQ_U64(rd(w.p + 8, 4), 1);
	CHECK_EQ_U64(rd(w.p + 12, 4), 128);
	CHECK_EQ_U64(rd(w.p + 16, 4), 4);
	CHECK_EQ_U64(rd(w.p + 28, 4), 8);
	CHECK_EQ_U64(rd(w.p + 32, 8), 8192);
	CHECK_EQ_U64(rd(w.p + 56, 4), 2);
	CHECK_EQ_U64(rd(w.p + 64, 4), 1);
	CHECK_EQ_U64(w.p[72], 1);
	CHECK_EQ_U64(rd(w.p + 124, 4), crc32_ref(w.p, 124));
	/* the token record's frame and fields at the page's offsets */
	CHECK_EQ_U64(rd(w.p + 128, 4), 1);
	CHECK_EQ_U64(rd(w.p + 132, 4), 176);
	CHECK_EQ_U64(rd(w.p + 136, 4), crc32_ref(w.p + 144, 176));
	CHECK_EQ_U64(rd(w.p + 144, 8), 12);      /* token */
	CHECK_EQ_U64(rd(w.p + 152, 4), 1);       /* tokens */
	CHECK_EQ_U64(rd(w.p + 156, 4), 1);       /* phase */
	CHECK_EQ_U64(rd(w.p + 144 + 160, 8), 777); /* exposed_ns */
	CHECK_EQ_U64(rd(w.p + 144 + 144, 8), (uint64_t)-50); /* slack_sum_ns */
	CHECK_EQ_INT(hb_xst_read(w.p, w.len, "t", collect, &g, &back, &n, &err), HB_OK);
	CHECK_EQ_U64(n, 3);
	CHECK_EQ_U64(g.n, 3);
	CHECK_EQ_U64(back.slots, 8);
	CHECK(back.direct);
	CHECK(!memcmp(back.artifact, h.artifact, 32));
	token_rec(&want);
	CHECK(!memcmp(g.r[0].v, want.v, sizeof(want.v)));
	layer_rec(&want);
	CHECK(!memcmp(g.r[1].v, want.v, sizeof(want.v)));
	read_rec(&want);
	CHECK(!memcmp(g.r[2].v, want.v, sizeof(want.v)));
	CHECK_STR(hb_xst_field_name(HB_XST_TOKEN, HB_XST_T_SLACK_MIN), "slack_min_ns");
	CHECK(hb_xst_field_signed(HB_XST_TOKEN, HB_XST_T_SLACK_SUM));
	CHECK(!hb_xst_field_signed(HB_XST_TOKEN, HB_XST_T_EXPOSED));
	hb_xst_writer_release(&w);
}

/* A header byte range set to v (CRC repaired unless the CRC is the target). */
static void header_case(unsigned off, unsigned width, uint64_t v, const char *id, const char *field)
{
	struct hb_xst_writer w;
	struct hb_xst_header h, back;
	struct hb_error err;
	int rc;
	hb_error_clear(&err);

	build(&w, &h);
	wr(w.p + off, v, width);
	if (off != 124)
		wr(w.p + 124, crc32_ref(w.p, 124), 4);
	hb_error_clear(&err);
	rc = hb_xst_read(w.p, w.len, "t", NULL, NULL, &back, NULL, &err);
	CHECK(rc != HB_OK);
	CHECK_STR(err.id, id);
	CHECK(err.has_offset);
	CHECK_EQ_U64(err.offset, off > 104 && off < 124 ? 104 : off);
	if (field && !strstr(err.msg, field))
		hb_check_fail(__FILE__, __LINE__, "header offset %u: '%s' does not name %s", off, err.msg, field);
	hb_xst_writer_release(&w);
}

static void every_header_field_is_refused(void)
{
	header_case(0, 1, 'X', "xstrace-magic", NULL);
	header_case(8, 4, 2, "xstrace-version", "version 2");
	header_case(124, 4, 0, "xstrace-header", "CRC");
	header_case(12, 4, 64, "xstrace-header", "header_bytes");
	header_case(16, 4, 0, "xstrace-header", "layers");
	header_case(20, 4, 0, "xstrace-header", "experts");
	header_case(24, 4, 17, "xstrace-header", "top_k");
	header_case(28, 4, 0, "xstrace-header", "slots");
	header_case(32, 8, 0, "xstrace-header", "slot_bytes");
	header_case(40, 8, 8192 * 8 - 1, "xstrace-header", "budget_bytes");
	header_case(48, 4, 0, "xstrace-header", "depth");
	header_case(56, 4, 3, "xstrace-header", "predictor");
	header_case(60, 4, 2, "xstrace-header", "policy");
	header_case(64, 4, 3, "xstrace-header", "flags");
	header_case(68, 4, 1, "xstrace-header", "reserved");
	header_case(110, 1, 1, "xstrace-header", "reserved");
	{ /* a writer refuses the header a reader would refuse */
		struct hb_xst_writer w;
		struct hb_xst_header h;
		struct hb_error err;
		hb_error_clear(&err);
		header(&h);
		h.policy = 9;
		CHECK(hb_xst_writer_init(&w, &h, &err) != HB_OK);
		CHECK_STR(err.id, "xstrace-header");
		CHECK(w.p == NULL);
	}
}

static void frame_defects_are_refused(void)
{
	struct hb_xst_writer w;
	struct hb_xst_header h, back;
	struct hb_error err;
	struct got g = { 0 };
	uint64_t n;
	hb_error_clear(&err);

	build(&w, &h);
	/* truncated inside the header, a frame and a payload: the good records before stay delivered */
	hb_error_clear(&err);
	CHECK(hb_xst_read(w.p, 100, "t", NULL, NULL, &back, NULL, &err) != HB_OK);
	CHECK_STR(err.id, "xstrace-truncated");
	hb_error_clear(&err);
	CHECK(hb_xst_read(w.p, 128 + 192 + 8, "t", collect, &g, &back, &n, &err) != HB_OK);
	CHECK_STR(err.id, "xstrace-truncated");
	CHECK_EQ_U64(g.n, 1);
	CHECK_EQ_U64(n, 1);
	hb_error_clear(&err);
	CHECK(hb_xst_read(w.p, w.len - 1, "t", NULL, NULL, &back, NULL, &err) != HB_OK);
	CHECK_STR(err.id, "xstrace-truncated");
	/* an unknown kind, a wrong payload size, a reserved word */
	wr(w.p + 128, 9, 4);
	hb_error_clear(&err);
	CHECK(hb_xst_read(w.p, w.len, "t", NULL, NULL, &back, NULL, &err) != HB_OK);
	CHECK_STR(err.id, "xstrace-kind");
	CHECK_EQ_U64(err.offset, 128);
	wr(w.p + 128, 1, 4);
	wr(w.p + 132, 175, 4);
	hb_error_clear(&err);
	CHECK(hb_xst_read(w.p, w.len, "t", NULL, NULL, &back, NULL, &err) != HB_OK);
	CHECK_STR(err.id, "xstrace-kind");
	wr(w.p + 132, 176, 4);
	wr(w.p + 140, 1, 4);
	hb_error_clear(&err);
	CHECK(hb_xst_read(w.p, w.len, "t", NULL, NULL, &back, NULL, &err) != HB_OK);
	CHECK_STR(err.id, "xstrace-kind");
	CHECK_EQ_U64(err.offset, 140);
	wr(w.p + 140, 0, 4);
	/* a payload byte flipped: the CRC */
	w.p[128 + 16 + 3] ^= 1;
	hb_error_clear(&err);
	CHECK(hb_xst_read(w.p, w.len, "t", NULL, NULL, &back, NULL, &err) != HB_OK);
	CHECK_STR(err.id, "xstrace-crc");
	CHECK_EQ_U64(err.offset, 128);
	hb_xst_writer_release(&w);
	CHECK_STR(hb_xst_diag_id(HB_XSTD_RECORD), "xstrace-record");
	CHECK(hb_xst_diag_id(HB_XSTD_COUNT) == NULL);
}

/*
 * One broken rule: field f of a record of kind k set to v.  The writer
 * refuses it naming the field and appends nothing; the same record forged
 * into a shard (its CRC made good) is refused by the reader at the field's
 * offset, naming it.
 */
static void rule_case(enum hb_xst_kind k, unsigned f, uint64_t v, unsigned also, uint64_t also_v)
{
	struct hb_xst_writer w;
	struct hb_xst_header h, back;
	struct hb_xst_rec r, good;
	struct hb_error err;
	char want[96];
	size_t len0, at;
	unsigned foff = 0;
	bool fits = true;
	uint32_t pb = hb_xst_payload_bytes(k);
	int rc;
	hb_error_clear(&err);

	header(&h);
	CHECK_EQ_INT(hb_xst_writer_init(&w, &h, &err), HB_OK);
	if (k == HB_XST_TOKEN)
		token_rec(&good);
	else if (k == HB_XST_LAYER)
		layer_rec(&good);
	else
		read_rec(&good);
	r = good;
	r.v[f] = v;
	if (also != f)
		r.v[also] = also_v;
	snprintf(want, sizeof(want), "record[0].%s.%s", hb_xst_kind_name(k), hb_xst_field_name(k, f));
	len0 = w.len;
	hb_error_clear(&err);
	rc = hb_xst_write(&w, &h, &r, &err);
	CHECK(rc != HB_OK);
	CHECK_STR(err.id, "xstrace-record");
	if (!strstr(err.field, want))
		hb_check_fail(__FILE__, __LINE__, "writer: field '%s' is not %s", err.field, want);
	CHECK_EQ_U64(w.len, len0);
	CHECK_EQ_U64(w.records, 0);
	/* forge: write the good record, then patch its payload field by field */
	CHECK_EQ_INT(hb_xst_write(&w, &h, &good, &err), HB_OK);
	at = len0 + HB_XST_FRAME_BYTES;
	for (unsigned i = 0, o = 0; i < hb_xst_fields(k); i++) {
		unsigned width = 0;
		/* widths from the page: the payload is the fields back to back */
		if (k == HB_XST_TOKEN)
			width = (i == 1 || i == 2) ? 4 : 8;
		else if (k == HB_XST_LAYER)
			width = (i == 1 || i == 2) ? 4 : 8;
		else
			width = (i == 1 || i == 2 || i == 7) ? 4 : (i >= 3 && i <= 6) ? 1 : 8;
		if (i == f)
			foff = o;
		fits &= width == 8 || !(r.v[i] >> (8 * width));
		wr(w.p + at + o, r.v[i], width);
		o += width;
	}
	wr(w.p + len0 + 8, crc32_ref(w.p + at, pb), 4);
	if (!fits) { /* the bytes cannot hold it: only the writer's refusal applies */
		hb_xst_writer_release(&w);
		return;
	}
	hb_error_clear(&err);
	rc = hb_xst_read(w.p, w.len, "shard", NULL, NULL, &back, NULL, &err);
	CHECK(rc != HB_OK);
	CHECK_STR(err.id, "xstrace-record");
	if (!strstr(err.field, want))
		hb_check_fail(__FILE__, __LINE__, "reader: field '%s' is not %s", err.field, want);
	CHECK(strstr(err.field, "shard") != NULL);
	CHECK_EQ_U64(err.offset, at + foff);
	hb_xst_writer_release(&w);
}

static void every_record_rule_is_refused_by_field(void)
{
	/* token */
	rule_case(HB_XST_TOKEN, HB_XST_T_TOKENS, 0, HB_XST_T_TOKENS, 0);
	rule_case(HB_XST_TOKEN, HB_XST_T_PHASE, 2, HB_XST_T_PHASE, 0);
	rule_case(HB_XST_TOKEN, HB_XST_T_END, 999, HB_XST_T_END, 0);
	rule_case(HB_XST_TOKEN, HB_XST_T_BYTES_USEFUL, 16385, HB_XST_T_BYTES_USEFUL, 0);
	rule_case(HB_XST_TOKEN, HB_XST_T_WANTS, 9, HB_XST_T_WANTS, 0);
	/* hits 5 + joined + misses 2 wrapping past 2^64 to wants 0 (fuzz_xstrace found it) */
	rule_case(HB_XST_TOKEN, HB_XST_T_WANTS, 0, HB_XST_T_JOINED, UINT64_MAX - 6);
	rule_case(HB_XST_TOKEN, HB_XST_T_P95, 99, HB_XST_T_P95, 0);
	rule_case(HB_XST_TOKEN, HB_XST_T_P99, 199, HB_XST_T_P99, 0);
	rule_case(HB_XST_TOKEN, HB_XST_T_P99, 300, HB_XST_T_READS, 0);
	rule_case(HB_XST_TOKEN, HB_XST_T_LATE, 4, HB_XST_T_LATE, 0);
	/* without deadlines: late 0 first, then the slack fields must be zero */
	rule_case(HB_XST_TOKEN, HB_XST_T_SLACK_SUM, 5, HB_XST_T_DEADLINES, 0);
	/* tokens is u32: a value past 32 bits does not fit */
	rule_case(HB_XST_TOKEN, HB_XST_T_TOKENS, 1ull << 32, HB_XST_T_TOKENS, 0);
	/* layer */
	rule_case(HB_XST_LAYER, HB_XST_L_LAYER, 4, HB_XST_L_LAYER, 0);
	rule_case(HB_XST_LAYER, HB_XST_L_TOKENS, 0, HB_XST_L_TOKENS, 0);
	rule_case(HB_XST_LAYER, HB_XST_L_MOE, 999, HB_XST_L_MOE, 0);
	rule_case(HB_XST_LAYER, HB_XST_L_ROUTED, 1499, HB_XST_L_ROUTED, 0);
	rule_case(HB_XST_LAYER, HB_XST_L_READY, 1599, HB_XST_L_READY, 0);
	rule_case(HB_XST_LAYER, HB_XST_L_END, 2499, HB_XST_L_END, 0);
	rule_case(HB_XST_LAYER, HB_XST_L_WANTS, 3, HB_XST_L_WANTS, 0);
	rule_case(HB_XST_LAYER, HB_XST_L_WANTS, 0, HB_XST_L_JOINED, UINT64_MAX);
	/* read */
	rule_case(HB_XST_READ, HB_XST_R_LAYER, 4, HB_XST_R_LAYER, 0);
	rule_case(HB_XST_READ, HB_XST_R_EXPERT, 16, HB_XST_R_EXPERT, 0);
	rule_case(HB_XST_READ, HB_XST_R_CLASS, 3, HB_XST_R_CLASS, 0);
	rule_case(HB_XST_READ, HB_XST_R_CLASS_END, 2, HB_XST_R_CLASS_END, 0);
	rule_case(HB_XST_READ, HB_XST_R_STATE, 1, HB_XST_R_STATE, 0);
	rule_case(HB_XST_READ, HB_XST_R_FLAGS, 8, HB_XST_R_FLAGS, 0);
	rule_case(HB_XST_READ, HB_XST_R_FLAGS, HB_XST_READ_PROMOTED, HB_XST_R_CLASS_END, 1);
	rule_case(HB_XST_READ, HB_XST_R_FLAGS, HB_XST_READ_EXACT, HB_XST_R_FLAGS, 0);
	rule_case(HB_XST_READ, HB_XST_R_RESERVED, 1, HB_XST_R_RESERVED, 0);
	rule_case(HB_XST_READ, HB_XST_R_START, 1099, HB_XST_R_START, 0);
	rule_case(HB_XST_READ, HB_XST_R_READY, 1199, HB_XST_R_READY, 0);
	rule_case(HB_XST_READ, HB_XST_R_BYTES, 0, HB_XST_R_BYTES, 0);
	rule_case(HB_XST_READ, HB_XST_R_CLASS, 256, HB_XST_R_CLASS, 0);
}

static void a_null_callback_only_checks(void)
{
	struct hb_xst_writer w;
	struct hb_xst_header h, back;
	struct hb_error err;
	uint64_t n = 9;
	hb_error_clear(&err);

	build(&w, &h);
	CHECK_EQ_INT(hb_xst_read(w.p, w.len, "t", (hb_xst_record_fn)(uintptr_t)0, NULL, &back, &n, &err), HB_OK);
	CHECK_EQ_U64(n, 3);
	hb_xst_writer_release(&w);
}

HB_TEST_MAIN(T(round_trip_and_bytes), T(every_header_field_is_refused), T(frame_defects_are_refused),
	     T(every_record_rule_is_refused_by_field), T(a_null_callback_only_checks))
