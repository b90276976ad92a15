/*
 * hb-trace/stats.c: hb-trace stats: route locality
 * (hb-trace/analysis/hb_trace_stats.h), as a table or JSON.
 */
#include "hb_base.h"
#include "hb_trace_cli.h"
#include "hb_json.h"

struct stats_ctx {
	const struct cli *c;
	struct hb_tstats *st;
	struct hb_error *err;
};

static int stats_one(void *ctx, size_t shard, uint64_t index, const struct hb_trace_header *h,
		     const struct hb_route *r)
{
	struct stats_ctx *x = ctx;
	int rc;
	if (!x->st && (rc = hb_tstats_create(&x->st, h, &x->c->st, x->err)))
		return rc;
	return hb_tstats_add(x->st, r, x->c->paths[shard], index, x->err);
}

int trace_stats_collect(const struct cli *c, struct hb_trace_set *s, struct hb_tstats **out,
			 struct hb_error *err)
{
	struct stats_ctx x = { c, NULL, err };
	int rc = hb_trace_set_scan(s, stats_one, &x, NULL, err);
	if (!rc && !x.st)
		rc = hb_tstats_create(&x.st, &s->h, &c->st, err);
	if (rc) {
		hb_tstats_free(x.st);
		return rc;
	}
	*out = x.st;
	return HB_OK;
}

static cJSON *hist_json(const uint64_t *h, uint32_t k)
{
	cJSON *a = cJSON_CreateArray();
	for (uint32_t i = 0; i <= k; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)h[i]));
	return a;
}

static cJSON *part_json(const struct hb_tstats_part *P, uint32_t k)
{
	cJSON *o = cJSON_CreateObject(), *u = cJSON_CreateObject(), *b = cJSON_CreateObject();
	hb_json_add_u64(o, "records", P->records);
	hb_json_add_u64(o, "prev_pairs", P->prev_pairs);
	trace_jnum(o, "prev_overlap_mean", P->prev_mean);
	cJSON_AddItemToObject(o, "prev_overlap_hist", hist_json(P->prev_hist, k));
	hb_json_add_u64(o, "adjacent_pairs", P->adj_pairs);
	trace_jnum(o, "adjacent_overlap_mean", P->adj_mean);
	cJSON_AddItemToObject(o, "adjacent_overlap_hist", hist_json(P->adj_hist, k));
	for (uint32_t B = 1; B <= HB_TSTATS_MAX_BLOCK; B++) {
		char key[8];
		snprintf(key, sizeof(key), "%u", B);
		trace_jnum(u, key, P->unique_mean[B]);
		hb_json_add_u64(b, key, P->blocks[B]);
	}
	cJSON_AddItemToObject(o, "unique_per_block", u);
	cJSON_AddItemToObject(o, "blocks", b);
	hb_json_add_u64(o, "uses", P->uses);
	hb_json_add_u64(o, "population", P->population);
	hb_json_add_u64(o, "used", P->used);
	trace_jnum(o, "entropy_bits", P->entropy_bits);
	trace_jnum(o, "entropy_normalized", P->entropy_norm);
	hb_json_add_u64(o, "top1_count", P->top1_n);
	trace_jnum(o, "top1_share", P->top1_share);
	hb_json_add_u64(o, "top10_count", P->top10_n);
	trace_jnum(o, "top10_share", P->top10_share);
	return o;
}

static void part_line(const char *name, const struct hb_tstats_part *P)
{
	char a[16], b[16], u[HB_TSTATS_MAX_BLOCK + 1][16], e[16], t1[16], t10[16];
	trace_fnum(a, sizeof(a), P->prev_mean, 3);
	trace_fnum(b, sizeof(b), P->adj_mean, 3);
	for (uint32_t B = 1; B <= HB_TSTATS_MAX_BLOCK; B++)
		trace_fnum(u[B], sizeof(u[B]), P->unique_mean[B], 2);
	trace_fnum(e, sizeof(e), P->entropy_norm, 4);
	trace_fnum(t1, sizeof(t1), P->top1_share, 4);
	trace_fnum(t10, sizeof(t10), P->top10_share, 4);
	printf("%-6s %9" PRIu64 " %9s %9s %7s %7s %7s %7s %7s %8s %7s %7s\n", name, P->records, a, b, u[1], u[2], u[3],
	       u[4], u[5], e, t1, t10);
}

