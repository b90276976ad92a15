/*
 * hb-trace/prefetch-sim.c: hb-trace prefetch-sim: each predictor replayed
 * against the storage model (hb-trace/analysis/hb_trace_prefetch.h), as a
 * table or JSON.
 */
#include "hb_base.h"
#include "hb_trace_cli.h"
#include "hb_json.h"

#include <math.h>

struct pf_ctx {
	struct hb_tpf *p;
	struct hb_error *err;
};

static int pf_one(void *ctx, size_t shard, uint64_t index, const struct hb_trace_header *h,
		  const struct hb_route *r)
{
	struct pf_ctx *x = ctx;
	return hb_tpf_add(x->p, r, x->err);
}

int trace_pf_run(const struct cli *c, struct hb_trace_set *s, const struct trace_model *m, enum hb_tpf_predictor pr,
		  hb_tpf_event_fn ev, void *ev_ctx, struct hb_tpf_result *out, struct hb_error *err)
{
	struct hb_tpf_opts o;
	struct pf_ctx x = { NULL, err };
	struct hb_tpf_inject *inj = NULL;
	size_t ninj = 0;
	int rc;

	hb_tpf_opts_default(&o);
	o.predictor = pr;
	if (pr == HB_TPF_ENGINE) { /* the measured run's own predicted reads */
		if (!c->stream_trace)
			return hb_error_set(err, HB_ERR_INVALID, "--predictor",
					    "engine replays a measured run's predicted reads: it needs --stream-trace");
		if ((rc = trace_engine_reads(c, c->stream_trace, &inj, &ninj, err)))
			return rc;
		o.inject = inj, o.ninject = ninj;
	}
	if (m->have_measured) {
		o.from_token = m->measured.first_decode;
		o.cache_budget = m->measured.h.slots;
		o.attn_fraction = m->measured.attn_fraction;
	}
	o.storage = m->storage;
	o.record_bytes = m->rbytes;
	o.layer_time_s = m->layer_time;
	if (!m->have_measured || c->have_attn)
		o.attn_fraction = c->attn;
	if (c->have_cache)
		o.cache_budget = c->cache;
	o.event = ev, o.event_ctx = ev_ctx;
	rc = hb_tpf_create(&x.p, &s->h, &o, err);
	free(inj); /* the simulation keeps its own sorted copy */
	if (rc)
		return rc;
	if (!(rc = hb_trace_set_scan(s, pf_one, &x, NULL, err)))
		rc = hb_tpf_finish(x.p, out, err);
	hb_tpf_free(x.p);
	return rc;
}

static cJSON *model_json(const struct trace_model *m, uint64_t cache)
{
	cJSON *o = cJSON_CreateObject();
	hb_json_add_str(o, "storage_source", m->storage_source);
	trace_jnum(o, "latency_s", (double)m->storage.latency_ns / 1e9);
	trace_jnum(o, "bandwidth", m->storage.bandwidth);
	hb_json_add_u64(o, "depth", m->storage.depth);
	hb_json_add_str(o, "pipe", m->storage.shared ? "shared" : "fifo");
	hb_json_add_str(o, "discipline", m->storage.engine ? "engine" : "priority");
	trace_jnum(o, "verify_s", (double)m->verify_ns / 1e9); /* the check after the last byte */
	if (!strcmp(m->storage_source, "probe"))
		hb_json_add_bool(o, "probe_direct", m->probe.direct);
	trace_jnum(o, "layer_time_s", m->layer_time);
	hb_json_add_u64(o, "record_bytes", m->rbytes);
	hb_json_add_u64(o, "cache_records", cache);
	if (m->have_measured) {
		const struct trace_stream_model *x = &m->measured;
		cJSON *ms = cJSON_AddObjectToObject(o, "measured");
		hb_json_add_u64(ms, "decode_tokens", x->decode_tokens);
		hb_json_add_u64(ms, "first_decode_token", x->first_decode);
		trace_jnum(ms, "attn_fraction", x->attn_fraction);
		trace_jnum(ms, "wall_wait_per_token_s", (double)x->wait_ns / (double)x->decode_tokens / 1e9);
		trace_jnum(ms, "exposed_wait_per_token_s", (double)x->exposed_ns / (double)x->decode_tokens / 1e9);
		trace_jnum(ms, "decode_wall_per_token_s", (double)x->wall_ns / (double)x->decode_tokens / 1e9);
	}
	return o;
}

