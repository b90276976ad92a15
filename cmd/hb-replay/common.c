/*
 * hb-replay/common.c: what several subcommands share: the JSON record.
 */
#include "hb_base.h"
#include "hb_replay_cli.h"

int replay_emit_json(cJSON *j)
{
	return hb_cli_print_json(prog, j);
}
