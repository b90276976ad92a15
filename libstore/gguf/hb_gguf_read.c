/*
 * hb_gguf_read.c: the GGUF v3 reader (see hb_gguf.h).  It owns parsing the
 * header region from an fd under hard limits and the structural checks of
 * tensor extents (type, dims, alignment, inside the file, no overlap).  It
 * does not judge what keys mean (admission does), never reads tensor bytes,
 * and leaves the lookups and typed accessors to hb_gguf_access.c.
 *
 * Parsing walks a cursor over a read-ahead window: every field is taken
 * through take(), which checks the bound without overflow, counts the bytes
 * read and keeps the first error with its byte offset.  Containers grow as
 * entries parse, so a huge declared count costs nothing until bytes back it;
 * array element storage is allocated only after the file is shown to hold
 * at least count x minimum element size bytes.
 *
 * Check order (the first failure wins): the header walk in file order, then
 * general.alignment, then duplicate keys (before the tensor infos, whose
 * offsets depend on the alignment), then header padding, duplicate tensor
 * names, tensor extents inside the file, overlaps.
 */
#include "hb_base.h"
#include "hb_checked.h"
#include "hb_gguf.h"
#include "hb_gguf_int.h"
#include "hb_io.h"

enum ctx_kind { CTX_HEADER, CTX_KV, CTX_TENSOR };

struct cursor {
	int fd;
	uint64_t file_size;
	uint64_t pos;
	unsigned char *buf;
	size_t cap;
	uint64_t buf_off;
	size_t buf_len;
	uint64_t bytes_read;
	struct hb_gguf_limits lim;
	struct hb_error *err;
	int rc;
	/* what is being parsed, for the field path of an error */
	enum ctx_kind kind;
	uint64_t index;
	const struct hb_gguf_str *name; /* key or tensor name once known */
	const char *part;               /* "key", "value", "offset", ... */
};

__attribute__((format(printf, 5, 6)))
static int fail(struct cursor *c, enum hb_gguf_diag id, int code, uint64_t off,
		const char *fmt, ...)
{
	char field[HB_ERROR_FIELD_MAX], msg[HB_ERROR_MSG_MAX];
	va_list ap;

	if (c->rc)
		return c->rc;
	if (c->kind == CTX_HEADER)
		snprintf(field, sizeof(field), "gguf.%s", c->part);
	else if (c->name)
		snprintf(field, sizeof(field), "gguf.%s[%.*s].%s",
			 c->kind == CTX_KV ? "kv" : "tensors",
			 (int)(c->name->len > 80 ? 80 : c->name->len), c->name->ptr, c->part);
	else
		snprintf(field, sizeof(field), "gguf.%s[%" PRIu64 "].%s",
			 c->kind == CTX_KV ? "kv" : "tensors", c->index, c->part);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->rc = code;
	return hb_error_diag(c->err, hb_gguf_diag_id(id), code, field, true, off, "%s", msg);
}

/* n bytes at the cursor, or NULL with the error recorded.  Advances. */
static const unsigned char *take(struct cursor *c, uint64_t n)
{
	uint64_t pos = c->pos, keep = 0, want, end;
	const unsigned char *p;

	if (c->rc)
		return NULL;
	if (n > c->file_size || pos > c->file_size - n) {
		fail(c, HB_GGUF_DIAG_TRUNCATED, HB_ERR_SHORT, pos,
		     "file ends at byte %" PRIu64 " inside a %" PRIu64 "-byte field",
		     c->file_size, n);
		return NULL;
	}
	if (n > c->lim.max_header_bytes || pos > c->lim.max_header_bytes - n) {
		fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_UNSUPPORTED, pos,
		     "header region exceeds %" PRIu64 " bytes", c->lim.max_header_bytes);
		return NULL;
	}
	if (n == 0)
		return (const unsigned char *)""; /* nothing to read, never NULL */
	if (pos >= c->buf_off && pos - c->buf_off <= c->buf_len &&
	    n <= c->buf_len - (pos - c->buf_off)) {
		p = c->buf + (pos - c->buf_off);
		c->pos += n;
		return p;
	}
	/* Refill: keep the unread tail, read only new bytes (none twice). */
	if (pos >= c->buf_off && pos - c->buf_off < c->buf_len)
		keep = c->buf_len - (pos - c->buf_off);
	want = n - keep;
	if (want < c->lim.read_chunk)
		want = c->lim.read_chunk;
	end = pos + keep; /* <= file_size */
	if (want > c->file_size - end)
		want = c->file_size - end;
	if (keep + want > c->cap) {
		size_t ncap = (size_t)(keep + want);
		unsigned char *nb = malloc(ncap);
		if (!nb) {
			fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_NOMEM, pos, "out of memory");
			return NULL;
		}
		if (keep)
			memcpy(nb, c->buf + (pos - c->buf_off), (size_t)keep);
		free(c->buf);
		c->buf = nb;
		c->cap = ncap;
	} else if (keep) {
		memmove(c->buf, c->buf + (pos - c->buf_off), (size_t)keep);
	}
	if (want) {
		int rc = hb_pread_full(c->fd, c->buf + keep, (size_t)want, end, "gguf", c->err);
		if (rc) {
			c->rc = rc;
			if (c->err && c->err->id == NULL)
				c->err->id = hb_gguf_diag_id(HB_GGUF_DIAG_IO);
			return NULL;
		}
		c->bytes_read += want;
	}
	c->buf_off = pos;
	c->buf_len = (size_t)(keep + want);
	c->pos += n;
	return c->buf;
}

