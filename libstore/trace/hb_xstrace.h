/*
 * hb_xstrace.h: stream trace shards (man 5 hebrus-trace, STREAM TRACE):
 * what the streaming expert engine (libkern/stream, hb-run --expert-cache)
 * did per forward chunk, per layer step and per read.  A separate shard
 * from the route shard (whose layout it does not touch: a streamed and a
 * resident run dump the same route bytes).
 *
 * Header (128 bytes): 0 magic "HBXSTRC1" | 8 u32 version (1) | 12 u32 header bytes (128)
 *   16 u32 layers | 20 u32 experts | 24 u32 top_k | 28 u32 slots | 32 u64 slot bytes
 *   40 u64 budget bytes | 48 u32 depth | 52 u32 threads | 56 u32 predictor (0 none,
 *   1 previous, 2 router-ahead) | 60 u32 policy (0 lru, 1 score) | 64 u32 flags (bit 0:
 *   O_DIRECT) | 68 u32 reserved | 72 artifact digest (32) | 104 20 reserved zero
 *   | 124 u32 CRC-32 of bytes 0..123.
 * Record frame (16 bytes): 0 u32 kind | 4 u32 payload bytes | 8 u32 CRC-32 of the payload
 *   | 12 u32 reserved zero | 16 payload.  Kinds token (1), layer (2), read (3), each of
 *   a fixed payload (the field tables below).  Times are nanoseconds from the run's
 *   origin (CLOCK_MONOTONIC at the start of the prompt).
 *
 * Nothing here touches a file: a writer appends to a memory buffer that the
 * caller publishes whole (hb_publish_buf); a reader walks a buffer.  Every
 * defect is refused with a stable id and the field named, and a writer
 * refuses a record a reader would refuse.
 */
#ifndef HB_XSTRACE_H
#define HB_XSTRACE_H

#include "hb_base.h"
#include "hb_err.h"
#include "hb_sha256.h"

#define HB_XST_MAGIC "HBXSTRC1"
#define HB_XST_VERSION 1u
#define HB_XST_HEADER_BYTES 128u
#define HB_XST_FRAME_BYTES 16u

/* X(symbol, "id", "meaning") */
#define HB_XST_DIAGS(X)                                                             \
	X(MAGIC, "xstrace-magic", "not a stream trace shard")                       \
	X(VERSION, "xstrace-version", "a stream trace version this reader does not know") \
	X(HEADER, "xstrace-header", "a header field is out of range or its CRC fails") \
	X(TRUNCATED, "xstrace-truncated", "the shard ends inside a record")         \
	X(KIND, "xstrace-kind", "a record of an unknown kind or a wrong payload size") \
	X(CRC, "xstrace-crc", "a record's payload does not match its CRC-32")       \
	X(RECORD, "xstrace-record", "a record's field is out of range")

enum hb_xst_diag {
#define HB_XST_ENUM_(sym, id, meaning) HB_XSTD_##sym,
	HB_XST_DIAGS(HB_XST_ENUM_)
#undef HB_XST_ENUM_
	HB_XSTD_COUNT
};
const char *hb_xst_diag_id(enum hb_xst_diag d);

struct hb_xst_header {
	uint32_t version, layers, experts, top_k, slots;
	uint64_t slot_bytes, budget_bytes;
	uint32_t depth, threads, predictor, policy;
	bool direct;
	uint8_t artifact[HB_SHA256_BYTES];
};

enum hb_xst_kind { HB_XST_TOKEN = 1, HB_XST_LAYER = 2, HB_XST_READ = 3, HB_XST_KINDS = 4 };

/* X(symbol, "name", width in bytes, signed): payload fields in order. */
#define HB_XST_TOKEN_FIELDS(X)                                                           \
	X(TOKEN, "token", 8, 0) X(TOKENS, "tokens", 4, 0) X(PHASE, "phase", 4, 0)            \
	X(BEGIN, "begin_ns", 8, 0) X(END, "end_ns", 8, 0)                                    \
	X(BYTES_EXACT, "bytes_exact", 8, 0) X(BYTES_PREDICTED, "bytes_predicted", 8, 0)      \
	X(BYTES_REJECTED, "bytes_rejected", 8, 0) X(BYTES_USEFUL, "bytes_useful", 8, 0)      \
	X(WANTS, "wants", 8, 0) X(HITS, "hits", 8, 0) X(JOINED, "joined", 8, 0)              \
	X(MISSES, "misses", 8, 0) X(READS, "reads", 8, 0) X(P50, "ready_p50_ns", 8, 0)       \
	X(P95, "ready_p95_ns", 8, 0) X(P99, "ready_p99_ns", 8, 0)                            \
	X(DEADLINES, "deadlines", 8, 0) X(LATE, "late", 8, 0)                                \
	X(SLACK_SUM, "slack_sum_ns", 8, 1) X(SLACK_MIN, "slack_min_ns", 8, 1)                \
	X(EXPOSED, "exposed_ns", 8, 0) X(EXACT_IO, "exact_io_ns", 8, 0)
