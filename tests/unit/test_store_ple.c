/*
 * Unit tests: the PLE v1 store's planner, writer and reader on good input
 * (the corrupt-input cases are in test_store_ple_corrupt.c).
 */
#include "hb_base.h"
#include "harness.h"
#include "codec/hb_affine4.h"
#include "hb_fault.h"
#include "hb_half.h"
#include "test_store_ple.h"

#include <math.h>
#include <pthread.h>

static void diag_table(void)
{
	static const char *const want[] = {
		"ple-magic", "ple-version", "ple-family", "ple-geometry", "ple-codec",
		"ple-codec-tiling", "ple-table-directory", "ple-reserved-nonzero",
		"ple-extent", "ple-overflow", "ple-manifest-digest", "ple-page-header",
		"ple-page-digest", "ple-payload-digest", "ple-row-range", "ple-read",
		"ple-write", "ple-writer", "ple-row-value",
	};

	CHECK_EQ_U64(HB_PLE_DIAG_COUNT, HB_ARRAY_LEN(want));
	for (unsigned i = 0; i < HB_ARRAY_LEN(want); i++) {
		CHECK_STR(hb_ple_diag_id((enum hb_ple_diag)i), want[i]);
		CHECK(hb_ple_diag_what((enum hb_ple_diag)i) != NULL);
	}
	CHECK(hb_ple_diag_id(HB_PLE_DIAG_COUNT) == NULL);
}

static void real_spec(struct hb_ple_spec *s, uint32_t codec, uint32_t rpp)
{
	memset(s, 0, sizeof(*s));
	s->codec_id = codec;
	s->codec_version = 1;
	s->group_size = codec == HB_PLE_CODEC_AFFINE4 ? 32 : 0;
	s->row_width = 160;
	s->rows_per_page = rpp;
	s->row_alignment = 128;
	s->table_count = 1;
	s->tables[0].layer_id = 1;
	s->tables[0].logical_rows = 320001446;
}

/*
 * The real table, planned only.  bf16 rows are 320 bytes; 204 of them and
 * the 64-byte header fill 65,344 of a 64 KiB page.  affine4-g32 rows are
 * 5 x 20 = 100 bytes; 654 fit.  Numbers checked by hand:
 * ceil(320,001,536 / 204) = 1,568,635 pages, 32 bytes each = 50,196,320;
 * 512 + 32 + 50,196,320 aligned up to 4096 = 50,200,576.
 */
static void real_geometry(void)
{
	struct hb_ple_spec s;
	struct hb_ple_layout l;

	real_spec(&s, HB_PLE_CODEC_BF16, 204);
	CHECK_EQ_INT(hb_ple_plan(&s, &l, NULL), HB_OK);
	CHECK_EQ_U64(l.tables[0].physical_rows, 320001536);
	CHECK_EQ_U64(l.physical_rows, 320001536);
	CHECK_EQ_U64(l.encoded_row_bytes, 320);
	CHECK_EQ_U64(l.page_stride, 65536);
	CHECK_EQ_U64(l.page_count, 1568635);
	CHECK_EQ_U64(l.digest_offset, 544);
	CHECK_EQ_U64(l.digest_bytes, 50196320);
	CHECK_EQ_U64(l.payload_offset, 50200576);
	CHECK_EQ_U64(l.payload_size, 102802063360ull);
	CHECK_EQ_U64(l.store_size, 102852263936ull);
	CHECK_EQ_U64(hb_ple_page_valid_rows(&l, l.page_count - 1), 200);

	real_spec(&s, HB_PLE_CODEC_AFFINE4, 654);
	CHECK_EQ_INT(hb_ple_plan(&s, &l, NULL), HB_OK);
	CHECK_EQ_U64(l.encoded_row_bytes, 100);
	CHECK_EQ_U64(l.page_stride, 65536);
	CHECK_EQ_U64(l.page_count, 489299);
	CHECK_EQ_U64(l.digest_bytes, 15657568);
	CHECK_EQ_U64(l.payload_offset, 15659008);
	CHECK_EQ_U64(l.store_size, 32082358272ull);
	CHECK_EQ_U64(hb_ple_page_valid_rows(&l, l.page_count - 1), 644);
	/* One more row per page crosses 64 KiB: the stride doubles. */
	real_spec(&s, HB_PLE_CODEC_AFFINE4, 655);
	CHECK_EQ_INT(hb_ple_plan(&s, &l, NULL), HB_OK);
	CHECK_EQ_U64(l.page_stride, 69632);
}

