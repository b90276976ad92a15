/*
 * hb_convert_int.h: state shared by the converter's files (not public).
 *   hb_convert.c         orchestration, planning, publication
 *   hb_convert_meta.c    GGUF metadata
 *   hb_convert_data.c    dense tensors, PLE rows, reading source matrices
 *   hb_convert_experts.c the expert store: the produce / digest / write /
 *                        read-back pipeline
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

/* Rows [row0, row0 + rows) of matrix `lead` of a (possibly 3-D) tensor whose
 * matrices are R x C. */
struct hb_conv_matrix {
	struct hb_st_ref ref;
	struct hb_st_ref scale;   /* FP8 only */
	bool fp8;
	uint64_t lead, R, C, row0, rows;
};

/* What the expert pipeline measured (seconds; busy times summed over the
 * threads that did the stage). */
struct hb_conv_pipe_stats {
	bool ran, direct_io;
	unsigned producers;        /* threads that read and encode records */
	unsigned slots;            /* records in flight */
	uint64_t window_bytes;     /* buffered: payload bytes synced at a time */
	uint64_t bytes;            /* expert payload bytes written */
	uint64_t src_bytes;        /* expert source bytes read */
	double wall_s, cpu_s;      /* the expert stage, and the process's CPU in it */
	double read_s;             /* source reads (and widening to float32) */
	double encode_s;           /* affine4 / bf16 rounding, or the bf16 NaN scan */
	double digest_s;           /* record digests */
	double payload_s;          /* the whole-payload digest (sequential) */
	double write_s, readback_s;/* the writer and read-back threads */
	unsigned cpus;
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
	bool direct_io;              /* --io: O_DIRECT for the expert payload */
	/* every expert record and padding byte was read back from the file and
	 * equalled the bytes its digests were computed from */
	bool experts_read_back;
	struct hb_conv_pipe_stats pipe;
	/* wall seconds of the writing stages, for the report */
	double dense_s, experts_s, ple_s, header_s, commit_s;
};

int hb_conv_metadata(struct hb_conv *c, struct hb_error *err);
int hb_conv_write_dense(struct hb_conv *c, struct hb_error *err);
int hb_conv_write_experts(struct hb_conv *c, struct hb_error *err);
int hb_conv_write_ple(struct hb_conv *c, struct hb_error *err);
int hb_conv_report(const struct hb_conv *c, cJSON **out, struct hb_error *err);

/* Matrix sources and decoding (hb_convert_data.c), shared with the expert
 * pipeline. */
int hb_conv_find_ref(const struct hb_conv *c, const char *name, struct hb_st_ref *out,
		     struct hb_error *err);
int hb_conv_expert_sources(const struct hb_conv *c, uint32_t layer, uint32_t expert,
			   struct hb_conv_matrix m[3], struct hb_error *err);
/* Read and decode to float32 (raw: scratch of rows * C * source element bytes). */
int hb_conv_decode_rows(const struct hb_conv *c, const struct hb_conv_matrix *m, float *out,
			uint8_t *raw, struct hb_error *err);
void hb_conv_progress(struct hb_conv *c, uint64_t n);
/* The pipeline's bottleneck by its measurements ("source-read", "cpu",
 * "payload-digest", "write", "read-back"), "none" when it did not run. */
const char *hb_conv_pipe_bound(const struct hb_conv_pipe_stats *s);

double hb_conv_now(void);

/* Read a whole (small) tensor as little-endian int64 values. */
int hb_conv_read_i64(const struct hb_conv *c, const char *name, int64_t *out,
		     size_t n, struct hb_error *err);

#endif