static uint64_t le(const unsigned char *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static bool get_u32(struct cursor *c, uint32_t *v)
{
	const unsigned char *p = take(c, 4);
	if (p)
		*v = (uint32_t)le(p, 4);
	return p != NULL;
}

static bool get_u64(struct cursor *c, uint64_t *v)
{
	const unsigned char *p = take(c, 8);
	if (p)
		*v = le(p, 8);
	return p != NULL;
}

/* A string whose length is at most max (diag beyond it), UTF-8 checked. */
static bool get_str(struct cursor *c, struct hb_gguf_str *s, uint64_t max,
		    enum hb_gguf_diag too_long)
{
	uint64_t at = c->pos, len;
	const unsigned char *p;

	if (!get_u64(c, &len))
		return false;
	if (len > max) {
		fail(c, too_long, HB_ERR_FORMAT, at, "string length %" PRIu64 " exceeds %" PRIu64,
		     len, max);
		return false;
	}
	p = take(c, len);
	if (!p)
		return false;
	if (!hb_gguf_utf8_valid((const char *)p, len)) {
		fail(c, HB_GGUF_DIAG_STRING_UTF8, HB_ERR_FORMAT, at, "string is not valid UTF-8");
		return false;
	}
	s->ptr = malloc((size_t)len + 1);
	if (!s->ptr) {
		fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_NOMEM, at, "out of memory");
		return false;
	}
	if (len)
		memcpy(s->ptr, p, (size_t)len);
	s->ptr[len] = '\0';
	s->len = len;
	return true;
}

/* One scalar of type, its n bytes at p (file offset at), into the native
 * slot dst. */
static bool put_scalar(struct cursor *c, uint32_t type, size_t n, const unsigned char *p,
		       uint64_t at, void *dst)
{
	uint64_t bits = le(p, (unsigned)n);

	switch (n) {
	case 1:
		if (type == HB_GGUF_BOOL && bits > 1) {
			fail(c, HB_GGUF_DIAG_BOOL, HB_ERR_FORMAT, at,
			     "bool byte is %" PRIu64 ", not 0 or 1", bits);
			return false;
		}
		*(uint8_t *)dst = (uint8_t)bits;
		break;
	case 2: { uint16_t x = (uint16_t)bits; memcpy(dst, &x, 2); break; }
	case 4: { uint32_t x = (uint32_t)bits; memcpy(dst, &x, 4); break; }
	default: memcpy(dst, &bits, 8); break;
	}
	return true;
}

/* One scalar of type at the cursor into the native slot dst. */
static bool get_scalar(struct cursor *c, uint32_t type, void *dst)
{
	size_t n = hb_gguf_type_size(type);
	uint64_t at = c->pos;
	const unsigned char *p = take(c, n);

	return p && put_scalar(c, type, n, p, at, dst);
}

