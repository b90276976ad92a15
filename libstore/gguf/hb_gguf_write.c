/*
 * hb_gguf_write.c: the GGUF v3 writer (see hb_gguf.h).  It owns the
 * in-memory description (keys, metadata values, tensor infos), the layout
 * arithmetic and the serialisation of the header region and of the zero
 * padding.  It never holds or writes tensor bytes: the caller streams those
 * to the offsets the layout gives, so a multi-GB artifact costs the writer
 * only its metadata.
 */
#include "hb_base.h"
#include "hb_checked.h"
#include "hb_gguf.h"
#include "hb_gguf_int.h"
#include "hb_io.h"

void hb_gguf_writer_init(struct hb_gguf_writer *w)
{
	memset(w, 0, sizeof(*w));
	w->alignment = HB_GGUF_DEFAULT_ALIGNMENT;
}

void hb_gguf_writer_release(struct hb_gguf_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n_kv; i++) {
		free(w->kv[i].key.ptr);
		hb_gguf_value_release(&w->kv[i].value);
	}
	for (size_t i = 0; i < w->n_tensors; i++)
		free(w->tensors[i].name.ptr);
	free(w->kv);
	free(w->tensors);
	free(w->layout.ranges);
	hb_gguf_writer_init(w);
}

static int dup_bytes(const char *s, size_t len, struct hb_gguf_str *out)
{
	char *p = malloc(len + 1);

	if (!p)
		return HB_ERR_NOMEM;
	if (len)
		memcpy(p, s, len);
	p[len] = '\0';
	out->ptr = p;
	out->len = len;
	return HB_OK;
}

static int nomem(struct hb_error *err, const char *field)
{
	return hb_error_set(err, HB_ERR_NOMEM, field, "out of memory");
}

static int check_open(struct hb_gguf_writer *w, const char *field, struct hb_error *err)
{
	if (w->laid_out)
		return hb_error_diag(err, HB_GGUF_ID(STATE), HB_ERR_INVALID, field, false, 0,
				     "the description is already laid out");
	return HB_OK;
}

/* Validate a key and check it is new. */
static int check_key(struct hb_gguf_writer *w, const char *key, struct hb_error *err)
{
	size_t n;
	int rc = check_open(w, "gguf.kv", err);

	if (rc)
		return rc;
	if (!key || !key[0])
		return hb_error_diag(err, HB_GGUF_ID(KEY), HB_ERR_INVALID, "gguf.kv", false, 0,
				     "a key must not be empty");
	n = strlen(key);
	if (n > HB_GGUF_MAX_KEY)
		return hb_error_diag(err, HB_GGUF_ID(STRING_LENGTH), HB_ERR_INVALID, "gguf.kv",
				     false, 0, "key of %zu bytes exceeds %u", n, HB_GGUF_MAX_KEY);
	if (!hb_gguf_utf8_valid(key, n))
		return hb_error_diag(err, HB_GGUF_ID(STRING_UTF8), HB_ERR_INVALID, "gguf.kv",
				     false, 0, "key is not valid UTF-8");
	for (size_t i = 0; i < w->n_kv; i++)
		if (hb_gguf_str_eq(&w->kv[i].key, key))
			return hb_error_diag(err, HB_GGUF_ID(DUPLICATE_KEY), HB_ERR_INVALID,
					     "gguf.kv", false, 0, "duplicate key '%s'", key);
	return HB_OK;
}

/* Take ownership of *v (on failure it is released). */
static int push_kv(struct hb_gguf_writer *w, const char *key, struct hb_gguf_value *v,
		   struct hb_error *err)
{
	struct hb_gguf_kv *kv;
	int rc = check_key(w, key, err);

