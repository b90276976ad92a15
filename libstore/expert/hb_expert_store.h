/*
 * hb_expert_store.h: the ExpertMajor v2 routed-expert store, family 4.
 *
 * Owns the container of ARCHITECTURE.md §4.1: the codec table, the layout
 * plan for a geometry, the field-by-field serialiser of header and
 * descriptors, the parser/validator (which reads only those bytes), the
 * streaming writer, the payload verifier and record reads.  It does not own
 * the GGUF around the store (the caller gives an fd and the 4096-aligned
 * file offset of the store's first byte), the model profile (the caller
 * passes the expected geometry), or the weight math (hb_affine4.h).
 *
 * Wire facts (little-endian; offsets relative to the store's first byte):
 * 256-byte header, magic "DS4EXPV2", version 2; descriptors at 256, 224
 * bytes per layer, three 56-byte components at +32/+88/+144 (gate, up,
 * down); data offset and every layer's data offset 4096-aligned; a record is
 * gate|up|down back to back.  The manifest SHA-256 (header offset 168) is
 * SHA-256(header with those 32 bytes zeroed || all descriptors); the payload
 * SHA-256 (offset 128) covers [data offset, store size), padding included.
 *
 * Codecs, each an identity of its own (storage format, group size, element
 * type, block elements):
 *   HB_EM_CODEC_BF16        storage 0 (GGML types), group 0, type 30 (BF16),
 *                           block 1: the exact reference codec.
 *   HB_EM_CODEC_AFFINE4_G64 storage 1 (MLX affine4), group 64, type 12,
 *                           block 64: label
 *                           "phase2-structural-not-release-qualified".
 *     The element type 12 (GGML Q4_K) and block 64 are what the public ds4
 *     tools write for family 4: Q4_K has the same byte density (144 bytes per
 *     256 values = 36 per 64), so a type-only reader sizes the bytes right;
 *     the storage format, not the type id, says how to decode them.
 * A codec whose block does not tile every role's input width exactly is
 * refused ("em-codec-tiling"), never padded.
 *
 * Matrices are stored row-major [dim1 output rows][dim0 input width]: each
 * output row is one codec row of dim0 weights.  gate/up are
 * [hidden, intermediate, experts], down is [intermediate, hidden, experts].
 *
 * Layout rule (the only one the parser accepts, so every byte has one
 * owner): data offset = align4096(256 + 224 * layers); layer 0 starts at the
 * data offset; layer L+1 starts at align4096(end of layer L); store size =
 * end of the last layer; padding bytes are zero and covered by the payload
 * digest.
 */
#ifndef HB_EXPERT_STORE_H
#define HB_EXPERT_STORE_H

#include "hb_base.h"
#include "hb_err.h"
#include "hb_sha256.h"

#define HB_EM_TENSOR_NAME "ds4.expert_major.v2"
#define HB_EM_MAGIC "DS4EXPV2"
#define HB_EM_VERSION 2u
#define HB_EM_HEADER_BYTES 256u
#define HB_EM_DESCRIPTOR_BYTES 224u
#define HB_EM_COMPONENT_OFFSET 32u
#define HB_EM_COMPONENT_BYTES 56u
#define HB_EM_MANIFEST_DIGEST_OFFSET 168u
#define HB_EM_ALIGNMENT 4096u
#define HB_EM_MAX_EXPERTS 512u
#define HB_EM_MAX_LAYERS 128u  /* bounds the descriptor table we allocate */
#define HB_EM_FAMILY_QWEN4EXP 4u

enum hb_em_role { HB_EM_GATE = 0, HB_EM_UP = 1, HB_EM_DOWN = 2, HB_EM_ROLES = 3 };

enum hb_em_storage {
	HB_EM_STORAGE_GGML = 0,
	HB_EM_STORAGE_MLX_AFFINE4 = 1,
	HB_EM_STORAGE_MLX_AFFINE2 = 2, /* known, not supported: refused */
};

#define HB_EM_GGML_Q4_K 12u
#define HB_EM_GGML_BF16 30u

enum hb_em_codec_id { HB_EM_CODEC_BF16 = 0, HB_EM_CODEC_AFFINE4_G64 = 1 };

struct hb_em_codec {
	enum hb_em_codec_id id;
	const char *name;           /* "bf16", "mlx-affine4-g64" */
	const char *label;          /* qualification label */
	uint32_t storage_format;
	uint32_t group_size;        /* header field; 0 for GGML storage */
	uint32_t element_type;      /* component field */
	uint32_t block_elements;    /* weights per block */
	uint32_t block_bytes;       /* bytes per block */
};

