/*
 * hb_spec.c: spec shards, written and read (see hb_spec.h).
 *
 * Owns the byte layout, the per-record CRC and every range check; one
 * function (validate_step, validate_route) decides what a well-formed
 * record is, and both the writer and the reader call it, so a writer can
 * never produce what the reader refuses.  What a record means to the
 * protocol (acceptance, rollback) is the verifier's, not this file's.
 */
#include "hb_base.h"
#include "hb_spec.h"

#include <math.h>
#include <unistd.h>
#include <zlib.h>

static const struct {
	const char *id;
} diags[] = {
#define HB_SPEC_ROW_(sym, id, meaning) {id},
	HB_SPEC_DIAGS(HB_SPEC_ROW_)
#undef HB_SPEC_ROW_
};

const char *hb_spec_diag_id(enum hb_spec_diag d)
{
	return (unsigned)d < HB_SPD_COUNT ? diags[d].id : "spec-unknown";
}

#define FAIL(err, d, code, field, ...) \
	hb_error_diag(err, diags[HB_SPD_##d].id, code, field, false, 0, __VA_ARGS__)

/* ------------------------------------------------------------ bytes */

/* A growable little-endian output buffer; the first failure sticks. */
struct out {
	uint8_t *p;
	size_t n, cap;
	bool oom;
};

static void emit(struct out *o, const void *src, size_t n)
{
	if (o->oom || !n)
		return;
	if (o->n + n > o->cap) {
		size_t cap = o->cap ? o->cap : 256;
		while (cap < o->n + n)
			cap *= 2;
		uint8_t *p = realloc(o->p, cap);
		if (!p) {
			o->oom = true;
			return;
		}
		o->p = p, o->cap = cap;
	}
	memcpy(o->p + o->n, src, n);
	o->n += n;
}

static void emit_u(struct out *o, uint64_t v, unsigned bytes)
{
	uint8_t b[8];
	for (unsigned i = 0; i < bytes; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	emit(o, b, bytes);
}

static void emit_f32(struct out *o, float f)
{
	uint32_t v;
	memcpy(&v, &f, 4);
	emit_u(o, v, 4);
}

/* A bounded input cursor over one payload; the first overrun sticks. */
struct in {
	const uint8_t *p;
	size_t n, pos;
	bool over;
};

static const uint8_t *take(struct in *c, uint64_t n)
{
	if (c->over || n > c->n - c->pos) {
		c->over = true;
		return NULL;
	}
	c->pos += (size_t)n;
	return c->p + c->pos - n;
}

static uint64_t take_u(struct in *c, unsigned bytes)
{
	const uint8_t *b = take(c, bytes);
	uint64_t v = 0;
	for (unsigned i = 0; b && i < bytes; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

static float take_f32(struct in *c)
{
	uint32_t v = (uint32_t)take_u(c, 4);
	float f;
	memcpy(&f, &v, 4);
	return f;
}

static uint32_t crc_of(const uint8_t *p, size_t n)
{
	/* payloads are at most HB_SPEC_MAX_PAYLOAD, inside one uInt */
	return (uint32_t)crc32(crc32(0L, Z_NULL, 0), p, (uInt)n);
}

/* ------------------------------------------------------------ validity */

static uint64_t dtype_size(uint32_t dt)
{
	return dt == HB_SPEC_F32 ? 4 : dt == HB_SPEC_BF16 || dt == HB_SPEC_F16 ? 2 : 0;
}

static int validate_step(const struct hb_spec_header *h, const struct hb_spec_step *s, struct hb_error *err)
{
	uint64_t elems = 1;

	if (s->stage != HB_SPEC_STAGE_LAYER && s->stage != HB_SPEC_STAGE_FINAL)
		return FAIL(err, RECORD, HB_ERR_FORMAT, "step.stage", "stage %u is not 1 or 2", s->stage);
	if (!s->n_layers || s->n_layers > HB_SPEC_MAX_LAYERS)
		return FAIL(err, RECORD, HB_ERR_FORMAT, "step.layers", "%u captured layers, not 1..%u",
			    s->n_layers, HB_SPEC_MAX_LAYERS);
	for (uint32_t i = 0; i < s->n_layers; i++)
		if (s->layers[i] >= h->layers || (i && s->layers[i] <= s->layers[i - 1]))
			return FAIL(err, RECORD, HB_ERR_FORMAT, "step.layers", "layer id %u at %u is not increasing "
				    "and below %u", s->layers[i], i, h->layers);
	if (!dtype_size(s->dtype) || !s->ndim || s->ndim > HB_SPEC_MAX_NDIM)
		return FAIL(err, RECORD, HB_ERR_FORMAT, "step.hidden", "dtype %u or %u dimensions not understood",
			    s->dtype, s->ndim);
	for (uint32_t i = 0; i < s->ndim; i++) {
		if (!s->shape[i] || elems > HB_SPEC_MAX_PAYLOAD / s->shape[i])
			return FAIL(err, RECORD, HB_ERR_FORMAT, "step.hidden.shape", "dimension %u is %" PRIu64, i,
				    s->shape[i]);
		elems *= s->shape[i];
	}
	if (s->hidden_inline && (s->hidden_bytes != elems * dtype_size(s->dtype) || !s->hidden))
		return FAIL(err, RECORD, HB_ERR_FORMAT, "step.hidden.payload", "%" PRIu64 " bytes, the shape "
			    "needs %" PRIu64, s->hidden_bytes, elems * dtype_size(s->dtype));
	if (!s->block || s->block > HB_SPEC_MAX_BLOCK || !s->candidates || s->candidates > HB_SPEC_MAX_CANDIDATES)
		return FAIL(err, RECORD, HB_ERR_FORMAT, "step.block", "block %u x %u candidates, not 1..%u x 1..%u",
			    s->block, s->candidates, HB_SPEC_MAX_BLOCK, HB_SPEC_MAX_CANDIDATES);
	for (uint32_t i = 0; i < s->block * s->candidates; i++)
		if (s->cand[i] < 0 || (uint32_t)s->cand[i] >= h->vocab_rows || !isfinite(s->score[i]))
			return FAIL(err, RECORD, HB_ERR_FORMAT, "step.candidates", "candidate %u: id %d outside "
				    "[0, %u) or a non-finite score", i, s->cand[i], h->vocab_rows);
	for (uint32_t i = 0; i < s->block; i++) {
		if (s->path[i] >= s->candidates)
			return FAIL(err, RECORD, HB_ERR_FORMAT, "step.path", "position %u selects candidate %u of %u",
				    i, s->path[i], s->candidates);
		if (s->target_inline && !(s->target_prob[i] >= 0 && s->target_prob[i] <= 1))
			return FAIL(err, RECORD, HB_ERR_FORMAT, "step.target", "probability at %u is not in [0, 1]", i);
	}
	if (s->accepted > s->block)
		return FAIL(err, RECORD, HB_ERR_FORMAT, "step.accepted", "%u accepted of a %u-token block",
			    s->accepted, s->block);
	if (s->bonus < 0 || (uint32_t)s->bonus >= h->vocab_rows)
		return FAIL(err, RECORD, HB_ERR_FORMAT, "step.bonus", "bonus token %d outside [0, %u)", s->bonus,
			    h->vocab_rows);
	return HB_OK;
}

static int validate_route(const struct hb_spec_header *h, const struct hb_spec_route *r, struct hb_error *err)
{
	if (r->layer >= h->layers)
		return FAIL(err, RECORD, HB_ERR_FORMAT, "route.layer", "layer %u of %u", r->layer, h->layers);
	if (!r->top_k || r->top_k > HB_SPEC_MAX_TOPK || r->n_pred > HB_SPEC_MAX_TOPK)
		return FAIL(err, RECORD, HB_ERR_FORMAT, "route.top_k", "top-k %u, %u predicted, not 1..%u", r->top_k,
			    r->n_pred, HB_SPEC_MAX_TOPK);
	for (uint32_t i = 0; i < r->top_k; i++)
		if (r->native[i] >= h->experts)
			return FAIL(err, RECORD, HB_ERR_FORMAT, "route.native", "expert %u at rank %u of %u experts",
				    r->native[i], i, h->experts);
	for (uint32_t i = 0; i < r->n_pred; i++)
		if (r->pred[i] >= h->experts || !(r->confidence[i] >= 0 && r->confidence[i] <= 1))
			return FAIL(err, RECORD, HB_ERR_FORMAT, "route.predicted", "prediction %u: expert %u or "
				    "confidence outside [0, 1]", i, r->pred[i]);
	return HB_OK;
}

/* ------------------------------------------------------------ encoding */

static void encode_step(struct out *o, const struct hb_spec_step *s)
{
	uint32_t flags = (s->hidden_inline ? 1u : 0) | (s->score_logits ? 2u : 0) | (s->target_inline ? 4u : 0);
	uint32_t bk = s->block * s->candidates;

	emit_u(o, s->owner, 8), emit_u(o, s->generation, 4), emit_u(o, s->stage, 4);
	emit_u(o, s->position, 8), emit_u(o, s->n_layers, 4), emit_u(o, s->dtype, 4);
	emit_u(o, s->ndim, 4), emit_u(o, flags, 4), emit_u(o, s->block, 4);
	emit_u(o, s->candidates, 4), emit_u(o, s->accepted, 4), emit_u(o, (uint32_t)s->bonus, 4);
	for (uint32_t i = 0; i < s->n_layers; i++)
		emit_u(o, s->layers[i], 4);
	for (uint32_t i = 0; i < s->ndim; i++)
		emit_u(o, s->shape[i], 8);
	if (s->hidden_inline) {
		emit_u(o, s->hidden_bytes, 8);
		emit(o, s->hidden, (size_t)s->hidden_bytes);
	} else {
		emit(o, s->hidden_digest, HB_SHA256_BYTES);
	}
	for (uint32_t i = 0; i < bk; i++)
		emit_u(o, (uint32_t)s->cand[i], 4);
	for (uint32_t i = 0; i < bk; i++)
		emit_f32(o, s->score[i]);
	for (uint32_t i = 0; i < s->block; i++)
		emit_u(o, s->path[i], 4);
	if (s->target_inline)
		for (uint32_t i = 0; i < s->block; i++)
			emit_f32(o, s->target_prob[i]);
	else
		emit(o, s->target_digest, HB_SHA256_BYTES);
}

/* Decode one step payload; only the sizes are checked here (overrun, the
 * fixed maxima that bound the arrays), the meaning by validate_step. */
static bool decode_step(struct in *c, struct hb_spec_step *s)
{
	uint32_t flags, bk;

	memset(s, 0, sizeof(*s));
	s->owner = take_u(c, 8), s->generation = (uint32_t)take_u(c, 4), s->stage = (uint32_t)take_u(c, 4);
	s->position = take_u(c, 8), s->n_layers = (uint32_t)take_u(c, 4), s->dtype = (uint32_t)take_u(c, 4);
	s->ndim = (uint32_t)take_u(c, 4), flags = (uint32_t)take_u(c, 4), s->block = (uint32_t)take_u(c, 4);
	s->candidates = (uint32_t)take_u(c, 4), s->accepted = (uint32_t)take_u(c, 4);
	s->bonus = (int32_t)(uint32_t)take_u(c, 4);
	if (c->over || s->n_layers > HB_SPEC_MAX_LAYERS || s->ndim > HB_SPEC_MAX_NDIM ||
	    s->block > HB_SPEC_MAX_BLOCK || s->candidates > HB_SPEC_MAX_CANDIDATES || flags > 7)
		return false;
	s->hidden_inline = flags & 1, s->score_logits = flags & 2, s->target_inline = flags & 4;
	for (uint32_t i = 0; i < s->n_layers; i++)
		s->layers[i] = (uint32_t)take_u(c, 4);
	for (uint32_t i = 0; i < s->ndim; i++)
		s->shape[i] = take_u(c, 8);
	if (s->hidden_inline) {
		s->hidden_bytes = take_u(c, 8);
		s->hidden = take(c, s->hidden_bytes);
	} else {
		const uint8_t *d = take(c, HB_SHA256_BYTES);
		if (d)
			memcpy(s->hidden_digest, d, HB_SHA256_BYTES);
	}
	bk = s->block * s->candidates;
	for (uint32_t i = 0; i < bk; i++)
		s->cand[i] = (int32_t)(uint32_t)take_u(c, 4);
	for (uint32_t i = 0; i < bk; i++)
		s->score[i] = take_f32(c);
	for (uint32_t i = 0; i < s->block; i++)
		s->path[i] = (uint32_t)take_u(c, 4);
	if (s->target_inline) {
		for (uint32_t i = 0; i < s->block; i++)
			s->target_prob[i] = take_f32(c);
	} else {
		const uint8_t *d = take(c, HB_SHA256_BYTES);
		if (d)
			memcpy(s->target_digest, d, HB_SHA256_BYTES);
	}
	return !c->over && c->pos == c->n;
}

static void encode_route(struct out *o, const struct hb_spec_route *r)
{
	emit_u(o, r->owner, 8), emit_u(o, r->generation, 4), emit_u(o, r->layer, 4);
	emit_u(o, r->position, 8), emit_u(o, r->top_k, 4), emit_u(o, r->n_pred, 4);
	emit_u(o, r->ticket_owner, 8), emit_u(o, r->ticket_generation, 4), emit_u(o, 0, 4);
	for (uint32_t i = 0; i < r->top_k; i++)
		emit_u(o, r->native[i], 4);
	for (uint32_t i = 0; i < r->n_pred; i++)
		emit_u(o, r->pred[i], 4);
	for (uint32_t i = 0; i < r->n_pred; i++)
		emit_f32(o, r->confidence[i]);
}

static bool decode_route(struct in *c, struct hb_spec_route *r)
{
	memset(r, 0, sizeof(*r));
	r->owner = take_u(c, 8), r->generation = (uint32_t)take_u(c, 4), r->layer = (uint32_t)take_u(c, 4);
	r->position = take_u(c, 8), r->top_k = (uint32_t)take_u(c, 4), r->n_pred = (uint32_t)take_u(c, 4);
	r->ticket_owner = take_u(c, 8), r->ticket_generation = (uint32_t)take_u(c, 4);
	if (take_u(c, 4) != 0 || c->over || r->top_k > HB_SPEC_MAX_TOPK || r->n_pred > HB_SPEC_MAX_TOPK)
		return false;
	for (uint32_t i = 0; i < r->top_k; i++)
		r->native[i] = (uint32_t)take_u(c, 4);
	for (uint32_t i = 0; i < r->n_pred; i++)
		r->pred[i] = (uint32_t)take_u(c, 4);
	for (uint32_t i = 0; i < r->n_pred; i++)
		r->confidence[i] = take_f32(c);
	return !c->over && c->pos == c->n;
}

static void encode_header(uint8_t b[HB_SPEC_HEADER_BYTES], const struct hb_spec_header *h)
{
	struct out o = {0};

	emit(&o, HB_SPEC_MAGIC, 8), emit_u(&o, HB_SPEC_VERSION, 4), emit_u(&o, HB_SPEC_HEADER_BYTES, 4);
	emit_u(&o, h->vocab_rows, 4), emit_u(&o, h->layers, 4), emit_u(&o, h->hidden, 4);
	emit_u(&o, h->experts, 4), emit(&o, h->target, 32), emit(&o, h->tokenizer, 32);
	memset(b, 0, HB_SPEC_HEADER_BYTES);
	if (!o.oom)
		memcpy(b, o.p, o.n);
	free(o.p);
	uint32_t c = crc_of(b, 124);
	for (int i = 0; i < 4; i++)
		b[124 + i] = (uint8_t)(c >> (8 * i));
}

/* ------------------------------------------------------------ writer */

struct hb_spec_writer {
	int fd;
	const char *what;
	struct hb_spec_header h;
};

static int write_all(int fd, const uint8_t *p, size_t n, const char *what, struct hb_error *err)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return FAIL(err, IO, HB_ERR_IO, what, "write failed: %s", strerror(w < 0 ? errno : EIO));
		p += w, n -= (size_t)w;
	}
	return HB_OK;
}

int hb_spec_writer_open(struct hb_spec_writer **out, int fd, const char *what, const struct hb_spec_header *h,
			struct hb_error *err)
{
	uint8_t b[HB_SPEC_HEADER_BYTES];
	struct hb_spec_writer *w;
	int rc;

	*out = NULL;
	if (!h->vocab_rows || !h->layers || !h->hidden || !h->experts)
		return FAIL(err, HEADER, HB_ERR_INVALID, "spec.header", "vocabulary, layers, hidden and experts "
			    "must be non-zero");
	if (!(w = calloc(1, sizeof(*w))))
		return hb_error_set(err, HB_ERR_NOMEM, what, "out of memory");
	w->fd = fd, w->what = what, w->h = *h;
	w->h.version = HB_SPEC_VERSION;
	encode_header(b, &w->h);
	if ((rc = write_all(fd, b, sizeof(b), what, err))) {
		free(w);
		return rc;
	}
	*out = w;
	return HB_OK;
}

static int write_frame(struct hb_spec_writer *w, uint32_t kind, struct out *o, struct hb_error *err)
{
	uint8_t f[HB_SPEC_FRAME_BYTES];
	struct out fo = {0};
	int rc;

	if (o->oom)
		return free(o->p), hb_error_set(err, HB_ERR_NOMEM, w->what, "out of memory");
	if (o->n > HB_SPEC_MAX_PAYLOAD)
		return free(o->p), FAIL(err, RECORD, HB_ERR_INVALID, w->what, "a %zu-byte record", o->n);
	emit(&fo, HB_SPEC_RECORD_MAGIC, 8), emit_u(&fo, kind, 4), emit_u(&fo, crc_of(o->p, o->n), 4);
	emit_u(&fo, o->n, 8);
	if (fo.oom)
		return free(o->p), hb_error_set(err, HB_ERR_NOMEM, w->what, "out of memory");
	memcpy(f, fo.p, sizeof(f));
	free(fo.p);
	rc = write_all(w->fd, f, sizeof(f), w->what, err);
	if (!rc)
		rc = write_all(w->fd, o->p, o->n, w->what, err);
	free(o->p);
	return rc;
}

int hb_spec_write_step(struct hb_spec_writer *w, const struct hb_spec_step *s, struct hb_error *err)
{
	struct out o = {0};
	int rc;

	if ((rc = validate_step(&w->h, s, err)))
		return rc;
	encode_step(&o, s);
	return write_frame(w, HB_SPEC_STEP, &o, err);
}

int hb_spec_write_route(struct hb_spec_writer *w, const struct hb_spec_route *r, struct hb_error *err)
{
	struct out o = {0};
	int rc;

	if ((rc = validate_route(&w->h, r, err)))
		return rc;
	encode_route(&o, r);
	return write_frame(w, HB_SPEC_ROUTE, &o, err);
}

int hb_spec_writer_close(struct hb_spec_writer *w, struct hb_error *err)
{
	(void)err;
	free(w);
	return HB_OK;
}

/* ------------------------------------------------------------ reader */

/* Read exactly n bytes unless the stream ends: *got says how many came. */
static int read_some(int fd, uint8_t *p, size_t n, size_t *got, const char *what, struct hb_error *err)
{
	*got = 0;
	while (*got < n) {
		ssize_t r = read(fd, p + *got, n - *got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return FAIL(err, IO, HB_ERR_IO, what, "read failed: %s", strerror(errno));
		if (r == 0)
			break;
		*got += (size_t)r;
	}
	return HB_OK;
}

/* A payload of len bytes into *buf (capacity *cap), grown only as bytes
 * arrive: a frame that claims HB_SPEC_MAX_PAYLOAD in a short shard costs
 * about what the shard holds, not the claim. */
#define PAYLOAD_STEP ((size_t)1 << 20)
static int read_payload(int fd, size_t len, uint8_t **buf, size_t *cap, size_t *got, const char *what,
			struct hb_error *err)
{
	*got = 0;
	for (;;) {
		size_t want = len - *got < PAYLOAD_STEP ? len : *got + PAYLOAD_STEP, part;
		int rc;

		if (want > *cap || !*buf) {
			size_t c = *cap ? *cap : 1;
			uint8_t *p;
			while (c < want)
				c = c * 2 < want ? c * 2 : want;
			if (!(p = realloc(*buf, c)))
				return hb_error_set(err, HB_ERR_NOMEM, what, "out of memory");
			*buf = p, *cap = c;
		}
		if ((rc = read_some(fd, *buf + *got, want - *got, &part, what, err)))
			return rc;
		*got += part;
		if (*got == len || *got < want)
			return HB_OK;
	}
}

static int read_header(int fd, const char *what, struct hb_spec_header *h, struct hb_error *err)
{
	uint8_t b[HB_SPEC_HEADER_BYTES];
	struct in c = {.p = b, .n = sizeof(b)};
	size_t got;
	int rc;

	if ((rc = read_some(fd, b, sizeof(b), &got, what, err)))
		return rc;
	if (got < 8 || memcmp(b, HB_SPEC_MAGIC, 8))
		return FAIL(err, MAGIC, HB_ERR_FORMAT, what, "not a spec shard");
	if (got < sizeof(b))
		return FAIL(err, TRUNCATED, HB_ERR_SHORT, what, "the header ends after %zu bytes", got);
	take(&c, 8);
	h->version = (uint32_t)take_u(&c, 4);
	if (h->version != HB_SPEC_VERSION)
		return FAIL(err, VERSION, HB_ERR_UNSUPPORTED, what, "version %u", h->version);
	if (take_u(&c, 4) != HB_SPEC_HEADER_BYTES)
		return FAIL(err, HEADER, HB_ERR_FORMAT, what, "header bytes are not %u", HB_SPEC_HEADER_BYTES);
	h->vocab_rows = (uint32_t)take_u(&c, 4), h->layers = (uint32_t)take_u(&c, 4);
	h->hidden = (uint32_t)take_u(&c, 4), h->experts = (uint32_t)take_u(&c, 4);
	memcpy(h->target, take(&c, 32), 32);
	memcpy(h->tokenizer, take(&c, 32), 32);
	for (size_t i = 96; i < 124; i++)
		if (b[i])
			return FAIL(err, HEADER, HB_ERR_FORMAT, what, "reserved byte %zu is not zero", i);
	take(&c, 28);
	if ((uint32_t)take_u(&c, 4) != crc_of(b, 124))
		return FAIL(err, HEADER, HB_ERR_FORMAT, what, "the header CRC-32 fails");
	if (!h->vocab_rows || !h->layers || !h->hidden || !h->experts)
		return FAIL(err, HEADER, HB_ERR_FORMAT, what, "a zero vocabulary, layer, hidden or expert count");
	return HB_OK;
}

int hb_spec_read(int fd, const char *what, hb_spec_record_fn fn, void *ctx, struct hb_spec_header *h,
		 uint64_t *records, struct hb_error *err)
{
	uint8_t f[HB_SPEC_FRAME_BYTES], *buf = NULL;
	size_t cap = 0;
	uint64_t off = HB_SPEC_HEADER_BYTES, n = 0;
	struct hb_spec_step *step = NULL;
	struct hb_spec_route route;
	char field[HB_ERROR_FIELD_MAX];
	size_t got;
	int rc;

	*records = 0;
	if ((rc = read_header(fd, what, h, err)))
		return rc;
	if (!(step = malloc(sizeof(*step))))
		return hb_error_set(err, HB_ERR_NOMEM, what, "out of memory");
	for (;; n++) {
		struct in fc = {.p = f, .n = sizeof(f)}, c;
		uint32_t kind, sum;
		uint64_t len;

		snprintf(field, sizeof(field), "%s: record %" PRIu64 " at byte %" PRIu64, what, n, off);
		if ((rc = read_some(fd, f, sizeof(f), &got, field, err)))
			break;
		if (!got)
			break; /* the shard ends between records: complete */
		if (got < sizeof(f)) {
			rc = FAIL(err, TRUNCATED, HB_ERR_SHORT, field, "the shard ends inside a record frame");
			break;
		}
		if (memcmp(take(&fc, 8), HB_SPEC_RECORD_MAGIC, 8)) {
			rc = FAIL(err, MAGIC, HB_ERR_FORMAT, field, "no record magic");
			break;
		}
		kind = (uint32_t)take_u(&fc, 4), sum = (uint32_t)take_u(&fc, 4), len = take_u(&fc, 8);
		if ((kind != HB_SPEC_STEP && kind != HB_SPEC_ROUTE) || len > HB_SPEC_MAX_PAYLOAD) {
			rc = FAIL(err, RECORD, HB_ERR_FORMAT, field, "kind %u with %" PRIu64 " payload bytes", kind, len);
			break;
		}
		if ((rc = read_payload(fd, (size_t)len, &buf, &cap, &got, field, err)))
			break;
		if (got < len) {
			rc = FAIL(err, TRUNCATED, HB_ERR_SHORT, field, "the shard ends inside the payload");
			break;
		}
		if (crc_of(buf, (size_t)len) != sum) {
			rc = FAIL(err, CRC, HB_ERR_DIGEST, field, "the payload does not match its CRC-32");
			break;
		}
		c = (struct in){.p = buf, .n = (size_t)len};
		if (kind == HB_SPEC_STEP ? !decode_step(&c, step) : !decode_route(&c, &route)) {
			rc = FAIL(err, RECORD, HB_ERR_FORMAT, field, "the payload's length disagrees with its counts");
			break;
		}
		if ((rc = kind == HB_SPEC_STEP ? validate_step(h, step, err) : validate_route(h, &route, err))) {
			/* the record's own field, prefixed with where it is */
			char inner[HB_ERROR_FIELD_MAX];
			snprintf(inner, sizeof(inner), "%s", err->field);
			snprintf(err->field, sizeof(err->field), "%.*s: %s", (int)(sizeof(err->field) / 2), field, inner);
			break;
		}
		off += HB_SPEC_FRAME_BYTES + len;
		*records = n + 1;
		if ((rc = fn(ctx, h, kind == HB_SPEC_STEP ? step : NULL, kind == HB_SPEC_ROUTE ? &route : NULL)))
			break;
	}
	free(buf);
	free(step);
	return rc;
}

/* ------------------------------------------------------------ identity */

int hb_spec_check_header(const struct hb_spec_header *h, const struct hb_spec_expect *e, struct hb_error *err)
{
	if (memcmp(h->target, e->target.target, 32))
		return FAIL(err, TARGET, HB_ERR_CONTRACT, "spec.header.target", "verified against another target "
			    "artifact");
	if (memcmp(h->tokenizer, e->target.tokenizer, 32))
		return FAIL(err, TOKENIZER, HB_ERR_CONTRACT, "spec.header.tokenizer", "another tokenizer");
	if (h->vocab_rows != e->target.vocab_rows)
		return FAIL(err, VOCAB, HB_ERR_CONTRACT, "spec.header.vocab_rows", "%u rows, the target has %u",
			    h->vocab_rows, e->target.vocab_rows);
	if (h->hidden != e->target.hidden || h->layers != e->target.layers || h->experts != e->target.experts)
		return FAIL(err, HIDDEN, HB_ERR_CONTRACT, "spec.header.hidden", "hidden %u, %u layers, %u experts; "
			    "the target has %u, %u, %u", h->hidden, h->layers, h->experts, e->target.hidden,
			    e->target.layers, e->target.experts);
	return HB_OK;
}

static int check_owner(uint64_t owner, uint32_t gen, const struct hb_spec_expect *e, const char *what,
		       struct hb_error *err)
{
	char field[64];

	snprintf(field, sizeof(field), "%s.owner", what);
	if (owner != e->owner)
		return FAIL(err, OWNER, HB_ERR_CONTRACT, field, "owner %" PRIu64 ", not %" PRIu64, owner, e->owner);
	snprintf(field, sizeof(field), "%s.generation", what);
	if (gen != e->generation)
		return FAIL(err, GENERATION, HB_ERR_CONTRACT, field, "generation %u, the owner's is %u", gen,
			    e->generation);
	return HB_OK;
}

int hb_spec_check_step(const struct hb_spec_step *s, const struct hb_spec_expect *e, struct hb_error *err)
{
	int rc;

	if ((rc = check_owner(s->owner, s->generation, e, "step", err)))
		return rc;
	if (s->stage != e->stage || s->dtype != e->dtype || s->ndim != e->ndim ||
	    memcmp(s->shape, e->shape, s->ndim * sizeof(uint64_t)))
		return FAIL(err, HIDDEN, HB_ERR_CONTRACT, "step.hidden", "stage %u, dtype %u, %u dimensions (first "
			    "%" PRIu64 ") are not the expected capture", s->stage, s->dtype, s->ndim, s->shape[0]);
	if (s->n_layers != e->n_layers || memcmp(s->layers, e->layers, s->n_layers * sizeof(uint32_t)))
		return FAIL(err, CAPTURE, HB_ERR_CONTRACT, "step.layers", "%u captured layers, not the expected %u",
			    s->n_layers, e->n_layers);
	return HB_OK;
}

int hb_spec_check_route(const struct hb_spec_route *r, const struct hb_spec_expect *e, struct hb_error *err)
{
	int rc = check_owner(r->owner, r->generation, e, "route", err);
	return rc ? rc : check_owner(r->ticket_owner, r->ticket_generation, e, "route.ticket", err);
}
