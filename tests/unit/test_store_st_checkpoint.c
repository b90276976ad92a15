/*
 * Unit tests: checkpoint directories (hb_st_checkpoint_*).  Built in the
 * case's temporary directory: index and no-index layouts, lookup, sorted
 * iteration, totals, change detection, an unreadable directory; then every
 * committed upstream checkpoint (tests/fixtures/upstream/<set>/checkpoint,
 * saved by transformers' save_pretrained) must open and agree with its
 * oracle manifest and config.json.  The corrupt directories live in the
 * corpus walked by test_store_safetensors.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_json.h"
#include "checkpoint/hb_safetensors.h"

#include <sys/stat.h>
#include <unistd.h>

/* A shard of F32 [2] tensors named in names (NULL-terminated), 8 bytes each. */
static int write_shard(const char *path, const char *const *names)
{
	char hdr[1024], payload[256];
	size_t used = 0, n = 0;
	unsigned char lenb[8];
	FILE *fp;

	used += (size_t)snprintf(hdr + used, sizeof(hdr) - used, "{");
	for (; names[n]; n++)
		used += (size_t)snprintf(hdr + used, sizeof(hdr) - used,
					 "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[2],"
					 "\"data_offsets\":[%zu,%zu]}",
					 n ? "," : "", names[n], n * 8, n * 8 + 8);
	used += (size_t)snprintf(hdr + used, sizeof(hdr) - used, "}");
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (char)i;
	for (int i = 0; i < 8; i++)
		lenb[i] = (unsigned char)((uint64_t)used >> (8 * i));
	fp = fopen(path, "wb");
	if (!fp)
		return -1;
	fwrite(lenb, 1, 8, fp);
	fwrite(hdr, 1, used, fp);
	fwrite(payload, 1, n * 8, fp);
	return fclose(fp);
}

static const char *const s1_names[] = { "b.w", "a.w", NULL };
static const char *const s2_names[] = { "c.w", NULL };
#define S1 "model-00001-of-00002.safetensors"
#define S2 "model-00002-of-00002.safetensors"

static void write_indexed(const char *total)
{
	char idx[512];

	CHECK(mkdir("ck", 0755) == 0);
	CHECK(write_shard("ck/" S1, s1_names) == 0);
	CHECK(write_shard("ck/" S2, s2_names) == 0);
	snprintf(idx, sizeof(idx),
		 "{\"metadata\":{%s},\"weight_map\":{\"a.w\":\"" S1 "\",\"b.w\":\"" S1
		 "\",\"c.w\":\"" S2 "\"}}", total);
	CHECK(hb_test_write_file("ck/" HB_ST_INDEX_NAME, idx, strlen(idx)) == 0);
}

static void indexed_checkpoint(void)
{
	struct hb_st_checkpoint ck;
	struct hb_st_ref r;
	struct hb_error err;
	unsigned char buf[8];

	write_indexed("\"total_size\":24,\"total_parameters\":6");
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_st_checkpoint_open(&ck, "ck", &err), HB_OK);
	CHECK(ck.has_index);
	CHECK_EQ_U64(ck.nshards, 2);
	CHECK_EQ_U64(ck.ntensors, 3);
	CHECK_EQ_U64(ck.total_bytes, 24);
	CHECK_STR(ck.shards[0].base, S1);
	CHECK_STR(hb_st_checkpoint_at(&ck, 0).tensor->name, "a.w");
	CHECK_STR(hb_st_checkpoint_at(&ck, 1).tensor->name, "b.w");
	CHECK_STR(hb_st_checkpoint_at(&ck, 2).tensor->name, "c.w");
	CHECK(hb_st_checkpoint_find(&ck, "c.w", &r));
	CHECK_STR(r.file->base, S2);
	CHECK(hb_st_checkpoint_find(&ck, "a.w", &r));
	CHECK_STR(r.file->base, S1);
	CHECK_EQ_U64(r.tensor->begin, 8); /* second in its shard's header */
	CHECK_EQ_INT(hb_st_read(r.file, r.tensor, 0, buf, 8, NULL), HB_OK);
	CHECK_EQ_INT(buf[0], 8);
	CHECK_EQ_INT(buf[7], 15);
	CHECK(!hb_st_checkpoint_find(&ck, "d.w", &r));
	CHECK_EQ_INT(hb_st_checkpoint_check_unchanged(&ck, NULL), HB_OK);
	CHECK(write_shard("ck/" S2, s1_names) == 0); /* rewritten after open */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_st_checkpoint_check_unchanged(&ck, &err), HB_ERR_CHANGED);
	CHECK_STR(err.id, "st-source-changed");
	CHECK_STR(err.field, S2);
	hb_st_checkpoint_close(&ck);
	hb_st_checkpoint_close(&ck);
}

