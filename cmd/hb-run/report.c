/*
 * hb-run/report.c: what a finished run prints: the generated ids, or
 * their text when the prompt was text (after the --print-tokens table),
 * or the JSON record with the profile, status word, timings and session
 * counters.
 */
#include "hb_base.h"
#include "hb_run_cli.h"
#include "backend/hb_backend.h"
#include "hb_json.h"

int run_report(const struct cli *c, const struct hb_model *m, const struct text *tx, const struct gen *g,
	       int *status, struct hb_error *err)
{
	char *shown = NULL; /* the generated text, for a text prompt */
	int rc = HB_OK;

	if (tx->tok && (rc = run_gen_text(tx, g->gen, g->ng, &shown, err))) {
		free(shown);
		return rc;
	}
	if (c->json) {
		cJSON *j = cJSON_CreateObject(), *ids = cJSON_AddArrayToObject(j, "ids");
		const struct hb_session_counters *k = hb_session_counters(g->s);
		for (size_t i = 0; i < g->ng; i++)
			cJSON_AddItemToArray(ids, cJSON_CreateNumber(g->gen[i]));
		hb_json_add_str(j, "profile", m->profile);
		hb_json_add_str(j, "status", m->status);
		hb_json_add_bool(j, "runtime_supported", false);
		hb_json_add_u64(j, "prompt_tokens", g->np);
		hb_json_add_u64(j, "generated_tokens", g->ng);
		hb_json_add_str(j, "weights", hb_weights_name(m->weights_mode));
		cJSON_AddNumberToObject(j, "weights_read_seconds", m->weights_read_seconds);
		cJSON_AddNumberToObject(j, "prefault_seconds", g->prefault.seconds);
		hb_json_add_u64(j, "weights_pmd_mapped_bytes", g->prefault.pmd_bytes);
		cJSON_AddNumberToObject(j, "prefill_seconds", g->t1 - g->t0);
		cJSON_AddNumberToObject(j, "decode_seconds", g->t2 - g->t1);
		cJSON_AddNumberToObject(j, "prefill_tokens_per_second", (double)g->np / (g->t1 - g->t0));
		cJSON_AddStringToObject(j, "backend", hb_backend_name());
		if (g->ng > 1)
			cJSON_AddNumberToObject(j, "decode_tokens_per_second", (double)(g->ng - 1) / (g->t2 - g->t1));
		hb_json_add_u64(j, "expert_evaluations", k->expert_evaluations);
		hb_json_add_u64(j, "ple_rows_read", k->ple_rows_read);
		hb_json_add_u64(j, "ple_pages_read", k->ple_pages_read);
		hb_json_add_u64(j, "qsa_keys_attended", k->qsa_keys_attended);
		hb_json_add_u64(j, "qsa_groups_scored", k->qsa_groups_scored);
		hb_json_add_u64(j, "dense_mask_bytes", k->dense_mask_bytes);
		hb_cli_xs_json(j, m, g->xs_pre);
		if (c->xs.learned) { /* the graph predicts nothing: the checkpoint does */
			cJSON *x;
			if ((x = cJSON_GetObjectItem(j, "expert_cache")))
				cJSON_ReplaceItemInObject(x, "predictor", cJSON_CreateString("learned"));
			if ((x = cJSON_GetObjectItem(j, "expert_cache_decode")))
				cJSON_ReplaceItemInObject(x, "predictor", cJSON_CreateString("learned"));
		}
		run_shadow_json(g->run, j);
		if (tx->tok) {
			hb_json_add_str(j, "text", shown);
			run_json_prompt(j, c, tx);
		}
		if (hb_cli_print_json(prog, j))
			*status = HB_EXIT_SYSTEM;
	} else {
		/* with --dump-routes - stdout carries the trace: the ids go to stderr */
		FILE *f = c->dump_routes && !strcmp(c->dump_routes, "-") ? stderr : stdout;
		/* the table only now, so that a failed run prints nothing */
		if (c->print_tokens && (rc = run_print_table(f, tx, err))) {
			free(shown);
			return rc;
		}
		if (tx->tok) {
			fputs(shown, f);
		} else {
			for (size_t i = 0; i < g->ng; i++)
				fprintf(f, "%s%d", i ? "," : "", g->gen[i]);
		}
		fprintf(f, "\n");
	}
	free(shown);
	return HB_OK;
}
