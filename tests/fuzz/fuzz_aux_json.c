/*
 * fuzz_aux_json.c: fuzz target of the smaller JSON readers beside the
 * formats' own targets: hb_eval_validation_parse (the eval.json hb-replay
 * eval --validation-eval takes for its Gate 4 table),
 * hb_trace_layer_time_parse (the hb-run --json record hb-trace
 * prefetch-sim and plot take as --timings) and hb_admit_tokenizer_vocab
 * (admission's id range of the tokenizer.json an artifact embeds, read in
 * one pass without a tree when the text allows).
 *
 * Input: one byte choosing the reader (bit 0 clear: eval.json; low bits
 * 01: the run record, with 1 + (byte >> 2) % 64 layers; low bits 11:
 * tokenizer.json), then the text.
 *
 * Invariants: a refusal sets its code (and, for eval.json, a "replay-" or
 * "json-" id); the same bytes read twice give the same outcome; the text
 * rendered from an accepted JSON tree (hb_json_render, exact since the
 * config target's finding) gets the same verdict as the original.  An
 * accepted eval.json has an object of distinct predictor objects, and
 * every overall.budgets member is a distinct decimal budget whose recall
 * is a number in [0, 1], checked here again by hand; an accepted run
 * record is not a streamed run and its layer time is finite, not
 * negative, and equal to decode_seconds / (generated_tokens - 1) / layers
 * as recomputed here from cJSON's own reading.  The tokenizer id range
 * read in one pass equals the one read on cJSON's tree
 * (hb_admit_tokenizer_vocab_tree), in verdict and value, and a text either
 * accepts is one JSON value to hb_json_parse.  This file owns only the
 * harness; the readers are cmd/hb-replay/dataset/hb_replay_eval.c,
 * cmd/hb-trace/analysis/hb_trace_runrec.c and
 * libstore/admit/hb_admit_vocab.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "hb_json.h"
#include "hb-replay/dataset/hb_replay.h"
#include "hb-trace/analysis/hb_trace_runrec.h"
#include "admit/hb_admit.h"

#include <math.h>

static bool distinct(const cJSON *obj)
{
	for (const cJSON *a = obj ? obj->child : NULL; a; a = a->next)
		for (const cJSON *b = a->next; b; b = b->next)
			if (!strcmp(a->string, b->string))
				return false;
	return true;
}

static bool decimal_budget(const char *k)
{
	size_t n = strlen(k);

	if (!n || n > 16 || k[0] == '0' || strspn(k, "0123456789") != n)
		return false;
	return strtoull(k, NULL, 10) <= (UINT64_C(1) << 53) - 1;
}

static void check_eval(const cJSON *v)
{
	const cJSON *preds = cJSON_GetObjectItemCaseSensitive(v, "predictors"), *p, *b;

	HB_FUZZ_ASSERT(cJSON_IsObject(v) && cJSON_IsObject(preds) && distinct(preds));
	cJSON_ArrayForEach(p, preds) {
		const cJSON *all = cJSON_GetObjectItemCaseSensitive(p, "overall"), *bk;
		HB_FUZZ_ASSERT(cJSON_IsObject(p));
		if (!all)
			continue;
		bk = cJSON_GetObjectItemCaseSensitive(all, "budgets");
		HB_FUZZ_ASSERT(cJSON_IsObject(all) && cJSON_IsObject(bk) && distinct(bk));
		cJSON_ArrayForEach(b, bk) {
			const cJSON *r = cJSON_GetObjectItemCaseSensitive(b, "recall");
			HB_FUZZ_ASSERT(decimal_budget(b->string) && cJSON_IsObject(b) && cJSON_IsNumber(r));
			HB_FUZZ_ASSERT(r->valuedouble >= 0 && r->valuedouble <= 1);
		}
	}
}

static bool known_id(const char *id)
{
	return id && (!strncmp(id, "replay-", 7) || !strcmp(id, "json-syntax") || !strcmp(id, "json-trailing"));
}

static int read_eval(const char *text, size_t len, cJSON **v, struct hb_error *e)
{
	hb_error_clear(e);
	return hb_eval_validation_parse(text, len, "eval.json", v, e);
}

static int fuzz_eval(const char *text, size_t len)
{
	cJSON *v = NULL, *w = NULL;
	struct hb_error e1, e2;
	char *again = NULL;
	size_t alen = 0;
	int rc = read_eval(text, len, &v, &e1), rc2;

	HB_FUZZ_ASSERT(rc == HB_OK ? v != NULL : (v == NULL && rc < 0 && e1.code == rc && known_id(e1.id)));
	rc2 = read_eval(text, len, &w, &e2);
	HB_FUZZ_ASSERT(rc2 == rc && hb_fuzz_same_id(e1.id, e2.id));
	cJSON_Delete(w);
	w = NULL;
	if (rc)
		return HB_FUZZ_REFUSED;
	check_eval(v);
	if (hb_json_render(v, false, &again, &alen, &e2) == HB_OK) {
		rc2 = read_eval(again, alen, &w, &e2);
		HB_FUZZ_ASSERT(rc2 == HB_OK);
		cJSON_Delete(w);
		free(again);
	}
	cJSON_Delete(v);
	return HB_FUZZ_ACCEPTED;
}

/* The reader's figure, recomputed from cJSON's reading of the same text. */
static void check_layer_time(const char *text, size_t len, uint32_t layers, double t)
{
	cJSON *j = cJSON_ParseWithLength(text, len);
	const cJSON *d, *g, *xc;

	if (!j)
		return; /* out of memory in cJSON: the reader parsed it */
	d = cJSON_GetObjectItemCaseSensitive(j, "decode_seconds");
	g = cJSON_GetObjectItemCaseSensitive(j, "generated_tokens");
	xc = cJSON_GetObjectItemCaseSensitive(j, "expert_cache");
	HB_FUZZ_ASSERT(cJSON_IsNumber(d) && isfinite(d->valuedouble) && d->valuedouble >= 0);
	HB_FUZZ_ASSERT(cJSON_IsNumber(g) && g->valuedouble >= 2 && g->valuedouble == floor(g->valuedouble) &&
		       g->valuedouble < 0x1p53);
	HB_FUZZ_ASSERT(!xc || !strcmp(cJSON_GetObjectItemCaseSensitive(xc, "mode")->valuestring, "all"));
	HB_FUZZ_ASSERT(isfinite(t) && t >= 0);
	HB_FUZZ_ASSERT(t == d->valuedouble / (double)((uint64_t)g->valuedouble - 1) / layers);
	cJSON_Delete(j);
}

