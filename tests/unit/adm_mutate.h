/*
 * adm_mutate.h: test support for the admission mutation battery.
 *
 * Re-emits an artifact from a parsed one with a few edits applied: a
 * metadata value replaced (any type, also another type than before), added,
 * removed or duplicated; a tensor renamed, retyped, reshaped, moved,
 * removed, duplicated, added or placed last; bytes patched inside a store
 * (optionally resealing the store's manifest digest, so that the parser
 * sees the patched field and not the digest); raw bytes patched in the
 * written file, bytes appended, the file truncated.  The GGUF writer lays
 * the result out and writes its header; every tensor that survives is
 * copied byte for byte from the original (holes stay holes, so a sparse
 * artifact stays sparse).
 *
 * It owns no production code path: it lives in tests/ and is linked into
 * the admission tests and the admission benchmark only.  It never decides
 * what admission should say; the tests do.
 */
#ifndef ADM_MUTATE_H
#define ADM_MUTATE_H

#include "hb_base.h"
#include "hb_err.h"
#include "gguf/hb_gguf.h"

/* A parsed artifact to mutate. */
struct adm_src {
	int fd;
	struct hb_gguf g;
	/* Copy only the stores' manifests (ExpertMajor header + descriptors,
	 * PLE manifest + directory + digest table); dense tensors and store
	 * payloads are left as holes.  Admission never reads those bytes
	 * (hb_admit.h), and a battery of thousands of re-emissions stays
	 * cheap; a test shows once that such a re-emission is admitted. */
	bool meta_only;
};

int adm_src_open(struct adm_src *s, const char *path, struct hb_error *err);
void adm_src_close(struct adm_src *s);

enum adm_edit_kind {
	ADM_KV_SET = 1,    /* key: value replaced in place by val */
	ADM_KV_ADD,        /* key: val appended after the last key */
	ADM_KV_REMOVE,     /* key */
	ADM_KV_DUPLICATE,  /* key: a second record with the same key */
	ADM_KV_RETYPE,     /* key: raw type word of the record set to u32v */
	ADM_T_RENAME,      /* tensor -> name */
	ADM_T_RETYPE,      /* tensor -> ggml_type (writer-known types only) */
	ADM_T_RAWTYPE,     /* tensor: raw type word set to u32v (any value) */
	ADM_T_RAWNDIMS,    /* tensor: raw n_dims word set to u32v */
	ADM_T_RESHAPE,     /* tensor -> n_dims, dims[] (GGML order) */
	ADM_T_OFFSET,      /* tensor: relative offset moved by delta bytes */
	ADM_T_REMOVE,      /* tensor */
	ADM_T_DUPLICATE,   /* tensor: a second info record with its name */
	ADM_T_ADD,         /* name, ggml_type, n_dims, dims: zero bytes, last */
	ADM_T_LAST,        /* tensor placed after every other tensor */
	ADM_STORE_PATCH,   /* tensor (a store): len bytes at store offset off */
	ADM_FILE_PATCH,    /* len bytes at absolute offset off of the output */
	ADM_FILE_APPEND,   /* len bytes appended to the output */
	ADM_FILE_TRUNCATE, /* the output cut to off bytes */
};

/* Where ADM_FILE_PATCH's offset is taken from (plus off). */
enum adm_anchor {
	ADM_AT_ZERO = 0,        /* the file's first byte */
	ADM_AT_KV_VALUE,        /* the value of key (after its type word) */
	ADM_AT_TENSOR_INFO_END, /* the end of the tensor-info block */
};

struct adm_edit {
	enum adm_edit_kind kind;
	const char *key;              /* kv edits; ADM_AT_KV_VALUE anchor */
	struct hb_gguf_value val;     /* SET/ADD: owned by the caller */
	const char *tensor;           /* tensor edits */
	const char *name;             /* RENAME, ADD */
	uint32_t ggml_type;           /* RETYPE, ADD */
	uint32_t u32v;                /* raw words */
	uint32_t n_dims;              /* RESHAPE, ADD */
	uint64_t dims[HB_GGUF_MAX_DIMS];
	int64_t delta;                /* OFFSET */
	bool carry;                   /* OFFSET: the bytes move too (file grows) */
	enum adm_anchor anchor;       /* FILE_PATCH */
	uint64_t off;                 /* STORE_PATCH, FILE_PATCH, TRUNCATE */
	uint8_t bytes[64];            /* STORE_PATCH, FILE_PATCH, APPEND */
	size_t len;
	bool reseal;                  /* STORE_PATCH: recompute the manifest digest */
};

#define ADM_MAX_EDITS 4

/*
 * Write s with edits[0..n) applied to out_path (created or replaced).
 * Returns 0, or a negative hb_err with err saying which edit could not be
 * applied (an edit naming a key or tensor that does not exist, a writer
 * refusal, an I/O failure): a test treats that as its own defect, never as
 * a rejection by admission.
 */
int adm_emit(const struct adm_src *s, const struct adm_edit *edits, size_t n,
	     const char *out_path, struct hb_error *err);

/* The same into an open read-write fd (truncated first), e.g. a memfd
 * admitted through /proc/self/fd/N: no disk traffic per mutation. */
int adm_emit_fd(const struct adm_src *s, const struct adm_edit *edits, size_t n, int fd,
		struct hb_error *err);

/* Value constructors for ADM_KV_SET / ADM_KV_ADD.  Strings and arrays
 * point into caller storage (no copy is made before adm_emit). */
struct hb_gguf_value adm_v_u32(uint32_t v);
struct hb_gguf_value adm_v_i32(int32_t v);
struct hb_gguf_value adm_v_u64(uint64_t v);
struct hb_gguf_value adm_v_f32(float v);
struct hb_gguf_value adm_v_f64(double v);
struct hb_gguf_value adm_v_bool(bool v);
struct hb_gguf_value adm_v_str(const char *s);
struct hb_gguf_value adm_v_strn(const char *s, size_t len);
struct hb_gguf_value adm_v_array(uint32_t elem_type, void *elems, uint64_t count);

/*
 * A deep copy of a value (arrays and strings duplicated) that the caller
 * may edit and must free with hb_gguf_value_release.  Returns 0 or
 * HB_ERR_NOMEM.
 */
int adm_value_copy(struct hb_gguf_value *dst, const struct hb_gguf_value *src);

/*
 * Recompute and store the manifest digest of the store at store_offset of
 * fd (ExpertMajor: header with 168..199 zeroed and descriptors; PLE:
 * [0, payload offset) with 208..239 zeroed).  meta_end is the
 * store-relative end of what the digest covers, taken by the caller from
 * the unpatched header.
 */
int adm_store_reseal(int fd, uint64_t store_offset, bool ple, uint64_t meta_end,
		     struct hb_error *err);

/* Copy [off, off+len) of in to out_off of out, skipping holes. */
int adm_copy_sparse(int in, uint64_t off, uint64_t len, int out, uint64_t out_off,
		    struct hb_error *err);

#endif
