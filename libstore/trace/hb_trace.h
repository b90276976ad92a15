/*
 * hb_trace.h: route trace shards (man 5 hebrus-trace).
 *
 * A shard is a 128-byte header followed by append-only chunks.  Every
 * chunk carries its record count, its payload length and a CRC-32 of the
 * payload, so a truncated or corrupt shard is detected, never silently
 * shortened; a writer can stream to a pipe (no seeking back).  A record is
 * one route observation: who produced it, which token and layer, the
 * native top-k expert ids in rank order and their weights, and (when the
 * producer knows them) proposal lineage.  Physical cache slots and file
 * offsets never enter a trace.  Little-endian, explicit widths.
 *
 * Header:  0 magic "HBTRACE1" | 8 u32 version (1 or 2) | 12 u32 header bytes (128)
 *         16 u32 top_k | 20 u32 layers | 24 u32 experts | 28 u32 record bytes
 *         32 artifact digest (32) | 64 tokenizer+template digest (32, zero if none)
 *         96 u64 owner | 104 u32 generation | version 1: 108 16 reserved zero;
 *         version 2: 108 u64 thread | 116 u32 flags (bit 0: thread present) | 120 4 reserved
 *         zero | 124 u32 CRC-32 of bytes 0..123.  A writer writes the lowest version that
 *         holds its header: 1 without a thread, 2 with one.
 * Chunk:   0 magic "HBCHUNK1" | 8 u32 records | 12 u32 CRC-32 of the payload
 *         16 u64 payload bytes (= records x record bytes) | 24 payload
 * Record: 0 u64 sequence | 8 u64 token ordinal | 16 u32 layer | 20 u32 flags
 *         (bit 0: lineage present) | 24 u64 proposal id | 32 i32 candidate position
 *         | 36 i32 accepted-prefix length | 40 top_k x u32 expert ids (rank order)
 *         | top_k x f32 weights
 */
#ifndef HB_TRACE_H
#define HB_TRACE_H

#include "hb_base.h"
#include "hb_err.h"
#include "hb_sha256.h"

#define HB_TRACE_MAGIC "HBTRACE1"
#define HB_TRACE_CHUNK_MAGIC "HBCHUNK1"
#define HB_TRACE_HEADER_BYTES 128u
#define HB_TRACE_CHUNK_HEADER_BYTES 24u
#define HB_TRACE_MAX_TOPK 64u
#define HB_TRACE_MAX_CHUNK_RECORDS 65536u

/* X(symbol, "id", "meaning") */
#define HB_TRACE_DIAGS(X)                                                           \
	X(MAGIC, "trace-magic", "not a trace shard")                                \
	X(VERSION, "trace-version", "a trace version this reader does not know")    \
	X(HEADER, "trace-header", "a header field is inconsistent or its CRC fails") \
	X(TRUNCATED, "trace-truncated", "the shard ends inside a chunk")            \
	X(CHUNK, "trace-chunk", "a chunk header is malformed")                      \
	X(CRC, "trace-crc", "a chunk's payload does not match its CRC-32")          \
	X(RECORD, "trace-record", "a record's fields are out of range")             \
	X(IO, "trace-io", "the shard could not be read or written")

enum hb_trace_diag {
#define HB_TRACE_ENUM_(sym, id, meaning) HB_TRD_##sym,
	HB_TRACE_DIAGS(HB_TRACE_ENUM_)
#undef HB_TRACE_ENUM_
	HB_TRD_COUNT
};
const char *hb_trace_diag_id(enum hb_trace_diag d);

struct hb_trace_header {
	uint32_t version, top_k, layers, experts, record_bytes;
	uint8_t artifact[HB_SHA256_BYTES];
	uint8_t text[HB_SHA256_BYTES];
	uint64_t owner;
	uint32_t generation;
	/* every record belongs to this thread (version 2); without it the
	 * shard names no thread (thread 0), as a label shard, which may hold
	 * several, does not */
	bool has_thread;
	uint64_t thread;
};

/* ------------------------------------------------------------ owner and thread ids */

/*
 * Owners and threads are named by text (hebrus-trace(5) OWNER AND THREAD
 * IDS): an unsigned integer in canonical decimal below 2^63 is its own id,
 * so integer ids keep their value; any other text of 1 to
 * HB_TRACE_NAME_MAX bytes with no control byte maps to the first 8 bytes
 * (little-endian) of SHA-256(HB_TRACE_NAME_DOMAIN, a NUL byte, the text)
 * with bit 63 set, so a name never takes an integer's id.  Returns HB_OK,
 * or HB_ERR_INVALID for an empty, too long or control-holding text.  One
 * function for hb-run's --owner/--thread and for transcripts, so a capture
 * and the replay of its transcript agree on the id.
 */
#define HB_TRACE_NAME_MAX 256u
#define HB_TRACE_NAME_DOMAIN "hebrus-name-id/1"
#define HB_TRACE_NAME_BIT (UINT64_C(1) << 63)
int hb_trace_name_id(const char *text, size_t len, uint64_t *id);
/* True when text is an integer that is its own id (canonical decimal < 2^63). */
bool hb_trace_name_is_integer(const char *text, size_t len);

/* Test seam (like hb_fault.h; no binary exposes it): replace the hash of a
 * name (the 64 bits before bit 63 is set) so that tests can make two names
 * collide; NULL restores SHA-256. */
typedef uint64_t (*hb_trace_name_hash_fn)(const char *text, size_t len);
void hb_trace_name_hash_seam(hb_trace_name_hash_fn fn);

struct hb_route {
	uint64_t sequence, ordinal;
	uint32_t layer;
	bool lineage;
	uint64_t proposal;
	int32_t candidate, accepted;
	uint32_t ids[HB_TRACE_MAX_TOPK];
	float weights[HB_TRACE_MAX_TOPK];
};

uint32_t hb_trace_record_bytes(uint32_t top_k);

/* ------------------------------------------------------------ writer */

struct hb_trace_writer;

/* Writes the header at once to fd (a file or a pipe); `what` names it in errors. */
int hb_trace_writer_open(struct hb_trace_writer **out, int fd, const char *what,
			 const struct hb_trace_header *h, uint32_t chunk_records, struct hb_error *err);
int hb_trace_write(struct hb_trace_writer *w, const struct hb_route *r, struct hb_error *err);
/* Flush the pending chunk (also done by close). */
int hb_trace_flush(struct hb_trace_writer *w, struct hb_error *err);
int hb_trace_writer_close(struct hb_trace_writer *w, struct hb_error *err);

/* ------------------------------------------------------------ reader */

/* Return non-zero to stop the walk (that value is returned). */
typedef int (*hb_trace_record_fn)(void *ctx, const struct hb_trace_header *h,
				  const struct hb_route *r);

/*
 * Stream every record of the shard on fd (a file or a pipe) through fn with
 * bounded memory (one chunk).  On a defect err names the shard, the chunk
 * and the last good record ordinal in the shard (records delivered before
 * the defect stay delivered; the caller decides what they are worth).
 */
int hb_trace_read(int fd, const char *what, hb_trace_record_fn fn, void *ctx,
		  struct hb_trace_header *h, uint64_t *records, struct hb_error *err);

#endif
