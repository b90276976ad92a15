/*
 * Unit tests: the GGUF v3 writer and reader (libstore/gguf/hb_gguf*.c).  Round
 * trip of every type, exact layout arithmetic (including a 4096-aligned
 * tensor), writer refusals, every prefix of a header refused as truncated,
 * hostile counts and lengths refused by limits, tensor extent checks, and
 * the exact count of bytes the reader reads.  Hand-built headers use a small
 * byte builder so that each corruption is explicit.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_fault.h"
#include "gguf/hb_gguf.h"
#include "hb_io.h"

#include <fcntl.h>
#include <unistd.h>

#define ID(name) hb_gguf_diag_id(HB_GGUF_DIAG_##name)

/* ------------------------------------------------------------ helpers */

struct bytes {
	unsigned char p[8192];
	size_t n;
};

static void b_raw(struct bytes *b, const void *p, size_t n)
{
	if (b->n + n <= sizeof(b->p)) {
		memcpy(b->p + b->n, p, n);
		b->n += n;
	}
}

static void b_u32(struct bytes *b, uint32_t v)
{
	unsigned char x[4];
	for (int i = 0; i < 4; i++)
		x[i] = (unsigned char)(v >> (8 * i));
	b_raw(b, x, 4);
}

static void b_u64(struct bytes *b, uint64_t v)
{
	unsigned char x[8];
	for (int i = 0; i < 8; i++)
		x[i] = (unsigned char)(v >> (8 * i));
	b_raw(b, x, 8);
}

static void b_str(struct bytes *b, const char *s)
{
	b_u64(b, strlen(s));
	b_raw(b, s, strlen(s));
}

static void b_head(struct bytes *b, uint64_t n_tensors, uint64_t n_kv)
{
	b->n = 0;
	b_raw(b, "GGUF", 4);
	b_u32(b, 3);
	b_u64(b, n_tensors);
	b_u64(b, n_kv);
}

static void b_tensor(struct bytes *b, const char *name, uint32_t type, uint64_t dim0,
		     uint64_t rel)
{
	b_str(b, name);
	b_u32(b, 1);
	b_u64(b, dim0);
	b_u32(b, type);
	b_u64(b, rel);
}

/* Pad to 32 and append `data` zero bytes of tensor data. */
static void b_data(struct bytes *b, size_t data)
{
	while (b->n % 32)
		b->p[b->n++] = 0;
	for (size_t i = 0; i < data && b->n < sizeof(b->p); i++)
		b->p[b->n++] = 0xab;
}

static int read_buf(const void *p, size_t n, const struct hb_gguf_limits *lim,
		    struct hb_gguf *g, struct hb_error *err)
{
	int fd, rc;

	hb_error_clear(err);
	if (hb_test_write_file("t.gguf", p, n))
		return -100;
	fd = open("t.gguf", O_RDONLY);
	if (fd < 0)
		return -101;
	rc = hb_gguf_read_fd(g, fd, lim, err);
	close(fd);
	return rc;
}

/* Parse b, expect failure with id at offset; g must come back empty. */
#define EXPECT_DIAG(b, lim, want_id, want_off)                                  \
	do {                                                                    \
		struct hb_gguf g_;                                              \
		struct hb_error e_;                                             \
		int rc_ = read_buf((b)->p, (b)->n, lim, &g_, &e_);              \
		CHECK(rc_ < 0);                                                 \
		CHECK_STR(e_.id, want_id);                                      \
		CHECK(e_.has_offset);                                           \
		CHECK_EQ_U64(e_.offset, want_off);                              \
		CHECK(g_.kv == NULL && g_.tensors == NULL && g_.n_kv == 0);     \
	} while (0)

static int fd_sink_count;

static int failing_sink(void *ctx, const void *buf, size_t len, uint64_t off,
			struct hb_error *err)
{
	fd_sink_count++;
	return hb_error_set(err, HB_ERR_IO, "sink", "refused");
}

/* --------------------------------------------------------- writer cases */

static void diag_table_is_stable(void)
{
	for (int i = 0; i < HB_GGUF_DIAG_COUNT; i++) {
		const char *a = hb_gguf_diag_id((enum hb_gguf_diag)i);
		CHECK(a && strncmp(a, "gguf-", 5) == 0);
		for (int j = 0; j < i; j++)
			CHECK(strcmp(a, hb_gguf_diag_id((enum hb_gguf_diag)j)) != 0);
	}
	CHECK(hb_gguf_diag_id(HB_GGUF_DIAG_COUNT) == NULL);
	CHECK_STR(ID(TRUNCATED), "gguf-truncated");
	CHECK_STR(ID(TENSOR_OFFSET_MISALIGNED), "gguf-tensor-offset-misaligned");
	CHECK_EQ_U64(hb_ggml_type_size(HB_GGML_BF16), 2);
	CHECK_EQ_U64(hb_ggml_type_size(2 /* Q4_0: block size not known here */), 0);
	CHECK_STR(hb_ggml_type_name(HB_GGML_I8), "I8");
}

