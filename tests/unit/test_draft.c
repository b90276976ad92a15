/*
 * Unit tests: the DFlash2 compatibility gate (libstore/draft/hb_draft.h)
 * against the released Qwen3.8-Flash-Next geometry, without 360 GB: the
 * sparse artifact of tests/unit/adm_sparse.h is admitted, its contract
 * read back (248,320 rows, 48 layers, hidden 2,560, the pinned revision),
 * and the two public drafts' contract controls (tests/fixtures/draft) are
 * refused each on its own first mismatch: the Qwen3.8-27B draft passes
 * the vocabulary (the same 248,320 physical rows) and stops at the target
 * depth (64, not 48); the GLM-5.3-Flash draft stops at the vocabulary.
 * The id table is unique and every id has its meaning.
 */
#include "hb_base.h"
#include "harness.h"
#include "adm_sparse.h"
#include "draft/hb_draft.h"

static void gate(const char *ctl, const struct hb_draft_target *t, int step, const char *id, const char *field,
		 const char *msg)
{
	struct hb_draft_result res;
	struct hb_error err;
	char dir[4096];

	snprintf(dir, sizeof(dir), "%s/tests/fixtures/draft/%s", hb_test_srcdir(), ctl);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_draft_check(dir, t, &res, &err), 0);
	CHECK(!res.admitted);
	CHECK_EQ_INT(res.step, step);
	CHECK_STR(err.id ? err.id : "", id);
	CHECK_STR(err.field, field);
	CHECK_STR(err.msg, msg);
}

static void public_drafts_refused_for_flash_next(void)
{
	struct adm_sparse_info info;
	struct hb_draft_target t;
	struct hb_error err;
	bool admitted = false;

	hb_error_clear(&err);
	CHECK_EQ_INT(adm_sparse_build("flash-next.gguf", &info, &err), 0);
	CHECK_EQ_INT(hb_draft_target_load("flash-next.gguf", &t, &admitted, &err), 0);
	CHECK(admitted);
	CHECK_EQ_U64(t.vocab_physical, 248320);
	CHECK_EQ_U64(t.vocab_semantic, 248077);
	CHECK_EQ_U64(t.layers, 48);
	CHECK_EQ_U64(t.hidden, 2560);
	CHECK_STR(t.revision, "de4b8e4d43b917e7706784d8bb445c9af86a3540");
	gate("qwen3.8-27b-dflash2", &t, 3, "draft-target-layers", "draft.config.num_target_layers",
	     "64, the target's layer count is 48");
	gate("glm-5.3-flash-dflash2", &t, 2, "draft-vocab", "draft.config.vocab_size",
	     "154880, the target's vocabulary is 248320");
}

static void rejected_artifact_is_not_a_target(void)
{
	struct hb_draft_target t;
	struct hb_error err;
	bool admitted = true;

	CHECK_EQ_INT(hb_test_write_file("x.gguf", "GGUF\3\0\0\0", 8), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_draft_target_load("x.gguf", &t, &admitted, &err), 0);
	CHECK(!admitted);
	CHECK(err.id != NULL && !strncmp(err.id, "gguf-", 5));
}

static void diag_table(void)
{
	for (int i = 0; i < HB_DRAFT_DIAG_COUNT; i++) {
		CHECK(!strncmp(hb_draft_diag_id((enum hb_draft_diag)i), "draft-", 6));
		CHECK(hb_draft_diag_meaning((enum hb_draft_diag)i)[0] != '\0');
		for (int j = 0; j < i; j++)
			CHECK(strcmp(hb_draft_diag_id((enum hb_draft_diag)i), hb_draft_diag_id((enum hb_draft_diag)j)));
	}
	CHECK_STR(hb_draft_diag_id(HB_DRAFT_DIAG_COUNT), "draft-unknown");
}

HB_TEST_MAIN(T(public_drafts_refused_for_flash_next), T(rejected_artifact_is_not_a_target), T(diag_table))