static int read_run(const char *text, size_t len, uint32_t layers, double *t, struct hb_error *e)
{
	hb_error_clear(e);
	return hb_trace_layer_time_parse(text, len, "run.json", layers, t, e);
}

static int fuzz_run(const char *text, size_t len, uint32_t layers)
{
	struct hb_error e1, e2;
	double t = -1, t2 = -1;
	int rc = read_run(text, len, layers, &t, &e1), rc2;
	cJSON *tree = NULL;
	char *again = NULL;
	size_t alen = 0;

	HB_FUZZ_ASSERT(rc == HB_OK || (rc < 0 && e1.code == rc && t == -1));
	rc2 = read_run(text, len, layers, &t2, &e2);
	HB_FUZZ_ASSERT(rc2 == rc && hb_fuzz_same_id(e1.id, e2.id) && !memcmp(&t, &t2, sizeof(t)));
	/* the verdict depends on the tree, not on its spelling */
	if (hb_json_parse(text, len, "run.json", &tree, &e2) == HB_OK &&
	    hb_json_render(tree, false, &again, &alen, &e2) == HB_OK) {
		double t3 = -1;
		rc2 = read_run(again, alen, layers, &t3, &e2);
		HB_FUZZ_ASSERT(rc2 == rc && !memcmp(&t, &t3, sizeof(t)));
		free(again);
	}
	cJSON_Delete(tree);
	if (rc)
		return HB_FUZZ_REFUSED;
	check_layer_time(text, len, layers, t);
	return HB_FUZZ_ACCEPTED;
}

static int fuzz_vocab(const char *text, size_t len)
{
	uint64_t a = 12345, b = 54321, c = 999;
	bool fast = false;
	int ra = hb_admit_tokenizer_vocab(text, len, &a, &fast), rb = hb_admit_tokenizer_vocab_tree(text, len, &b);
	struct hb_error e;
	cJSON *tree = NULL;

	HB_FUZZ_ASSERT(ra == rb && (ra == HB_OK || ra == HB_ERR_FORMAT));
	HB_FUZZ_ASSERT(ra ? a == 12345 && b == 54321 && !fast : a == b);
	HB_FUZZ_ASSERT(hb_admit_tokenizer_vocab(text, len, &c, NULL) == ra && (ra || c == a));
	if (ra)
		return HB_FUZZ_REFUSED;
	hb_error_clear(&e);
	HB_FUZZ_ASSERT(hb_json_parse(text, len, "tokenizer.json", &tree, &e) == HB_OK);
	cJSON_Delete(tree);
	return HB_FUZZ_ACCEPTED;
}

int hb_fuzz_aux_json(const uint8_t *data, size_t size)
{
	if (!size || size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	if (!(data[0] & 1))
		return fuzz_eval((const char *)data + 1, size - 1);
	if ((data[0] & 3) == 1)
		return fuzz_run((const char *)data + 1, size - 1, 1u + (uint32_t)(data[0] >> 2) % 64u);
	return fuzz_vocab((const char *)data + 1, size - 1);
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_aux_json(data, size);
	return 0;
}
#endif