static bool get_array(struct cursor *c, struct hb_gguf_value *v)
{
	uint64_t at = c->pos, count, min, need;
	uint32_t et;
	size_t es;

	if (!get_u32(c, &et))
		return false;
	if (et >= HB_GGUF_TYPE_COUNT || et == HB_GGUF_ARRAY) {
		fail(c, HB_GGUF_DIAG_ARRAY_TYPE, HB_ERR_FORMAT, at,
		     et == HB_GGUF_ARRAY ? "nested arrays are refused"
					 : "array element type %" PRIu32 " is unknown", et);
		return false;
	}
	v->elem_type = et;
	at = c->pos;
	if (!get_u64(c, &count))
		return false;
	if (count > c->lim.max_array) {
		fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_UNSUPPORTED, at,
		     "array of %" PRIu64 " elements exceeds %" PRIu64, count, c->lim.max_array);
		return false;
	}
	/* Prove the bytes exist before allocating for them. */
	es = hb_gguf_type_size(et);
	min = et == HB_GGUF_STRING ? 8 : es;
	need = count * min; /* count <= 2^24: no overflow */
	if (need > c->file_size - c->pos) {
		fail(c, HB_GGUF_DIAG_TRUNCATED, HB_ERR_SHORT, c->pos,
		     "array of %" PRIu64 " elements needs %" PRIu64 " bytes, the file has %" PRIu64,
		     count, need, c->file_size - c->pos);
		return false;
	}
	if (need > c->lim.max_header_bytes || c->pos > c->lim.max_header_bytes - need) {
		fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_UNSUPPORTED, c->pos,
		     "header region exceeds %" PRIu64 " bytes", c->lim.max_header_bytes);
		return false;
	}
	v->elems = calloc(count ? (size_t)count : 1,
			  et == HB_GGUF_STRING ? sizeof(struct hb_gguf_str) : es);
	if (!v->elems) {
		fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_NOMEM, at, "out of memory");
		return false;
	}
	v->count = et == HB_GGUF_STRING ? 0 : count;
	for (uint64_t i = 0; i < count; i++) {
		if (et == HB_GGUF_STRING) {
			if (!get_str(c, &((struct hb_gguf_str *)v->elems)[i], c->lim.max_string,
				     HB_GGUF_DIAG_STRING_LENGTH))
				return false;
			v->count = i + 1; /* release frees exactly what exists */
		} else {
			/* a run of scalars per take, not one take each (the real
			 * geometry's 786,432-byte record digest table took 20 ms of
			 * admission element by element); the bytes were proved to
			 * exist above, so no take here can fail short */
			uint64_t k = count - i < (65536u / es) ? count - i : 65536u / es, at0 = c->pos;
			const unsigned char *p = take(c, k * es);
			if (!p)
				return false;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			if (et != HB_GGUF_BOOL) { /* the bytes are the native values */
				memcpy((unsigned char *)v->elems + i * es, p, (size_t)(k * es));
				i += k - 1;
				continue;
			}
#endif
			for (uint64_t j = 0; j < k; j++)
				if (!put_scalar(c, et, es, p + j * es, at0 + j * es,
						(unsigned char *)v->elems + (i + j) * es))
					return false;
			i += k - 1;
		}
	}
	return true;
}

static bool name_ok(struct cursor *c, const struct hb_gguf_str *s, enum hb_gguf_diag id,
		    uint64_t at)
{
	if (s->len == 0 || memchr(s->ptr, '\0', (size_t)s->len)) {
		fail(c, id, HB_ERR_FORMAT, at, "%s", s->len ? "name contains a NUL byte"
							    : "name is empty");
		return false;
	}
	return true;
}

static bool parse_kv(struct cursor *c, struct hb_gguf_kv *kv)
{
	uint64_t key_max = c->lim.max_string < HB_GGUF_MAX_KEY ? c->lim.max_string
							      : HB_GGUF_MAX_KEY;
	uint64_t at;
	uint32_t type;

	kv->offset = c->pos;
	c->part = "key";
	if (!get_str(c, &kv->key, key_max, HB_GGUF_DIAG_STRING_LENGTH) ||
	    !name_ok(c, &kv->key, HB_GGUF_DIAG_KEY, kv->offset))
		return false;
	c->name = &kv->key;
	c->part = "type";
	at = c->pos;
	if (!get_u32(c, &type))
		return false;
	if (type >= HB_GGUF_TYPE_COUNT) {
		fail(c, HB_GGUF_DIAG_KV_TYPE, HB_ERR_FORMAT, at,
		     "value type %" PRIu32 " is unknown", type);
		return false;
	}
	kv->value.type = type;
	c->part = "value";
	if (type == HB_GGUF_STRING)
		return get_str(c, &kv->value.str, c->lim.max_string, HB_GGUF_DIAG_STRING_LENGTH);
	if (type == HB_GGUF_ARRAY)
		return get_array(c, &kv->value);
	return get_scalar(c, type, &kv->value.v);
}

