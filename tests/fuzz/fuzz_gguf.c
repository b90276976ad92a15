/*
 * fuzz_gguf.c: fuzz target of the GGUF v3 reader (hb_gguf_read_fd).
 *
 * The input is a whole GGUF file, given to the reader through a memfd.  It
 * is read twice, with the default 64 KiB read-ahead and with a tiny one
 * derived from the input, and the two reads must agree exactly (outcome,
 * diagnostic id, field path, offset): the refill logic of the cursor must
 * not change what is parsed.  An accepted file must then satisfy what
 * hb_gguf.h promises: the ownership ranges tile the file, every tensor
 * lies inside it with a size matching its dims, and every lookup and typed
 * accessor finds exactly the entry it names, and the header skim
 * (hb_gguf_locate_tensor) finds the first and last tensors where the parse
 * put them; a refused file is skimmed too (it must not crash).  This file owns only the
 * harness; the reader is libstore/gguf/hb_gguf_read.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "gguf/hb_gguf.h"

#include <unistd.h>

static void same_outcome(int rc1, const struct hb_error *e1, int rc2,
			 const struct hb_error *e2)
{
	HB_FUZZ_ASSERT(rc1 == rc2);
	if (rc1 == HB_OK)
		return;
	HB_FUZZ_ASSERT(hb_fuzz_same_id(e1->id, e2->id));
	HB_FUZZ_ASSERT(strcmp(e1->field, e2->field) == 0);
	HB_FUZZ_ASSERT(e1->has_offset == e2->has_offset);
	HB_FUZZ_ASSERT(e1->offset == e2->offset);
}

static void check_layout(const struct hb_gguf *g)
{
	const struct hb_gguf_layout *L = &g->layout;
	uint64_t at = 0;

	HB_FUZZ_ASSERT(L->alignment && (L->alignment & (L->alignment - 1)) == 0);
	HB_FUZZ_ASSERT(L->kv_start == HB_GGUF_FIXED_HEADER);
	HB_FUZZ_ASSERT(L->tensor_info_start <= L->tensor_info_end);
	HB_FUZZ_ASSERT(L->tensor_info_end <= L->data_start);
	HB_FUZZ_ASSERT(L->data_start % L->alignment == 0);
	for (size_t i = 0; i < L->n_ranges; i++) {
		const struct hb_gguf_range *r = &L->ranges[i];

		HB_FUZZ_ASSERT(r->offset == at && r->length > 0);
		HB_FUZZ_ASSERT(r->length <= L->file_size - at);
		HB_FUZZ_ASSERT(hb_gguf_owner_name(r->owner) != NULL);
		if (r->owner == HB_GGUF_OWN_TENSOR) {
			HB_FUZZ_ASSERT(r->tensor < g->n_tensors);
			HB_FUZZ_ASSERT(g->tensors[r->tensor].offset == r->offset);
			HB_FUZZ_ASSERT(g->tensors[r->tensor].nbytes == r->length);
		}
		at += r->length;
	}
	HB_FUZZ_ASSERT(at == L->file_size);
}

static void check_tensors(const struct hb_gguf *g)
{
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct hb_gguf_tensor *t = &g->tensors[i];
		uint64_t n = hb_ggml_type_size(t->ggml_type);

		HB_FUZZ_ASSERT(t->name.ptr && t->name.len > 0);
		HB_FUZZ_ASSERT(t->name.len <= HB_GGUF_MAX_TENSOR_NAME);
		HB_FUZZ_ASSERT(t->name.ptr[t->name.len] == '\0');
		HB_FUZZ_ASSERT(strlen(t->name.ptr) == t->name.len);
		HB_FUZZ_ASSERT(hb_ggml_type_name(t->ggml_type) != NULL && n > 0);
		HB_FUZZ_ASSERT(t->n_dims >= 1 && t->n_dims <= HB_GGUF_MAX_DIMS);
		for (uint32_t d = 0; d < t->n_dims; d++) {
			HB_FUZZ_ASSERT(t->dims[d] == 0 || n <= UINT64_MAX / t->dims[d]);
			n *= t->dims[d];
		}
		HB_FUZZ_ASSERT(n == t->nbytes);
		HB_FUZZ_ASSERT(t->rel_offset % g->layout.alignment == 0);
		HB_FUZZ_ASSERT(t->offset == g->layout.data_start + t->rel_offset);
		HB_FUZZ_ASSERT(t->offset <= g->layout.file_size &&
			       t->nbytes <= g->layout.file_size - t->offset);
		HB_FUZZ_ASSERT(hb_gguf_find_tensor(g, t->name.ptr) == t);
	}
}

/* The skim's promise: on an accepted file it agrees with the parse. */
static void check_skim(int fd, const struct hb_gguf *g)
{
	for (uint64_t i = 0; i < g->n_tensors; i += g->n_tensors - 1 > i ? g->n_tensors - 1 - i : 1) {
		const struct hb_gguf_tensor *t = &g->tensors[i];
		uint64_t off = 0, n = 0;

		HB_FUZZ_ASSERT(hb_gguf_locate_tensor(fd, t->name.ptr, &off, &n, NULL) == HB_OK);
		HB_FUZZ_ASSERT(off == t->offset && n == t->nbytes);
	}
}