static void index_without_total(void)
{
	struct hb_st_checkpoint ck;

	write_indexed("");
	CHECK_EQ_INT(hb_st_checkpoint_open(&ck, "ck", NULL), HB_OK);
	CHECK_EQ_U64(ck.ntensors, 3);
	hb_st_checkpoint_close(&ck);
}

static void no_index_sorted_shards(void)
{
	struct hb_st_checkpoint ck;
	static const char *const z[] = { "z", NULL }, *const y[] = { "y", "x", NULL };

	CHECK(mkdir("ck", 0755) == 0);
	CHECK(write_shard("ck/b.safetensors", z) == 0);
	CHECK(write_shard("ck/a.safetensors", y) == 0);
	CHECK(hb_test_write_file("ck/config.json", "{}", 2) == 0);
	CHECK(hb_test_write_file("ck/notes.safetensors.txt", "x", 1) == 0);
	CHECK_EQ_INT(hb_st_checkpoint_open(&ck, "ck", NULL), HB_OK);
	CHECK(!ck.has_index);
	CHECK_EQ_U64(ck.nshards, 2);
	CHECK_STR(ck.shards[0].base, "a.safetensors");
	CHECK_STR(ck.shards[1].base, "b.safetensors");
	CHECK_STR(hb_st_checkpoint_at(&ck, 0).tensor->name, "x");
	CHECK_STR(hb_st_checkpoint_at(&ck, 2).tensor->name, "z");
	CHECK_EQ_U64(ck.total_bytes, 24);
	hb_st_checkpoint_close(&ck);
}

static void unreadable_directory(void)
{
	struct hb_st_checkpoint ck;
	struct hb_error err;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_st_checkpoint_open(&ck, "absent", &err), HB_ERR_NOTFOUND);
	CHECK_STR(err.id, "ck-dir-invalid");
	CHECK_STR(err.field, "absent");
	hb_st_checkpoint_close(&ck);
	CHECK(hb_test_write_file("plain", "x", 1) == 0);
	hb_error_clear(&err);
	CHECK(hb_st_checkpoint_open(&ck, "plain", &err) < 0);
	CHECK_STR(err.id, "ck-dir-invalid");
	hb_st_checkpoint_close(&ck);
}

/* A shard that turns corrupt is reported with its own st-* id. */
static void shard_errors_pass_through(void)
{
	struct hb_st_checkpoint ck;
	struct hb_error err;

	write_indexed("");
	CHECK(hb_test_write_file("ck/" S2, "\x01\0\0\0\0\0\0", 7) == 0);
	hb_error_clear(&err);
	CHECK(hb_st_checkpoint_open(&ck, "ck", &err) < 0);
	CHECK_STR(err.id, "st-file-short");
	CHECK_STR(err.field, S2 ":header_length");
	hb_st_checkpoint_close(&ck);
}

/* ------------------------------------------------- upstream checkpoints */

