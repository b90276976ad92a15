/*
 * hb_gguf.h: the GGUF v3 container, written and read.
 *
 * This header owns the bytes of the GGUF container: the fixed header, the
 * metadata key/value block, the tensor-info block, the alignment padding and
 * the placement of every tensor's extent.  It does not own what the keys mean
 * (the model contract and admission do), nor the bytes inside a tensor (the
 * converter streams those, and the ExpertMajor and PLE stores own their own
 * layouts).  Tensor data is never held here: the writer computes where each
 * tensor goes and the caller writes it; the reader reads only the header
 * region and reports where each tensor lies.
 *
 * Format (GGUF v3, little-endian, every field serialised by width):
 *
 *   off  size  field
 *     0     4  magic "GGUF"
 *     4     4  u32 version = 3
 *     8     8  u64 tensor count
 *    16     8  u64 metadata kv count
 *    24     .  kv pairs: string key, u32 value type, value
 *     .     .  tensor infos: string name, u32 n_dims, u64 dims[n_dims]
 *              (GGML order: dims[0] varies fastest, the reverse of a
 *              PyTorch shape), u32 ggml type, u64 offset relative to the
 *              data section, a multiple of the alignment
 *     .     .  zero padding to `general.alignment` (u32, power of two,
 *              default 32): the data section starts here
 *
 * A string is a u64 byte length and that many bytes of UTF-8, no NUL.  An
 * array is a u32 element type, a u64 count and the elements.
 *
 * Deliberate restrictions (fail closed, both directions):
 *   - nested arrays (an array whose element type is array) are refused
 *     (gguf-array-type): nothing in the artifact needs them;
 *   - every string must be valid UTF-8 (gguf-string-utf8); keys and tensor
 *     names must be non-empty and free of NUL (gguf-key, gguf-tensor-name);
 *     keys are not restricted to ASCII, tensor names are at most 64 bytes;
 *   - a bool byte must be 0 or 1 (gguf-bool);
 *   - n_dims must be 1..4 and every tensor type must be one whose element
 *     size is known here (F32, F16, BF16, I8, I16, I32, I64, F64);
 *   - `general.alignment`, when present, must be a u32 power of two.
 *
 * Interoperability note: the spec allows gaps between tensors (any offset
 * that is a multiple of the alignment).  ggml's own loader is stricter and
 * expects each tensor at the padded end of the previous one; a tensor given
 * a larger file alignment here (for O_DIRECT) leaves a gap that such a
 * loader rejects.  Parsers that follow the spec (and @huggingface/gguf,
 * which the interop test runs) accept it.
 */
#ifndef HB_GGUF_H
#define HB_GGUF_H

#include "hb_base.h"
#include "hb_err.h"

#define HB_GGUF_MAGIC "GGUF"
#define HB_GGUF_VERSION 3u
#define HB_GGUF_DEFAULT_ALIGNMENT 32u
#define HB_GGUF_MAX_DIMS 4u
#define HB_GGUF_MAX_TENSOR_NAME 64u  /* bytes, from the GGUF spec */
#define HB_GGUF_MAX_KEY 65535u       /* bytes, from the GGUF spec */
#define HB_GGUF_FIXED_HEADER 24u     /* magic, version, two counts */

/*
 * Reader hard limits (defaults; a caller may tighten them, never loosen
 * them).  Sized for the real artifact with room: ~100 keys, ~1,600 tensors,
 * a 248,320-token vocabulary and its merges (a few MiB of header).
 */
#define HB_GGUF_MAX_KV 65536u
#define HB_GGUF_MAX_TENSORS 1048576u
#define HB_GGUF_MAX_STRING (64u << 20)        /* 64 MiB per string: tokenizer.json is one */
#define HB_GGUF_MAX_ARRAY (16u << 20)         /* elements per array */
#define HB_GGUF_MAX_HEADER_BYTES (256u << 20) /* up to the data section */
#define HB_GGUF_READ_CHUNK 65536u             /* read-ahead of the reader */

