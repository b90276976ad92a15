/*
 * hb_trace_cache.h: expert-cache simulators over a route trace
 * (hb-trace cache-sim).
 *
 * Owns the replay of a trace's expert accesses against caches of given
 * budgets, per layer or global, for every policy below, and the hit rates
 * and bytes read it yields.  It does not read shards or print.
 *
 * The access stream: each record contributes its top_k (layer, expert)
 * keys in rank order, records in stream order.  A budget of C experts is
 * one cache of C records (global) or, per layer, one cache of floor(C / L)
 * records for each of the L layers.  Every policy except Belady inserts
 * every missed record (demand caching); Belady may bypass, which makes it
 * the upper bound of every demand policy at the same budget.
 *
 *   lru         evict the least recently used
 *   lfu         evict the fewest uses since the start of the trace (counts
 *               survive eviction), ties to the least recently used
 *   lfu-decay   the same with counts halving every half_life_tokens tokens
 *   score       AFN-019 stall per byte: evict the least
 *               P(use before eviction) x latency avoided / bytes; see
 *               hb-trace(1) for the estimator
 *   belady      Belady/MIN with bypass: evict (or do not insert) the record
 *               whose next use is farthest; needs a second pass and a
 *               temporary file of 8 bytes per access (next-use indexes),
 *               plus 8 bytes per (layer, expert) key in memory
 * Memory otherwise: a few arrays of layers x experts per policy and budget.
 */
#ifndef HB_TRACE_CACHE_H
#define HB_TRACE_CACHE_H

#include "hb_base.h"
#include "hb_err.h"
#include "trace/hb_trace.h"

enum hb_tcache_policy {
	HB_TC_LRU,
	HB_TC_LFU,
	HB_TC_LFU_DECAY,
	HB_TC_SCORE,
	HB_TC_BELADY,
	HB_TC_POLICIES
};
#define HB_TC_ALL ((1u << HB_TC_POLICIES) - 1)

const char *hb_tcache_policy_name(enum hb_tcache_policy p);
/* HB_OK and *out, or HB_ERR_INVALID for an unknown name. */
int hb_tcache_policy_parse(const char *name, enum hb_tcache_policy *out);

struct hb_tcache_opts {
	bool per_layer;
	uint64_t record_bytes;     /* bytes per expert record; 0 = unknown */
	double half_life_tokens;   /* lfu-decay, > 0 (default 32) */
	double latency_s;          /* score: per-request latency (default 100e-6) */
	double bandwidth;          /* score: bytes per second (default 2e9) */
	uint32_t policies;         /* bit mask of enum hb_tcache_policy */
	const uint64_t *budgets;   /* experts, any order */
	size_t nbudgets;
	unsigned threads;          /* simulations run in parallel; 0 = 1 */
	uint64_t seed;             /* score policy's eviction sample */
};
void hb_tcache_opts_default(struct hb_tcache_opts *o);

struct hb_tcache_cell {
	enum hb_tcache_policy policy;
	uint64_t budget;           /* experts, as given */
	uint64_t scope_budget;     /* records per cache (per layer: budget / layers) */
	uint64_t accesses, hits, misses;
	double hit_rate;           /* hits / accesses */
	double misses_per_token;   /* misses / tokens */
	double bytes_per_token;    /* misses x record_bytes / tokens; NAN if unknown */
};

struct hb_tcache_result {
	uint64_t records, tokens, accesses;
	size_t ncells;             /* policies in enum order, budgets ascending */
	struct hb_tcache_cell *cells;
};

struct hb_tcache;

int hb_tcache_create(struct hb_tcache **out, const struct hb_trace_header *h,
		     const struct hb_tcache_opts *o, struct hb_error *err);
/* First pass: every record, in order. */
int hb_tcache_add(struct hb_tcache *c, const struct hb_route *r, struct hb_error *err);
/* Whether Belady asked for a second pass over the same records. */
bool hb_tcache_wants_second_pass(const struct hb_tcache *c);
int hb_tcache_begin_second(struct hb_tcache *c, struct hb_error *err);
int hb_tcache_add_second(struct hb_tcache *c, const struct hb_route *r, struct hb_error *err);
/* Tokens are the records of layer 0; every layer must have as many records
 * (trace-order otherwise), since a per-token figure needs whole tokens. */
int hb_tcache_finish(struct hb_tcache *c, const struct hb_tcache_result **out,
		     struct hb_error *err);
void hb_tcache_free(struct hb_tcache *c);

#endif