static void layout_arithmetic(void)
{
	struct hb_gguf_writer w;
	struct hb_error err;
	uint64_t sum = 0;

	hb_error_clear(&err);
	hb_gguf_writer_init(&w);
	/* kv "a" u8: 8 + 1 + 4 + 1 = 14 bytes */
	CHECK_EQ_INT(hb_gguf_writer_add_u8(&w, "a", 7, &err), 0);
	/* tensor "t" F32 [3]: 8 + 1 + 4 + 8 + 4 + 8 = 33 bytes */
	CHECK_EQ_INT(hb_gguf_writer_add_tensor_ggml(&w, "t", HB_GGML_F32, 1,
						    (const uint64_t[]){3}, 12, 0, &err), 0);
	/* 4096-aligned file offset for O_DIRECT */
	CHECK_EQ_INT(hb_gguf_writer_add_tensor_ggml(&w, "x", HB_GGML_I8, 1,
						    (const uint64_t[]){100}, 100, 4096, &err), 0);
	CHECK_EQ_INT(hb_gguf_writer_add_tensor_torch(&w, "y", HB_GGML_BF16, 3,
						     (const uint64_t[]){2, 3, 5}, 60, 0, &err), 0);
	CHECK_EQ_INT(hb_gguf_writer_layout(&w, &err), 0);
	CHECK_EQ_U64(w.layout.alignment, 32);
	CHECK_EQ_U64(w.layout.kv_start, 24);
	CHECK_EQ_U64(w.kv[0].offset, 24);
	CHECK_EQ_U64(w.layout.tensor_info_start, 38);
	CHECK_EQ_U64(w.tensors[0].info_offset, 38);
	CHECK_EQ_U64(w.tensors[1].info_offset, 71);
	CHECK_EQ_U64(w.tensors[2].info_offset, 104);
	/* y: 8 + 1 + 4 + 24 + 4 + 8 = 49 */
	CHECK_EQ_U64(w.layout.tensor_info_end, 153);
	CHECK_EQ_U64(w.layout.data_start, 160);
	CHECK_EQ_U64(w.tensors[0].offset, 160);
	CHECK_EQ_U64(w.tensors[0].rel_offset, 0);
	CHECK_EQ_U64(w.tensors[1].offset, 4096);
	CHECK_EQ_U64(w.tensors[1].rel_offset, 4096 - 160);
	CHECK_EQ_U64(w.tensors[1].rel_offset % 32, 0);
	CHECK_EQ_U64(w.tensors[2].offset, 4224); /* 4196 padded to 32 */
	CHECK_EQ_U64(w.tensors[2].dims[0], 5);   /* torch shape reversed */
	CHECK_EQ_U64(w.tensors[2].dims[1], 3);
	CHECK_EQ_U64(w.tensors[2].dims[2], 2);
	CHECK_EQ_U64(w.layout.file_size, 4288);  /* 4284 padded to 32 */
	/* the ranges tile the file exactly, in order, none empty */
	for (size_t i = 0; i < w.layout.n_ranges; i++) {
		CHECK_EQ_U64(w.layout.ranges[i].offset, sum);
		CHECK(w.layout.ranges[i].length > 0);
		sum += w.layout.ranges[i].length;
	}
	CHECK_EQ_U64(sum, 4288);
	CHECK_EQ_U64(w.layout.n_ranges, 10);
	CHECK_EQ_INT(w.layout.ranges[6].owner, HB_GGUF_OWN_TENSOR);
	CHECK_EQ_U64(w.layout.ranges[6].tensor, 1);
	CHECK_EQ_U64(w.layout.ranges[6].offset, 4096);
	/* the description is frozen now */
	CHECK_EQ_INT(hb_gguf_writer_add_u8(&w, "b", 1, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, ID(STATE));
	hb_gguf_writer_release(&w);
}

static void writer_refusals(void)
{
	struct hb_gguf_writer w;
	struct hb_error err;
	static const uint64_t d3[] = {3};
	static const uint8_t bad_bool[] = {0, 2};
	char long_name[80];

	hb_gguf_writer_init(&w);
#define REFUSE(call, want)                                  \
	do {                                                \
		hb_error_clear(&err);                       \
		CHECK((call) < 0);                          \
		CHECK_STR(err.id, want);                    \
	} while (0)
	CHECK_EQ_INT(hb_gguf_writer_add_u32(&w, "k", 1, NULL), 0);
	REFUSE(hb_gguf_writer_add_str(&w, "k", "again", &err), ID(DUPLICATE_KEY));
	REFUSE(hb_gguf_writer_add_u8(&w, "", 1, &err), ID(KEY));
	REFUSE(hb_gguf_writer_add_str(&w, "s", "\xc0\xaf", &err), ID(STRING_UTF8));
	REFUSE(hb_gguf_writer_add_str(&w, "s", "\xed\xa0\x80", &err), ID(STRING_UTF8));
	REFUSE(hb_gguf_writer_add_str(&w, "s", "\xe0\x80\xaf", &err), ID(STRING_UTF8));
	REFUSE(hb_gguf_writer_add_str(&w, "s", "\xf4\x90\x80\x80", &err), ID(STRING_UTF8));
	REFUSE(hb_gguf_writer_add_str(&w, "s", "\xe2\x82", &err), ID(STRING_UTF8));
	REFUSE(hb_gguf_writer_add_array(&w, "b", HB_GGUF_BOOL, bad_bool, 2, &err), ID(BOOL));
	REFUSE(hb_gguf_writer_add_array(&w, "n", HB_GGUF_ARRAY, d3, 1, &err), ID(ARRAY_TYPE));
	REFUSE(hb_gguf_writer_add_array(&w, "n", HB_GGUF_STRING, d3, 1, &err), ID(ARRAY_TYPE));
	REFUSE(hb_gguf_writer_add_u64(&w, "general.alignment", 64, &err), ID(ALIGNMENT));
	REFUSE(hb_gguf_writer_add_u32(&w, "general.alignment", 48, &err), ID(ALIGNMENT));
	REFUSE(hb_gguf_writer_add_u32(&w, "general.alignment", 0, &err), ID(ALIGNMENT));
	CHECK_EQ_INT(hb_gguf_writer_add_tensor_ggml(&w, "t", HB_GGML_F32, 1, d3, 12, 0, NULL), 0);
	REFUSE(hb_gguf_writer_add_tensor_ggml(&w, "t", HB_GGML_F32, 1, d3, 12, 0, &err),
	       ID(DUPLICATE_TENSOR));
	REFUSE(hb_gguf_writer_add_tensor_ggml(&w, "u", HB_GGML_F32, 1, d3, 13, 0, &err),
	       ID(TENSOR_SIZE));
	REFUSE(hb_gguf_writer_add_tensor_ggml(&w, "u", 2, 1, d3, 12, 0, &err), ID(TENSOR_TYPE));
	REFUSE(hb_gguf_writer_add_tensor_ggml(&w, "u", HB_GGML_F32, 0, d3, 0, 0, &err),
	       ID(TENSOR_DIMS));
	REFUSE(hb_gguf_writer_add_tensor_torch(&w, "u", HB_GGML_F32, 5,
					       (const uint64_t[]){1, 1, 1, 1, 1}, 4, 0, &err),
	       ID(TENSOR_DIMS));
	REFUSE(hb_gguf_writer_add_tensor_ggml(&w, "u", HB_GGML_F64, 2,
					      (const uint64_t[]){1ull << 32, 1ull << 30}, 0, 0, &err),
	       ID(TENSOR_DIMS));
	REFUSE(hb_gguf_writer_add_tensor_ggml(&w, "u", HB_GGML_F32, 1, d3, 12, 3000, &err),
	       ID(ALIGNMENT));
	memset(long_name, 'n', 65);
	long_name[65] = '\0';
	REFUSE(hb_gguf_writer_add_tensor_ggml(&w, long_name, HB_GGML_F32, 1, d3, 12, 0, &err),
	       ID(TENSOR_NAME));
	long_name[64] = '\0'; /* exactly 64 bytes is allowed */
	CHECK_EQ_INT(hb_gguf_writer_add_tensor_ggml(&w, long_name, HB_GGML_F32, 1, d3, 12, 0, NULL), 0);
	REFUSE(hb_gguf_writer_write_header_fd(&w, 1, &err), ID(STATE));
	CHECK_EQ_INT(hb_gguf_writer_layout(&w, NULL), 0);
	REFUSE(hb_gguf_writer_layout(&w, &err), ID(STATE));
	/* a failing sink's error comes back; nothing else is attempted */
	hb_error_clear(&err);
	fd_sink_count = 0;
	CHECK_EQ_INT(hb_gguf_writer_write_header(&w, failing_sink, NULL, &err), HB_ERR_IO);
	CHECK_EQ_INT(fd_sink_count, 1);
	CHECK_STR(err.field, "sink");
#undef REFUSE
	hb_gguf_writer_release(&w);
}

/* ------------------------------------------------------- round trip */

static const uint8_t r_u8[] = {0, 200};
static const int8_t r_i8[] = {-5};
static const uint16_t r_u16[] = {1, 65535};
static const int16_t r_i16[] = {-300};
static const uint32_t r_u32[] = {7, 4000000000u};
static const int32_t r_i32[] = {-7, INT32_MAX};
static const float r_f32[] = {0.25f, -1e30f};
static const uint8_t r_bool[] = {1, 0};
static const uint64_t r_u64[] = {UINT64_MAX};
static const int64_t r_i64[] = {INT64_MIN, 5};
static const double r_f64[] = {1e300, -2.5};
static const char *const r_strs[] = {"x", "", "\xe2\x82\xac"};

static void build_full(struct hb_gguf_writer *w)
{
	struct hb_error err;
	int rc = 0;

	hb_error_clear(&err);
	hb_gguf_writer_init(w);
	rc |= hb_gguf_writer_add_u32(w, "general.alignment", 64, &err);
	rc |= hb_gguf_writer_add_u8(w, "u8", 250, &err);
	rc |= hb_gguf_writer_add_i8(w, "i8", -100, &err);
	rc |= hb_gguf_writer_add_u16(w, "u16", 60000, &err);
	rc |= hb_gguf_writer_add_i16(w, "i16", -30000, &err);
	rc |= hb_gguf_writer_add_u32(w, "u32", 3000000000u, &err);
	rc |= hb_gguf_writer_add_i32(w, "i32", -2000000000, &err);
	rc |= hb_gguf_writer_add_f32(w, "f32", 3.5f, &err);
	rc |= hb_gguf_writer_add_bool(w, "bool", true, &err);
	rc |= hb_gguf_writer_add_u64(w, "u64", 0x0123456789abcdefull, &err);
	rc |= hb_gguf_writer_add_i64(w, "i64", -0x0123456789abcdefll, &err);
	rc |= hb_gguf_writer_add_f64(w, "f64", -0.125, &err);
	rc |= hb_gguf_writer_add_str(w, "str", "h\xc3\xa9llo", &err);
	rc |= hb_gguf_writer_add_str(w, "empty", "", &err);
	rc |= hb_gguf_writer_add_strn(w, "nul", "a\0b", 3, &err);
	rc |= hb_gguf_writer_add_str(w, "k\xc3\xa9y", "unicode key", &err);
	rc |= hb_gguf_writer_add_array(w, "a.u8", HB_GGUF_U8, r_u8, 2, &err);
	rc |= hb_gguf_writer_add_array(w, "a.i8", HB_GGUF_I8, r_i8, 1, &err);
	rc |= hb_gguf_writer_add_array(w, "a.u16", HB_GGUF_U16, r_u16, 2, &err);
	rc |= hb_gguf_writer_add_array(w, "a.i16", HB_GGUF_I16, r_i16, 1, &err);
	rc |= hb_gguf_writer_add_array(w, "a.u32", HB_GGUF_U32, r_u32, 2, &err);
	rc |= hb_gguf_writer_add_array(w, "a.i32", HB_GGUF_I32, r_i32, 2, &err);
	rc |= hb_gguf_writer_add_array(w, "a.f32", HB_GGUF_F32, r_f32, 2, &err);
	rc |= hb_gguf_writer_add_array(w, "a.bool", HB_GGUF_BOOL, r_bool, 2, &err);
	rc |= hb_gguf_writer_add_array(w, "a.u64", HB_GGUF_U64, r_u64, 1, &err);
	rc |= hb_gguf_writer_add_array(w, "a.i64", HB_GGUF_I64, r_i64, 2, &err);
	rc |= hb_gguf_writer_add_array(w, "a.f64", HB_GGUF_F64, r_f64, 2, &err);
	rc |= hb_gguf_writer_add_array(w, "a.none", HB_GGUF_I16, NULL, 0, &err);
	rc |= hb_gguf_writer_add_str_array(w, "a.str", r_strs, NULL, 3, &err);
	rc |= hb_gguf_writer_add_tensor_torch(w, "w.f16", HB_GGML_F16, 2,
					      (const uint64_t[]){3, 4}, 24, 0, &err);
	rc |= hb_gguf_writer_add_tensor_torch(w, "w.bf16", HB_GGML_BF16, 4,
					      (const uint64_t[]){1, 2, 3, 4}, 48, 0, &err);
	rc |= hb_gguf_writer_add_tensor_ggml(w, "w.zero", HB_GGML_F32, 1,
					     (const uint64_t[]){0}, 0, 0, &err);
	rc |= hb_gguf_writer_add_tensor_ggml(w, "store", HB_GGML_I8, 1,
					     (const uint64_t[]){10}, 10, 4096, &err);
	rc |= hb_gguf_writer_layout(w, &err);
	CHECK_EQ_INT(rc, 0);
}

/* Write header, tensor bytes (0x5a) and padding to path; 0 on success. */
static int write_full(struct hb_gguf_writer *w, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), rc;
	unsigned char data[64];

	if (fd < 0)
		return -1;
	memset(data, 0x5a, sizeof(data));
	rc = hb_gguf_writer_write_header_fd(w, fd, NULL);
	for (size_t i = 0; i < w->n_tensors && !rc; i++)
		rc = hb_pwrite_full(fd, data, (size_t)w->tensors[i].nbytes, w->tensors[i].offset,
				    "t", NULL);
	if (!rc)
		rc = hb_gguf_writer_write_padding_fd(w, fd, NULL);
	close(fd);
	return rc;
}

