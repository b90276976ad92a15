/*
 * hb_profile.h: closed tables of exact model values, and status words.
 *
 * A profile is the finite statement "this artifact is that model".  The
 * released checkpoint's profile, qwen4exp-flash-next, carries the values the
 * source documents pin (AFN-001, AFN-003, AFN-005); every one is an equality
 * at conversion and admission, never a hint.  The development profile
 * ("dev") takes its geometry from the checkpoint's config.json and says so
 * in every report; it exists for the small upstream fixtures.
 *
 * Status words are exact (AFN-013):
 *   implemented          code exists
 *   correctness-fixture  a bounded test seam passes
 *   pinned-not-supported identity pinned; normal users still cannot rely on it
 *   supported            product and hardware gates passed (none yet)
 */
#ifndef HB_PROFILE_H
#define HB_PROFILE_H

#include "hb_base.h"
#include "hb_err.h"
#include "hb_ple_hash.h"
#include "hb_qwen_config.h"

#define HB_STATUS_IMPLEMENTED "implemented"
#define HB_STATUS_CORRECTNESS_FIXTURE "correctness-fixture"
#define HB_STATUS_PINNED_NOT_SUPPORTED "pinned-not-supported"
#define HB_STATUS_SUPPORTED "supported"

#define HB_PROFILE_FLASH_NEXT "qwen4exp-flash-next"
#define HB_PROFILE_DEV "dev"

struct hb_profile {
	const char *id;
	const char *status;
	bool from_config;            /* geometry taken from config.json */
	const char *source_repo;     /* NULL for dev */
	const char *source_revision; /* NULL for dev */
	/* pinned equalities (0 / NULL where from_config) */
	uint64_t layers, hidden, hc_count, experts, experts_used, expert_width;
	uint64_t context, vocab_physical, vocab_semantic;
	uint64_t ple_rows, ple_logical_rows, ple_row_width;
	uint32_t ple_layer_ids[4];
	size_t n_ple_layers;
	int64_t stop_ids[4];
	size_t n_stop_ids;
	uint64_t source_tensors, source_shards, source_bytes;
	uint64_t vision_tensors, mtp_tensors;
};

const struct hb_profile *hb_profile_flash_next(void);
const struct hb_profile *hb_profile_dev(void);
/* NULL for an unknown id. */
const struct hb_profile *hb_profile_find(const char *id);

/*
 * "auto": the released profile when the config carries its identity
 * signature (48 layers, hidden 2560, 512 experts), else dev.  A config that
 * has the signature but breaks another pinned value is then refused by
 * hb_profile_check, not quietly demoted to dev.
 */
const struct hb_profile *hb_profile_auto(const struct hb_qwen_config *cfg);

/* Check every pinned equality of a profile against a resolved config. */
int hb_profile_check(const struct hb_profile *p, const struct hb_qwen_config *cfg,
		     struct hb_error *err);

/* The profile's PLE geometry against a recomputed table identity. */
int hb_profile_check_ple(const struct hb_profile *p, const struct hb_ple_table_hash *h,
			 struct hb_error *err);

#endif