	if (!rc && strcmp(key, "general.alignment") == 0) {
		if (v->type != HB_GGUF_U32 || !hb_gguf_is_pow2(v->v.u32))
			rc = hb_error_diag(err, HB_GGUF_ID(ALIGNMENT), HB_ERR_INVALID,
					   "gguf.kv[general.alignment]", false, 0,
					   "general.alignment must be a u32 power of two");
		else
			w->alignment = v->v.u32;
	}
	if (!rc && w->n_kv == w->cap_kv) {
		size_t ncap = w->cap_kv ? w->cap_kv * 2 : 16;
		kv = realloc(w->kv, ncap * sizeof(*kv));
		if (!kv)
			rc = nomem(err, "gguf.kv");
		else {
			w->kv = kv;
			w->cap_kv = ncap;
		}
	}
	if (rc) {
		hb_gguf_value_release(v);
		return rc;
	}
	kv = &w->kv[w->n_kv];
	memset(kv, 0, sizeof(*kv));
	if (dup_bytes(key, strlen(key), &kv->key)) {
		hb_gguf_value_release(v);
		return nomem(err, "gguf.kv");
	}
	kv->value = *v;
	w->n_kv++;
	return HB_OK;
}

#define ADD_SCALAR(suffix, ctype, tag, member)                                    \
	int hb_gguf_writer_add_##suffix(struct hb_gguf_writer *w, const char *key,  \
					ctype v, struct hb_error *err)              \
	{                                                                           \
		struct hb_gguf_value val = {.type = tag};                           \
		val.v.member = v;                                                   \
		return push_kv(w, key, &val, err);                                  \
	}
ADD_SCALAR(u8, uint8_t, HB_GGUF_U8, u8)
ADD_SCALAR(i8, int8_t, HB_GGUF_I8, i8)
ADD_SCALAR(u16, uint16_t, HB_GGUF_U16, u16)
ADD_SCALAR(i16, int16_t, HB_GGUF_I16, i16)
ADD_SCALAR(u32, uint32_t, HB_GGUF_U32, u32)
ADD_SCALAR(i32, int32_t, HB_GGUF_I32, i32)
ADD_SCALAR(f32, float, HB_GGUF_F32, f32)
ADD_SCALAR(bool, bool, HB_GGUF_BOOL, b)
ADD_SCALAR(u64, uint64_t, HB_GGUF_U64, u64)
ADD_SCALAR(i64, int64_t, HB_GGUF_I64, i64)
ADD_SCALAR(f64, double, HB_GGUF_F64, f64)
#undef ADD_SCALAR

static int check_value_str(const char *s, size_t len, const char *field, struct hb_error *err)
{
	if (len && !s)
		return hb_error_set(err, HB_ERR_INVALID, field, "string pointer is NULL");
	if (len > HB_GGUF_MAX_STRING)
		return hb_error_diag(err, HB_GGUF_ID(STRING_LENGTH), HB_ERR_INVALID, field, false,
				     0, "string of %zu bytes exceeds %u", len, HB_GGUF_MAX_STRING);
	if (!hb_gguf_utf8_valid(s, len))
		return hb_error_diag(err, HB_GGUF_ID(STRING_UTF8), HB_ERR_INVALID, field, false, 0,
				     "string is not valid UTF-8");
	return HB_OK;
}

int hb_gguf_writer_add_strn(struct hb_gguf_writer *w, const char *key, const char *s,
			    size_t len, struct hb_error *err)
{
	struct hb_gguf_value val = {.type = HB_GGUF_STRING};
	int rc = check_value_str(s, len, "gguf.kv.value", err);

	if (rc)
		return rc;
	if (dup_bytes(s, len, &val.str))
		return nomem(err, "gguf.kv.value");
	return push_kv(w, key, &val, err);
}

int hb_gguf_writer_add_str(struct hb_gguf_writer *w, const char *key, const char *s,
			   struct hb_error *err)
{
	if (!s)
		return hb_error_set(err, HB_ERR_INVALID, "gguf.kv.value", "string is NULL");
	return hb_gguf_writer_add_strn(w, key, s, strlen(s), err);
}

