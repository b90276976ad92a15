/*
 * hb_admit_int.h: state shared by admission's files (not public).
 *   hb_admit.c          driver, steps 1-3 and 10-11, diagnostics, report
 *   hb_admit_meta.c     steps 4-5: metadata schema, constants, text identity
 *   hb_admit_tensors.c  steps 6-9: classification, tensor set, both stores
 */
#ifndef HB_ADMIT_INT_H
#define HB_ADMIT_INT_H

#include "hb_base.h"
#include "hb_admit.h"
#include "expert/hb_expert_store.h"
#include "gguf/hb_gguf.h"
#include "model/hb_inventory.h"
#include "model/hb_ple_hash.h"
#include "ple/hb_ple_store.h"
#include "model/hb_profile.h"
#include "model/hb_qwen_config.h"

#include <pthread.h>

struct hb_adm {
	const struct hb_admit_opts *o;
	int fd;
	uint64_t file_size;
	struct hb_gguf g;
	const struct hb_profile *profile;
	struct hb_qwen_config cfg;
	uint64_t vocab_semantic;     /* step 5: the tokenizer's id range (0: none embedded) */
	/* step 6-7 */
	struct hb_expected_tensor *expected;
	size_t n_expected;
	struct hb_expected_tensor **expected_sorted;   /* by dest name */
	const struct hb_gguf_tensor **tensors_sorted;  /* by name */
	size_t em_index, ple_index;   /* HB_NO_TENSOR when absent */
	uint64_t vision_tensors, mtp_tensors;
	/* step 8-9 */
	struct hb_em_layout em;
	bool em_parsed;
	struct hb_ple_store *ple;
	uint64_t bytes_read_stores;
	/* the PLE manifest check, started before step 1 (hb_admit.c) */
	struct hb_adm_early {
		bool started, joined, taken;
		pthread_t thread;
		const struct hb_adm *a;
		uint64_t offset, nbytes;
		int rc;
		struct hb_error err;
		struct hb_ple_store *ple;
	} early;
};

/* Start step 9's store open beside steps 1-8 when a skim of the header
 * finds a PLE store tensor at an aligned offset; and its result for step 9
 * (true: it was for tensor t, and *rc, a->ple, err are set). */
void hb_adm_early_ple_start(struct hb_adm *a);
bool hb_adm_early_ple_take(struct hb_adm *a, const struct hb_gguf_tensor *t, int *rc,
			   struct hb_error *err);
/* Wait for it; an untaken store is closed, its bytes counted. */
void hb_adm_early_ple_finish(struct hb_adm *a);

/* Record a rejection with an admission id. */
int hb_adm_fail(struct hb_error *err, enum hb_admit_diag d, int code, const char *field,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A metadata value of exactly this GGUF type (arrays: of elem_type), or a
 * rejection (adm-key-missing / adm-key-type).  NULL-safe for optional keys
 * when `required` is false: *out is NULL and 0 is returned. */
int hb_adm_kv(const struct hb_adm *a, const char *key, uint32_t type, uint32_t elem_type,
	      bool required, const struct hb_gguf_value **out, struct hb_error *err);

int hb_adm_constants(struct hb_adm *a, struct hb_error *err);       /* step 4 */
int hb_adm_text(struct hb_adm *a, struct hb_error *err);            /* step 5 */
int hb_adm_classify(struct hb_adm *a, struct hb_error *err);        /* step 6 */
int hb_adm_tensor_set(struct hb_adm *a, struct hb_error *err);      /* step 7 */
int hb_adm_experts(struct hb_adm *a, struct hb_error *err);         /* step 8 */
int hb_adm_ple(struct hb_adm *a, struct hb_error *err);             /* step 9 */

#endif