static bool parse_tensor(struct cursor *c, struct hb_gguf_tensor *t, uint32_t alignment)
{
	uint64_t at;
	int rc;

	t->info_offset = c->pos;
	c->part = "name";
	if (!get_str(c, &t->name, HB_GGUF_MAX_TENSOR_NAME, HB_GGUF_DIAG_TENSOR_NAME) ||
	    !name_ok(c, &t->name, HB_GGUF_DIAG_TENSOR_NAME, t->info_offset))
		return false;
	c->name = &t->name;
	c->part = "n_dims";
	at = c->pos;
	if (!get_u32(c, &t->n_dims))
		return false;
	if (t->n_dims < 1 || t->n_dims > HB_GGUF_MAX_DIMS) {
		fail(c, HB_GGUF_DIAG_TENSOR_DIMS, HB_ERR_FORMAT, at,
		     "n_dims %" PRIu32 " is not 1..%u", t->n_dims, HB_GGUF_MAX_DIMS);
		return false;
	}
	c->part = "dims";
	at = c->pos;
	for (uint32_t d = 0; d < t->n_dims; d++)
		if (!get_u64(c, &t->dims[d]))
			return false;
	c->part = "type";
	if (!get_u32(c, &t->ggml_type))
		return false;
	rc = hb_gguf_tensor_bytes(t->ggml_type, t->n_dims, t->dims, &t->nbytes);
	if (rc == HB_ERR_UNSUPPORTED) {
		fail(c, HB_GGUF_DIAG_TENSOR_TYPE, HB_ERR_UNSUPPORTED, c->pos - 4,
		     "ggml type %" PRIu32 " is unknown here", t->ggml_type);
		return false;
	}
	if (rc) {
		c->part = "dims";
		fail(c, HB_GGUF_DIAG_TENSOR_DIMS, HB_ERR_OVERFLOW, at,
		     "dims overflow the byte count");
		return false;
	}
	c->part = "offset";
	at = c->pos;
	if (!get_u64(c, &t->rel_offset))
		return false;
	if (t->rel_offset % alignment) {
		fail(c, HB_GGUF_DIAG_TENSOR_OFFSET_MISALIGNED, HB_ERR_FORMAT, at,
		     "offset %" PRIu64 " is not a multiple of %" PRIu32, t->rel_offset, alignment);
		return false;
	}
	return true;
}

/* Grow *arr (element size es) so that index n fits. */
static bool grow(struct cursor *c, void **arr, size_t *cap, size_t n, size_t es)
{
	void *p;
	size_t ncap;

	if (n < *cap)
		return true;
	ncap = *cap ? *cap * 2 : 16;
	p = realloc(*arr, ncap * es);
	if (!p) {
		fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_NOMEM, c->pos, "out of memory");
		return false;
	}
	memset((char *)p + *cap * es, 0, (ncap - *cap) * es);
	*arr = p;
	*cap = ncap;
	return true;
}

static uint64_t offset_field(const struct hb_gguf_tensor *t)
{
	return t->info_offset + 8 + t->name.len + 4 + 8 * (uint64_t)t->n_dims + 4;
}

struct extent {
	uint64_t offset, nbytes;
	size_t index;
};

static int by_extent(const void *a, const void *b)
{
	const struct extent *x = a, *y = b;

	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	if (x->nbytes != y->nbytes)
		return x->nbytes < y->nbytes ? -1 : 1;
	return x->index < y->index ? -1 : (x->index > y->index);
}

