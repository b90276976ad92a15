/*
 * Unit tests: a session file restores only when its replay reproduces the
 * digest it was saved with (hb_session_restore, AFN-010).
 *
 * The file holds the artifact identity, the first position, the token run
 * and the state digest; restore replays the run and compares.  A run edited
 * to other valid token ids replays without error, so only the digest can
 * tell: it must refuse (session-digest, HB_ERR_DIGEST) and leave the
 * session it was asked to fill exactly as it was.  The untouched file is
 * the control: it restores to the saver's digest.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb-convert/hb_convert.h"
#include "graph/hb_model.h"
#include "graph/hb_session.h"

static struct hb_model *load(const char *out)
{
	struct hb_convert_opts o;
	struct hb_model *m = NULL;
	char src[4096];

	snprintf(src, sizeof(src), "%s/tests/fixtures/upstream/realshape/checkpoint", hb_test_srcdir());
	memset(&o, 0, sizeof(o));
	o.src_dir = src;
	o.out_path = out;
	o.expert_codec = HB_CONV_EXPERTS_BF16;
	o.ple_codec = HB_CONV_PLE_BF16;
	if (hb_convert(&o, NULL, NULL) || hb_model_load(out, &m, NULL))
		return NULL;
	return m;
}

static int read_all(const char *path, uint8_t **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long n;

	if (!f)
		return -1;
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		fclose(f);
		return -1;
	}
	*buf = malloc((size_t)n + 1);
	*len = (size_t)n;
	if (!*buf || fread(*buf, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		return -1;
	}
	return fclose(f);
}

/* restore path into r must fail with the digest refusal and change nothing */
static void expect_digest_refusal(struct hb_session *r, const char *path)
{
	uint8_t before[32], after[32];
	uint64_t frontier = hb_session_frontier(r);
	struct hb_error err;

	hb_session_digest(r, before);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_session_restore(r, path, &err), HB_ERR_DIGEST);
	CHECK_STR(err.id, "session-digest");
	CHECK_EQ_U64(hb_session_frontier(r), frontier);
	hb_session_digest(r, after);
	CHECK(memcmp(before, after, 32) == 0);
}

static void edited_files_are_refused(void)
{
	struct hb_model *m = load("a.gguf");
	struct hb_session *s = NULL, *r = NULL;
	enum { N = 24, HEAD = 56 }; /* magic 8, artifact 32, base 8, count 8 */
	int32_t tok[N], warm[5] = {3, 1, 4, 1, 5}, t;
	uint8_t *file = NULL, d[32], e[32];
	size_t len = 0;

	CHECK(m != NULL);
	if (!m)
		return;
	for (size_t i = 0; i < N; i++)
		tok[i] = (int32_t)((i * 7919 + 11) % m->vocab_physical);
	CHECK_EQ_INT(hb_session_create(m, NULL, 64, &s, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_create(m, NULL, 64, &r, NULL), HB_OK);
	if (!s || !r)
		goto out;
	CHECK_EQ_INT(hb_session_forward(s, tok, N, NULL, NULL, NULL, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_save(s, "s.state", NULL), HB_OK);
	CHECK_EQ_INT(read_all("s.state", &file, &len), 0);
	CHECK_EQ_U64(len, HEAD + 4 * N + 32);
	if (len != HEAD + 4 * N + 32)
		goto out;
	/* r holds a state of its own, which a refusal must keep */
	CHECK_EQ_INT(hb_session_forward(r, warm, 5, NULL, NULL, NULL, NULL), HB_OK);

	/* one token of the run changed to another valid id */
	memcpy(&t, file + HEAD + 4 * 10, 4);
	t = (t + 1) % (int32_t)m->vocab_physical;
	memcpy(file + HEAD + 4 * 10, &t, 4);
	CHECK_EQ_INT(hb_test_write_file("token.state", file, len), 0);
	expect_digest_refusal(r, "token.state");
	t = (t + (int32_t)m->vocab_physical - 1) % (int32_t)m->vocab_physical;
	memcpy(file + HEAD + 4 * 10, &t, 4);

	/* one bit of the stored digest flipped */
	file[len - 1] ^= 0x01;
	CHECK_EQ_INT(hb_test_write_file("digest.state", file, len), 0);
	expect_digest_refusal(r, "digest.state");
	file[len - 1] ^= 0x01;

	/* a first position whose run would wrap past 2^64: refused before any
	 * replay, r unchanged (set_start's rule, shared) */
	{
		uint64_t base, far = UINT64_MAX - 10;
		uint8_t before[32], after[32];
		struct hb_error err;
		memcpy(&base, file + 40, 8);
		memcpy(file + 40, &far, 8);
		CHECK_EQ_INT(hb_test_write_file("wrap.state", file, len), 0);
		hb_session_digest(r, before);
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_session_restore(r, "wrap.state", &err), HB_ERR_INVALID);
		CHECK_STR(err.id, "session-start-range");
		CHECK_EQ_U64(hb_session_frontier(r), 5);
		hb_session_digest(r, after);
		CHECK(memcmp(before, after, 32) == 0);
		memcpy(file + 40, &base, 8);
	}

	/* the control: the bytes as saved restore to the saver's state */
	CHECK_EQ_INT(hb_test_write_file("same.state", file, len), 0);
	CHECK_EQ_INT(hb_session_restore(r, "same.state", NULL), HB_OK);
	CHECK_EQ_U64(hb_session_frontier(r), N);
	hb_session_digest(s, d);
	hb_session_digest(r, e);
	CHECK(memcmp(d, e, 32) == 0);
out:
	free(file);
	hb_session_free(s);
	hb_session_free(r);
	hb_model_free(m);
}

HB_TEST_MAIN(T(edited_files_are_refused))
