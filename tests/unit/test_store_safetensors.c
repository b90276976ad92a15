/*
 * Unit tests: the single-file safetensors reader and the committed corrupt
 * corpus (tests/fixtures/corrupt/safetensors, made by
 * scripts/make-corrupt-safetensors.py).  Every corpus case must fail with
 * exactly its diagnostic id and field, every valid one must open; targeted
 * cases cover the arithmetic edges, bounded reads and change detection.
 */
#include "hb_base.h"
#include "harness.h"
#include "checkpoint/hb_dtype.h"
#include "hb_io.h"
#include "checkpoint/hb_safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Write 8-byte LE length + header + payload (payload bytes are i*5+1). */
static int write_st(const char *path, const char *header, uint64_t declared_len,
		    size_t payload)
{
	size_t hl = strlen(header), total = 8 + hl + payload;
	unsigned char *b = malloc(total);
	int rc;

	if (!b)
		return -1;
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(declared_len >> (8 * i));
	memcpy(b + 8, header, hl);
	for (size_t i = 0; i < payload; i++)
		b[8 + hl + i] = (unsigned char)(i * 5 + 1);
	rc = hb_test_write_file(path, b, total);
	free(b);
	return rc;
}

static int write_hdr(const char *path, const char *header, size_t payload)
{
	return write_st(path, header, strlen(header), payload);
}

/* Open path expecting failure with id; returns the error for more checks. */
static struct hb_error expect_fail(const char *path, const char *id)
{
	struct hb_st_file f;
	struct hb_error err;

	hb_error_clear(&err);
	CHECK(hb_st_open(&f, path, &err) < 0);
	CHECK_STR(err.id, id);
	CHECK_EQ_INT(f.fd, -1);
	hb_st_close(&f);
	return err;
}

/* ---------------------------------------------------------- the corpus */

struct seen {
	bool ids[HB_ST_DIAG_COUNT];
	unsigned cases, ok;
};

static void run_case(const char *dir, char *line, struct seen *seen)
{
	char *tab1 = strchr(line, '\t'), *tab2, *tab3, path[1024];
	const char *rel = line, *want, *field;
	struct hb_error err;
	struct stat st;
	int rc;

	CHECK(tab1 != NULL);
	if (!tab1)
		return;
	*tab1 = '\0';
	want = tab1 + 1;
	tab2 = strchr(want, '\t');
	CHECK(tab2 != NULL);
	if (!tab2)
		return;
	*tab2 = '\0';
	field = tab2 + 1;
	tab3 = strchr(field, '\t');
	if (tab3)
		*tab3 = '\0';
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	CHECK(stat(path, &st) == 0);
	hb_error_clear(&err);
	if (S_ISDIR(st.st_mode)) {
		struct hb_st_checkpoint ck;
		rc = hb_st_checkpoint_open(&ck, path, &err);
		if (!rc) {
			CHECK(ck.ntensors > 0);
			CHECK_EQ_INT(hb_st_checkpoint_check_unchanged(&ck, NULL), HB_OK);
		}
		hb_st_checkpoint_close(&ck);
	} else {
		struct hb_st_file f;
		rc = hb_st_open(&f, path, &err);
		hb_st_close(&f);
		/* single-file refusals all point at a byte of the file */
		if (rc)
			CHECK(err.has_offset);
	}
	seen->cases++;
	if (strcmp(want, "ok") == 0) {
		if (rc)
			hb_check_fail(__FILE__, __LINE__, "%s must open, got %s: %s: %s", rel,
				      err.id ? err.id : "(no id)", err.field, err.msg);
		seen->ok++;
		return;
	}
	if (rc == 0 || !err.id || strcmp(err.id, want) != 0)
		hb_check_fail(__FILE__, __LINE__, "%s: want %s, got rc %d id %s (%s: %s)", rel,
			      want, rc, err.id ? err.id : "(none)", err.field, err.msg);
	else if (!strstr(err.field, field))
		hb_check_fail(__FILE__, __LINE__, "%s: field \"%s\" lacks \"%s\"", rel,
			      err.field, field);
	for (size_t i = 0; i < HB_ST_DIAG_COUNT; i++)
		if (err.id && !strcmp(err.id, hb_st_diag_table[i].id))
			seen->ids[i] = true;
	CHECK(hb_st_diag_lookup(want) != NULL);
}

