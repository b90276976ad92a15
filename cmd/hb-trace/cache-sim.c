/*
 * hb-trace/cache-sim.c: hb-trace cache-sim: expert-cache policies at
 * given budgets (hb-trace/analysis/hb_trace_cache.h), as a table or JSON.
 */
#include "hb_base.h"
#include "hb_trace_cli.h"
#include "hb_json.h"

struct cache_ctx {
	struct hb_tcache *c;
	struct hb_error *err;
	bool second;
};

static int cache_one(void *ctx, size_t shard, uint64_t index, const struct hb_trace_header *h,
		     const struct hb_route *r)
{
	struct cache_ctx *x = ctx;
	return x->second ? hb_tcache_add_second(x->c, r, x->err) : hb_tcache_add(x->c, r, x->err);
}

int trace_cache_run(const struct cli *c, struct hb_trace_set *s, uint64_t rbytes, bool per_layer,
		     uint32_t policies, struct hb_tcache **out, const struct hb_tcache_result **res,
		     struct hb_error *err)
{
	struct hb_tcache_opts o;
	uint64_t budgets[MAX_LIST];
	struct cache_ctx x = { NULL, err, false };
	int rc;

	hb_tcache_opts_default(&o);
	if ((rc = trace_budgets(c->budget, &s->h, rbytes, budgets, &o.nbudgets, err)))
		return rc;
	o.budgets = budgets;
	o.per_layer = per_layer;
	o.record_bytes = rbytes;
	o.policies = policies;
	o.half_life_tokens = c->half_life;
	if (c->have_latency)
		o.latency_s = c->latency;
	if (c->have_bandwidth)
		o.bandwidth = c->bandwidth;
	o.threads = (unsigned)c->threads;
	o.seed = c->seed;
	if ((rc = hb_tcache_create(&x.c, &s->h, &o, err)))
		return rc;
	if (!(rc = hb_trace_set_scan(s, cache_one, &x, NULL, err)) && hb_tcache_wants_second_pass(x.c) &&
	    !(rc = hb_tcache_begin_second(x.c, err))) {
		x.second = true;
		rc = hb_trace_set_scan(s, cache_one, &x, NULL, err);
	}
	if (!rc)
		rc = hb_tcache_finish(x.c, res, err);
	if (rc) {
		hb_tcache_free(x.c);
		return rc;
	}
	*out = x.c;
	return HB_OK;
}

int trace_cache_sim(const struct cli *c, struct hb_trace_set *s, struct hb_error *err)
{
	struct trace_rb r = { c, {0}, false };
	struct hb_tcache *tc = NULL;
	const struct hb_tcache_result *R;
	uint64_t rbytes;
	int rc;

	if ((rc = trace_peek_header(s, err)) || (rc = trace_record_bytes(&r, &s->h, &rbytes, err)) ||
	    (rc = trace_cache_run(c, s, rbytes, c->per_layer, c->policies, &tc, &R, err)))
		return rc;
	if (c->json) {
		cJSON *j = cJSON_CreateObject(), *cells = cJSON_CreateArray();
		trace_header_json(j, &s->h, R->records, R->tokens);
		hb_json_add_u64(j, "accesses", R->accesses);
		hb_json_add_str(j, "scope", c->per_layer ? "per-layer" : "global");
		if (rbytes)
			hb_json_add_u64(j, "record_bytes", rbytes);
		else
			cJSON_AddNullToObject(j, "record_bytes");
		for (size_t i = 0; i < R->ncells; i++) {
			const struct hb_tcache_cell *e = &R->cells[i];
			cJSON *o = cJSON_CreateObject();
			hb_json_add_str(o, "policy", hb_tcache_policy_name(e->policy));
			hb_json_add_u64(o, "budget_records", e->budget);
			if (rbytes)
				hb_json_add_u64(o, "budget_bytes", e->budget * rbytes);
			hb_json_add_u64(o, "records_per_cache", e->scope_budget);
			hb_json_add_u64(o, "hits", e->hits);
			hb_json_add_u64(o, "misses", e->misses);
			trace_jnum(o, "hit_rate", e->hit_rate);
			trace_jnum(o, "reads_per_token", e->misses_per_token);
			trace_jnum(o, "bytes_per_token", e->bytes_per_token);
			cJSON_AddItemToArray(cells, o);
		}
		cJSON_AddItemToObject(j, "results", cells);
		trace_print_json(j);
	} else {
		printf("%" PRIu64 " records, %" PRIu64 " tokens, %" PRIu64 " accesses; %s caches", R->records, R->tokens,
		       R->accesses, c->per_layer ? "per-layer" : "global");
		if (rbytes)
			printf(", %" PRIu64 " bytes per record", rbytes);
		printf("\n%-10s %10s %10s %8s %12s %16s\n", "policy", "budget", "per-cache", "hit", "reads/token",
		       "bytes/token");
		for (size_t i = 0; i < R->ncells; i++) {
			const struct hb_tcache_cell *e = &R->cells[i];
			char h[16], m[24], b[32];
			trace_fnum(h, sizeof(h), e->hit_rate, 4);
			trace_fnum(m, sizeof(m), e->misses_per_token, 3);
			trace_fnum(b, sizeof(b), e->bytes_per_token, 0);
			printf("%-10s %10" PRIu64 " %10" PRIu64 " %8s %12s %16s\n", hb_tcache_policy_name(e->policy), e->budget,
			       e->scope_budget, h, m, b);
		}
	}
	hb_tcache_free(tc);
	return HB_OK;
}
