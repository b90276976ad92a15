/*
 * hb_spec.h: speculative-decoding proposal/verification records (AFN-020),
 * man 5 hebrus-spec.
 *
 * A spec shard is a 128-byte header naming the target the records were
 * verified against (vocabulary rows, layers, hidden width, experts, the
 * artifact and tokenizer digests), then self-delimiting records, each with
 * its own kind, payload length and CRC-32, so a truncated or corrupt shard
 * is detected and never silently shortened.  Two kinds:
 *
 *   step   one proposal block and its verification: owner, generation,
 *          position, the captured hidden feature (stage, layer ids, dtype,
 *          shape, and its bytes or their SHA-256: the feature is opaque),
 *          candidates per position with their probabilities or logits, the
 *          selected path, the target's probabilities of the path or their
 *          digest, the accepted prefix length and the bonus token;
 *   route  the route sidecar of one (position, layer): the native top-k in
 *          rank order, the predicted ids with their confidence, and the
 *          owner and generation of the prefetch ticket.
 *
 * Little-endian, explicit widths.  The reader checks every field's range
 * against the header (ids below the vocabulary, layers below the layer
 * count, path entries below the candidate count, the accepted prefix within
 * the block, the hidden payload the size its shape says); a consumer then
 * checks the identity it expects (hb_spec_expect) and refuses another
 * target revision, tokenizer, vocabulary, hidden shape, layer capture,
 * owner or generation with its own id.  Library: silent.
 *
 * Header: 0 magic "HBSPEC01" | 8 u32 version (1) | 12 u32 header bytes (128)
 *        16 u32 vocab rows | 20 u32 layers | 24 u32 hidden | 28 u32 experts
 *        32 target artifact digest (32) | 64 tokenizer digest (32, zero if none)
 *        96 28 reserved zero | 124 u32 CRC-32 of bytes 0..123
 * Record: 0 magic "HBSPREC1" | 8 u32 kind (1 step, 2 route) | 12 u32 CRC-32
 *        of the payload | 16 u64 payload bytes (<= HB_SPEC_MAX_PAYLOAD) | 24 payload
 * Step:  0 u64 owner | 8 u32 generation | 12 u32 stage | 16 u64 position
 *        | 24 u32 layer count n | 28 u32 hidden dtype | 32 u32 hidden ndim d
 *        | 36 u32 flags (bit 0 hidden inline, bit 1 candidate scores are
 *        logits, bit 2 target probabilities inline) | 40 u32 block B
 *        | 44 u32 candidates K | 48 u32 accepted | 52 i32 bonus
 *        | 56 n x u32 layer ids | d x u64 shape | hidden: inline u64 bytes
 *        then the bytes, else 32-byte SHA-256 | B*K x i32 candidate ids
 *        (position-major) | B*K x f32 scores | B x u32 path (index into
 *        the position's K) | target: inline B x f32, else 32-byte SHA-256
 * Route: 0 u64 owner | 8 u32 generation | 12 u32 layer | 16 u64 position
 *        | 24 u32 top_k | 28 u32 predicted n | 32 u64 ticket owner
 *        | 40 u32 ticket generation | 44 u32 reserved 0 | 48 top_k x u32
 *        native ids (rank order) | n x u32 predicted ids | n x f32 confidence
 */
#ifndef HB_SPEC_H
#define HB_SPEC_H

#include "hb_base.h"
#include "hb_err.h"
#include "hb_sha256.h"

#define HB_SPEC_MAGIC "HBSPEC01"
#define HB_SPEC_RECORD_MAGIC "HBSPREC1"
#define HB_SPEC_VERSION 1u
#define HB_SPEC_HEADER_BYTES 128u
#define HB_SPEC_FRAME_BYTES 24u
#define HB_SPEC_MAX_PAYLOAD (64u << 20)
#define HB_SPEC_MAX_BLOCK 16u
#define HB_SPEC_MAX_CANDIDATES 64u
#define HB_SPEC_MAX_LAYERS 64u
#define HB_SPEC_MAX_NDIM 4u
#define HB_SPEC_MAX_TOPK 64u

/* X(symbol, "id", "meaning").  STABILITY: ids are never renamed or reused. */
#define HB_SPEC_DIAGS(X)                                                                   \
	X(MAGIC, "spec-magic", "not a spec shard, or a record frame without its magic")     \
	X(VERSION, "spec-version", "a spec version this reader does not know")             \
	X(HEADER, "spec-header", "a header field is inconsistent or its CRC fails")       \
	X(TRUNCATED, "spec-truncated", "the shard ends inside a record")                  \
	X(CRC, "spec-crc", "a record's payload does not match its CRC-32")                \
	X(RECORD, "spec-record", "a record's fields are out of range or its length is wrong") \
	X(IO, "spec-io", "the shard could not be read or written")                        \
	X(TARGET, "spec-target", "the records were verified against another target revision") \
	X(TOKENIZER, "spec-tokenizer", "the records name another tokenizer")              \
	X(VOCAB, "spec-vocab", "the records' vocabulary rows are not the target's")        \
	X(HIDDEN, "spec-hidden", "the captured hidden stage, dtype or shape is not the one expected") \
	X(CAPTURE, "spec-capture", "the captured layer ids are not the ones expected")     \
	X(OWNER, "spec-owner", "a record or ticket of another owner")                     \
	X(GENERATION, "spec-generation", "a record or ticket of a stale generation")      \
	X(POSITION, "spec-position", "a step's position is not the verifier's frontier")  \
	X(DIVERGED, "spec-diverged", "the target accepts another prefix or bonus than the record says")