int hb_gguf_writer_add_array(struct hb_gguf_writer *w, const char *key, uint32_t elem_type,
			     const void *elems, uint64_t count, struct hb_error *err)
{
	struct hb_gguf_value val = {.type = HB_GGUF_ARRAY, .elem_type = elem_type, .count = count};
	size_t esize = hb_gguf_type_size(elem_type), bytes;

	if (esize == 0)
		return hb_error_diag(err, HB_GGUF_ID(ARRAY_TYPE), HB_ERR_INVALID, "gguf.kv.value",
				     false, 0, "array element type %" PRIu32 " is not a scalar",
				     elem_type);
	if (count > HB_GGUF_MAX_ARRAY)
		return hb_error_diag(err, HB_GGUF_ID(LIMIT), HB_ERR_INVALID, "gguf.kv.value", false,
				     0, "array of %" PRIu64 " elements exceeds %u", count,
				     HB_GGUF_MAX_ARRAY);
	bytes = (size_t)count * esize; /* count <= 2^24, esize <= 8 */
	if (count && !elems)
		return hb_error_set(err, HB_ERR_INVALID, "gguf.kv.value", "elements are NULL");
	if (elem_type == HB_GGUF_BOOL)
		for (uint64_t i = 0; i < count; i++)
			if (((const uint8_t *)elems)[i] > 1)
				return hb_error_diag(err, HB_GGUF_ID(BOOL), HB_ERR_INVALID,
						     "gguf.kv.value", false, 0,
						     "bool element %" PRIu64 " is not 0 or 1", i);
	val.elems = malloc(bytes ? bytes : 1);
	if (!val.elems)
		return nomem(err, "gguf.kv.value");
	if (bytes)
		memcpy(val.elems, elems, bytes);
	return push_kv(w, key, &val, err);
}

int hb_gguf_writer_add_str_array(struct hb_gguf_writer *w, const char *key,
				 const char *const *strs, const size_t *lens, uint64_t count,
				 struct hb_error *err)
{
	struct hb_gguf_value val = {.type = HB_GGUF_ARRAY, .elem_type = HB_GGUF_STRING,
				    .count = 0};
	struct hb_gguf_str *out;
	int rc;

	if (count > HB_GGUF_MAX_ARRAY)
		return hb_error_diag(err, HB_GGUF_ID(LIMIT), HB_ERR_INVALID, "gguf.kv.value", false,
				     0, "array of %" PRIu64 " elements exceeds %u", count,
				     HB_GGUF_MAX_ARRAY);
	if (count && !strs)
		return hb_error_set(err, HB_ERR_INVALID, "gguf.kv.value", "strings are NULL");
	out = calloc(count ? (size_t)count : 1, sizeof(*out));
	if (!out)
		return nomem(err, "gguf.kv.value");
	val.elems = out;
	for (uint64_t i = 0; i < count; i++) {
		size_t len = lens ? lens[i] : (strs[i] ? strlen(strs[i]) : 0);
		rc = check_value_str(strs[i], len, "gguf.kv.value", err);
		if (!rc && dup_bytes(strs[i], len, &out[i]))
			rc = nomem(err, "gguf.kv.value");
		if (rc) {
			hb_gguf_value_release(&val);
			return rc;
		}
		val.count = i + 1;
	}
	return push_kv(w, key, &val, err);
}