/*
 * Stable diagnostic ids: X(enum suffix, id).  Tests and admission match the
 * id strings; they are never renamed or reused.
 */
#define HB_GGUF_DIAGS(X)                                                    \
	X(MAGIC, "gguf-magic")                       /* not "GGUF" */          \
	X(VERSION, "gguf-version")                   /* version is not 3 */    \
	X(TRUNCATED, "gguf-truncated")               /* file ends in header */ \
	X(IO, "gguf-io")                             /* a read or write failed */ \
	X(LIMIT, "gguf-limit")                       /* a count beyond a limit */ \
	X(KV_TYPE, "gguf-kv-type")                   /* unknown value type */  \
	X(ARRAY_TYPE, "gguf-array-type")             /* unknown/nested elem */ \
	X(STRING_LENGTH, "gguf-string-length")       /* string beyond limit */ \
	X(STRING_UTF8, "gguf-string-utf8")           /* not valid UTF-8 */     \
	X(BOOL, "gguf-bool")                         /* bool byte not 0 or 1 */ \
	X(KEY, "gguf-key")                           /* empty key or NUL */    \
	X(DUPLICATE_KEY, "gguf-duplicate-key")                                 \
	X(KV_WRONG_TYPE, "gguf-kv-wrong-type")       /* accessor type differs */ \
	X(KV_MISSING, "gguf-kv-missing")             /* accessor key absent */ \
	X(ALIGNMENT, "gguf-alignment")               /* general.alignment bad */ \
	X(PADDING, "gguf-padding")                   /* header padding not 0 */ \
	X(TENSOR_NAME, "gguf-tensor-name")           /* empty, NUL, > 64 B */  \
	X(DUPLICATE_TENSOR, "gguf-duplicate-tensor")                           \
	X(TENSOR_TYPE, "gguf-tensor-type")           /* unknown ggml type */   \
	X(TENSOR_DIMS, "gguf-tensor-dims")           /* n_dims, product */     \
	X(TENSOR_SIZE, "gguf-tensor-size")           /* nbytes != dims*size */ \
	X(TENSOR_OFFSET_MISALIGNED, "gguf-tensor-offset-misaligned")           \
	X(TENSOR_OUT_OF_FILE, "gguf-tensor-out-of-file")                       \
	X(TENSOR_OVERLAP, "gguf-tensor-overlap")                               \
	X(STATE, "gguf-state")                       /* API used out of order */

enum hb_gguf_diag {
#define HB_GGUF_DIAG_ENUM(name, id) HB_GGUF_DIAG_##name,
	HB_GGUF_DIAGS(HB_GGUF_DIAG_ENUM)
#undef HB_GGUF_DIAG_ENUM
	HB_GGUF_DIAG_COUNT
};

/* The id string of a diagnostic ("gguf-magic"), or NULL out of range. */
const char *hb_gguf_diag_id(enum hb_gguf_diag d);

/* Metadata value types, numbered as on disk. */
enum hb_gguf_type {
	HB_GGUF_U8 = 0,
	HB_GGUF_I8 = 1,
	HB_GGUF_U16 = 2,
	HB_GGUF_I16 = 3,
	HB_GGUF_U32 = 4,
	HB_GGUF_I32 = 5,
	HB_GGUF_F32 = 6,
	HB_GGUF_BOOL = 7,
	HB_GGUF_STRING = 8,
	HB_GGUF_ARRAY = 9,
	HB_GGUF_U64 = 10,
	HB_GGUF_I64 = 11,
	HB_GGUF_F64 = 12,
};
#define HB_GGUF_TYPE_COUNT 13u

/* GGML tensor types known here (numbered as in ggml). */
enum hb_ggml_type {
	HB_GGML_F32 = 0,
	HB_GGML_F16 = 1,
	HB_GGML_I8 = 24,
	HB_GGML_I16 = 25,
	HB_GGML_I32 = 26,
	HB_GGML_I64 = 27,
	HB_GGML_F64 = 28,
	HB_GGML_BF16 = 30,
};

