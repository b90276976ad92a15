/*
 * fuzz_gguf_write.c: round-trip target of the GGUF writer
 * (libstore/gguf/hb_gguf_write.c) through the reader.
 *
 * The input is a whole GGUF file.  One the reader (hb_gguf_read_fd)
 * accepts is described to the writer again, every key with its type and
 * value in file order and every tensor in data order with its ggml dims and
 * bytes, laid out, written to a memfd and read back: the same keys, types
 * and values (bit for bit, floats included), the same tensors (name, type,
 * dims, bytes), and a second rewrite of the re-read file gives the same
 * bytes (the writer is a function of the description).  An input already in
 * the writer's layout (tensors in info order, each at the first aligned
 * offset) comes back byte for byte, header region and tensors (the padding
 * between and after tensors is not read by the reader, hb_gguf.h, so a
 * non-zero byte there is not compared).  This file owns only the harness.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "gguf/hb_gguf.h"

static int add_kv(struct hb_gguf_writer *w, const struct hb_gguf_kv *kv, struct hb_error *err)
{
	const struct hb_gguf_value *v = &kv->value;
	const char *k = kv->key.ptr;

	switch (v->type) {
	case HB_GGUF_U8: return hb_gguf_writer_add_u8(w, k, v->v.u8, err);
	case HB_GGUF_I8: return hb_gguf_writer_add_i8(w, k, v->v.i8, err);
	case HB_GGUF_U16: return hb_gguf_writer_add_u16(w, k, v->v.u16, err);
	case HB_GGUF_I16: return hb_gguf_writer_add_i16(w, k, v->v.i16, err);
	case HB_GGUF_U32: return hb_gguf_writer_add_u32(w, k, v->v.u32, err);
	case HB_GGUF_I32: return hb_gguf_writer_add_i32(w, k, v->v.i32, err);
	case HB_GGUF_F32: return hb_gguf_writer_add_f32(w, k, v->v.f32, err);
	case HB_GGUF_BOOL: return hb_gguf_writer_add_bool(w, k, v->v.b, err);
	case HB_GGUF_U64: return hb_gguf_writer_add_u64(w, k, v->v.u64, err);
	case HB_GGUF_I64: return hb_gguf_writer_add_i64(w, k, v->v.i64, err);
	case HB_GGUF_F64: return hb_gguf_writer_add_f64(w, k, v->v.f64, err);
	case HB_GGUF_STRING: return hb_gguf_writer_add_strn(w, k, v->str.ptr, (size_t)v->str.len, err);
	case HB_GGUF_ARRAY:
		if (v->elem_type == HB_GGUF_STRING) {
			const struct hb_gguf_str *s = v->elems;
			const char **p = calloc(v->count ? (size_t)v->count : 1, sizeof(*p));
			size_t *l = calloc(v->count ? (size_t)v->count : 1, sizeof(*l));
			int rc;

			if (!p || !l) {
				free(p);
				free(l);
				return HB_ERR_NOMEM;
			}
			for (uint64_t i = 0; i < v->count; i++)
				p[i] = s[i].ptr, l[i] = (size_t)s[i].len;
			rc = hb_gguf_writer_add_str_array(w, k, p, l, v->count, err);
			free(p);
			free(l);
			return rc;
		}
		return hb_gguf_writer_add_array(w, k, v->elem_type, v->elems, v->count, err);
	}
	HB_FUZZ_ASSERT(!"a value type the reader should have refused");
	return HB_ERR_INVALID;
}

static int by_offset(const void *a, const void *b)
{
	const struct hb_gguf_tensor *x = *(const struct hb_gguf_tensor *const *)a;
	const struct hb_gguf_tensor *y = *(const struct hb_gguf_tensor *const *)b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Write g (its tensor bytes read from fd) to a new memfd; -1 when the
 * harness runs out of memory or descriptors. */
