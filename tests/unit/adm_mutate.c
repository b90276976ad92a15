/*
 * adm_mutate.c: re-emit a parsed artifact with edits (see adm_mutate.h).
 *
 * Owns the test-side re-emission only: metadata and tensor infos go
 * through the production GGUF writer (so a mutation is a well-formed GGUF
 * unless the edit is a raw byte patch meant to break the container), tensor
 * bytes are copied from the original extents.  It does not interpret the
 * artifact; admission does.
 */
#include "hb_base.h"
#include "adm_mutate.h"
#include "artifact/hb_artifact.h"
#include "hb_io.h"
#include "hb_sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int adm_src_open(struct adm_src *s, const char *path, struct hb_error *err)
{
	int rc;

	hb_gguf_init(&s->g);
	s->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->fd < 0)
		return hb_error_sys(err, errno, path, "open");
	rc = hb_gguf_read_fd(&s->g, s->fd, NULL, err);
	if (rc) {
		close(s->fd);
		s->fd = -1;
	}
	return rc;
}

void adm_src_close(struct adm_src *s)
{
	hb_gguf_release(&s->g);
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

/* ------------------------------------------------------------ values */

static struct hb_gguf_value scalar(uint32_t type)
{
	struct hb_gguf_value v;

	memset(&v, 0, sizeof(v));
	v.type = type;
	return v;
}

struct hb_gguf_value adm_v_u32(uint32_t x) { struct hb_gguf_value v = scalar(HB_GGUF_U32); v.v.u32 = x; return v; }
struct hb_gguf_value adm_v_i32(int32_t x) { struct hb_gguf_value v = scalar(HB_GGUF_I32); v.v.i32 = x; return v; }
struct hb_gguf_value adm_v_u64(uint64_t x) { struct hb_gguf_value v = scalar(HB_GGUF_U64); v.v.u64 = x; return v; }
struct hb_gguf_value adm_v_f32(float x) { struct hb_gguf_value v = scalar(HB_GGUF_F32); v.v.f32 = x; return v; }
struct hb_gguf_value adm_v_f64(double x) { struct hb_gguf_value v = scalar(HB_GGUF_F64); v.v.f64 = x; return v; }
struct hb_gguf_value adm_v_bool(bool x) { struct hb_gguf_value v = scalar(HB_GGUF_BOOL); v.v.b = x; return v; }

struct hb_gguf_value adm_v_strn(const char *s, size_t len)
{
	struct hb_gguf_value v = scalar(HB_GGUF_STRING);

	v.str.ptr = (char *)s;
	v.str.len = len;
	return v;
}

struct hb_gguf_value adm_v_str(const char *s)
{
	return adm_v_strn(s, strlen(s));
}

struct hb_gguf_value adm_v_array(uint32_t elem_type, void *elems, uint64_t count)
{
	struct hb_gguf_value v = scalar(HB_GGUF_ARRAY);

	v.elem_type = elem_type;
	v.elems = elems;
	v.count = count;
	return v;
}

static char *dup_n(const char *s, uint64_t len)
{
	char *p = malloc((size_t)len + 1);

	if (p) {
		memcpy(p, s, (size_t)len);
		p[len] = 0;
	}
	return p;
}

int adm_value_copy(struct hb_gguf_value *dst, const struct hb_gguf_value *src)
{
	*dst = *src;
	dst->str.ptr = NULL;
	dst->elems = NULL;
	if (src->type == HB_GGUF_STRING && !(dst->str.ptr = dup_n(src->str.ptr, src->str.len)))
		return HB_ERR_NOMEM;
	if (src->type != HB_GGUF_ARRAY)
		return HB_OK;
	if (src->elem_type == HB_GGUF_STRING) {
		const struct hb_gguf_str *s = src->elems;
		struct hb_gguf_str *d = calloc((size_t)src->count + 1, sizeof(*d));
		if (!d)
			return HB_ERR_NOMEM;
		dst->elems = d;
		for (uint64_t i = 0; i < src->count; i++) {
			d[i].len = s[i].len;
			if (!(d[i].ptr = dup_n(s[i].ptr, s[i].len))) {
				dst->count = i;
				hb_gguf_value_release(dst);
				return HB_ERR_NOMEM;
			}
		}
		return HB_OK;
	}
	{
		size_t sz = hb_gguf_type_size(src->elem_type) * (size_t)src->count;
		dst->elems = malloc(sz ? sz : 1);
		if (!dst->elems)
			return HB_ERR_NOMEM;
		if (sz)
			memcpy(dst->elems, src->elems, sz);
	}
	return HB_OK;
}

static int add_value(struct hb_gguf_writer *w, const char *key, const struct hb_gguf_value *v,
		     struct hb_error *err)
{
	switch (v->type) {
	case HB_GGUF_U8: return hb_gguf_writer_add_u8(w, key, v->v.u8, err);
	case HB_GGUF_I8: return hb_gguf_writer_add_i8(w, key, v->v.i8, err);
	case HB_GGUF_U16: return hb_gguf_writer_add_u16(w, key, v->v.u16, err);
	case HB_GGUF_I16: return hb_gguf_writer_add_i16(w, key, v->v.i16, err);
	case HB_GGUF_U32: return hb_gguf_writer_add_u32(w, key, v->v.u32, err);
	case HB_GGUF_I32: return hb_gguf_writer_add_i32(w, key, v->v.i32, err);
	case HB_GGUF_F32: return hb_gguf_writer_add_f32(w, key, v->v.f32, err);
	case HB_GGUF_BOOL: return hb_gguf_writer_add_bool(w, key, v->v.b, err);
	case HB_GGUF_U64: return hb_gguf_writer_add_u64(w, key, v->v.u64, err);
	case HB_GGUF_I64: return hb_gguf_writer_add_i64(w, key, v->v.i64, err);
	case HB_GGUF_F64: return hb_gguf_writer_add_f64(w, key, v->v.f64, err);
	case HB_GGUF_STRING: return hb_gguf_writer_add_strn(w, key, v->str.ptr, (size_t)v->str.len, err);
	case HB_GGUF_ARRAY:
		if (v->elem_type == HB_GGUF_STRING) {
			const struct hb_gguf_str *s = v->elems;
			const char **p = calloc((size_t)v->count + 1, sizeof(*p));
			size_t *l = calloc((size_t)v->count + 1, sizeof(*l));
			int rc;
			if (!p || !l) {
				free(p), free(l);
				return hb_error_set(err, HB_ERR_NOMEM, key, "out of memory");
			}
			for (uint64_t i = 0; i < v->count; i++) {
				p[i] = s[i].ptr;
				l[i] = (size_t)s[i].len;
			}
			rc = hb_gguf_writer_add_str_array(w, key, p, l, v->count, err);
			free(p), free(l);
			return rc;
		}
		return hb_gguf_writer_add_array(w, key, v->elem_type, v->elems, v->count, err);
	default:
		return hb_error_set(err, HB_ERR_INVALID, key, "value type %u cannot be written", v->type);
	}
}

/* ------------------------------------------------------------ bytes */

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off, struct hb_error *err)
{
	return hb_pwrite_full(fd, buf, len, off, "mutation", err);
}

