/*
 * Unit tests: replay the committed fuzz inputs without libFuzzer.
 *
 * Every file under tests/fuzz/seeds/<target>/, tests/fuzz/regressions/<target>/
 * and the campaign's minimised corpus tests/fuzz/corpus/<target>/ goes through the same per-input function
 * the libFuzzer target calls (tests/fuzz/fuzz_<target>.c), compiled here by
 * the normal compiler, so `make test` (and `make asan`) keep proving that
 * no input that once crashed crashes again and that the harnesses' own
 * invariants hold.  A seed whose name starts with "ok-" is a valid input
 * and must be accepted, so a parser that starts refusing good files fails
 * here too.  A crash or a broken invariant aborts the binary, which
 * scripts/run-tests reports as a failure.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_io.h"
#include "../fuzz/fuzz.h"

#include <dirent.h>

struct replay {
	int files;
	int ok_named;
	int ok_accepted;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Feed every file of dir (README* and dot files skipped) to fn, in name
 * order so that a failure is reproducible. */
static void replay_dir(const char *dir, int (*fn)(const uint8_t *, size_t),
		       struct replay *r)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;

	if (!d)
		return; /* an empty regressions/ directory may be absent */
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || strncmp(e->d_name, "README", 6) == 0)
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*names));
			CHECK(nn != NULL);
			if (!nn)
				break;
			names = nn;
		}
		names[n] = strdup(e->d_name);
		CHECK(names[n] != NULL);
		if (names[n])
			n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		char *data = NULL;
		size_t len = 0;
		int got;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (hb_read_file(path, 2u << 20, &data, &len, NULL) != HB_OK) {
			hb_check_fail(__FILE__, __LINE__, "cannot read %s", path);
			free(names[i]);
			continue;
		}
		got = fn((const uint8_t *)data, len);
		r->files++;
		if (strncmp(names[i], "ok-", 3) == 0) {
			r->ok_named++;
			if (got == HB_FUZZ_ACCEPTED)
				r->ok_accepted++;
			else
				hb_check_fail(__FILE__, __LINE__, "%s was refused", path);
		}
		free(data);
		free(names[i]);
	}
	free(names);
}

static struct replay replay_target(const char *target,
				   int (*fn)(const uint8_t *, size_t))
{
	struct replay r = { 0, 0, 0 };
	char dir[4096];

	snprintf(dir, sizeof(dir), "%s/tests/fuzz/seeds/%s", hb_test_srcdir(), target);
	replay_dir(dir, fn, &r);
	snprintf(dir, sizeof(dir), "%s/tests/fuzz/regressions/%s", hb_test_srcdir(), target);
	replay_dir(dir, fn, &r);
	snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", hb_test_srcdir(), target);
	replay_dir(dir, fn, &r);
	return r;
}

/* Each target has valid seeds (the ok-* counts are what make-seeds
 * writes), and every one of them is accepted. */
static void gguf_inputs(void)
{
	struct replay r = replay_target("gguf", hb_fuzz_gguf);

	CHECK_EQ_INT(r.ok_named, 3);
	CHECK_EQ_INT(r.ok_accepted, 3);
	CHECK(r.files >= 3);
}

static void expert_store_inputs(void)
{
	struct replay r = replay_target("expert_store", hb_fuzz_expert_store);

	CHECK_EQ_INT(r.ok_named, 6);
	CHECK_EQ_INT(r.ok_accepted, 6);
	CHECK(r.files >= 6);
}

static void ple_manifest_inputs(void)
{
	struct replay r = replay_target("ple_manifest", hb_fuzz_ple_manifest);

	CHECK_EQ_INT(r.ok_named, 5);
	CHECK_EQ_INT(r.ok_accepted, 5);
	CHECK(r.files >= 5);
}

static void safetensors_inputs(void)
{
	struct replay r = replay_target("safetensors", hb_fuzz_safetensors);

	CHECK_EQ_INT(r.ok_named, 4);
	CHECK_EQ_INT(r.ok_accepted, 4);
	CHECK(r.files >= 61);
}

static void trace_inputs(void)
{
	struct replay r = replay_target("trace", hb_fuzz_trace);

	CHECK_EQ_INT(r.ok_named, 4);
	CHECK_EQ_INT(r.ok_accepted, 4);
	CHECK(r.files >= 6);
}

static void transcripts_inputs(void)
{
	struct replay r = replay_target("transcripts", hb_fuzz_transcripts);

	CHECK_EQ_INT(r.ok_named, 3);
	CHECK_EQ_INT(r.ok_accepted, 3);
	CHECK(r.files >= 5);
}

static void chat_inputs(void)
{
	struct replay r = replay_target("chat", hb_fuzz_chat);

	CHECK_EQ_INT(r.ok_named, 36);
	CHECK_EQ_INT(r.ok_accepted, 36);
	CHECK(r.files >= 49);
}

static void tokenizer_inputs(void)
{
	struct replay r = replay_target("tokenizer", hb_fuzz_tokenizer);

	CHECK_EQ_INT(r.ok_named, 1);
	CHECK_EQ_INT(r.ok_accepted, 1);
	CHECK(r.files >= 2);
}

static void config_inputs(void)
{
	struct replay r = replay_target("config", hb_fuzz_config);

	CHECK_EQ_INT(r.ok_named, 4);
	CHECK_EQ_INT(r.ok_accepted, 4);
	CHECK(r.files >= 5);
}