static int rewrite(const struct hb_gguf *g, int fd)
{
	const struct hb_gguf_tensor **order = calloc(g->n_tensors ? (size_t)g->n_tensors : 1, sizeof(*order));
	struct hb_gguf_writer w;
	struct hb_error err;
	int out = -1, rc = HB_OK;

	hb_gguf_writer_init(&w);
	hb_error_clear(&err);
	if (!order)
		goto done;
	for (uint64_t i = 0; i < g->n_kv && !rc; i++)
		rc = add_kv(&w, &g->kv[i], &err);
	for (uint64_t i = 0; i < g->n_tensors; i++)
		order[i] = &g->tensors[i];
	qsort(order, (size_t)g->n_tensors, sizeof(*order), by_offset);
	for (uint64_t i = 0; i < g->n_tensors && !rc; i++)
		rc = hb_gguf_writer_add_tensor_ggml(&w, order[i]->name.ptr, order[i]->ggml_type, order[i]->n_dims,
						    order[i]->dims, order[i]->nbytes, 0, &err);
	if (rc == HB_ERR_NOMEM)
		goto done;
	/* everything the reader accepted, the writer takes */
	HB_FUZZ_ASSERT(rc == HB_OK);
	HB_FUZZ_ASSERT(hb_gguf_writer_layout(&w, &err) == HB_OK);
	if ((out = hb_fuzz_memfd("", 0, 0, 0)) < 0)
		goto done;
	HB_FUZZ_ASSERT(hb_gguf_writer_write_header_fd(&w, out, &err) == HB_OK);
	for (size_t i = 0; i < w.n_tensors; i++) {
		const struct hb_gguf_tensor *t = order[i];
		uint8_t *b = malloc(t->nbytes ? (size_t)t->nbytes : 1);

		if (!b) {
			close(out);
			out = -1;
			goto done;
		}
		HB_FUZZ_ASSERT(!strcmp(w.tensors[i].name.ptr, t->name.ptr) && w.tensors[i].nbytes == t->nbytes);
		HB_FUZZ_ASSERT(pread(fd, b, (size_t)t->nbytes, (off_t)t->offset) == (ssize_t)t->nbytes);
		HB_FUZZ_ASSERT(pwrite(out, b, (size_t)t->nbytes, (off_t)w.tensors[i].offset) == (ssize_t)t->nbytes);
		free(b);
	}
	HB_FUZZ_ASSERT(hb_gguf_writer_write_padding_fd(&w, out, &err) == HB_OK);
	HB_FUZZ_ASSERT(lseek(out, 0, SEEK_END) == (off_t)w.layout.file_size);
done:
	hb_gguf_writer_release(&w);
	free(order);
	return out;
}

static bool same_value(const struct hb_gguf_value *a, const struct hb_gguf_value *b)
{
	size_t sz;

	if (a->type != b->type)
		return false;
	if (a->type == HB_GGUF_STRING)
		return a->str.len == b->str.len && !memcmp(a->str.ptr, b->str.ptr, (size_t)a->str.len);
	if (a->type != HB_GGUF_ARRAY)
		return !memcmp(&a->v, &b->v, hb_gguf_type_size(a->type));
	if (a->elem_type != b->elem_type || a->count != b->count)
		return false;
	if (a->elem_type == HB_GGUF_STRING) {
		const struct hb_gguf_str *x = a->elems, *y = b->elems;

		for (uint64_t i = 0; i < a->count; i++)
			if (x[i].len != y[i].len || memcmp(x[i].ptr, y[i].ptr, (size_t)x[i].len))
				return false;
		return true;
	}
	sz = hb_gguf_type_size(a->elem_type);
	return !a->count || !memcmp(a->elems, b->elems, (size_t)a->count * sz);
}

