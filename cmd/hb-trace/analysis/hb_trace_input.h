/*
 * hb_trace_input.h: reading a set of route trace shards as one stream.
 *
 * Owns what every hb-trace analysis shares: opening the shards in order
 * ("-" is standard input, at most once), refusing a set whose headers
 * disagree on top_k, layers, experts or artifact digest, refusing a record
 * that names one expert twice, and spooling standard input to an unlinked
 * temporary file when an analysis needs a second pass (Belady).  It does
 * not own the byte layout (hb_trace.h) nor any statistic.
 *
 * Memory is one chunk of the shard reader plus the caller's state: nothing
 * here grows with the number of records.
 */
#ifndef HB_TRACE_INPUT_H
#define HB_TRACE_INPUT_H

#include "hb_base.h"
#include "hb_err.h"
#include "trace/hb_trace.h"

/* X(symbol, "id", "meaning"): diagnostics of the analyses (hb-trace(1)). */
#define HB_TRACE_INPUT_DIAGS(X)                                                          \
	X(MISMATCH, "trace-mismatch", "shards disagree on top_k, layers, experts or artifact") \
	X(DUPLICATE, "trace-duplicate", "a record names one expert twice, or a token twice")  \
	X(ORDER, "trace-order", "a sequence's ordinals go backwards within a layer")         \
	X(WINDOW, "trace-window", "a pairing needs a record older than the window")          \
	X(ARTIFACT, "trace-artifact", "the artifact is not the one the trace names")         \
	X(STDIN, "trace-stdin", "standard input named twice")

enum hb_trace_input_diag {
#define HB_TRACE_INPUT_ENUM_(sym, id, meaning) HB_TRI_##sym,
	HB_TRACE_INPUT_DIAGS(HB_TRACE_INPUT_ENUM_)
#undef HB_TRACE_INPUT_ENUM_
	HB_TRI_COUNT
};
const char *hb_trace_input_diag_id(enum hb_trace_input_diag d);

struct hb_trace_set {
	const char *const *paths; /* "-" is standard input */
	size_t n;
	int stdin_fd;             /* -1, or the spooled copy of standard input */
	struct hb_trace_header h; /* the shared header, after the first scan */
	bool have_header;
};

/* paths must outlive the set.  Refuses "-" twice (trace-stdin). */
int hb_trace_set_init(struct hb_trace_set *s, const char *const *paths, size_t n,
		      struct hb_error *err);
/* Copy standard input to an unlinked file under $TMPDIR so that the set can
 * be scanned again; a no-op when no path is "-". */
int hb_trace_set_spool(struct hb_trace_set *s, struct hb_error *err);
void hb_trace_set_release(struct hb_trace_set *s);

/* Per-record callback: shard is the index into paths, index the record's
 * position in the whole stream (0-based). */
typedef int (*hb_trace_set_fn)(void *ctx, size_t shard, uint64_t index,
			       const struct hb_trace_header *h, const struct hb_route *r);

/*
 * Stream every record of every shard, in order, through fn.  Headers must
 * agree with the first shard's (trace-mismatch names the field); a record
 * listing an expert twice is trace-duplicate.  A second scan of a set whose
 * standard input was not spooled fails (HB_ERR_INVALID).  *records (may be
 * NULL) is the number delivered.
 */
int hb_trace_set_scan(struct hb_trace_set *s, hb_trace_set_fn fn, void *ctx,
		      uint64_t *records, struct hb_error *err);

#endif
