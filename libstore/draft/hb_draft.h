/*
 * hb_draft.h: the DFlash2 compatibility gate (AFN-020), hb-admit --draft.
 *
 * A released DFlash2 draft is weights bound to one target: its vocabulary,
 * the target layers it captures and their width, its positions, its
 * candidate and block limits, the verifier it was trained against, the cache
 * and rollback semantics it assumes, and the exact target and tokenizer
 * revisions.  The gate compares a draft directory (config.json and
 * model.safetensors) with an admitted target artifact field by field, in the
 * fixed order below, and refuses the first mismatch with a stable id and the
 * field path (draft.config.hidden_size, draft.weights.fc.weight).  Nothing
 * is loaded "whatever matches": a tensor the contract does not name is
 * refused as surely as a missing one.
 *
 * Order (part of the interface): the geometry every DFlash configuration
 * declares comes first, so that a foreign public draft is refused for what
 * it is bound to (its vocabulary, its target depth, its width) rather than
 * for lacking a field only Hebrus's binding defines; then the binding
 * fields, then the weights.
 *
 *    1 architectures                   ["DFlash2DraftModel"]
 *    2 vocab_size                      = the target's physical rows
 *    3 num_target_layers               = the target's layer count
 *    4 hidden_size                     = the target's hidden width (the
 *                                        captured features, the shared
 *                                        embedding and output head)
 *    5 dflash_config.target_layer_ids  non-empty, strictly increasing, each
 *                                        below num_target_layers
 *    6 dflash_config.mask_token_id     a token of the target's tokenizer
 *      eos_token_id                    one of the target's EOS ids
 *    7 rope_theta, max_position_embeddings   = the target's
 *    8 block_size                      1..HB_DRAFT_MAX_BLOCK
 *      dflash_config.num_candidates    1..HB_DRAFT_MAX_CANDIDATES
 *    9 dflash_config.verifier          "greedy" (the only mode the target
 *                                        verifies exactly today)
 *   10 dflash_config.rollback          "transactional-prefix"
 *   11 dflash_config.target_revision   = hebrus.source.revision (a
 *                                        development artifact: "inventory:"
 *                                        and its source inventory digest)
 *      dflash_config.tokenizer_sha256  = hebrus.tokenizer.sha256 ("none"
 *                                        when the artifact embeds none)
 *   12 model.safetensors               exactly the contract's tensor names
 *                                        (no unknown, none missing), then
 *                                        their shapes, then their types
 *
 * Fields 6 and 8-11 past the public layout (num_candidates, verifier,
 * rollback, target_revision, tokenizer_sha256) are Hebrus's binding: a
 * public configuration does not declare them and is refused there if it
 * ever gets that far.  Library: silent, returns errors.
 */
#ifndef HB_DRAFT_H
#define HB_DRAFT_H

#include "hb_base.h"
#include "hb_err.h"

#define HB_DRAFT_ARCHITECTURE "DFlash2DraftModel"
#define HB_DRAFT_VERIFIER "greedy"
#define HB_DRAFT_ROLLBACK "transactional-prefix"
#define HB_DRAFT_MAX_BLOCK 16u
#define HB_DRAFT_MAX_CANDIDATES 64u
#define HB_DRAFT_MAX_CAPTURE 64u
#define HB_DRAFT_CONFIG_MAX (1u << 20)

/* X(symbol, "id", "meaning").  STABILITY: ids are never renamed or reused. */
#define HB_DRAFT_DIAGS(X)                                                                  \
	X(CONFIG, "draft-config", "config.json is absent, unreadable or not one JSON object") \
	X(FIELD, "draft-field", "a field of the draft contract is absent or of another JSON type") \
	X(ARCHITECTURE, "draft-architecture", "the draft is not one DFlash2DraftModel")    \
	X(VOCAB, "draft-vocab", "vocabulary rows differ from the target's")               \
	X(TARGET_LAYERS, "draft-target-layers", "the target layer count differs from the target's") \
	X(WIDTH, "draft-width", "a hidden, embedding, selector, convolution or output width differs") \
	X(CAPTURE, "draft-capture", "captured target layer ids are empty, unordered, repeated or out of range") \
	X(SPECIAL, "draft-special-token", "a special token is not one of the target's")  \
	X(POSITION, "draft-position", "positional or attention configuration differs from the target's") \
	X(BLOCK, "draft-block", "block size or candidate count outside the verifier's limits") \
	X(VERIFIER, "draft-verifier", "a verifier mode the target does not verify exactly") \
	X(ROLLBACK, "draft-rollback", "cache and rollback semantics other than the target's") \
	X(REVISION, "draft-revision", "the target or tokenizer revision differs from the artifact's") \
	X(WEIGHTS, "draft-weights", "model.safetensors is absent or not a safetensors file") \
	X(TENSOR_UNKNOWN, "draft-tensor-unknown", "a tensor the draft contract does not name") \
	X(TENSOR_MISSING, "draft-tensor-missing", "a tensor of the draft contract is absent") \
	X(TENSOR_SHAPE, "draft-tensor-shape", "a tensor's shape differs from the configuration's") \
	X(TENSOR_TYPE, "draft-tensor-type", "a tensor's element type is not BF16, F16 or F32")

enum hb_draft_diag {
#define HB_DRAFT_ENUM_(sym, id, meaning) HB_DRD_##sym,
	HB_DRAFT_DIAGS(HB_DRAFT_ENUM_)
#undef HB_DRAFT_ENUM_
	HB_DRAFT_DIAG_COUNT
};
const char *hb_draft_diag_id(enum hb_draft_diag d);
const char *hb_draft_diag_meaning(enum hb_draft_diag d);

/* What the gate compares a draft with: the admitted target's contract. */
struct hb_draft_target {
	uint64_t vocab_physical, vocab_semantic;
	uint64_t layers, hidden, max_positions;
	double rope_theta;
	int64_t eos[8];
	size_t n_eos;
	/* hebrus.source.revision; a development artifact, which pins none:
	 * "inventory:" and hebrus.source.inventory_sha256 */
	char revision[128];
	char tokenizer_sha256[72];   /* hebrus.tokenizer.sha256; "none" when it embeds none */
};

/*
 * Fill t from an artifact admission has admitted: the constants admission
 * validated and the two identity strings of its header.  A rejected
 * artifact is refused with admission's own diagnostic (err; *admitted
 * false); returns a negative hb_err only when it cannot be read.
 */
int hb_draft_target_load(const char *artifact, struct hb_draft_target *t, bool *admitted,
			 struct hb_error *err);

struct hb_draft_result {
	bool admitted;
	int step;                    /* 1..12 of the order above, 0 when admitted */
	uint64_t tensors;            /* model.safetensors tensors checked */
};

/*
 * Gate the draft in dir against t.  Returns 0 whether or not it is admitted
 * (res->admitted; err then holds the first mismatch: its id, the field
 * path, expected and found); a negative hb_err only for memory.
 */
int hb_draft_check(const char *dir, const struct hb_draft_target *t, struct hb_draft_result *res,
		   struct hb_error *err);

#endif
