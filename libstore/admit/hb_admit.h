/*
 * hb_admit.h: ordered, CPU-only admission of one artifact.
 *
 * Admission decides whether an artifact is exactly what it claims to be,
 * before anything expensive happens.  Checks run from the cheapest and most
 * authoritative boundary to the deepest (AFN-004), and a defect is reported
 * at the first boundary that can see it; the order is part of the interface:
 *
 *   1 gguf        GGUF bounds, checked arithmetic (the reader's gguf-* ids)
 *   2 identity    architecture, profile id, status word
 *   3 source      source revision and inventory digests
 *   4 constants   every scalar and array model constant, exact GGUF type
 *   5 text        tokenizer/template identity, vocabulary sizes, stop ids
 *   6 classify    every tensor classified (base, store, vision, MTP)
 *   7 tensors     the exact tensor identity set, types and shapes
 *   8 experts     ExpertMajor manifest and all descriptors (em-* ids)
 *   9 ple         PLE manifest, geometry, hash identity, extent (ple-* ids)
 *  10 policy      text-only and MTP-not-executed policy
 *  11 ownership   sorted byte ranges prove disjoint ownership of the file
 *
 * Admission reads the GGUF header region, the expert store's header and
 * descriptors, and the PLE manifest, directory and digest table; never the
 * expert payload or a PLE page.  Step 9's manifest digest (one SHA-256
 * stream over the whole digest table) is computed by a second thread
 * beside steps 5-8 once step 4 has passed; its result is reported at step
 * 9, so the order is unchanged, and a rejection at steps 5-8 waits for it
 * and counts what it read in bytes_read.  It links no GPU code.  An admitted
 * artifact is still not runnable by that fact: the report says
 * "runtime_supported": false and the exact status word.
 */
#ifndef HB_ADMIT_H
#define HB_ADMIT_H

#include "hb_base.h"
#include "hb_err.h"
#include <cJSON.h>

#define HB_ADMIT_STEPS(X)                     \
	X(1, "gguf")                          \
	X(2, "identity")                      \
	X(3, "source")                        \
	X(4, "constants")                     \
	X(5, "text")                          \
	X(6, "classify")                      \
	X(7, "tensors")                       \
	X(8, "experts")                       \
	X(9, "ple")                           \
	X(10, "policy")                       \
	X(11, "ownership")

/* X(symbol, "id", step, "meaning") -- admission's own diagnostics.  The
 * reader's gguf-* ids belong to step 1, the store parsers' em-* to step 8
 * and ple-* to step 9 (tables in hb_gguf.h, hb_expert_store.h,
 * hb_ple_store.h).  STABILITY: ids are never renamed or reused. */
#define HB_ADMIT_DIAGS(X)                                                             \
	X(ARCH, "adm-architecture", 2, "general.architecture is not qwen4exp")       \
	X(PROFILE_UNKNOWN, "adm-profile-unknown", 2, "hebrus.profile names no known profile") \
	X(PROFILE_DEMANDED, "adm-profile-demanded", 2, "the artifact's profile is not the one demanded") \
	X(STATUS, "adm-status", 2, "hebrus.status is not the profile's exact status word") \
	X(SOURCE_IDENTITY, "adm-source-identity", 3, "a source digest is missing or malformed") \
	X(SOURCE_PIN, "adm-source-pin", 3, "source repository, revision or inventory differs from the profile's pin") \
	X(KEY_MISSING, "adm-key-missing", 4, "a required metadata key is absent")      \
	X(KEY_TYPE, "adm-key-type", 4, "a metadata key has another GGUF type than the schema's") \
	X(KEY_UNKNOWN, "adm-key-unknown", 4, "a qwen4exp.* or hebrus.* key the schema does not define") \
	X(CONSTANT_INVALID, "adm-constant-invalid", 4, "model constants upstream would refuse") \
	X(PROFILE_CONSTANT, "adm-profile-constant", 4, "a constant differs from the profile's pinned value") \
	X(TOKENIZER_DIGEST, "adm-tokenizer-digest", 5, "tokenizer bytes do not match hebrus.tokenizer.sha256") \
	X(TEMPLATE_DIGEST, "adm-template-digest", 5, "template bytes do not match hebrus.template.sha256") \
	X(TOKENIZER_MISSING, "adm-tokenizer-missing", 5, "the profile requires an embedded tokenizer") \
	X(VOCAB_SEMANTIC, "adm-vocab-semantic", 5, "the tokenizer's vocabulary size is not the profile's") \
	X(STOP_IDS, "adm-stop-ids", 5, "the stop set is not exact")                    \
	X(EOS_IDS, "adm-eos-ids", 5, "an EOS id lies outside the vocabulary")         \
	X(TENSOR_UNKNOWN, "adm-tensor-unknown", 6, "a tensor no rule classifies")     \
	X(TENSOR_MISSING, "adm-tensor-missing", 7, "an expected dense tensor is absent") \
	X(TENSOR_SHAPE, "adm-tensor-shape", 7, "a tensor's dimensions disagree with the constants") \
	X(TENSOR_TYPE, "adm-tensor-type", 7, "a tensor's GGML type is not allowed there") \
	X(STORE_MISSING, "adm-store-missing", 7, "a required store tensor is absent")  \
	X(STORE_EXTRA, "adm-store-extra", 7, "a store tensor the constants do not call for") \
	X(STORE_ALIGN, "adm-store-align", 8, "a store does not start at a 4096-aligned file offset") \
	X(EXPERT_CODEC, "adm-expert-codec", 8, "the expert store's codec differs from the metadata") \
	X(EXPERT_SOURCE, "adm-expert-source", 8, "the expert store's source identity differs from the metadata") \
	X(EXPERT_DIGESTS, "adm-expert-digests", 8, "the record digest table does not have one entry per record") \
	X(PLE_GEOMETRY, "adm-ple-geometry", 9, "PLE tables, rows or width disagree with the metadata") \
	X(PLE_HASH, "adm-ple-hash", 9, "the PLE hash identity differs from the constants") \
	X(PLE_CODEC, "adm-ple-codec", 9, "the PLE store's codec differs from the metadata") \
	X(VISION_TENSOR, "adm-vision-tensor", 10, "a vision tensor in a text-only artifact") \
	X(MTP_TENSOR, "adm-mtp-tensor", 10, "an MTP tensor in an artifact that never executes MTP") \
	X(POLICY, "adm-policy", 10, "text-only or MTP policy metadata is not the required value") \
	X(TRAILING, "adm-trailing-bytes", 11, "bytes past the artifact's last owner")  \
	X(OWNERSHIP, "adm-ownership", 11, "byte ranges overlap or leave a gap")         \
	X(WARMUP, "adm-warmup-overlap", 11, "a page-rounded dense span reaches into the PLE payload")