int trace_stats(const struct cli *c, struct hb_trace_set *s, struct hb_error *err)
{
	struct hb_tstats *st = NULL;
	const struct hb_tstats_result *R;
	int rc = trace_stats_collect(c, s, &st, err);

	if (rc)
		return rc;
	R = hb_tstats_finish(st);
	if (c->json) {
		cJSON *j = cJSON_CreateObject(), *layers = cJSON_CreateArray(), *be = cJSON_CreateArray();
		trace_header_json(j, &R->h, R->records, R->tokens);
		hb_json_add_u64(j, "sequences", R->sequences);
		cJSON_AddItemToObject(j, "overall", part_json(&R->overall, R->h.top_k));
		for (uint32_t l = 0; l < R->h.layers; l++)
			cJSON_AddItemToArray(layers, part_json(&R->layers[l], R->h.top_k));
		cJSON_AddItemToObject(j, "by_layer", layers);
		for (uint32_t B = 1; B <= HB_TSTATS_MAX_BLOCK; B++) {
			struct hb_tstats_breakeven e;
			cJSON *o;
			if (!c->have_tau[B] || hb_tstats_break_even(R, B, c->tau[B], &e, err))
				continue;
			o = cJSON_CreateObject();
			hb_json_add_u64(o, "block", B);
			trace_jnum(o, "tau", e.tau);
			trace_jnum(o, "unique", e.unique);
			trace_jnum(o, "limit", e.limit);
			trace_jnum(o, "ratio", e.ratio);
			hb_json_add_bool(o, "saves", e.saves);
			cJSON_AddItemToArray(be, o);
		}
		cJSON_AddItemToObject(j, "break_even", be);
		trace_print_json(j);
	} else {
		printf("%" PRIu64 " records, %" PRIu64 " tokens, %" PRIu64 " sequences; top-%u of %u experts, %u layers\n",
		       R->records, R->tokens, R->sequences, R->h.top_k, R->h.experts, R->h.layers);
		printf("%-6s %9s %9s %9s %7s %7s %7s %7s %7s %8s %7s %7s\n", "layer", "records", "prev", "adjacent", "U1",
		       "U2", "U3", "U4", "U5", "H/Hmax", "top1%", "top10%");
		for (uint32_t l = 0; l < R->h.layers; l++) {
			char name[16];
			snprintf(name, sizeof(name), "%u", l);
			part_line(name, &R->layers[l]);
		}
		part_line("all", &R->overall);
		printf("previous-token overlap (overlap:pairs):");
		for (uint32_t i = 0; i <= R->h.top_k; i++)
			printf(" %u:%" PRIu64, i, R->overall.prev_hist[i]);
		printf("\nadjacent-layer overlap (overlap:pairs):");
		for (uint32_t i = 0; i <= R->h.top_k; i++)
			printf(" %u:%" PRIu64, i, R->overall.adj_hist[i]);
		printf("\npopularity over %u layer-expert pairs: entropy %.4f bits (%.4f of max); "
		       "the top %u (1%%) hold %.4f of selections, the top %u (10%%) hold %.4f\n",
		       R->overall.population, R->overall.entropy_bits, R->overall.entropy_norm, R->overall.top1_n,
		       R->overall.top1_share, R->overall.top10_n, R->overall.top10_share);
		for (uint32_t B = 1; B <= HB_TSTATS_MAX_BLOCK; B++) {
			struct hb_tstats_breakeven e;
			if (!c->have_tau[B] || hb_tstats_break_even(R, B, c->tau[B], &e, err))
				continue;
			printf("break-even B=%u tau=%g: U_B %.3f %s k*tau %.3f: %s (ratio %.4f)\n", B, e.tau, e.unique,
			       e.saves ? "<" : ">=", e.limit, e.saves ? "fewer routed bytes per token" : "no saving",
			       e.ratio);
		}
	}
	hb_tstats_free(st);
	return HB_OK;
}
