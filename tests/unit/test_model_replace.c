/*
 * Unit test: the model maps the file admission checked.  hb_model_load opens
 * the artifact once and admits that descriptor; a test seam
 * (hb_model_after_admission_seam) renames another valid artifact over the
 * path between admission and the mapping.  The loaded model must still be
 * the admitted one (its identity equals a pristine copy's and differs from
 * the replacement's); before the single open, the runner reopened the path
 * and would have mapped the replacement.  Streaming the experts afterwards
 * (hb_model_stream) reads them through the same descriptor: the replacement
 * has other records (affine4, not bf16), which a reopen of the path would
 * find and refuse as a changed store.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb-convert/hb_convert.h"
#include "graph/hb_model.h"
#include "graph/hb_session_test.h"

#include <stdio.h>

static int convert(const char *out, enum hb_expert_codec_opt codec)
{
	struct hb_convert_opts o;
	char src[4096];

	snprintf(src, sizeof(src), "%s/tests/fixtures/upstream/realshape/checkpoint", hb_test_srcdir());
	memset(&o, 0, sizeof(o));
	o.src_dir = src;
	o.out_path = out;
	o.expert_codec = codec;
	o.ple_codec = HB_CONV_PLE_BF16;
	return hb_convert(&o, NULL, NULL);
}

static int replaced;

static void replace_path(const char *path)
{
	replaced += rename("other.gguf", path) == 0;
}

static void maps_what_admission_checked(void)
{
	struct hb_model *a = NULL, *b = NULL, *m = NULL;

	CHECK_EQ_INT(convert("a.gguf", HB_CONV_EXPERTS_BF16), HB_OK);
	CHECK_EQ_INT(convert("pristine.gguf", HB_CONV_EXPERTS_BF16), HB_OK);
	CHECK_EQ_INT(convert("other.gguf", HB_CONV_EXPERTS_AFFINE4_G64), HB_OK);
	CHECK_EQ_INT(convert("b.gguf", HB_CONV_EXPERTS_AFFINE4_G64), HB_OK);
	CHECK_EQ_INT(hb_model_load("pristine.gguf", &a, NULL), HB_OK);
	CHECK_EQ_INT(hb_model_load("b.gguf", &b, NULL), HB_OK);
	if (!a || !b)
		goto out;
	CHECK(memcmp(a->artifact_sha, b->artifact_sha, 32) != 0); /* the two can be told apart */

	hb_model_after_admission_seam = replace_path;
	CHECK_EQ_INT(hb_model_load("a.gguf", &m, NULL), HB_OK);
	hb_model_after_admission_seam = NULL;
	CHECK_EQ_INT(replaced, 1);
	if (!m)
		goto out;
	CHECK(memcmp(m->artifact_sha, a->artifact_sha, 32) == 0);
	CHECK(memcmp(m->artifact_sha, b->artifact_sha, 32) != 0);
	{
		struct hb_xs_config c;
		struct hb_error err;

		hb_xs_config_default(&c);
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_model_stream(m, "25%", &c, HB_XS_PRED_NONE, &err), HB_OK);
		if (err.code)
			printf("# stream: %s: %s\n", err.field, err.msg);
		CHECK(m->xs != NULL);
	}
	hb_model_free(m);
	m = NULL;
	/* the path now holds the replacement, and a fresh load says so */
	CHECK_EQ_INT(hb_model_load("a.gguf", &m, NULL), HB_OK);
	if (m)
		CHECK(memcmp(m->artifact_sha, b->artifact_sha, 32) == 0);
out:
	hb_model_free(m);
	hb_model_free(a);
	hb_model_free(b);
}

HB_TEST_MAIN(T(maps_what_admission_checked))