static void corpus_cases_fail_as_expected(void)
{
	char dir[1024], tsv[1100], *text = NULL, *line, *next;
	size_t len = 0;
	struct seen seen;

	memset(&seen, 0, sizeof(seen));
	snprintf(dir, sizeof(dir), "%s/tests/fixtures/corrupt/safetensors", hb_test_srcdir());
	snprintf(tsv, sizeof(tsv), "%s/expected.tsv", dir);
	CHECK_EQ_INT(hb_read_file(tsv, 1 << 20, &text, &len, NULL), HB_OK);
	if (!text)
		return;
	for (line = text; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		run_case(dir, line, &seen);
	}
	free(text);
	CHECK_EQ_U64(seen.cases, 77);
	CHECK_EQ_U64(seen.ok, 6);
	/* Every id a file or directory on disk can provoke has a case; the
	 * others are runtime conditions tested below. */
	for (size_t i = 0; i < HB_ST_DIAG_COUNT; i++) {
		bool runtime = i == HB_ST_DIAG_READ_RANGE || i == HB_ST_DIAG_SOURCE_CHANGED ||
			       i == HB_ST_DIAG_CK_DIR_INVALID ||
			       i == HB_ST_DIAG_CK_TOO_MANY_SHARDS;
		if (!runtime && !seen.ids[i])
			hb_check_fail(__FILE__, __LINE__, "no corpus case for %s",
				      hb_st_diag_table[i].id);
	}
}

static void diag_table_is_well_formed(void)
{
	for (size_t i = 0; i < HB_ST_DIAG_COUNT; i++) {
		const char *id = hb_st_diag_table[i].id;
		CHECK(id && (!strncmp(id, "st-", 3) || !strncmp(id, "ck-", 3)));
		CHECK(hb_st_diag_table[i].meaning && hb_st_diag_table[i].meaning[0]);
		CHECK(hb_st_diag_lookup(id) == &hb_st_diag_table[i]);
		for (size_t j = 0; j < i; j++)
			CHECK(strcmp(id, hb_st_diag_table[j].id) != 0);
	}
	CHECK(hb_st_diag_lookup("st-no-such-id") == NULL);
	CHECK_STR(HB_ST_ID(OFFSETS_GAP), "st-offsets-gap");
}

/* -------------------------------------------------------------- dtypes */

static void dtype_names_and_sizes(void)
{
	enum hb_dtype t;
	static const struct { const char *name; unsigned size; } want[] = {
		{ "BOOL", 1 }, { "U8", 1 }, { "I8", 1 }, { "I16", 2 }, { "U16", 2 },
		{ "F16", 2 }, { "BF16", 2 }, { "I32", 4 }, { "U32", 4 }, { "F32", 4 },
		{ "F64", 8 }, { "I64", 8 }, { "U64", 8 }, { "F8_E4M3", 1 },
		{ "F8_E5M2", 1 }, { "F8_E8M0", 1 }, { "C64", 8 },
	};

	for (size_t i = 0; i < HB_ARRAY_LEN(want); i++) {
		CHECK_EQ_INT(hb_dtype_from_name(want[i].name, strlen(want[i].name), &t), HB_OK);
		CHECK_STR(hb_dtype_name(t), want[i].name);
		CHECK_EQ_INT(hb_dtype_size(t), want[i].size);
	}
	CHECK_EQ_INT(HB_DTYPE_COUNT_ - 1, HB_ARRAY_LEN(want));
	t = HB_DTYPE_F32;
	CHECK_EQ_INT(hb_dtype_from_name("f32", 3, &t), HB_ERR_NOTFOUND);
	CHECK_EQ_INT(hb_dtype_from_name("F3", 2, &t), HB_ERR_NOTFOUND);
	CHECK_EQ_INT(hb_dtype_from_name("F32\0", 4, &t), HB_ERR_NOTFOUND);
	CHECK_EQ_INT(hb_dtype_from_name("F4", 2, &t), HB_ERR_NOTFOUND);
	CHECK_EQ_INT(hb_dtype_from_name("", 0, &t), HB_ERR_NOTFOUND);
	CHECK_EQ_INT(t, HB_DTYPE_F32);
	CHECK(hb_dtype_name(HB_DTYPE_INVALID) == NULL);
	CHECK(hb_dtype_name(HB_DTYPE_COUNT_) == NULL);
	CHECK_EQ_INT(hb_dtype_size((enum hb_dtype)99), 0);
}

