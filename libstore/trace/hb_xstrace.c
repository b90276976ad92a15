/*
 * hb_xstrace.c: stream trace shards (see hb_xstrace.h for the byte layout).
 * Field tables drive encoding, decoding, range checks and names, so a
 * field is refused by the name a reader prints.
 */
#include "hb_base.h"
#include "hb_xstrace.h"

#include <zlib.h>

static const char *const diag_ids[] = {
#define HB_XST_ROW_(sym, id, meaning) id,
	HB_XST_DIAGS(HB_XST_ROW_)
#undef HB_XST_ROW_
};

const char *hb_xst_diag_id(enum hb_xst_diag d)
{
	return (unsigned)d < HB_XSTD_COUNT ? diag_ids[d] : NULL;
}

struct field {
	const char *name;
	uint8_t width;
	bool sgn;
};

#define HB_XST_F_(sym, name, w, s) {name, w, s},
static const struct field token_f[] = { HB_XST_TOKEN_FIELDS(HB_XST_F_) };
static const struct field layer_f[] = { HB_XST_LAYER_FIELDS(HB_XST_F_) };
static const struct field read_f[] = { HB_XST_READ_FIELDS(HB_XST_F_) };
#undef HB_XST_F_

static const struct {
	const char *name;
	const struct field *f;
	unsigned n;
} kinds[HB_XST_KINDS] = {
	{NULL, NULL, 0},
	{"token", token_f, HB_XST_TOKEN_NF},
	{"layer", layer_f, HB_XST_LAYER_NF},
	{"read", read_f, HB_XST_READ_NF},
};

static bool known(enum hb_xst_kind k)
{
	return k >= HB_XST_TOKEN && k < HB_XST_KINDS;
}

const char *hb_xst_kind_name(enum hb_xst_kind k)
{
	return known(k) ? kinds[k].name : NULL;
}

unsigned hb_xst_fields(enum hb_xst_kind k)
{
	return known(k) ? kinds[k].n : 0;
}

const char *hb_xst_field_name(enum hb_xst_kind k, unsigned f)
{
	return known(k) && f < kinds[k].n ? kinds[k].f[f].name : NULL;
}

bool hb_xst_field_signed(enum hb_xst_kind k, unsigned f)
{
	return known(k) && f < kinds[k].n && kinds[k].f[f].sgn;
}

uint32_t hb_xst_payload_bytes(enum hb_xst_kind k)
{
	uint32_t n = 0;

	if (!known(k))
		return 0;
	for (unsigned i = 0; i < kinds[k].n; i++)
		n += kinds[k].f[i].width;
	return n;
}

/* ------------------------------------------------------------ bytes */