/* Alignment, duplicates, padding, extents, overlap; then the ranges. */
static bool cross_checks(struct cursor *c, struct hb_gguf *g, size_t *order)
{
	struct hb_gguf_layout *L = &g->layout;
	const struct hb_gguf_str **names;
	size_t first = 0, second = 0, n = (size_t)g->n_tensors;
	uint64_t max_end;
	const unsigned char *pad;
	struct extent *ext;
	int dup;

	/* duplicate tensor names */
	names = malloc((n ? n : 1) * sizeof(*names));
	if (!names) {
		fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_NOMEM, 0, "out of memory");
		return false;
	}
	for (size_t i = 0; i < n; i++)
		names[i] = &g->tensors[i].name;
	dup = hb_gguf_find_duplicate(names, n, &first, &second);
	free(names);
	/* header padding first: it precedes every tensor in the file */
	c->kind = CTX_HEADER;
	c->part = "padding";
	c->pos = L->tensor_info_end;
	pad = take(c, L->data_start - L->tensor_info_end);
	if (!pad)
		return false;
	for (uint64_t i = 0; i < L->data_start - L->tensor_info_end; i++)
		if (pad[i]) {
			fail(c, HB_GGUF_DIAG_PADDING, HB_ERR_FORMAT, L->tensor_info_end + i,
			     "padding byte is 0x%02x, not zero", pad[i]);
			return false;
		}
	c->kind = CTX_TENSOR;
	if (dup < 0) {
		fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_NOMEM, 0, "out of memory");
		return false;
	}
	if (dup) {
		c->name = &g->tensors[second].name;
		c->part = "name";
		fail(c, HB_GGUF_DIAG_DUPLICATE_TENSOR, HB_ERR_FORMAT, g->tensors[second].info_offset,
		     "tensor name repeats tensor %zu", first);
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		struct hb_gguf_tensor *t = &g->tensors[i];
		c->name = &t->name;
		c->part = "offset";
		if (hb_add_u64(L->data_start, t->rel_offset, &t->offset) ||
		    !hb_range_inside(t->offset, t->nbytes, L->file_size)) {
			fail(c, HB_GGUF_DIAG_TENSOR_OUT_OF_FILE, HB_ERR_FORMAT, offset_field(t),
			     "extent of %" PRIu64 " bytes at data+%" PRIu64
			     " does not fit in a %" PRIu64 "-byte file",
			     t->nbytes, t->rel_offset, L->file_size);
			return false;
		}
	}
	ext = malloc((n ? n : 1) * sizeof(*ext));
	if (!ext) {
		fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_NOMEM, 0, "out of memory");
		return false;
	}
	for (size_t i = 0; i < n; i++)
		ext[i] = (struct extent){g->tensors[i].offset, g->tensors[i].nbytes, i};
	qsort(ext, n, sizeof(*ext), by_extent);
	for (size_t i = 0; i < n; i++)
		order[i] = ext[i].index;
	free(ext);
	max_end = L->data_start;
	for (size_t k = 0; k < n; k++) {
		const struct hb_gguf_tensor *t = &g->tensors[order[k]];
		if (t->nbytes == 0)
			continue; /* an empty extent owns no byte */
		if (t->offset < max_end) {
			c->name = &t->name;
			c->part = "offset";
			fail(c, HB_GGUF_DIAG_TENSOR_OVERLAP, HB_ERR_FORMAT, offset_field(t),
			     "extent [%" PRIu64 ", %" PRIu64 ") overlaps an earlier tensor ending at %"
			     PRIu64, t->offset, t->offset + t->nbytes, max_end);
			return false;
		}
		max_end = t->offset + t->nbytes;
	}
	if (hb_gguf_layout_ranges(L, g->tensors, n, order, c->err)) {
		c->rc = c->err ? c->err->code : HB_ERR_NOMEM;
		return false;
	}
	return true;
}

#define CLAMP(field, dflt) (lim && lim->field && lim->field < (dflt) ? lim->field : (dflt))

