/*
 * fuzz_trace.c: fuzz target of the route-trace shard reader, hb_trace_read
 * over a memfd, and of its writer through a round trip.
 *
 * Invariants: every record the reader delivers is inside the header's
 * bounds (layer < layers, each id < experts, top_k <= HB_TRACE_MAX_TOPK,
 * finite weights are not required: a trace may carry what the producer
 * saw); the count it returns is the number of records it delivered; a
 * shard it accepts, written again by hb_trace_writer with the same header
 * and a different chunking, reads back to the same header and the same
 * records bit for bit; and a refused shard's error names an id of the
 * trace table.  This file owns only the harness; the reader and writer are
 * libstore/trace/hb_trace.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "trace/hb_trace.h"

/* An accepted input of at most 1 MiB holds at most this many records (the
 * smallest record is 40 + 8 bytes); the harness keeps them all. */
#define MAX_RECORDS (HB_FUZZ_MAX_INPUT / 48 + 1)

struct collect {
	struct hb_route *r;
	size_t n, cap;
	bool overflow;
};

static int keep(void *ctx, const struct hb_trace_header *h, const struct hb_route *r)
{
	struct collect *c = ctx;

	HB_FUZZ_ASSERT(h->top_k >= 1 && h->top_k <= HB_TRACE_MAX_TOPK);
	HB_FUZZ_ASSERT(r->layer < h->layers);
	for (uint32_t i = 0; i < h->top_k; i++)
		HB_FUZZ_ASSERT(r->ids[i] < h->experts);
	if (c->n == MAX_RECORDS) {
		c->overflow = true;
		return 1;
	}
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 16;
		struct hb_route *g = realloc(c->r, cap * sizeof(*g));
		if (!g)
			return 2; /* out of memory: not a parser finding */
		c->r = g;
		c->cap = cap;
	}
	c->r[c->n++] = *r;
	return 0;
}

static bool same_route(const struct hb_route *a, const struct hb_route *b, uint32_t top_k)
{
	if (a->sequence != b->sequence || a->ordinal != b->ordinal || a->layer != b->layer ||
	    a->lineage != b->lineage || a->proposal != b->proposal || a->candidate != b->candidate ||
	    a->accepted != b->accepted)
		return false;
	return !memcmp(a->ids, b->ids, top_k * sizeof(a->ids[0])) &&
	       !memcmp(a->weights, b->weights, top_k * sizeof(a->weights[0]));
}

static void round_trip(const struct hb_trace_header *h, const struct collect *c, uint32_t chunk)
{
	struct hb_trace_writer *w = NULL;
	struct hb_trace_header h2;
	struct collect back = {0};
	uint64_t n2 = 0;
	int fd = hb_fuzz_memfd("", 0, 0, 0), rc;

	if (fd < 0)
		return;
	HB_FUZZ_ASSERT(hb_trace_writer_open(&w, fd, "rewrite", h, chunk, NULL) == HB_OK);
	for (size_t i = 0; i < c->n; i++)
		HB_FUZZ_ASSERT(hb_trace_write(w, &c->r[i], NULL) == HB_OK);
	HB_FUZZ_ASSERT(hb_trace_writer_close(w, NULL) == HB_OK);
	if (lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return;
	}
	rc = hb_trace_read(fd, "rewrite", keep, &back, &h2, &n2, NULL);
	if (rc == 2) {
		free(back.r);
		close(fd);
		return;
	}
	HB_FUZZ_ASSERT(rc == HB_OK && n2 == c->n && back.n == c->n);
	HB_FUZZ_ASSERT(h2.top_k == h->top_k && h2.layers == h->layers && h2.experts == h->experts &&
		       h2.record_bytes == h->record_bytes && h2.owner == h->owner &&
		       h2.generation == h->generation && h2.has_thread == h->has_thread &&
		       (!h->has_thread || h2.thread == h->thread) &&
		       !memcmp(h2.artifact, h->artifact, sizeof(h->artifact)) &&
		       !memcmp(h2.text, h->text, sizeof(h->text)));
	for (size_t i = 0; i < c->n; i++)
		HB_FUZZ_ASSERT(same_route(&c->r[i], &back.r[i], h->top_k));
	free(back.r);
	close(fd);
}

int hb_fuzz_trace(const uint8_t *data, size_t size)
{
	struct collect c = {0};
	struct hb_trace_header h;
	struct hb_error err;
	uint64_t n = 0;
	int fd, rc;

	if (size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	fd = hb_fuzz_memfd(data, size, 0, size);
	if (fd < 0)
		return HB_FUZZ_REFUSED;
	hb_error_clear(&err);
	rc = hb_trace_read(fd, "fuzz", keep, &c, &h, &n, &err);
	close(fd);
	HB_FUZZ_ASSERT(!c.overflow);
	if (rc == 2) { /* the harness ran out of memory */
		free(c.r);
		return HB_FUZZ_REFUSED;
	}
	if (rc != HB_OK) {
		HB_FUZZ_ASSERT(err.id[0] != '\0');
		HB_FUZZ_ASSERT(!strncmp(err.id, "trace-", 6));
		free(c.r);
		return HB_FUZZ_REFUSED;
	}
	HB_FUZZ_ASSERT(n == c.n);
	/* a different chunking: one record a chunk, and the largest */
	round_trip(&h, &c, 1);
	round_trip(&h, &c, HB_TRACE_MAX_CHUNK_RECORDS);
	free(c.r);
	return HB_FUZZ_ACCEPTED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_trace(data, size);
	return 0;
}
#endif
