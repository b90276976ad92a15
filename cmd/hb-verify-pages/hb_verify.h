/*
 * hb_verify.h: prove the payload bytes of an admitted artifact, page by
 * page and record by record.
 *
 * Admission deliberately reads no payload; this reads all of it (or a
 * selected range or a seeded sample): every PLE page (its duplicated header,
 * zero fill and SHA-256 against the manifest's digest table), the PLE
 * whole-payload digest, every expert record's SHA-256 against the record
 * digest table in the metadata, and the expert store's whole-payload digest.
 * Every bad page or record is reported and verification continues; a file
 * that cannot be read stops it at once.
 *
 * The payload is read in large chunks; reading the next chunk, hashing the
 * current chunk into the whole-payload digest, and the per-page or
 * per-record digests of the current chunk run as parallel jobs on a pool.
 */
#ifndef HB_VERIFY_H
#define HB_VERIFY_H

#include "hb_base.h"
#include "hb_err.h"
#include "hb_sha256.h"

/* X(symbol, "id", "meaning"): the verifier's own findings.  Page, fill and
 * digest findings of the PLE store keep the store's ple-* ids, and the
 * whole-payload findings ple-payload-digest / em-payload-digest.
 * STABILITY: ids are never renamed or reused. */
#define HB_VERIFY_DIAGS(X)                                                        \
	X(RECORD_DIGEST, "verify-record-digest", "an expert record does not match its digest") \
	X(RANGE, "verify-range", "the --pages range lies outside the PLE store")

enum hb_verify_diag {
#define HB_VERIFY_ENUM_(sym, id, meaning) HB_VERIFY_##sym,
	HB_VERIFY_DIAGS(HB_VERIFY_ENUM_)
#undef HB_VERIFY_ENUM_
	HB_VERIFY_DIAG_COUNT
};

const char *hb_verify_diag_id(enum hb_verify_diag d);

struct hb_verify_opts {
	const char *path;
	unsigned threads;          /* 0: all CPUs */
	bool ple, experts;         /* which stores to verify */
	bool range;                /* PLE pages [first, last] only */
	uint64_t first, last;
	uint64_t sample;           /* >0: that many random pages and records */
	uint64_t seed;
	size_t chunk_bytes;        /* 0: default (32 MiB); tests use small values */
};

struct hb_verify_finding {
	const char *store;         /* "ple" or "experts" */
	const char *kind;          /* "page", "record" or "payload" */
	uint64_t index;            /* page, or global record (layer * experts + expert) */
	int64_t layer, expert;     /* -1 for pages and payloads */
	char expected[HB_SHA256_HEX];
	char found[HB_SHA256_HEX]; /* "" when the check failed before hashing */
	struct hb_error err;       /* id, field path, file offset, message */
};

typedef void (*hb_verify_fn)(void *ctx, const struct hb_verify_finding *f);

struct hb_verify_stats {
	bool not_admitted;         /* admission rejected it; err holds why */
	bool has_ple;
	uint64_t ple_pages, ple_checked, ple_bad;
	bool ple_payload_checked, ple_payload_ok;
	uint64_t records, records_checked, records_bad;
	bool em_payload_checked, em_payload_ok;
	uint64_t bytes_read, bytes_hashed;
	uint64_t findings;
};

/*
 * Returns 0 when everything selected verified; HB_ERR_DIGEST when findings
 * were reported through cb (err holds the first); an admission rejection's
 * code (err holds its diagnostic) when the artifact is not admissible; a
 * system error (HB_ERR_IO, ...) when the file could not be read.
 */
int hb_verify(const struct hb_verify_opts *o, hb_verify_fn cb, void *ctx,
	      struct hb_verify_stats *stats, struct hb_error *err);

#endif