#define HB_XST_LAYER_FIELDS(X)                                                           \
	X(TOKEN, "token", 8, 0) X(LAYER, "layer", 4, 0) X(TOKENS, "tokens", 4, 0)            \
	X(START, "start_ns", 8, 0) X(MOE, "moe_ns", 8, 0) X(ROUTED, "routed_ns", 8, 0)       \
	X(READY, "ready_ns", 8, 0) X(END, "end_ns", 8, 0) X(EXPOSED, "exposed_ns", 8, 0) X(WANTS, "wants", 8, 0)        \
	X(HITS, "hits", 8, 0) X(JOINED, "joined", 8, 0) X(MISSES, "misses", 8, 0)
#define HB_XST_READ_FIELDS(X)                                                            \
	X(TOKEN, "token", 8, 0) X(LAYER, "layer", 4, 0) X(EXPERT, "expert", 4, 0)            \
	X(CLASS, "class", 1, 0) X(CLASS_END, "class_end", 1, 0) X(STATE, "state", 1, 0)      \
	X(FLAGS, "flags", 1, 0) X(RESERVED, "reserved", 4, 0) X(ISSUE, "issue_ns", 8, 0)     \
	X(START, "start_ns", 8, 0) X(READY, "ready_ns", 8, 0) X(DEADLINE, "deadline_ns", 8, 0) \
	X(BYTES, "bytes", 8, 0)

#define HB_XST_T_(sym, name, w, s) HB_XST_T_##sym,
#define HB_XST_L_(sym, name, w, s) HB_XST_L_##sym,
#define HB_XST_R_(sym, name, w, s) HB_XST_R_##sym,
enum hb_xst_token_field { HB_XST_TOKEN_FIELDS(HB_XST_T_) HB_XST_TOKEN_NF };
enum hb_xst_layer_field { HB_XST_LAYER_FIELDS(HB_XST_L_) HB_XST_LAYER_NF };
enum hb_xst_read_field { HB_XST_READ_FIELDS(HB_XST_R_) HB_XST_READ_NF };
#undef HB_XST_T_
#undef HB_XST_L_
#undef HB_XST_R_

/* read: state is 2 (done), 3 (failed) or 4 (cancelled or stale: nothing
 * published), as enum hb_xs_ticket_state; flags bit 0: issued exact,
 * bit 1: promoted to P0 by an exact want, bit 2: read in an extent window.  phase: 0 prefill, 1 decode. */
#define HB_XST_READ_EXACT 1u
#define HB_XST_READ_PROMOTED 2u
#define HB_XST_READ_EXTENT 4u /* read in a prefill extent window (--prefill-extent) */
#define HB_XST_MAX_FIELDS 24

/* One record: v[i] is field i of its kind (a signed field as its two's
 * complement). */
struct hb_xst_rec {
	enum hb_xst_kind kind;
	uint64_t v[HB_XST_MAX_FIELDS];
};

/* The kind's name ("token", "layer", "read"), its field count, a field's
 * name and signedness, and its payload bytes; NULL / 0 for an unknown kind. */
const char *hb_xst_kind_name(enum hb_xst_kind k);
unsigned hb_xst_fields(enum hb_xst_kind k);
const char *hb_xst_field_name(enum hb_xst_kind k, unsigned f);
bool hb_xst_field_signed(enum hb_xst_kind k, unsigned f);
uint32_t hb_xst_payload_bytes(enum hb_xst_kind k);

/* ------------------------------------------------------------ writer */

struct hb_xst_writer {
	uint8_t *p;
	size_t len, cap;
	uint64_t records;
};
/* Starts the buffer with the header (refused as a reader would refuse it). */
int hb_xst_writer_init(struct hb_xst_writer *w, const struct hb_xst_header *h, struct hb_error *err);
/* Appends one record, or refuses it (xstrace-record, the field named) and appends nothing. */
int hb_xst_write(struct hb_xst_writer *w, const struct hb_xst_header *h, const struct hb_xst_rec *r,
		 struct hb_error *err);
void hb_xst_writer_release(struct hb_xst_writer *w);

/* ------------------------------------------------------------ reader */

typedef int (*hb_xst_record_fn)(void *ctx, const struct hb_xst_header *h, uint64_t index,
				const struct hb_xst_rec *r);
/*
 * Check the header and every record of buf[0..len) in order, handing each
 * good record to fn (may be NULL; a non-zero return stops the walk and is
 * returned).  Records before a defect stay delivered; the error names the
 * shard (what), the record (its ordinal) and field, and the byte offset.
 */
int hb_xst_read(const uint8_t *buf, size_t len, const char *what, hb_xst_record_fn fn, void *ctx,
		struct hb_xst_header *h, uint64_t *records, struct hb_error *err);
/* Whether buf starts with the stream trace magic. */
bool hb_xst_is(const uint8_t *buf, size_t len);

#endif
