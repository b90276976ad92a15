/*
 * hb_trace_stats.h: route locality statistics of a trace (hb-trace stats).
 *
 * Owns the streaming statistics of hb-trace(1) STATS: previous-token overlap,
 * adjacent-layer overlap, unique experts per block of B = 1..5 consecutive
 * tokens (U_B), the routed-byte break-even U_B < k * tau(B), and expert
 * popularity skew.  It does not read shards (hb_trace_input.h) or print.
 *
 * Pairing rules (the man page states them as formulas):
 *   - the previous token of (sequence s, token t, layer l) is (s, t - 1, l):
 *     same sequence id, ordinal exactly one less; a token without one is not
 *     counted in the overlap distribution;
 *   - the adjacent-layer pair of (s, t, l), l >= 1, is (s, t, l - 1);
 *   - a block of size B at layer l is the B tokens t-B+1..t of one sequence,
 *     all present (sliding windows, every window counted once).
 * Within one (sequence, layer) ordinals must increase in stream order
 * (trace-order otherwise).  Memory per live sequence is a ring of recent
 * records per layer that grows to at most opts.window ordinals (hb-run's
 * prefill is layer-major, so a prompt of P tokens needs a window > P);
 * popularity counts are layers x experts; nothing grows with tokens.
 */
#ifndef HB_TRACE_STATS_H
#define HB_TRACE_STATS_H

#include "hb_base.h"
#include "hb_err.h"
#include "trace/hb_trace.h"

#define HB_TSTATS_MAX_BLOCK 5u

struct hb_tstats_opts {
	uint32_t window;        /* max ring ordinals per sequence (power of two), default 65536 */
	uint32_t max_sequences; /* live sequences kept, default 64 */
};

/* One layer's (or the overall) figures.  Means are NAN when their count is 0. */
struct hb_tstats_part {
	uint64_t records;
	uint64_t prev_pairs, prev_sum, prev_hist[HB_TRACE_MAX_TOPK + 1];
	double prev_mean;
	uint64_t adj_pairs, adj_sum, adj_hist[HB_TRACE_MAX_TOPK + 1];
	double adj_mean;
	uint64_t blocks[HB_TSTATS_MAX_BLOCK + 1], block_unique[HB_TSTATS_MAX_BLOCK + 1];
	double unique_mean[HB_TSTATS_MAX_BLOCK + 1]; /* U_B, index B */
	uint64_t uses;          /* expert selections counted for popularity */
	uint32_t used;          /* distinct experts (or layer-expert pairs) ever selected */
	uint32_t population;    /* experts (or layers x experts) */
	double entropy_bits;    /* -sum p log2 p over the population */
	double entropy_norm;    /* entropy_bits / log2(population) (0 when population is 1) */
	uint32_t top1_n, top10_n;       /* ceil(1% and 10% of the population) */
	double top1_share, top10_share; /* share of uses held by the top1_n / top10_n */
};

struct hb_tstats_result {
	struct hb_trace_header h;
	uint64_t records, tokens, sequences;
	struct hb_tstats_part overall;
	struct hb_tstats_part *layers; /* h.layers entries, owned by the stats object */
};

struct hb_tstats_breakeven {
	uint32_t block;
	double tau, unique, limit, ratio; /* limit = k * tau, ratio = unique / limit */
	bool saves;                        /* unique < limit */
};

struct hb_tstats;

void hb_tstats_opts_default(struct hb_tstats_opts *o);
int hb_tstats_create(struct hb_tstats **out, const struct hb_trace_header *h,
		     const struct hb_tstats_opts *o, struct hb_error *err);
/* Add one record; `what` and `index` name it in diagnostics. */
int hb_tstats_add(struct hb_tstats *s, const struct hb_route *r, const char *what, uint64_t index,
		  struct hb_error *err);
/* Compute means, entropies and shares; the result stays owned by s. */
const struct hb_tstats_result *hb_tstats_finish(struct hb_tstats *s);
void hb_tstats_free(struct hb_tstats *s);

/* The break-even for block B (1..5) at acceptance length tau (> 0). */
int hb_tstats_break_even(const struct hb_tstats_result *r, uint32_t block, double tau,
			 struct hb_tstats_breakeven *out, struct hb_error *err);

#endif