/* ------------------------------------------------------ valid contents */

static const char two_tensors[] =
	"{\"__metadata__\":{\"format\":\"pt\"},"
	"\"z.bias\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[24,30]},"
	"\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}  ";

static void opens_and_indexes(void)
{
	struct hb_st_file f;
	const struct hb_st_tensor *t;
	struct hb_error err;

	CHECK(write_hdr("m.safetensors", two_tensors, 30) == 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_st_open(&f, "m.safetensors", &err), HB_OK);
	CHECK_EQ_U64(f.ntensors, 2);
	CHECK_EQ_U64(f.header_len, strlen(two_tensors));
	CHECK_EQ_U64(f.data_start, 8 + strlen(two_tensors));
	CHECK_EQ_U64(f.file_size, f.data_start + 30);
	CHECK_STR(f.base, "m.safetensors");
	CHECK_STR(f.tensors[0].name, "z.bias");   /* header order */
	CHECK_STR(f.by_name[0]->name, "a.weight"); /* sorted */
	t = hb_st_find(&f, "a.weight");
	CHECK(t != NULL);
	if (t) {
		CHECK_EQ_INT(t->dtype, HB_DTYPE_F32);
		CHECK_EQ_INT(t->ndim, 2);
		CHECK_EQ_U64(t->shape[0], 2);
		CHECK_EQ_U64(t->shape[1], 3);
		CHECK_EQ_U64(t->nelem, 6);
		CHECK_EQ_U64(t->nbytes, 24);
		CHECK_EQ_U64(t->file_offset, f.data_start);
	}
	t = hb_st_find(&f, "z.bias");
	CHECK(t && t->begin == 24 && t->end == 30 && t->dtype == HB_DTYPE_BF16);
	CHECK(hb_st_find(&f, "a.weigh") == NULL);
	CHECK(hb_st_find(&f, "zz") == NULL);
	CHECK_STR(hb_st_metadata_get(&f, "format"), "pt");
	CHECK(hb_st_metadata_get(&f, "other") == NULL);
	hb_st_close(&f);
	hb_st_close(&f); /* twice is harmless */
}

/* ----------------------------------------------------- targeted edges */

static void file_of_seven_bytes(void)
{
	struct hb_error err;

	CHECK(hb_test_write_file("seven.safetensors", "\x08\0\0\0\0\0\0", 7) == 0);
	err = expect_fail("seven.safetensors", "st-file-short");
	CHECK_EQ_INT(err.code, HB_ERR_SHORT);
	CHECK_STR(err.field, "seven.safetensors:header_length");
	CHECK(hb_test_write_file("zero.safetensors", "", 0) == 0);
	expect_fail("zero.safetensors", "st-file-short");
}

static void header_length_extremes(void)
{
	struct hb_error err;

	/* 2^64-1 and 100,000,001 are refused before any allocation */
	CHECK(write_st("max.safetensors", "{}      ", UINT64_MAX, 0) == 0);
	err = expect_fail("max.safetensors", "st-header-size-limit");
	CHECK(err.has_offset && err.offset == 0);
	CHECK(write_st("limit.safetensors", "{}      ", 100000001, 0) == 0);
	expect_fail("limit.safetensors", "st-header-size-limit");
	/* exactly at the limit is allowed by the limit, then refused as
	 * longer than the file */
	CHECK(write_st("at.safetensors", "{}      ", 100000000, 0) == 0);
	expect_fail("at.safetensors", "st-header-truncated");
	CHECK(write_st("one.safetensors", "{}      ", 9, 0) == 0);
	expect_fail("one.safetensors", "st-header-truncated");
}

