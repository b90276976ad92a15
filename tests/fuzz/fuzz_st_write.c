/*
 * fuzz_st_write.c: round-trip target of the safetensors writer
 * (hb_st_write_file, libstore/checkpoint/hb_st_write.c) through the reader.
 *
 * The input is a whole .safetensors file.  One the reader (hb_st_open)
 * accepts is written again by the writer, tensors in data order with their
 * bytes and the __metadata__ map, then read back: the same tensors (name,
 * dtype, shape, bytes) and the same metadata must come out, the writer's
 * reported size and SHA-256 must be the file's, and writing the re-read
 * file gives the same bytes again (the writer is a function of what it is
 * given).  What the writer refuses of an accepted file (a name it cannot
 * write) must be refused with HB_ERR_INVALID, never written half.  This
 * file owns only the harness.
 */
#include "hb_base.h"
#include "fuzz_dir.h"
#include "hb_sha256.h"
#include "checkpoint/hb_safetensors.h"
#include "checkpoint/hb_st_write.h"

#define MAX_META 256

struct copy {
	struct hb_st_out *t;
	uint8_t **data;
	size_t n;
	struct hb_st_meta meta[MAX_META];
	size_t n_meta;
};

static int by_begin(const void *a, const void *b)
{
	const struct hb_st_tensor *x = *(const struct hb_st_tensor *const *)a;
	const struct hb_st_tensor *y = *(const struct hb_st_tensor *const *)b;

	return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : strcmp(x->name, y->name);
}

static void copy_free(struct copy *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->data[i]);
	free(c->data);
	free(c->t);
	memset(c, 0, sizeof(*c));
}

/* What the writer needs of f (pointers into f for names and metadata). */
static bool copy_of(const struct hb_st_file *f, struct copy *c)
{
	const struct hb_st_tensor **order = calloc(f->ntensors ? f->ntensors : 1, sizeof(*order));
	struct hb_error err;
	const cJSON *kv;

	memset(c, 0, sizeof(*c));
	c->t = calloc(f->ntensors ? f->ntensors : 1, sizeof(*c->t));
	c->data = calloc(f->ntensors ? f->ntensors : 1, sizeof(*c->data));
	if (!order || !c->t || !c->data)
		goto fail;
	for (size_t i = 0; i < f->ntensors; i++)
		order[i] = &f->tensors[i];
	qsort(order, f->ntensors, sizeof(*order), by_begin);
	for (size_t i = 0; i < f->ntensors; i++) {
		const struct hb_st_tensor *t = order[i];

		if (!(c->data[i] = malloc(t->nbytes ? (size_t)t->nbytes : 1)))
			goto fail;
		c->n = i + 1;
		hb_error_clear(&err);
		HB_FUZZ_ASSERT(!t->nbytes || hb_st_read(f, t, 0, c->data[i], (size_t)t->nbytes, &err) == HB_OK);
		c->t[i].name = t->name;
		c->t[i].dtype = t->dtype;
		c->t[i].ndim = t->ndim;
		memcpy(c->t[i].shape, t->shape, sizeof(c->t[i].shape));
		c->t[i].data = c->data[i];
	}
	if (f->metadata)
		cJSON_ArrayForEach(kv, f->metadata) {
			if (c->n_meta == MAX_META)
				goto fail;
			c->meta[c->n_meta++] = (struct hb_st_meta){kv->string, kv->valuestring};
		}
	free(order);
	return true;
fail:
	free(order);
	copy_free(c);
	return false;
}

