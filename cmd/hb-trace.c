/*
 * hb-trace: what route traces say about SSD reads (hebrus-trace(5) shards
 * from hb-run --dump-routes).  Subcommands cat, stats, cache-sim,
 * prefetch-sim, plot and probe, one file each under cmd/hb-trace/; the
 * analyses are the engines of cmd/hb-trace/analysis/.  This file opens the
 * shards, runs the subcommand and maps its result to the exit status:
 * 0 done, 1 a defective or mismatched trace, 2 usage, 3 I/O or system
 * failure.
 */
#include "hb_base.h"
#include "hb-trace/hb_trace_cli.h"

int main(int argc, char **argv)
{
	struct cli c;
	struct hb_trace_set s;
	struct hb_error err;
	const char *sub;
	int rc;

	rc = trace_parse(argc, argv, &c);
	if (rc)
		return rc > 0 ? HB_EXIT_OK : HB_EXIT_USAGE;
	hb_error_clear(&err);
	sub = c.name;
	if (!strcmp(sub, "probe")) {
		rc = trace_probe(&c, &err);
	} else if (c.npaths && trace_is_stream(c.paths[0]) &&
		   (!strcmp(sub, "cat") || !strcmp(sub, "stats") || !strcmp(sub, "plot"))) {
		/* a stream trace (hb-run --stream-trace), read alone */
		rc = !strcmp(sub, "cat") ? trace_stream_cat(&c, &err)
		     : !strcmp(sub, "stats") ? trace_stream_stats(&c, &err) : trace_stream_plot(&c, &err);
	} else if (!(rc = hb_trace_set_init(&s, c.paths, c.npaths, &err))) {
		if (!strcmp(sub, "cat"))
			rc = trace_cat(&c, &s, &err);
		else if (!strcmp(sub, "stats"))
			rc = trace_stats(&c, &s, &err);
		else if (!strcmp(sub, "cache-sim"))
			rc = trace_cache_sim(&c, &s, &err);
		else if (!strcmp(sub, "prefetch-sim"))
			rc = trace_prefetch_sim(&c, &s, &err);
		else
			rc = trace_plot(&c, &s, &err);
		hb_trace_set_release(&s);
	}
	if (fflush(stdout) && !rc)
		rc = hb_error_sys(&err, errno, "stdout", "cannot write");
	if (rc) {
		hb_cli_error(prog, &err);
		return hb_cli_exit_for(rc);
	}
	return hb_cli_output_failed() ? HB_EXIT_SYSTEM : HB_EXIT_OK;
}