static void round_trip_every_type(void)
{
	struct hb_gguf_writer w;
	struct hb_gguf g;
	struct hb_error err;
	const struct hb_gguf_value *arr;
	const struct hb_gguf_str *s;
	const struct hb_gguf_kv *kv;
	uint32_t u32;
	uint64_t u64;
	int32_t i32;
	float f32;
	bool b;
	int fd;

	build_full(&w);
	CHECK_EQ_INT(write_full(&w, "full.gguf"), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_open_read("full.gguf", &fd, &err), 0);
	CHECK_EQ_INT(hb_gguf_read_fd(&g, fd, NULL, &err), 0);
	close(fd);
	CHECK_EQ_U64(g.n_kv, w.n_kv);
	CHECK_EQ_U64(g.n_tensors, w.n_tensors);
	CHECK_EQ_U64(g.layout.alignment, 64);
	CHECK_EQ_U64(g.layout.tensor_info_start, w.layout.tensor_info_start);
	CHECK_EQ_U64(g.layout.tensor_info_end, w.layout.tensor_info_end);
	CHECK_EQ_U64(g.layout.data_start, w.layout.data_start);
	CHECK_EQ_U64(g.layout.file_size, w.layout.file_size);
	CHECK_EQ_U64(g.layout.n_ranges, w.layout.n_ranges);
	for (size_t i = 0; i < g.layout.n_ranges && i < w.layout.n_ranges; i++) {
		CHECK_EQ_U64(g.layout.ranges[i].offset, w.layout.ranges[i].offset);
		CHECK_EQ_U64(g.layout.ranges[i].owner, w.layout.ranges[i].owner);
	}
	for (size_t i = 0; i < w.n_kv && i < g.n_kv; i++) {
		const struct hb_gguf_value *a = &w.kv[i].value, *c = &g.kv[i].value;
		CHECK_STR(g.kv[i].key.ptr, w.kv[i].key.ptr);
		CHECK_EQ_U64(g.kv[i].offset, w.kv[i].offset);
		CHECK_EQ_INT(c->type, a->type);
		if (a->type == HB_GGUF_STRING)
			CHECK(c->str.len == a->str.len && !memcmp(c->str.ptr, a->str.ptr, a->str.len));
		else if (a->type == HB_GGUF_ARRAY) {
			CHECK_EQ_INT(c->elem_type, a->elem_type);
			CHECK_EQ_U64(c->count, a->count);
			if (a->elem_type != HB_GGUF_STRING && c->count == a->count)
				CHECK(!memcmp(c->elems, a->elems,
					      a->count * hb_gguf_type_size(a->elem_type)));
		} else if (a->type == HB_GGUF_BOOL)
			CHECK(c->v.u8 == 1);
		else
			CHECK(!memcmp(&c->v, &a->v, hb_gguf_type_size(a->type)));
	}
	for (size_t i = 0; i < w.n_tensors && i < g.n_tensors; i++) {
		CHECK_STR(g.tensors[i].name.ptr, w.tensors[i].name.ptr);
		CHECK_EQ_U64(g.tensors[i].ggml_type, w.tensors[i].ggml_type);
		CHECK_EQ_U64(g.tensors[i].n_dims, w.tensors[i].n_dims);
		CHECK(!memcmp(g.tensors[i].dims, w.tensors[i].dims, sizeof(g.tensors[i].dims)));
		CHECK_EQ_U64(g.tensors[i].offset, w.tensors[i].offset);
		CHECK_EQ_U64(g.tensors[i].rel_offset, w.tensors[i].rel_offset);
		CHECK_EQ_U64(g.tensors[i].nbytes, w.tensors[i].nbytes);
		CHECK_EQ_U64(g.tensors[i].info_offset, w.tensors[i].info_offset);
	}
	CHECK_EQ_U64(hb_gguf_find_tensor(&g, "store")->offset, 4096);
	CHECK_EQ_U64(hb_gguf_find_tensor(&g, "w.bf16")->dims[0], 4);
	CHECK(hb_gguf_find_tensor(&g, "nope") == NULL);
	/* typed accessors: exact types only */
	CHECK_EQ_INT(hb_gguf_get_u32(&g, "u32", &u32, &err), 0);
	CHECK_EQ_U64(u32, 3000000000u);
	CHECK_EQ_INT(hb_gguf_get_u64(&g, "u64", &u64, &err), 0);
	CHECK_EQ_U64(u64, 0x0123456789abcdefull);
	CHECK_EQ_INT(hb_gguf_get_i32(&g, "i32", &i32, &err), 0);
	CHECK_EQ_INT(i32, -2000000000);
	CHECK_EQ_INT(hb_gguf_get_f32(&g, "f32", &f32, &err), 0);
	CHECK(f32 == 3.5f);
	CHECK_EQ_INT(hb_gguf_get_bool(&g, "bool", &b, &err), 0);
	CHECK(b);
	CHECK_EQ_INT(hb_gguf_get_str(&g, "nul", &s, &err), 0);
	CHECK(s->len == 3 && memcmp(s->ptr, "a\0b", 3) == 0);
	CHECK_EQ_INT(hb_gguf_get_array(&g, "a.str", HB_GGUF_STRING, &arr, &err), 0);
	CHECK_EQ_U64(arr->count, 3);
	CHECK_STR(((const struct hb_gguf_str *)arr->elems)[2].ptr, "\xe2\x82\xac");
	CHECK_EQ_U64(((const struct hb_gguf_str *)arr->elems)[1].len, 0);
	CHECK_EQ_INT(hb_gguf_get_array(&g, "a.i64", HB_GGUF_I64, &arr, &err), 0);
	CHECK_EQ_INT(((const int64_t *)arr->elems)[0], INT64_MIN);
	kv = hb_gguf_find_kv(&g, "k\xc3\xa9y");
	CHECK(kv && kv->value.type == HB_GGUF_STRING);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_gguf_get_u64(&g, "i32", &u64, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, ID(KV_WRONG_TYPE));
	CHECK_STR(err.field, "gguf.kv[i32]");
	CHECK_STR(err.msg, "is i32, not u64");
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_gguf_get_array(&g, "a.u32", HB_GGUF_U64, &arr, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.msg, "is u32[], not u64[]");
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_gguf_get_u32(&g, "absent", &u32, &err), HB_ERR_NOTFOUND);
	CHECK_STR(err.id, ID(KV_MISSING));
	hb_gguf_release(&g);
	hb_gguf_writer_release(&w);
}