static void shape_products_overflow(void)
{
	struct hb_error err;

	/* 2^32 * 2^32 elements: the element count overflows */
	CHECK(write_hdr("a.safetensors", "{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,"
			"4294967296],\"data_offsets\":[0,0]}}", 0) == 0);
	err = expect_fail("a.safetensors", "st-shape-overflow");
	CHECK_STR(err.field, "a.safetensors:tensors[w].shape");
	/* (2^53 - 1)^2 * 0 does not overflow the product order used: 0 first */
	CHECK(write_hdr("b.safetensors", "{\"w\":{\"dtype\":\"F64\",\"shape\":[0,9007199254740991,"
			"9007199254740991],\"data_offsets\":[0,0]}}", 0) == 0);
	{
		struct hb_st_file f;
		CHECK_EQ_INT(hb_st_open(&f, "b.safetensors", NULL), HB_OK);
		CHECK_EQ_U64(f.ntensors, 1);
		hb_st_close(&f);
	}
	/* zero last: the partial product overflows before the zero is seen;
	 * refused (the reference's checked fold refuses it too) */
	CHECK(write_hdr("c.safetensors", "{\"w\":{\"dtype\":\"F64\",\"shape\":[9007199254740991,"
			"9007199254740991,0],\"data_offsets\":[0,0]}}", 0) == 0);
	expect_fail("c.safetensors", "st-shape-overflow");
	/* 2^61 elements fit; 2^61 * 8 bytes = 2^64 does not */
	CHECK(write_hdr("d.safetensors", "{\"w\":{\"dtype\":\"F64\",\"shape\":[2147483648,"
			"1073741824],\"data_offsets\":[0,8]}}", 8) == 0);
	expect_fail("d.safetensors", "st-shape-overflow");
}

static void offsets_edges(void)
{
	struct hb_error err;

	CHECK(write_hdr("rev.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],"
			"\"data_offsets\":[8,0]}}", 8) == 0);
	err = expect_fail("rev.safetensors", "st-offsets-reversed");
	CHECK_STR(err.field, "rev.safetensors:tensors[w].data_offsets");
	CHECK_EQ_U64(err.offset, 9); /* the key "w" starts right after '{' */
	CHECK(write_hdr("max.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],"
			"\"data_offsets\":[18446744073709551615,18446744073709551615]}}", 8) == 0);
	err = expect_fail("max.safetensors", "st-number-range");
	CHECK_STR(err.field, "max.safetensors:tensors[w].data_offsets");
	CHECK(write_hdr("end.safetensors", "{\"w\":{\"dtype\":\"U8\",\"shape\":[8],"
			"\"data_offsets\":[0,18446744073709551615]}}", 8) == 0);
	expect_fail("end.safetensors", "st-number-range");
	/* 2^53 - 1 is exact and accepted by the scanner; the layout refuses it */
	CHECK(write_hdr("big.safetensors", "{\"w\":{\"dtype\":\"U8\",\"shape\":[9007199254740991],"
			"\"data_offsets\":[0,9007199254740991]}}", 8) == 0);
	err = expect_fail("big.safetensors", "st-buffer-short");
	CHECK_EQ_INT(err.code, HB_ERR_SHORT);
	/* 2^53 is the double that 2^53 + 1 also reads as: refused by the scanner */
	CHECK(write_hdr("b53.safetensors", "{\"w\":{\"dtype\":\"U8\",\"shape\":[9007199254740992],"
			"\"data_offsets\":[0,8]}}", 8) == 0);
	expect_fail("b53.safetensors", "st-number-range");
}

/* ---------------------------------------------------------- reads */

