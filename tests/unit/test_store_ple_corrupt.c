/*
 * Unit tests: the PLE v1 store on corrupt input.  Every region of the store
 * (manifest field, directory entry, digest-table entry, padding, page
 * header, page body, page fill, bytes past the extent) is damaged in turn
 * and must be reported with its diagnostic id, field path and absolute byte
 * offset; a failed row read must leave the caller's buffer untouched.
 *
 * The small bf16 store (test_store_ple.h): manifest 0..511, directory
 * 512..575, digest table 576..2335, padding 2336..4095, page p at
 * 4096 + 4096 p, rows from +64, 320 bytes each, 7 per page.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_fault.h"
#include "test_store_ple.h"

#define PAGE(p) (4096ull + 4096ull * (p))
#define STORE_BYTES (4096ull + 4096ull * SMALL_PAGES)

enum how { XOR, U32, U64 };

struct damage {
	uint64_t off;
	enum how how;
	uint64_t value; /* the XOR mask or the value written */
	int code;
	const char *id, *field;
	uint64_t at;    /* reported offset */
};

static void apply(const char *path, const struct damage *d)
{
	if (d->how == XOR)
		xor_byte(path, d->off, (uint8_t)d->value);
	else if (d->how == U32)
		poke_u32(path, d->off, (uint32_t)d->value);
	else
		poke_u64(path, d->off, d->value);
}

static void fresh_store(void)
{
	unlink("ple.bin");
	CHECK_EQ_INT(small_write_file("ple.bin", HB_PLE_CODEC_BF16, NULL), HB_OK);
}

static bool expect(const struct hb_error *err, int rc, const struct damage *d,
		   size_t i)
{
	if (rc == d->code && err->id && strcmp(err->id, d->id) == 0 &&
	    strcmp(err->field, d->field) == 0 && err->has_offset && err->offset == d->at)
		return true;
	hb_check_fail(__FILE__, __LINE__,
		      "case %zu (%s %s): got rc %d id %s field %s offset %" PRIu64 " (%s)",
		      i, d->id, d->field, rc, err->id ? err->id : "(null)", err->field,
		      err->offset, err->msg);
	return false;
}

