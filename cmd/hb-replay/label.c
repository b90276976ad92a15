/*
 * hb-replay/label.c: hb-replay label: transcripts to label shards, the
 * model run as prefill through engine.c, and the summary or JSON record.
 */
#include "hb_base.h"
#include "hb_replay_cli.h"
#include "hb_json.h"

#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int replay_label(const struct cli *c)
{
	struct hb_error err;
	struct hb_model *m = NULL;
	struct replay_eng eng;
	struct replay_together tog;
	struct hb_replay_engine re;
	struct hb_label_config cfg;
	struct hb_label_stats st;
	struct hb_transcripts ts = {0};
	struct hb_taps taps;
	double t0, dt;
	struct hb_prefault_report prefault = { 0, 0 };
	int rc;

	hb_error_clear(&err);
	memset(&eng, 0, sizeof(eng));
	memset(&tog, 0, sizeof(tog));
	memset(&taps, 0, sizeof(taps));
	taps.rfd = -1;
	if ((rc = hb_backend_cli_start(c->backend, &err)) || (rc = hb_transcripts_load(c->args[0], &ts, &err)))
		goto fail;
	if ((rc = hb_model_load_mode(c->model, c->weights, &m, &err))) {
		hb_cli_error(prog, &err);
		hb_backend_cli_stop(c->backend);
		hb_transcripts_release(&ts);
		return err.id && strcmp(err.id, "gguf-io") ? HB_EXIT_NO : HB_EXIT_SYSTEM;
	}
	eng.m = m;
	hb_backend_cli_model(c->backend, m);
	if ((rc = hb_cli_xs_apply(prog, m, &c->xs)) != HB_EXIT_OK) {
		hb_model_free(m);
		hb_transcripts_release(&ts);
		return rc;
	}
	if ((rc = hb_pool_create((unsigned)c->threads, &eng.pool, &err)))
		goto fail;
	memset(&re, 0, sizeof(re));
	re.top_k = (uint32_t)m->cfg.num_experts_per_tok;
	re.layers = (uint32_t)m->cfg.num_layers;
	re.experts = (uint32_t)m->cfg.num_experts;
	re.vocab = m->vocab_semantic;
	memcpy(re.artifact, m->artifact_sha, 32);
	re.ctx = &eng;
	re.begin = replay_eng_begin;
	re.forward = replay_eng_forward;
	re.hc = (uint32_t)m->cfg.hc_count;
	re.hidden = (uint32_t)m->cfg.hidden_size;
	re.forward_hidden = replay_eng_forward_hidden;
	if (c->together > 1) { /* together.c: routes only (options.c refuses captures with it) */
		if ((rc = replay_together_init(&tog, m, eng.pool, (size_t)c->together, &err)))
			goto fail;
		re.ctx = &tog;
		re.plan = replay_together_plan;
		re.begin_transcript = replay_together_begin;
		re.forward = replay_together_forward;
		re.forward_hidden = NULL;
		re.hc = re.hidden = 0;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.outdir = c->out;
	cfg.shard_index = (uint32_t)c->shard_i;
	cfg.shard_count = (uint32_t)c->shard_n;
	cfg.max_shard_bytes = c->max_bytes;
	cfg.chunk_tokens = c->chunk;
	memcpy(cfg.text, c->text, 32);
	cfg.capture = c->capture;
	cfg.n_capture = c->n_capture;
	cfg.capture_positions = c->capture_positions ? c->capture_positions : 8;
	if (c->features || c->router_ahead) { /* features.c */
		if ((rc = replay_taps_check_fresh(c->out, &err)) || (rc = replay_taps_open(&taps, c, m, eng.pool, &err)))
			goto fail;
		eng.taps = &taps;
		re.sequence = replay_taps_sequence;
	}
	/* the mapped weights a CPU replay reads, before the clock (hb_model.h),
	 * and the session with its workspace (engine.c) */
	hb_backend_cli_prefault(m, eng.pool, c->no_prefault, c->json, &prefault);
	if (c->together <= 1 && (rc = replay_eng_prepare(&eng, &ts, c, &err)))
		goto fail;
	t0 = now();
	rc = hb_label_run(&ts, &re, &cfg, &st, &err);
	dt = now() - t0;
	if (rc)
		goto fail;
	if (eng.taps) {
		eng.taps = NULL;
		if ((rc = hb_taps_close(&taps, true, NULL, &err)))
			goto fail;
	}
	if (c->json) {
		cJSON *j = cJSON_CreateObject();
		hb_json_add_u64(j, "sequences", st.sequences);
		hb_json_add_u64(j, "positions", st.positions);
		hb_json_add_u64(j, "positions_skipped", st.positions_skipped);
		hb_json_add_u64(j, "records", st.records);
		hb_json_add_u64(j, "shards_written", st.shards_written);
		hb_json_add_u64(j, "shards_kept", st.shards_kept);
		hb_json_add_u64(j, "partial_discarded", st.partial_discarded);
		hb_json_add_u64(j, "hidden_samples", st.hidden_samples);
		hb_json_add_str(j, "weights", hb_weights_name(m->weights_mode));
		cJSON_AddNumberToObject(j, "weights_read_seconds", m->weights_read_seconds);
		cJSON_AddNumberToObject(j, "prefault_seconds", prefault.seconds);
		hb_json_add_u64(j, "weights_pmd_mapped_bytes", prefault.pmd_bytes);
		cJSON_AddNumberToObject(j, "seconds", dt);
		cJSON_AddNumberToObject(j, "positions_per_second", dt > 0 ? (double)st.positions / dt : 0);
		cJSON_AddNumberToObject(j, "records_per_second", dt > 0 ? (double)st.records / dt : 0);
		hb_cli_xs_json(j, m, NULL);
		replay_emit_json(j);
	} else {
		printf("labelled %" PRIu64 " sequences, %" PRIu64 " positions, %" PRIu64 " records: %" PRIu64
		       " shards written, %" PRIu64 " kept, %" PRIu64 " partial discarded\n",
		       st.sequences, st.positions, st.records, st.shards_written, st.shards_kept, st.partial_discarded);
		if (c->n_capture)
			printf("captured the hidden states of %zu layers at %" PRIu64 " positions\n", c->n_capture,
			       st.hidden_samples);
		if (c->features)
			printf("captured features of %" PRIu64 " positions: %" PRIu64 " bytes in %s\n", st.positions,
			       taps.feature_bytes, c->features);
		if (c->router_ahead)
			printf("router-ahead: %" PRIu64 " predictions in %s\n", taps.records, c->router_ahead);
	}
	hb_session_free(eng.s);
	replay_together_free(&tog);
	hb_pool_destroy(eng.pool);
	hb_backend_cli_stop(c->backend);
	hb_model_free(m);
	hb_transcripts_release(&ts);
	return HB_EXIT_OK;
fail:
	hb_backend_cli_explain(c->backend, &err);
	hb_taps_close(&taps, false, NULL, NULL); /* harmless when nothing was opened */
	hb_cli_error(prog, &err);
	hb_session_free(eng.s);
	replay_together_free(&tog);
	hb_pool_destroy(eng.pool);
	hb_backend_cli_stop(c->backend);
	hb_model_free(m);
	hb_transcripts_release(&ts);
	return hb_cli_exit_for(rc);
}