/* ------------------------------------------------------ reader limits */

/* A small valid file: 2 kvs (a string array among them), one tensor. */
static void small_valid(struct bytes *b)
{
	b_head(b, 1, 2);
	b_str(b, "general.name");
	b_u32(b, HB_GGUF_STRING);
	b_str(b, "tiny");
	b_str(b, "tok");
	b_u32(b, HB_GGUF_ARRAY);
	b_u32(b, HB_GGUF_STRING);
	b_u64(b, 2);
	b_str(b, "a");
	b_str(b, "bc");
	b_tensor(b, "w", HB_GGML_F32, 4, 0);
	b_data(b, 16);
}

static void every_prefix_is_truncated(void)
{
	struct bytes b;
	struct hb_gguf g;
	struct hb_error err;
	size_t data_start, total;

	small_valid(&b);
	total = b.n;
	data_start = total - 16;
	CHECK_EQ_INT(read_buf(b.p, total, NULL, &g, &err), 0);
	CHECK_EQ_U64(g.layout.data_start, data_start);
	hb_gguf_release(&g);
	for (size_t cut = 0; cut < data_start; cut++) {
		int rc = read_buf(b.p, cut, NULL, &g, &err);
		CHECK_EQ_INT(rc, HB_ERR_SHORT);
		CHECK_STR(err.id, ID(TRUNCATED));
		CHECK(err.has_offset && err.offset <= cut);
		CHECK(g.kv == NULL && g.n_kv == 0);
	}
	for (size_t cut = data_start; cut < total; cut++) {
		CHECK_EQ_INT(read_buf(b.p, cut, NULL, &g, &err), HB_ERR_FORMAT);
		CHECK_STR(err.id, ID(TENSOR_OUT_OF_FILE));
	}
}

