/*
 * hb_replay_int.h: what the hb_replay*.c files share and nobody else uses:
 * the label-shard manifest (read side), shard naming and sizing.
 */
#ifndef HB_REPLAY_INT_H
#define HB_REPLAY_INT_H

#include "hb_replay.h"

#define HB_REPLAY_MANIFEST_FORMAT "hebrus-replay-labels/1"
#define HB_REPLAY_HIDDEN_FORMAT "hebrus-replay-hidden/1"
#define HB_REPLAY_HIDDEN_MAGIC "HBHIDDN1"
/* sidecar: 48-byte fixed header, u32 layer[n], u32 CRC-32 of all before it;
 * then samples of 24 header bytes and n x width float32 */
#define HB_REPLAY_HIDDEN_FIXED 48u
#define HB_REPLAY_HIDDEN_SAMPLE_HEAD 24u

struct hb_replay_range {
	uint64_t sequence, owner, thread, turn, first, end, length;
	uint8_t tokens_sha[32];
};

struct hb_replay_manifest {
	uint64_t shard, worker, workers, owner, generation, top_k, layers, experts;
	uint64_t max_shard_bytes, bytes, records;
	uint8_t artifact[32], text[32], sha[32];
	struct hb_replay_range *ranges;
	size_t n_ranges;
	/* "hidden" (absent: nothing captured) */
	bool has_hidden;
	uint64_t hidden_positions, hidden_hc, hidden_width, hidden_samples, hidden_bytes;
	uint32_t *hidden_layers;
	size_t n_hidden_layers;
	uint8_t hidden_sha[32];
};

int hb_replay_manifest_load(const char *path, struct hb_replay_manifest *m, struct hb_error *err);
void hb_replay_manifest_release(struct hb_replay_manifest *m);
/* The shard file (and its .hbhidden sidecar when the manifest records one)
 * has the manifest's size and SHA-256 ("replay-manifest"). */
int hb_replay_manifest_check_shard(const struct hb_replay_manifest *m, const char *shard, struct hb_error *err);

/* Bytes of a shard holding `records` records (chunks of 4096). */
uint64_t hb_replay_shard_bytes(uint64_t records, uint32_t record_bytes);
/* Bytes of a sidecar of n_layers layers holding `samples` samples. */
uint64_t hb_replay_hidden_bytes(uint64_t samples, size_t n_layers, uint64_t width);
/* Stream every record of the *.hbtrace shards of path (a file or a
 * directory, hb_replay_list_shards) through fn; none is an error
 * (replay-coverage).  When fn stops a walk, *cb_rc (its own error) is
 * returned. */
int hb_replay_read_shards(const char *path, hb_trace_record_fn fn, void *ctx, const int *cb_rc,
			  struct hb_error *err);
void hb_replay_shard_name(char *buf, size_t len, const struct hb_label_config *c, uint64_t k, const char *ext);

/* hb_replay_recs.c: every record of the shards of a path, sorted by
 * (sequence, position, layer); ids and w point into the arrays */
struct hb_replay_rec {
	uint64_t seq, pos;
	uint32_t layer;
	uint32_t *ids;
	float *w;
};

struct hb_replay_recs {
	struct hb_trace_header h;
	bool have_h;
	struct hb_replay_rec *r;
	uint32_t *ids;
	float *ws;
	size_t n, cap;
	uint32_t k;
	int rc;
	struct hb_error *err;
	const char *what;
};
int hb_replay_recs_load(const char *path, struct hb_replay_recs *R, struct hb_error *err);
void hb_replay_recs_release(struct hb_replay_recs *R);
const struct hb_replay_rec *hb_replay_recs_find(const struct hb_replay_recs *R, uint64_t seq, uint64_t pos,
					       uint32_t layer);

/* hb_replay_timely.c: hb-run's measured deadlines (Gate 4) */
struct hb_timely_rec {
	uint64_t seq, pos;
	uint32_t layer;
	double pre_attn_ns, pre_moe_ns, need_ns;
};
struct hb_timely;
/* read_ns > 0 overrides the files' measured read latency (the largest p50) */
int hb_timely_load(const char *const *files, size_t n, double read_ns, struct hb_timely **out, struct hb_error *err);
void hb_timely_free(struct hb_timely *t);
const struct hb_timely_rec *hb_timely_find(const struct hb_timely *t, uint64_t seq, uint64_t pos, uint32_t layer);
/* pos of seq is a decode step (at or after its prompt) */
bool hb_timely_decode_step(const struct hb_timely *t, uint64_t seq, uint64_t pos);
double hb_timely_read_ns(const struct hb_timely *t);
uint32_t hb_timely_depth(const struct hb_timely *t);

#endif