/* "u8", "string", "array", ...; NULL for an unknown type. */
const char *hb_gguf_type_name(uint32_t type);
/* Bytes of one scalar element (1..8); 0 for string, array and unknown. */
size_t hb_gguf_type_size(uint32_t type);
/* "F32", "BF16", ...; NULL for a type unknown here. */
const char *hb_ggml_type_name(uint32_t ggml_type);
/* Bytes per element of a ggml type (all known ones have block size 1); 0 if
 * unknown, so a caller can never compute a size for a type it does not
 * understand. */
uint64_t hb_ggml_type_size(uint32_t ggml_type);

/* A GGUF string: len bytes at ptr, plus a NUL after them for convenience
 * (value strings may themselves contain NUL; keys and names may not). */
struct hb_gguf_str {
	uint64_t len;
	char *ptr;
};

/*
 * A value.  Scalars live in the union.  An array holds `count` elements of
 * `elem_type` at `elems`: a packed native array (uint8_t for u8 and bool,
 * int16_t for i16, float for f32, ...), or struct hb_gguf_str[] for strings.
 */
struct hb_gguf_value {
	uint32_t type;      /* enum hb_gguf_type */
	uint32_t elem_type; /* arrays only */
	uint64_t count;     /* arrays only */
	union {
		uint8_t u8;
		int8_t i8;
		uint16_t u16;
		int16_t i16;
		uint32_t u32;
		int32_t i32;
		float f32;
		bool b;
		uint64_t u64;
		int64_t i64;
		double f64;
	} v;
	struct hb_gguf_str str; /* strings only */
	void *elems;            /* arrays only */
};

struct hb_gguf_kv {
	struct hb_gguf_str key;
	struct hb_gguf_value value;
	uint64_t offset; /* file offset of the key (reader and layout) */
};

/* A tensor info.  dims are in GGML order (dims[0] fastest). */
struct hb_gguf_tensor {
	struct hb_gguf_str name;
	uint32_t ggml_type;
	uint32_t n_dims;
	uint64_t dims[HB_GGUF_MAX_DIMS];
	uint64_t nbytes;      /* elements x element size */
	uint64_t rel_offset;  /* relative to the data section, as on disk */
	uint64_t offset;      /* absolute file offset */
	uint64_t info_offset; /* file offset of this tensor's info record */
	uint64_t file_align;  /* writer: extra file-offset alignment, 0 none */
};

/* Who owns a byte range of the file. */
enum hb_gguf_owner {
	HB_GGUF_OWN_HEADER,      /* the 24 fixed bytes */
	HB_GGUF_OWN_KV,          /* the whole kv block */
	HB_GGUF_OWN_TENSOR_INFO, /* the whole tensor-info block */
	HB_GGUF_OWN_PADDING,     /* alignment padding (must be zero) */
	HB_GGUF_OWN_TENSOR,      /* one tensor's extent (tensor = index) */
};

struct hb_gguf_range {
	uint64_t offset;
	uint64_t length;   /* never 0: empty ranges are not listed */
	uint32_t owner;    /* enum hb_gguf_owner */
	uint64_t tensor;   /* index into the tensor list, for TENSOR */
};

/* "header", "kv", "tensor-info", "padding", "tensor". */
const char *hb_gguf_owner_name(uint32_t owner);

/*
 * The layout of a file: header regions, the data section, each tensor's
 * absolute extent (in struct hb_gguf_tensor) and the ownership of every
 * byte, as ranges in file order that tile [0, file_size) exactly.
 */
struct hb_gguf_layout {
	uint32_t alignment;
	uint64_t kv_start;          /* = 24 */
	uint64_t tensor_info_start; /* end of the kv block */
	uint64_t tensor_info_end;   /* end of the tensor-info block */
	uint64_t data_start;        /* tensor_info_end padded to alignment */
	uint64_t file_size;
	struct hb_gguf_range *ranges;
	size_t n_ranges;
};