static void huge_counts_refused_by_limits(void)
{
	struct bytes b;
	struct hb_gguf_limits lim;

	b_head(&b, 0, UINT64_MAX);
	EXPECT_DIAG(&b, NULL, ID(LIMIT), 16);
	b_head(&b, UINT64_MAX, 0);
	EXPECT_DIAG(&b, NULL, ID(LIMIT), 8);
	/* key length 2^64-1 */
	b_head(&b, 0, 1);
	b_u64(&b, UINT64_MAX);
	EXPECT_DIAG(&b, NULL, ID(STRING_LENGTH), 24);
	/* value string length 2^64-1 */
	b_head(&b, 0, 1);
	b_str(&b, "k");
	b_u32(&b, HB_GGUF_STRING);
	b_u64(&b, UINT64_MAX);
	EXPECT_DIAG(&b, NULL, ID(STRING_LENGTH), 37);
	/* array count 2^64-1 */
	b_head(&b, 0, 1);
	b_str(&b, "k");
	b_u32(&b, HB_GGUF_ARRAY);
	b_u32(&b, HB_GGUF_U64);
	b_u64(&b, UINT64_MAX);
	EXPECT_DIAG(&b, NULL, ID(LIMIT), 41);
	/* 16M u64 elements claimed in a tiny file: refused before allocating */
	b_head(&b, 0, 1);
	b_str(&b, "k");
	b_u32(&b, HB_GGUF_ARRAY);
	b_u32(&b, HB_GGUF_U64);
	b_u64(&b, HB_GGUF_MAX_ARRAY);
	EXPECT_DIAG(&b, NULL, ID(TRUNCATED), 49);
	/* n_dims 2^32-1 */
	b_head(&b, 1, 0);
	b_str(&b, "t");
	b_u32(&b, UINT32_MAX);
	EXPECT_DIAG(&b, NULL, ID(TENSOR_DIMS), 33);
	/* dims whose byte count overflows u64 */
	b_head(&b, 1, 0);
	b_str(&b, "t");
	b_u32(&b, 2);
	b_u64(&b, UINT64_MAX);
	b_u64(&b, 2);
	b_u32(&b, HB_GGML_F32);
	b_u64(&b, 0);
	EXPECT_DIAG(&b, NULL, ID(TENSOR_DIMS), 37);
	/* an aligned offset near 2^64: data_start + offset overflows */
	b_head(&b, 1, 0);
	b_tensor(&b, "t", HB_GGML_I8, 1, UINT64_MAX - 31);
	b_data(&b, 0);
	EXPECT_DIAG(&b, NULL, ID(TENSOR_OUT_OF_FILE), 49);
	/* tightened limits */
	hb_gguf_limits_default(&lim);
	lim.max_kv = 1;
	small_valid(&b);
	EXPECT_DIAG(&b, &lim, ID(LIMIT), 16);
	hb_gguf_limits_default(&lim);
	lim.max_header_bytes = 40;
	EXPECT_DIAG(&b, &lim, ID(LIMIT), 32);
	hb_gguf_limits_default(&lim);
	lim.max_array = 1;
	EXPECT_DIAG(&b, &lim, ID(LIMIT), 79);
	/* a limit above the default is clamped to the default */
	hb_gguf_limits_default(&lim);
	lim.max_tensors = UINT64_MAX;
	b_head(&b, (uint64_t)HB_GGUF_MAX_TENSORS + 1, 0);
	EXPECT_DIAG(&b, &lim, ID(LIMIT), 8);
}

