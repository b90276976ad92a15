/*
 * hb_qwen_config.h: a Qwen4Exp config.json read with upstream's semantics.
 *
 * transformers 5.17.0 (configuration_qwen4_exp.py) is the authority for what
 * every field means, its default when absent, and which combinations are
 * valid.  This module resolves the raw file into the values the model
 * actually uses and records only those: sparse-attention layers spelled
 * "full_attention" (as the released checkpoint spells them) resolve to
 * sparse attention, an absent output_gate_type resolves to hidden_act, an
 * absent ple_embed_dim to hidden_size.  A converter that keyed on the raw
 * spelling would run sparse layers as dense attention.
 *
 * Unknown keys are refused (diagnostic "cfg-unknown-key") except for a short
 * documented list of keys upstream accepts and ignores for the text model;
 * a new field with meaning must never be dropped silently.
 *
 * It does not know tensor names (hb_inventory) or profiles (hb_profile).
 */
#ifndef HB_QWEN_CONFIG_H
#define HB_QWEN_CONFIG_H

#include "hb_base.h"
#include "hb_err.h"
#include <cJSON.h>

#define HB_QWEN_MAX_LAYERS 256
#define HB_QWEN_MAX_EOS 8

enum hb_layer_kind {
	HB_LAYER_LINEAR = 1, /* Gated DeltaNet, "linear_attention" */
	HB_LAYER_SPARSE = 2, /* QSA, "qwen_sparse_attention" (or "full_attention") */
};

enum hb_act {
	HB_ACT_SILU = 1,
	HB_ACT_SIGMOID = 2,
};

struct hb_qwen_config {
	/* embedding and shape */
	uint64_t vocab_size;          /* physical rows of embed_tokens/lm_head */
	uint64_t hidden_size;
	uint64_t num_layers;
	uint64_t num_heads, num_kv_heads, head_dim;
	uint64_t max_position_embeddings;
	double rms_norm_eps;
	bool attention_bias;
	bool tie_word_embeddings;
	enum hb_act hidden_act;
	/* rotary */
	double rope_theta;
	double partial_rotary_factor;
	uint64_t rotary_dim;          /* int(head_dim * partial_rotary_factor) */
	uint64_t mrope_section[3];
	bool mrope_interleaved;
	/* layers */
	uint8_t layer_kind[HB_QWEN_MAX_LAYERS];
	bool full_attention_spelling; /* the raw file said "full_attention" */
	/* Gated DeltaNet */
	uint64_t linear_conv_kernel, linear_key_head_dim, linear_value_head_dim;
	uint64_t linear_num_key_heads, linear_num_value_heads;
	enum hb_act output_gate;      /* resolved: output_gate_type or hidden_act */
	bool output_gate_explicit;    /* output_gate_type was present */
	/* MoE */
	uint64_t num_experts, num_experts_per_tok;
	uint64_t moe_intermediate_size, shared_expert_intermediate_size;
	bool norm_topk_prob;
	/* hyper-connections */
	uint64_t hc_count, hc_lowrank;
	/* PLE */
	uint32_t ple_layer_ids[HB_QWEN_MAX_LAYERS]; /* one-indexed, sorted, unique */
	size_t n_ple_layers;
	uint64_t ple_embed_dim;       /* resolved: default hidden_size */
	bool ple_embed_dim_explicit;
	uint64_t ple_conv_kernel_size, ngram_size, heads_per_ngram;
	uint64_t ngram_vocab_size_base, ngram_vocab_divisor, split_ngram_parts;
	uint64_t seed;
	bool seed_present;            /* false: upstream's default 1234 was used */
	/* QSA indexer */
	bool qsa;                     /* all five indexer fields present */
	uint64_t indexer_n_heads, indexer_kv_heads, indexer_head_dim;
	uint64_t indexer_budget, indexer_compress_ratio;
	/* special ids */
	int64_t eos_token_ids[HB_QWEN_MAX_EOS];
	size_t n_eos;
	bool has_pad_token_id, has_bos_token_id;
	int64_t pad_token_id, bos_token_id;
	/* top level */
	bool has_vision_config;
	int64_t image_token_id, video_token_id, vision_start_token_id, vision_end_token_id;
	/* quantization_config: only FP8 E4M3 with square blocks is understood */
	bool fp8;
	uint64_t fp8_block_rows, fp8_block_cols;
};

/* Parse a whole config.json document; err names the offending field. */
int hb_qwen_config_parse(const cJSON *root, struct hb_qwen_config *cfg,
			 struct hb_error *err);
int hb_qwen_config_load(const char *path, struct hb_qwen_config *cfg,
			struct hb_error *err);

/* n-gram heads per PLE layer: (ngram_size - 1) * heads_per_ngram. */
uint64_t hb_qwen_ngram_heads(const struct hb_qwen_config *cfg);
/* Index of one-indexed decoder layer `layer1` among PLE layers, or -1. */
int hb_qwen_ple_index(const struct hb_qwen_config *cfg, uint32_t layer1);
const char *hb_layer_kind_name(enum hb_layer_kind kind);
const char *hb_act_name(enum hb_act act);

#endif
