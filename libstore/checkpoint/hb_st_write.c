/*
 * hb_st_write.c: one safetensors file, built in memory and published
 * atomically.  Feature shards and predictor checkpoints are small (a shard
 * is bounded by its writer), so one buffer is simpler than streaming and
 * lets the digest be taken of exactly the bytes published.
 */
#include "hb_st_write.h"
#include "hb_checked.h"
#include "hb_publish.h"
#include "hb_sha256.h"

#include <cJSON.h>

int hb_st_write_file(const char *path, const struct hb_st_out *t, size_t n, const struct hb_st_meta *meta,
		     size_t n_meta, bool replace, uint8_t sha[32], uint64_t *bytes, struct hb_error *err)
{
	cJSON *root = cJSON_CreateObject(), *m;
	uint64_t off = 0, *sizes = calloc(n ? n : 1, sizeof(uint64_t));
	char *json = NULL;
	uint8_t *buf = NULL;
	size_t jlen, hlen, total;
	int rc = HB_OK;

	if (!root || !sizes) {
		rc = hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
		goto out;
	}
	if (n_meta) {
		m = cJSON_AddObjectToObject(root, "__metadata__");
		for (size_t i = 0; m && i < n_meta; i++)
			if (!cJSON_AddStringToObject(m, meta[i].key, meta[i].value))
				m = NULL;
		if (!m) {
			rc = hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
			goto out;
		}
	}
	for (size_t i = 0; i < n; i++) {
		cJSON *e, *shape, *offs;
		uint64_t elems = 1;
		if (!t[i].name[0] || cJSON_GetObjectItemCaseSensitive(root, t[i].name) || t[i].ndim > 8) {
			rc = hb_error_set(err, HB_ERR_INVALID, path, "tensor '%s': empty, repeated or over 8 dimensions",
					  t[i].name);
			goto out;
		}
		for (unsigned d = 0; d < t[i].ndim; d++)
			if (hb_mul_u64(elems, t[i].shape[d], &elems)) {
				rc = hb_error_set(err, HB_ERR_OVERFLOW, path, "tensor '%s' is too large", t[i].name);
				goto out;
			}
		sizes[i] = elems * hb_dtype_size(t[i].dtype);
		e = cJSON_AddObjectToObject(root, t[i].name);
		shape = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
		offs = e ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
		if (!offs || !cJSON_AddStringToObject(e, "dtype", hb_dtype_name(t[i].dtype))) {
			rc = hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
			goto out;
		}
		for (unsigned d = 0; d < t[i].ndim; d++)
			cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t[i].shape[d]));
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + sizes[i])));
		off += sizes[i];
	}
	json = cJSON_PrintUnformatted(root);
	if (!json) {
		rc = hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
		goto out;
	}
	jlen = strlen(json);
	hlen = (jlen + 7) / 8 * 8;
	total = 8 + hlen + (size_t)off;
	buf = malloc(total);
	if (!buf) {
		rc = hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
		goto out;
	}
	for (int b = 0; b < 8; b++)
		buf[b] = (uint8_t)((uint64_t)hlen >> (8 * b));
	memcpy(buf + 8, json, jlen);
	memset(buf + 8 + jlen, ' ', hlen - jlen);
	off = 8 + hlen;
	for (size_t i = 0; i < n; i++) {
		if (sizes[i])
			memcpy(buf + off, t[i].data, (size_t)sizes[i]);
		off += sizes[i];
	}
	rc = hb_publish_buf(path, buf, total, replace ? HB_PUBLISH_REPLACE : 0, err);
	if (!rc && sha)
		hb_sha256_buf(buf, total, sha);
	if (!rc && bytes)
		*bytes = total;
out:
	cJSON_Delete(root);
	free(json);
	free(buf);
	free(sizes);
	return rc;
}