static void malformed_fields(void)
{
	struct bytes b;

	b_head(&b, 0, 0);
	b.p[0] = 'g';
	EXPECT_DIAG(&b, NULL, ID(MAGIC), 0);
	b_head(&b, 0, 0);
	b.p[4] = 2;
	EXPECT_DIAG(&b, NULL, ID(VERSION), 4);
	/* unknown value type, nested array, unknown element type */
	b_head(&b, 0, 1);
	b_str(&b, "k");
	b_u32(&b, 13);
	EXPECT_DIAG(&b, NULL, ID(KV_TYPE), 33);
	b_head(&b, 0, 1);
	b_str(&b, "k");
	b_u32(&b, HB_GGUF_ARRAY);
	b_u32(&b, HB_GGUF_ARRAY);
	EXPECT_DIAG(&b, NULL, ID(ARRAY_TYPE), 37);
	b_head(&b, 0, 1);
	b_str(&b, "k");
	b_u32(&b, HB_GGUF_ARRAY);
	b_u32(&b, 99);
	EXPECT_DIAG(&b, NULL, ID(ARRAY_TYPE), 37);
	/* bool 2, bad UTF-8 (overlong, surrogate), empty key, NUL in key */
	b_head(&b, 0, 1);
	b_str(&b, "k");
	b_u32(&b, HB_GGUF_BOOL);
	b_raw(&b, "\x02", 1);
	EXPECT_DIAG(&b, NULL, ID(BOOL), 37);
	b_head(&b, 0, 1);
	b_str(&b, "k");
	b_u32(&b, HB_GGUF_STRING);
	b_str(&b, "\xc0\x80");
	EXPECT_DIAG(&b, NULL, ID(STRING_UTF8), 37);
	b_head(&b, 0, 1);
	b_str(&b, "\xed\xb0\x80");
	EXPECT_DIAG(&b, NULL, ID(STRING_UTF8), 24);
	b_head(&b, 0, 1);
	b_str(&b, "");
	EXPECT_DIAG(&b, NULL, ID(KEY), 24);
	b_head(&b, 0, 1);
	b_u64(&b, 3);
	b_raw(&b, "a\0b", 3);
	EXPECT_DIAG(&b, NULL, ID(KEY), 24);
	/* duplicate key: reported at the second occurrence */
	b_head(&b, 0, 3);
	b_str(&b, "x");
	b_u32(&b, HB_GGUF_U8);
	b_raw(&b, "\x01", 1);
	b_str(&b, "y");
	b_u32(&b, HB_GGUF_U8);
	b_raw(&b, "\x01", 1);
	b_str(&b, "x");
	b_u32(&b, HB_GGUF_I8);
	b_raw(&b, "\x01", 1);
	b_data(&b, 0);
	EXPECT_DIAG(&b, NULL, ID(DUPLICATE_KEY), 52);
	/* general.alignment: u64, or not a power of two */
	b_head(&b, 0, 1);
	b_str(&b, "general.alignment");
	b_u32(&b, HB_GGUF_U64);
	b_u64(&b, 32);
	b_data(&b, 0);
	EXPECT_DIAG(&b, NULL, ID(ALIGNMENT), 24);
	b_head(&b, 0, 1);
	b_str(&b, "general.alignment");
	b_u32(&b, HB_GGUF_U32);
	b_u32(&b, 24);
	b_data(&b, 0);
	EXPECT_DIAG(&b, NULL, ID(ALIGNMENT), 24);
	/* tensor: unknown type, n_dims 0 and 5, empty name, 65-byte name */
	b_head(&b, 1, 0);
	b_tensor(&b, "t", 2 /* Q4_0 */, 32, 0);
	EXPECT_DIAG(&b, NULL, ID(TENSOR_TYPE), 45);
	b_head(&b, 1, 0);
	b_str(&b, "t");
	b_u32(&b, 0);
	EXPECT_DIAG(&b, NULL, ID(TENSOR_DIMS), 33);
	b_head(&b, 1, 0);
	b_str(&b, "t");
	b_u32(&b, 5);
	EXPECT_DIAG(&b, NULL, ID(TENSOR_DIMS), 33);
	b_head(&b, 1, 0);
	b_tensor(&b, "", HB_GGML_F32, 1, 0);
	EXPECT_DIAG(&b, NULL, ID(TENSOR_NAME), 24);
	b_head(&b, 1, 0);
	b_tensor(&b, "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn",
		 HB_GGML_F32, 1, 0);
	EXPECT_DIAG(&b, NULL, ID(TENSOR_NAME), 24);
	/* header padding must be zero */
	b_head(&b, 0, 0);
	b_raw(&b, "\0\0\0\0\0\0\x01\0", 8);
	EXPECT_DIAG(&b, NULL, ID(PADDING), 30);
}