static bool parse(struct cursor *c, struct hb_gguf *g, size_t **order)
{
	struct hb_gguf_layout *L = &g->layout;
	const unsigned char *p;
	uint64_t nt, nkv, at;
	size_t cap_kv = 0, cap_t = 0;
	const struct hb_gguf_kv *align_kv;

	c->kind = CTX_HEADER;
	c->part = "magic";
	p = take(c, 4);
	if (!p)
		return false;
	if (memcmp(p, HB_GGUF_MAGIC, 4) != 0)
		return !fail(c, HB_GGUF_DIAG_MAGIC, HB_ERR_FORMAT, 0, "magic is not \"GGUF\"");
	c->part = "version";
	if (!get_u32(c, &g->version))
		return false;
	if (g->version != HB_GGUF_VERSION)
		return !fail(c, HB_GGUF_DIAG_VERSION, HB_ERR_UNSUPPORTED, 4,
			     "version %" PRIu32 " is not 3", g->version);
	c->part = "tensor_count";
	if (!get_u64(c, &nt))
		return false;
	if (nt > c->lim.max_tensors)
		return !fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_UNSUPPORTED, 8,
			     "tensor count %" PRIu64 " exceeds %" PRIu64, nt, c->lim.max_tensors);
	c->part = "kv_count";
	if (!get_u64(c, &nkv))
		return false;
	if (nkv > c->lim.max_kv)
		return !fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_UNSUPPORTED, 16,
			     "kv count %" PRIu64 " exceeds %" PRIu64, nkv, c->lim.max_kv);
	L->kv_start = c->pos;
	c->kind = CTX_KV;
	for (uint64_t i = 0; i < nkv; i++) {
		c->index = i;
		c->name = NULL;
		if (!grow(c, (void **)&g->kv, &cap_kv, (size_t)i, sizeof(*g->kv)))
			return false;
		g->n_kv = i + 1; /* release frees the partial entry too */
		if (!parse_kv(c, &g->kv[i]))
			return false;
	}
	L->tensor_info_start = c->pos;
	/* general.alignment governs the tensor offsets: settle it first */
	L->alignment = HB_GGUF_DEFAULT_ALIGNMENT;
	align_kv = hb_gguf_find_kv(g, "general.alignment");
	if (align_kv) {
		c->name = &align_kv->key;
		c->part = "value";
		if (align_kv->value.type != HB_GGUF_U32 || !hb_gguf_is_pow2(align_kv->value.v.u32))
			return !fail(c, HB_GGUF_DIAG_ALIGNMENT, HB_ERR_FORMAT, align_kv->offset,
				     "general.alignment must be a u32 power of two");
		L->alignment = align_kv->value.v.u32;
	}
	{
		const struct hb_gguf_str **keys = malloc((size_t)(g->n_kv ? g->n_kv : 1) *
							 sizeof(*keys));
		size_t first = 0, second = 0;
		int dup;
		if (!keys)
			return !fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_NOMEM, 0, "out of memory");
		for (uint64_t i = 0; i < g->n_kv; i++)
			keys[i] = &g->kv[i].key;
		dup = hb_gguf_find_duplicate(keys, (size_t)g->n_kv, &first, &second);
		free(keys);
		if (dup < 0)
			return !fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_NOMEM, 0, "out of memory");
		if (dup) {
			c->name = &g->kv[second].key;
			c->part = "key";
			return !fail(c, HB_GGUF_DIAG_DUPLICATE_KEY, HB_ERR_FORMAT,
				     g->kv[second].offset, "key repeats kv %zu", first);
		}
	}
	c->kind = CTX_TENSOR;
	for (uint64_t i = 0; i < nt; i++) {
		c->index = i;
		c->name = NULL;
		if (!grow(c, (void **)&g->tensors, &cap_t, (size_t)i, sizeof(*g->tensors)))
			return false;
		g->n_tensors = i + 1;
		if (!parse_tensor(c, &g->tensors[i], L->alignment))
			return false;
	}
	L->tensor_info_end = c->pos;
	c->kind = CTX_HEADER;
	c->part = "padding";
	at = c->pos;
	if (hb_align_up_u64(at, L->alignment, &L->data_start) ||
	    L->data_start > c->lim.max_header_bytes)
		return !fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_UNSUPPORTED, at,
			     "data section would start beyond %" PRIu64 " bytes",
			     c->lim.max_header_bytes);
	L->file_size = c->file_size;
	*order = malloc((size_t)(nt ? nt : 1) * sizeof(**order));
	if (!*order)
		return !fail(c, HB_GGUF_DIAG_LIMIT, HB_ERR_NOMEM, 0, "out of memory");
	return cross_checks(c, g, *order);
}

int hb_gguf_read_fd(struct hb_gguf *g, int fd, const struct hb_gguf_limits *lim,
		    struct hb_error *err)
{
	struct cursor c;
	size_t *order = NULL;
	bool ok;

	hb_gguf_init(g);
	memset(&c, 0, sizeof(c));
	c.fd = fd;
	c.err = err;
	c.lim.max_kv = CLAMP(max_kv, HB_GGUF_MAX_KV);
	c.lim.max_tensors = CLAMP(max_tensors, HB_GGUF_MAX_TENSORS);
	c.lim.max_string = CLAMP(max_string, HB_GGUF_MAX_STRING);
	c.lim.max_array = CLAMP(max_array, HB_GGUF_MAX_ARRAY);
	c.lim.max_header_bytes = CLAMP(max_header_bytes, HB_GGUF_MAX_HEADER_BYTES);
	c.lim.read_chunk = CLAMP(read_chunk, HB_GGUF_READ_CHUNK);
	c.rc = hb_file_size(fd, &c.file_size, "gguf", err);
	if (c.rc) {
		if (err && !err->id)
			err->id = hb_gguf_diag_id(HB_GGUF_DIAG_IO);
		return c.rc;
	}
	ok = parse(&c, g, &order);
	g->bytes_read = c.bytes_read;
	free(order);
	free(c.buf);
	if (!ok) {
		int rc = c.rc ? c.rc : HB_ERR_INTERNAL;
		hb_gguf_release(g);
		return rc;
	}
	return HB_OK;
}
