/*
 * hb-trace/plot.c: hb-trace plot: overlap, cache and timeline charts
 * (hb-trace/analysis/hb_trace_svg.h) published into --out.
 */
#include "hb_base.h"
#include "hb_trace_cli.h"
#include "hb_json.h"
#include "hb_publish.h"
#include "hb-trace/analysis/hb_trace_svg.h"

#include <sys/stat.h>

static int write_svg(const char *dir, const char *name, char *text, size_t len, cJSON *files, struct hb_error *err)
{
	char path[4096];
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	/* a plot is published whole or not at all, like every output */
	rc = hb_publish_buf(path, text, len, HB_PUBLISH_REPLACE, err);
	free(text);
	if (rc)
		return rc;
	if (files)
		cJSON_AddItemToArray(files, cJSON_CreateString(path));
	else
		printf("wrote %s\n", path);
	return HB_OK;
}

int trace_plot(struct cli *c, struct hb_trace_set *s, struct hb_error *err)
{
	struct hb_tstats *st = NULL;
	struct hb_tcache *tc = NULL;
	const struct hb_tcache_result *CR;
	struct hb_tsvg_timeline *tl = NULL;
	struct hb_tpf_result PR;
	struct trace_model m;
	cJSON *j = c->json ? cJSON_CreateObject() : NULL, *files = j ? cJSON_AddArrayToObject(j, "files") : NULL;
	char *text = NULL, title[200], budgets[256];
	size_t len = 0;
	int rc, pr = 0;
	struct stat sb;

	if (stat(c->out, &sb) || !S_ISDIR(sb.st_mode)) {
		cJSON_Delete(j);
		return hb_error_sys(err, errno ? errno : ENOTDIR, c->out, "cannot use as the output directory");
	}
	if ((rc = trace_model_for(c, s, &m, err)))
		goto out;
	if ((rc = trace_stats_collect(c, s, &st, err)) ||
	    (rc = hb_tsvg_overlap(hb_tstats_finish(st), &text, &len, err)) ||
	    (rc = write_svg(c->out, "overlap.svg", text, len, files, err)))
		goto out;
	if (!c->budget) { /* powers of two up to every record */
		size_t n = 0;
		budgets[0] = '\0';
		for (uint64_t b = s->h.top_k; b < (uint64_t)s->h.layers * s->h.experts && n < 40; b *= 2)
			n += (size_t)snprintf(budgets + n, sizeof(budgets) - n, "%s%" PRIu64, n ? "," : "", b);
		snprintf(budgets + n, sizeof(budgets) - n, "%s%" PRIu64, n ? "," : "", (uint64_t)s->h.layers * s->h.experts);
		c->budget = budgets;
	}
	if ((rc = trace_cache_run(c, s, m.rbytes, c->per_layer, HB_TC_ALL, &tc, &CR, err)) ||
	    (rc = hb_tsvg_hitrate(CR, c->per_layer, m.rbytes, &text, &len, err)) ||
	    (rc = write_svg(c->out, "cache.svg", text, len, files, err)))
		goto out;
	while (!(c->predictors & (1u << pr)))
		pr++;
	if (c->have_tokens)
		snprintf(title, sizeof(title), "Simulated prefetch timeline, predictor %s, tokens %" PRIu64 "-%" PRIu64,
			 hb_tpf_predictor_name((enum hb_tpf_predictor)pr), c->first, c->first + c->count - 1);
	else
		snprintf(title, sizeof(title), "Simulated prefetch timeline, predictor %s, the first %" PRIu64
			 " decode tokens", hb_tpf_predictor_name((enum hb_tpf_predictor)pr), c->count);
	if ((rc = hb_tsvg_timeline_create(&tl, c->have_tokens ? c->first : HB_TSVG_AUTO, c->count, err)) ||
	    (rc = trace_pf_run(c, s, &m, (enum hb_tpf_predictor)pr, hb_tsvg_timeline_event, tl, &PR, err)) ||
	    (rc = hb_tsvg_timeline_render(tl, title, &text, &len, err)) ||
	    (rc = write_svg(c->out, "timeline.svg", text, len, files, err)))
		goto out;
	if (j) {
		trace_print_json(j);
		j = NULL;
	}
out:
	cJSON_Delete(j);
	hb_tsvg_timeline_free(tl);
	hb_tcache_free(tc);
	hb_tstats_free(st);
	return rc;
}
