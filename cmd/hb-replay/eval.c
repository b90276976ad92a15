/*
 * hb-replay/eval.c: hb-replay eval: held-out labels scored at equal
 * candidate budgets against the baselines and the given predictors
 * (AFN-021 Gate 3), published as eval.json and eval.svg.
 */
#include "hb_base.h"
#include "hb_replay_cli.h"
#include "hb_publish.h"

#include <errno.h>
#include <sys/stat.h>

static int publish_text(const char *path, const char *text, struct hb_error *err)
{
	return hb_publish_buf(path, text, strlen(text), HB_PUBLISH_REPLACE, err);
}

int replay_eval(const struct cli *c)
{
	struct hb_error err;
	char *json = NULL, *svg = NULL, path[4096];
	int rc;

	hb_error_clear(&err);
	rc = hb_eval_run(c->train, c->args[0], c->pred, c->n_pred, c->budgets, c->n_budgets, c->seed, &json, &svg,
			 &err);
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