static int copy_plain(int in, uint64_t off, uint64_t len, int out, uint64_t out_off, struct hb_error *err)
{
	static uint8_t buf[1 << 20];
	int rc = HB_OK;

	while (!rc && len) {
		size_t n = len < sizeof(buf) ? (size_t)len : sizeof(buf);
		rc = hb_pread_full(in, buf, n, off, "mutation.source", err);
		if (!rc)
			rc = pwrite_all(out, buf, n, out_off, err);
		off += n, out_off += n, len -= n;
	}
	return rc;
}

static int copy_range(int in, uint64_t off, uint64_t len, int out, uint64_t out_off, struct hb_error *err)
{
	while (len) {
		loff_t a = (loff_t)off, b = (loff_t)out_off;
		ssize_t n = copy_file_range(in, &a, out, &b, len, 0);
		if (n <= 0)
			return copy_plain(in, off, len, out, out_off, err);
		off += (uint64_t)n, out_off += (uint64_t)n, len -= (uint64_t)n;
	}
	return HB_OK;
}

int adm_copy_sparse(int in, uint64_t off, uint64_t len, int out, uint64_t out_off, struct hb_error *err)
{
	uint64_t end = off + len, pos = off;

	while (pos < end) {
		off_t d = lseek(in, (off_t)pos, SEEK_DATA), h;
		int rc;
		if (d < 0 && errno == ENXIO)
			return HB_OK; /* the rest is a hole */
		if (d < 0)
			return copy_range(in, pos, end - pos, out, out_off + (pos - off), err);
		if ((uint64_t)d >= end)
			return HB_OK;
		h = lseek(in, d, SEEK_HOLE);
		if (h < 0 || (uint64_t)h > end)
			h = (off_t)end;
		rc = copy_range(in, (uint64_t)d, (uint64_t)(h - d), out, out_off + ((uint64_t)d - off), err);
		if (rc)
			return rc;
		pos = (uint64_t)h;
	}
	return HB_OK;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

int adm_store_reseal(int fd, uint64_t store_offset, bool ple, uint64_t meta_end, struct hb_error *err)
{
	uint64_t dig_off = ple ? 208 : 168;
	uint8_t buf[65536], d[HB_SHA256_BYTES];
	struct hb_sha256 s;
	uint64_t pos = 0;
	int rc = HB_OK;

	hb_sha256_init(&s);
	while (!rc && pos < meta_end) {
		size_t n = meta_end - pos < sizeof(buf) ? (size_t)(meta_end - pos) : sizeof(buf);
		rc = hb_pread_full(fd, buf, n, store_offset + pos, "mutation.reseal", err);
		for (uint64_t i = 0; !rc && i < n; i++)
			if (pos + i >= dig_off && pos + i < dig_off + HB_SHA256_BYTES)
				buf[i] = 0;
		if (!rc)
			hb_sha256_update(&s, buf, n);
		pos += n;
	}
	if (rc)
		return rc;
	hb_sha256_final(&s, d);
	return pwrite_all(fd, d, sizeof(d), store_offset + dig_off, err);
}

/* Store-relative end of what the manifest digest covers, from the
 * original (unpatched) store header. */
static int meta_end_of(const struct adm_src *s, const struct hb_gguf_tensor *t, bool ple,
		       uint64_t *out, struct hb_error *err)
{
	uint8_t h[256];
	int rc = hb_pread_full(s->fd, h, sizeof(h), t->offset, "mutation.store", err);

	if (rc)
		return rc;
	*out = ple ? get64(h + 120) : 256 + get64(h + 48);
	return HB_OK;
}

/* Copy len bytes of original tensor o to out_off (or its manifest only). */
static int copy_tensor(const struct adm_src *s, const struct hb_gguf_tensor *o, uint64_t len, int fd,
		       uint64_t out_off, struct hb_error *err)
{
	bool em = !strcmp(o->name.ptr, HB_TENSOR_EXPERT_STORE), ple = !strcmp(o->name.ptr, HB_TENSOR_PLE_STORE);
	uint64_t end;
	int rc;

	if (s->meta_only && !em && !ple)
		return HB_OK;
	if (s->meta_only) {
		if ((rc = meta_end_of(s, o, ple, &end, err)))
			return rc;
		if (end < len)
			len = end;
	}
	return adm_copy_sparse(s->fd, o->offset, len, fd, out_off, err);
}

/* ------------------------------------------------------------ emit */

static const struct adm_edit *find_edit(const struct adm_edit *e, size_t n, enum adm_edit_kind k,
					const char *key, const char *tensor)
{
	for (size_t i = 0; i < n; i++)
		if (e[i].kind == k && (!key || (e[i].key && !strcmp(e[i].key, key))) &&
		    (!tensor || (e[i].tensor && !strcmp(e[i].tensor, tensor))))
			return &e[i];
	return NULL;
}

/* A placeholder of the same byte length: the duplicate is written under
 * it (the writer refuses real duplicates) and renamed by a byte patch. */
static void placeholder(const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s", name);
	out[0] = out[0] == '~' ? '^' : '~';
}

struct plan_t {
	size_t src;        /* original index, SIZE_MAX for an added tensor */
	const char *real;  /* name to patch in after writing (duplicates) */
};

static int add_tensor(struct hb_gguf_writer *w, const char *name, uint32_t type, uint32_t nd,
		      const uint64_t *dims, struct hb_error *err)
{
	uint64_t elems = 1;
	bool store = !strcmp(name, HB_TENSOR_EXPERT_STORE) || !strcmp(name, HB_TENSOR_PLE_STORE);

	for (uint32_t d = 0; d < nd; d++)
		elems *= dims[d];
	return hb_gguf_writer_add_tensor_ggml(w, name, type, nd, dims, elems * hb_ggml_type_size(type),
					      store ? HB_STORE_FILE_ALIGN : 0, err);
}

static int add_src_tensor(const struct adm_src *s, const struct adm_edit *e, size_t n,
			  struct hb_gguf_writer *w, struct plan_t *plan, size_t i, struct hb_error *err)
{
	const struct hb_gguf_tensor *t = &s->g.tensors[i];
	const struct adm_edit *rn = find_edit(e, n, ADM_T_RENAME, NULL, t->name.ptr);
	const struct adm_edit *rt = find_edit(e, n, ADM_T_RETYPE, NULL, t->name.ptr);
	const struct adm_edit *rs = find_edit(e, n, ADM_T_RESHAPE, NULL, t->name.ptr);
	const struct adm_edit *dp = find_edit(e, n, ADM_T_DUPLICATE, NULL, t->name.ptr);
	const char *name = rn ? rn->name : t->name.ptr;
	uint32_t type = rt ? rt->ggml_type : t->ggml_type;
	uint32_t nd = rs ? rs->n_dims : t->n_dims;
	const uint64_t *dims = rs ? rs->dims : t->dims;
	int rc;

	plan[w->n_tensors] = (struct plan_t){i, NULL};
	rc = add_tensor(w, name, type, nd, dims, err);
	if (!rc && dp) {
		char ph[HB_GGUF_MAX_TENSOR_NAME + 1];
		placeholder(name, ph, sizeof(ph));
		plan[w->n_tensors] = (struct plan_t){i, t->name.ptr};
		rc = add_tensor(w, ph, type, nd, dims, err);
	}
	return rc;
}

static int describe(const struct adm_src *s, const struct adm_edit *e, size_t n,
		    struct hb_gguf_writer *w, struct plan_t *plan, struct hb_error *err)
{
	int rc = HB_OK;
	size_t last = SIZE_MAX;

	for (size_t i = 0; i < n; i++) {
		bool kv = e[i].kind == ADM_KV_SET || e[i].kind == ADM_KV_REMOVE ||
			  e[i].kind == ADM_KV_DUPLICATE || e[i].kind == ADM_KV_RETYPE;
		bool t = e[i].kind >= ADM_T_RENAME && e[i].kind <= ADM_T_LAST && e[i].kind != ADM_T_ADD;
		if ((kv && !hb_gguf_find_kv(&s->g, e[i].key)) ||
		    ((t || e[i].kind == ADM_STORE_PATCH) && !hb_gguf_find_tensor(&s->g, e[i].tensor)))
			return hb_error_set(err, HB_ERR_INVALID, kv ? e[i].key : e[i].tensor,
					    "edit %zu names nothing in the artifact", i);
		if ((e[i].kind == ADM_T_RENAME || e[i].kind == ADM_T_ADD) && !e[i].name)
			return hb_error_set(err, HB_ERR_INVALID, "edit", "edit %zu has no name", i);
	}
	for (uint64_t i = 0; !rc && i < s->g.n_kv; i++) {
		const struct hb_gguf_kv *kv = &s->g.kv[i];
		const struct adm_edit *set = find_edit(e, n, ADM_KV_SET, kv->key.ptr, NULL);
		const struct adm_edit *dup = find_edit(e, n, ADM_KV_DUPLICATE, kv->key.ptr, NULL);
		if (find_edit(e, n, ADM_KV_REMOVE, kv->key.ptr, NULL))
			continue;
		rc = add_value(w, kv->key.ptr, set ? &set->val : &kv->value, err);
		if (!rc && dup) {
			char ph[512];
			placeholder(kv->key.ptr, ph, sizeof(ph));
			rc = add_value(w, ph, set ? &set->val : &kv->value, err);
		}
	}
	for (size_t i = 0; !rc && i < n; i++)
		if (e[i].kind == ADM_KV_ADD)
			rc = add_value(w, e[i].key, &e[i].val, err);
	for (uint64_t i = 0; !rc && i < s->g.n_tensors; i++) {
		const char *nm = s->g.tensors[i].name.ptr;
		if (find_edit(e, n, ADM_T_REMOVE, NULL, nm))
			continue;
		if (find_edit(e, n, ADM_T_LAST, NULL, nm)) {
			last = (size_t)i;
			continue;
		}
		rc = add_src_tensor(s, e, n, w, plan, (size_t)i, err);
	}
	if (!rc && last != SIZE_MAX)
		rc = add_src_tensor(s, e, n, w, plan, last, err);
	for (size_t i = 0; !rc && i < n; i++)
		if (e[i].kind == ADM_T_ADD) {
			plan[w->n_tensors] = (struct plan_t){SIZE_MAX, NULL};
			rc = add_tensor(w, e[i].name, e[i].ggml_type, e[i].n_dims, e[i].dims, err);
		}
	return rc;
}

static struct hb_gguf_tensor *out_tensor(struct hb_gguf_writer *w, const struct adm_src *s,
					 const struct plan_t *plan, const char *orig)
{
	for (size_t k = 0; k < w->n_tensors; k++)
		if (plan[k].src != SIZE_MAX && !plan[k].real &&
		    !strcmp(s->g.tensors[plan[k].src].name.ptr, orig))
			return &w->tensors[k];
	return NULL;
}

static struct hb_gguf_kv *out_kv(struct hb_gguf_writer *w, const char *key)
{
	for (size_t k = 0; k < w->n_kv; k++)
		if (!strcmp(w->kv[k].key.ptr, key))
			return &w->kv[k];
	return NULL;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (unsigned i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Patches made after the writer laid out and wrote the file. */
static int patch(const struct adm_src *s, const struct adm_edit *e, size_t n,
		 struct hb_gguf_writer *w, const struct plan_t *plan, int fd, struct hb_error *err)
{
	int rc = HB_OK;

	for (size_t k = 0; !rc && k < w->n_tensors; k++)
		if (plan[k].real)
			rc = pwrite_all(fd, plan[k].real, strlen(plan[k].real), w->tensors[k].info_offset + 8, err);
	for (size_t i = 0; !rc && i < n; i++) {
		const struct adm_edit *x = &e[i];
		struct hb_gguf_tensor *t = x->tensor ? out_tensor(w, s, plan, x->tensor) : NULL;
		struct hb_gguf_kv *kv = x->key ? out_kv(w, x->key) : NULL;
		uint8_t word[4];
		put32(word, x->u32v);
		switch (x->kind) {
		case ADM_KV_DUPLICATE: {
			char ph[512];
			placeholder(x->key, ph, sizeof(ph));
			kv = out_kv(w, ph);
			rc = pwrite_all(fd, x->key, strlen(x->key), kv->offset + 8, err);
			break;
		}
		case ADM_KV_RETYPE:
			rc = pwrite_all(fd, word, 4, kv->offset + 8 + kv->key.len, err);
			break;
		case ADM_T_RAWTYPE:
			rc = pwrite_all(fd, word, 4, t->info_offset + 8 + t->name.len + 4 + 8ull * t->n_dims, err);
			break;
		case ADM_T_RAWNDIMS:
			rc = pwrite_all(fd, word, 4, t->info_offset + 8 + t->name.len, err);
			break;
		case ADM_STORE_PATCH: {
			bool ple = !strcmp(x->tensor, HB_TENSOR_PLE_STORE);
			uint64_t end = 0;
			rc = pwrite_all(fd, x->bytes, x->len, t->offset + x->off, err);
			if (!rc && x->reseal)
				rc = meta_end_of(s, hb_gguf_find_tensor(&s->g, x->tensor), ple, &end, err);
			if (!rc && x->reseal)
				rc = adm_store_reseal(fd, t->offset, ple, end, err);
			break;
		}
		case ADM_FILE_PATCH: {
			uint64_t at = x->off;
			if (x->anchor == ADM_AT_KV_VALUE)
				at += kv->offset + 8 + kv->key.len + 4;
			else if (x->anchor == ADM_AT_TENSOR_INFO_END)
				at += w->layout.tensor_info_end;
			rc = pwrite_all(fd, x->bytes, x->len, at, err);
			break;
		}
		case ADM_FILE_APPEND:
			rc = pwrite_all(fd, x->bytes, x->len, w->layout.file_size, err);
			break;
		case ADM_FILE_TRUNCATE:
			if (ftruncate(fd, (off_t)x->off))
				rc = hb_error_sys(err, errno, "mutation", "ftruncate");
			break;
		default:
			break;
		}
	}
	return rc;
}

int adm_emit_fd(const struct adm_src *s, const struct adm_edit *e, size_t n, int fd, struct hb_error *err)
{
	const char *out_path = "mutation.output";
	struct hb_gguf_writer w;
	struct plan_t *plan = calloc((size_t)s->g.n_tensors + 2 * n + 1, sizeof(*plan));
	int rc;

	hb_gguf_writer_init(&w);
	if (!plan)
		return hb_error_set(err, HB_ERR_NOMEM, "mutation", "out of memory");
	rc = describe(s, e, n, &w, plan, err);
	if (!rc)
		rc = hb_gguf_writer_layout(&w, err);
	if (!rc && (ftruncate(fd, 0) || ftruncate(fd, (off_t)w.layout.file_size)))
		rc = hb_error_sys(err, errno, out_path, "ftruncate");
	/* bytes first, at the laid-out extents; then a moved offset lies */
	for (size_t k = 0; !rc && k < w.n_tensors; k++) {
		const struct hb_gguf_tensor *o;
		uint64_t len;
		if (plan[k].src == SIZE_MAX)
			continue;
		o = &s->g.tensors[plan[k].src];
		len = o->nbytes < w.tensors[k].nbytes ? o->nbytes : w.tensors[k].nbytes;
		rc = copy_tensor(s, o, len, fd, w.tensors[k].offset, err);
	}
	for (size_t i = 0; !rc && i < n; i++)
		if (e[i].kind == ADM_T_OFFSET) {
			struct hb_gguf_tensor *t = out_tensor(&w, s, plan, e[i].tensor);
			t->rel_offset += (uint64_t)e[i].delta;
			t->offset += (uint64_t)e[i].delta;
		}
	if (!rc)
		rc = hb_gguf_writer_write_header_fd(&w, fd, err);
	if (!rc)
		rc = hb_gguf_writer_write_padding_fd(&w, fd, err);
	for (size_t i = 0; !rc && i < n; i++)
		if (e[i].kind == ADM_T_OFFSET && e[i].carry) {
			const struct hb_gguf_tensor *o = hb_gguf_find_tensor(&s->g, e[i].tensor);
			const struct hb_gguf_tensor *t = out_tensor(&w, s, plan, e[i].tensor);
			uint64_t end = (t->offset + t->nbytes + w.alignment - 1) / w.alignment * w.alignment;
			rc = copy_tensor(s, o, o->nbytes, fd, t->offset, err);
			if (!rc && end > w.layout.file_size && ftruncate(fd, (off_t)end))
				rc = hb_error_sys(err, errno, out_path, "ftruncate");
		}
	if (!rc)
		rc = patch(s, e, n, &w, plan, fd, err);
	hb_gguf_writer_release(&w);
	free(plan);
	return rc;
}

int adm_emit(const struct adm_src *s, const struct adm_edit *e, size_t n, const char *out_path,
	     struct hb_error *err)
{
	int fd, rc;

	/* a fresh inode: truncating a written file makes ext4 flush it */
	if (unlink(out_path) && errno != ENOENT)
		return hb_error_sys(err, errno, out_path, "unlink");
	fd = open(out_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return hb_error_sys(err, errno, out_path, "open");
	rc = adm_emit_fd(s, e, n, fd, err);
	if (close(fd) && !rc)
		rc = hb_error_sys(err, errno, out_path, "close");
	return rc;
}
