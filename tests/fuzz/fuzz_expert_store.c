/*
 * fuzz_expert_store.c: fuzz target of the ExpertMajor v2 parser
 * (hb_em_parse_buf and hb_em_parse_fd).
 *
 * Input: one flags byte, then the store's bytes.
 *   bit 0  recompute the manifest SHA-256 over the (mutated) header and
 *          descriptors before parsing, so that mutations reach the checks
 *          behind the digest instead of all failing em-manifest-digest;
 *   bit 1  the container extent is the store size the header declares and
 *          the file is zero-extended to hold it (when that is at most
 *          HB_FUZZ_MAX_EXTENT); otherwise the extent is the input length;
 *   bit 2  the store starts at file offset 4096 instead of 0.
 * The expected geometry is taken from the input itself (header counts,
 * first descriptor's gate dims), since the caller's geometry is trusted.
 *
 * Invariants: the buffer and fd parsers agree whenever both have the bytes
 * they need; an accepted store serialises back to exactly the input's
 * header and descriptors (every byte has one meaning); record spans lie in
 * the layer's data and reads outside the layout are refused.  This file
 * owns only the harness; the parser is libstore/expert/hb_expert_store.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "expert/hb_expert_store.h"
#include "hb_sha256.h"

#include <unistd.h>

#define FLAG_RESEAL 1u
#define FLAG_EXTEND 2u
#define FLAG_BASE 4u

static void expected_geometry(const uint8_t *s, size_t n,
			      struct hb_em_geometry *g)
{
	const size_t gate = HB_EM_HEADER_BYTES + HB_EM_COMPONENT_OFFSET;

	memset(g, 0, sizeof(*g));
	g->experts_used = 1;
	g->layers = 1;
	g->experts = 1;
	g->hidden = 64;
	g->intermediate = 64;
	if (n >= HB_EM_HEADER_BYTES) {
		g->experts_used = hb_fuzz_le32(s + 20);
		g->layers = hb_fuzz_le32(s + 24);
		g->experts = hb_fuzz_le32(s + 28);
	}
	if (n >= gate + 32) {
		g->hidden = hb_fuzz_le64(s + gate + 16);
		g->intermediate = hb_fuzz_le64(s + gate + 24);
	}
}

static void reseal(uint8_t *s, size_t n, uint32_t layers)
{
	uint8_t h[HB_EM_HEADER_BYTES], digest[HB_SHA256_BYTES];
	size_t desc = (size_t)HB_EM_DESCRIPTOR_BYTES * layers;
	struct hb_sha256 ctx;

	if (layers > HB_EM_MAX_LAYERS || n < HB_EM_HEADER_BYTES ||
	    n - HB_EM_HEADER_BYTES < desc)
		return;
	memcpy(h, s, sizeof(h));
	memset(h + HB_EM_MANIFEST_DIGEST_OFFSET, 0, HB_SHA256_BYTES);
	hb_sha256_init(&ctx);
	hb_sha256_update(&ctx, h, sizeof(h));
	hb_sha256_update(&ctx, s + HB_EM_HEADER_BYTES, desc);
	hb_sha256_final(&ctx, digest);
	memcpy(s + HB_EM_MANIFEST_DIGEST_OFFSET, digest, HB_SHA256_BYTES);
}

static void exercise(const struct hb_em_layout *l, int fd, uint64_t base,
		     const uint8_t *store, size_t n, uint64_t extent)
{
	uint64_t meta = hb_em_layout_meta_bytes(l), off, len;
	struct hb_error err;
	uint8_t *copy, *buf;
	size_t got;

	HB_FUZZ_ASSERT(l->store_size == extent);
	HB_FUZZ_ASSERT(l->layer_count >= 1 && l->layers != NULL);
	/* round trip: every byte of header and descriptors is determined */
	if (meta <= n && (copy = malloc((size_t)meta))) {
		struct hb_em_layout tmp = *l;

		hb_error_clear(&err);
		HB_FUZZ_ASSERT(hb_em_serialise(&tmp, copy, (size_t)meta, &err) == HB_OK);
		HB_FUZZ_ASSERT(memcmp(copy, store, (size_t)meta) == 0);
		free(copy);
	}
	buf = malloc(1u << 16);
	for (uint32_t li = 0; li < l->layer_count; li++) {
		const struct hb_em_layer *ly = &l->layers[li];
		uint32_t picks[2] = { 0, ly->expert_count - 1 };

		HB_FUZZ_ASSERT(ly->data_offset % HB_EM_ALIGNMENT == 0);
		HB_FUZZ_ASSERT(ly->data_offset >= l->data_offset &&
			       ly->data_size <= l->store_size - ly->data_offset);
		for (int k = 0; k < 2; k++) {
			for (int role = HB_EM_RECORD; role < HB_EM_ROLES; role++) {
				hb_error_clear(&err);
				HB_FUZZ_ASSERT(hb_em_record_span(l, li, picks[k], role,
								 &off, &len, &err) == HB_OK);
				HB_FUZZ_ASSERT(off >= ly->data_offset &&
					       len <= ly->data_offset + ly->data_size - off);
				if (buf && len <= (1u << 16)) {
					HB_FUZZ_ASSERT(hb_em_record_read(fd, base, l, li, picks[k],
									 role, buf, 1u << 16,
									 &got, &err) == HB_OK);
					HB_FUZZ_ASSERT(got == len);
				}
			}
		}
	}
	free(buf);
	HB_FUZZ_ASSERT(hb_em_record_span(l, l->layer_count, 0, HB_EM_RECORD, &off, &len, &err) != HB_OK);
	HB_FUZZ_ASSERT(hb_em_record_span(l, 0, l->expert_count, HB_EM_RECORD, &off, &len, &err) != HB_OK);
	HB_FUZZ_ASSERT(hb_em_record_span(l, 0, 0, HB_EM_ROLES, &off, &len, &err) != HB_OK);
	HB_FUZZ_ASSERT(hb_em_record_span(l, 0, 0, -2, &off, &len, &err) != HB_OK);
	if (l->store_size <= (4u << 20)) {
		int rc;

		hb_error_clear(&err);
		rc = hb_em_verify_payload(fd, base, l, &err);
		HB_FUZZ_ASSERT(rc == HB_OK || (err.id && strcmp(err.id, "em-payload-digest") == 0));
	}
}