static void same_file(const struct hb_st_file *a, const struct hb_st_file *b, const struct copy *c)
{
	HB_FUZZ_ASSERT(a->ntensors == b->ntensors);
	for (size_t i = 0; i < c->n; i++) {
		const struct hb_st_tensor *t = hb_st_find(b, c->t[i].name);
		uint8_t *x;
		struct hb_error err;

		HB_FUZZ_ASSERT(t && t->dtype == c->t[i].dtype && t->ndim == c->t[i].ndim);
		HB_FUZZ_ASSERT(!memcmp(t->shape, c->t[i].shape, t->ndim * sizeof(t->shape[0])));
		HB_FUZZ_ASSERT(t->nbytes == hb_st_find(a, c->t[i].name)->nbytes);
		if (!(x = malloc(t->nbytes ? (size_t)t->nbytes : 1)))
			continue;
		hb_error_clear(&err);
		HB_FUZZ_ASSERT(!t->nbytes || hb_st_read(b, t, 0, x, (size_t)t->nbytes, &err) == HB_OK);
		HB_FUZZ_ASSERT(!memcmp(x, c->data[i], (size_t)t->nbytes));
		free(x);
	}
	HB_FUZZ_ASSERT((a->metadata == NULL || cJSON_GetArraySize(a->metadata) == 0) ==
		       (b->metadata == NULL || cJSON_GetArraySize(b->metadata) == 0));
	for (size_t i = 0; i < c->n_meta; i++) {
		const char *v = hb_st_metadata_get(b, c->meta[i].key);

		HB_FUZZ_ASSERT(v && !strcmp(v, c->meta[i].value));
	}
	if (b->metadata)
		HB_FUZZ_ASSERT((size_t)cJSON_GetArraySize(b->metadata) == c->n_meta);
}

static void round_trip(const struct hb_st_file *f)
{
	const char *dir = hb_fuzz_scratch();
	char p1[4200], p2[4200];
	struct hb_st_file g;
	struct copy c, c2;
	struct hb_error err;
	uint8_t sha[32], sha2[32], got[32], *b1, *b2;
	uint64_t bytes = 0, bytes2 = 0;
	size_t l1, l2;
	int rc;

	if (!dir || !copy_of(f, &c))
		return;
	snprintf(p1, sizeof(p1), "%s/a.safetensors", dir);
	snprintf(p2, sizeof(p2), "%s/b.safetensors", dir);
	hb_error_clear(&err);
	rc = hb_st_write_file(p1, c.t, c.n, c.meta, c.n_meta, true, sha, &bytes, &err);
	if (rc == HB_ERR_NOMEM || rc == HB_ERR_IO) {
		copy_free(&c);
		return;
	}
	HB_FUZZ_ASSERT(rc == HB_OK);
	HB_FUZZ_ASSERT(!hb_fuzz_get(dir, "a.safetensors", 64u << 20, &b1, &l1));
	hb_sha256_buf(b1, l1, got);
	HB_FUZZ_ASSERT(l1 == bytes && !memcmp(got, sha, 32));
	hb_error_clear(&err);
	HB_FUZZ_ASSERT(hb_st_open(&g, p1, &err) == HB_OK);
	same_file(f, &g, &c);
	/* the re-read file, written again: the same bytes */
	HB_FUZZ_ASSERT(copy_of(&g, &c2));
	HB_FUZZ_ASSERT(hb_st_write_file(p2, c2.t, c2.n, c2.meta, c2.n_meta, true, sha2, &bytes2, &err) == HB_OK);
	HB_FUZZ_ASSERT(!hb_fuzz_get(dir, "b.safetensors", 64u << 20, &b2, &l2));
	HB_FUZZ_ASSERT(l1 == l2 && !memcmp(b1, b2, l1) && !memcmp(sha, sha2, 32));
	free(b1);
	free(b2);
	copy_free(&c2);
	hb_st_close(&g);
	copy_free(&c);
}

int hb_fuzz_st_write(const uint8_t *data, size_t size)
{
	struct hb_st_file f;
	struct hb_error err;
	char path[64];
	int fd, rc;

	if (size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	fd = hb_fuzz_memfd(data, size, 0, size);
	if (fd < 0)
		return HB_FUZZ_REFUSED;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	hb_error_clear(&err);
	rc = hb_st_open(&f, path, &err);
	close(fd);
	if (rc != HB_OK) {
		hb_st_close(&f);
		return HB_FUZZ_REFUSED;
	}
	round_trip(&f);
	hb_st_close(&f);
	return HB_FUZZ_ACCEPTED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_st_write(data, size);
	return 0;
}
#endif
