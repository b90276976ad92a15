/*
 * Unit tests: refusals on the side of a boundary that the committed corpora
 * do not reach.  Each case pairs the refused input with the accepted one
 * next to it, so that the test proves the boundary, not just a refusal.
 *
 * - safetensors: data_offsets must span exactly prod(shape) x element size.
 *   The corrupt corpus has an entry with fewer bytes than its shape needs
 *   (st-offsets-mismatch); more bytes than it needs is the same defect.
 * - config.json: the rotary dimension head_dim x partial_rotary_factor must
 *   be even, since RoPE rotates it as two halves (hb_rope).  The upstream
 *   fixture's head_dim 32 x 0.25 = 8 resolves; 32 x 7/32 = 7 is refused.
 * - admission: an artifact with defects for two steps is refused by the
 *   earlier step (hb_admit.h step order).  The mutation battery changes one
 *   thing per artifact, so it sees each step's refusal but not their order.
 */
#include "hb_base.h"
#include "harness.h"
#include "adm_mutate.h"
#include "admit/hb_admit.h"
#include "artifact/hb_artifact.h"
#include "hb-convert/hb_convert.h"
#include "hb_json.h"
#include "model/hb_qwen_config.h"
#include "checkpoint/hb_safetensors.h"

/* 8-byte LE header length, the header, then payload bytes */
static int write_st(const char *path, const char *header, size_t payload)
{
	size_t hl = strlen(header), total = 8 + hl + payload;
	unsigned char *b = calloc(1, total);
	int rc;

	if (!b)
		return -1;
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
	memcpy(b + 8, header, hl);
	rc = hb_test_write_file(path, b, total);
	free(b);
	return rc;
}

static void st_offsets_span_exactly_the_shape(void)
{
	struct hb_st_file f;
	struct hb_error err;

	/* F32 [1] over 4 bytes: exact */
	CHECK_EQ_INT(write_st("exact.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_st_open(&f, "exact.safetensors", &err), HB_OK);
	hb_st_close(&f);
	/* F32 [1] over 8 bytes: four bytes more than the shape needs */
	CHECK_EQ_INT(write_st("wide.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8), 0);
	hb_error_clear(&err);
	CHECK(hb_st_open(&f, "wide.safetensors", &err) != HB_OK);
	CHECK_STR(err.id, "st-offsets-mismatch");
	CHECK_STR(err.field, "wide.safetensors:tensors[w].data_offsets");
	CHECK_EQ_INT(f.fd, -1);
	hb_st_close(&f);
}

/* the upstream fixture's config with rope_parameters.partial_rotary_factor set */
static int config_with_factor(double factor, struct hb_qwen_config *c, struct hb_error *err)
{
	char path[4096];
	cJSON *root = NULL, *tc, *rope;
	int rc;

	snprintf(path, sizeof(path), "%s/tests/fixtures/upstream/realshape/checkpoint/config.json",
		 hb_test_srcdir());
	rc = hb_json_parse_file(path, 1u << 20, &root, NULL);
	CHECK_EQ_INT(rc, HB_OK);
	if (rc)
		return rc;
	tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
	rope = cJSON_GetObjectItemCaseSensitive(tc ? tc : root, "rope_parameters");
	CHECK(rope != NULL);
	if (!rope) {
		cJSON_Delete(root);
		return HB_ERR_INTERNAL;
	}
	cJSON_ReplaceItemInObjectCaseSensitive(rope, "partial_rotary_factor", cJSON_CreateNumber(factor));
	rc = hb_qwen_config_parse(root, c, err);
	cJSON_Delete(root);
	return rc;
}

static void rotary_dimension_must_be_even(void)
{
	struct hb_qwen_config c;
	struct hb_error err;

	hb_error_clear(&err);
	CHECK_EQ_INT(config_with_factor(0.25, &c, &err), HB_OK);
	CHECK_EQ_U64(c.head_dim, 32);
	CHECK_EQ_U64(c.rotary_dim, 8);
	hb_error_clear(&err);
	CHECK_EQ_INT(config_with_factor(0.21875, &c, &err), HB_ERR_UNSUPPORTED);
	CHECK_STR(err.id, "cfg-unsupported");
	CHECK_STR(err.field, "text_config.rope_parameters.partial_rotary_factor");
}

/* admit path; expects a refusal with id at step */
static void expect_refused(const char *path, const char *id, int step)
{
	struct hb_admit_opts o = { .path = path };
	struct hb_admit_result r;
	struct hb_error err;

	hb_error_clear(&err);
	memset(&r, 0, sizeof(r));
	CHECK_EQ_INT(hb_admit(&o, &r, &err), HB_OK);
	CHECK(!r.admitted);
	CHECK_EQ_INT(r.step, step);
	CHECK_STR(err.id, id);
	cJSON_Delete(r.report);
}

/* the realshape fixture converted to path */
static int convert_realshape(const char *path)
{
	struct hb_convert_opts o;
	char ck[4096];

	snprintf(ck, sizeof(ck), "%s/tests/fixtures/upstream/realshape/checkpoint", hb_test_srcdir());
	memset(&o, 0, sizeof(o));
	o.src_dir = ck;
	o.out_path = path;
	o.expert_codec = HB_CONV_EXPERTS_BF16;
	o.ple_codec = HB_CONV_PLE_BF16;
	return hb_convert(&o, NULL, NULL);
}

static void admission_reports_the_earliest_failing_step(void)
{
	struct adm_src src;
	struct adm_edit ple = { .kind = ADM_KV_SET, .key = HB_KEY_PLE_CODEC };
	struct adm_edit policy = { .kind = ADM_KV_SET, .key = HB_KEY_TEXT_ONLY };
	struct adm_edit both[2];
	struct hb_error err;

	CHECK_EQ_INT(convert_realshape("a.gguf"), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(adm_src_open(&src, "a.gguf", &err), HB_OK);
	if (err.code)
		return;
	ple.val = adm_v_str("mlx-affine4-g32");  /* step 9: adm-ple-codec */
	policy.val = adm_v_bool(false);          /* step 10: adm-policy */
	both[0] = policy;
	both[1] = ple;
	CHECK_EQ_INT(adm_emit(&src, &ple, 1, "ple.gguf", NULL), HB_OK);
	CHECK_EQ_INT(adm_emit(&src, &policy, 1, "policy.gguf", NULL), HB_OK);
	CHECK_EQ_INT(adm_emit(&src, both, 2, "both.gguf", NULL), HB_OK);
	expect_refused("ple.gguf", "adm-ple-codec", 9);
	expect_refused("policy.gguf", "adm-policy", 10);
	expect_refused("both.gguf", "adm-ple-codec", 9);
	adm_src_close(&src);
}

HB_TEST_MAIN(T(st_offsets_span_exactly_the_shape), T(rotary_dimension_must_be_even),
	     T(admission_reports_the_earliest_failing_step))
