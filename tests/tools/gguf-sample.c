/*
 * gguf-sample: write a small GGUF v3 file that exercises every metadata
 * type, arrays of scalars and strings, empty and unicode strings and keys,
 * tensors of types F32, F16, BF16 and I8 of ranks 1-4, a zero-length tensor
 * and one tensor placed at a 4096-aligned file offset.  A test tool: it
 * drives the writer the way the converter does (description, layout,
 * header, tensor bytes at the offsets given, padding) through atomic
 * publication, and the interop test reads the result with two parsers.
 *
 * usage: gguf-sample OUT.gguf
 */
#include "hb_base.h"
#include "hb_err.h"
#include "gguf/hb_gguf.h"
#include "hb_publish.h"

static int publish_sink(void *ctx, const void *buf, size_t len, uint64_t off,
			struct hb_error *err)
{
	return hb_publish_pwrite(ctx, buf, len, off, err);
}

static int describe(struct hb_gguf_writer *w, struct hb_error *err)
{
	static const uint8_t a_u8[] = {0, 1, 255};
	static const int8_t a_i8[] = {-128, -1, 0, 127};
	static const uint16_t a_u16[] = {0, 65535};
	static const int16_t a_i16[] = {-32768, 32767};
	static const uint32_t a_u32[] = {0, 1, 4294967295u};
	static const int32_t a_i32[] = {INT32_MIN, -1, INT32_MAX};
	static const float a_f32[] = {1.0f, -2.5f, 0.0f};
	static const uint8_t a_bool[] = {1, 0, 1};
	static const uint64_t a_u64[] = {0, 1, UINT64_MAX};
	static const int64_t a_i64[] = {INT64_MIN, -1, INT64_MAX};
	static const double a_f64[] = {3.141592653589793, -0.0};
	static const char *const a_str[] = {"a", "", "\xc3\xbc", "\xf0\x9d\x84\x9e", "tab\tquote\""};
	float inf;
	int rc = 0;

	memcpy(&inf, &(uint32_t){0x7f800000u}, 4);
	rc = rc ? rc : hb_gguf_writer_add_str(w, "general.architecture", "hebrus-sample", err);
	rc = rc ? rc : hb_gguf_writer_add_u32(w, "general.alignment", 64, err);
	rc = rc ? rc : hb_gguf_writer_add_u8(w, "sample.u8", 255, err);
	rc = rc ? rc : hb_gguf_writer_add_i8(w, "sample.i8", -128, err);
	rc = rc ? rc : hb_gguf_writer_add_u16(w, "sample.u16", 65535, err);
	rc = rc ? rc : hb_gguf_writer_add_i16(w, "sample.i16", -32768, err);
	rc = rc ? rc : hb_gguf_writer_add_u32(w, "sample.u32", 4294967295u, err);
	rc = rc ? rc : hb_gguf_writer_add_i32(w, "sample.i32", INT32_MIN, err);
	rc = rc ? rc : hb_gguf_writer_add_f32(w, "sample.f32", 1.5f, err);
	rc = rc ? rc : hb_gguf_writer_add_f32(w, "sample.f32_negzero", -0.0f, err);
	rc = rc ? rc : hb_gguf_writer_add_f32(w, "sample.f32_inf", inf, err);
	rc = rc ? rc : hb_gguf_writer_add_bool(w, "sample.bool_true", true, err);
	rc = rc ? rc : hb_gguf_writer_add_bool(w, "sample.bool_false", false, err);
	rc = rc ? rc : hb_gguf_writer_add_u64(w, "sample.u64", UINT64_MAX, err);
	rc = rc ? rc : hb_gguf_writer_add_i64(w, "sample.i64", INT64_MIN, err);
	rc = rc ? rc : hb_gguf_writer_add_f64(w, "sample.f64", 0.1, err);
	rc = rc ? rc : hb_gguf_writer_add_f64(w, "sample.f64_subnormal", 4.9406564584124654e-324, err);
	rc = rc ? rc : hb_gguf_writer_add_str(w, "sample.str_empty", "", err);
	rc = rc ? rc : hb_gguf_writer_add_str(w, "sample.str_unicode",
					      "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9d\x84\x9e \xe6\x97\xa5\xe6\x9c\xac", err);
	rc = rc ? rc : hb_gguf_writer_add_str(w, "sample.str_escapes",
					      "tab\there\nnew \"q\" back\\slash \x01\x1f\x7f /", err);
	rc = rc ? rc : hb_gguf_writer_add_strn(w, "sample.str_nul", "a\0b", 3, err);
	rc = rc ? rc : hb_gguf_writer_add_str(w, "sample.\xc3\xbcn\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9.\xe9\x94\xae",
					      "unicode key", err);
	rc = rc ? rc : hb_gguf_writer_add_array(w, "sample.arr_u8", HB_GGUF_U8, a_u8, 3, err);
	rc = rc ? rc : hb_gguf_writer_add_array(w, "sample.arr_i8", HB_GGUF_I8, a_i8, 4, err);
	rc = rc ? rc : hb_gguf_writer_add_array(w, "sample.arr_u16", HB_GGUF_U16, a_u16, 2, err);
	rc = rc ? rc : hb_gguf_writer_add_array(w, "sample.arr_i16", HB_GGUF_I16, a_i16, 2, err);
	rc = rc ? rc : hb_gguf_writer_add_array(w, "sample.arr_u32", HB_GGUF_U32, a_u32, 3, err);
	rc = rc ? rc : hb_gguf_writer_add_array(w, "sample.arr_i32", HB_GGUF_I32, a_i32, 3, err);
	rc = rc ? rc : hb_gguf_writer_add_array(w, "sample.arr_f32", HB_GGUF_F32, a_f32, 3, err);
	rc = rc ? rc : hb_gguf_writer_add_array(w, "sample.arr_bool", HB_GGUF_BOOL, a_bool, 3, err);
	rc = rc ? rc : hb_gguf_writer_add_array(w, "sample.arr_u64", HB_GGUF_U64, a_u64, 3, err);
	rc = rc ? rc : hb_gguf_writer_add_array(w, "sample.arr_i64", HB_GGUF_I64, a_i64, 3, err);
	rc = rc ? rc : hb_gguf_writer_add_array(w, "sample.arr_f64", HB_GGUF_F64, a_f64, 2, err);
	rc = rc ? rc : hb_gguf_writer_add_array(w, "sample.arr_empty", HB_GGUF_U32, NULL, 0, err);
	rc = rc ? rc : hb_gguf_writer_add_str_array(w, "sample.arr_str", a_str, NULL, 5, err);
	rc = rc ? rc : hb_gguf_writer_add_str_array(w, "sample.arr_str_empty", NULL, NULL, 0, err);

	rc = rc ? rc : hb_gguf_writer_add_tensor_torch(w, "t.f32.r1", HB_GGML_F32, 1,
						       (const uint64_t[]){5}, 20, 0, err);
	rc = rc ? rc : hb_gguf_writer_add_tensor_torch(w, "t.f16.r2", HB_GGML_F16, 2,
						       (const uint64_t[]){3, 4}, 24, 0, err);
	rc = rc ? rc : hb_gguf_writer_add_tensor_torch(w, "t.bf16.r3", HB_GGML_BF16, 3,
						       (const uint64_t[]){2, 3, 5}, 60, 0, err);
	rc = rc ? rc : hb_gguf_writer_add_tensor_torch(w, "t.i8.r4", HB_GGML_I8, 4,
						       (const uint64_t[]){2, 1, 3, 7}, 42, 0, err);
	rc = rc ? rc : hb_gguf_writer_add_tensor_torch(w, "t.empty", HB_GGML_F32, 2,
						       (const uint64_t[]){0, 8}, 0, 0, err);
	rc = rc ? rc : hb_gguf_writer_add_tensor_ggml(w, "ds4.expert_major.v2", HB_GGML_I8, 1,
						      (const uint64_t[]){5000}, 5000, 4096, err);
	rc = rc ? rc : hb_gguf_writer_add_tensor_ggml(w, "t.after", HB_GGML_F32, 1,
						      (const uint64_t[]){3}, 12, 0, err);
	return rc;
}