static void check_upstream_set(const char *root, const char *set)
{
	char dir[1024], path[1100], field[256];
	struct hb_st_checkpoint ck;
	struct hb_error err;
	struct hb_st_ref r;
	cJSON *man = NULL, *cfg = NULL;
	const cJSON *tensors, *it;
	uint64_t vocab = 0, hidden = 0;
	size_t n = 0;

	snprintf(dir, sizeof(dir), "%s/%s/checkpoint", root, set);
	hb_error_clear(&err);
	if (hb_st_checkpoint_open(&ck, dir, &err)) {
		hb_check_fail(__FILE__, __LINE__, "%s: %s: %s: %s", set,
			      err.id ? err.id : "-", err.field, err.msg);
		return;
	}
	snprintf(path, sizeof(path), "%s/%s/oracle/manifest.json", root, set);
	CHECK_EQ_INT(hb_json_parse_file(path, 64u << 20, &man, NULL), HB_OK);
	snprintf(path, sizeof(path), "%s/config.json", dir);
	CHECK_EQ_INT(hb_json_parse_file(path, 1u << 20, &cfg, NULL), HB_OK);
	tensors = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(man, "checkpoint"), "tensors");
	CHECK(cJSON_IsObject(tensors));
	/* every tensor the manifest recorded, in the file, dtype and shape it recorded */
	cJSON_ArrayForEach(it, tensors) {
		const cJSON *shape = cJSON_GetObjectItemCaseSensitive(it, "shape"), *d;
		const char *file = NULL, *dtype = NULL;
		unsigned k = 0;
		n++;
		if (!hb_st_checkpoint_find(&ck, it->string, &r)) {
			hb_check_fail(__FILE__, __LINE__, "%s: %s absent", set, it->string);
			continue;
		}
		CHECK_EQ_INT(hb_json_str(it, "file", "file", &file, NULL), HB_OK);
		CHECK_EQ_INT(hb_json_str(it, "dtype", "dtype", &dtype, NULL), HB_OK);
		CHECK_STR(r.file->base, file);
		CHECK_STR(hb_dtype_name(r.tensor->dtype), dtype);
		CHECK_EQ_INT(cJSON_GetArraySize(shape), r.tensor->ndim);
		cJSON_ArrayForEach(d, shape) {
			if (k < r.tensor->ndim)
				CHECK_EQ_U64((uint64_t)d->valuedouble, r.tensor->shape[k]);
			k++;
		}
	}
	CHECK_EQ_U64(ck.ntensors, n);
	CHECK(n > 100);
	/* and one tensor against config.json */
	snprintf(field, sizeof(field), "%s.text_config", set);
	it = cJSON_GetObjectItemCaseSensitive(cfg, "text_config");
	CHECK_EQ_INT(hb_json_u64(it, "vocab_size", field, &vocab, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_u64(it, "hidden_size", field, &hidden, NULL), HB_OK);
	CHECK(hb_st_checkpoint_find(&ck, "model.language_model.embed_tokens.weight", &r));
	if (r.tensor) {
		CHECK_EQ_INT(r.tensor->dtype, HB_DTYPE_BF16); /* config dtype bfloat16 */
		CHECK_EQ_INT(r.tensor->ndim, 2);
		CHECK_EQ_U64(r.tensor->shape[0], vocab);
		CHECK_EQ_U64(r.tensor->shape[1], hidden);
	}
	if (!strcmp(set, "realshape")) {
		/* saved with max_shard_size 1MB: an index and several shards,
		 * as many as the manifest's listing names */
		const cJSON *t;
		char files[64][128];
		size_t nf = 0;
		CHECK(ck.has_index);
		cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(man, "checkpoint"), "tensors")) {
			const char *f = cJSON_GetObjectItemCaseSensitive(t, "file")->valuestring;
			size_t k;
			for (k = 0; k < nf && strcmp(files[k], f); k++)
				;
			if (k == nf && nf < 64)
				snprintf(files[nf++], sizeof(files[0]), "%s", f);
		}
		CHECK(nf > 1);
		CHECK_EQ_U64(ck.nshards, nf);
	}
	cJSON_Delete(man);
	cJSON_Delete(cfg);
	hb_st_checkpoint_close(&ck);
}

static void upstream_checkpoints_open(void)
{
	char root[1024];
	const char *sets[] = { "realshape", "general", "realshape-packed", "realshape-fp8" };

	snprintf(root, sizeof(root), "%s/tests/fixtures/upstream", hb_test_srcdir());
	for (size_t i = 0; i < HB_ARRAY_LEN(sets); i++)
		check_upstream_set(root, sets[i]);
}

HB_TEST_MAIN(T(indexed_checkpoint), T(index_without_total), T(no_index_sorted_shards),
	     T(unreadable_directory), T(shard_errors_pass_through),
	     T(upstream_checkpoints_open))