/* ------------------------------------------------------------------ writer */

/*
 * Build a description, lay it out, write the header region.  The writer
 * copies keys, metadata values and tensor names (small) and never sees
 * tensor bytes.
 *
 *   hb_gguf_writer_init(&w);
 *   hb_gguf_writer_add_u32(&w, "general.alignment", 32, &err);   (optional)
 *   hb_gguf_writer_add_str(&w, "general.architecture", "qwen4exp", &err);
 *   hb_gguf_writer_add_tensor_torch(&w, "blk.0.w", HB_GGML_BF16, 2,
 *                                   (uint64_t[]){640, 2560}, 640*2560*2,
 *                                   0, &err);
 *   hb_gguf_writer_layout(&w, &err);  then w.layout, w.tensors[i].offset
 *   hb_gguf_writer_write_header(&w, sink, ctx, &err);
 *   ... the caller writes each tensor's bytes at w.tensors[i].offset ...
 *   hb_gguf_writer_write_padding(&w, sink, ctx, &err);
 *   hb_gguf_writer_release(&w);
 *
 * Padding ownership: write_header writes the header region including the
 * zero padding up to data_start.  Padding between tensors and after the last
 * tensor (up to file_size, a multiple of the alignment) is written as zeros
 * by write_padding; the caller must call it (a file extended with ftruncate
 * reads as zeros too, but the helper makes the zeros explicit and does not
 * depend on how the file was created).  The sink is called with increasing
 * offsets for the header and once per padding range.
 *
 * Every add after layout, and layout twice, fails with gguf-state.  Adds
 * refuse duplicate keys and names (gguf-duplicate-key, -tensor), and
 * `general.alignment` unless it is a u32 power of two (gguf-alignment); the
 * writer uses it for the layout (default 32).
 */
typedef int (*hb_gguf_sink_fn)(void *ctx, const void *buf, size_t len,
			       uint64_t off, struct hb_error *err);

struct hb_gguf_writer {
	struct hb_gguf_kv *kv;
	size_t n_kv, cap_kv;
	struct hb_gguf_tensor *tensors;
	size_t n_tensors, cap_tensors;
	uint32_t alignment;
	bool laid_out;
	struct hb_gguf_layout layout;
};

void hb_gguf_writer_init(struct hb_gguf_writer *w);
void hb_gguf_writer_release(struct hb_gguf_writer *w);

int hb_gguf_writer_add_u8(struct hb_gguf_writer *w, const char *key, uint8_t v, struct hb_error *err);
int hb_gguf_writer_add_i8(struct hb_gguf_writer *w, const char *key, int8_t v, struct hb_error *err);
int hb_gguf_writer_add_u16(struct hb_gguf_writer *w, const char *key, uint16_t v, struct hb_error *err);
int hb_gguf_writer_add_i16(struct hb_gguf_writer *w, const char *key, int16_t v, struct hb_error *err);
int hb_gguf_writer_add_u32(struct hb_gguf_writer *w, const char *key, uint32_t v, struct hb_error *err);
int hb_gguf_writer_add_i32(struct hb_gguf_writer *w, const char *key, int32_t v, struct hb_error *err);
int hb_gguf_writer_add_f32(struct hb_gguf_writer *w, const char *key, float v, struct hb_error *err);
int hb_gguf_writer_add_bool(struct hb_gguf_writer *w, const char *key, bool v, struct hb_error *err);
int hb_gguf_writer_add_u64(struct hb_gguf_writer *w, const char *key, uint64_t v, struct hb_error *err);
int hb_gguf_writer_add_i64(struct hb_gguf_writer *w, const char *key, int64_t v, struct hb_error *err);
int hb_gguf_writer_add_f64(struct hb_gguf_writer *w, const char *key, double v, struct hb_error *err);
/* A NUL-terminated string. */
int hb_gguf_writer_add_str(struct hb_gguf_writer *w, const char *key, const char *s, struct hb_error *err);
/* len bytes (may contain NUL). */
int hb_gguf_writer_add_strn(struct hb_gguf_writer *w, const char *key, const char *s, size_t len, struct hb_error *err);
/*
 * An array of scalars: elems is a packed native array of elem_type (bool as
 * uint8_t 0/1).  count may be 0 (elems may then be NULL).
 */