/* Damage found when the store is opened. */
static void manifest_damage(void)
{
	static const struct damage cases[] = {
		{ 0, XOR, 0x01, HB_ERR_FORMAT, "ple-magic", "ple.manifest.magic", 0 },
		{ 8, U32, 2, HB_ERR_UNSUPPORTED, "ple-version", "ple.manifest.version", 8 },
		{ 12, U32, 256, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.header_bytes", 12 },
		{ 16, U32, 3, HB_ERR_CONTRACT, "ple-family", "ple.manifest.family", 16 },
		{ 20, U32, 9, HB_ERR_UNSUPPORTED, "ple-codec", "ple.manifest.codec_id", 20 },
		{ 24, U32, 2, HB_ERR_UNSUPPORTED, "ple-codec", "ple.manifest.codec_version", 24 },
		{ 28, U32, 32, HB_ERR_UNSUPPORTED, "ple-codec", "ple.manifest.group_size", 28 },
		{ 32, U32, 0, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.row_width", 32 },
		{ 36, U32, 322, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.encoded_row_bytes", 36 },
		{ 40, U32, 0, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.rows_per_page", 40 },
		{ 40, U32, 8, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.page_count", 72 },
		{ 44, U32, 32, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.page_header_bytes", 44 },
		{ 48, U32, 512, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.page_alignment", 48 },
		{ 52, U32, 64, HB_ERR_FORMAT, "ple-table-directory", "ple.table[0].physical_rows", 528 },
		{ 52, U32, 0, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.row_alignment", 52 },
		{ 56, U32, 0, HB_ERR_FORMAT, "ple-table-directory", "ple.manifest.table_count", 56 },
		{ 56, U32, 3, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.table_directory_bytes", 96 },
		{ 60, XOR, 0x80, HB_ERR_FORMAT, "ple-reserved-nonzero", "ple.manifest.reserved0", 60 },
		{ 64, U64, 8192, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.page_stride", 64 },
		{ 72, U64, 56, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.page_count", 72 },
		{ 80, U64, 385, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.physical_rows", 80 },
		{ 88, U64, 1024, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.table_directory_offset", 88 },
		{ 104, U64, 608, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.digest_table_offset", 104 },
		{ 112, U64, 1792, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.digest_table_bytes", 112 },
		{ 120, U64, 8192, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.payload_offset", 120 },
		{ 128, U64, 4096, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.payload_size", 128 },
		{ 136, U64, STORE_BYTES + 4096, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.store_size", 136 },
		/* structurally valid, caught by the manifest digest */
		{ 150, XOR, 0x04, HB_ERR_DIGEST, "ple-manifest-digest", "ple.manifest.manifest_sha256", 208 },
		{ 180, XOR, 0x04, HB_ERR_DIGEST, "ple-manifest-digest", "ple.manifest.manifest_sha256", 208 },
		{ 210, XOR, 0x04, HB_ERR_DIGEST, "ple-manifest-digest", "ple.manifest.manifest_sha256", 208 },
		{ 300, XOR, 0x10, HB_ERR_FORMAT, "ple-reserved-nonzero", "ple.manifest.reserved", 300 },
		{ 511, XOR, 0x10, HB_ERR_FORMAT, "ple-reserved-nonzero", "ple.manifest.reserved", 511 },
		/* table directory: entry 1 at 544 */
		{ 544, U32, 1, HB_ERR_FORMAT, "ple-table-directory", "ple.table[1].layer_id", 544 },
		{ 548, U32, 7, HB_ERR_FORMAT, "ple-reserved-nonzero", "ple.table[1].reserved", 548 },
		{ 552, U64, 255, HB_ERR_FORMAT, "ple-table-directory", "ple.table[1].first_row", 552 },
		{ 560, U64, 256, HB_ERR_FORMAT, "ple-table-directory", "ple.table[1].physical_rows", 560 },
		{ 536, U64, 0, HB_ERR_FORMAT, "ple-table-directory", "ple.table[0].logical_rows", 536 },
		{ 536, U64, 129, HB_ERR_DIGEST, "ple-manifest-digest", "ple.manifest.manifest_sha256", 208 },
		/* digest table entry 3, alignment padding */
		{ 576 + 3 * 32 + 5, XOR, 0x01, HB_ERR_DIGEST, "ple-manifest-digest", "ple.manifest.manifest_sha256", 208 },
		{ 3000, XOR, 0x01, HB_ERR_FORMAT, "ple-reserved-nonzero", "ple.padding", 3000 },
	};

	for (size_t i = 0; i < HB_ARRAY_LEN(cases); i++) {
		struct hb_ple_store *s;
		struct hb_error err;
		int fd, rc;

		fresh_store();
		apply("ple.bin", &cases[i]);
		hb_error_clear(&err);
		rc = open_store("ple.bin", &fd, &s, &err);
		expect(&err, rc, &cases[i], i);
		CHECK(s == NULL);
		hb_ple_store_close(s);
		close(fd);
	}
}

/* A codec group that does not tile the width, in a stored manifest. */
static void manifest_tiling(void)
{
	static const struct damage d = { 28, U32, 64, HB_ERR_UNSUPPORTED,
					 "ple-codec-tiling", "ple.manifest.group_size", 28 };
	struct hb_ple_store *s;
	struct hb_error err;
	int fd, rc;

	fresh_store();
	poke_u32("ple.bin", 20, HB_PLE_CODEC_AFFINE4);
	apply("ple.bin", &d);
	hb_error_clear(&err);
	rc = open_store("ple.bin", &fd, &s, &err);
	expect(&err, rc, &d, 0);
	close(fd);
}

static void extent_damage(void)
{
	struct hb_ple_store *s = NULL;
	struct hb_error err;
	uint8_t tail[4096] = { 0 };
	int fd;

	fresh_store();
	fd = open_path("ple.bin", O_RDONLY);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_store_open(&s, fd, 100, STORE_BYTES, &err), HB_ERR_FORMAT);
	CHECK_STR(err.id, "ple-extent");
	CHECK_STR(err.field, "ple.extent.base");
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_store_open(&s, fd, 0, 100, &err), HB_ERR_SHORT);
	CHECK_STR(err.id, "ple-extent");
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_store_open(&s, fd, 4096, STORE_BYTES, &err), HB_ERR_SHORT);
	CHECK_STR(err.id, "ple-extent");
	CHECK_STR(err.field, "ple.extent.size");
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_store_open(&s, fd, UINT64_MAX - 4095, 8192, &err), HB_ERR_OVERFLOW);
	CHECK_STR(err.id, "ple-overflow");
	close(fd);

	/* trailing bytes past the store inside the declared extent */
	poke("ple.bin", STORE_BYTES, tail, sizeof(tail));
	hb_error_clear(&err);
	CHECK_EQ_INT(open_store("ple.bin", &fd, &s, &err), HB_ERR_FORMAT);
	CHECK_STR(err.id, "ple-extent");
	CHECK_STR(err.field, "ple.manifest.store_size");
	CHECK_EQ_U64(err.offset, 136);
	CHECK(strstr(err.msg, "4096 past") != NULL);
	close(fd);
	/* a truncated store */
	CHECK_EQ_INT(truncate("ple.bin", (off_t)STORE_BYTES - 1), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(open_store("ple.bin", &fd, &s, &err), HB_ERR_FORMAT);
	CHECK_STR(err.id, "ple-extent");
	CHECK(strstr(err.msg, "needs 1 more") != NULL);
	close(fd);
}

static uint8_t sentinel_ok(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != 0x5a)
			return 0;
	return 1;
}

/*
 * Read row `row` (raw and as f32) and page `page`, all of which must fail
 * with d; the output buffers must keep their sentinel.
 */
static void expect_read_fails(struct hb_ple_store *s, uint64_t row, uint64_t page,
			      const struct damage *d, size_t i)
{
	struct hb_ple_scratch sc;
	struct hb_error err;
	uint8_t raw[2 * SMALL_WIDTH];
	float f[SMALL_WIDTH];
	int rc;

	CHECK_EQ_INT(hb_ple_scratch_init(&sc, s, NULL), HB_OK);
	memset(raw, 0x5a, sizeof(raw));
	memset(f, 0x5a, sizeof(f));
	hb_error_clear(&err);
	rc = hb_ple_row_read(s, row, &sc, raw, sizeof(raw), &err);
	expect(&err, rc, d, i);
	CHECK(sentinel_ok(raw, sizeof(raw)));
	hb_error_clear(&err);
	rc = hb_ple_row_read_f32(s, row, NULL, f, SMALL_WIDTH, &err);
	expect(&err, rc, d, i);
	CHECK(sentinel_ok((const uint8_t *)f, sizeof(f)));
	hb_error_clear(&err);
	rc = hb_ple_page_verify(s, page, &sc, &err);
	expect(&err, rc, d, i);
	hb_ple_scratch_release(&sc);
}

/* Damage inside pages: open passes (it reads no page), the read fails. */
static void page_damage(void)
{
	static const struct {
		uint64_t row, page;
		struct damage d;
	} cases[] = {
		{ 23, 3, { PAGE(3), XOR, 0x01, HB_ERR_FORMAT, "ple-page-header",
			   "ple.page[3].header.magic", PAGE(3) } },
		{ 23, 3, { PAGE(3) + 8, U64, 4, HB_ERR_FORMAT, "ple-page-header",
			   "ple.page[3].header.page_index", PAGE(3) + 8 } },
		{ 23, 3, { PAGE(3) + 16, U64, 22, HB_ERR_FORMAT, "ple-page-header",
			   "ple.page[3].header.first_row", PAGE(3) + 16 } },
		{ 23, 3, { PAGE(3) + 24, U32, 6, HB_ERR_FORMAT, "ple-page-header",
			   "ple.page[3].header.valid_rows", PAGE(3) + 24 } },
		{ 23, 3, { PAGE(3) + 28, U32, 8, HB_ERR_FORMAT, "ple-page-header",
			   "ple.page[3].header.rows_per_page", PAGE(3) + 28 } },
		{ 23, 3, { PAGE(3) + 32, U32, 128, HB_ERR_FORMAT, "ple-page-header",
			   "ple.page[3].header.row_width", PAGE(3) + 32 } },
		{ 23, 3, { PAGE(3) + 36, U32, 100, HB_ERR_FORMAT, "ple-page-header",
			   "ple.page[3].header.encoded_row_bytes", PAGE(3) + 36 } },
		{ 23, 3, { PAGE(3) + 40, U32, 2, HB_ERR_FORMAT, "ple-page-header",
			   "ple.page[3].header.codec_id", PAGE(3) + 40 } },
		{ 23, 3, { PAGE(3) + 44, U32, 2, HB_ERR_FORMAT, "ple-page-header",
			   "ple.page[3].header.codec_version", PAGE(3) + 44 } },
		{ 23, 3, { PAGE(3) + 48, U32, 32, HB_ERR_FORMAT, "ple-page-header",
			   "ple.page[3].header.group_size", PAGE(3) + 48 } },
		{ 23, 3, { PAGE(3) + 52, U32, 3, HB_ERR_FORMAT, "ple-page-header",
			   "ple.page[3].header.family", PAGE(3) + 52 } },
		{ 23, 3, { PAGE(3) + 60, XOR, 0x01, HB_ERR_FORMAT, "ple-reserved-nonzero",
			   "ple.page[3].header.reserved", PAGE(3) + 56 } },
		/* a byte of another row of the same page */
		{ 23, 3, { PAGE(3) + 64 + 100, XOR, 0x01, HB_ERR_DIGEST, "ple-page-digest",
			   "ple.page[3]", PAGE(3) } },
		/* fill after the 7 rows */
		{ 23, 3, { PAGE(3) + 4095, XOR, 0x01, HB_ERR_FORMAT, "ple-reserved-nonzero",
			   "ple.page[3].fill", PAGE(3) + 4095 } },
		/* the unused slot of the partial last page (6 rows of 7) */
		{ 383, 54, { PAGE(54) + 64 + 6 * 320, XOR, 0x01, HB_ERR_FORMAT,
			     "ple-reserved-nonzero", "ple.page[54].fill",
			     PAGE(54) + 64 + 6 * 320 } },
	};

	for (size_t i = 0; i < HB_ARRAY_LEN(cases); i++) {
		struct hb_ple_store *s;
		struct hb_error err;
		int fd;

		fresh_store();
		apply("ple.bin", &cases[i].d);
		hb_error_clear(&err);
		CHECK_EQ_INT(open_store("ple.bin", &fd, &s, &err), HB_OK);
		if (s) {
			expect_read_fails(s, cases[i].row, cases[i].page, &cases[i].d, i);
			/* rows of other pages still read */
			CHECK_EQ_INT(hb_ple_page_verify(s, 2, NULL, NULL), HB_OK);
		}
		hb_ple_store_close(s);
		close(fd);
	}
}

/* A page copied from another position, and a forged digest-table entry. */
static void page_moved_and_table_forged(void)
{
	static const struct damage moved = { 0, XOR, 0, HB_ERR_FORMAT, "ple-page-header",
					     "ple.page[3].header.page_index", PAGE(3) + 8 };
	static const struct damage forged = { 0, XOR, 0, HB_ERR_DIGEST, "ple-page-digest",
					      "ple.page[3]", PAGE(3) };
	struct hb_ple_spec spec;
	struct hb_ple_layout l;
	struct hb_ple_store *s;
	uint8_t page[4096];
	int fd;

	small_spec(&spec, HB_PLE_CODEC_BF16);
	CHECK_EQ_INT(hb_ple_plan(&spec, &l, NULL), HB_OK);
	fresh_store();
	peek("ple.bin", PAGE(2), page, sizeof(page));
	poke("ple.bin", PAGE(3), page, sizeof(page));
	CHECK_EQ_INT(open_store("ple.bin", &fd, &s, NULL), HB_OK);
	if (s)
		expect_read_fails(s, 21, 3, &moved, 0);
	hb_ple_store_close(s);
	close(fd);
	/* Even with its digest entry and the manifest rewritten to match,
	 * the copied page's header still betrays it. */
	reseal_page("ple.bin", 0, &l, 3);
	reseal_manifest("ple.bin", 0, &l);
	CHECK_EQ_INT(open_store("ple.bin", &fd, &s, NULL), HB_OK);
	if (s)
		expect_read_fails(s, 21, 3, &moved, 1);
	hb_ple_store_close(s);
	close(fd);

	/* A digest-table entry changed, the manifest resealed: open passes,
	 * page 3 is located by its digest. */
	fresh_store();
	xor_byte("ple.bin", 576 + 3 * 32, 0xff);
	reseal_manifest("ple.bin", 0, &l);
	CHECK_EQ_INT(open_store("ple.bin", &fd, &s, NULL), HB_OK);
	if (s) {
		expect_read_fails(s, 27, 3, &forged, 2);
		CHECK_EQ_INT(hb_ple_row_read(s, 28, NULL, page, sizeof(page), NULL), HB_OK);
	}
	hb_ple_store_close(s);
	close(fd);
}

/* Read failures: injected EIO and a file truncated after open. */
static void read_failures(void)
{
	static const struct damage eio = { 0, XOR, 0, HB_ERR_IO, "ple-read",
					   "ple.page[3]", 0 };
	struct hb_ple_store *s;
	struct hb_error err;
	uint8_t raw[2 * SMALL_WIDTH];
	int fd;

	fresh_store();
	CHECK_EQ_INT(open_store("ple.bin", &fd, &s, NULL), HB_OK);
	if (!s)
		return;
	memset(raw, 0x5a, sizeof(raw));
	hb_fault_reset();
	hb_fault_arm(HB_FAULT_READ, 1, EIO);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_row_read(s, 22, NULL, raw, sizeof(raw), &err), HB_ERR_IO);
	hb_fault_reset();
	CHECK_STR(err.id, eio.id);
	CHECK_STR(err.field, eio.field);
	CHECK_EQ_INT(err.sys_errno, EIO);
	CHECK(sentinel_ok(raw, sizeof(raw)));
	/* short reads that make progress are retried, not failures */
	hb_fault_arm(HB_FAULT_SHORT_READ, 1, EIO);
	CHECK_EQ_INT(hb_ple_row_read(s, 22, NULL, raw, sizeof(raw), NULL), HB_OK);
	hb_fault_reset();
	memset(raw, 0x5a, sizeof(raw));
	CHECK_EQ_INT(truncate("ple.bin", (off_t)PAGE(54) + 100), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_row_read(s, 380, NULL, raw, sizeof(raw), &err), HB_ERR_SHORT);
	CHECK_STR(err.id, "ple-read");
	CHECK_STR(err.field, "ple.page[54]");
	CHECK(sentinel_ok(raw, sizeof(raw)));
	/* out-of-range rows and short output buffers are refused up front */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_row_read(s, SMALL_ROWS, NULL, raw, sizeof(raw), &err),
		     HB_ERR_INVALID);
	CHECK_STR(err.id, "ple-row-range");
	CHECK_EQ_INT(hb_ple_row_read(s, 0, NULL, raw, sizeof(raw) - 1, NULL), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_ple_page_verify(s, SMALL_PAGES, NULL, NULL), HB_ERR_INVALID);
	CHECK(sentinel_ok(raw, sizeof(raw)));
	hb_ple_store_close(s);
	close(fd);
}

struct findings {
	int n;
	uint64_t page[8];
	const char *id[8];
};

static void collect(void *ctx, uint64_t page, const struct hb_error *e)
{
	struct findings *f = ctx;

	if (f->n < 8) {
		f->page[f->n] = page;
		f->id[f->n] = e->id;
	}
	f->n++;
}

/* The verifier reports every bad page and goes on; a read error stops it. */
static void verify_reports_all(void)
{
	struct hb_ple_store *s;
	struct hb_ple_verify_report rep;
	struct findings f = { 0 };
	struct hb_error err;
	int fd;

	fresh_store();
	xor_byte("ple.bin", PAGE(3) + 500, 0x01);
	poke_u64("ple.bin", PAGE(10) + 16, 0);
	CHECK_EQ_INT(open_store("ple.bin", &fd, &s, NULL), HB_OK);
	if (!s)
		return;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_payload_verify(s, NULL, collect, &f, &rep, &err), HB_ERR_DIGEST);
	CHECK_STR(err.id, "ple-page-digest");
	CHECK_STR(err.field, "ple.page[3]");
	CHECK_EQ_INT(f.n, 3);
	CHECK_EQ_U64(f.page[0], 3);
	CHECK_STR(f.id[0], "ple-page-digest");
	CHECK_EQ_U64(f.page[1], 10);
	CHECK_STR(f.id[1], "ple-page-header");
	CHECK_EQ_U64(f.page[2], UINT64_MAX);
	CHECK_STR(f.id[2], "ple-payload-digest");
	CHECK_EQ_U64(rep.pages_checked, SMALL_PAGES);
	CHECK_EQ_U64(rep.bad_pages, 2);
	CHECK(!rep.payload_ok);

	memset(&f, 0, sizeof(f));
	hb_fault_reset();
	hb_fault_arm(HB_FAULT_READ, 6, EIO); /* page 5 */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_payload_verify(s, NULL, collect, &f, &rep, &err), HB_ERR_IO);
	hb_fault_reset();
	CHECK_STR(err.id, "ple-read");
	CHECK_STR(err.field, "ple.page[5]");
	CHECK_EQ_INT(f.n, 1); /* page 3 only: it stopped at page 5 */
	CHECK_EQ_U64(rep.pages_checked, 5);
	CHECK_EQ_U64(rep.bad_pages, 1);
	hb_ple_store_close(s);
	close(fd);
}

/*
 * AFN-003's isolated end-to-end check: change page bytes, recompute that
 * page's digest and the manifest digest, leave the payload digest stale.
 * open, page verification and row reads pass; only the whole-payload
 * comparison fails.
 */
static void isolated_payload_digest(void)
{
	struct hb_ple_spec spec;
	struct hb_ple_layout l;
	struct hb_ple_store *s;
	struct hb_ple_verify_report rep;
	struct findings f = { 0 };
	struct hb_error err;
	uint8_t raw[2 * SMALL_WIDTH];
	int fd;

	small_spec(&spec, HB_PLE_CODEC_BF16);
	CHECK_EQ_INT(hb_ple_plan(&spec, &l, NULL), HB_OK);
	fresh_store();
	xor_byte("ple.bin", PAGE(17) + 64 + 2 * 320 + 9, 0x40); /* row 121 */
	reseal_page("ple.bin", 0, &l, 17);
	reseal_manifest("ple.bin", 0, &l);
	hb_error_clear(&err);
	CHECK_EQ_INT(open_store("ple.bin", &fd, &s, &err), HB_OK);
	if (!s)
		return;
	for (uint64_t p = 0; p < SMALL_PAGES; p++)
		CHECK_EQ_INT(hb_ple_page_verify(s, p, NULL, NULL), HB_OK);
	CHECK_EQ_INT(hb_ple_row_read(s, 121, NULL, raw, sizeof(raw), NULL), HB_OK);
	{
		uint16_t want[SMALL_WIDTH];
		small_bf16_row(121, want);
		CHECK_EQ_INT(raw[9], (uint8_t)((want[4] >> 8) ^ 0x40)); /* the mutated byte */
	}
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_payload_verify(s, NULL, collect, &f, &rep, &err), HB_ERR_DIGEST);
	CHECK_STR(err.id, "ple-payload-digest");
	CHECK_STR(err.field, "ple.manifest.payload_sha256");
	CHECK_EQ_U64(err.offset, HB_PLE_OFF_PAYLOAD_SHA256);
	CHECK_EQ_INT(f.n, 1);
	CHECK_EQ_U64(f.page[0], UINT64_MAX);
	CHECK_EQ_U64(rep.bad_pages, 0);
	CHECK(!rep.payload_ok);
	hb_ple_store_close(s);
	close(fd);
}

/*
 * The real geometry (affine4-g32, 654 rows a page: a 32 GB store) as a
 * sparse file: a manifest and digest table written by hand, the pages
 * holes.  open reads the manifest only; a row read finds a hole page and
 * refuses it.
 */
static void sparse_full_size(void)
{
	struct hb_ple_spec spec;
	struct hb_ple_layout l;
	struct hb_ple_store *s = NULL;
	struct hb_error err;
	uint8_t hdr[HB_PLE_HEADER_BYTES], dir[32], man[32], pay[32] = { 1 };
	uint8_t *tab;
	uint8_t raw[100];
	int fd;

	memset(&spec, 0, sizeof(spec));
	spec.codec_id = HB_PLE_CODEC_AFFINE4;
	spec.codec_version = 1;
	spec.group_size = 32;
	spec.row_width = 160;
	spec.rows_per_page = 654;
	spec.row_alignment = 128;
	spec.table_count = 1;
	spec.tables[0].layer_id = 1;
	spec.tables[0].logical_rows = 320001446;
	CHECK_EQ_INT(hb_ple_plan(&spec, &l, NULL), HB_OK);
	tab = malloc((size_t)l.digest_bytes);
	CHECK(tab != NULL);
	if (!tab)
		return;
	for (uint64_t i = 0; i < l.digest_bytes; i++)
		tab[i] = (uint8_t)mix64(i);
	hb_ple_header_encode(&l, pay, NULL, hdr);
	hb_ple_directory_encode(&l, dir);
	hb_ple_manifest_digest(&l, hdr, dir, tab, man);
	memcpy(hdr + HB_PLE_OFF_MANIFEST_SHA256, man, 32);
	fd = open_path("sparse.bin", O_RDWR | O_CREAT);
	CHECK(fd >= 0);
	CHECK_EQ_INT(ftruncate(fd, (off_t)l.store_size), 0);
	CHECK_EQ_INT(hb_pwrite_full(fd, hdr, sizeof(hdr), 0, "s", NULL), HB_OK);
	CHECK_EQ_INT(hb_pwrite_full(fd, dir, sizeof(dir), 512, "s", NULL), HB_OK);
	CHECK_EQ_INT(hb_pwrite_full(fd, tab, (size_t)l.digest_bytes, l.digest_offset, "s", NULL),
		     HB_OK);
	free(tab);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_store_open(&s, fd, 0, l.store_size, &err), HB_OK);
	if (s) {
		const struct hb_ple_layout *g = hb_ple_store_layout(s);
		CHECK_EQ_U64(hb_ple_store_meta_bytes_read(s), 15659008);
		CHECK_EQ_U64(g->store_size, 32082358272ull);
		CHECK_EQ_U64(g->tables[0].logical_rows, 320001446);
		CHECK_EQ_U64(g->physical_rows, 320001536);
		memset(raw, 0x5a, sizeof(raw));
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_ple_row_read(s, 320001535, NULL, raw, sizeof(raw), &err),
			     HB_ERR_FORMAT);
		CHECK_STR(err.id, "ple-page-header");
		CHECK_STR(err.field, "ple.page[489298].header.magic");
		CHECK_EQ_U64(err.offset, 15659008ull + 489298ull * 65536);
		CHECK(sentinel_ok(raw, sizeof(raw)));
	}
	hb_ple_store_close(s);
	close(fd);
}

HB_TEST_MAIN(T(manifest_damage), T(manifest_tiling), T(extent_damage),
	     T(page_damage), T(page_moved_and_table_forged), T(read_failures),
	     T(verify_reports_all), T(isolated_payload_digest),
	     T(sparse_full_size))
