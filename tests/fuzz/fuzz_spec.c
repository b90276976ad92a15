/*
 * fuzz_spec.c: fuzz target of the speculative-decoding record reader
 * (hb_spec_read, hebrus-spec(5)) and, through a round trip, of its writer.
 *
 * Input: one flags byte, then a whole spec shard (given through a memfd).
 *   bit 0  reseal: recompute the header CRC and every complete record's
 *          payload CRC-32 before reading, so that mutations reach the
 *          field checks behind the CRCs instead of all failing spec-crc.
 *
 * Invariants: a refusal carries an id of the spec table ("spec-"), and
 * reading twice gives the same outcome, id, field and record count; the
 * records delivered before a defect are a prefix of what was there; an
 * accepted shard written again by hb_spec_writer (same header, the same
 * records) is byte for byte the input (every byte of the format has one
 * meaning: reserved bytes zero, lengths exact), and it reads back to the
 * same records.  This file owns only the harness; the reader and writer are
 * libstore/trace/hb_spec.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "trace/hb_spec.h"


#define FLAG_RESEAL 1u
/* an accepted input of at most 1 MiB holds at most this many records (the
 * smallest is a 24-byte frame and a 48-byte route) */
#define MAX_RECORDS (HB_FUZZ_MAX_INPUT / 72 + 1)

struct rec {
	int kind;
	struct hb_spec_step step;
	struct hb_spec_route route;
	uint8_t *hidden; /* a copy of the inline hidden bytes */
};

struct collect {
	struct rec *r;
	size_t n, cap;
	bool overflow;
};

static void collect_free(struct collect *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->r[i].hidden);
	free(c->r);
	c->r = NULL;
	c->n = c->cap = 0;
}

static int keep(void *ctx, const struct hb_spec_header *h, const struct hb_spec_step *s,
		const struct hb_spec_route *r)
{
	struct collect *c = ctx;
	struct rec *x;

	(void)h;
	HB_FUZZ_ASSERT((s != NULL) != (r != NULL));
	if (c->n == MAX_RECORDS) {
		c->overflow = true;
		return 1;
	}
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 8;
		struct rec *g = realloc(c->r, cap * sizeof(*g));

		if (!g)
			return 2; /* out of memory: not a parser finding */
		c->r = g;
		c->cap = cap;
	}
	x = &c->r[c->n];
	memset(x, 0, sizeof(*x));
	if (s) {
		x->kind = HB_SPEC_STEP;
		x->step = *s;
		HB_FUZZ_ASSERT(s->block >= 1 && s->block <= HB_SPEC_MAX_BLOCK);
		HB_FUZZ_ASSERT(s->candidates >= 1 && s->candidates <= HB_SPEC_MAX_CANDIDATES);
		HB_FUZZ_ASSERT(s->accepted <= s->block);
		HB_FUZZ_ASSERT(s->n_layers <= HB_SPEC_MAX_LAYERS && s->ndim <= HB_SPEC_MAX_NDIM);
		for (uint32_t i = 0; i < s->block; i++)
			HB_FUZZ_ASSERT(s->path[i] < s->candidates);
		for (uint32_t i = 0; i < s->n_layers; i++)
			HB_FUZZ_ASSERT(s->layers[i] < h->layers);
		if (s->hidden_inline && s->hidden_bytes) {
			if (!(x->hidden = malloc((size_t)s->hidden_bytes)))
				return 2;
			memcpy(x->hidden, s->hidden, (size_t)s->hidden_bytes);
		}
		x->step.hidden = x->hidden;
	} else {
		x->kind = HB_SPEC_ROUTE;
		x->route = *r;
		HB_FUZZ_ASSERT(r->top_k <= HB_SPEC_MAX_TOPK && r->n_pred <= HB_SPEC_MAX_TOPK);
		HB_FUZZ_ASSERT(r->layer < h->layers);
	}
	c->n++;
	return 0;
}

static void reseal(uint8_t *b, size_t n)
{
	size_t off = HB_SPEC_HEADER_BYTES;

	if (n < HB_SPEC_HEADER_BYTES)
		return;
	hb_fuzz_put32(b + 124, hb_fuzz_crc32(b, 124));
	while (off + HB_SPEC_FRAME_BYTES <= n) {
		uint64_t len = hb_fuzz_le64(b + off + 16);

		if (len > n - off - HB_SPEC_FRAME_BYTES)
			break;
		hb_fuzz_put32(b + off + 12, hb_fuzz_crc32(b + off + HB_SPEC_FRAME_BYTES, (size_t)len));
		off += HB_SPEC_FRAME_BYTES + (size_t)len;
	}
}

static bool same_step(const struct hb_spec_step *a, const struct hb_spec_step *b)
{
	size_t bk = (size_t)a->block * a->candidates;

	if (a->owner != b->owner || a->position != b->position || a->generation != b->generation ||
	    a->stage != b->stage || a->n_layers != b->n_layers || a->dtype != b->dtype || a->ndim != b->ndim ||
	    a->hidden_inline != b->hidden_inline || a->hidden_bytes != b->hidden_bytes || a->block != b->block ||
	    a->candidates != b->candidates || a->score_logits != b->score_logits ||
	    a->target_inline != b->target_inline || a->accepted != b->accepted || a->bonus != b->bonus)
		return false;
	if (memcmp(a->layers, b->layers, a->n_layers * sizeof(a->layers[0])) ||
	    memcmp(a->shape, b->shape, a->ndim * sizeof(a->shape[0])) ||
	    memcmp(a->cand, b->cand, bk * sizeof(a->cand[0])) || memcmp(a->score, b->score, bk * sizeof(a->score[0])) ||
	    memcmp(a->path, b->path, a->block * sizeof(a->path[0])))
		return false;
	if (a->hidden_inline ? (a->hidden_bytes && memcmp(a->hidden, b->hidden, (size_t)a->hidden_bytes))
			     : memcmp(a->hidden_digest, b->hidden_digest, 32))
		return false;
	return a->target_inline ? !memcmp(a->target_prob, b->target_prob, a->block * sizeof(float))
				: !memcmp(a->target_digest, b->target_digest, 32);
}