enum hb_admit_diag {
#define HB_ADMIT_ENUM_(sym, id, step, meaning) HB_ADMIT_##sym,
	HB_ADMIT_DIAGS(HB_ADMIT_ENUM_)
#undef HB_ADMIT_ENUM_
	HB_ADMIT_DIAG_COUNT
};

const char *hb_admit_diag_id(enum hb_admit_diag d);
const char *hb_admit_diag_meaning(enum hb_admit_diag d);
/* The step of any diagnostic id (adm-*, gguf-*, em-*, ple-*), 0 if unknown. */
int hb_admit_step_of(const char *id);
/* "gguf", "identity", ... for steps 1..11, NULL otherwise. */
const char *hb_admit_step_name(int step);

struct hb_qwen_config;

struct hb_admit_opts {
	const char *path;
	const char *profile;  /* demanded profile, or NULL for the artifact's own */
	/* when not NULL and the artifact is admitted: the model constants as
	 * admission validated them (for the runner, which must not re-derive
	 * them differently) */
	struct hb_qwen_config *cfg_out;
	/* use_fd: admit the file already open on fd (read-only, left open;
	 * path only names it in diagnostics).  A caller that goes on to read
	 * the artifact opens it once and passes that descriptor, so what it
	 * reads is the file admission checked even if the path is replaced in
	 * between. */
	bool use_fd;
	int fd;
};

struct hb_admit_result {
	bool admitted;
	int step;             /* the failing step, 0 when admitted */
	uint64_t bytes_read;  /* every byte admission read from the file */
	uint64_t file_size;
	/* one past the largest id the embedded tokenizer assigns; the physical
	 * vocabulary when the artifact embeds none (admitted only) */
	uint64_t vocab_semantic;
	cJSON *report;        /* the JSON report (ownership table when admitted) */
};

/*
 * Step 5's id range of an embedded tokenizer.json: one past the largest
 * non-negative number among the members of the first "model" member's
 * first "vocab" member and the first "id" member of each element of the
 * first "added_tokens" member (0 when there are none).  Returns 0, or
 * HB_ERR_FORMAT when json is not one JSON value (hb_json_parse's rule) or
 * such a number is not a whole number of at most 2^53 - 1 (a fraction, an
 * infinity, or too large to be read exactly); *next is then untouched.
 * Strictly valid JSON is read in one pass without building a tree (fast is
 * then true); anything else goes through cJSON, with the same answer.
 */
int hb_admit_tokenizer_vocab(const char *json, size_t len, uint64_t *next, bool *fast);
/* The same rule always on cJSON's tree: what decides outside the one-pass
 * subset, and the fuzz target's reference for the one-pass reader. */
int hb_admit_tokenizer_vocab_tree(const char *json, size_t len, uint64_t *next);

/*
 * Admit opts->path.  Returns 0 whether or not the artifact is admitted (see
 * res->admitted; err then holds the rejection); a negative hb_err only when
 * the file could not be read at all (HB_ERR_IO, HB_ERR_NOTFOUND) or memory
 * ran out.  res->report is always set on return 0: free with cJSON_Delete.
 */
int hb_admit(const struct hb_admit_opts *opts, struct hb_admit_result *res,
	     struct hb_error *err);

#endif
