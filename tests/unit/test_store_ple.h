/*
 * test_store_ple.h: shared helpers of the PLE store unit tests
 * (test_store_ple.c, test_store_ple_corrupt.c).
 *
 * The small store used throughout: two tables (layer 1 with 130 logical
 * rows -> 256 physical, layer 3 with 5 -> 128), 384 global rows of 160
 * values, 7 rows per page so that pages straddle the table boundary and the
 * last page (54) holds 6 rows.  Row contents are a deterministic function of
 * the global row; padding rows (local >= logical) are zero.
 */
#ifndef TEST_STORE_PLE_H
#define TEST_STORE_PLE_H

#include "hb_base.h"
#include "harness.h"
#include "hb_io.h"
#include "ple/hb_ple_store.h"
#include "hb_sha256.h"

#include <fcntl.h>
#include <unistd.h>

#define SMALL_WIDTH 160u
#define SMALL_RPP 7u
#define SMALL_ROWS 384u
#define SMALL_PAGES 55u

static inline void small_spec(struct hb_ple_spec *s, uint32_t codec)
{
	memset(s, 0, sizeof(*s));
	s->codec_id = codec;
	s->codec_version = HB_PLE_CODEC_VERSION;
	s->group_size = codec == HB_PLE_CODEC_AFFINE4 ? 32 : 0;
	s->row_width = SMALL_WIDTH;
	s->rows_per_page = SMALL_RPP;
	s->row_alignment = HB_PLE_ROW_ALIGNMENT;
	s->table_count = 2;
	s->tables[0].layer_id = 1;
	s->tables[0].logical_rows = 130;
	s->tables[1].layer_id = 3;
	s->tables[1].logical_rows = 5;
	for (unsigned i = 0; i < HB_PLE_DIGEST_BYTES; i++)
		s->hash_identity[i] = (uint8_t)(0xa0 + i);
}

static inline bool small_is_padding(uint64_t row)
{
	return (row >= 130 && row < 256) || row >= 256 + 5;
}

static inline uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Any 16-bit pattern, NaNs and infinities included: bf16 is copied bit-exactly. */
static inline void small_bf16_row(uint64_t row, uint16_t *out)
{
	for (uint32_t k = 0; k < SMALL_WIDTH; k++)
		out[k] = small_is_padding(row) ? 0 : (uint16_t)mix64(row * 1000 + k);
}

/* Finite values whose magnitude varies by row, for affine4. */
static inline void small_f32_row(uint64_t row, float *out)
{
	static const float mags[] = { 1e-3f, 0.05f, 1.0f, 37.0f, 1e4f };
	for (uint32_t k = 0; k < SMALL_WIDTH; k++) {
		uint64_t r = mix64(row * 1000 + k);
		float u = (float)(r >> 40) / (float)(1u << 24) - 0.5f;
		out[k] = small_is_padding(row) ? 0.0f : u * mags[row % 5];
	}
}

/* Feed rows [0, SMALL_ROWS) to w in uneven chunks. */
static inline int small_feed(struct hb_ple_writer *w, uint32_t codec,
			     struct hb_error *err)
{
	static const uint64_t chunks[] = { 1, 3, 50, 7, 200, 2, 121 };
	uint16_t *b = malloc(sizeof(uint16_t) * SMALL_WIDTH * 200);
	float *f = malloc(sizeof(float) * SMALL_WIDTH * 200);
	uint64_t row = 0;
	int rc = HB_OK;

	if (!b || !f) {
		free(b);
		free(f);
		return HB_ERR_NOMEM;
	}
	for (size_t c = 0; c < HB_ARRAY_LEN(chunks) && !rc; c++) {
		for (uint64_t i = 0; i < chunks[c]; i++) {
			small_bf16_row(row + i, b + i * SMALL_WIDTH);
			small_f32_row(row + i, f + i * SMALL_WIDTH);
		}
		rc = codec == HB_PLE_CODEC_BF16
			     ? hb_ple_writer_put_bf16(w, b, chunks[c], err)
			     : hb_ple_writer_put_f32(w, f, chunks[c], err);
		row += chunks[c];
	}
	free(b);
	free(f);
	return rc;
}