/* The codec entry, or NULL for an unknown id. */
const struct hb_em_codec *hb_em_codec_get(enum hb_em_codec_id id);
/* The codec a header (storage format, group size) names, or NULL. */
const struct hb_em_codec *hb_em_codec_find(uint32_t storage_format,
					   uint32_t group_size);

/* Geometry of the routed experts.  Family is always 4. */
struct hb_em_geometry {
	uint32_t layers;       /* routed layers, ids 0..layers-1 */
	uint32_t experts;      /* experts per layer, <= 512 */
	uint32_t experts_used; /* top-k, 1..experts */
	uint64_t hidden;       /* gate/up input width, down output rows */
	uint64_t intermediate; /* gate/up output rows, down input width */
};

/* The closed family-4 geometry of the real checkpoint: 48 layers, 512
 * experts, 10 used, hidden 2560, intermediate 640. */
void hb_em_geometry_qwen4exp(struct hb_em_geometry *g);
/* Structural limits a development geometry must meet (counts non-zero,
 * experts <= 512, layers <= HB_EM_MAX_LAYERS, used <= experts). */
int hb_em_geometry_check(const struct hb_em_geometry *g, struct hb_error *err);

struct hb_em_component {
	uint32_t role;
	uint32_t element_type;
	uint32_t ndim;           /* 3 */
	uint32_t block_elements;
	uint64_t dim[3];         /* input width, output rows, experts */
	uint64_t expert_bytes;
	uint64_t record_offset;
};

struct hb_em_layer {
	uint32_t layer;
	uint32_t expert_count;
	uint64_t record_bytes;
	uint64_t data_offset;    /* relative to the store */
	uint64_t data_size;      /* record_bytes * expert_count */
	struct hb_em_component comp[HB_EM_ROLES];
};

/* A planned or parsed store.  layers[] is heap-owned: release it. */
struct hb_em_layout {
	uint32_t family;
	uint32_t experts_used;
	uint32_t layer_count;
	uint32_t expert_count;
	uint64_t source_tensors;
	uint64_t descriptor_count;
	uint64_t descriptor_bytes;
	uint64_t descriptor_offset;
	uint64_t data_offset;
	uint64_t data_size;
	uint64_t store_size;
	uint64_t source_size;
	uint8_t source_sha256[HB_SHA256_BYTES];
	uint8_t payload_sha256[HB_SHA256_BYTES];
	uint32_t storage_format;
	uint32_t group_size;
	uint8_t manifest_sha256[HB_SHA256_BYTES];
	const struct hb_em_codec *codec;
	uint64_t record_bytes;  /* same for every layer */
	struct hb_em_layer *layers;
};

/*
 * Plan the layout of a store for geometry g and codec: component bytes per
 * expert, record bytes, per-layer data offsets, data and store size, all
 * with checked arithmetic.  Digests and source fields are zero; the writer
 * fills them.  Refuses a codec whose block does not tile every role's input
 * width (id "em-codec-tiling", HB_ERR_UNSUPPORTED).
 */
int hb_em_layout_plan(struct hb_em_layout *out, const struct hb_em_geometry *g,
		      enum hb_em_codec_id codec, struct hb_error *err);
void hb_em_layout_release(struct hb_em_layout *l);
/* Bytes of header + descriptors (what serialise writes and parse reads). */
uint64_t hb_em_layout_meta_bytes(const struct hb_em_layout *l);

/*
 * Serialise header and descriptors field by field into buf (len >=
 * hb_em_layout_meta_bytes), computing the manifest digest and storing it in
 * both buf and l->manifest_sha256.  The payload and source digests are
 * taken from l as they are.
 */
int hb_em_serialise(struct hb_em_layout *l, uint8_t *buf, size_t len,
		    struct hb_error *err);

/*
 * Parse and validate a store whose header and descriptors are the first
 * meta bytes of buf (len may be smaller than the store: only header and
 * descriptors are read).  extent is the number of bytes the container gives
 * the store; store size must equal it.  expect is the geometry the caller
 * demands (the real family-4 geometry for the real profile, the config's
 * otherwise).  Every failure carries a stable id from HB_EM_DIAGNOSTICS in
 * err->id and a field path such as
 * "expert_store.descriptor[3].component[down].dim0".
 */
int hb_em_parse_buf(const uint8_t *buf, size_t len, uint64_t extent,
		    const struct hb_em_geometry *expect,
		    struct hb_em_layout *out, struct hb_error *err);
/*
 * The same, reading with pread from fd at base (the store's first byte):
 * the 256-byte header, then the descriptors, nothing else; *bytes_read (may
 * be NULL) says how many bytes were read.  The file must hold base + extent
 * bytes ("em-truncated" otherwise); the payload is not read.
 */
