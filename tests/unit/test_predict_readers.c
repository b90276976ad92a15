/*
 * Unit tests: the feature-set and predictor-checkpoint readers refuse what
 * the fuzz targets found them mishandling (tests/fuzz/regressions/features/
 * and the campaign's notes): a manifest error is feature-manifest with the
 * field named and the code returned, a manifest shard entry likewise, a
 * shard row count the file does not hold is refused before it is allocated,
 * an empty shard loads, and a checkpoint whose metadata claims a geometry
 * its tensors do not hold is refused before its weights are allocated.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_io.h"
#include "hb_json.h"
#include "predict/hb_predict.h"
#include "checkpoint/hb_safetensors.h"
#include "checkpoint/hb_st_write.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static void ident(struct hb_feature_ident *id, const char *split)
{
	memset(id, 0, sizeof(*id));
	memset(id->artifact, 0xa5, 32);
	memset(id->text, 0x5a, 32);
	memset(id->projection, 0x3c, 32);
	memset(id->split_id, 0xc3, 32);
	id->projection_seed = 7;
	id->width = 4;
	id->source_width = 8;
	id->layers = 2;
	snprintf(id->split, sizeof(id->split), "%s", split);
	snprintf(id->tap, sizeof(id->tap), "pre-attention-mix");
}

/* A set of `rows` rows written to dir. */
static void write_set(const char *dir, uint32_t rows)
{
	struct hb_feature_set s;
	struct hb_feature_ident id;
	struct hb_error err;
	float x[8];

	ident(&id, "validation");
	hb_feature_set_init(&s, &id);
	hb_error_clear(&err);
	for (uint32_t i = 0; i < rows; i++) {
		for (size_t j = 0; j < 8; j++)
			x[j] = (float)(i * 8 + j);
		CHECK_EQ_INT(hb_feature_append(&s, i, 0, 1, 10 + i, x, &err), HB_OK);
	}
	CHECK_EQ_INT(hb_feature_dir_write(dir, &s, 0, NULL, &err), HB_OK);
	hb_feature_set_release(&s);
}

/* Edit dir/features.json: fn changes the tree. */
static void edit_manifest(const char *dir, void (*fn)(cJSON *))
{
	char path[4096], *text = NULL, *out;
	size_t len = 0;
	cJSON *root;

	snprintf(path, sizeof(path), "%s/features.json", dir);
	CHECK_EQ_INT(hb_read_file(path, 1u << 20, &text, &len, NULL), HB_OK);
	root = cJSON_ParseWithLength(text, len);
	CHECK(root != NULL);
	free(text);
	if (!root)
		return;
	fn(root);
	out = cJSON_Print(root);
	CHECK(out != NULL);
	if (out)
		CHECK_EQ_INT(hb_test_write_file(path, out, strlen(out)), 0);
	free(out);
	cJSON_Delete(root);
}

static void drop_layers(cJSON *root)
{
	cJSON_DeleteItemFromObjectCaseSensitive(root, "layers");
}

static void drop_entry_sha(cJSON *root)
{
	cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "shards"), 0);
	cJSON_DeleteItemFromObjectCaseSensitive(e, "sha256");
}

static void huge_rows(cJSON *root)
{
	cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "shards"), 0);
	cJSON_ReplaceItemInObjectCaseSensitive(e, "rows", cJSON_CreateNumber(1099511627776.0));
}

static void manifest_refusals_name_the_field(void)
{
	struct hb_feature_set s;
	struct hb_error err;

	write_set("a", 3);
	edit_manifest("a", drop_layers);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_feature_dir_load("a", &s, &err), HB_ERR_FORMAT);
	CHECK_EQ_INT(err.code, HB_ERR_FORMAT);
	CHECK_STR(err.id ? err.id : "(none)", "feature-manifest");
	CHECK_STR(err.field, "layers");

	write_set("b", 3);
	edit_manifest("b", drop_entry_sha);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_feature_dir_load("b", &s, &err), HB_ERR_FORMAT);
	CHECK_STR(err.id ? err.id : "(none)", "feature-manifest");
	CHECK_STR(err.field, "shards[].sha256");
}