static void putn(uint8_t *p, uint64_t v, unsigned w)
{
	for (unsigned i = 0; i < w; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t getn(const uint8_t *p, unsigned w)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < w; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static uint32_t crc(const uint8_t *p, size_t n)
{
	return (uint32_t)crc32(crc32(0L, Z_NULL, 0), p, (uInt)n);
}

static bool zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* ------------------------------------------------------------ header */

static void encode_header(const struct hb_xst_header *h, uint8_t *b)
{
	memset(b, 0, HB_XST_HEADER_BYTES);
	memcpy(b, HB_XST_MAGIC, 8);
	putn(b + 8, HB_XST_VERSION, 4);
	putn(b + 12, HB_XST_HEADER_BYTES, 4);
	putn(b + 16, h->layers, 4);
	putn(b + 20, h->experts, 4);
	putn(b + 24, h->top_k, 4);
	putn(b + 28, h->slots, 4);
	putn(b + 32, h->slot_bytes, 8);
	putn(b + 40, h->budget_bytes, 8);
	putn(b + 48, h->depth, 4);
	putn(b + 52, h->threads, 4);
	putn(b + 56, h->predictor, 4);
	putn(b + 60, h->policy, 4);
	putn(b + 64, h->direct ? 1 : 0, 4);
	memcpy(b + 72, h->artifact, HB_SHA256_BYTES);
	putn(b + 124, crc(b, 124), 4);
}

static int header_bad(struct hb_error *err, const char *what, uint64_t off, const char *field, const char *rule)
{
	return hb_error_diag(err, diag_ids[HB_XSTD_HEADER], HB_ERR_FORMAT, what, true, off, "header %s: %s", field,
			     rule);
}

/* The header's fields from b (HB_XST_HEADER_BYTES), checked in offset order. */
static int decode_header(const uint8_t *b, const char *what, struct hb_xst_header *h, struct hb_error *err)
{
	uint32_t flags;

	memset(h, 0, sizeof(*h));
	if (memcmp(b, HB_XST_MAGIC, 8))
		return hb_error_diag(err, diag_ids[HB_XSTD_MAGIC], HB_ERR_FORMAT, what, true, 0,
				     "not a stream trace shard (magic is not %s)", HB_XST_MAGIC);
	h->version = (uint32_t)getn(b + 8, 4);
	if (h->version != HB_XST_VERSION)
		return hb_error_diag(err, diag_ids[HB_XSTD_VERSION], HB_ERR_UNSUPPORTED, what, true, 8,
				     "version %u (this reader knows %u)", h->version, HB_XST_VERSION);
	if (getn(b + 124, 4) != crc(b, 124))
		return header_bad(err, what, 124, "CRC", "does not match bytes 0 to 123");
	if (getn(b + 12, 4) != HB_XST_HEADER_BYTES)
		return header_bad(err, what, 12, "header_bytes", "must be 128");
	h->layers = (uint32_t)getn(b + 16, 4), h->experts = (uint32_t)getn(b + 20, 4);
	h->top_k = (uint32_t)getn(b + 24, 4), h->slots = (uint32_t)getn(b + 28, 4);
	h->slot_bytes = getn(b + 32, 8), h->budget_bytes = getn(b + 40, 8);
	h->depth = (uint32_t)getn(b + 48, 4), h->threads = (uint32_t)getn(b + 52, 4);
	h->predictor = (uint32_t)getn(b + 56, 4), h->policy = (uint32_t)getn(b + 60, 4);
	flags = (uint32_t)getn(b + 64, 4);
	h->direct = flags & 1;
	memcpy(h->artifact, b + 72, HB_SHA256_BYTES);
	if (!h->layers)
		return header_bad(err, what, 16, "layers", "must be at least 1");
	if (!h->experts)
		return header_bad(err, what, 20, "experts", "must be at least 1");
	if (!h->top_k || h->top_k > 64 || h->top_k > h->experts)
		return header_bad(err, what, 24, "top_k", "must be 1 to 64 and at most experts");
	if (!h->slots)
		return header_bad(err, what, 28, "slots", "must be at least 1");
	if (!h->slot_bytes)
		return header_bad(err, what, 32, "slot_bytes", "must be at least 1");
	if (h->budget_bytes / h->slots < h->slot_bytes)
		return header_bad(err, what, 40, "budget_bytes", "must hold slots x slot_bytes");
	if (!h->depth)
		return header_bad(err, what, 48, "depth", "must be at least 1");
	if (h->predictor > 2)
		return header_bad(err, what, 56, "predictor", "must be 0 (none), 1 (previous) or 2 (router-ahead)");
	if (h->policy > 1)
		return header_bad(err, what, 60, "policy", "must be 0 (lru) or 1 (score)");
	if (flags & ~1u)
		return header_bad(err, what, 64, "flags", "only bit 0 is defined");
	if (!zero(b + 68, 4))
		return header_bad(err, what, 68, "reserved", "must be zero");
	if (!zero(b + 104, 20))
		return header_bad(err, what, 104, "reserved", "must be zero");
	return HB_OK;
}

/* ------------------------------------------------------------ records */

/* a + b + c == d as integers: a sum that wraps past 2^64 is not d */
static bool sums_to(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	return a <= d && b <= d - a && c == d - a - b;
}

/* The first field of r that breaks its kind's rules, or -1; *rule says why. */
static int check_rec(const struct hb_xst_header *h, const struct hb_xst_rec *r, const char **rule)
{
	const uint64_t *v = r->v;

	for (unsigned i = 0; i < kinds[r->kind].n; i++) {
		unsigned w = kinds[r->kind].f[i].width;
		if (w < 8 && v[i] >> (8 * w)) {
			*rule = "does not fit its width";
			return (int)i;
		}
	}
#define RULE(cond, field, why) \
	do { \
		if (!(cond)) { \
			*rule = why; \
			return field; \
		} \
	} while (0)
	switch (r->kind) {
	case HB_XST_TOKEN:
#define F(x) HB_XST_T_##x
		RULE(v[F(TOKENS)] >= 1, F(TOKENS), "must be at least 1");
		RULE(v[F(PHASE)] <= 1, F(PHASE), "must be 0 (prefill) or 1 (decode)");
		RULE(v[F(BEGIN)] <= v[F(END)], F(END), "must not precede begin_ns");
		RULE(v[F(BYTES_USEFUL)] <= v[F(BYTES_PREDICTED)], F(BYTES_USEFUL), "must not exceed bytes_predicted");
		RULE(sums_to(v[F(HITS)], v[F(JOINED)], v[F(MISSES)], v[F(WANTS)]), F(WANTS), "must be hits + joined + misses");
		RULE(v[F(P50)] <= v[F(P95)], F(P95), "must not be below ready_p50_ns");
		RULE(v[F(P95)] <= v[F(P99)], F(P99), "must not be below ready_p95_ns");
		RULE(v[F(READS)] || !v[F(P99)], F(P99), "must be 0 without reads");
		RULE(v[F(LATE)] <= v[F(DEADLINES)], F(LATE), "must not exceed deadlines");
		RULE(v[F(DEADLINES)] || !v[F(SLACK_SUM)], F(SLACK_SUM), "must be 0 without deadlines");
		RULE(v[F(DEADLINES)] || !v[F(SLACK_MIN)], F(SLACK_MIN), "must be 0 without deadlines");
#undef F
		break;
	case HB_XST_LAYER:
#define F(x) HB_XST_L_##x
		RULE(v[F(LAYER)] < h->layers, F(LAYER), "must be below the header's layers");
		RULE(v[F(TOKENS)] >= 1, F(TOKENS), "must be at least 1");
		RULE(v[F(START)] <= v[F(MOE)], F(MOE), "must not precede start_ns");
		RULE(v[F(MOE)] <= v[F(ROUTED)], F(ROUTED), "must not precede moe_ns");
		RULE(v[F(ROUTED)] <= v[F(READY)], F(READY), "must not precede routed_ns");
		RULE(v[F(READY)] <= v[F(END)], F(END), "must not precede ready_ns");
		RULE(sums_to(v[F(HITS)], v[F(JOINED)], v[F(MISSES)], v[F(WANTS)]), F(WANTS), "must be hits + joined + misses");
#undef F
		break;
	case HB_XST_READ:
#define F(x) HB_XST_R_##x
		RULE(v[F(LAYER)] < h->layers, F(LAYER), "must be below the header's layers");
		RULE(v[F(EXPERT)] < h->experts, F(EXPERT), "must be below the header's experts");
		RULE(v[F(CLASS)] <= 2, F(CLASS), "must be 0 (P0), 1 (P1) or 2 (P2)");
		RULE(v[F(CLASS_END)] <= v[F(CLASS)], F(CLASS_END), "must not be above the issued class");
		RULE(v[F(STATE)] >= 2 && v[F(STATE)] <= 4, F(STATE), "must be 2 (done), 3 (failed) or 4 (cancelled)");
		RULE(!(v[F(FLAGS)] & ~7u), F(FLAGS), "only bits 0, 1 and 2 are defined");
		RULE(!(v[F(FLAGS)] & HB_XST_READ_PROMOTED) || v[F(CLASS_END)] == 0, F(FLAGS),
		     "bit 1 (promoted) needs class_end 0");
		RULE(!(v[F(FLAGS)] & HB_XST_READ_EXACT) || v[F(CLASS)] == 0, F(FLAGS), "bit 0 (exact) needs class 0");
		RULE(v[F(RESERVED)] == 0, F(RESERVED), "must be zero");
		RULE(v[F(ISSUE)] <= v[F(START)], F(START), "must not precede issue_ns");
		RULE(v[F(START)] <= v[F(READY)], F(READY), "must not precede start_ns");
		RULE(v[F(BYTES)] >= 1, F(BYTES), "must be at least 1");
#undef F
		break;
	default:
		*rule = "unknown kind";
		return 0;
	}
#undef RULE
	return -1;
}

static int rec_bad(struct hb_error *err, int code, const char *what, uint64_t index, enum hb_xst_kind k, int f,
		   const char *rule, uint64_t off)
{
	char field[HB_ERROR_FIELD_MAX];

	snprintf(field, sizeof(field), "%s: record[%" PRIu64 "].%s.%s", what, index, kinds[k].name,
		 kinds[k].f[f].name);
	return hb_error_diag(err, diag_ids[HB_XSTD_RECORD], code, field, true, off, "%s", rule);
}

/* ------------------------------------------------------------ writer */

static int grow(struct hb_xst_writer *w, size_t n, struct hb_error *err)
{
	size_t cap = w->cap ? w->cap : 4096;
	uint8_t *p;

	if (w->len + n <= w->cap)
		return HB_OK;
	while (cap < w->len + n)
		cap *= 2;
	if (!(p = realloc(w->p, cap)))
		return hb_error_set(err, HB_ERR_NOMEM, "stream-trace", "out of memory");
	w->p = p, w->cap = cap;
	return HB_OK;
}

int hb_xst_writer_init(struct hb_xst_writer *w, const struct hb_xst_header *h, struct hb_error *err)
{
	struct hb_xst_header back;
	int rc;

	memset(w, 0, sizeof(*w));
	if ((rc = grow(w, HB_XST_HEADER_BYTES, err)))
		return rc;
	encode_header(h, w->p);
	if ((rc = decode_header(w->p, "stream-trace", &back, err))) {
		hb_xst_writer_release(w);
		return rc;
	}
	w->len = HB_XST_HEADER_BYTES;
	return HB_OK;
}

int hb_xst_write(struct hb_xst_writer *w, const struct hb_xst_header *h, const struct hb_xst_rec *r,
		 struct hb_error *err)
{
	const char *rule = NULL;
	uint32_t pb;
	uint8_t *p;
	int f, rc;

	if (!known(r->kind))
		return hb_error_diag(err, diag_ids[HB_XSTD_KIND], HB_ERR_INVALID, "stream-trace", false, 0,
				     "record kind %d is unknown", (int)r->kind);
	if ((f = check_rec(h, r, &rule)) >= 0)
		return rec_bad(err, HB_ERR_INVALID, "stream-trace", w->records, r->kind, f, rule, w->len);
	pb = hb_xst_payload_bytes(r->kind);
	if ((rc = grow(w, HB_XST_FRAME_BYTES + pb, err)))
		return rc;
	p = w->p + w->len;
	memset(p, 0, HB_XST_FRAME_BYTES);
	putn(p, (uint64_t)r->kind, 4);
	putn(p + 4, pb, 4);
	for (unsigned i = 0, off = HB_XST_FRAME_BYTES; i < kinds[r->kind].n; off += kinds[r->kind].f[i].width, i++)
		putn(p + off, r->v[i], kinds[r->kind].f[i].width);
	putn(p + 8, crc(p + HB_XST_FRAME_BYTES, pb), 4);
	w->len += HB_XST_FRAME_BYTES + pb;
	w->records++;
	return HB_OK;
}

void hb_xst_writer_release(struct hb_xst_writer *w)
{
	free(w->p);
	memset(w, 0, sizeof(*w));
}

/* ------------------------------------------------------------ reader */

bool hb_xst_is(const uint8_t *buf, size_t len)
{
	return len >= 8 && !memcmp(buf, HB_XST_MAGIC, 8);
}

int hb_xst_read(const uint8_t *buf, size_t len, const char *what, hb_xst_record_fn fn, void *ctx,
		struct hb_xst_header *h, uint64_t *records, struct hb_error *err)
{
	uint64_t n = 0;
	size_t off = HB_XST_HEADER_BYTES;
	int rc = HB_OK;

	if (records)
		*records = 0;
	if (len < 8 || memcmp(buf, HB_XST_MAGIC, 8))
		return hb_error_diag(err, diag_ids[HB_XSTD_MAGIC], HB_ERR_FORMAT, what, true, 0,
				     "not a stream trace shard (magic is not %s)", HB_XST_MAGIC);
	if (len < HB_XST_HEADER_BYTES)
		return hb_error_diag(err, diag_ids[HB_XSTD_TRUNCATED], HB_ERR_FORMAT, what, true, len,
				     "the shard ends inside its header");
	if ((rc = decode_header(buf, what, h, err)))
		return rc;
	while (off < len) {
		const uint8_t *p = buf + off;
		struct hb_xst_rec r;
		uint32_t kind, pb;
		const char *rule = NULL;
		int f;

		if (len - off < HB_XST_FRAME_BYTES)
			return hb_error_diag(err, diag_ids[HB_XSTD_TRUNCATED], HB_ERR_FORMAT, what, true, len,
					     "the shard ends inside the frame of record %" PRIu64, n);
		kind = (uint32_t)getn(p, 4), pb = (uint32_t)getn(p + 4, 4);
		if (!known((enum hb_xst_kind)kind) || pb != hb_xst_payload_bytes((enum hb_xst_kind)kind))
			return hb_error_diag(err, diag_ids[HB_XSTD_KIND], HB_ERR_FORMAT, what, true, off,
					     "record %" PRIu64 ": kind %u with %u payload bytes is not a known record", n,
					     kind, pb);
		if (!zero(p + 12, 4))
			return hb_error_diag(err, diag_ids[HB_XSTD_KIND], HB_ERR_FORMAT, what, true, off + 12,
					     "record %" PRIu64 ": the frame's reserved bytes must be zero", n);
		if (len - off - HB_XST_FRAME_BYTES < pb)
			return hb_error_diag(err, diag_ids[HB_XSTD_TRUNCATED], HB_ERR_FORMAT, what, true, len,
					     "the shard ends inside the payload of record %" PRIu64, n);
		if (getn(p + 8, 4) != crc(p + HB_XST_FRAME_BYTES, pb))
			return hb_error_diag(err, diag_ids[HB_XSTD_CRC], HB_ERR_DIGEST, what, true, off,
					     "record %" PRIu64 ": the payload does not match its CRC-32", n);
		memset(&r, 0, sizeof(r));
		r.kind = (enum hb_xst_kind)kind;
		for (unsigned i = 0, o = HB_XST_FRAME_BYTES; i < kinds[kind].n; o += kinds[kind].f[i].width, i++)
			r.v[i] = getn(p + o, kinds[kind].f[i].width);
		if ((f = check_rec(h, &r, &rule)) >= 0) {
			size_t at = off + HB_XST_FRAME_BYTES;
			for (int i = 0; i < f; i++)
				at += kinds[kind].f[i].width;
			return rec_bad(err, HB_ERR_FORMAT, what, n, r.kind, f, rule, at);
		}
		if (fn && (rc = fn(ctx, h, n, &r)))
			break;
		n++;
		if (records)
			*records = n;
		off += HB_XST_FRAME_BYTES + pb;
	}
	return rc;
}