int hb_gguf_writer_add_tensor_ggml(struct hb_gguf_writer *w, const char *name, uint32_t ggml_type,
				   uint32_t n_dims, const uint64_t *ggml_dims, uint64_t nbytes,
				   uint64_t file_align, struct hb_error *err)
{
	struct hb_gguf_tensor *t;
	uint64_t want;
	size_t n;
	char field[HB_ERROR_FIELD_MAX];
	int rc = check_open(w, "gguf.tensors", err);

	if (rc)
		return rc;
	n = name ? strlen(name) : 0;
	if (n == 0 || n > HB_GGUF_MAX_TENSOR_NAME || !hb_gguf_utf8_valid(name, n))
		return hb_error_diag(err, HB_GGUF_ID(TENSOR_NAME), HB_ERR_INVALID, "gguf.tensors",
				     false, 0, "a tensor name must be 1..%u bytes of UTF-8",
				     HB_GGUF_MAX_TENSOR_NAME);
	snprintf(field, sizeof(field), "gguf.tensors[%s]", name);
	for (size_t i = 0; i < w->n_tensors; i++)
		if (hb_gguf_str_eq(&w->tensors[i].name, name))
			return hb_error_diag(err, HB_GGUF_ID(DUPLICATE_TENSOR), HB_ERR_INVALID,
					     field, false, 0, "duplicate tensor name");
	if (n_dims < 1 || n_dims > HB_GGUF_MAX_DIMS || !ggml_dims)
		return hb_error_diag(err, HB_GGUF_ID(TENSOR_DIMS), HB_ERR_INVALID, field, false, 0,
				     "n_dims %" PRIu32 " is not 1..%u", n_dims, HB_GGUF_MAX_DIMS);
	rc = hb_gguf_tensor_bytes(ggml_type, n_dims, ggml_dims, &want);
	if (rc == HB_ERR_UNSUPPORTED)
		return hb_error_diag(err, HB_GGUF_ID(TENSOR_TYPE), HB_ERR_UNSUPPORTED, field, false,
				     0, "ggml type %" PRIu32 " is unknown here", ggml_type);
	if (rc)
		return hb_error_diag(err, HB_GGUF_ID(TENSOR_DIMS), HB_ERR_OVERFLOW, field, false, 0,
				     "dims overflow the byte count");
	if (want != nbytes)
		return hb_error_diag(err, HB_GGUF_ID(TENSOR_SIZE), HB_ERR_INVALID, field, false, 0,
				     "nbytes %" PRIu64 " but dims x type size is %" PRIu64,
				     nbytes, want);
	if (file_align && !hb_gguf_is_pow2(file_align))
		return hb_error_diag(err, HB_GGUF_ID(ALIGNMENT), HB_ERR_INVALID, field, false, 0,
				     "file alignment %" PRIu64 " is not a power of two",
				     file_align);
	if (w->n_tensors == w->cap_tensors) {
		size_t ncap = w->cap_tensors ? w->cap_tensors * 2 : 16;
		t = realloc(w->tensors, ncap * sizeof(*t));
		if (!t)
			return nomem(err, field);
		w->tensors = t;
		w->cap_tensors = ncap;
	}
	t = &w->tensors[w->n_tensors];
	memset(t, 0, sizeof(*t));
	if (dup_bytes(name, n, &t->name))
		return nomem(err, field);
	t->ggml_type = ggml_type;
	t->n_dims = n_dims;
	memcpy(t->dims, ggml_dims, n_dims * sizeof(uint64_t));
	t->nbytes = nbytes;
	t->file_align = file_align;
	w->n_tensors++;
	return HB_OK;
}

int hb_gguf_writer_add_tensor_torch(struct hb_gguf_writer *w, const char *name, uint32_t ggml_type,
				    uint32_t n_dims, const uint64_t *torch_shape, uint64_t nbytes,
				    uint64_t file_align, struct hb_error *err)
{
	uint64_t dims[HB_GGUF_MAX_DIMS];

	if (n_dims < 1 || n_dims > HB_GGUF_MAX_DIMS || !torch_shape)
		return hb_gguf_writer_add_tensor_ggml(w, name, ggml_type, n_dims, NULL, nbytes,
						      file_align, err);
	for (uint32_t i = 0; i < n_dims; i++)
		dims[i] = torch_shape[n_dims - 1 - i];
	return hb_gguf_writer_add_tensor_ggml(w, name, ggml_type, n_dims, dims, nbytes,
					      file_align, err);
}

