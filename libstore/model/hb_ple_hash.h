/*
 * hb_ple_hash.h: the PLE n-gram hash identity, recomputed from config.json.
 *
 * Upstream (Qwen4ExpTextNGramEmbedding) derives, per PLE layer, three things
 * from config values alone: the splitmix64-based odd multipliers (one per
 * n-gram position, from `seed` and the layer's PLE index), the prime size of
 * every hash head (consecutive primes from ngram_vocab_size_base, numbered
 * globally across PLE layers), and the heads' cumulative offsets.  The table
 * is padded to a multiple of make_ngram_vocab_size_divisible_by rows.  The
 * checkpoint stores these as buffers; the converter recomputes them and
 * requires equality, so a changed seed or base can never produce silently
 * different row ids.
 */
#ifndef HB_PLE_HASH_H
#define HB_PLE_HASH_H

#include "hb_base.h"
#include "hb_err.h"
#include "hb_qwen_config.h"
#include "hb_sha256.h"

#define HB_PLE_MAX_NGRAM 8
#define HB_PLE_MAX_HEADS 64

struct hb_ple_table_hash {
	uint32_t layer_id;        /* one-indexed decoder layer */
	uint32_t ple_index;       /* position among PLE layers */
	uint32_t ngram_size;
	uint32_t heads;           /* (ngram_size - 1) * heads_per_ngram */
	uint64_t multipliers[HB_PLE_MAX_NGRAM];
	uint64_t head_sizes[HB_PLE_MAX_HEADS];
	uint64_t head_offsets[HB_PLE_MAX_HEADS];
	uint64_t logical_rows;    /* sum of head sizes */
	uint64_t physical_rows;   /* padded to the divisor */
	uint64_t row_width;       /* ple_embed_dim / heads */
};

uint64_t hb_splitmix64(uint64_t x);
/* Deterministic trial division, as upstream's _is_prime. */
bool hb_is_prime(uint64_t v);

/* Recompute the hash identity of PLE layer `ple_index` of cfg. */
int hb_ple_hash_compute(const struct hb_qwen_config *cfg, size_t ple_index,
			struct hb_ple_table_hash *out, struct hb_error *err);

/*
 * SHA-256 over a canonical little-endian serialisation of every PLE table's
 * identity ("hebrus.ple-hash.v1", seed, eos, then per table: layer id,
 * n-gram size, heads, multipliers, head sizes, head offsets, logical and
 * physical rows, row width).  The PLE store carries it; admission recomputes
 * it from the artifact's metadata.
 */
int hb_ple_hash_digest(const struct hb_qwen_config *cfg,
		       uint8_t out[HB_SHA256_BYTES], struct hb_error *err);

#endif
