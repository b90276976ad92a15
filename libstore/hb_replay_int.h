/*
 * hb_replay_int.h: what the hb_replay*.c files share and nobody else uses:
 * the label-shard manifest (read side), shard naming and sizing.
 */
#ifndef HB_REPLAY_INT_H
#define HB_REPLAY_INT_H

#include "hb_replay.h"

#define HB_REPLAY_MANIFEST_FORMAT "hebrus-replay-labels/1"

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
};

int hb_replay_manifest_load(const char *path, struct hb_replay_manifest *m, struct hb_error *err);
void hb_replay_manifest_release(struct hb_replay_manifest *m);
/* The shard file has the manifest's size and SHA-256 ("replay-manifest"). */
int hb_replay_manifest_check_shard(const struct hb_replay_manifest *m, const char *shard, struct hb_error *err);

/* Bytes of a shard holding `records` records (chunks of 4096). */
uint64_t hb_replay_shard_bytes(uint64_t records, uint32_t record_bytes);
void hb_replay_shard_name(char *buf, size_t len, const struct hb_label_config *c, uint64_t k, const char *ext);

#endif