static void tensor_extents(void)
{
	struct bytes b;
	struct hb_gguf g;
	struct hb_error err;

	/* misaligned relative offset (16 is not a multiple of 32) */
	b_head(&b, 1, 0);
	b_tensor(&b, "a", HB_GGML_F32, 4, 16);
	b_data(&b, 64);
	EXPECT_DIAG(&b, NULL, ID(TENSOR_OFFSET_MISALIGNED), 49);
	/* b starts inside a: overlap, reported on the later extent */
	b_head(&b, 2, 0);
	b_tensor(&b, "a", HB_GGML_F32, 16, 0);  /* [0, 64) */
	b_tensor(&b, "b", HB_GGML_F32, 4, 32);  /* [32, 48) */
	b_data(&b, 128);
	EXPECT_DIAG(&b, NULL, ID(TENSOR_OVERLAP), 82);
	/* listed in reverse file order: still caught */
	b_head(&b, 2, 0);
	b_tensor(&b, "b", HB_GGML_F32, 4, 32);
	b_tensor(&b, "a", HB_GGML_F32, 16, 0);
	b_data(&b, 128);
	EXPECT_DIAG(&b, NULL, ID(TENSOR_OVERLAP), 49);
	/* duplicate names */
	b_head(&b, 2, 0);
	b_tensor(&b, "a", HB_GGML_F32, 4, 0);
	b_tensor(&b, "a", HB_GGML_F32, 4, 32);
	b_data(&b, 64);
	EXPECT_DIAG(&b, NULL, ID(DUPLICATE_TENSOR), 57);
	/* one byte past the end of the file */
	b_head(&b, 1, 0);
	b_tensor(&b, "a", HB_GGML_I8, 33, 0);
	b_data(&b, 32);
	EXPECT_DIAG(&b, NULL, ID(TENSOR_OUT_OF_FILE), 49);
	/* adjacent, zero-length inside a gap, and a gap: all fine */
	b_head(&b, 3, 0);
	b_tensor(&b, "a", HB_GGML_I8, 32, 0);
	b_tensor(&b, "z", HB_GGML_I8, 0, 32);
	b_tensor(&b, "c", HB_GGML_I8, 8, 64);
	b_data(&b, 72);
	CHECK_EQ_INT(read_buf(b.p, b.n, NULL, &g, &err), 0);
	/* header, tensor-info, padding, a, padding, c: no kv, z owns nothing */
	CHECK_EQ_U64(g.layout.n_ranges, 6);
	CHECK_EQ_INT(g.layout.ranges[4].owner, HB_GGUF_OWN_PADDING);
	CHECK_EQ_U64(g.layout.ranges[4].length, 32);
	CHECK_EQ_INT(g.layout.ranges[5].owner, HB_GGUF_OWN_TENSOR);
	CHECK_EQ_U64(g.layout.ranges[5].tensor, 2);
	hb_gguf_release(&g);
}