static void expect_plan(const struct hb_ple_spec *s, int code, const char *id,
			const char *field)
{
	struct hb_ple_layout l;
	struct hb_error err;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_plan(s, &l, &err), code);
	CHECK_STR(err.id, id);
	CHECK_STR(err.field, field);
}

static void plan_refusals(void)
{
	struct hb_ple_spec s;

	real_spec(&s, HB_PLE_CODEC_AFFINE4, 654);
	s.group_size = 64; /* 160 = 2.5 x 64: never padded */
	expect_plan(&s, HB_ERR_UNSUPPORTED, "ple-codec-tiling", "ple.manifest.group_size");
	s.group_size = 48;
	expect_plan(&s, HB_ERR_UNSUPPORTED, "ple-codec", "ple.manifest.group_size");
	real_spec(&s, HB_PLE_CODEC_BF16, 204);
	s.group_size = 32;
	expect_plan(&s, HB_ERR_UNSUPPORTED, "ple-codec", "ple.manifest.group_size");
	real_spec(&s, 3, 204);
	expect_plan(&s, HB_ERR_UNSUPPORTED, "ple-codec", "ple.manifest.codec_id");
	real_spec(&s, HB_PLE_CODEC_BF16, 204);
	s.codec_version = 2;
	expect_plan(&s, HB_ERR_UNSUPPORTED, "ple-codec", "ple.manifest.codec_version");
	real_spec(&s, HB_PLE_CODEC_BF16, 0);
	expect_plan(&s, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.rows_per_page");
	real_spec(&s, HB_PLE_CODEC_BF16, 60000); /* 19 MB pages */
	expect_plan(&s, HB_ERR_UNSUPPORTED, "ple-geometry", "ple.manifest.rows_per_page");
	real_spec(&s, HB_PLE_CODEC_BF16, 204);
	s.row_width = 0;
	expect_plan(&s, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.row_width");
	real_spec(&s, HB_PLE_CODEC_BF16, 204);
	s.row_alignment = 0;
	expect_plan(&s, HB_ERR_FORMAT, "ple-geometry", "ple.manifest.row_alignment");
	small_spec(&s, HB_PLE_CODEC_BF16);
	s.tables[1].layer_id = 1; /* not above the previous */
	expect_plan(&s, HB_ERR_FORMAT, "ple-table-directory", "ple.table[1].layer_id");
	s.tables[0].layer_id = 0;
	expect_plan(&s, HB_ERR_FORMAT, "ple-table-directory", "ple.table[0].layer_id");
	small_spec(&s, HB_PLE_CODEC_BF16);
	s.tables[1].logical_rows = 0;
	expect_plan(&s, HB_ERR_FORMAT, "ple-table-directory", "ple.table[1].logical_rows");
	s.table_count = 0;
	expect_plan(&s, HB_ERR_FORMAT, "ple-table-directory", "ple.manifest.table_count");
	s.table_count = HB_PLE_MAX_TABLES + 1;
	expect_plan(&s, HB_ERR_FORMAT, "ple-table-directory", "ple.manifest.table_count");
}

/* Rows near 2^64: every step of the arithmetic refuses, none wraps. */
static void locate_overflow(void)
{
	struct hb_ple_spec s;
	struct hb_ple_layout l;
	struct hb_ple_loc loc;
	struct hb_error err;

	small_spec(&s, HB_PLE_CODEC_BF16);
	s.tables[1].logical_rows = UINT64_MAX - 5; /* aligning up wraps */
	expect_plan(&s, HB_ERR_OVERFLOW, "ple-overflow", "ple.table[1].logical_rows");
	s.tables[1].logical_rows = UINT64_MAX - 300; /* aligns, the sum wraps */
	expect_plan(&s, HB_ERR_OVERFLOW, "ple-overflow", "ple.table[1].logical_rows");
	s.rows_per_page = 1;
	s.table_count = 1;
	s.tables[0].logical_rows = 1ull << 62; /* 2^62 pages x 32 bytes wraps */
	expect_plan(&s, HB_ERR_OVERFLOW, "ple-overflow", "ple.manifest.digest_table_bytes");
	s.tables[0].logical_rows = 1ull << 56; /* 2^56 pages x 4096 wraps */
	expect_plan(&s, HB_ERR_OVERFLOW, "ple-overflow", "ple.manifest.payload_size");
	s.tables[0].logical_rows = 1ull << 51; /* fits u64, not off_t */
	expect_plan(&s, HB_ERR_OVERFLOW, "ple-overflow", "ple.manifest.store_size");

	small_spec(&s, HB_PLE_CODEC_BF16);
	CHECK_EQ_INT(hb_ple_plan(&s, &l, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_locate(&l, UINT64_MAX, &loc, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "ple-row-range");
	CHECK_EQ_INT(hb_ple_locate(&l, SMALL_ROWS, &loc, NULL), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_ple_locate(&l, SMALL_ROWS - 1, &loc, NULL), HB_OK);
	CHECK_EQ_U64(loc.page, 54);
	CHECK_EQ_U64(loc.slot, 5);
	CHECK_EQ_U64(loc.page_offset, 4096 + 54 * 4096);
	CHECK_EQ_U64(loc.row_offset, 64 + 5 * 320);
	/* A hand-built layout whose page offset wraps is refused, not read. */
	l.physical_rows = UINT64_MAX;
	l.page_count = UINT64_MAX;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_locate(&l, UINT64_MAX - 1, &loc, &err), HB_ERR_OVERFLOW);
	CHECK_STR(err.id, "ple-overflow");
	/* ... and one that points past its own store. */
	l.physical_rows = 1000;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_locate(&l, 999, &loc, &err), HB_ERR_OVERFLOW);
}

static void table_lookup(void)
{
	struct hb_ple_spec s;
	struct hb_ple_layout l;
	struct hb_error err;
	uint32_t t = 99;
	uint64_t local = 99, row = 99;

	small_spec(&s, HB_PLE_CODEC_BF16);
	CHECK_EQ_INT(hb_ple_plan(&s, &l, NULL), HB_OK);
	CHECK_EQ_U64(l.tables[0].first_row, 0);
	CHECK_EQ_U64(l.tables[0].physical_rows, 256);
	CHECK_EQ_U64(l.tables[1].first_row, 256);
	CHECK_EQ_U64(l.tables[1].physical_rows, 128);
	CHECK_EQ_U64(l.tables[1].logical_rows, 5);
	CHECK_EQ_U64(l.page_count, SMALL_PAGES);
	CHECK_EQ_U64(l.store_size, 4096 + SMALL_PAGES * 4096);
	CHECK_EQ_INT(hb_ple_table_of_row(&l, 255, &t, &local, NULL), HB_OK);
	CHECK_EQ_U64(t, 0);
	CHECK_EQ_U64(local, 255);
	CHECK_EQ_INT(hb_ple_table_of_row(&l, 256, &t, &local, NULL), HB_OK);
	CHECK_EQ_U64(t, 1);
	CHECK_EQ_U64(local, 0);
	CHECK_EQ_INT(hb_ple_table_of_row(&l, 383, &t, &local, NULL), HB_OK);
	CHECK_EQ_U64(local, 127);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_table_of_row(&l, 384, &t, &local, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "ple-row-range");
	CHECK_EQ_INT(hb_ple_table_row(&l, 1, 4, &row, NULL), HB_OK);
	CHECK_EQ_U64(row, 260);
	CHECK_EQ_INT(hb_ple_table_row(&l, 1, 127, &row, NULL), HB_OK); /* padding */
	CHECK_EQ_U64(row, 383);
	CHECK_EQ_INT(hb_ple_table_row(&l, 1, 128, &row, NULL), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_ple_table_row(&l, 2, 0, &row, NULL), HB_ERR_INVALID);
	CHECK_EQ_U64(row, 383);
}

/* Every row back bit-exactly, from the file and through the f32 path. */
static void roundtrip_bf16(void)
{
	struct hb_ple_store *s;
	struct hb_ple_scratch sc;
	struct hb_ple_verify_report rep;
	struct hb_error err;
	uint16_t want[SMALL_WIDTH], got[SMALL_WIDTH];
	float f[SMALL_WIDTH];
	int fd;

	hb_error_clear(&err);
	CHECK_EQ_INT(small_write_file("ple.bin", HB_PLE_CODEC_BF16, &err), HB_OK);
	CHECK_EQ_INT(hb_test_count_prefix(".", ".ple.bin.hbtmp."), 0);
	CHECK_EQ_U64(path_size("ple.bin"), 4096 + SMALL_PAGES * 4096);
	CHECK_EQ_INT(open_store("ple.bin", &fd, &s, &err), HB_OK);
	if (!s)
		return;
	/* open read the manifest and nothing else */
	CHECK_EQ_U64(hb_ple_store_meta_bytes_read(s), 4096);
	CHECK_EQ_U64(hb_ple_store_layout(s)->table_count, 2);
	CHECK_EQ_U64(hb_ple_store_layout(s)->hash_identity[31], 0xa0 + 31);
	CHECK_EQ_INT(hb_ple_scratch_init(&sc, s, NULL), HB_OK);
	for (uint64_t r = 0; r < SMALL_ROWS; r++) {
		uint8_t raw[2 * SMALL_WIDTH];
		bool same = true;

		small_bf16_row(r, want);
		CHECK_EQ_INT(hb_ple_row_read(s, r, &sc, raw, sizeof(raw), NULL), HB_OK);
		for (uint32_t k = 0; k < SMALL_WIDTH; k++)
			got[k] = (uint16_t)(raw[2 * k] | raw[2 * k + 1] << 8);
		CHECK(memcmp(got, want, sizeof(got)) == 0);
		CHECK_EQ_INT(hb_ple_row_read_f32(s, r, r % 2 ? &sc : NULL, f,
						 SMALL_WIDTH, NULL), HB_OK);
		for (uint32_t k = 0; k < SMALL_WIDTH; k++) {
			float w = hb_bf16_to_f32(want[k]);
			same &= memcmp(&w, &f[k], sizeof(w)) == 0;
		}
		CHECK(same);
		if (small_is_padding(r))
			CHECK(got[0] == 0 && got[SMALL_WIDTH - 1] == 0);
	}
	CHECK_EQ_INT(hb_ple_payload_verify(s, &sc, NULL, NULL, &rep, NULL), HB_OK);
	CHECK_EQ_U64(rep.pages_checked, SMALL_PAGES);
	CHECK_EQ_U64(rep.bad_pages, 0);
	CHECK(rep.payload_ok);
	hb_ple_scratch_release(&sc);
	hb_ple_store_close(s);
	close(fd);
}

/* affine4-g32: encoded bytes equal the codec's own, decode within its bound. */
static void roundtrip_affine4(void)
{
	struct hb_ple_store *s;
	struct hb_error err;
	float in[SMALL_WIDTH], out[SMALL_WIDTH];
	uint8_t want[100], got[100];
	int fd, bad = 0;

	hb_error_clear(&err);
	CHECK_EQ_INT(small_write_file("ple.bin", HB_PLE_CODEC_AFFINE4, &err), HB_OK);
	CHECK_EQ_INT(open_store("ple.bin", &fd, &s, &err), HB_OK);
	if (!s)
		return;
	CHECK_EQ_U64(hb_ple_store_layout(s)->encoded_row_bytes, 100);
	for (uint64_t r = 0; r < SMALL_ROWS; r++) {
		small_f32_row(r, in);
		CHECK_EQ_INT(hb_affine4_encode(in, SMALL_WIDTH, 32, want, sizeof(want),
					       NULL, NULL), HB_OK);
		CHECK_EQ_INT(hb_ple_row_read(s, r, NULL, got, sizeof(got), NULL), HB_OK);
		CHECK(memcmp(got, want, sizeof(got)) == 0);
		CHECK_EQ_INT(hb_ple_row_read_f32(s, r, NULL, out, SMALL_WIDTH, NULL), HB_OK);
		for (uint32_t g = 0; g < SMALL_WIDTH / 32; g++) {
			float lo = in[g * 32], hi = in[g * 32];
			for (uint32_t k = g * 32; k < g * 32 + 32; k++) {
				lo = in[k] < lo ? in[k] : lo;
				hi = in[k] > hi ? in[k] : hi;
			}
			for (uint32_t k = g * 32; k < g * 32 + 32; k++)
				bad += fabs((double)out[k] - in[k]) >
				       hb_affine4_error_bound(lo, hi);
		}
		if (small_is_padding(r))
			CHECK(out[0] == 0.0f && out[SMALL_WIDTH - 1] == 0.0f);
	}
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(hb_ple_payload_verify(s, NULL, NULL, NULL, NULL, NULL), HB_OK);
	hb_ple_store_close(s);
	close(fd);
}

/* Embedded: a store inside a bigger file at a 4096-aligned base. */
static void embedded_writer(void)
{
	struct hb_ple_spec spec;
	struct hb_ple_layout l;
	struct hb_ple_writer *w;
	struct hb_ple_store *s;
	struct hb_error err;
	uint8_t pay[32], man[32], pay2[32], man2[32], tail[5] = "TAIL!";
	uint8_t row[2 * SMALL_WIDTH], row2[2 * SMALL_WIDTH];
	uint16_t want[SMALL_WIDTH];
	float fl[SMALL_WIDTH] = { 0 };
	int fd = open_path("host.bin", O_RDWR | O_CREAT);

	CHECK(fd >= 0);
	small_spec(&spec, HB_PLE_CODEC_BF16);
	CHECK_EQ_INT(hb_ple_plan(&spec, &l, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_writer_begin(&w, fd, 100, &l, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "ple-extent");
	{
		struct hb_ple_layout bad = l;
		bad.store_size += 4096; /* would write past the extent */
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_ple_writer_begin(&w, fd, 8192, &bad, &err), HB_ERR_INVALID);
		CHECK_STR(err.id, "ple-geometry");
	}
	CHECK_EQ_INT(hb_ple_writer_begin(&w, fd, 8192, &l, NULL), HB_OK);
	/* float32 would be rounded: refused, and the writer stays usable */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_writer_put_f32(w, fl, 1, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "ple-writer");
	CHECK_EQ_INT(small_feed(w, HB_PLE_CODEC_BF16, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_writer_put_bf16(w, want, 1, &err), HB_ERR_INVALID);
	CHECK_STR(err.field, "ple.writer.rows");
	CHECK_EQ_U64(hb_ple_writer_rows(w), SMALL_ROWS);
	CHECK_EQ_INT(hb_ple_writer_finish(w, pay, man, NULL), HB_OK);
	hb_ple_writer_free(w);
	/* bytes after the store belong to someone else */
	CHECK_EQ_INT(hb_pwrite_full(fd, tail, 5, 8192 + l.store_size, "host", NULL), HB_OK);
	CHECK_EQ_INT(hb_ple_store_open(&s, fd, 8192, l.store_size, NULL), HB_OK);
	if (s) {
		hb_ple_store_digests(s, pay2, man2);
		CHECK(memcmp(pay, pay2, 32) == 0 && memcmp(man, man2, 32) == 0);
		small_bf16_row(300, want);
		CHECK_EQ_INT(hb_ple_row_read(s, 300, NULL, row, sizeof(row), NULL), HB_OK);
		for (uint32_t k = 0; k < SMALL_WIDTH; k++) {
			row2[2 * k] = (uint8_t)want[k];
			row2[2 * k + 1] = (uint8_t)(want[k] >> 8);
		}
		CHECK(memcmp(row, row2, sizeof(row)) == 0);
		CHECK_EQ_INT(hb_ple_payload_verify(s, NULL, NULL, NULL, NULL, NULL), HB_OK);
		hb_ple_store_close(s);
	}
	/* The same store written at base 0 of its own file is byte-identical. */
	CHECK_EQ_INT(small_write_file("own.bin", HB_PLE_CODEC_BF16, NULL), HB_OK);
	{
		uint8_t *a = malloc((size_t)l.store_size), *b = malloc((size_t)l.store_size);
		CHECK(a && b);
		if (a && b) {
			CHECK_EQ_INT(hb_pread_full(fd, a, (size_t)l.store_size, 8192, "h", NULL), HB_OK);
			peek("own.bin", 0, b, (size_t)l.store_size);
			CHECK(memcmp(a, b, (size_t)l.store_size) == 0);
		}
		free(a);
		free(b);
	}
	close(fd);
}

static void writer_row_count(void)
{
	struct hb_ple_spec spec;
	struct hb_ple_layout l;
	struct hb_ple_file *f;
	struct hb_error err;
	uint16_t row[SMALL_WIDTH] = { 0 };

	small_spec(&spec, HB_PLE_CODEC_BF16);
	CHECK_EQ_INT(hb_ple_plan(&spec, &l, NULL), HB_OK);
	CHECK_EQ_INT(hb_ple_file_begin(&f, "ple.bin", 0, &l, NULL), HB_OK);
	CHECK_EQ_INT(hb_ple_writer_put_bf16(hb_ple_file_writer(f), row, 1, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_file_commit(f, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "ple-writer");
	CHECK_STR(err.field, "ple.writer.rows");
	CHECK(!hb_test_exists("ple.bin"));
	CHECK_EQ_INT(hb_test_count_prefix(".", ".ple.bin.hbtmp."), 0);
	/* a non-finite value cannot be encoded by affine4 */
	small_spec(&spec, HB_PLE_CODEC_AFFINE4);
	CHECK_EQ_INT(hb_ple_plan(&spec, &l, NULL), HB_OK);
	CHECK_EQ_INT(hb_ple_file_begin(&f, "ple.bin", 0, &l, NULL), HB_OK);
	{
		float bad[SMALL_WIDTH] = { 0 };
		bad[17] = NAN;
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_ple_writer_put_f32(hb_ple_file_writer(f), bad, 1, &err),
			     HB_ERR_NONFINITE);
		CHECK_STR(err.id, "ple-row-value");
		CHECK_STR(err.field, "ple.row[0][17]");
		/* the writer is poisoned after a failed row */
		CHECK_EQ_INT(hb_ple_writer_put_f32(hb_ple_file_writer(f), bad + 1, 0, NULL),
			     HB_ERR_INVALID);
	}
	hb_ple_file_abort(f);
	CHECK(!hb_test_exists("ple.bin"));
	CHECK_EQ_INT(hb_test_count_prefix(".", ".ple.bin.hbtmp."), 0);
}

/* Injected faults before the commit point leave no target and no temp. */
static void file_writer_faults(void)
{
	static const struct {
		enum hb_fault_site site;
		unsigned nth;
	} cases[] = {
		{ HB_FAULT_WRITE, 1 },   /* first page */
		{ HB_FAULT_WRITE, 30 },  /* a later page's digest entry */
		{ HB_FAULT_WRITE, 111 }, /* finish: directory (55 pages x 2 writes) */
		{ HB_FAULT_WRITE, 113 }, /* finish: the header, last */
		{ HB_FAULT_READ, 1 },    /* finish re-reading the digest table */
		{ HB_FAULT_READ, 9 },    /* verification of the reopened temp */
		{ HB_FAULT_FSYNC, 1 },
		{ HB_FAULT_DIRSYNC, 1 }, /* before the rename */
		{ HB_FAULT_RENAME, 1 },
	};

	for (size_t i = 0; i < HB_ARRAY_LEN(cases); i++) {
		struct hb_error err;

		hb_fault_reset();
		hb_fault_arm(cases[i].site, cases[i].nth, EIO);
		hb_error_clear(&err);
		CHECK_EQ_INT(small_write_file("ple.bin", HB_PLE_CODEC_BF16, &err), HB_ERR_IO);
		CHECK_EQ_INT(err.sys_errno, EIO);
		if (hb_test_exists("ple.bin") ||
		    hb_test_count_prefix(".", ".ple.bin.hbtmp.") != 0)
			hb_check_fail(__FILE__, __LINE__, "fault case %zu left a file", i);
	}
	hb_fault_reset();
	/* The write count the cases above rely on. */
	CHECK_EQ_INT(small_write_file("ple.bin", HB_PLE_CODEC_BF16, NULL), HB_OK);
	CHECK_EQ_U64(hb_fault_calls(HB_FAULT_WRITE), 113);
	unlink("ple.bin");
	/* After the commit point a failed directory fsync is reported, and the
	 * complete new file stays. */
	hb_fault_reset();
	hb_fault_arm(HB_FAULT_DIRSYNC, 2, EIO);
	CHECK_EQ_INT(small_write_file("ple.bin", HB_PLE_CODEC_BF16, NULL), HB_ERR_IO);
	CHECK(hb_test_exists("ple.bin"));
	CHECK_EQ_INT(hb_test_count_prefix(".", ".ple.bin.hbtmp."), 0);
	hb_fault_reset();
	/* An existing target is not replaced (no HB_PUBLISH_REPLACE). */
	CHECK_EQ_INT(small_write_file("ple.bin", HB_PLE_CODEC_BF16, NULL), HB_ERR_EXISTS);
}

struct reader_arg {
	struct hb_ple_store *s;
	int mismatches;
};

static void *reader_thread(void *p)
{
	struct reader_arg *a = p;
	struct hb_ple_scratch sc;
	uint16_t want[SMALL_WIDTH];
	uint8_t raw[2 * SMALL_WIDTH];

	if (hb_ple_scratch_init(&sc, a->s, NULL)) {
		a->mismatches = -1;
		return NULL;
	}
	for (uint64_t r = 0; r < SMALL_ROWS; r++) {
		small_bf16_row(r, want);
		if (hb_ple_row_read(a->s, r, &sc, raw, sizeof(raw), NULL) ||
		    raw[0] != (uint8_t)want[0] || raw[319] != (uint8_t)(want[159] >> 8))
			a->mismatches++;
	}
	hb_ple_scratch_release(&sc);
	return NULL;
}

/* One open store, four threads, each with its own scratch. */
static void concurrent_reads(void)
{
	struct hb_ple_store *s;
	struct reader_arg args[4];
	pthread_t th[4];
	int fd;

	CHECK_EQ_INT(small_write_file("ple.bin", HB_PLE_CODEC_BF16, NULL), HB_OK);
	CHECK_EQ_INT(open_store("ple.bin", &fd, &s, NULL), HB_OK);
	if (!s)
		return;
	for (int i = 0; i < 4; i++) {
		args[i].s = s;
		args[i].mismatches = 0;
		CHECK_EQ_INT(pthread_create(&th[i], NULL, reader_thread, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ_INT(args[i].mismatches, 0);
	}
	hb_ple_store_close(s);
	close(fd);
}

/* hb_ple_store_open_manifest checks what hb_ple_store_open checks (the
 * same layout and bytes read on a good store, the same refusal of a
 * changed digest-table entry), and a store opened so refuses page and row
 * reads instead of checking them against a table it did not keep. */
static void manifest_only_open(void)
{
	struct hb_ple_store *s = NULL, *m = NULL;
	struct hb_ple_scratch sc;
	struct hb_error err;
	uint8_t raw[2 * SMALL_WIDTH], b = 0;
	int fd;
	uint64_t size;

	hb_error_clear(&err);
	CHECK_EQ_INT(small_write_file("ple.bin", HB_PLE_CODEC_BF16, &err), HB_OK);
	CHECK_EQ_INT(open_store("ple.bin", &fd, &s, &err), HB_OK);
	if (!s)
		return;
	size = path_size("ple.bin");
	CHECK_EQ_INT(hb_ple_store_open_manifest(&m, fd, 0, size, &err), HB_OK);
	CHECK(m != NULL);
	if (m) {
		CHECK_EQ_U64(hb_ple_store_meta_bytes_read(m), hb_ple_store_meta_bytes_read(s));
		CHECK(!memcmp(hb_ple_store_layout(m), hb_ple_store_layout(s), sizeof(struct hb_ple_layout)));
		CHECK_EQ_INT(hb_ple_scratch_init(&sc, m, NULL), HB_OK);
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_ple_row_read(m, 0, &sc, raw, sizeof(raw), &err), HB_ERR_DIGEST);
		CHECK_STR(err.id, "ple-page-digest");
		CHECK_EQ_INT(hb_ple_page_verify(m, 1, &sc, NULL), HB_ERR_DIGEST);
		/* the full store reads the same row */
		CHECK_EQ_INT(hb_ple_row_read(s, 0, &sc, raw, sizeof(raw), NULL), HB_OK);
		hb_ple_scratch_release(&sc);
		hb_ple_store_close(m);
	}
	hb_ple_store_close(s);
	/* one byte of the digest table changed: both refuse it, alike */
	{
		const struct hb_ple_layout *l;
		uint64_t at;
		CHECK_EQ_INT(hb_ple_store_open(&s, fd, 0, size, NULL), HB_OK);
		l = hb_ple_store_layout(s);
		at = l->digest_offset + l->digest_bytes - 1;
		hb_ple_store_close(s);
		close(fd);
		fd = open_path("ple.bin", O_RDWR);
		CHECK(pread(fd, &b, 1, (off_t)at) == 1);
		b ^= 0x20;
		CHECK(pwrite(fd, &b, 1, (off_t)at) == 1);
		for (int k = 0; k < 2; k++) {
			struct hb_ple_store *x = NULL;
			hb_error_clear(&err);
			CHECK_EQ_INT(k ? hb_ple_store_open_manifest(&x, fd, 0, size, &err)
				       : hb_ple_store_open(&x, fd, 0, size, &err), HB_ERR_DIGEST);
			CHECK_STR(err.id, "ple-manifest-digest");
			CHECK(x == NULL);
		}
	}
	close(fd);
}

/*
 * A page snapshot and the rows decoded from it are the row reads: every
 * row of the held page has hb_ple_row_read_f32's bits, a row of another
 * page is refused with its output untouched, and a snapshot that fails
 * (a page past the store, a page whose bytes no longer match its digest)
 * leaves nothing held.
 */
static void snapshot_rows_are_row_reads(void)
{
	struct hb_ple_store *s;
	struct hb_ple_scratch sc;
	struct hb_error err;
	float want[SMALL_WIDTH], got[SMALL_WIDTH];
	uint64_t held_rows = 0;
	int fd;

	hb_error_clear(&err);
	CHECK_EQ_INT(small_write_file("ple.bin", HB_PLE_CODEC_BF16, &err), HB_OK);
	CHECK_EQ_INT(open_store("ple.bin", &fd, &s, &err), HB_OK);
	if (!s)
		return;
	CHECK_EQ_INT(hb_ple_scratch_init(&sc, s, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_snapshot_row_f32(s, &sc, 0, got, SMALL_WIDTH, &err), HB_ERR_INVALID);
	CHECK_STR(err.field, "ple.row"); /* nothing held yet */
	for (uint64_t p = 0; p < SMALL_PAGES; p++) {
		CHECK_EQ_INT(hb_ple_page_verify(s, p, &sc, NULL), HB_OK);
		for (uint64_t r = 0; r < SMALL_ROWS; r++) {
			struct hb_ple_loc loc;
			CHECK_EQ_INT(hb_ple_locate(hb_ple_store_layout(s), r, &loc, NULL), HB_OK);
			memset(got, 0x7f, sizeof(got));
			hb_error_clear(&err);
			if (loc.page != p) {
				CHECK_EQ_INT(hb_ple_snapshot_row_f32(s, &sc, r, got, SMALL_WIDTH, &err), HB_ERR_INVALID);
				CHECK_STR(err.field, "ple.row");
				CHECK(got[0] == got[SMALL_WIDTH - 1] && got[0] != 0);
				continue;
			}
			held_rows++;
			CHECK_EQ_INT(hb_ple_row_read_f32(s, r, NULL, want, SMALL_WIDTH, NULL), HB_OK);
			CHECK_EQ_INT(hb_ple_snapshot_row_f32(s, &sc, r, got, SMALL_WIDTH, NULL), HB_OK);
			CHECK(memcmp(got, want, sizeof(got)) == 0);
		}
	}
	CHECK_EQ_U64(held_rows, SMALL_ROWS); /* every row was on the page held once */
	/* a payload walk writes the scratch's page: nothing is held after it */
	CHECK_EQ_INT(hb_ple_snapshot_row_f32(s, &sc, SMALL_ROWS - 1, got, SMALL_WIDTH, NULL), HB_OK);
	{
		struct hb_ple_verify_report rep;
		CHECK_EQ_INT(hb_ple_payload_verify(s, &sc, NULL, NULL, &rep, NULL), HB_OK);
	}
	CHECK_EQ_INT(hb_ple_snapshot_row_f32(s, &sc, SMALL_ROWS - 1, got, SMALL_WIDTH, NULL), HB_ERR_INVALID);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_ple_page_verify(s, SMALL_PAGES, &sc, &err), HB_ERR_INVALID);
	CHECK_STR(err.field, "ple.page");
	CHECK_EQ_INT(hb_ple_snapshot_row_f32(s, &sc, SMALL_ROWS - 1, got, SMALL_WIDTH, NULL), HB_ERR_INVALID);
	/* page 1's bytes changed on disk: its snapshot fails, nothing is held */
	{
		const struct hb_ple_layout *l = hb_ple_store_layout(s);
		uint8_t b;
		off_t at = (off_t)(l->payload_offset + l->page_stride + HB_PLE_PAGE_HEADER_BYTES);
		CHECK_EQ_INT(hb_ple_page_verify(s, 1, &sc, NULL), HB_OK);
		int wfd = open("ple.bin", O_RDWR);
		CHECK(wfd >= 0);
		CHECK(pread(wfd, &b, 1, at) == 1);
		b ^= 0x5a;
		CHECK(pwrite(wfd, &b, 1, at) == 1);
		close(wfd);
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_ple_page_verify(s, 1, &sc, &err), HB_ERR_DIGEST);
		CHECK_STR(err.field, "ple.page[1]");
		for (uint64_t r = 0; r < SMALL_ROWS; r++) {
			struct hb_ple_loc loc;
			CHECK_EQ_INT(hb_ple_locate(hb_ple_store_layout(s), r, &loc, NULL), HB_OK);
			if (loc.page == 1) {
				CHECK_EQ_INT(hb_ple_snapshot_row_f32(s, &sc, r, got, SMALL_WIDTH, NULL), HB_ERR_INVALID);
				break;
			}
		}
	}
	hb_ple_scratch_release(&sc);
	hb_ple_store_close(s);
	close(fd);
}

HB_TEST_MAIN(T(diag_table), T(real_geometry), T(plan_refusals),
	     T(locate_overflow), T(table_lookup), T(roundtrip_bf16),
	     T(roundtrip_affine4), T(embedded_writer), T(writer_row_count),
	     T(file_writer_faults), T(concurrent_reads), T(manifest_only_open),
	     T(snapshot_rows_are_row_reads))
