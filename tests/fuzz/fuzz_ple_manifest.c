/*
 * fuzz_ple_manifest.c: fuzz target of the PLE v1 manifest parsers: the
 * header and directory decoders (hb_ple_header_decode,
 * hb_ple_directory_decode) on the input buffer, and hb_ple_store_open on a
 * memfd holding it, followed by verified row reads.
 *
 * Input: one flags byte, then the store's bytes.
 *   bit 0  recompute the manifest SHA-256 (when the decoders accept the
 *          header and directory and the input holds the digest table);
 *   bit 1  first recompute the digest-table entry of every page the input
 *          holds, so that row reads get past the page digest;
 *   bit 2  the extent is the store size the header declares, the file
 *          zero-extended to hold it (up to HB_FUZZ_MAX_EXTENT); otherwise
 *          the extent is the input length;
 *   bit 3  the store starts at file offset 4096 instead of 0.
 *
 * Invariants: a decoded header and directory encode back to the same
 * bytes; open accepts only what the decoders accept and reports the same
 * layout; a row read and a page verify of the same page agree; rows past
 * the store are refused; table lookups invert each other.  This file owns
 * only the harness; the store is libstore/ple/hb_ple_{layout,reader}.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "ple/hb_ple_store.h"
#include "hb_sha256.h"

#include <unistd.h>

#define FLAG_MANIFEST 1u
#define FLAG_PAGES 2u
#define FLAG_EXTEND 4u
#define FLAG_BASE 8u

/* Decode header and directory of s; true with *l complete on success. */
static bool decode(const uint8_t *s, size_t n, uint64_t base,
		   struct hb_ple_layout *l)
{
	uint8_t psha[HB_PLE_DIGEST_BYTES], msha[HB_PLE_DIGEST_BYTES];
	uint8_t enc[HB_PLE_HEADER_BYTES];
	uint8_t dir[HB_PLE_MAX_TABLES * HB_PLE_DIR_ENTRY_BYTES];
	struct hb_error err;
	int rc;

	if (n < HB_PLE_HEADER_BYTES)
		return false;
	hb_error_clear(&err);
	rc = hb_ple_header_decode(s, base, l, psha, msha, &err);
	if (rc) {
		HB_FUZZ_ASSERT(rc < 0 && err.code == rc && err.id != NULL);
		return false;
	}
	HB_FUZZ_ASSERT(l->table_count >= 1 && l->table_count <= HB_PLE_MAX_TABLES);
	HB_FUZZ_ASSERT(l->dir_offset == HB_PLE_HEADER_BYTES);
	HB_FUZZ_ASSERT(l->dir_bytes == (uint64_t)HB_PLE_DIR_ENTRY_BYTES * l->table_count);
	if (n - HB_PLE_HEADER_BYTES < l->dir_bytes)
		return false;
	rc = hb_ple_directory_decode(s + HB_PLE_HEADER_BYTES, base, l, &err);
	if (rc) {
		HB_FUZZ_ASSERT(rc < 0 && err.code == rc && err.id != NULL);
		return false;
	}
	HB_FUZZ_ASSERT(l->page_stride % HB_PLE_PAGE_ALIGNMENT == 0);
	HB_FUZZ_ASSERT(l->page_stride <= HB_PLE_MAX_PAGE_STRIDE);
	HB_FUZZ_ASSERT(l->payload_offset % HB_PLE_PAGE_ALIGNMENT == 0);
	HB_FUZZ_ASSERT(l->digest_offset == l->dir_offset + l->dir_bytes);
	HB_FUZZ_ASSERT(l->digest_bytes == l->page_count * HB_PLE_DIGEST_BYTES);
	HB_FUZZ_ASSERT(l->payload_offset >= l->digest_offset + l->digest_bytes);
	HB_FUZZ_ASSERT(l->payload_offset - (l->digest_offset + l->digest_bytes) <
		       HB_PLE_PAGE_ALIGNMENT);
	HB_FUZZ_ASSERT(l->store_size == l->payload_offset + l->payload_size);
	HB_FUZZ_ASSERT(l->payload_size == l->page_count * l->page_stride);
	HB_FUZZ_ASSERT(HB_PLE_PAGE_HEADER_BYTES +
		       (uint64_t)l->rows_per_page * l->encoded_row_bytes <= l->page_stride);
	/* every byte of header and directory has one meaning */
	hb_ple_header_encode(l, psha, msha, enc);
	HB_FUZZ_ASSERT(memcmp(enc, s, sizeof(enc)) == 0);
	hb_ple_directory_encode(l, dir);
	HB_FUZZ_ASSERT(memcmp(dir, s + HB_PLE_HEADER_BYTES, (size_t)l->dir_bytes) == 0);
	return true;
}