static void check_value(const struct hb_gguf_value *v)
{
	HB_FUZZ_ASSERT(hb_gguf_type_name(v->type) != NULL);
	if (v->type == HB_GGUF_STRING) {
		HB_FUZZ_ASSERT(v->str.ptr && v->str.ptr[v->str.len] == '\0');
		HB_FUZZ_ASSERT(hb_gguf_utf8_valid(v->str.ptr, v->str.len));
	}
	if (v->type == HB_GGUF_BOOL)
		HB_FUZZ_ASSERT(v->v.u8 <= 1);
	if (v->type != HB_GGUF_ARRAY)
		return;
	HB_FUZZ_ASSERT(v->elem_type != HB_GGUF_ARRAY);
	HB_FUZZ_ASSERT(hb_gguf_type_name(v->elem_type) != NULL);
	HB_FUZZ_ASSERT(v->count == 0 || v->elems != NULL);
	if (v->elem_type == HB_GGUF_STRING) {
		const struct hb_gguf_str *s = v->elems;

		for (uint64_t i = 0; i < v->count; i++) {
			HB_FUZZ_ASSERT(s[i].ptr && s[i].ptr[s[i].len] == '\0');
			HB_FUZZ_ASSERT(hb_gguf_utf8_valid(s[i].ptr, s[i].len));
		}
	} else if (v->elem_type == HB_GGUF_BOOL) {
		const uint8_t *b = v->elems;

		for (uint64_t i = 0; i < v->count; i++)
			HB_FUZZ_ASSERT(b[i] <= 1);
	} else if (v->count) {
		/* touch the last element: the array is as long as it says */
		const volatile uint8_t *e = v->elems;
		size_t sz = hb_gguf_type_size(v->elem_type);

		HB_FUZZ_ASSERT(sz > 0);
		(void)e[v->count * sz - 1];
	}
}

static void check_kv(const struct hb_gguf *g)
{
	struct hb_error err;

	for (uint64_t i = 0; i < g->n_kv; i++) {
		const struct hb_gguf_kv *kv = &g->kv[i];
		const char *key = kv->key.ptr;
		const struct hb_gguf_str *s;
		const struct hb_gguf_value *a;
		uint32_t u32;
		int32_t i32;
		uint64_t u64;
		float f32;
		bool b;
		uint32_t t = kv->value.type;

		HB_FUZZ_ASSERT(key && kv->key.len > 0 && strlen(key) == kv->key.len);
		HB_FUZZ_ASSERT(hb_gguf_find_kv(g, key) == kv);
		check_value(&kv->value);
		hb_error_clear(&err);
		HB_FUZZ_ASSERT((hb_gguf_get_u32(g, key, &u32, &err) == HB_OK) == (t == HB_GGUF_U32));
		HB_FUZZ_ASSERT((hb_gguf_get_i32(g, key, &i32, &err) == HB_OK) == (t == HB_GGUF_I32));
		HB_FUZZ_ASSERT((hb_gguf_get_u64(g, key, &u64, &err) == HB_OK) == (t == HB_GGUF_U64));
		HB_FUZZ_ASSERT((hb_gguf_get_f32(g, key, &f32, &err) == HB_OK) == (t == HB_GGUF_F32));
		HB_FUZZ_ASSERT((hb_gguf_get_bool(g, key, &b, &err) == HB_OK) == (t == HB_GGUF_BOOL));
		HB_FUZZ_ASSERT((hb_gguf_get_str(g, key, &s, &err) == HB_OK) == (t == HB_GGUF_STRING));
		if (t == HB_GGUF_ARRAY)
			HB_FUZZ_ASSERT(hb_gguf_get_array(g, key, kv->value.elem_type, &a, &err) == HB_OK &&
				       a == &kv->value);
	}
}

int hb_fuzz_gguf(const uint8_t *data, size_t size)
{
	struct hb_gguf g1, g2;
	struct hb_gguf_limits lim;
	struct hb_error e1, e2;
	int fd, rc1, rc2;

	if (size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	fd = hb_fuzz_memfd(data, size, 0, size);
	if (fd < 0)
		return HB_FUZZ_REFUSED;
	hb_error_clear(&e1);
	hb_error_clear(&e2);
	rc1 = hb_gguf_read_fd(&g1, fd, NULL, &e1);
	hb_gguf_limits_default(&lim);
	lim.read_chunk = 1 + size % 13;
	rc2 = hb_gguf_read_fd(&g2, fd, &lim, &e2);
	same_outcome(rc1, &e1, rc2, &e2);
	if (rc1 != HB_OK) {
		HB_FUZZ_ASSERT(rc1 < 0 && e1.code == rc1 && e1.id != NULL);
		HB_FUZZ_ASSERT(g1.n_kv == 0 && g1.kv == NULL && g1.tensors == NULL);
		{
			uint64_t off, n;
			(void)hb_gguf_locate_tensor(fd, "ds4.ple_rows.v1", &off, &n, NULL);
		}
		close(fd);
		return HB_FUZZ_REFUSED;
	}
	HB_FUZZ_ASSERT(g1.n_kv == g2.n_kv && g1.n_tensors == g2.n_tensors);
	HB_FUZZ_ASSERT(g1.layout.data_start == g2.layout.data_start);
	HB_FUZZ_ASSERT(g1.layout.n_ranges == g2.layout.n_ranges);
	HB_FUZZ_ASSERT(g1.layout.file_size == size);
	HB_FUZZ_ASSERT(g1.bytes_read <= size);
	check_layout(&g1);
	check_tensors(&g1);
	check_skim(fd, &g1);
	check_kv(&g1);
	hb_gguf_release(&g1);
	hb_gguf_release(&g2);
	close(fd);
	return HB_FUZZ_ACCEPTED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_gguf(data, size);
	return 0;
}
#endif