int hb_gguf_writer_layout(struct hb_gguf_writer *w, struct hb_error *err)
{
	struct hb_gguf_layout *L = &w->layout;
	uint64_t pos = HB_GGUF_FIXED_HEADER, size;
	int rc = check_open(w, "gguf.layout", err);

	if (rc)
		return rc;
	/* Never produce a file the reader's default limits refuse. */
	if (w->n_kv > HB_GGUF_MAX_KV || w->n_tensors > HB_GGUF_MAX_TENSORS)
		return hb_error_diag(err, HB_GGUF_ID(LIMIT), HB_ERR_INVALID, "gguf.layout", false, 0,
				     "%zu keys or %zu tensors exceed the reader's limits", w->n_kv,
				     w->n_tensors);
	L->alignment = w->alignment;
	L->kv_start = pos;
	for (size_t i = 0; i < w->n_kv && !rc; i++) {
		w->kv[i].offset = pos;
		rc = hb_gguf_kv_size(&w->kv[i], &size);
		if (!rc)
			rc = hb_add_u64(pos, size, &pos);
	}
	L->tensor_info_start = pos;
	for (size_t i = 0; i < w->n_tensors && !rc; i++) {
		w->tensors[i].info_offset = pos;
		rc = hb_gguf_tensor_info_size(&w->tensors[i], &size);
		if (!rc)
			rc = hb_add_u64(pos, size, &pos);
	}
	L->tensor_info_end = pos;
	if (!rc)
		rc = hb_align_up_u64(pos, w->alignment, &pos);
	L->data_start = pos;
	if (!rc && pos > HB_GGUF_MAX_HEADER_BYTES)
		return hb_error_diag(err, HB_GGUF_ID(LIMIT), HB_ERR_INVALID, "gguf.layout", false, 0,
				     "header region of %" PRIu64 " bytes exceeds %u", pos,
				     HB_GGUF_MAX_HEADER_BYTES);
	for (size_t i = 0; i < w->n_tensors && !rc; i++) {
		struct hb_gguf_tensor *t = &w->tensors[i];
		uint64_t a = t->file_align > w->alignment ? t->file_align : w->alignment;

		/* data_start is a multiple of the alignment, and so is a (both
		 * powers of two, a >= alignment): the relative offset stays a
		 * multiple of the alignment as the spec requires. */
		rc = hb_align_up_u64(pos, a, &t->offset);
		if (!rc)
			rc = hb_add_u64(t->offset, t->nbytes, &pos);
		t->rel_offset = t->offset - L->data_start;
	}
	if (!rc)
		rc = hb_align_up_u64(pos, w->alignment, &pos);
	if (!rc && !hb_offset_ok(0, pos))
		rc = HB_ERR_OVERFLOW;
	if (rc)
		return hb_error_diag(err, HB_GGUF_ID(LIMIT), HB_ERR_OVERFLOW, "gguf.layout", false,
				     0, "the layout overflows the file offset range");
	L->file_size = pos;
	rc = hb_gguf_layout_ranges(L, w->tensors, w->n_tensors, NULL, err);
	if (rc)
		return rc;
	w->laid_out = true;
	return HB_OK;
}

/* A small staging buffer that flushes to the sink at increasing offsets. */
struct sink_buf {
	hb_gguf_sink_fn sink;
	void *ctx;
	uint64_t off; /* file offset of buf[0] */
	size_t used;
	int rc;
	struct hb_error *err;
	unsigned char buf[65536];
};

static void sb_flush(struct sink_buf *s)
{
	if (!s->rc && s->used)
		s->rc = s->sink(s->ctx, s->buf, s->used, s->off, s->err);
	s->off += s->used;
	s->used = 0;
}

static void sb_put(struct sink_buf *s, const void *p, uint64_t len)
{
	const unsigned char *b = p;

	while (len && !s->rc) {
		size_t room = sizeof(s->buf) - s->used;
		size_t n = len < room ? (size_t)len : room;
		if (b) {
			memcpy(s->buf + s->used, b, n);
			b += n;
		} else {
			memset(s->buf + s->used, 0, n);
		}
		s->used += n;
		len -= n;
		if (s->used == sizeof(s->buf))
			sb_flush(s);
	}
}

static void sb_u32(struct sink_buf *s, uint32_t v)
{
	unsigned char b[4];
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	sb_put(s, b, 4);
}

static void sb_u64(struct sink_buf *s, uint64_t v)
{
	unsigned char b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	sb_put(s, b, 8);
}

static void sb_str(struct sink_buf *s, const struct hb_gguf_str *str)
{
	sb_u64(s, str->len);
	sb_put(s, str->ptr, str->len);
}

/* One scalar from a native array slot, little-endian by width. */
static void sb_scalar(struct sink_buf *s, uint32_t type, const void *p)
{
	size_t n = hb_gguf_type_size(type);
	uint64_t bits = 0;

	switch (n) {
	case 1: bits = *(const uint8_t *)p; break;
	case 2: bits = *(const uint16_t *)p; break;
	case 4: { uint32_t x; memcpy(&x, p, 4); bits = x; break; }
	case 8: memcpy(&bits, p, 8); break;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char b = (unsigned char)(bits >> (8 * i));
		sb_put(s, &b, 1);
	}
}

