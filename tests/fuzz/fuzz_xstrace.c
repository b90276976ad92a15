/*
 * fuzz_xstrace.c: fuzz target of the stream trace reader (hb_xst_read,
 * hb-run --stream-trace, STREAM TRACE in hebrus-trace(5)) and, through a
 * round trip, of its writer.
 *
 * Input: one flags byte, then a whole stream trace shard.
 *   bit 0  reseal: recompute the header CRC and every complete record's
 *          payload CRC-32 before reading, so that mutations reach the
 *          field checks behind the CRCs instead of all failing xstrace-crc.
 *
 * The shard is read from a buffer that ends where a PROT_NONE page starts,
 * so a read past the shard faults in the plain build as well as under ASan.
 *
 * Invariants, restated from hebrus-trace(5) rather than taken from the
 * reader: the header's fields are in range; every delivered record has a
 * known kind, its ordinal, fields that fit their widths, layer < layers and
 * expert < experts, times in order, and sums that hold as integers
 * (hits + joined + misses = wants without wrapping, useful <= predicted,
 * late <= deadlines); the count returned is the count delivered; reading
 * twice gives the same outcome, id and count; a callback that stops the
 * walk at record k gets its value back with k records counted; a refusal
 * carries an "xstrace-" id and an offset inside the shard, and the shard
 * cut after the last record delivered reads back to the same records; an
 * accepted shard written again by hb_xst_writer (the same header and
 * records) is byte for byte the input.  This file owns only the harness;
 * the reader and writer are libstore/trace/hb_xstrace.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "trace/hb_xstrace.h"


#define FLAG_RESEAL 1u
/* an accepted input of at most 1 MiB holds at most this many records (the
 * smallest is a 16-byte frame and a 64-byte read payload) */
#define MAX_RECORDS (HB_FUZZ_MAX_INPUT / 80 + 1)

struct collect {
	struct hb_xst_rec *r;
	size_t n, cap;
	uint64_t stop_at; /* return 7 at this ordinal (UINT64_MAX: never) */
	bool overflow;
};

static unsigned width_of(enum hb_xst_kind k, unsigned f)
{
	/* the widths as hebrus-trace(5) lists them */
	static const uint8_t tw[] = {8, 4, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8};
	static const uint8_t lw[] = {8, 4, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8};
	static const uint8_t rw[] = {8, 4, 4, 1, 1, 1, 1, 4, 8, 8, 8, 8, 8};

	switch (k) {
	case HB_XST_TOKEN:
		return f < sizeof(tw) ? tw[f] : 0;
	case HB_XST_LAYER:
		return f < sizeof(lw) ? lw[f] : 0;
	case HB_XST_READ:
		return f < sizeof(rw) ? rw[f] : 0;
	default:
		return 0;
	}
}

/* a + b + c == d as integers (no wrap) */
static bool sum3(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	return a <= d && b <= d - a && c == d - a - b;
}

static void check_header(const struct hb_xst_header *h)
{
	HB_FUZZ_ASSERT(h->version == 1 && h->layers >= 1 && h->experts >= 1);
	HB_FUZZ_ASSERT(h->top_k >= 1 && h->top_k <= 64 && h->top_k <= h->experts);
	HB_FUZZ_ASSERT(h->slots >= 1 && h->slot_bytes >= 1 && h->depth >= 1);
	HB_FUZZ_ASSERT((unsigned __int128)h->slots * h->slot_bytes <= h->budget_bytes);
	HB_FUZZ_ASSERT(h->predictor <= 2 && h->policy <= 1);
}

