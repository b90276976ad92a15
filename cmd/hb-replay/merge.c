/*
 * hb-replay/merge.c: hb-replay merge: the proof that label directories
 * cover every sequence exactly once (and, with --transcripts, every
 * transcript), printed as JSON even when coverage fails; with -o, the
 * labels re-cut into one directory as an unsharded run would have written
 * them.
 */
#include "hb_base.h"
#include "hb_replay_cli.h"

int replay_merge(const struct cli *c)
{
	struct hb_error err;
	struct hb_transcripts ts = {0};
	struct hb_merge_stats st;
	char *report = NULL;
	int rc;

	hb_error_clear(&err);
	if (c->transcripts && (rc = hb_transcripts_load(c->transcripts, &ts, &err))) {
		hb_cli_error(prog, &err);
		return hb_cli_exit_for(rc);
	}
	if (c->out) {
		struct hb_label_stats ls;
		rc = hb_merge_write((const char *const *)c->args, (size_t)c->n_args, &ts, c->out, &report, &st, &ls,
				    &err);
	} else {
		rc = hb_merge_run((const char *const *)c->args, (size_t)c->n_args, c->transcripts ? &ts : NULL, &report,
				  &st, &err);
	}
	if (report)
		fputs(report, stdout);
	free(report);
	hb_transcripts_release(&ts);
	if (rc) {
		hb_cli_error(prog, &err);
		return hb_cli_exit_for(rc);
	}
	return HB_EXIT_OK;
}
