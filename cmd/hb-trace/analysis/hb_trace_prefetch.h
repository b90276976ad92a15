/*
 * hb_trace_prefetch.h: deadline-aware prefetch simulation over a route
 * trace (hb-trace prefetch-sim).
 *
 * Owns the replay of a trace as a sequence of layer steps against the
 * storage model of hb_trace_storage.h, with an LRU expert cache, a
 * prediction staging area, and one of four predictors.  It does not read
 * shards, measure the machine (hb_trace_probe.h) or print.
 *
 * Step model (every record is one step, in stream order):
 *   S  step start = the previous step's end
 *   R  = S + attn_fraction x layer_time: the router knows the exact top-k;
 *      the deadline of every exact record of the step.  Missing records are
 *      read as P0 (a record still in flight as a prediction is promoted to
 *      P0, never read twice).
 *   W  = max(R, the completion of every exact record); exposed wait W - R
 *   E  = W + (1 - attn_fraction) x layer_time
 * Predictors (a predicted record already cached, staged or in flight is
 * not requested again):
 *   none      no prediction
 *   prev      at S of every layer-0 step: for every layer, the experts of
 *             that layer's latest record (the previous token, same layer),
 *             as P2: a whole token of lookahead
 *   adjacent  at R of (s, t, l): the same expert ids for layer l + 1, as P1
 *   oracle    at R of step j: the true experts of step j + 1, as P1
 *   engine    the predicted reads a measured run issued (opts.inject, from
 *             its stream trace), each at the point of the step it was
 *             issued in: before the router at the same offset from S
 *             (at most R), at R, or after the exact records at the same
 *             offset from W (at most E); what the run's own predictor
 *             chose, replayed against the model (the zero-training
 *             router-ahead has no other source: it reads hidden states)
 * A completed prediction waits in staging until the next step of its layer,
 * which consumes it (it enters the cache) or discards it (wasted bytes).
 * Exact reads enter the cache when they complete; the cache is one global
 * LRU of cache_budget records.
 */
#ifndef HB_TRACE_PREFETCH_H
#define HB_TRACE_PREFETCH_H

#include "hb_base.h"
#include "hb_err.h"
#include "trace/hb_trace.h"
#include "hb_trace_storage.h"

enum hb_tpf_predictor { HB_TPF_NONE, HB_TPF_PREV, HB_TPF_ADJACENT, HB_TPF_ORACLE, HB_TPF_ENGINE, HB_TPF_PREDICTORS };

/* Where in its step an engine read was issued. */
enum hb_tpf_phase { HB_TPF_BEFORE_ROUTER = 0, HB_TPF_AT_ROUTER = 1, HB_TPF_AFTER_READY = 2 };

/*
 * One predicted read of a measured run (predictor engine): issued during
 * the step of (token, layer), at phase (offset_ns from the step's start
 * before the router, from its ready point after it; none at the router),
 * for record (target_layer, expert) as class cls (P1 or P2).
 */
struct hb_tpf_inject {
	uint64_t token;
	uint32_t layer, target_layer, expert;
	uint8_t phase, cls;
	uint64_t offset_ns;
};

const char *hb_tpf_predictor_name(enum hb_tpf_predictor p);
int hb_tpf_predictor_parse(const char *name, enum hb_tpf_predictor *out);

/* Timeline events for plots: a step, or a request that completed. */
struct hb_tpf_event {
	bool is_step;
	uint64_t token;              /* index of the token in the stream (layer-0 records before it) */
	uint32_t layer;
	uint64_t start, router, ready, end; /* steps (ns) */
	uint64_t moe;                /* steps: the router starts (simulated: = router) */
	uint64_t exposed;            /* steps: exposed wait (simulated: ready - router) */
	uint32_t tokens;             /* steps: tokens of the chunk (simulated: 1) */
	bool measured;               /* from a stream trace, not the simulation */
	uint32_t expert;             /* requests */
	uint8_t cls;                 /* class at completion (P0 after a promotion) */
	uint8_t cls_issued;          /* class at submission */
	bool predicted, promoted;
	uint64_t submit, done;       /* requests (ns) */
	uint64_t dispatch;           /* requests: a reader starts it (simulated: = submit) */
};
typedef void (*hb_tpf_event_fn)(void *ctx, const struct hb_tpf_event *ev);

struct hb_tpf_opts {
	enum hb_tpf_predictor predictor;
	struct hb_tstore_params storage;
	uint64_t record_bytes;       /* > 0 */
	double layer_time_s;         /* compute per layer step, >= 0 */
	double attn_fraction;        /* [0, 1], default 0.5 */
	uint64_t cache_budget;       /* records; default layers x top_k */
	uint64_t from_token;         /* the window figures count steps of tokens >= this */
	hb_tpf_event_fn event;       /* may be NULL */
	void *event_ctx;
	const struct hb_tpf_inject *inject; /* predictor engine: its reads, any order (copied) */
	size_t ninject;
	hb_tstore_log_fn p0_log;     /* tests: every P0 arrival */
	void *p0_log_ctx;
};

struct hb_tpf_result {
	uint64_t steps, tokens;
	uint64_t exact;              /* exact selections: steps x top_k */
	uint64_t cache_hits;         /* exact records cached at R */
	uint64_t staged_hits;        /* exact records prefetched and complete at R */
	uint64_t late;               /* exact records still in flight as predictions at R */
	uint64_t exact_reads;        /* P0 reads submitted */
	uint64_t predicted_reads, predicted_consumed, predicted_wasted;
	uint64_t exact_bytes, predicted_bytes, consumed_bytes;
	uint64_t exposed_ns, exact_io_ns, end_ns;
	double timely_recall;        /* (cache_hits + staged_hits) / exact */
	double prefetch_recall;      /* staged_hits / (exact - cache_hits) */
	double useful_ratio;         /* consumed_bytes / predicted_bytes */
	double bytes_per_token;      /* (exact_bytes + predicted_bytes) / tokens */
	double read_amplification;   /* (exact_bytes + predicted_bytes) / (exact_bytes + consumed_bytes) */
	double hidden_fraction;      /* 1 - exposed_ns / exact_io_ns */
	double exposed_per_token_s;  /* exposed_ns / tokens / 1e9 */
	uint64_t window_tokens;      /* layer-0 steps of tokens >= from_token */
	uint64_t window_exposed_ns;  /* their steps' exposed wait */
};

struct hb_tpf;

void hb_tpf_opts_default(struct hb_tpf_opts *o);
int hb_tpf_create(struct hb_tpf **out, const struct hb_trace_header *h, const struct hb_tpf_opts *o,
		  struct hb_error *err);
int hb_tpf_add(struct hb_tpf *p, const struct hb_route *r, struct hb_error *err);
int hb_tpf_finish(struct hb_tpf *p, struct hb_tpf_result *out, struct hb_error *err);
void hb_tpf_free(struct hb_tpf *p);

#endif
