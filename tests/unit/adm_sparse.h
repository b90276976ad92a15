/*
 * adm_sparse.h: a sparse artifact of the released qwen4exp-flash-next
 * geometry, for admission tests and the admission benchmark.
 *
 * The file has the real profile's full apparent size (~350 GB) but only a
 * few tens of MB of real blocks: the GGUF header (with an honest
 * 248,077-id tokenizer.json), the ExpertMajor header and 48 descriptors
 * (hb_em_serialise), the PLE manifest, directory and digest table (all-zero
 * page digests; the manifest digest computed over what is written).  Every
 * dense tensor, the expert payload and every PLE page are holes.  Its
 * metadata is written here from a config.json text through the config
 * reader and the PLE hash module, never through converter internals.
 *
 * Where each value comes from is said next to it in adm_sparse.c.
 */
#ifndef ADM_SPARSE_H
#define ADM_SPARSE_H

#include "hb_base.h"
#include "hb_err.h"

struct adm_sparse_info {
	uint64_t file_size;     /* apparent bytes */
	uint64_t tensors;       /* GGUF tensors (dense + 2 stores) */
	uint64_t ple_pages;
	uint64_t header_bytes;  /* the GGUF header region */
};

/* Build the artifact at path (created or replaced). */
int adm_sparse_build(const char *path, struct adm_sparse_info *info, struct hb_error *err);

/* A tokenizer.json whose ids run 0..n-1 (model.vocab, then 33 added
 * special tokens at the top); heap, *len bytes, free() it. */
int adm_sparse_tokenizer(uint64_t n, char **out, size_t *len, struct hb_error *err);

#endif
