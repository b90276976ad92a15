/*
 * hb_safetensors.h: reading safetensors files and checkpoint directories.
 *
 * This module owns the validation of .safetensors files (one file: header
 * length, JSON header, tensor table, data layout) and of checkpoint
 * directories (the shard set and model.safetensors.index.json), bounded reads
 * of tensor bytes, and the detection of a source that changed after it was
 * opened.  It does not own what the tensors mean (the model contract), the
 * config.json of a checkpoint, nor any conversion of element values.
 *
 * Validation follows the reference implementation (the Rust `safetensors`
 * crate): an 8-byte little-endian header length no larger than 100,000,000;
 * a UTF-8 JSON object starting with '{'; an optional `__metadata__` map of
 * strings to strings; per tensor `dtype`, `shape` and `data_offsets`
 * [begin, end] with prod(shape) * size == end - begin; data offsets, sorted,
 * tile the data section from 0 to its last byte.  Where refusing is the safer
 * choice this reader is stricter, and each such rule is marked STRICTER in
 * hb_safetensors.c.
 *
 * Every refusal carries a stable diagnostic id from the table below in
 * err->id, a field path naming the file and the tensor
 * ("model-00001.safetensors:tensors[w].data_offsets") and, where one applies,
 * the byte offset in the file.
 */
#ifndef HB_SAFETENSORS_H
#define HB_SAFETENSORS_H

#include "hb_base.h"
#include "hb_dtype.h"
#include "hb_err.h"

#include <cJSON.h>

/*
 * The diagnostic ids, defined once.  X(symbol, id, meaning).
 * STABILITY: ids are matched by tests, scripts and the corrupt corpus
 * (tests/fixtures/corrupt/safetensors/expected.tsv); never rename one.
 */