/* Publish the small store as its own file. */
static inline int small_write_file(const char *path, uint32_t codec,
				   struct hb_error *err)
{
	struct hb_ple_spec spec;
	struct hb_ple_layout l;
	struct hb_ple_file *f;
	int rc;

	small_spec(&spec, codec);
	if ((rc = hb_ple_plan(&spec, &l, err)) ||
	    (rc = hb_ple_file_begin(&f, path, 0, &l, err)))
		return rc;
	rc = small_feed(hb_ple_file_writer(f), codec, err);
	if (rc) {
		hb_ple_file_abort(f);
		return rc;
	}
	return hb_ple_file_commit(f, err);
}

static inline int open_path(const char *path, int flags)
{
	return open(path, flags | O_CLOEXEC, 0644);
}

static inline uint64_t path_size(const char *path)
{
	int fd = open_path(path, O_RDONLY);
	uint64_t size = 0;

	if (fd >= 0) {
		hb_file_size(fd, &size, path, NULL);
		close(fd);
	}
	return size;
}

/* Overwrite len bytes of a file at off. */
static inline void poke(const char *path, uint64_t off, const void *data, size_t len)
{
	int fd = open_path(path, O_RDWR);

	CHECK(fd >= 0);
	CHECK_EQ_INT(hb_pwrite_full(fd, data, len, off, path, NULL), HB_OK);
	close(fd);
}

static inline void peek(const char *path, uint64_t off, void *data, size_t len)
{
	int fd = open_path(path, O_RDONLY);

	CHECK(fd >= 0);
	CHECK_EQ_INT(hb_pread_full(fd, data, len, off, path, NULL), HB_OK);
	close(fd);
}

static inline void xor_byte(const char *path, uint64_t off, uint8_t mask)
{
	uint8_t b = 0;

	peek(path, off, &b, 1);
	b ^= mask;
	poke(path, off, &b, 1);
}

static inline void poke_u32(const char *path, uint64_t off, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
			 (uint8_t)(v >> 24) };
	poke(path, off, b, 4);
}

static inline void poke_u64(const char *path, uint64_t off, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	poke(path, off, b, 8);
}

/*
 * Recompute the manifest digest of a store at base in path from the bytes
 * now on disk (a forger who rewrites the manifest consistently).
 */
static inline void reseal_manifest(const char *path, uint64_t base,
				   const struct hb_ple_layout *l)
{
	uint8_t hdr[HB_PLE_HEADER_BYTES], man[HB_PLE_DIGEST_BYTES];
	uint8_t *dir = malloc((size_t)l->dir_bytes);
	uint8_t *tab = malloc((size_t)l->digest_bytes);

	CHECK(dir && tab);
	if (dir && tab) {
		peek(path, base, hdr, sizeof(hdr));
		peek(path, base + l->dir_offset, dir, (size_t)l->dir_bytes);
		peek(path, base + l->digest_offset, tab, (size_t)l->digest_bytes);
		hb_ple_manifest_digest(l, hdr, dir, tab, man);
		poke(path, base + HB_PLE_OFF_MANIFEST_SHA256, man, sizeof(man));
	}
	free(dir);
	free(tab);
}

/* Recompute page p's digest-table entry from the page now on disk. */
static inline void reseal_page(const char *path, uint64_t base,
			       const struct hb_ple_layout *l, uint64_t p)
{
	uint8_t *page = malloc((size_t)l->page_stride);
	uint8_t d[HB_PLE_DIGEST_BYTES];

	CHECK(page != NULL);
	if (!page)
		return;
	peek(path, base + l->payload_offset + p * l->page_stride, page,
	     (size_t)l->page_stride);
	hb_sha256_buf(page, (size_t)l->page_stride, d);
	poke(path, base + l->digest_offset + p * HB_PLE_DIGEST_BYTES, d, sizeof(d));
	free(page);
}

/* Open a store file whose extent is the whole file. */
static inline int open_store(const char *path, int *fd, struct hb_ple_store **s,
			     struct hb_error *err)
{
	*s = NULL;
	*fd = open_path(path, O_RDONLY);
	if (*fd < 0)
		return HB_ERR_IO;
	return hb_ple_store_open(s, *fd, 0, path_size(path), err);
}

#endif
