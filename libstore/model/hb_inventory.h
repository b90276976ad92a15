/*
 * hb_inventory.h: classify every source tensor of a Qwen4Exp checkpoint
 * exactly once.
 *
 * From the resolved config this module derives the exact set of tensors the
 * text model needs (names, shapes) and then walks the checkpoint's tensors:
 * each one is base (a dense artifact tensor), routed expert (into the
 * ExpertMajor store), PLE (the n-gram table into the PLE store, the hash
 * buffers verified into metadata, the projections dense), vision (excluded
 * by rule "vision: model.visual.*") or MTP (excluded by rule "mtp: mtp.*").
 * An unknown tensor, a missing one, a duplicate, a shape that disagrees with
 * config.json, a dtype the destination cannot take, or a mix of expert
 * layouts refuses the inventory with the tensor's name.  Skipping is legal
 * only as a named exclusion whose bytes stay accounted (AFN-004).
 *
 * It reads no tensor bytes; it does not know files (the caller lists the
 * tensors) nor the artifact layout (hb_convert).
 */
#ifndef HB_INVENTORY_H
#define HB_INVENTORY_H

#include "hb_base.h"
#include "checkpoint/hb_dtype.h"
#include "hb_err.h"
#include "hb_qwen_config.h"
#include "hb_sha256.h"

#define HB_INV_MAX_DIMS 8
#define HB_INV_DEST_NAME 64 /* GGML_MAX_NAME: GGUF readers cap names here */

/* A tensor as the checkpoint lists it (the caller owns the strings). */
struct hb_inv_source {
	const char *name;
	enum hb_dtype dtype;
	uint32_t ndim;
	uint64_t shape[HB_INV_MAX_DIMS];
	uint64_t nbytes;
	const char *shard;       /* file name, for the report */
	uint64_t shard_offset;   /* absolute offset in that file */
};

enum hb_inv_class {
	HB_INV_BASE = 1,
	HB_INV_EXPERT,
	HB_INV_PLE,
	HB_INV_VISION,
	HB_INV_MTP,
};

enum hb_inv_dest {
	HB_DEST_DENSE = 1,    /* its own GGUF tensor, named dest_name */
	HB_DEST_EXPERT_STORE, /* a component of ds4.expert_major.v2 */
	HB_DEST_PLE_STORE,    /* rows of ds4.ple_rows.v1 */
	HB_DEST_METADATA,     /* a hash buffer, verified and recorded as metadata */
	HB_DEST_EXCLUDED,     /* vision or MTP, by named rule */
};

enum hb_inv_role {
	HB_ROLE_NONE = 0,
	HB_ROLE_GATE,         /* per-expert gate_proj [I, H] */
	HB_ROLE_UP,           /* per-expert up_proj [I, H] */
	HB_ROLE_DOWN,         /* per-expert down_proj [H, I] */
	HB_ROLE_GATE_UP_PACKED, /* experts.gate_up_proj [E, 2I, H] */
	HB_ROLE_DOWN_PACKED,  /* experts.down_proj [E, H, I] */
	HB_ROLE_PLE_TABLE,    /* ngram_embedding(.shard_K).weight */
	HB_ROLE_PLE_MULTIPLIERS,
	HB_ROLE_PLE_HEAD_SIZES,
	HB_ROLE_PLE_HEAD_OFFSETS,
};

struct hb_inv_entry {
	const struct hb_inv_source *src;
	enum hb_inv_class cls;
	enum hb_inv_dest dest;
	enum hb_inv_role role;
	bool is_scale;                  /* an FP8 weight_scale_inv companion */
	int32_t layer;                  /* zero-indexed decoder layer, or -1 */
	int32_t expert;                 /* per-expert index, or -1 */
	int32_t shard_index;            /* ngram shard K, or -1 */
	char dest_name[HB_INV_DEST_NAME];
	const char *rule;               /* exclusion rule, or NULL */
};

enum hb_expert_layout {
	HB_EXPERTS_PER_EXPERT = 1, /* what transformers 5.17 save_pretrained writes */
	HB_EXPERTS_PACKED,         /* gate_up_proj / down_proj per layer */
};

struct hb_inventory {
	struct hb_inv_entry *entries; /* sorted by source name */
	size_t n;
	enum hb_expert_layout expert_layout;
	bool fp8_experts;
	uint64_t count[HB_INV_MTP + 1];     /* by class */
	uint64_t bytes[HB_INV_MTP + 1];     /* source bytes by class */
	uint64_t dense_tensors;
	uint64_t ple_table_parts[HB_QWEN_MAX_LAYERS]; /* per PLE index */
	uint8_t digest[HB_SHA256_BYTES];    /* of the inventory listing */
};

/* One dense tensor the text model needs, as config.json implies it. */
struct hb_expected_tensor {
	char src[160];                  /* checkpoint name */
	char dest[HB_INV_DEST_NAME];    /* artifact name (prefix dropped) */
	uint32_t ndim;
	uint64_t shape[3];              /* PyTorch order */
	bool found;                     /* scratch for callers */
};

/*
 * The exact dense tensor set of cfg, sorted by source name (*out is heap:
 * free it).  Admission uses it to demand the artifact's tensor identity set.
 */
int hb_expected_dense(const struct hb_qwen_config *cfg, struct hb_expected_tensor **out,
		      size_t *n, struct hb_error *err);

/*
 * Classify sources[0..n) against cfg.  Sources need not be sorted; names
 * must be unique (the checkpoint reader already refused duplicates, and so
 * does this).  On failure nothing is allocated.
 */
int hb_inventory_build(const struct hb_qwen_config *cfg,
		       const struct hb_inv_source *sources, size_t n,
		       struct hb_inventory *inv, struct hb_error *err);
void hb_inventory_free(struct hb_inventory *inv);

/* Find an entry by source name (binary search), NULL when absent. */
const struct hb_inv_entry *hb_inventory_find(const struct hb_inventory *inv,
					     const char *name);
const char *hb_inv_class_name(enum hb_inv_class cls);
const char *hb_inv_dest_name(enum hb_inv_dest dest);

#endif
