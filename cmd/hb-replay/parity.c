/*
 * hb-replay/parity.c: hb-replay parity: decode traces checked against
 * their labels; exit 1 when a record disagrees.
 */
#include "hb_base.h"
#include "hb_replay_cli.h"
#include "hb_json.h"

int replay_parity(const struct cli *c)
{
	struct hb_error err;
	struct hb_parity_stats st;
	int rc;

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