int hb_gguf_writer_add_array(struct hb_gguf_writer *w, const char *key, uint32_t elem_type,
			     const void *elems, uint64_t count, struct hb_error *err);
/* An array of strings; lens may be NULL (then strlen of each). */
int hb_gguf_writer_add_str_array(struct hb_gguf_writer *w, const char *key, const char *const *strs,
				 const size_t *lens, uint64_t count, struct hb_error *err);

/*
 * Add a tensor.  _ggml takes dims in GGML order as stored; _torch takes a
 * PyTorch shape (outermost first) and reverses it.  nbytes must equal the
 * element count times the type's size (gguf-tensor-size).  file_align, when
 * non-zero, is a power of two the tensor's ABSOLUTE file offset must be a
 * multiple of (4096 for O_DIRECT); the effective alignment is the larger of
 * it and the general alignment, so the relative offset stays aligned too.
 * Tensors are placed in the order added.
 */
int hb_gguf_writer_add_tensor_ggml(struct hb_gguf_writer *w, const char *name, uint32_t ggml_type,
				   uint32_t n_dims, const uint64_t *ggml_dims, uint64_t nbytes,
				   uint64_t file_align, struct hb_error *err);
int hb_gguf_writer_add_tensor_torch(struct hb_gguf_writer *w, const char *name, uint32_t ggml_type,
				    uint32_t n_dims, const uint64_t *torch_shape, uint64_t nbytes,
				    uint64_t file_align, struct hb_error *err);

/*
 * Compute w->layout and every w->tensors[i].offset / rel_offset /
 * info_offset and w->kv[i].offset, with checked arithmetic.  Deterministic:
 * the same description always gives the same layout.  The file ends at the
 * last tensor's end padded to the general alignment.  A description the
 * reader's default limits would refuse (too many keys or tensors, a header
 * region beyond HB_GGUF_MAX_HEADER_BYTES) is refused here (gguf-limit).
 */
int hb_gguf_writer_layout(struct hb_gguf_writer *w, struct hb_error *err);
/* Write bytes [0, data_start) through sink (after layout). */
int hb_gguf_writer_write_header(struct hb_gguf_writer *w, hb_gguf_sink_fn sink, void *ctx,
				struct hb_error *err);
/* Write the zero padding ranges at or after data_start through sink. */
int hb_gguf_writer_write_padding(struct hb_gguf_writer *w, hb_gguf_sink_fn sink, void *ctx,
				 struct hb_error *err);
/* The same two, through pwrite on fd (the header at offset 0). */
int hb_gguf_writer_write_header_fd(struct hb_gguf_writer *w, int fd, struct hb_error *err);
int hb_gguf_writer_write_padding_fd(struct hb_gguf_writer *w, int fd, struct hb_error *err);

/* ------------------------------------------------------------------ reader */

struct hb_gguf_limits {
	uint64_t max_kv;
	uint64_t max_tensors;
	uint64_t max_string;
	uint64_t max_array;
	uint64_t max_header_bytes;
	size_t read_chunk; /* bytes read ahead per refill, >= 1 */
};

/* Fill with the HB_GGUF_MAX_* defaults and HB_GGUF_READ_CHUNK. */
void hb_gguf_limits_default(struct hb_gguf_limits *lim);