int hb_fuzz_expert_store(const uint8_t *data, size_t size)
{
	struct hb_em_geometry geo;
	struct hb_em_layout lb, lf;
	struct hb_error eb, ef;
	uint64_t extent, base, fsize, bytes_read, meta;
	uint8_t flags, *store;
	size_t n;
	int fd, rcb, rcf, result = HB_FUZZ_REFUSED;

	if (size < 1 || size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	flags = data[0];
	n = size - 1;
	store = malloc(n ? n : 1);
	if (!store)
		return HB_FUZZ_REFUSED;
	memcpy(store, data + 1, n);
	expected_geometry(store, n, &geo);
	if (flags & FLAG_RESEAL)
		reseal(store, n, geo.layers);
	base = (flags & FLAG_BASE) ? HB_EM_ALIGNMENT : 0;
	extent = n;
	if ((flags & FLAG_EXTEND) && n >= HB_EM_HEADER_BYTES)
		extent = hb_fuzz_le64(store + 80);
	fsize = base + n;
	if (extent <= HB_FUZZ_MAX_EXTENT && base + extent > fsize)
		fsize = base + extent;
	fd = hb_fuzz_memfd(store, n, base, fsize);
	if (fd < 0) {
		free(store);
		return HB_FUZZ_REFUSED;
	}
	hb_error_clear(&eb);
	hb_error_clear(&ef);
	rcb = hb_em_parse_buf(store, n, extent, &geo, &lb, &eb);
	rcf = hb_em_parse_fd(fd, base, extent, &geo, &lf, &bytes_read, &ef);
	HB_FUZZ_ASSERT(rcb == HB_OK || (rcb < 0 && eb.code == rcb));
	HB_FUZZ_ASSERT(rcf == HB_OK || (rcf < 0 && ef.code == rcf));
	HB_FUZZ_ASSERT(rcb != HB_OK || lb.layers != NULL);
	/* Both readers see the same bytes when the buffer holds header and
	 * descriptors and the file holds the extent. */
	meta = HB_EM_HEADER_BYTES + (uint64_t)HB_EM_DESCRIPTOR_BYTES *
				    (geo.layers <= HB_EM_MAX_LAYERS ? geo.layers : 0);
	if (n >= meta && extent <= fsize - base) {
		HB_FUZZ_ASSERT(rcb == rcf);
		HB_FUZZ_ASSERT(hb_fuzz_same_id(eb.id, ef.id));
		if (rcb != HB_OK)
			HB_FUZZ_ASSERT(strcmp(eb.field, ef.field) == 0);
	}
	if (rcf == HB_OK) {
		HB_FUZZ_ASSERT(bytes_read == hb_em_layout_meta_bytes(&lf));
		exercise(&lf, fd, base, store, n, extent);
		result = HB_FUZZ_ACCEPTED;
	}
	if (rcb == HB_OK && rcf == HB_OK)
		HB_FUZZ_ASSERT(memcmp(lb.manifest_sha256, lf.manifest_sha256,
				      HB_SHA256_BYTES) == 0 &&
			       lb.store_size == lf.store_size);
	if (rcb == HB_OK)
		hb_em_layout_release(&lb);
	if (rcf == HB_OK)
		hb_em_layout_release(&lf);
	close(fd);
	free(store);
	return result;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_expert_store(data, size);
	return 0;
}
#endif