int hb_em_parse_fd(int fd, uint64_t base, uint64_t extent,
		   const struct hb_em_geometry *expect, struct hb_em_layout *out,
		   uint64_t *bytes_read, struct hb_error *err);

/*
 * Recompute the payload SHA-256 over [base + data offset, base + store
 * size) of fd and compare it with l->payload_sha256 ("em-payload-digest").
 */
int hb_em_verify_payload(int fd, uint64_t base, const struct hb_em_layout *l,
			 struct hb_error *err);

/* Pass as role to address the whole record (gate|up|down). */
#define HB_EM_RECORD (-1)

/* Offset (relative to the store) and length of one expert's record or of
 * one component; HB_ERR_INVALID ("em-record-bounds") outside the layout. */
int hb_em_record_span(const struct hb_em_layout *l, uint32_t layer,
		      uint32_t expert, int role, uint64_t *offset,
		      uint64_t *len, struct hb_error *err);
/* Read that span from fd at base into buf (buf_len must be >= the span);
 * *got (may be NULL) receives the span length. */
int hb_em_record_read(int fd, uint64_t base, const struct hb_em_layout *l,
		      uint32_t layer, uint32_t expert, int role, void *buf,
		      size_t buf_len, size_t *got, struct hb_error *err);

/*
 * Streaming writer.  Bounded memory: one encoded record.  Order:
 *   hb_em_writer_begin(...)
 *   for layer in 0..layers-1, for expert in 0..experts-1:
 *       hb_em_writer_put_f32(...)  or  hb_em_writer_put_bf16(...)
 *   hb_em_writer_finish(...)        header + descriptors, both digests
 *   hb_em_writer_release(...)       always, also after an error
 * The store's padding bytes are written as zeros; the payload digest is
 * computed while streaming.  A refusal found before any byte is written
 * (order, a non-finite weight, a wrong argument) leaves the writer usable;
 * an I/O failure poisons it (every later call fails).
 */
struct hb_em_writer {
	struct hb_em_layout layout; /* own copy; digests filled by finish */
	int fd;
	uint64_t base;
	uint32_t next_layer;
	uint32_t next_expert;
	uint64_t pos;               /* next store-relative offset to write */
	struct hb_sha256 payload;
	uint8_t *record;            /* one encoded record */
	bool failed;
	bool finished;
};

/*
 * Begin writing a store laid out as plan into fd at file offset base
 * (base % 4096 must be 0: "em-base-align").  source_size, source_sha256
 * and source_tensors identify the checkpoint the store was made from.
 */
int hb_em_writer_begin(struct hb_em_writer *w, const struct hb_em_layout *plan,
		       int fd, uint64_t base, uint64_t source_size,
		       const uint8_t source_sha256[HB_SHA256_BYTES],
		       uint64_t source_tensors, struct hb_error *err);
/*
 * The next expert's three matrices as float32, row-major [dim1][dim0]
 * (gate and up: intermediate rows of hidden; down: hidden rows of
 * intermediate), encoded with the layout's codec (bf16: round to nearest
 * even).  layer/expert must be the next in layer-major, expert-minor order
 * ("em-put-order").  Non-finite weights are refused.
 */
int hb_em_writer_put_f32(struct hb_em_writer *w, uint32_t layer,
			 uint32_t expert, const float *gate, const float *up,
			 const float *down, struct hb_error *err);
/*
 * Encode one expert's record (record_bytes of the layer) from float32
 * matrices, exactly as put_f32 would; a pure function of its inputs, safe to
 * call from several threads, so a caller can encode in parallel and then
 * commit the records in order with put_record.
 */
int hb_em_encode_record(const struct hb_em_layout *l, uint32_t layer,
			uint32_t expert, const float *gate, const float *up,
			const float *down, uint8_t *record, struct hb_error *err);
/* Commit a record produced by hb_em_encode_record (same order rules). */
int hb_em_writer_put_record(struct hb_em_writer *w, uint32_t layer,
			    uint32_t expert, const uint8_t *record,
			    struct hb_error *err);
/*
 * Refuse a bf16 record (gate|up|down as laid out for `layer`) holding an
 * infinity or NaN, with the field and message hb_em_writer_put_bf16 gives
 * (HB_ERR_NONFINITE, "...weights[i]").  For a caller that builds records in
 * its own buffers.  Vectorised scan; thread-safe.
 */
int hb_em_check_bf16_record(const struct hb_em_layout *l, uint32_t layer,
			    uint32_t expert, const uint8_t *record,
			    struct hb_error *err);
/*
 * bf16 codec only: the three matrices as raw little-endian bf16 bytes
 * (2 * dim0 * dim1 bytes each), copied bit-exactly.  NaN and infinity
 * patterns are refused.
 */
