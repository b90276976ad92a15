/*
 * hb_st_write.h: writing one safetensors file (the format hb_safetensors.h
 * reads), for the feature shards and predictor checkpoints that numpy and
 * PyTorch users load with the stock `safetensors` package.
 *
 * The writer owns the header layout only: tensors in the order given, data
 * offsets tiling the data section, the JSON header padded with spaces to a
 * multiple of 8 bytes (so every tensor starts 8-aligned), an optional
 * `__metadata__` map of strings to strings.  The file is published
 * atomically (hb_publish.h), so a reader never sees half of it.  It does not
 * own what the tensors mean.
 */
#ifndef HB_ST_WRITE_H
#define HB_ST_WRITE_H

#include "hb_base.h"
#include "hb_dtype.h"
#include "hb_err.h"

struct hb_st_out {
	const char *name;
	enum hb_dtype dtype;
	unsigned ndim;
	uint64_t shape[8];
	const void *data;              /* prod(shape) elements, little-endian */
};

struct hb_st_meta {
	const char *key, *value;
};

/*
 * Write the tensors and metadata to path, replacing it when `replace`.
 * *sha (may be NULL) receives the SHA-256 of the file's bytes, *bytes (may
 * be NULL) its size.  Names must be unique and non-empty (HB_ERR_INVALID).
 */
int hb_st_write_file(const char *path, const struct hb_st_out *t, size_t n, const struct hb_st_meta *meta,
		     size_t n_meta, bool replace, uint8_t sha[32], uint64_t *bytes, struct hb_error *err);

#endif