static void spec_inputs(void)
{
	struct replay r = replay_target("spec", hb_fuzz_spec);

	CHECK_EQ_INT(r.ok_named, 11);
	CHECK_EQ_INT(r.ok_accepted, 11);
	CHECK(r.files >= 13);
}

static void features_inputs(void)
{
	struct replay r = replay_target("features", hb_fuzz_features);

	CHECK_EQ_INT(r.ok_named, 3);
	CHECK_EQ_INT(r.ok_accepted, 3);
	CHECK(r.files >= 4);
}

static void predictor_inputs(void)
{
	struct replay r = replay_target("predictor", hb_fuzz_predictor);

	CHECK_EQ_INT(r.ok_named, 1);
	CHECK_EQ_INT(r.ok_accepted, 1);
	CHECK(r.files >= 1);
}

static void label_inputs(void)
{
	struct replay r = replay_target("label", hb_fuzz_label);

	CHECK_EQ_INT(r.ok_named, 3);
	CHECK_EQ_INT(r.ok_accepted, 3);
	CHECK(r.files >= 5);
}

static void checkpoint_inputs(void)
{
	struct replay r = replay_target("checkpoint", hb_fuzz_checkpoint);

	CHECK_EQ_INT(r.ok_named, 2);
	CHECK_EQ_INT(r.ok_accepted, 2);
	CHECK(r.files >= 12);
}

static void st_write_inputs(void)
{
	struct replay r = replay_target("st_write", hb_fuzz_st_write);

	CHECK_EQ_INT(r.ok_named, 5);
	CHECK_EQ_INT(r.ok_accepted, 5);
	CHECK(r.files >= 5);
}

static void gguf_write_inputs(void)
{
	struct replay r = replay_target("gguf_write", hb_fuzz_gguf_write);

	CHECK_EQ_INT(r.ok_named, 3);
	CHECK_EQ_INT(r.ok_accepted, 3);
	CHECK(r.files >= 3);
}

static void draft_inputs(void)
{
	struct replay r = replay_target("draft", hb_fuzz_draft);

	CHECK_EQ_INT(r.ok_named, 1);
	CHECK_EQ_INT(r.ok_accepted, 1);
	CHECK(r.files >= 5);
}

/* the ok-* seeds: hb-run --stream-trace output under each predictor, and
 * one cut to its header (a shard of no record) */
static void xstrace_inputs(void)
{
	struct replay r = replay_target("xstrace", hb_fuzz_xstrace);

	CHECK_EQ_INT(r.ok_named, 4);
	CHECK_EQ_INT(r.ok_accepted, 4);
	CHECK(r.files >= 7);
}

/* the ok-* seeds: hb-run --deadlines output of two streamed runs */
static void timely_inputs(void)
{
	struct replay r = replay_target("timely", hb_fuzz_timely);

	CHECK_EQ_INT(r.ok_named, 2);
	CHECK_EQ_INT(r.ok_accepted, 2);
	CHECK(r.files >= 9);
}

/* the ok-* seeds: an eval.json of hb-replay eval, an hb-run --json record,
 * tokenizers (tests/fuzz/README.md) */
static void aux_json_inputs(void)
{
	struct replay r = replay_target("aux_json", hb_fuzz_aux_json);

	CHECK_EQ_INT(r.ok_named, 6);
	CHECK_EQ_INT(r.ok_accepted, 6);
	CHECK(r.files >= 14);
}

/* the ok-* seeds: prompt id lists of hb-run --tokens-file (commas, lines,
 * both, INT32_MAX) */
static void prompt_ids_inputs(void)
{
	struct replay r = replay_target("prompt_ids", hb_fuzz_prompt_ids);

	CHECK_EQ_INT(r.ok_named, 4);
	CHECK_EQ_INT(r.ok_accepted, 4);
	CHECK(r.files >= 10);
}

/* The harnesses themselves: a refusal is a clean return, not a crash,
 * and a clearly broken input is refused. */
static void harness_refuses_garbage(void)
{
	static const uint8_t junk[] = "not a model file at all";

	CHECK_EQ_INT(hb_fuzz_gguf(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_expert_store(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_ple_manifest(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_safetensors(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_config(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_gguf(NULL, 0), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_expert_store(junk, 0), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_ple_manifest(junk, 0), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_safetensors(junk, 0), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_config(junk, 0), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_trace(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_trace(junk, 0), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_transcripts(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_chat(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_chat(junk, 0), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_tokenizer(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_spec(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_spec(junk, 0), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_features(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_predictor(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_label(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_checkpoint(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_st_write(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_gguf_write(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_draft(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_xstrace(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_xstrace(junk, 0), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_timely(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_timely(junk, 0), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_aux_json(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_aux_json(junk + 1, sizeof(junk) - 1), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_aux_json(junk, 0), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_prompt_ids(junk, sizeof(junk)), HB_FUZZ_REFUSED);
	CHECK_EQ_INT(hb_fuzz_prompt_ids(junk, 0), HB_FUZZ_REFUSED);
}

HB_TEST_MAIN(T(gguf_inputs), T(expert_store_inputs), T(ple_manifest_inputs),
	     T(safetensors_inputs), T(config_inputs), T(trace_inputs),
	     T(transcripts_inputs), T(chat_inputs), T(tokenizer_inputs), T(spec_inputs), T(features_inputs),
	     T(predictor_inputs), T(label_inputs), T(checkpoint_inputs), T(st_write_inputs),
	     T(gguf_write_inputs), T(draft_inputs), T(xstrace_inputs), T(timely_inputs), T(aux_json_inputs),
	     T(prompt_ids_inputs),
	     T(harness_refuses_garbage))
