/*
 * hb_model.h: an admitted artifact, mapped for execution.
 *
 * Loading runs admission first (the same code as hb-admit, refusing what it
 * refuses), then maps the file read-only: dense weights are used in place
 * through struct hb_wmat views, routed-expert records are addressed inside
 * the mapped ExpertMajor store, and PLE rows are read only through the
 * verified single-snapshot API of the PLE store (hb_ple_row_read_f32).
 * Small vectors (norm weights, biases, convolution taps) are widened to
 * float32 copies owned by the model.
 */
#ifndef HB_MODEL_H
#define HB_MODEL_H

#include "hb_base.h"
#include "hb_err.h"
#include "expert/hb_expert_store.h"
#include "backend/hb_backend.h"
#include "model/hb_ple_hash.h"
#include "ple/hb_ple_store.h"
#include "model/hb_qwen_config.h"
#include "stream/hb_stream.h"
#include "stream/hb_stream_predict.h"

struct hb_hc_weights {
	float *norm;                      /* [hc*H] */
	struct hb_wmat down, up, inject;  /* inject.data NULL for the mixer */
};

struct hb_gdn_weights {
	struct hb_wmat qkv, z, b, a, out;
	float *conv;                      /* [conv_dim][K] */
	float *dt_bias, *A_log;           /* [nv] */
	float *norm;                      /* [head_v_dim] */
};

struct hb_qsa_weights {
	struct hb_wmat q, k, v, o, index_qk;
	float *q_bias, *k_bias, *v_bias, *o_bias; /* NULL without attention_bias */
	float *q_norm, *k_norm;           /* [head_dim] */
	float *index_q_norm, *index_k_norm;/* [index_head_dim] */
};

struct hb_moe_weights {
	struct hb_wmat router;            /* [E][H] */
	struct hb_wmat shared_gate, shared_up, shared_down, shared_gate_w;
};

struct hb_ple_weights {
	int index;                        /* position among PLE layers */
	struct hb_ple_table_hash hash;
	uint64_t first_row;               /* the table's first global row */
	struct hb_wmat key, value;
	float *norm_key, *norm_query, *norm_conv; /* [hc*H] */
	float *conv;                      /* [hc*H][K] */
};

struct hb_layer_weights {
	uint8_t kind;                     /* enum hb_layer_kind */
	struct hb_hc_weights attn_hc, mlp_hc;
	struct hb_gdn_weights gdn;
	struct hb_qsa_weights qsa;
	struct hb_moe_weights moe;
	bool has_ple;
	struct hb_ple_weights ple;
};

/*
 * How the artifact's bytes become the weights' memory: mapped from the
 * page cache (shared with other processes, no copy, faulted in or
 * prefaulted), or read into the process's own memory at load (a snapshot;
 * on the 2-core virtual machines this project measures on, products read
 * it faster: bench/README.md).  The PLE page store is never in either
 * (its rows are read through verified page snapshots, AFN-003).
 */
enum hb_weights_mode { HB_WEIGHTS_MAP = 0, HB_WEIGHTS_READ = 1 };

struct hb_model {
	char *path;
	struct hb_qwen_config cfg;
	char profile[64], status[64];
	int fd;
	const uint8_t *map;               /* the artifact's bytes, as weights_mode made them */
	size_t map_len;
	enum hb_weights_mode weights_mode;
	double weights_read_seconds;      /* HB_WEIGHTS_READ: how long the read took */
	struct hb_wmat embed, lm_head;
	struct hb_hc_weights mixer;
	struct hb_layer_weights *layers;
	/* routed experts */
	struct hb_em_layout em;
	const uint8_t *em_base;           /* the store inside the mapping */
	size_t em_len;                    /* its bytes */
	enum hb_wtype expert_type;
	/* --expert-cache other than all: the routed experts come from this
	 * engine (AFN-019), never from em_base; NULL: resident in the mapping */
	struct hb_xs *xs;
	enum hb_xs_predictor xs_predict;  /* what feeds the engine P1/P2 */
	uint32_t xs_ahead_width;          /* router-ahead: the hints a token and layer (0: top-k) */
	/* PLE */
	struct hb_ple_store *ple;
	size_t ple_off, ple_len;          /* its page store in the mapping (never read there) */
	/* rotary */
	float *inv_freq;                  /* [rotary_dim / 2] */
	/* text domain (AFN-005): physical rows vs sampleable ids */
	uint64_t vocab_physical, vocab_semantic;
	uint32_t *stop_ids; /* the artifact's whole stop set (admission pins it) */
	size_t n_stop;
	uint8_t artifact_sha[32];         /* identity of the admitted artifact's header */
	/* text assets, copied from the metadata (NULL when the artifact has
	 * none): tokenizer.huggingface.json and tokenizer.chat_template,
	 * NUL-terminated, the NUL not counted in the length */
	char *tokenizer_json, *chat_template;
	size_t tokenizer_json_len, chat_template_len;
};

/* Admit path and map it (HB_WEIGHTS_MAP) or read it (HB_WEIGHTS_READ, the
 * PLE page store left out).  err holds admission's diagnostic on refusal.
 * hb_model_load maps. */
int hb_model_load_mode(const char *path, enum hb_weights_mode mode, struct hb_model **out, struct hb_error *err);
int hb_model_load(const char *path, struct hb_model **out, struct hb_error *err);
void hb_model_free(struct hb_model *m);

/*
 * --expert-cache SIZE (hb_xs_budget_parse: bytes, N%, or all): when SIZE is
 * not "all" (nor NULL), open a streaming engine over the model's own
 * artifact with cfg (its budget_bytes set from SIZE) and predictor pred;
 * from then on hb_moe_forward takes every routed expert from it as a lease,
 * and the mapping's expert store is never read.  Call once, after load and
 * before any session is created.  On failure the model is unchanged
 * (resident), the refusal's field "expert_cache".
 */
int hb_model_stream(struct hb_model *m, const char *size, const struct hb_xs_config *cfg,
		    enum hb_xs_predictor pred, struct hb_error *err);

/*
 * Read every page of the mapping that execution reads from it once now,
 * over the pool's threads (pool NULL: this thread): the dense tensors, and
 * the expert store unless the experts are streamed (hb_model_stream); the
 * PLE page store, read only through its verified snapshots, is skipped.
 * A resident run's first chunk otherwise takes each page's first-touch
 * cost inside its own time (in a virtual machine with shadow page tables,
 * about a microsecond a 4 KiB page even after the kernel has mapped it:
 * twice the bench model's 128-token prefill).  Changes no result.
 */
void hb_model_prefault(const struct hb_model *m, struct hb_pool *pool);

/* Views of one routed expert's three matrices inside the store. */
void hb_model_expert(const struct hb_model *m, uint32_t layer, uint32_t expert,
		     struct hb_wmat *gate, struct hb_wmat *up, struct hb_wmat *down);

#endif
