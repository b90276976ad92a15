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
 * The payload is read once, in large sequential requests, by a reader
 * thread; the calling thread extends the whole-payload digest with it in
 * order while threads - 1 workers hash and check pages and records, and
 * every byte is hashed once per digest kind (hb_verify_stream.c).
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
	size_t chunk_bytes;        /* 0: default (8 MiB); tests use small values */
	bool direct_io;            /* full mode reads with O_DIRECT where the file
				    * system allows it (stats.direct_io says);
				    * hb-verify-pages sets it unless --io buffered */
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
	/* full mode: how the payload was read, and each stage's busy time
	 * summed over both stores (units_s over every thread that checked
	 * units; unit_threads workers besides the payload thread, at least 1) */
	bool direct_io;
	double wall_s, read_s, payload_s, units_s;
	unsigned unit_threads;
	unsigned readers;          /* reader threads (read_s is summed over them) */
};

/*
 * Which stage of full mode was busiest for its share of the wall time:
 * "read" (read_s / (wall_s x readers)), "payload-digest" (payload_s / wall_s) or
 * "unit-digests" (units_s / (wall_s x unit_threads)); "none" when full mode
 * did not run.  A stage starved of CPU by other processes counts as busy:
 * it is what the run waited for.
 */
const char *hb_verify_bound(const struct hb_verify_stats *st);

/*
 * Returns 0 when everything selected verified; HB_ERR_DIGEST when findings
 * were reported through cb (err holds the first); an admission rejection's
 * code (err holds its diagnostic) when the artifact is not admissible; a
 * system error (HB_ERR_IO, ...) when the file could not be read.
 */
int hb_verify(const struct hb_verify_opts *o, hb_verify_fn cb, void *ctx,
	      struct hb_verify_stats *stats, struct hb_error *err);

#endif
