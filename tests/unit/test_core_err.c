/* Unit tests: hb_err codes, names and error records. */
#include "hb_base.h"
#include "harness.h"
#include "hb_err.h"

/* The pinned numbers are an interface: scripts and JSON reports carry them. */
static void pinned_values(void)
{
	static const struct { int code; int value; const char *name; } pins[] = {
		{HB_OK, 0, "ok"}, {HB_ERR_NOMEM, -1, "nomem"}, {HB_ERR_IO, -2, "io"},
		{HB_ERR_OVERFLOW, -3, "overflow"}, {HB_ERR_FORMAT, -4, "format"},
		{HB_ERR_CONTRACT, -5, "contract"}, {HB_ERR_INVALID, -6, "invalid"},
		{HB_ERR_EXISTS, -7, "exists"}, {HB_ERR_NOTFOUND, -8, "notfound"},
		{HB_ERR_DIGEST, -9, "digest"}, {HB_ERR_UNSUPPORTED, -10, "unsupported"},
		{HB_ERR_SHORT, -11, "short"}, {HB_ERR_INTERNAL, -12, "internal"},
		{HB_ERR_NONFINITE, -13, "nonfinite"}, {HB_ERR_CHANGED, -14, "changed"},
		{HB_ERR_FAULT, -15, "fault"},
		{HB_ERR_BUSY, -16, "busy"},
	};
	for (size_t i = 0; i < HB_ARRAY_LEN(pins); i++) {
		CHECK_EQ_INT(pins[i].code, pins[i].value);
		CHECK_STR(hb_err_name(pins[i].code), pins[i].name);
	}
	CHECK_EQ_INT(HB_ERR_MIN, -16);
	CHECK_STR(hb_err_name(HB_ERR_MIN - 1), "unknown");
	CHECK_STR(hb_err_name(1), "unknown");
	CHECK_STR(hb_err_str(-999), "unknown error");
}

static void first_error_wins(void)
{
	struct hb_error err;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_error_set(&err, HB_ERR_FORMAT, "a.b", "first %d", 1), HB_ERR_FORMAT);
	CHECK_EQ_INT(hb_error_set(&err, HB_ERR_IO, "c", "second"), HB_ERR_IO);
	CHECK_EQ_INT(err.code, HB_ERR_FORMAT);
	CHECK_STR(err.field, "a.b");
	CHECK_STR(err.msg, "first 1");
	CHECK(!err.has_offset);
}

static void offsets_and_errno(void)
{
	struct hb_error err;
	char buf[256];

	hb_error_clear(&err);
	hb_error_set_at(&err, HB_ERR_SHORT, "ple.page[3]", 4096, "truncated");
	CHECK(err.has_offset);
	CHECK_EQ_U64(err.offset, 4096);
	CHECK_STR(hb_error_format(&err, buf, sizeof(buf)), "ple.page[3]: truncated at byte 4096");

	hb_error_clear(&err);
	hb_error_sys(&err, ENOENT, "x.gguf", "cannot open");
	CHECK_EQ_INT(err.code, HB_ERR_IO);
	CHECK_STR(hb_error_format(&err, buf, sizeof(buf)),
		  "x.gguf: cannot open: No such file or directory");
}

static void diagnostic_ids(void)
{
	struct hb_error err;

	hb_error_clear(&err);
	CHECK(err.id == NULL);
	CHECK_EQ_INT(hb_error_diag(&err, "st-offsets-gap", HB_ERR_FORMAT, "t.x", true, 77,
				   "gap of %d bytes", 3), HB_ERR_FORMAT);
	CHECK_STR(err.id, "st-offsets-gap");
	CHECK_EQ_U64(err.offset, 77);
	CHECK_STR(err.msg, "gap of 3 bytes");
	/* a later diagnostic does not replace the first */
	hb_error_diag(&err, "other", HB_ERR_IO, "y", false, 0, "z");
	CHECK_STR(err.id, "st-offsets-gap");
	CHECK_EQ_INT(hb_error_diag(NULL, "x", HB_ERR_SHORT, "f", false, 0, "m"), HB_ERR_SHORT);
}

static void null_error_is_allowed(void)
{
	CHECK_EQ_INT(hb_error_set(NULL, HB_ERR_NOMEM, "x", "y"), HB_ERR_NOMEM);
	CHECK_EQ_INT(hb_error_sys(NULL, EIO, "x", "y"), HB_ERR_IO);
}

static void format_truncates_safely(void)
{
	struct hb_error err;
	char small[8];

	hb_error_clear(&err);
	hb_error_set_at(&err, HB_ERR_FORMAT, "a.very.long.field.path", 123456, "message");
	hb_error_format(&err, small, sizeof(small));
	CHECK_EQ_U64(strlen(small), sizeof(small) - 1);
}

HB_TEST_MAIN(T(pinned_values), T(first_error_wins), T(offsets_and_errno),
	     T(diagnostic_ids), T(null_error_is_allowed), T(format_truncates_safely))
