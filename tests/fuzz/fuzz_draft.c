/*
 * fuzz_draft.c: fuzz target of the DFlash2 draft gate (hb_draft_check:
 * config.json and model.safetensors of a draft directory, hebrus-admit
 * --draft).
 *
 * Input: up to two files separated by HB_FUZZ_SEP (fuzz_dir.h):
 * config.json, model.safetensors.  The target is fixed: the one
 * hb_draft_target_load gives for the realshape fixture converted by
 * hb-convert (tests/fuzz/make-seeds makes the seeds against that artifact
 * with tests/tools/make-draft.py), so that seeds reach the weights step.
 *
 * Invariants: the gate returns 0 whatever the bytes (a negative value only
 * for memory); an admitted draft has step 0 and its tensors counted; a
 * refused one names a step of the documented order (1..12), an id of the
 * draft table and a field under "draft."; a second check gives the same
 * verdict, step, id and field.  This file owns only the harness; the gate
 * is libstore/draft/hb_draft.c.
 */
#include "hb_base.h"
#include "fuzz_dir.h"
#include "draft/hb_draft.h"

static const char *const names[] = {"config.json", "model.safetensors"};

static void target(struct hb_draft_target *t)
{
	memset(t, 0, sizeof(*t));
	t->vocab_physical = 1024;
	t->vocab_semantic = 1024;
	t->layers = 8;
	t->hidden = 64;
	t->max_positions = 4096;
	t->rope_theta = 10000000.0;
	t->eos[0] = 1000;
	t->n_eos = 1;
	snprintf(t->revision, sizeof(t->revision), "%s",
		 "inventory:c938e97808ce2f365be5d39c1e1ceb9234016e63b2ceecb9d703c1cfd3cd3353");
	snprintf(t->tokenizer_sha256, sizeof(t->tokenizer_sha256), "none");
}

static bool known_id(const char *id)
{
	for (int d = 0; d < HB_DRAFT_DIAG_COUNT; d++)
		if (!strcmp(id, hb_draft_diag_id((enum hb_draft_diag)d)))
			return true;
	return false;
}

int hb_fuzz_draft(const uint8_t *data, size_t size)
{
	struct hb_draft_target t;
	struct hb_draft_result r1, r2;
	struct hb_error e1, e2;
	const char *dir;
	int rc1, rc2;

	if (size > HB_FUZZ_MAX_INPUT || !(dir = hb_fuzz_unpack(data, size, names, 2)))
		return HB_FUZZ_REFUSED;
	target(&t);
	hb_error_clear(&e1);
	hb_error_clear(&e2);
	memset(&r1, 0, sizeof(r1));
	memset(&r2, 0, sizeof(r2));
	rc1 = hb_draft_check(dir, &t, &r1, &e1);
	rc2 = hb_draft_check(dir, &t, &r2, &e2);
	if (rc1 == HB_ERR_NOMEM || rc2 == HB_ERR_NOMEM)
		return HB_FUZZ_REFUSED;
	HB_FUZZ_ASSERT(rc1 == 0 && rc2 == 0);
	HB_FUZZ_ASSERT(r1.admitted == r2.admitted && r1.step == r2.step && r1.tensors == r2.tensors);
	if (r1.admitted) {
		HB_FUZZ_ASSERT(r1.step == 0 && r1.tensors > 0);
		return HB_FUZZ_ACCEPTED;
	}
	HB_FUZZ_ASSERT(r1.step >= 1 && r1.step <= 12);
	HB_FUZZ_ASSERT(e1.id && known_id(e1.id) && hb_fuzz_same_id(e1.id, e2.id));
	HB_FUZZ_ASSERT(!strncmp(e1.field, "draft.", 6) && !strcmp(e1.field, e2.field));
	return HB_FUZZ_REFUSED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_draft(data, size);
	return 0;
}
#endif
