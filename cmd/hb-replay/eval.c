/*
 * hb-replay/eval.c: hb-replay eval: held-out labels scored at equal
 * candidate budgets against the baselines and the given predictors
 * (AFN-021 Gates 3 and 4), published as eval.json and eval.svg; and
 * hb-replay shadow (Gate 5 driven by a trace), published as shadow.json.
 */
#include "hb_base.h"
#include "hb_replay_cli.h"
#include "hb_publish.h"
#include "hb_parse.h"

#include <math.h>

#include <errno.h>
#include <sys/stat.h>

static int publish_text(const char *path, const char *text, struct hb_error *err)
{
	return hb_publish_buf(path, text, strlen(text), HB_PUBLISH_REPLACE, err);
}

int replay_parse_eval_option(int which, bool pred, const char *arg, struct cli *c)
{
	static const char *const kinds[] = {"pre-attention", "router-ahead", "previous-token", "static"};
	const char *eq = strchr(arg, '=');

	if (pred) {
		if (c->n_pred == HB_ARRAY_LEN(c->pred))
			return hb_cli_usage_error(prog, "at most %zu --predictions", HB_ARRAY_LEN(c->pred)), -1;
		/* NAME=PATH names it (a name has no '/'), else the path is the name */
		c->pred_name[c->n_pred] = NULL;
		if (eq && eq != arg && !memchr(arg, '/', (size_t)(eq - arg))) {
			size_t n = (size_t)(eq - arg);
			if (n >= sizeof(c->pred_name_buf[0]))
				return hb_cli_usage_error(prog, "a --predictions NAME is at most %zu bytes",
							  sizeof(c->pred_name_buf[0]) - 1), -1;
			memcpy(c->pred_name_buf[c->n_pred], arg, n);
			c->pred_name_buf[c->n_pred][n] = 0;
			c->pred_name[c->n_pred] = c->pred_name_buf[c->n_pred];
			arg = eq + 1;
		}
		c->avail[c->n_pred] = HB_AVAIL_PRE_ATTN;
		c->pred[c->n_pred++] = arg;
		return 0;
	}
	switch (which) {
	case 1:
		for (size_t i = 0; i < HB_ARRAY_LEN(kinds); i++)
			if (c->n_pred && !strcmp(arg, kinds[i])) {
				c->avail[c->n_pred - 1] = (uint8_t)i;
				c->avail_given = true;
				return 0;
			}
		return hb_cli_usage_error(prog, "--available follows a --predictions and takes pre-attention, "
					  "router-ahead, previous-token or static, not '%s'", arg), -1;
	case 2:
		if (c->n_deadlines == HB_ARRAY_LEN(c->deadlines))
			return hb_cli_usage_error(prog, "at most %zu --deadlines", HB_ARRAY_LEN(c->deadlines)), -1;
		c->deadlines[c->n_deadlines++] = arg;
		return 0;
	case 3:
		if (hb_parse_double(arg, &c->read_ns) || !(c->read_ns > 0) || !isfinite(c->read_ns))
			return hb_cli_usage_error(prog, "--read-ns takes a positive number of nanoseconds, not '%s'", arg), -1;
		return 0;
	default:
		c->validation_eval = arg;
		return 0;
	}
}

int replay_eval(const struct cli *c)
{
	struct hb_eval_gate4 g4 = {c->pred_name, c->avail, c->deadlines, c->n_deadlines, c->read_ns,
				   c->validation_eval};
	struct hb_error err;
	char *json = NULL, *svg = NULL, path[4096];
	int rc;

	hb_error_clear(&err);
	rc = hb_eval_run(c->train, c->args[0], c->pred, c->n_pred, c->budgets, c->n_budgets, c->seed, &g4, &json,
			 &svg, &err);
	if (!rc && mkdir(c->out, 0777) && errno != EEXIST)
		rc = hb_error_sys(&err, errno, c->out, "cannot create the output directory");
	if (!rc) {
		snprintf(path, sizeof(path), "%s/eval.json", c->out);
		rc = publish_text(path, json, &err);
	}
	if (!rc) {
		snprintf(path, sizeof(path), "%s/eval.svg", c->out);
		rc = publish_text(path, svg, &err);
	}
	if (!rc)
		fputs(json, stdout);
	free(json);
	free(svg);
	if (rc) {
		hb_cli_error(prog, &err);
		return hb_cli_exit_for(rc);
	}
	return HB_EXIT_OK;
}

/* shadow: Gate 5 driven by LABELS' routes (hb_replay_train.h) */
int replay_shadow(const struct cli *c)
{
	struct hb_replay_shadow_config sc = {c->args[0], c->xs.cache, NULL, c->pred, c->pred_name, c->avail,
					     c->n_pred, (uint32_t)c->hints};
	struct hb_error err;
	char *json = NULL, path[4096], store[4096];
	int rc;

	hb_error_clear(&err);
	snprintf(store, sizeof(store), "%s/.shadow-store", c->out);
	sc.store = store;
	rc = mkdir(c->out, 0777) && errno != EEXIST ? hb_error_sys(&err, errno, c->out, "cannot create") : HB_OK;
	if (!rc)
		rc = hb_replay_shadow_run(&sc, &json, &err);
	if (!rc) {
		snprintf(path, sizeof(path), "%s/shadow.json", c->out);
		rc = publish_text(path, json, &err);
	}
	if (!rc)
		fputs(json, stdout);
	free(json);
	if (rc) {
		hb_cli_error(prog, &err);
		return hb_cli_exit_for(rc);
	}
	return HB_EXIT_OK;
}