static bool same_route(const struct hb_spec_route *a, const struct hb_spec_route *b)
{
	return a->owner == b->owner && a->position == b->position && a->ticket_owner == b->ticket_owner &&
	       a->generation == b->generation && a->layer == b->layer && a->ticket_generation == b->ticket_generation &&
	       a->top_k == b->top_k && a->n_pred == b->n_pred &&
	       !memcmp(a->native, b->native, a->top_k * sizeof(a->native[0])) &&
	       !memcmp(a->pred, b->pred, a->n_pred * sizeof(a->pred[0])) &&
	       !memcmp(a->confidence, b->confidence, a->n_pred * sizeof(float));
}

static void round_trip(const struct hb_spec_header *h, const struct collect *c, const uint8_t *in, size_t size)
{
	struct hb_spec_writer *w = NULL;
	struct hb_spec_header h2;
	struct collect back = {0};
	struct hb_error err;
	uint64_t n2 = 0;
	uint8_t *out;
	off_t len;
	int fd = hb_fuzz_memfd("", 0, 0, 0), rc;

	if (fd < 0)
		return;
	hb_error_clear(&err);
	HB_FUZZ_ASSERT(hb_spec_writer_open(&w, fd, "rewrite", h, &err) == HB_OK);
	for (size_t i = 0; i < c->n; i++)
		HB_FUZZ_ASSERT((c->r[i].kind == HB_SPEC_STEP ? hb_spec_write_step(w, &c->r[i].step, &err)
							     : hb_spec_write_route(w, &c->r[i].route, &err)) == HB_OK);
	HB_FUZZ_ASSERT(hb_spec_writer_close(w, &err) == HB_OK);
	len = lseek(fd, 0, SEEK_END);
	HB_FUZZ_ASSERT(len == (off_t)size);
	if ((out = malloc(size ? size : 1))) {
		HB_FUZZ_ASSERT(pread(fd, out, size, 0) == (ssize_t)size);
		HB_FUZZ_ASSERT(!memcmp(out, in, size));
		free(out);
	}
	HB_FUZZ_ASSERT(lseek(fd, 0, SEEK_SET) == 0);
	rc = hb_spec_read(fd, "rewrite", keep, &back, &h2, &n2, &err);
	close(fd);
	if (rc == 2) {
		collect_free(&back);
		return;
	}
	HB_FUZZ_ASSERT(rc == HB_OK && n2 == c->n && back.n == c->n);
	HB_FUZZ_ASSERT(!memcmp(&h2, h, sizeof(h2)));
	for (size_t i = 0; i < c->n; i++) {
		HB_FUZZ_ASSERT(back.r[i].kind == c->r[i].kind);
		HB_FUZZ_ASSERT(c->r[i].kind == HB_SPEC_STEP ? same_step(&c->r[i].step, &back.r[i].step)
							    : same_route(&c->r[i].route, &back.r[i].route));
	}
	collect_free(&back);
}

int hb_fuzz_spec(const uint8_t *data, size_t size)
{
	struct collect c1 = {0}, c2 = {0};
	struct hb_spec_header h1, h2;
	struct hb_error e1, e2;
	uint64_t n1 = 0, n2 = 0;
	uint8_t *b;
	int fd, rc1, rc2, ret = HB_FUZZ_REFUSED;

	if (size < 1 || size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	if (!(b = malloc(size)))
		return HB_FUZZ_REFUSED;
	memcpy(b, data + 1, size - 1);
	if (data[0] & FLAG_RESEAL)
		reseal(b, size - 1);
	fd = hb_fuzz_memfd(b, size - 1, 0, size - 1);
	if (fd < 0) {
		free(b);
		return HB_FUZZ_REFUSED;
	}
	hb_error_clear(&e1);
	hb_error_clear(&e2);
	rc1 = hb_spec_read(fd, "fuzz", keep, &c1, &h1, &n1, &e1);
	HB_FUZZ_ASSERT(lseek(fd, 0, SEEK_SET) == 0);
	rc2 = hb_spec_read(fd, "fuzz", keep, &c2, &h2, &n2, &e2);
	close(fd);
	HB_FUZZ_ASSERT(!c1.overflow);
	if (rc1 == 2 || rc2 == 2)
		goto out;
	HB_FUZZ_ASSERT(rc1 == rc2 && n1 == n2 && c1.n == c2.n && c1.n == n1);
	if (rc1 != HB_OK) {
		HB_FUZZ_ASSERT(rc1 < 0 && e1.code == rc1);
		HB_FUZZ_ASSERT(hb_fuzz_same_id(e1.id, e2.id) && !strcmp(e1.field, e2.field));
		HB_FUZZ_ASSERT(e1.id && !strncmp(e1.id, "spec-", 5));
		goto out;
	}
	round_trip(&h1, &c1, b, size - 1);
	ret = HB_FUZZ_ACCEPTED;
out:
	collect_free(&c1);
	collect_free(&c2);
	free(b);
	return ret;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_spec(data, size);
	return 0;
}
#endif