int hb_em_writer_put_bf16(struct hb_em_writer *w, uint32_t layer,
			  uint32_t expert, const uint8_t *gate,
			  const uint8_t *up, const uint8_t *down,
			  struct hb_error *err);
/*
 * After the last expert: write the zero gap between descriptors and data,
 * the header and descriptors with both digests (pwrite).  out (may be NULL)
 * receives a copy of the final layout (release it).  Does not fsync: the
 * caller owns the file's publication.
 */
int hb_em_writer_finish(struct hb_em_writer *w, struct hb_em_layout *out,
			struct hb_error *err);
void hb_em_writer_release(struct hb_em_writer *w);

/*
 * Stable diagnostic ids (never renamed or reused; the man page lists
 * exactly these).  X(enum suffix, "id", description)
 */
#define HB_EM_DIAGNOSTICS(X)                                                  \
	X(TRUNCATED, "em-truncated", "the store or file ends before a required byte") \
	X(MAGIC, "em-magic", "magic is not DS4EXPV2")                          \
	X(VERSION, "em-version", "version is not 2")                           \
	X(HEADER_BYTES, "em-header-bytes", "header bytes is not 256")           \
	X(FAMILY, "em-family", "family is not 4 (Qwen4Exp)")                   \
	X(EXPERTS_USED, "em-experts-used", "experts used differs from the geometry") \
	X(LAYER_COUNT, "em-layer-count", "layer count differs from the geometry") \
	X(EXPERT_COUNT, "em-expert-count", "expert count differs from the geometry or exceeds 512") \
	X(DESCRIPTOR_COUNT, "em-descriptor-count", "descriptor count differs from the layer count") \
	X(DESCRIPTOR_BYTES, "em-descriptor-bytes", "descriptor bytes is not 224 x layers") \
	X(DESCRIPTOR_OFFSET, "em-descriptor-offset", "descriptor offset is not 256") \
	X(DATA_OFFSET, "em-data-offset", "data offset is not the first 4096-aligned offset after the descriptors") \
	X(DATA_SIZE, "em-data-size", "data size differs from the layers' extent") \
	X(STORE_SIZE, "em-store-size", "store size differs from data offset + data size or from the container extent") \
	X(STORAGE, "em-storage", "storage format and group size name no supported codec") \
	X(RESERVED_NONZERO, "em-reserved-nonzero", "a reserved byte is not zero") \
	X(MANIFEST_DIGEST, "em-manifest-digest", "manifest SHA-256 does not match header and descriptors") \
	X(LAYER_INDEX, "em-layer-index", "descriptor layer index differs from its position") \
	X(LAYER_EXPERTS, "em-layer-experts", "descriptor expert count differs from the header") \
	X(RECORD_BYTES, "em-record-bytes", "record bytes differs from the sum of the components") \
	X(LAYER_SIZE, "em-layer-size", "layer data size differs from record bytes x experts") \
	X(DESCRIPTOR_ALIGN, "em-descriptor-align", "layer data offset is not 4096-aligned") \
	X(DESCRIPTOR_EXTENT, "em-descriptor-extent", "layer data lies outside the data region") \
	X(DESCRIPTOR_OVERLAP, "em-descriptor-overlap", "layer data overlaps or precedes the previous layer") \
	X(DESCRIPTOR_GAP, "em-descriptor-gap", "layer data does not start at the first aligned offset after the previous layer") \
	X(COMPONENT, "em-component", "a component's role, type, ndim, block, bytes or offset is wrong") \
	X(GEOMETRY, "em-geometry", "a component's dimensions differ from the geometry") \
	X(CODEC_TILING, "em-codec-tiling", "the codec block does not tile a role's input width") \
	X(OVERFLOW, "em-overflow", "size arithmetic overflows") \
	X(PAYLOAD_DIGEST, "em-payload-digest", "payload SHA-256 does not match the payload bytes") \
	X(BASE_ALIGN, "em-base-align", "the store's file offset is not 4096-aligned") \
	X(PUT_ORDER, "em-put-order", "an expert was given out of layer-major, expert-minor order") \
	X(WRITER_STATE, "em-writer-state", "the writer is finished, failed, or incomplete") \
	X(RECORD_BOUNDS, "em-record-bounds", "a record read names a layer, expert or role outside the layout")

enum hb_em_diag {
#define HB_EM_ENUM(e, id, desc) HB_EM_DIAG_##e,
	HB_EM_DIAGNOSTICS(HB_EM_ENUM)
#undef HB_EM_ENUM
	HB_EM_DIAG_COUNT
};

/* The id string and description of a diagnostic (NULL when out of range). */
const char *hb_em_diag_id(enum hb_em_diag d);
const char *hb_em_diag_desc(enum hb_em_diag d);

#endif