#define HB_ST_DIAG_LIST(X)                                                              \
	X(FILE_SHORT, "st-file-short", "file is shorter than the 8-byte header length")      \
	X(HEADER_SIZE_LIMIT, "st-header-size-limit", "header length exceeds 100,000,000 bytes") \
	X(HEADER_TRUNCATED, "st-header-truncated", "header length runs past the end of the file") \
	X(HEADER_NUL, "st-header-nul", "header contains a NUL byte or a \\u0000 escape")      \
	X(HEADER_UTF8, "st-header-utf8", "header is not valid UTF-8 (or has a lone surrogate escape)") \
	X(HEADER_NOT_OBJECT, "st-header-not-object", "header does not start with a JSON object") \
	X(HEADER_JSON, "st-header-json", "header is not well-formed JSON")                   \
	X(HEADER_TRAILING, "st-header-trailing", "bytes other than spaces follow the JSON object") \
	X(NUMBER_NOT_INTEGER, "st-number-not-integer", "a number has a fraction, an exponent or is -0") \
	X(NUMBER_RANGE, "st-number-range", "an integer is larger than 2^53 - 1 and cannot be read exactly") \
	X(METADATA_INVALID, "st-metadata-invalid", "__metadata__ is not a map of unique strings to strings") \
	X(TENSOR_NAME_INVALID, "st-tensor-name-invalid", "a tensor name is empty or longer than the limit") \
	X(DUPLICATE_TENSOR, "st-duplicate-tensor", "a tensor name appears twice in the header") \
	X(ENTRY_NOT_OBJECT, "st-entry-not-object", "a tensor entry is not a JSON object")      \
	X(ENTRY_MISSING_FIELD, "st-entry-missing-field", "a tensor entry lacks dtype, shape or data_offsets") \
	X(ENTRY_UNKNOWN_FIELD, "st-entry-unknown-field", "a tensor entry has a field other than dtype, shape, data_offsets") \
	X(ENTRY_DUPLICATE_FIELD, "st-entry-duplicate-field", "a tensor entry names a field twice") \
	X(DTYPE_UNKNOWN, "st-dtype-unknown", "dtype is not a string naming a known element type") \
	X(SHAPE_INVALID, "st-shape-invalid", "shape is not an array of at most 8 non-negative integers") \
	X(SHAPE_OVERFLOW, "st-shape-overflow", "prod(shape) * element size overflows 64 bits") \
	X(OFFSETS_INVALID, "st-offsets-invalid", "data_offsets is not an array of two non-negative integers") \
	X(OFFSETS_REVERSED, "st-offsets-reversed", "data_offsets begin is greater than end")   \
	X(OFFSETS_MISMATCH, "st-offsets-mismatch", "end - begin differs from prod(shape) * element size") \
	X(OFFSETS_GAP, "st-offsets-gap", "sorted data offsets leave bytes between tensors (or before the first)") \
	X(OFFSETS_OVERLAP, "st-offsets-overlap", "sorted data offsets make two tensors share bytes") \
	X(BUFFER_TRAILING, "st-buffer-trailing", "the data section is longer than the last tensor end") \
	X(BUFFER_SHORT, "st-buffer-short", "the data section is shorter than the last tensor end") \
	X(READ_RANGE, "st-read-range", "a read request falls outside the tensor")              \
	X(SOURCE_CHANGED, "st-source-changed", "the file changed (size, mtime or inode) since it was opened") \
	X(CK_DIR_INVALID, "ck-dir-invalid", "the checkpoint directory cannot be listed")       \
	X(CK_NO_SHARDS, "ck-no-shards", "the directory holds no .safetensors file")            \
	X(CK_INDEX_INVALID, "ck-index-invalid", "model.safetensors.index.json is malformed")    \
	X(CK_INDEX_MISSING_SHARD, "ck-index-missing-shard", "the index names a shard file that does not exist") \
	X(CK_INDEX_MISSING_TENSOR, "ck-index-missing-tensor", "the index maps a tensor that no shard holds") \
	X(CK_INDEX_UNMAPPED_TENSOR, "ck-index-unmapped-tensor", "a shard holds a tensor the index does not map") \
	X(CK_INDEX_WRONG_SHARD, "ck-index-wrong-shard", "the index maps a tensor to a shard that does not hold it") \
	X(CK_INDEX_TOTAL_SIZE, "ck-index-total-size", "metadata.total_size differs from the sum of tensor bytes") \
	X(CK_STRAY_SHARD, "ck-stray-shard", "a .safetensors file on disk is not named by the index") \
	X(CK_DUPLICATE_TENSOR, "ck-duplicate-tensor", "a tensor name appears in two shards")    \
	X(CK_TOO_MANY_SHARDS, "ck-too-many-shards", "more shard files than the reader accepts")

enum hb_st_diag {
#define HB_ST_DIAG_ENUM_(sym, id, meaning) HB_ST_DIAG_##sym,
	HB_ST_DIAG_LIST(HB_ST_DIAG_ENUM_)
#undef HB_ST_DIAG_ENUM_
	HB_ST_DIAG_COUNT
};

struct hb_st_diag_info {
	const char *id;
	const char *meaning;
};
/* The table, indexed by enum hb_st_diag (HB_ST_DIAG_COUNT entries). */
extern const struct hb_st_diag_info hb_st_diag_table[HB_ST_DIAG_COUNT];
/* The static id string of a diagnostic (what err->id points to). */
#define HB_ST_ID(sym) (hb_st_diag_table[HB_ST_DIAG_##sym].id)
/* The table entry whose id is id, or NULL. */
const struct hb_st_diag_info *hb_st_diag_lookup(const char *id);

#define HB_ST_HEADER_MAX 100000000u /* the reference implementation's limit */
#define HB_ST_MAX_DIMS 8            /* STRICTER: the reference has no limit */
#define HB_ST_NAME_MAX 512          /* STRICTER: bytes of a tensor name */

struct hb_st_tensor {
	char *name;           /* NUL-terminated, owned by the file */
	size_t name_len;
	enum hb_dtype dtype;
	unsigned ndim;
	uint64_t shape[HB_ST_MAX_DIMS];
	uint64_t nelem;       /* prod(shape); 1 for ndim 0 */
	uint64_t begin, end;  /* data_offsets, relative to the data section */
	uint64_t file_offset; /* absolute: data_start + begin */
	uint64_t nbytes;      /* end - begin */
};