struct hb_gguf {
	uint32_t version;
	uint64_t n_kv;
	struct hb_gguf_kv *kv;        /* in file order */
	uint64_t n_tensors;
	struct hb_gguf_tensor *tensors; /* in file order */
	struct hb_gguf_layout layout; /* regions, data_start, ranges */
	uint64_t bytes_read;          /* bytes this parse read from the fd */
};

void hb_gguf_init(struct hb_gguf *g);
void hb_gguf_release(struct hb_gguf *g);

/*
 * Parse the GGUF header region of fd.  lim may be NULL (defaults); a field
 * of 0 takes its default and a field larger than its default is clamped to
 * it.  Reads only [0, data_start) plus at most read_chunk bytes of
 * look-ahead, never tensor data; g->bytes_read says how much.  Checks every tensor's type, dims,
 * size, alignment, that its extent lies inside the file and that no two
 * extents overlap, that the header padding is zero, then fills
 * g->layout.ranges (gaps between tensors and the tail after the last tensor
 * are listed as padding; their bytes are not read).
 *
 * On failure g is released and empty, and err holds the FIRST problem: its
 * id (HB_GGUF_DIAGS), field path ("gguf.kv[3].key",
 * "gguf.tensors[blk.0.w].offset") and file offset.
 */
int hb_gguf_read_fd(struct hb_gguf *g, int fd, const struct hb_gguf_limits *lim,
		    struct hb_error *err);

/*
 * The absolute offset and byte count of tensor `name`, found by skimming
 * the header (string and array bodies skipped by their lengths) without
 * parsing or allocating it: a hint for starting work on one tensor early.
 * Whenever hb_gguf_read_fd accepts the file, the answer equals the parsed
 * tensor's; on any other file it may be anything, so a caller compares it
 * with the parsed tensor before using what it derived.  HB_ERR_NOTFOUND
 * when the skim finds no such tensor or the header does not skim;
 * *bytes_read (may be NULL) counts what it read either way.  Silent.
 */
int hb_gguf_locate_tensor(int fd, const char *name, uint64_t *offset, uint64_t *nbytes,
			  uint64_t *bytes_read);

/* Lookup by key or name; NULL when absent. */
const struct hb_gguf_kv *hb_gguf_find_kv(const struct hb_gguf *g, const char *key);
const struct hb_gguf_tensor *hb_gguf_find_tensor(const struct hb_gguf *g, const char *name);

/*
 * Typed accessors with exact-type checking: a missing key is
 * HB_ERR_NOTFOUND (gguf-kv-missing), a key of another type (say i32 where
 * u64 is asked) is HB_ERR_CONTRACT (gguf-kv-wrong-type).  No conversion is
 * ever made.
 */
int hb_gguf_get_u32(const struct hb_gguf *g, const char *key, uint32_t *out, struct hb_error *err);
int hb_gguf_get_i32(const struct hb_gguf *g, const char *key, int32_t *out, struct hb_error *err);
int hb_gguf_get_u64(const struct hb_gguf *g, const char *key, uint64_t *out, struct hb_error *err);
int hb_gguf_get_f32(const struct hb_gguf *g, const char *key, float *out, struct hb_error *err);
int hb_gguf_get_bool(const struct hb_gguf *g, const char *key, bool *out, struct hb_error *err);
int hb_gguf_get_str(const struct hb_gguf *g, const char *key, const struct hb_gguf_str **out,
		    struct hb_error *err);
/* An array whose element type is exactly elem_type. */
int hb_gguf_get_array(const struct hb_gguf *g, const char *key, uint32_t elem_type,
		      const struct hb_gguf_value **out, struct hb_error *err);

/* ------------------------------------------------------------------ shared */

/* Free what a value owns (strings, arrays) and zero it. */
void hb_gguf_value_release(struct hb_gguf_value *v);
/* Whether [s, s+len) is valid UTF-8 (no overlongs, surrogates, > U+10FFFF). */
bool hb_gguf_utf8_valid(const char *s, uint64_t len);

#endif
