/*
 * fuzz_checkpoint.c: fuzz target of a checkpoint directory as hb-convert
 * reads it: config.json (hb_json_parse, hb_qwen_config_parse), the
 * safetensors shards and their index (hb_st_checkpoint_open), the profile
 * (hb_profile_auto, hb_profile_check) and the tensor inventory
 * (hb_inventory_build).
 *
 * Input: up to five files separated by HB_FUZZ_SEP (fuzz_dir.h):
 * config.json, model.safetensors.index.json, model-00001-of-00002.safetensors,
 * model-00002-of-00002.safetensors, model.safetensors (an empty part: the
 * file is absent).
 *
 * Invariants: a refusal names an id of the checkpoint, safetensors, config,
 * profile or inventory tables, and opening twice gives the same outcome, id
 * and field; an opened checkpoint lists every tensor once, sorted by name,
 * each found by hb_st_checkpoint_find in the shard that holds it, with
 * total_bytes their sum, and is unchanged on disk; an inventory built twice
 * has the same digest, and every entry names a source tensor and is found
 * by its name.  This file owns only the harness; the readers are
 * libstore/checkpoint/hb_st_checkpoint.c, hb_safetensors.c and
 * libstore/model/.
 */
#include "hb_base.h"
#include "fuzz_dir.h"
#include "hb_json.h"
#include "checkpoint/hb_safetensors.h"
#include "model/hb_inventory.h"
#include "model/hb_profile.h"
#include "model/hb_qwen_config.h"

static const char *const names[] = {"config.json", "model.safetensors.index.json",
				    "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
				    "model.safetensors"};
static const char *const ids[] = {"st-", "ck-", "qwen-", "config-", "profile-", "inv-", "json", "io"};

static void check_open(const struct hb_st_checkpoint *ck)
{
	uint64_t total = 0;
	struct hb_error err;

	for (size_t i = 0; i < ck->ntensors; i++) {
		struct hb_st_ref r = hb_st_checkpoint_at(ck, i), f;

		HB_FUZZ_ASSERT(r.file && r.tensor && r.file >= ck->shards && r.file < ck->shards + ck->nshards);
		HB_FUZZ_ASSERT(i == 0 || strcmp(hb_st_checkpoint_at(ck, i - 1).tensor->name, r.tensor->name) < 0);
		HB_FUZZ_ASSERT(hb_st_checkpoint_find(ck, r.tensor->name, &f) && f.file == r.file && f.tensor == r.tensor);
		HB_FUZZ_ASSERT(hb_st_find(r.file, r.tensor->name) == r.tensor);
		total += r.tensor->nbytes;
	}
	HB_FUZZ_ASSERT(total == ck->total_bytes);
	hb_error_clear(&err);
	HB_FUZZ_ASSERT(hb_st_checkpoint_check_unchanged(ck, &err) == HB_OK);
}

static void inventory(const struct hb_qwen_config *cfg, const struct hb_st_checkpoint *ck)
{
	struct hb_inv_source *src = calloc(ck->ntensors ? ck->ntensors : 1, sizeof(*src));
	struct hb_inventory i1, i2;
	struct hb_error e1, e2;
	int rc1, rc2;

	if (!src)
		return;
	for (size_t i = 0; i < ck->ntensors; i++) {
		struct hb_st_ref r = hb_st_checkpoint_at(ck, i);

		src[i].name = r.tensor->name;
		src[i].dtype = r.tensor->dtype;
		src[i].ndim = r.tensor->ndim;
		for (unsigned d = 0; d < r.tensor->ndim && d < HB_INV_MAX_DIMS; d++)
			src[i].shape[d] = r.tensor->shape[d];
		src[i].nbytes = r.tensor->nbytes;
		src[i].shard = r.file->base;
		src[i].shard_offset = r.tensor->file_offset;
	}
	hb_error_clear(&e1);
	hb_error_clear(&e2);
	rc1 = hb_inventory_build(cfg, src, ck->ntensors, &i1, &e1);
	rc2 = hb_inventory_build(cfg, src, ck->ntensors, &i2, &e2);
	HB_FUZZ_ASSERT(rc1 == rc2);
	if (rc1 == HB_OK) {
		HB_FUZZ_ASSERT(!memcmp(i1.digest, i2.digest, sizeof(i1.digest)) && i1.n == i2.n);
		for (size_t i = 0; i < i1.n; i++)
			HB_FUZZ_ASSERT(i1.entries[i].src && hb_inventory_find(&i1, i1.entries[i].src->name) == &i1.entries[i]);
		hb_inventory_free(&i1);
		hb_inventory_free(&i2);
	} else {
		hb_fuzz_same_refusal(rc1, &e1, &e2, ids, sizeof(ids) / sizeof(ids[0]));
	}
	free(src);
}

int hb_fuzz_checkpoint(const uint8_t *data, size_t size)
{
	struct hb_qwen_config cfg;
	struct hb_st_checkpoint c1, c2;
	struct hb_error e1, e2;
	const struct hb_profile *prof;
	cJSON *root = NULL;
	uint8_t *text;
	size_t len;
	const char *dir;
	int rc, rc1, rc2;

	if (size > HB_FUZZ_MAX_INPUT || !(dir = hb_fuzz_unpack(data, size, names, 5)))
		return HB_FUZZ_REFUSED;
	hb_error_clear(&e1);
	if (hb_fuzz_get(dir, names[0], 1u << 20, &text, &len))
		return HB_FUZZ_REFUSED;
	rc = hb_json_parse((const char *)text, len, "config.json", &root, &e1);
	free(text);
	if (rc)
		return HB_FUZZ_REFUSED; /* the config target's business */
	memset(&cfg, 0, sizeof(cfg));
	rc = hb_qwen_config_parse(root, &cfg, &e1);
	cJSON_Delete(root);
	if (rc)
		return HB_FUZZ_REFUSED;
	prof = hb_profile_auto(&cfg);
	hb_error_clear(&e1);
	if (!prof || hb_profile_check(prof, &cfg, &e1))
		return HB_FUZZ_REFUSED;
	hb_error_clear(&e1);
	hb_error_clear(&e2);
	rc1 = hb_st_checkpoint_open(&c1, dir, &e1);
	rc2 = hb_st_checkpoint_open(&c2, dir, &e2);
	HB_FUZZ_ASSERT(rc1 == rc2);
	if (rc1 != HB_OK) {
		hb_fuzz_same_refusal(rc1, &e1, &e2, ids, sizeof(ids) / sizeof(ids[0]));
		hb_st_checkpoint_close(&c1);
		hb_st_checkpoint_close(&c2);
		return HB_FUZZ_REFUSED;
	}
	HB_FUZZ_ASSERT(c1.ntensors == c2.ntensors && c1.nshards == c2.nshards && c1.total_bytes == c2.total_bytes);
	hb_st_checkpoint_close(&c2);
	check_open(&c1);
	inventory(&cfg, &c1);
	hb_st_checkpoint_close(&c1);
	return HB_FUZZ_ACCEPTED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_checkpoint(data, size);
	return 0;
}
#endif