/* Tensor bytes: a pattern that differs per tensor, streamed in pieces. */
static int write_tensors(struct hb_gguf_writer *w, struct hb_publish *p, struct hb_error *err)
{
	unsigned char buf[512];

	for (size_t i = 0; i < w->n_tensors; i++) {
		const struct hb_gguf_tensor *t = &w->tensors[i];
		for (uint64_t done = 0; done < t->nbytes;) {
			size_t n = t->nbytes - done < sizeof(buf) ? (size_t)(t->nbytes - done)
								  : sizeof(buf);
			for (size_t k = 0; k < n; k++)
				buf[k] = (unsigned char)((done + k) * 7 + i + 1);
			int rc = hb_publish_pwrite(p, buf, n, t->offset + done, err);
			if (rc)
				return rc;
			done += n;
		}
	}
	return HB_OK;
}

int main(int argc, char **argv)
{
	struct hb_gguf_writer w;
	struct hb_publish p;
	struct hb_error err;
	char msg[512];
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: gguf-sample OUT.gguf\n");
		return 2;
	}
	hb_error_clear(&err);
	hb_gguf_writer_init(&w);
	rc = describe(&w, &err);
	if (!rc)
		rc = hb_gguf_writer_layout(&w, &err);
	if (!rc)
		rc = hb_publish_begin(&p, argv[1], HB_PUBLISH_REPLACE, &err);
	if (!rc) {
		rc = hb_gguf_writer_write_header(&w, publish_sink, &p, &err);
		if (!rc)
			rc = write_tensors(&w, &p, &err);
		if (!rc)
			rc = hb_gguf_writer_write_padding(&w, publish_sink, &p, &err);
		if (!rc)
			rc = hb_publish_commit(&p, NULL, NULL, &err);
		else
			hb_publish_abort(&p);
	}
	hb_gguf_writer_release(&w);
	if (rc) {
		fprintf(stderr, "gguf-sample: %s%s%s\n", err.id ? err.id : "",
			err.id ? ": " : "", hb_error_format(&err, msg, sizeof(msg)));
		return 1;
	}
	return 0;
}
