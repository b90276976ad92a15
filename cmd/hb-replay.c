/*
 * hb-replay: decode replayed as prefill (AFN-021).  A thin front over
 * hb-replay/dataset/hb_replay.h: subcommands label, parity, split, merge
 * and eval, one file each under cmd/hb-replay/, with their options in
 * options.c and the CPU reference session (libkern/graph/hb_session) wired
 * into the labeller as its engine in engine.c.  This file starts the
 * crypto, runs the subcommand and maps a failed stdout to exit 3.  Replay
 * makes training labels; it never makes evidence about decode latency,
 * cache state or runtime parity beyond what `parity` checks.
 */
#include "hb_base.h"
#include "hb-replay/hb_replay_cli.h"
#include "hb_sha256.h"

int main(int argc, char **argv)
{
	struct cli c;
	int status;

	if (replay_parse(argc, argv, &c))
		return HB_EXIT_USAGE;
	{
		struct hb_error err;
		hb_error_clear(&err);
		if (hb_crypto_start(&err)) {
			hb_cli_error(prog, &err);
			return hb_cli_exit_for(err.code);
		}
	}
	if (!strcmp(c.sub, "label"))
		status = replay_label(&c);
	else if (!strcmp(c.sub, "parity"))
		status = replay_parity(&c);
	else if (!strcmp(c.sub, "split"))
		status = replay_split(&c);
	else if (!strcmp(c.sub, "merge"))
		status = replay_merge(&c);
	else if (!strcmp(c.sub, "eval"))
		status = replay_eval(&c);
	else if (!strcmp(c.sub, "plant"))
		status = replay_plant(&c);
	else if (!strcmp(c.sub, "train"))
		status = replay_train(&c);
	else if (!strcmp(c.sub, "predict"))
		status = replay_predict(&c);
	else if (!strcmp(c.sub, "shadow"))
		status = replay_shadow(&c);
	else
		status = HB_EXIT_USAGE;
	if (fflush(stdout) != 0 || hb_cli_output_failed())
		status = HB_EXIT_SYSTEM;
	return status;
}