static void check_rec(const struct hb_xst_header *h, const struct hb_xst_rec *r)
{
	const uint64_t *v = r->v;
	unsigned nf = hb_xst_fields(r->kind), pb = 0;

	HB_FUZZ_ASSERT(r->kind == HB_XST_TOKEN || r->kind == HB_XST_LAYER || r->kind == HB_XST_READ);
	HB_FUZZ_ASSERT(nf >= 1 && nf <= HB_XST_MAX_FIELDS);
	for (unsigned f = 0; f < nf; f++) {
		unsigned w = width_of(r->kind, f);
		HB_FUZZ_ASSERT(w >= 1);
		HB_FUZZ_ASSERT(w == 8 || !(v[f] >> (8 * w)));
		pb += w;
	}
	HB_FUZZ_ASSERT(width_of(r->kind, nf) == 0 && pb == hb_xst_payload_bytes(r->kind));
	for (unsigned f = nf; f < HB_XST_MAX_FIELDS; f++)
		HB_FUZZ_ASSERT(v[f] == 0);
	switch (r->kind) {
	case HB_XST_TOKEN:
#define F(x) v[HB_XST_T_##x]
		HB_FUZZ_ASSERT(F(TOKENS) >= 1 && F(PHASE) <= 1 && F(BEGIN) <= F(END));
		HB_FUZZ_ASSERT(F(BYTES_USEFUL) <= F(BYTES_PREDICTED));
		HB_FUZZ_ASSERT(sum3(F(HITS), F(JOINED), F(MISSES), F(WANTS)));
		HB_FUZZ_ASSERT(F(P50) <= F(P95) && F(P95) <= F(P99) && (F(READS) || !F(P99)));
		HB_FUZZ_ASSERT(F(LATE) <= F(DEADLINES));
		HB_FUZZ_ASSERT(F(DEADLINES) || (!F(SLACK_SUM) && !F(SLACK_MIN)));
#undef F
		break;
	case HB_XST_LAYER:
#define F(x) v[HB_XST_L_##x]
		HB_FUZZ_ASSERT(F(LAYER) < h->layers && F(TOKENS) >= 1);
		HB_FUZZ_ASSERT(F(START) <= F(MOE) && F(MOE) <= F(ROUTED) && F(ROUTED) <= F(READY) &&
			       F(READY) <= F(END));
		HB_FUZZ_ASSERT(sum3(F(HITS), F(JOINED), F(MISSES), F(WANTS)));
#undef F
		break;
	case HB_XST_READ:
#define F(x) v[HB_XST_R_##x]
		HB_FUZZ_ASSERT(F(LAYER) < h->layers && F(EXPERT) < h->experts);
		HB_FUZZ_ASSERT(F(CLASS) <= 2 && F(CLASS_END) <= F(CLASS));
		HB_FUZZ_ASSERT(F(STATE) >= 2 && F(STATE) <= 4 && !(F(FLAGS) & ~7u) && F(RESERVED) == 0);
		HB_FUZZ_ASSERT(!(F(FLAGS) & HB_XST_READ_PROMOTED) || F(CLASS_END) == 0);
		HB_FUZZ_ASSERT(!(F(FLAGS) & HB_XST_READ_EXACT) || F(CLASS) == 0);
		HB_FUZZ_ASSERT(F(ISSUE) <= F(START) && F(START) <= F(READY) && F(BYTES) >= 1);
#undef F
		break;
	default:
		break;
	}
}

static bool same(const struct hb_xst_rec *a, const struct hb_xst_rec *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].kind != b[i].kind || memcmp(a[i].v, b[i].v, sizeof(a[i].v)))
			return false;
	return true;
}

static int keep(void *ctx, const struct hb_xst_header *h, uint64_t index, const struct hb_xst_rec *r)
{
	struct collect *c = ctx;

	check_header(h);
	HB_FUZZ_ASSERT(index == c->n);
	check_rec(h, r);
	if (index == c->stop_at)
		return 7;
	if (c->n == MAX_RECORDS) {
		c->overflow = true;
		return 1;
	}
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 16;
		struct hb_xst_rec *g = realloc(c->r, cap * sizeof(*g));
		if (!g)
			return 2; /* out of memory: not a parser finding */
		c->r = g;
		c->cap = cap;
	}
	c->r[c->n++] = *r;
	return 0;
}

static void reseal(uint8_t *b, size_t n)
{
	size_t off = HB_XST_HEADER_BYTES;

	if (n < HB_XST_HEADER_BYTES)
		return;
	hb_fuzz_put32(b + 124, hb_fuzz_crc32(b, 124));
	while (n - off >= HB_XST_FRAME_BYTES) {
		uint32_t pb = hb_fuzz_le32(b + off + 4);

		if (pb > n - off - HB_XST_FRAME_BYTES)
			break;
		hb_fuzz_put32(b + off + 8, hb_fuzz_crc32(b + off + HB_XST_FRAME_BYTES, pb));
		off += HB_XST_FRAME_BYTES + pb;
	}
}

/* A copy of len bytes that ends where an inaccessible page begins. */
struct guarded {
	uint8_t *map, *p;
	size_t maplen;
};

static bool guard(struct guarded *g, const uint8_t *data, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t body = (len + page - 1) / page * page;

	g->maplen = body + page;
	g->map = mmap(NULL, g->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g->map == MAP_FAILED)
		return false;
	if (mprotect(g->map + body, page, PROT_NONE)) {
		munmap(g->map, g->maplen);
		return false;
	}
	g->p = g->map + body - len;
	memcpy(g->p, data, len);
	return true;
}

static void unguard(struct guarded *g)
{
	munmap(g->map, g->maplen);
}

