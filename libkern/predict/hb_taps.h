/*
 * hb_taps.h: what a running session shows the predictors (AFN-021 Gates
 * 3-4), read out of the graph's observer taps, never computed in the
 * forward pass: shared by hb-replay label (prefill replay) and hb-run
 * (real decode), so that both write the same files.
 *
 *   features      each layer's pre-attention mix (HB_OBS_PRE_ATTN), the
 *                 hyper-connection input mix its attention or GDN reads,
 *                 projected online by libstore/predict's seeded projection
 *                 and written as a feature set (safetensors shards and a
 *                 manifest, each row with its sequence, position, owner and
 *                 thread).
 *   router-ahead  layer l+1's native router (float32 softmax) applied to
 *                 layer l's post-attention mix (HB_OBS_PRE_MOE), the
 *                 zero-training control, as a hebrus-trace(5) predictions
 *                 shard (the first min(64, E) experts, best first).
 *   deadlines     per position and layer the moments (CLOCK_MONOTONIC ns,
 *                 the streaming engine's clock) at which the pre-attention
 *                 mix and the post-attention mix existed and the router
 *                 named its top-k (the exact need time), as JSON
 *                 (hb-run(1) DEADLINES); the input of Gate 4's timely
 *                 recall.
 * Rows are buffered per chunk and written position-major at chunk_done,
 * so the files do not depend on the chunk size.  Silent.
 */
#ifndef HB_TAPS_H
#define HB_TAPS_H

#include "hb_base.h"
#include "hb_err.h"
#include "graph/hb_model.h"
#include "graph/hb_session.h"
#include "predict/hb_predict.h"
#include "stream/hb_stream.h"
#include "trace/hb_trace.h"
#include "hb_pool.h"

struct hb_taps_config {
	const char *features;         /* feature set directory, or NULL */
	const char *router_ahead;     /* DIR for DIR/predictions.hbtrace, or NULL */
	const char *deadlines;        /* JSON file, or NULL */
	uint32_t feature_width;
	uint64_t feature_seed;
	const char *split_name;       /* NULL: "unsplit" */
	uint8_t split_id[32], text[32];
	uint64_t chunk_cap;           /* the largest chunk the session will run */
	/* the router-ahead shard's header lineage (hebrus-trace(5)) */
	uint64_t owner, thread;
	uint32_t generation;
	bool has_thread;
};

struct hb_taps_time {
	uint64_t pos;
	uint32_t layer;
	uint64_t pre_attn_ns, pre_moe_ns, need_ns;
};

struct hb_taps {
	const struct hb_model *m;
	struct hb_pool *pool;
	struct hb_taps_config cfg;
	uint32_t H, L, E, k, C, width;
	uint64_t chunk_cap, chunk_n, pos0, seq, owner, thread, records, feature_bytes, ahead_n, apos0;
	struct hb_route *ahead;            /* the chunk's router-ahead records, [position][layer] */
	float *P, *rows, *logits, *scratch;
	struct hb_feature_writer *fw;
	struct hb_trace_writer *rw;
	struct hb_taps_time *times;        /* deadlines: one per (position, layer) observed */
	size_t n_times, cap_times;
	uint64_t t0_ns, prompt_tokens;
	int rfd, rc;
	char rpath[4096], rtmp[4096];
	struct hb_error err;
};

/* A split id: the SHA-256 of the split.json at path (64 MiB at most). */
int hb_taps_split_id(const char *path, uint8_t id[32], struct hb_error *err);
/* A split name: 1 to 23 of a-z, 0-9, _ and -. */
bool hb_taps_split_name_ok(const char *name);

/* CLOCK_MONOTONIC in ns: the streaming engine's clock. */
uint64_t hb_taps_now_ns(void);

/* Open what cfg asks for (nothing is written before close publishes). */
int hb_taps_open(struct hb_taps *tp, const struct hb_taps_config *cfg, const struct hb_model *m,
		 struct hb_pool *pool, struct hb_error *err);
/* The lineage of the rows that follow. */
void hb_taps_sequence(struct hb_taps *tp, uint64_t sequence, uint64_t owner, uint64_t thread);
/* An hb_observe_fn's event (other kinds are ignored). */
void hb_taps_observe(struct hb_taps *tp, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data);
/* After each successful chunk: its rows to the files. */
int hb_taps_chunk_done(struct hb_taps *tp, struct hb_error *err);
/* Flush and publish (ok) or discard; frees what open took; xs (may be
 * NULL) gives the deadlines file the engine's measured read latency. */
int hb_taps_close(struct hb_taps *tp, bool ok, const struct hb_xs_stats *xs, struct hb_error *err);

#endif