static void reads_stay_inside_the_tensor(void)
{
	struct hb_st_file f;
	const struct hb_st_tensor *t;
	struct hb_error err;
	unsigned char buf[32];

	CHECK(write_hdr("m.safetensors", two_tensors, 30) == 0);
	CHECK_EQ_INT(hb_st_open(&f, "m.safetensors", NULL), HB_OK);
	t = hb_st_find(&f, "z.bias");
	CHECK(t != NULL);
	if (!t) {
		hb_st_close(&f);
		return;
	}
	CHECK_EQ_INT(hb_st_read(&f, t, 0, buf, 6, NULL), HB_OK);
	for (int i = 0; i < 6; i++)
		CHECK_EQ_INT(buf[i], (unsigned char)((24 + i) * 5 + 1));
	CHECK_EQ_INT(hb_st_read(&f, t, 5, buf, 1, NULL), HB_OK);
	CHECK_EQ_INT(buf[0], (unsigned char)(29 * 5 + 1));
	CHECK_EQ_INT(hb_st_read(&f, t, 6, buf, 0, NULL), HB_OK);

	memset(buf, 0xAA, sizeof(buf));
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_st_read(&f, t, 0, buf, 7, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "st-read-range");
	CHECK_STR(err.field, "m.safetensors:tensors[z.bias]");
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_st_read(&f, t, 6, buf, 1, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "st-read-range");
	CHECK_EQ_INT(hb_st_read(&f, t, 7, buf, 0, NULL), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_st_read(&f, t, UINT64_MAX, buf, 1, NULL), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_st_read(&f, t, 1, buf, SIZE_MAX, NULL), HB_ERR_INVALID);
	CHECK_EQ_INT(buf[0], 0xAA); /* refused before any I/O */
	CHECK_EQ_INT(buf[31], 0xAA);
	hb_st_close(&f);
}

/* ------------------------------------------------- change detection */

static void open_valid(struct hb_st_file *f)
{
	CHECK(write_hdr("m.safetensors", two_tensors, 30) == 0);
	CHECK_EQ_INT(hb_st_open(f, "m.safetensors", NULL), HB_OK);
	CHECK_EQ_INT(hb_st_check_unchanged(f, NULL), HB_OK);
}

static void expect_changed(const struct hb_st_file *f)
{
	struct hb_error err;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_st_check_unchanged(f, &err), HB_ERR_CHANGED);
	CHECK_STR(err.id, "st-source-changed");
	CHECK_STR(err.field, "m.safetensors");
}

static void change_in_place_size(void)
{
	struct hb_st_file f;

	open_valid(&f);
	CHECK(write_hdr("m.safetensors", two_tensors, 31) == 0); /* same inode */
	expect_changed(&f);
	hb_st_close(&f);
}

static void change_in_place_mtime(void)
{
	struct hb_st_file f;
	struct timespec ts[2];
	int fd;

	open_valid(&f);
	/* same size, same inode, new bytes; the mtime is set explicitly so
	 * that the test does not depend on the clock's granularity */
	CHECK(write_hdr("m.safetensors", two_tensors, 30) == 0);
	fd = open("m.safetensors", O_RDWR);
	CHECK(fd >= 0);
	ts[0].tv_sec = ts[1].tv_sec = (time_t)f.identity.mtime_sec - 100;
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	CHECK(futimens(fd, ts) == 0);
	close(fd);
	expect_changed(&f);
	hb_st_close(&f);
}

static void change_by_rename(void)
{
	struct hb_st_file f;

	open_valid(&f);
	CHECK(write_hdr("new.safetensors", two_tensors, 30) == 0);
	CHECK(rename("new.safetensors", "m.safetensors") == 0);
	expect_changed(&f);
	hb_st_close(&f);
	open_valid(&f);
	CHECK(unlink("m.safetensors") == 0);
	expect_changed(&f);
	hb_st_close(&f);
}

static void missing_and_odd_files(void)
{
	struct hb_st_file f;
	struct hb_error err;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_st_open(&f, "absent.safetensors", &err), HB_ERR_NOTFOUND);
	hb_st_close(&f);
	CHECK(mkdir("d.safetensors", 0755) == 0);
	CHECK(hb_st_open(&f, "d.safetensors", NULL) < 0);
	hb_st_close(&f);
}

HB_TEST_MAIN(T(corpus_cases_fail_as_expected), T(diag_table_is_well_formed),
	     T(dtype_names_and_sizes), T(opens_and_indexes), T(file_of_seven_bytes),
	     T(header_length_extremes), T(shape_products_overflow), T(offsets_edges),
	     T(reads_stay_inside_the_tensor), T(change_in_place_size),
	     T(change_in_place_mtime), T(change_by_rename), T(missing_and_odd_files))