/* rows is not covered by the shard's digest: 2^40 of them must be refused
 * for the shard's own shape, not allocated (which fails HB_ERR_NOMEM). */
static void claimed_rows_refused_before_allocation(void)
{
	struct hb_feature_set s;
	struct hb_error err;

	write_set("c", 3);
	edit_manifest("c", huge_rows);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_feature_dir_load("c", &s, &err), HB_ERR_FORMAT);
	CHECK_STR(err.id ? err.id : "(none)", "feature-identity");
	CHECK_STR(err.field, "features");
}

static void empty_set_loads(void)
{
	struct hb_feature_set s;
	struct hb_error err;

	write_set("d", 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_feature_dir_load("d", &s, &err), HB_OK);
	CHECK_EQ_U64(s.n, 0);
	CHECK(s.x != NULL);
	hb_feature_set_release(&s);
}

/* A small checkpoint whose metadata says experts 65536 and rank 4096: its
 * tensors are 4 x 2; the loader must refuse it for their shapes without
 * allocating the 2 GiB the metadata claims (run under a 256 MiB address
 * space limit in a child). */
static void claimed_geometry_refused_before_allocation(void)
{
	struct hb_predictor p;
	struct hb_error err;
	struct hb_st_file f;
	struct hb_st_out t[5];
	struct hb_st_meta meta[32];
	uint8_t *data[5];
	size_t nm = 0;
	const cJSON *kv;
	pid_t pid;
	int status = 0;

#if defined(__SANITIZE_ADDRESS__)
	hb_test_skip("an address-space limit cannot be set under AddressSanitizer");
	return;
#endif
	memset(&p, 0, sizeof(p));
	p.width = 4, p.rank = 2, p.layers = 2, p.experts = 4, p.top_k = 2;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_predictor_alloc(&p, &err), HB_OK);
	ident(&p.id, "train");
	p.train_threads = calloc(1, sizeof(uint64_t));
	p.training = strdup("{}");
	CHECK_EQ_INT(hb_predictor_save("p.safetensors", &p, &err), HB_OK);
	hb_predictor_release(&p);
	/* the same tensors, the metadata's geometry inflated */
	CHECK_EQ_INT(hb_st_open(&f, "p.safetensors", &err), HB_OK);
	CHECK(f.ntensors == 5);
	for (size_t i = 0; i < 5 && i < f.ntensors; i++) {
		const struct hb_st_tensor *x = &f.tensors[i];
		data[i] = malloc(x->nbytes + 1);
		CHECK_EQ_INT(hb_st_read(&f, x, 0, data[i], (size_t)x->nbytes, &err), HB_OK);
		t[i] = (struct hb_st_out){x->name, x->dtype, x->ndim, {0}, data[i]};
		memcpy(t[i].shape, x->shape, sizeof(t[i].shape));
	}
	cJSON_ArrayForEach(kv, f.metadata) {
		const char *v = kv->valuestring;
		if (!strcmp(kv->string, "experts"))
			v = "65536";
		else if (!strcmp(kv->string, "rank"))
			v = "4096";
		meta[nm++] = (struct hb_st_meta){kv->string, v};
	}
	CHECK_EQ_INT(hb_st_write_file("big.safetensors", t, 5, meta, nm, true, NULL, NULL, &err), HB_OK);
	hb_st_close(&f);
	for (size_t i = 0; i < 5; i++)
		free(data[i]);
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct rlimit r = {256u << 20, 256u << 20};
		struct hb_predictor q;
		struct hb_error e;
		int rc;

		hb_error_clear(&e);
		if (setrlimit(RLIMIT_AS, &r))
			_exit(3);
		rc = hb_predictor_load("big.safetensors", &q, &e);
		_exit(rc == HB_ERR_FORMAT && e.id && !strcmp(e.id, "predictor-format") &&
		      !strcmp(e.field, "trunk") ? 0 : rc == HB_ERR_NOMEM ? 2 : 1);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ_INT(WEXITSTATUS(status), 0);
}

HB_TEST_MAIN(T(manifest_refusals_name_the_field), T(claimed_rows_refused_before_allocation), T(empty_set_loads),
	     T(claimed_geometry_refused_before_allocation))