static void sb_value(struct sink_buf *s, const struct hb_gguf_value *v)
{
	sb_u32(s, v->type);
	if (v->type == HB_GGUF_STRING) {
		sb_str(s, &v->str);
	} else if (v->type == HB_GGUF_ARRAY) {
		size_t es = hb_gguf_type_size(v->elem_type);
		sb_u32(s, v->elem_type);
		sb_u64(s, v->count);
		for (uint64_t i = 0; i < v->count; i++) {
			if (v->elem_type == HB_GGUF_STRING)
				sb_str(s, &((const struct hb_gguf_str *)v->elems)[i]);
			else
				sb_scalar(s, v->elem_type, (const unsigned char *)v->elems + i * es);
		}
	} else {
		uint8_t b;
		if (v->type == HB_GGUF_BOOL) {
			b = v->v.b ? 1 : 0; /* the writer stores a C bool */
			sb_scalar(s, v->type, &b);
		} else {
			sb_scalar(s, v->type, &v->v);
		}
	}
}

static int need_layout(struct hb_gguf_writer *w, struct hb_error *err)
{
	if (!w->laid_out)
		return hb_error_diag(err, HB_GGUF_ID(STATE), HB_ERR_INVALID, "gguf.layout", false,
				     0, "write before layout");
	return HB_OK;
}

int hb_gguf_writer_write_header(struct hb_gguf_writer *w, hb_gguf_sink_fn sink, void *ctx,
				struct hb_error *err)
{
	struct sink_buf *s;
	int rc = need_layout(w, err);

	if (rc)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return nomem(err, "gguf.header");
	s->sink = sink;
	s->ctx = ctx;
	s->err = err;
	sb_put(s, HB_GGUF_MAGIC, 4);
	sb_u32(s, HB_GGUF_VERSION);
	sb_u64(s, w->n_tensors);
	sb_u64(s, w->n_kv);
	for (size_t i = 0; i < w->n_kv; i++) {
		sb_str(s, &w->kv[i].key);
		sb_value(s, &w->kv[i].value);
	}
	for (size_t i = 0; i < w->n_tensors; i++) {
		const struct hb_gguf_tensor *t = &w->tensors[i];
		sb_str(s, &t->name);
		sb_u32(s, t->n_dims);
		for (uint32_t d = 0; d < t->n_dims; d++)
			sb_u64(s, t->dims[d]);
		sb_u32(s, t->ggml_type);
		sb_u64(s, t->rel_offset);
	}
	sb_put(s, NULL, w->layout.data_start - w->layout.tensor_info_end);
	sb_flush(s);
	rc = s->rc;
	if (!rc && s->off != w->layout.data_start)
		rc = hb_error_diag(err, HB_GGUF_ID(STATE), HB_ERR_INTERNAL, "gguf.header", false, 0,
				   "serialised %" PRIu64 " bytes, layout says %" PRIu64, s->off,
				   w->layout.data_start);
	free(s);
	return rc;
}

int hb_gguf_writer_write_padding(struct hb_gguf_writer *w, hb_gguf_sink_fn sink, void *ctx,
				 struct hb_error *err)
{
	static const unsigned char zeros[4096];
	int rc = need_layout(w, err);

	for (size_t i = 0; i < w->layout.n_ranges && !rc; i++) {
		const struct hb_gguf_range *r = &w->layout.ranges[i];
		if (r->owner != HB_GGUF_OWN_PADDING || r->offset < w->layout.data_start)
			continue;
		for (uint64_t done = 0; done < r->length && !rc;) {
			uint64_t n = r->length - done < sizeof(zeros) ? r->length - done
								       : sizeof(zeros);
			rc = sink(ctx, zeros, (size_t)n, r->offset + done, err);
			done += n;
		}
	}
	return rc;
}

static int fd_sink(void *ctx, const void *buf, size_t len, uint64_t off, struct hb_error *err)
{
	return hb_pwrite_full(*(int *)ctx, buf, len, off, "gguf", err);
}

int hb_gguf_writer_write_header_fd(struct hb_gguf_writer *w, int fd, struct hb_error *err)
{
	return hb_gguf_writer_write_header(w, fd_sink, &fd, err);
}

int hb_gguf_writer_write_padding_fd(struct hb_gguf_writer *w, int fd, struct hb_error *err)
{
	return hb_gguf_writer_write_padding(w, fd_sink, &fd, err);
}