/* What identifies a file's contents cheaply: compared before publication. */
struct hb_st_identity {
	uint64_t dev, ino, size;
	int64_t mtime_sec, mtime_nsec;
};

struct hb_st_file {
	char *path;
	const char *base;              /* the last component of path */
	int fd;
	uint64_t file_size;
	uint64_t header_len;           /* the JSON bytes, padding included */
	uint64_t data_start;           /* 8 + header_len */
	size_t ntensors;
	struct hb_st_tensor *tensors;  /* in header order */
	struct hb_st_tensor **by_name; /* sorted by strcmp of the name */
	cJSON *metadata;               /* the __metadata__ object, or NULL */
	struct hb_st_identity identity;
};

/*
 * Open and validate path.  On success *f owns an open descriptor and must be
 * released with hb_st_close; on failure *f is left closed (hb_st_close on it
 * is harmless).
 */
int hb_st_open(struct hb_st_file *f, const char *path, struct hb_error *err);
void hb_st_close(struct hb_st_file *f);
/* Binary search by exact name; NULL when absent. */
const struct hb_st_tensor *hb_st_find(const struct hb_st_file *f, const char *name);
/* A __metadata__ value, or NULL when the key (or the map) is absent. */
const char *hb_st_metadata_get(const struct hb_st_file *f, const char *key);
/*
 * Read len bytes of tensor t starting offset bytes into it.  A request not
 * inside [0, t->nbytes) is refused with HB_ERR_INVALID ("st-read-range")
 * before any I/O, so a read never leaves the tensor.
 */
int hb_st_read(const struct hb_st_file *f, const struct hb_st_tensor *t,
	       uint64_t offset, void *buf, size_t len, struct hb_error *err);
/*
 * fstat the open descriptor and stat the path again: HB_ERR_CHANGED
 * ("st-source-changed") when the size, mtime or inode differ from those
 * captured at open, or the path now names another file.
 */
int hb_st_check_unchanged(const struct hb_st_file *f, struct hb_error *err);

/* ---------------------------------------------------------- checkpoints */

#define HB_ST_INDEX_NAME "model.safetensors.index.json"
#define HB_ST_INDEX_MAX (64u << 20) /* bytes of an index file we will read */
#define HB_ST_SHARDS_MAX 100000u

struct hb_st_ref {
	const struct hb_st_file *file;
	const struct hb_st_tensor *tensor;
};

struct hb_st_checkpoint {
	char *dir;
	bool has_index;
	size_t nshards;
	struct hb_st_file *shards;  /* sorted by file name */
	size_t ntensors;
	struct hb_st_ref *by_name;  /* every tensor of every shard, sorted */
	uint64_t total_bytes;       /* sum of nbytes over all tensors */
};

/*
 * Open a checkpoint directory.  With model.safetensors.index.json the index
 * and the shards must agree exactly (see the ck-* diagnostics); without it
 * every *.safetensors file of the directory is a shard.  Release with
 * hb_st_checkpoint_close (also harmless after a failed open).
 */
int hb_st_checkpoint_open(struct hb_st_checkpoint *ck, const char *dir,
			  struct hb_error *err);
void hb_st_checkpoint_close(struct hb_st_checkpoint *ck);
/* Find a tensor in any shard; false when absent (*out untouched). */
bool hb_st_checkpoint_find(const struct hb_st_checkpoint *ck, const char *name,
			   struct hb_st_ref *out);
/* The i-th tensor in sorted name order, i < ck->ntensors. */
struct hb_st_ref hb_st_checkpoint_at(const struct hb_st_checkpoint *ck, size_t i);
/* hb_st_check_unchanged over every shard. */
int hb_st_checkpoint_check_unchanged(const struct hb_st_checkpoint *ck,
				     struct hb_error *err);

#endif
