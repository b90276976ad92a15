/*
 * hb-replay/parity.c: hb-replay parity: decode traces checked against
 * their labels; exit 1 when a record disagrees.
 */
#include "hb_base.h"
#include "hb_replay_cli.h"
#include "hb_json.h"

#include <math.h>

/* parity --features: decode features against replay's (AFN-021 Gate 4) */
static int feature_parity(const struct cli *c)
{
	struct hb_feature_set d, r;
	struct hb_feature_parity st;
	struct hb_error err;
	int rc;

	memset(&d, 0, sizeof(d));
	memset(&r, 0, sizeof(r));
	hb_error_clear(&err);
	if ((rc = hb_feature_dir_load(c->features, &d, &err)) || (rc = hb_feature_dir_load(c->args[0], &r, &err))) {
		hb_feature_set_release(&d);
		hb_cli_error(prog, &err);
		return hb_cli_exit_for(rc);
	}
	rc = hb_feature_compare(&d, &r, c->ftol, &st, &err);
	hb_feature_set_release(&d);
	hb_feature_set_release(&r);
	if (rc && !st.failures) {
		hb_cli_error(prog, &err);
		return hb_cli_exit_for(rc);
	}
	if (c->json) {
		cJSON *j = cJSON_CreateObject();
		hb_json_add_bool(j, "parity", rc == 0);
		hb_json_add_u64(j, "rows", st.rows);
		hb_json_add_u64(j, "floats", st.floats);
		hb_json_add_u64(j, "identical", st.identical);
		cJSON_AddNumberToObject(j, "max_abs_diff", isfinite(st.max_abs) ? st.max_abs : -1);
		hb_json_add_u64(j, "failures", st.failures);
		cJSON_AddNumberToObject(j, "tolerance", c->ftol);
		replay_emit_json(j);
	}
	if (rc) { /* a row differs: the answer is no */
		hb_cli_error(prog, &err);
		if (st.failures > 1)
			fprintf(stderr, "%s: %" PRIu64 " failing rows in all\n", prog, st.failures);
		return hb_cli_exit_for(HB_ERR_CONTRACT);
	}
	if (!c->json)
		printf("feature parity: %" PRIu64 " decode rows match replay's: %" PRIu64 " of %" PRIu64
		       " floats bit-identical, max |difference| %.3g\n", st.rows, st.identical, st.floats, st.max_abs);
	return HB_EXIT_OK;
}

int replay_parity(const struct cli *c)
{
	struct hb_error err;
	struct hb_parity_stats st;
	int rc;

	if (c->features)
		return feature_parity(c);
	hb_error_clear(&err);
	rc = hb_parity_run((const char *const *)c->args, 1, (const char *const *)c->args + 1, (size_t)c->n_args - 1,
			   c->tol, &st, &err);
	if (rc && !st.failures) {
		hb_cli_error(prog, &err);
		return hb_cli_exit_for(rc);
	}
	if (c->json) {
		cJSON *j = cJSON_CreateObject();
		hb_json_add_bool(j, "parity", rc == 0);
		hb_json_add_u64(j, "label_records", st.label_records);
		hb_json_add_u64(j, "trace_records", st.trace_records);
		hb_json_add_u64(j, "checked", st.checked);
		hb_json_add_u64(j, "unchecked_labels", st.unchecked_labels);
		hb_json_add_u64(j, "sequences", st.sequences);
		hb_json_add_u64(j, "failures", st.failures);
		cJSON_AddNumberToObject(j, "max_weight_diff", st.max_weight_diff);
		replay_emit_json(j);
	}
	if (rc) {
		hb_cli_error(prog, &err);
		if (st.failures > 1)
			fprintf(stderr, "%s: %" PRIu64 " failing records in all\n", prog, st.failures);
		return HB_EXIT_NO;
	}
	if (!c->json)
		printf("parity: %" PRIu64 " decode records match their labels exactly (%" PRIu64
		       " labels not in any trace), max |weight difference| %.3g\n",
		       st.checked, st.unchecked_labels, st.max_weight_diff);
	return HB_EXIT_OK;
}