enum hb_spec_diag {
#define HB_SPEC_ENUM_(sym, id, meaning) HB_SPD_##sym,
	HB_SPEC_DIAGS(HB_SPEC_ENUM_)
#undef HB_SPEC_ENUM_
	HB_SPD_COUNT
};
const char *hb_spec_diag_id(enum hb_spec_diag d);

enum hb_spec_kind { HB_SPEC_STEP = 1, HB_SPEC_ROUTE = 2 };
/* what the hidden feature was captured after */
enum hb_spec_stage { HB_SPEC_STAGE_LAYER = 1, HB_SPEC_STAGE_FINAL = 2 };
/* the feature's element type (opaque bytes; only the size is checked) */
enum hb_spec_dtype { HB_SPEC_F32 = 1, HB_SPEC_BF16 = 2, HB_SPEC_F16 = 3 };

struct hb_spec_header {
	uint32_t version, vocab_rows, layers, hidden, experts;
	uint8_t target[HB_SHA256_BYTES];
	uint8_t tokenizer[HB_SHA256_BYTES];
};

struct hb_spec_step {
	uint64_t owner, position;
	uint32_t generation, stage;
	uint32_t n_layers, layers[HB_SPEC_MAX_LAYERS];
	uint32_t dtype, ndim;
	uint64_t shape[HB_SPEC_MAX_NDIM];
	bool hidden_inline;               /* else hidden_digest */
	const uint8_t *hidden;            /* inline: hidden_bytes bytes (the reader's buffer) */
	uint64_t hidden_bytes;
	uint8_t hidden_digest[HB_SHA256_BYTES];
	uint32_t block, candidates;
	int32_t cand[HB_SPEC_MAX_BLOCK * HB_SPEC_MAX_CANDIDATES];   /* [B][K] */
	float score[HB_SPEC_MAX_BLOCK * HB_SPEC_MAX_CANDIDATES];    /* [B][K] */
	bool score_logits;                /* scores are logits, else probabilities */
	uint32_t path[HB_SPEC_MAX_BLOCK]; /* per position, an index into its K */
	bool target_inline;               /* else target_digest */
	float target_prob[HB_SPEC_MAX_BLOCK];
	uint8_t target_digest[HB_SHA256_BYTES];
	uint32_t accepted;                /* 0..B */
	int32_t bonus;
};

struct hb_spec_route {
	uint64_t owner, position, ticket_owner;
	uint32_t generation, layer, ticket_generation;
	uint32_t top_k, n_pred;
	uint32_t native[HB_SPEC_MAX_TOPK];
	uint32_t pred[HB_SPEC_MAX_TOPK];
	float confidence[HB_SPEC_MAX_TOPK];
};

/* The token the selected path proposes at position i of the block. */
static inline int32_t hb_spec_path_token(const struct hb_spec_step *s, uint32_t i)
{
	return s->cand[i * s->candidates + s->path[i]];
}

/* ------------------------------------------------------------ writer */

struct hb_spec_writer;
/* Writes the header at once to fd (a file or a pipe); `what` names it in errors. */
int hb_spec_writer_open(struct hb_spec_writer **out, int fd, const char *what, const struct hb_spec_header *h,
			struct hb_error *err);
/* Each record is checked as the reader would check it before it is written. */
int hb_spec_write_step(struct hb_spec_writer *w, const struct hb_spec_step *s, struct hb_error *err);
int hb_spec_write_route(struct hb_spec_writer *w, const struct hb_spec_route *r, struct hb_error *err);
int hb_spec_writer_close(struct hb_spec_writer *w, struct hb_error *err);

/* ------------------------------------------------------------ reader */

/* One of step or route is set; return non-zero to stop (that value is returned). */
typedef int (*hb_spec_record_fn)(void *ctx, const struct hb_spec_header *h, const struct hb_spec_step *step,
				 const struct hb_spec_route *route);
/*
 * Stream every record of the shard on fd through fn (one record in memory).
 * On a defect err names the shard, the record ordinal and its byte offset;
 * records delivered before it stay delivered.
 */
int hb_spec_read(int fd, const char *what, hb_spec_record_fn fn, void *ctx, struct hb_spec_header *h,
		 uint64_t *records, struct hb_error *err);

/* ------------------------------------------------------------ identity */

/* What a consumer (the golden replay, the verifier) demands of a shard. */
struct hb_spec_expect {
	struct hb_spec_header target;     /* vocab, layers, hidden, experts, digests */
	uint64_t owner;
	uint32_t generation;
	uint32_t stage, dtype, ndim;
	uint64_t shape[HB_SPEC_MAX_NDIM];
	uint32_t n_layers, layers[HB_SPEC_MAX_LAYERS];
};
/* The header against e: spec-target, spec-tokenizer, spec-vocab, spec-hidden (width). */
int hb_spec_check_header(const struct hb_spec_header *h, const struct hb_spec_expect *e, struct hb_error *err);
/* A step against e: spec-owner, spec-generation, spec-hidden, spec-capture. */
int hb_spec_check_step(const struct hb_spec_step *s, const struct hb_spec_expect *e, struct hb_error *err);
/* A route sidecar against e: its record and ticket owner and generation. */
int hb_spec_check_route(const struct hb_spec_route *r, const struct hb_spec_expect *e, struct hb_error *err);

#endif