static void reads_only_the_header(void)
{
	struct hb_gguf_writer w;
	struct hb_gguf g;
	struct hb_gguf_limits lim;
	struct hb_error err;
	int fd;

	hb_gguf_writer_init(&w);
	CHECK_EQ_INT(hb_gguf_writer_add_str(&w, "general.architecture", "x", NULL), 0);
	CHECK_EQ_INT(hb_gguf_writer_add_tensor_ggml(&w, "big", HB_GGML_I8, 1,
						    (const uint64_t[]){1 << 20}, 1 << 20, 4096,
						    NULL), 0);
	CHECK_EQ_INT(hb_gguf_writer_layout(&w, NULL), 0);
	fd = open("big.gguf", O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ_INT(hb_gguf_writer_write_header_fd(&w, fd, NULL), 0);
	CHECK(ftruncate(fd, (off_t)w.layout.file_size) == 0);
	hb_error_clear(&err);
	/* read_chunk 1: exactly the header region, padding included */
	hb_gguf_limits_default(&lim);
	lim.read_chunk = 1;
	CHECK_EQ_INT(hb_gguf_read_fd(&g, fd, &lim, &err), 0);
	CHECK_EQ_U64(g.bytes_read, w.layout.data_start);
	CHECK_EQ_U64(g.bytes_read, 128);
	CHECK_EQ_U64(g.tensors[0].offset, 4096);
	hb_gguf_release(&g);
	/* default read-ahead: one chunk, far less than the 1 MiB file */
	CHECK_EQ_INT(hb_gguf_read_fd(&g, fd, NULL, &err), 0);
	CHECK_EQ_U64(g.bytes_read, HB_GGUF_READ_CHUNK);
	CHECK_EQ_U64(g.layout.file_size, 4096 + (1 << 20));
	hb_gguf_release(&g);
	/* a failed read is gguf-io */
	hb_fault_reset();
	hb_fault_arm(HB_FAULT_READ, 1, EIO);
	CHECK_EQ_INT(hb_gguf_read_fd(&g, fd, NULL, &err), HB_ERR_IO);
	CHECK_STR(err.id, ID(IO));
	CHECK_EQ_INT(err.sys_errno, EIO);
	hb_fault_reset();
	close(fd);
	hb_gguf_writer_release(&w);
}

static void empty_file_description(void)
{
	struct hb_gguf_writer w;
	struct hb_gguf g;
	struct hb_error err;
	int fd;

	hb_gguf_writer_init(&w);
	CHECK_EQ_INT(hb_gguf_writer_layout(&w, NULL), 0);
	CHECK_EQ_U64(w.layout.data_start, 32);
	CHECK_EQ_U64(w.layout.file_size, 32);
	CHECK_EQ_U64(w.layout.n_ranges, 2); /* header, padding */
	fd = open("e.gguf", O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK_EQ_INT(hb_gguf_writer_write_header_fd(&w, fd, NULL), 0);
	CHECK_EQ_INT(hb_gguf_writer_write_padding_fd(&w, fd, NULL), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_gguf_read_fd(&g, fd, NULL, &err), 0);
	CHECK_EQ_U64(g.n_kv + g.n_tensors, 0);
	CHECK_EQ_U64(g.layout.data_start, 32);
	hb_gguf_release(&g);
	close(fd);
	hb_gguf_writer_release(&w);
}

HB_TEST_MAIN(T(diag_table_is_stable), T(layout_arithmetic), T(writer_refusals),
	     T(round_trip_every_type), T(every_prefix_is_truncated),
	     T(huge_counts_refused_by_limits), T(malformed_fields), T(tensor_extents),
	     T(reads_only_the_header), T(empty_file_description))
