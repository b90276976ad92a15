/*
 * fuzz_safetensors.c: fuzz target of the safetensors reader (hb_st_open).
 *
 * The input is a whole .safetensors file.  hb_st_open takes a path, so the
 * bytes go into a memfd opened through /proc/self/fd/N (a regular file, no
 * disk writes, nothing left behind).  An accepted file must satisfy what
 * hb_safetensors.h promises: the tensors tile the data section in offset
 * order, each one's size is prod(shape) x element size, every name is
 * found by hb_st_find, bounded reads inside a tensor succeed and reads
 * leaving it are refused before any I/O.  This file owns only the harness;
 * the reader is libstore/checkpoint/hb_safetensors.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "checkpoint/hb_safetensors.h"

#include <unistd.h>

static void exercise(const struct hb_st_file *f, size_t size)
{
	uint8_t buf[64];
	struct hb_error err;
	uint64_t covered = 0;

	HB_FUZZ_ASSERT(f->file_size == size);
	HB_FUZZ_ASSERT(f->data_start == 8 + f->header_len && f->data_start <= size);
	for (size_t i = 0; i < f->ntensors; i++) {
		const struct hb_st_tensor *t = &f->tensors[i];
		uint64_t elem = 1;
		size_t len;

		HB_FUZZ_ASSERT(t->name && strlen(t->name) == t->name_len);
		HB_FUZZ_ASSERT(t->name_len >= 1 && t->name_len <= HB_ST_NAME_MAX);
		HB_FUZZ_ASSERT(hb_st_find(f, t->name) == t);
		HB_FUZZ_ASSERT(t->ndim <= HB_ST_MAX_DIMS);
		for (unsigned d = 0; d < t->ndim; d++) {
			HB_FUZZ_ASSERT(t->shape[d] == 0 || elem <= UINT64_MAX / t->shape[d]);
			elem *= t->shape[d];
		}
		HB_FUZZ_ASSERT(elem == t->nelem);
		HB_FUZZ_ASSERT(t->begin <= t->end && t->nbytes == t->end - t->begin);
		HB_FUZZ_ASSERT(t->file_offset == f->data_start + t->begin);
		HB_FUZZ_ASSERT(t->file_offset <= size && t->nbytes <= size - t->file_offset);
		covered += t->nbytes;
		hb_error_clear(&err);
		len = t->nbytes < sizeof(buf) ? (size_t)t->nbytes : sizeof(buf);
		HB_FUZZ_ASSERT(hb_st_read(f, t, 0, buf, len, &err) == HB_OK);
		HB_FUZZ_ASSERT(hb_st_read(f, t, t->nbytes - len, buf, len, &err) == HB_OK);
		HB_FUZZ_ASSERT(hb_st_read(f, t, t->nbytes, buf, 1, &err) != HB_OK &&
			       hb_fuzz_same_id(err.id, "st-read-range"));
		HB_FUZZ_ASSERT(hb_st_read(f, t, UINT64_MAX, buf, 2, &err) != HB_OK);
	}
	/* sorted offsets tile the data section exactly, so sizes add up */
	HB_FUZZ_ASSERT(covered == size - f->data_start);
	for (size_t i = 1; i < f->ntensors; i++)
		HB_FUZZ_ASSERT(strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) < 0);
	HB_FUZZ_ASSERT(hb_st_find(f, "") == NULL);
	if (f->metadata) {
		const cJSON *kv;

		cJSON_ArrayForEach(kv, f->metadata) {
			HB_FUZZ_ASSERT(cJSON_IsString(kv) && kv->string);
			HB_FUZZ_ASSERT(hb_st_metadata_get(f, kv->string) != NULL);
		}
	}
	hb_error_clear(&err);
	HB_FUZZ_ASSERT(hb_st_check_unchanged(f, &err) == HB_OK);
}

int hb_fuzz_safetensors(const uint8_t *data, size_t size)
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
	if (rc == HB_OK) {
		exercise(&f, size);
		hb_st_close(&f);
	} else {
		HB_FUZZ_ASSERT(rc < 0 && err.code == rc && f.fd == -1);
		HB_FUZZ_ASSERT(err.id != NULL || rc == HB_ERR_NOMEM || rc == HB_ERR_IO);
		hb_st_close(&f); /* harmless after a failed open */
	}
	close(fd);
	return rc == HB_OK ? HB_FUZZ_ACCEPTED : HB_FUZZ_REFUSED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_safetensors(data, size);
	return 0;
}
#endif