static bool same_bytes(int fa, uint64_t oa, int fb, uint64_t ob, uint64_t n)
{
	uint8_t x[4096], y[4096];

	while (n) {
		size_t k = n < sizeof(x) ? (size_t)n : sizeof(x);

		if (pread(fa, x, k, (off_t)oa) != (ssize_t)k || pread(fb, y, k, (off_t)ob) != (ssize_t)k ||
		    memcmp(x, y, k))
			return false;
		oa += k, ob += k, n -= k;
	}
	return true;
}

static void same_gguf(const struct hb_gguf *a, int fa, const struct hb_gguf *b, int fb)
{
	HB_FUZZ_ASSERT(a->n_kv == b->n_kv && a->n_tensors == b->n_tensors);
	for (uint64_t i = 0; i < a->n_kv; i++) {
		HB_FUZZ_ASSERT(!strcmp(a->kv[i].key.ptr, b->kv[i].key.ptr));
		HB_FUZZ_ASSERT(same_value(&a->kv[i].value, &b->kv[i].value));
	}
	for (uint64_t i = 0; i < a->n_tensors; i++) {
		const struct hb_gguf_tensor *x = &a->tensors[i], *y = hb_gguf_find_tensor(b, x->name.ptr);

		HB_FUZZ_ASSERT(y && y->ggml_type == x->ggml_type && y->n_dims == x->n_dims && y->nbytes == x->nbytes);
		HB_FUZZ_ASSERT(!memcmp(x->dims, y->dims, x->n_dims * sizeof(x->dims[0])));
		HB_FUZZ_ASSERT(same_bytes(fa, x->offset, fb, y->offset, x->nbytes));
	}
}

int hb_fuzz_gguf_write(const uint8_t *data, size_t size)
{
	struct hb_gguf g, g2, g3;
	struct hb_error err;
	int fd, out, out2;
	off_t n1, n2;
	bool in_order = true;

	if (size > HB_FUZZ_MAX_INPUT || (fd = hb_fuzz_memfd(data, size, 0, size)) < 0)
		return HB_FUZZ_REFUSED;
	hb_error_clear(&err);
	if (hb_gguf_read_fd(&g, fd, NULL, &err) != HB_OK) {
		close(fd);
		return HB_FUZZ_REFUSED;
	}
	if ((out = rewrite(&g, fd)) < 0)
		goto skip;
	hb_error_clear(&err);
	HB_FUZZ_ASSERT(hb_gguf_read_fd(&g2, out, NULL, &err) == HB_OK);
	same_gguf(&g, fd, &g2, out);
	/* the re-read file, rewritten: the same bytes */
	if ((out2 = rewrite(&g2, out)) >= 0) {
		n1 = lseek(out, 0, SEEK_END);
		n2 = lseek(out2, 0, SEEK_END);
		HB_FUZZ_ASSERT(n1 == n2 && same_bytes(out, 0, out2, 0, (uint64_t)n1));
		HB_FUZZ_ASSERT(hb_gguf_read_fd(&g3, out2, NULL, &err) == HB_OK);
		hb_gguf_release(&g3);
		close(out2);
	}
	/* already in the writer's layout: byte for byte */
	for (uint64_t i = 0; i < g.n_tensors; i++)
		in_order &= g.tensors[i].offset == g2.tensors[i].offset && g.tensors[i].info_offset == g2.tensors[i].info_offset;
	if (in_order && g.layout.data_start == g2.layout.data_start && g.layout.file_size == g2.layout.file_size) {
		HB_FUZZ_ASSERT(same_bytes(fd, 0, out, 0, g.layout.data_start));
		for (uint64_t i = 0; i < g.n_tensors; i++)
			HB_FUZZ_ASSERT(same_bytes(fd, g.tensors[i].offset, out, g.tensors[i].offset, g.tensors[i].nbytes));
	}
	hb_gguf_release(&g2);
	close(out);
skip:
	hb_gguf_release(&g);
	close(fd);
	return HB_FUZZ_ACCEPTED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_gguf_write(data, size);
	return 0;
}
#endif
