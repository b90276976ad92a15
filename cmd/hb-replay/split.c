/*
 * hb-replay/split.c: hb-replay split: transcripts into train, validation
 * and temporal splits (or windows of them), each published whole, with
 * split.json beside them.
 */
#include "hb_base.h"
#include "hb_replay_cli.h"
#include "hb_json.h"
#include "hb_publish.h"

#include <errno.h>
#include <sys/stat.h>

struct split_out {
	struct hb_publish pub[HB_SPLIT_COUNT];
	bool open[HB_SPLIT_COUNT];
};

static int split_emit(void *ctx, int split, const struct hb_transcript *w, struct hb_error *err)
{
	struct split_out *o = ctx;
	char *line = hb_transcript_render(w);
	int rc;

	if (!line)
		return hb_error_set(err, HB_ERR_NOMEM, "split", "out of memory");
	rc = hb_publish_write(&o->pub[split], line, strlen(line), err);
	if (!rc)
		rc = hb_publish_write(&o->pub[split], "\n", 1, err);
	free(line);
	return rc;
}

int replay_split(const struct cli *c)
{
	struct hb_error err;
	struct hb_transcripts ts = {0};
	struct hb_split_config cfg;
	struct hb_split_result res;
	struct split_out o;
	cJSON *j = NULL, *splits;
	char path[4096], *text = NULL;
	size_t len = 0;
	int rc;

	hb_error_clear(&err);
	memset(&o, 0, sizeof(o));
	memset(&res, 0, sizeof(res));
	if ((rc = hb_transcripts_load(c->args[0], &ts, &err)))
		goto fail;
	if (mkdir(c->out, 0777) && errno != EEXIST) {
		rc = hb_error_sys(&err, errno, c->out, "cannot create the output directory");
		goto fail;
	}
	for (int s = 0; s < HB_SPLIT_COUNT; s++) {
		snprintf(path, sizeof(path), "%s/%s.jsonl", c->out, hb_split_name(s));
		if ((rc = hb_publish_begin(&o.pub[s], path, HB_PUBLISH_REPLACE, &err)))
			goto fail;
		o.open[s] = true;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.seed = c->seed;
	cfg.validation_fraction = c->validation;
	cfg.temporal_fraction = c->temporal;
	cfg.window = c->window;
	cfg.stride = c->stride;
	if ((rc = hb_split_run(&ts, &cfg, split_emit, &o, &res, &err)))
		goto fail;
	if (res.owner_overlap || res.thread_overlap) {
		rc = hb_error_set(&err, HB_ERR_INTERNAL, "split", "%" PRIu64 " owners and %" PRIu64
				  " threads appear in two splits", res.owner_overlap, res.thread_overlap);
		goto fail;
	}
	j = cJSON_CreateObject();
	hb_json_add_str(j, "format", "hebrus-replay-split/1");
	hb_json_add_u64(j, "seed", c->seed);
	cJSON_AddNumberToObject(j, "validation_fraction", c->validation);
	cJSON_AddNumberToObject(j, "temporal_fraction", c->temporal);
	hb_json_add_u64(j, "window", c->window);
	hb_json_add_u64(j, "stride", c->stride ? c->stride : c->window);
	splits = cJSON_AddObjectToObject(j, "splits");
	for (int s = 0; s < HB_SPLIT_COUNT; s++) {
		cJSON *x = cJSON_AddObjectToObject(splits, hb_split_name(s));
		const struct hb_split_counts *k = &res.counts[s];
		hb_json_add_u64(x, "owners", k->owners);
		hb_json_add_u64(x, "threads", k->threads);
		hb_json_add_u64(x, "transcripts", k->transcripts);
		hb_json_add_u64(x, "windows", k->windows);
		hb_json_add_u64(x, "tokens", k->tokens);
		hb_json_add_u64(x, "duplicates_dropped", k->duplicates_dropped);
	}
	hb_json_add_u64(j, "owners_in_two_splits", res.owner_overlap);
	hb_json_add_u64(j, "threads_in_two_splits", res.thread_overlap);
	if ((rc = hb_json_render(j, true, &text, &len, &err)))
		goto fail;
	for (int s = 0; s < HB_SPLIT_COUNT; s++) {
		o.open[s] = false;
		if ((rc = hb_publish_commit(&o.pub[s], NULL, NULL, &err)))
			goto fail;
	}
	snprintf(path, sizeof(path), "%s/split.json", c->out);
	if ((rc = hb_publish_buf(path, text, len, HB_PUBLISH_REPLACE, &err)))
		goto fail;
	fwrite(text, 1, len, stdout);
	free(text);
	cJSON_Delete(j);
	hb_split_result_release(&res);
	hb_transcripts_release(&ts);
	return HB_EXIT_OK;
fail:
	hb_cli_error(prog, &err);
	for (int s = 0; s < HB_SPLIT_COUNT; s++)
		if (o.open[s])
			hb_publish_abort(&o.pub[s]);
	free(text);
	cJSON_Delete(j);
	hb_split_result_release(&res);
	hb_transcripts_release(&ts);
	return hb_cli_exit_for(rc);
}