static void reseal(uint8_t *s, size_t n, const struct hb_ple_layout *l,
		   uint8_t flags)
{
	uint8_t man[HB_PLE_DIGEST_BYTES];
	uint64_t pad_end = l->payload_offset;

	if (l->digest_offset + l->digest_bytes > n)
		return;
	if (flags & FLAG_PAGES) {
		for (uint64_t p = 0; p < l->page_count; p++) {
			uint64_t at = l->payload_offset + p * l->page_stride;

			if (at > n || l->page_stride > n - at)
				break;
			hb_sha256_buf(s + at, (size_t)l->page_stride,
				      s + l->digest_offset + p * HB_PLE_DIGEST_BYTES);
		}
	}
	if ((flags & FLAG_MANIFEST) && pad_end <= n) {
		hb_ple_manifest_digest(l, s, s + l->dir_offset, s + l->digest_offset, man);
		memcpy(s + HB_PLE_OFF_MANIFEST_SHA256, man, sizeof(man));
	}
}

static void read_row(struct hb_ple_store *st, const struct hb_ple_layout *l,
		     uint64_t row, struct hb_ple_scratch *sc, uint8_t *enc,
		     float *f)
{
	struct hb_error e1, e2, e3;
	struct hb_ple_loc loc;
	uint32_t table;
	uint64_t local, back;
	int rc1, rc2, rc3;

	hb_error_clear(&e1);
	hb_error_clear(&e2);
	hb_error_clear(&e3);
	rc1 = hb_ple_row_read(st, row, sc, enc, l->encoded_row_bytes, &e1);
	if (row >= l->physical_rows) {
		HB_FUZZ_ASSERT(rc1 != HB_OK && hb_fuzz_same_id(e1.id, "ple-row-range"));
		HB_FUZZ_ASSERT(hb_ple_table_of_row(l, row, &table, &local, &e2) != HB_OK);
		return;
	}
	HB_FUZZ_ASSERT(rc1 == HB_OK || (e1.code == rc1 && e1.id != NULL));
	HB_FUZZ_ASSERT(hb_ple_locate(l, row, &loc, &e2) == HB_OK);
	rc2 = hb_ple_page_verify(st, loc.page, sc, &e2);
	HB_FUZZ_ASSERT(rc1 == rc2 && hb_fuzz_same_id(e1.id, e2.id));
	rc3 = hb_ple_row_read_f32(st, row, sc, f, l->row_width, &e3);
	if (rc1 != HB_OK)
		HB_FUZZ_ASSERT(rc3 == rc1 && hb_fuzz_same_id(e1.id, e3.id));
	else if (l->codec_id == HB_PLE_CODEC_BF16)
		HB_FUZZ_ASSERT(rc3 == HB_OK);
	else
		HB_FUZZ_ASSERT(rc3 == HB_OK || hb_fuzz_same_id(e3.id, "ple-row-value"));
	HB_FUZZ_ASSERT(hb_ple_table_of_row(l, row, &table, &local, &e2) == HB_OK);
	HB_FUZZ_ASSERT(hb_ple_table_row(l, table, local, &back, &e2) == HB_OK && back == row);
}

