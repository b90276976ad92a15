/*
 * fuzz_reports.c: fuzz target of the two readers of earlier runs' JSON
 * reports: hb_eval_validation_parse (the eval.json hb-replay eval
 * --validation-eval takes for its Gate 4 table) and
 * hb_trace_layer_time_parse (the hb-run --json record hb-trace
 * prefetch-sim and plot take as --timings).
 *
 * Input: one byte choosing the reader (even: eval.json; odd: the run
 * record, with 1 + (byte >> 1) % 64 layers), then the report's text.
 *
 * Invariants: a refusal sets its code (and, for eval.json, a "replay-" or
 * "json-" id); the same bytes read twice give the same outcome; the text
 * rendered from an accepted JSON tree (hb_json_render, exact since the
 * config target's finding) gets the same verdict and id as the original.
 * An accepted eval.json has an object of distinct predictor objects, and
 * every overall.budgets member is a distinct decimal budget whose recall
 * is a number in [0, 1], checked here again by hand; an accepted run
 * record is not a streamed run and its layer time is finite, not
 * negative, and equal to decode_seconds / (generated_tokens - 1) / layers
 * as recomputed here from cJSON's own reading.  This file owns only the
 * harness; the readers are cmd/hb-replay/dataset/hb_replay_eval.c and
 * cmd/hb-trace/analysis/hb_trace_runrec.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "hb_json.h"
#include "hb-replay/dataset/hb_replay.h"
#include "hb-trace/analysis/hb_trace_runrec.h"

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

int hb_fuzz_reports(const uint8_t *data, size_t size)
{
	if (!size || size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	if (!(data[0] & 1))
		return fuzz_eval((const char *)data + 1, size - 1);
	return fuzz_run((const char *)data + 1, size - 1, 1u + (uint32_t)(data[0] >> 1) % 64u);
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_reports(data, size);
	return 0;
}
#endif