static int read_all(const uint8_t *b, size_t len, struct collect *c, struct hb_xst_header *h, uint64_t *n,
		    struct hb_error *err)
{
	memset(c, 0, sizeof(*c));
	c->stop_at = UINT64_MAX;
	hb_error_clear(err);
	return hb_xst_read(b, len, "fuzz", keep, c, h, n, err);
}

/* The records written again with the same header: the input's bytes. */
static void round_trip(const struct hb_xst_header *h, const struct collect *c, const uint8_t *in, size_t size)
{
	struct hb_xst_writer w;
	struct hb_error err;

	hb_error_clear(&err);
	HB_FUZZ_ASSERT(hb_xst_writer_init(&w, h, &err) == HB_OK);
	for (size_t i = 0; i < c->n; i++)
		HB_FUZZ_ASSERT(hb_xst_write(&w, h, &c->r[i], &err) == HB_OK);
	HB_FUZZ_ASSERT(w.records == c->n);
	HB_FUZZ_ASSERT(w.len == size && !memcmp(w.p, in, size));
	hb_xst_writer_release(&w);
}

/* The bytes of the header and the first n records of an accepted prefix. */
static size_t prefix_bytes(const struct collect *c, size_t n)
{
	size_t off = HB_XST_HEADER_BYTES;

	for (size_t i = 0; i < n; i++)
		off += HB_XST_FRAME_BYTES + hb_xst_payload_bytes(c->r[i].kind);
	return off;
}

static void check_refusal(const uint8_t *b, size_t len, const struct collect *c, const struct hb_error *err)
{
	struct collect p;
	struct hb_xst_header h;
	struct hb_error e2;
	uint64_t n = 0;
	size_t cut;
	int rc;

	HB_FUZZ_ASSERT(err->id && !strncmp(err->id, "xstrace-", 8));
	HB_FUZZ_ASSERT(!err->has_offset || err->offset <= len);
	if (len < HB_XST_HEADER_BYTES || !c->n)
		return;
	/* what was delivered before the defect is a shard of its own */
	cut = prefix_bytes(c, c->n);
	HB_FUZZ_ASSERT(cut < len);
	rc = read_all(b, cut, &p, &h, &n, &e2);
	if (rc == 2) {
		free(p.r);
		return;
	}
	HB_FUZZ_ASSERT(rc == HB_OK && n == c->n && p.n == c->n);
	HB_FUZZ_ASSERT(same(p.r, c->r, c->n));
	free(p.r);
}

int hb_fuzz_xstrace(const uint8_t *data, size_t size)
{
	struct collect c, c2;
	struct hb_xst_header h, h2;
	struct hb_error err, err2;
	struct guarded g;
	uint64_t n = 0, n2 = 0;
	size_t len;
	int rc, rc2, out = HB_FUZZ_REFUSED;

	if (size < 1 || size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	len = size - 1;
	if (!guard(&g, data + 1, len))
		return HB_FUZZ_REFUSED;
	if (data[0] & FLAG_RESEAL)
		reseal(g.p, len);
	rc = read_all(g.p, len, &c, &h, &n, &err);
	HB_FUZZ_ASSERT(!c.overflow);
	if (rc == 2)
		goto done;
	HB_FUZZ_ASSERT(n == c.n);
	/* a second reading agrees */
	rc2 = read_all(g.p, len, &c2, &h2, &n2, &err2);
	if (rc2 != 2) {
		HB_FUZZ_ASSERT(rc2 == rc && n2 == n && err2.code == err.code);
		HB_FUZZ_ASSERT(hb_fuzz_same_id(err2.id, err.id) && !strcmp(err2.field, err.field));
		HB_FUZZ_ASSERT(same(c2.r, c.r, c.n));
	}
	free(c2.r);
	if (rc != HB_OK) {
		check_refusal(g.p, len, &c, &err);
		goto done;
	}
	check_header(&h);
	HB_FUZZ_ASSERT(prefix_bytes(&c, c.n) == len);
	round_trip(&h, &c, g.p, len);
	/* a callback's stop value comes back, with the records before it counted */
	if (c.n) {
		struct collect s;
		uint64_t ns = 0;

		memset(&s, 0, sizeof(s));
		s.stop_at = c.n / 2;
		hb_error_clear(&err2);
		rc2 = hb_xst_read(g.p, len, "fuzz", keep, &s, &h2, &ns, &err2);
		if (rc2 != 2)
			HB_FUZZ_ASSERT(rc2 == 7 && ns == c.n / 2);
		free(s.r);
	}
	out = HB_FUZZ_ACCEPTED;
done:
	free(c.r);
	unguard(&g);
	return out;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_xstrace(data, size);
	return 0;
}
#endif