static void exercise(struct hb_ple_store *st, const struct hb_ple_layout *want)
{
	const struct hb_ple_layout *l = hb_ple_store_layout(st);
	struct hb_ple_verify_report rep;
	struct hb_ple_scratch sc;
	struct hb_error err;
	uint8_t *enc;
	float *f;
	uint64_t rows[4];

	HB_FUZZ_ASSERT(l->store_size == want->store_size);
	HB_FUZZ_ASSERT(l->page_count == want->page_count);
	HB_FUZZ_ASSERT(l->page_stride == want->page_stride);
	HB_FUZZ_ASSERT(l->physical_rows == want->physical_rows);
	HB_FUZZ_ASSERT(hb_ple_store_meta_bytes_read(st) == l->payload_offset);
	hb_error_clear(&err);
	if (hb_ple_scratch_init(&sc, st, &err) != HB_OK)
		return;
	enc = malloc(l->encoded_row_bytes);
	f = malloc((size_t)l->row_width * sizeof(float));
	if (enc && f) {
		rows[0] = 0;
		rows[1] = l->physical_rows / 2;
		rows[2] = l->physical_rows - 1;
		rows[3] = l->physical_rows;
		for (size_t i = 0; i < HB_ARRAY_LEN(rows); i++)
			read_row(st, l, rows[i], &sc, enc, f);
		/* the store's own scratch takes the same path */
		read_row(st, l, rows[2], NULL, enc, f);
	}
	free(enc);
	free(f);
	HB_FUZZ_ASSERT(hb_ple_page_verify(st, l->page_count, &sc, &err) != HB_OK);
	if (l->store_size <= (4u << 20)) {
		int rc;

		hb_error_clear(&err);
		rc = hb_ple_payload_verify(st, &sc, NULL, NULL, &rep, &err);

		HB_FUZZ_ASSERT(rep.pages_checked == l->page_count);
		HB_FUZZ_ASSERT((rc == HB_OK) == (rep.bad_pages == 0 && rep.payload_ok));
	}
	hb_ple_scratch_release(&sc);
}

int hb_fuzz_ple_manifest(const uint8_t *data, size_t size)
{
	/* header and the largest directory: what the decoders may look at */
	const size_t meta_max = HB_PLE_HEADER_BYTES +
				HB_PLE_MAX_TABLES * HB_PLE_DIR_ENTRY_BYTES;
	struct hb_ple_layout l;
	struct hb_ple_store *st = NULL;
	struct hb_error err;
	uint64_t base, extent, fsize;
	uint8_t flags, *s;
	bool decoded;
	size_t n, cap, len;
	int fd, rc;

	if (size < 1 || size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	flags = data[0];
	n = size - 1;
	/* The buffer is zero-padded so that it always holds the bytes a
	 * zero-extended file shows the reader. */
	cap = n > meta_max ? n : meta_max;
	s = calloc(1, cap);
	if (!s)
		return HB_FUZZ_REFUSED;
	memcpy(s, data + 1, n);
	base = (flags & FLAG_BASE) ? HB_PLE_PAGE_ALIGNMENT : 0;
	extent = n;
	if (flags & FLAG_EXTEND)
		extent = hb_fuzz_le64(s + 136);
	fsize = base + n;
	if (extent <= HB_FUZZ_MAX_EXTENT && base + extent > fsize)
		fsize = base + extent;
	/* the bytes of the file from base on, as far as the buffer goes */
	len = fsize - base < cap ? (size_t)(fsize - base) : cap;
	memset(&l, 0, sizeof(l));
	decoded = decode(s, len, base, &l);
	if (decoded && (flags & (FLAG_MANIFEST | FLAG_PAGES)))
		reseal(s, len, &l, flags);
	fd = hb_fuzz_memfd(s, len, base, fsize);
	if (fd < 0) {
		free(s);
		return HB_FUZZ_REFUSED;
	}
	hb_error_clear(&err);
	rc = hb_ple_store_open(&st, fd, base, extent, &err);
	if (rc == HB_OK) {
		HB_FUZZ_ASSERT(st != NULL);
		HB_FUZZ_ASSERT(decoded); /* open accepts nothing the decoders refuse */
		exercise(st, &l);
		hb_ple_store_close(st);
	} else {
		HB_FUZZ_ASSERT(st == NULL && rc < 0 && err.code == rc && err.id != NULL);
	}
	close(fd);
	free(s);
	return rc == HB_OK ? HB_FUZZ_ACCEPTED : HB_FUZZ_REFUSED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_ple_manifest(data, size);
	return 0;
}
#endif