int trace_prefetch_sim(const struct cli *c, struct hb_trace_set *s, struct hb_error *err)
{
	struct trace_model m;
	cJSON *j = NULL, *arr = NULL;
	uint64_t cache;
	int rc;

	if ((rc = trace_model_for(c, s, &m, err)))
		return rc;
	cache = c->have_cache ? c->cache : m.have_measured ? m.measured.h.slots : (uint64_t)s->h.layers * s->h.top_k;
	if (c->json) {
		j = cJSON_CreateObject();
		arr = cJSON_CreateArray();
		cJSON_AddItemToObject(j, "model", model_json(&m, cache));
	} else {
		printf("storage (%s): latency %.1f us, a digest check %.1f us after the last byte, bandwidth %.1f MB/s, depth %u, %s pipe, %s discipline; compute %.3f ms per layer step "
		       "(attention %.2f); record %" PRIu64 " bytes; LRU cache %" PRIu64 " records\n",
		       m.storage_source, (double)m.storage.latency_ns / 1e3, (double)m.verify_ns / 1e3, m.storage.bandwidth / 1e6,
		       m.storage.depth, m.storage.shared ? "shared" : "fifo", m.storage.engine ? "engine" : "priority",
		       m.layer_time * 1e3, m.have_measured && !c->have_attn ? m.measured.attn_fraction : c->attn, m.rbytes,
		       cache);
		if (m.have_measured)
			printf("measured (%s): %" PRIu64 " decode tokens from t%" PRIu64 ", wall wait %.4f ms a token "
			       "(exposed, summed over workers, %.4f), attention fraction %.3f; the window columns count "
			       "those tokens\n",
			       c->stream_trace, m.measured.decode_tokens, m.measured.first_decode,
			       (double)m.measured.wait_ns / (double)m.measured.decode_tokens / 1e6,
			       (double)m.measured.exposed_ns / (double)m.measured.decode_tokens / 1e6,
			       m.measured.attn_fraction);
		printf("%-9s %8s %8s %8s %10s %8s %13s %13s%s\n", "predictor", "timely", "prefetch", "useful", "bytes/tok",
		       "amplif", "hidden", "wait/tok(ms)", m.have_measured ? "   window(ms)  measured(ms)  sim/meas" : "");
	}
	for (int p = 0; p < HB_TPF_PREDICTORS; p++) {
		struct hb_tpf_result R;
		if (!(c->predictors & (1u << p)))
			continue;
		if ((rc = trace_pf_run(c, s, &m, (enum hb_tpf_predictor)p, NULL, NULL, &R, err)))
			break;
		if (j) {
			cJSON *o = cJSON_CreateObject();
			if (!cJSON_GetObjectItem(j, "tokens"))
				trace_header_json(j, &s->h, R.steps, R.tokens);
			hb_json_add_str(o, "predictor", hb_tpf_predictor_name((enum hb_tpf_predictor)p));
			hb_json_add_u64(o, "exact", R.exact);
			hb_json_add_u64(o, "cache_hits", R.cache_hits);
			hb_json_add_u64(o, "prefetch_hits", R.staged_hits);
			hb_json_add_u64(o, "late", R.late);
			hb_json_add_u64(o, "exact_reads", R.exact_reads);
			hb_json_add_u64(o, "predicted_reads", R.predicted_reads);
			hb_json_add_u64(o, "predicted_consumed", R.predicted_consumed);
			hb_json_add_u64(o, "predicted_wasted", R.predicted_wasted);
			hb_json_add_u64(o, "exact_bytes", R.exact_bytes);
			hb_json_add_u64(o, "predicted_bytes", R.predicted_bytes);
			hb_json_add_u64(o, "consumed_bytes", R.consumed_bytes);
			trace_jnum(o, "timely_recall", R.timely_recall);
			trace_jnum(o, "prefetch_recall", R.prefetch_recall);
			trace_jnum(o, "useful_prefetch_ratio", R.useful_ratio);
			trace_jnum(o, "bytes_per_token", R.bytes_per_token);
			trace_jnum(o, "read_amplification", R.read_amplification);
			trace_jnum(o, "hidden_fraction", R.hidden_fraction);
			trace_jnum(o, "exposed_wait_s", (double)R.exposed_ns / 1e9);
			trace_jnum(o, "exact_io_s", (double)R.exact_io_ns / 1e9);
			trace_jnum(o, "exposed_wait_per_token_s", R.exposed_per_token_s);
			trace_jnum(o, "simulated_s", (double)R.end_ns / 1e9);
			if (m.have_measured) {
				double w = R.window_tokens ? (double)R.window_exposed_ns / (double)R.window_tokens / 1e9 : NAN;
				double me = (double)m.measured.wait_ns / (double)m.measured.decode_tokens / 1e9;
				hb_json_add_u64(o, "window_tokens", R.window_tokens);
				trace_jnum(o, "window_exposed_wait_per_token_s", w);
				trace_jnum(o, "measured_wall_wait_per_token_s", me);
				trace_jnum(o, "simulated_over_measured", me > 0 ? w / me : NAN);
			}
			cJSON_AddItemToArray(arr, o);
		} else {
			char t[16], pr[16], u[16], b[24], a[16], h[16], w[24];
			trace_fnum(t, sizeof(t), R.timely_recall, 4);
			trace_fnum(pr, sizeof(pr), R.prefetch_recall, 4);
			trace_fnum(u, sizeof(u), R.useful_ratio, 4);
			trace_fnum(b, sizeof(b), R.bytes_per_token, 0);
			trace_fnum(a, sizeof(a), R.read_amplification, 3);
			trace_fnum(h, sizeof(h), R.hidden_fraction, 4);
			trace_fnum(w, sizeof(w), R.exposed_per_token_s * 1e3, 4);
			printf("%-9s %8s %8s %8s %10s %8s %13s %13s", hb_tpf_predictor_name((enum hb_tpf_predictor)p), t, pr,
			       u, b, a, h, w);
			if (m.have_measured) {
				double wv = R.window_tokens ? (double)R.window_exposed_ns / (double)R.window_tokens / 1e6 : NAN;
				double me = (double)m.measured.wait_ns / (double)m.measured.decode_tokens / 1e6;
				char x1[24], x2[24], x3[24];
				trace_fnum(x1, sizeof(x1), wv, 4);
				trace_fnum(x2, sizeof(x2), me, 4);
				trace_fnum(x3, sizeof(x3), me > 0 ? wv / me : NAN, 3);
				printf(" %12s %13s %9s", x1, x2, x3);
			}
			putchar('\n');
		}
	}
	if (j) {
		cJSON_AddItemToObject(j, "results", arr);
		if (!rc)
			trace_print_json(j);
		else
			cJSON_Delete(j);
	}
	return rc;
}
