/*
 * fuzz_features.c: fuzz target of the feature-set reader
 * (hb_feature_dir_load: features.json and its safetensors shards) and,
 * through a round trip, of its writer (hb_feature_dir_write).
 *
 * Input: one flags byte, then up to three files separated by HB_FUZZ_SEP
 * (fuzz_dir.h): features.json, features-000000.safetensors,
 * features-000001.safetensors.
 *   bit 0     reseal: set each manifest shard entry's "bytes" and "sha256"
 *             to those of the file it names (when it is one of ours), so
 *             that mutated shards reach the safetensors and identity checks
 *             behind the digests instead of all failing feature-digest;
 *   bits 1-2  rows per shard of the rewrite (0: one shard, else 1, 2, 3).
 *
 * Invariants: a refusal names an id of the feature, safetensors or JSON
 * tables, and a second read gives the same outcome; an accepted set has
 * layers x width floats a row and a thread in common with itself
 * (hb_feature_check_disjoint refuses it with feature-leak when it has a
 * row); written again with another sharding it reads back to the same
 * identity and the same rows bit for bit, and a second rewrite gives the
 * same bytes.  This file owns only the harness; the reader and writer are
 * libstore/predict/hb_feature.c.
 */
#include "hb_base.h"
#include "fuzz_dir.h"
#include "hb_json.h"
#include "hb_sha256.h"
#include "predict/hb_predict.h"

#define FLAG_RESEAL 1u

static const char *const names[] = {"features.json", "features-000000.safetensors", "features-000001.safetensors"};
static const char *const ids[] = {"feature-", "predictor-", "st-", "json", "io"};

/* Rewrite dir/features.json with each entry's bytes and sha256 taken from
 * the file it names, when that file is one of ours. */
static void reseal(const char *dir)
{
	uint8_t *text, *f;
	size_t len, flen;
	cJSON *root, *shards, *e;
	char *out;

	if (hb_fuzz_get(dir, names[0], HB_FUZZ_MAX_INPUT, &text, &len))
		return;
	root = cJSON_ParseWithLength((const char *)text, len);
	free(text);
	if (!root)
		return;
	shards = cJSON_GetObjectItemCaseSensitive(root, "shards");
	cJSON_ArrayForEach(e, shards) {
		const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, "file");
		uint8_t sha[32];
		char hex[65];

		if (!cJSON_IsString(file) || !cJSON_IsObject(e))
			continue;
		if (strcmp(file->valuestring, names[1]) && strcmp(file->valuestring, names[2]))
			continue;
		if (hb_fuzz_get(dir, file->valuestring, HB_FUZZ_MAX_INPUT, &f, &flen))
			continue;
		hb_sha256_buf(f, flen, sha);
		free(f);
		hb_hex_encode(sha, 32, hex);
		cJSON_DeleteItemFromObjectCaseSensitive(e, "bytes");
		cJSON_DeleteItemFromObjectCaseSensitive(e, "sha256");
		cJSON_AddNumberToObject(e, "bytes", (double)flen);
		cJSON_AddStringToObject(e, "sha256", hex);
	}
	if ((out = cJSON_PrintUnformatted(root))) {
		hb_fuzz_put(dir, names[0], out, strlen(out));
		free(out);
	}
	cJSON_Delete(root);
}

static bool same_ident(const struct hb_feature_ident *a, const struct hb_feature_ident *b)
{
	return !memcmp(a->artifact, b->artifact, 32) && !memcmp(a->text, b->text, 32) &&
	       !memcmp(a->projection, b->projection, 32) && !memcmp(a->split_id, b->split_id, 32) &&
	       a->projection_seed == b->projection_seed && a->width == b->width &&
	       a->source_width == b->source_width && a->layers == b->layers && !strcmp(a->split, b->split) &&
	       !strcmp(a->tap, b->tap);
}

static bool same_rows(const struct hb_feature_set *a, const struct hb_feature_set *b)
{
	size_t w = (size_t)a->id.layers * a->id.width;

	if (a->n != b->n)
		return false;
	for (uint64_t i = 0; i < a->n; i++)
		if (a->sequence[i] != b->sequence[i] || a->position[i] != b->position[i] ||
		    a->owner[i] != b->owner[i] || a->thread[i] != b->thread[i])
			return false;
	return !a->n || !memcmp(a->x, b->x, (size_t)a->n * w * sizeof(float));
}

