/*
 * hb_convert_int.h: state shared by the converter's files (not public).
 *   hb_convert.c         orchestration, planning, publication
 *   hb_convert_meta.c    GGUF metadata
 *   hb_convert_data.c    dense tensors, experts, PLE rows
 *   hb_convert_report.c  the JSON report
 */
#ifndef HB_CONVERT_INT_H
#define HB_CONVERT_INT_H

#include "hb_base.h"
#include "hb_convert.h"
#include "expert/hb_expert_store.h"
#include "gguf/hb_gguf.h"
#include "model/hb_inventory.h"
#include "model/hb_ple_hash.h"
#include "ple/hb_ple_store.h"
#include "hb_pool.h"
#include "model/hb_profile.h"
#include "hb_publish.h"
#include "model/hb_qwen_config.h"
#include "checkpoint/hb_safetensors.h"

/* One dense artifact tensor and where its bytes come from. */
struct hb_conv_dense {
	const struct hb_inv_entry *entry;  /* the weight */
	const struct hb_inv_entry *scale;  /* FP8 scale companion, or NULL */
	struct hb_st_ref src;
	struct hb_st_ref scale_src;
	uint32_t ggml_type;
	uint64_t nbytes;
	size_t gguf_index;
};

struct hb_conv {
	const struct hb_convert_opts *o;
	struct hb_qwen_config cfg;
	const struct hb_profile *profile;
	uint8_t config_sha[HB_SHA256_BYTES];
	struct hb_st_checkpoint ck;
	bool ck_open;
	struct hb_inv_source *sources;
	struct hb_inventory inv;
	bool inv_built;
	struct hb_ple_table_hash ple_hash[HB_QWEN_MAX_LAYERS];
	uint8_t ple_hash_digest[HB_SHA256_BYTES];
	bool seed_confirmed_by_buffers;
	/* text assets (NULL when absent) */
	char *tokenizer_json;
	size_t tokenizer_len;
	uint8_t tokenizer_sha[HB_SHA256_BYTES];
	char *chat_template;
	size_t template_len;
	uint8_t template_sha[HB_SHA256_BYTES];
	/* plan */
	struct hb_conv_dense *dense;
	size_t n_dense;
	struct hb_em_geometry em_geom;
	struct hb_em_layout em_plan;
	bool em_planned;
	struct hb_ple_layout ple_layout;
	bool has_ple;
	const char *expert_source_dtype;
	const char *ple_source_dtype;
	struct hb_gguf_writer gw;
	size_t em_index, ple_index;  /* GGUF tensor indices of the stores */
	/* results */
	struct hb_em_layout em_final;
	bool em_finished;
	uint8_t ple_payload_sha[HB_SHA256_BYTES];
	uint8_t ple_manifest_sha[HB_SHA256_BYTES];
	uint64_t bytes_written;
	struct hb_pool *pool;        /* --threads workers */
	struct hb_publish pub;
	bool pub_open;
	uint8_t *record_sha;         /* 32 x layers x experts, filled while writing */
	double expert_max_abs_error; /* affine4 or rounding, measured */
	bool experts_rounded;
	bool ple_rounded;
};

int hb_conv_metadata(struct hb_conv *c, struct hb_error *err);
int hb_conv_write_dense(struct hb_conv *c, struct hb_error *err);
int hb_conv_write_experts(struct hb_conv *c, struct hb_error *err);
int hb_conv_write_ple(struct hb_conv *c, struct hb_error *err);
int hb_conv_report(const struct hb_conv *c, cJSON **out, struct hb_error *err);

/* Read a whole (small) tensor as little-endian int64 values. */
int hb_conv_read_i64(const struct hb_conv *c, const char *name, int64_t *out,
		     size_t n, struct hb_error *err);

#endif
