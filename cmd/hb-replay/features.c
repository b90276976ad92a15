/*
 * hb-replay/features.c: what label captures for the predictors beside its
 * labels (hb-replay(1) FEATURES, ROUTER-AHEAD): label's options turned
 * into libkern/predict's taps (hb_taps.h), which hb-run's decode captures
 * share; the session only reads the states out, and hb_moe_forward is not
 * touched.
 */
#include "hb_base.h"
#include "hb_replay_cli.h"
#include <sys/stat.h>

int replay_taps_open(struct hb_taps *tp, const struct cli *c, const struct hb_model *m, struct hb_pool *pool,
		     struct hb_error *err)
{
	struct hb_taps_config tc;

	memset(&tc, 0, sizeof(tc));
	tc.features = c->features;
	tc.router_ahead = c->router_ahead;
	tc.feature_width = (uint32_t)c->feature_width;
	tc.feature_seed = c->feature_seed;
	tc.split_name = c->split_name;
	tc.chunk_cap = c->chunk;
	memcpy(tc.text, c->text, 32);
	if (c->features && c->split_file) {
		int rc = hb_taps_split_id(c->split_file, tc.split_id, err);
		if (rc)
			return rc;
	}
	return hb_taps_open(tp, &tc, m, pool, err);
}

int replay_taps_sequence(void *ctx, const struct hb_transcript *t, struct hb_error *err)
{
	struct replay_eng *e = ctx;
	(void)err;
	hb_taps_sequence(e->taps, t->sequence, t->owner, t->thread);
	return HB_OK;
}

int replay_taps_check_fresh(const char *outdir, struct hb_error *err)
{
	struct stat sb;
	char **files = NULL;
	size_t n = 0;
	int rc;

	if (stat(outdir, &sb))
		return HB_OK;
	if ((rc = hb_replay_list_shards(outdir, &files, &n, err)))
		return rc;
	hb_replay_free_list(files, n);
	if (n)
		return hb_error_set(err, HB_ERR_INVALID, outdir,
				    "--features and --router-ahead need an OUTDIR without label shards (they do not resume)");
	return HB_OK;
}