static void round_trip(const char *dir, const struct hb_feature_set *s, uint64_t rows_per_shard)
{
	char out[4200], out2[4200];
	struct hb_feature_set back;
	struct hb_error err;
	uint8_t *m1, *m2;
	size_t l1, l2;
	int rc;

	snprintf(out, sizeof(out), "%s/rewrite", dir);
	snprintf(out2, sizeof(out2), "%s/rewrite2", dir);
	hb_error_clear(&err);
	rc = hb_feature_dir_write(out, s, rows_per_shard, NULL, &err);
	if (rc == HB_ERR_NOMEM || rc == HB_ERR_IO)
		return;
	HB_FUZZ_ASSERT(rc == HB_OK);
	rc = hb_feature_dir_load(out, &back, &err);
	if (rc == HB_ERR_NOMEM)
		return;
	HB_FUZZ_ASSERT(rc == HB_OK);
	HB_FUZZ_ASSERT(same_ident(&s->id, &back.id));
	HB_FUZZ_ASSERT(same_rows(s, &back));
	/* the writer is a function of the set: the same bytes again */
	HB_FUZZ_ASSERT(hb_feature_dir_write(out2, &back, rows_per_shard, NULL, &err) == HB_OK);
	HB_FUZZ_ASSERT(!hb_fuzz_get(out, names[0], 64u << 20, &m1, &l1));
	HB_FUZZ_ASSERT(!hb_fuzz_get(out2, names[0], 64u << 20, &m2, &l2));
	HB_FUZZ_ASSERT(l1 == l2 && !memcmp(m1, m2, l1));
	free(m1);
	free(m2);
	hb_feature_set_release(&back);
}

int hb_fuzz_features(const uint8_t *data, size_t size)
{
	struct hb_feature_set s1, s2;
	struct hb_error e1, e2;
	const char *dir;
	int rc1, rc2;

	if (size < 1 || size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	if (!(dir = hb_fuzz_unpack(data + 1, size - 1, names, 3)))
		return HB_FUZZ_REFUSED;
	if (data[0] & FLAG_RESEAL)
		reseal(dir);
	hb_error_clear(&e1);
	hb_error_clear(&e2);
	rc1 = hb_feature_dir_load(dir, &s1, &e1);
	rc2 = hb_feature_dir_load(dir, &s2, &e2);
	if (rc1 == HB_ERR_NOMEM || rc2 == HB_ERR_NOMEM) {
		if (!rc1)
			hb_feature_set_release(&s1);
		if (!rc2)
			hb_feature_set_release(&s2);
		return HB_FUZZ_REFUSED;
	}
	HB_FUZZ_ASSERT(rc1 == rc2);
	if (rc1 != HB_OK) {
		hb_fuzz_same_refusal(rc1, &e1, &e2, ids, sizeof(ids) / sizeof(ids[0]));
		return HB_FUZZ_REFUSED;
	}
	HB_FUZZ_ASSERT(same_ident(&s1.id, &s2.id) && same_rows(&s1, &s2));
	HB_FUZZ_ASSERT(s1.id.layers >= 1 && s1.id.width >= 1);
	HB_FUZZ_ASSERT(s1.id.split[sizeof(s1.id.split) - 1] == '\0' && s1.id.tap[sizeof(s1.id.tap) - 1] == '\0');
	if (s1.n) {
		hb_error_clear(&e2);
		HB_FUZZ_ASSERT(hb_feature_check_disjoint(&s1, &s2, &e2) != HB_OK &&
			       hb_fuzz_same_id(e2.id, hb_predict_diag_id(HB_PDD_FEATURE_LEAK)));
	}
	hb_error_clear(&e2);
	HB_FUZZ_ASSERT(hb_feature_check_same_origin(&s1.id, &s2.id, "self", &e2) == HB_OK);
	hb_feature_set_release(&s2);
	round_trip(dir, &s1, (data[0] >> 1) & 3u);
	hb_feature_set_release(&s1);
	return HB_FUZZ_ACCEPTED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_features(data, size);
	return 0;
}
#endif
