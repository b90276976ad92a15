/*
 * Unit tests: the committed upstream oracle fixtures are intact.
 *
 * This is the C side of the offline fixture check (scripts/oracle/
 * check_fixtures.py is the Python side): every array named in every
 * tests/fixtures/upstream/<name>/oracle/manifest.json exists, has exactly
 * prod(shape) * sizeof(dtype) bytes and the recorded SHA-256, and carries one
 * of the four provenance classes of AFN-014; every checkpoint file has its
 * recorded digest.  A fixture edited by hand, truncated, or relabelled fails.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_sha256.h"

#include <dirent.h>
#include <unistd.h>

static const char *const provenance_classes[] = {
	"upstream-capture", "independent-cross-check", "contract-control", "derived",
};

static bool file_digest_is(const char *path, const char *hex)
{
	char *data = NULL;
	size_t len = 0;
	uint8_t d[HB_SHA256_BYTES];
	char got[HB_SHA256_HEX];

	if (hb_read_file(path, 256u << 20, &data, &len, NULL))
		return false;
	hb_sha256_buf(data, len, d);
	free(data);
	hb_hex_encode(d, sizeof(d), got);
	return strcmp(got, hex) == 0;
}

static uint64_t file_size_of(const char *path)
{
	char *data = NULL;
	size_t len = 0;

	if (hb_read_file(path, 256u << 20, &data, &len, NULL))
		return UINT64_MAX;
	free(data);
	return len;
}

static unsigned dtype_size(const char *dtype)
{
	if (!strcmp(dtype, "f32") || !strcmp(dtype, "i32"))
		return 4;
	if (!strcmp(dtype, "i64"))
		return 8;
	return 0;
}

struct counts {
	unsigned arrays;
	unsigned by_class[4];
};

static void check_array(const char *dir, const cJSON *a, struct counts *c)
{
	const char *name = NULL, *file = NULL, *dtype = NULL, *sha = NULL, *prov = NULL;
	const cJSON *shape = cJSON_GetObjectItemCaseSensitive(a, "shape"), *dim;
	uint64_t elems = 1;
	char path[4096];
	int cls = -1;

	CHECK_EQ_INT(hb_json_str(a, "name", "name", &name, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_str(a, "file", "file", &file, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_str(a, "dtype", "dtype", &dtype, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_str(a, "sha256", "sha256", &sha, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_str(a, "provenance", "provenance", &prov, NULL), HB_OK);
	if (!name || !file || !dtype || !sha || !prov)
		return;
	for (size_t i = 0; i < HB_ARRAY_LEN(provenance_classes); i++)
		if (!strcmp(prov, provenance_classes[i]))
			cls = (int)i;
	if (cls < 0)
		hb_check_fail(__FILE__, __LINE__, "%s: unknown provenance '%s'", name, prov);
	else
		c->by_class[cls]++;
	CHECK(dtype_size(dtype) != 0);
	CHECK(cJSON_IsArray(shape));
	cJSON_ArrayForEach(dim, shape) {
		uint64_t d = 0;
		CHECK_EQ_INT(hb_json_item_u64(dim, "shape", &d, NULL), HB_OK);
		elems *= d;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (file_size_of(path) != elems * dtype_size(dtype))
		hb_check_fail(__FILE__, __LINE__, "%s: %s has %" PRIu64 " bytes, shape says %" PRIu64,
			      name, file, file_size_of(path), elems * dtype_size(dtype));
	if (!file_digest_is(path, sha))
		hb_check_fail(__FILE__, __LINE__, "%s: %s digest differs from the manifest", name, file);
	c->arrays++;
}

static void check_checkpoint(const char *fixture, const cJSON *manifest)
{
	const cJSON *ck = cJSON_GetObjectItemCaseSensitive(manifest, "checkpoint");
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(ck, "files"), *f;
	char path[4096];
	unsigned n = 0;

	CHECK(cJSON_IsObject(files));
	cJSON_ArrayForEach(f, files) {
		snprintf(path, sizeof(path), "%s/checkpoint/%s", fixture, f->string);
		if (!cJSON_IsString(f) || !file_digest_is(path, f->valuestring))
			hb_check_fail(__FILE__, __LINE__, "%s: digest differs", path);
		n++;
	}
	CHECK(n >= 2); /* at least config.json and one safetensors file */
}

static void fixtures_are_intact(void)
{
	char root[4096], fixture[4096], oracle[4096], path[4096];
	DIR *d;
	struct dirent *e;
	unsigned checked = 0;

	snprintf(root, sizeof(root), "%s/tests/fixtures/upstream", hb_test_srcdir());
	d = opendir(root);
	CHECK(d != NULL);
	if (!d)
		return;
	while ((e = readdir(d))) {
		cJSON *m = NULL, *arrays, *a;
		const char *schema = NULL;
		struct counts c;

		if (e->d_name[0] == '.')
			continue;
		snprintf(fixture, sizeof(fixture), "%s/%s", root, e->d_name);
		snprintf(oracle, sizeof(oracle), "%s/oracle", fixture);
		snprintf(path, sizeof(path), "%s/manifest.json", oracle);
		if (access(path, F_OK) != 0)
			continue;
		memset(&c, 0, sizeof(c));
		CHECK_EQ_INT(hb_json_parse_file(path, 64u << 20, &m, NULL), HB_OK);
		if (!m)
			continue;
		CHECK_EQ_INT(hb_json_str(m, "schema", "schema", &schema, NULL), HB_OK);
		CHECK_STR(schema, "hebrus-oracle-v1");
		arrays = cJSON_GetObjectItemCaseSensitive(m, "arrays");
		CHECK(cJSON_IsArray(arrays));
		cJSON_ArrayForEach(a, arrays)
			check_array(oracle, a, &c);
		check_checkpoint(fixture, m);
		if (cJSON_GetObjectItemCaseSensitive(m, "derived_from")) {
			/* A converter input derived from an oracle set (packed or
			 * FP8 re-encodings) may carry no upstream capture, but must
			 * not claim one either. */
			CHECK_EQ_INT(c.by_class[0], 0);
		} else {
			/* An oracle set that captured nothing from upstream is no
			 * oracle. */
			CHECK(c.by_class[0] > 0);
			checked++;
		}
		cJSON_Delete(m);
	}
	closedir(d);
	/* The foundation issue asks for at least two upstream checkpoints. */
	CHECK(checked >= 2);
}

HB_TEST_MAIN(T(fixtures_are_intact))
