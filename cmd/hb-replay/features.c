/*
 * hb-replay/features.c: what label captures for the predictors beside its
 * labels (hb-replay(1) FEATURES, ROUTER-AHEAD): the seeded projection of
 * each layer's pre-attention mix (HB_OBS_PRE_ATTN) into a feature set, and
 * router-ahead, layer l+1's native router applied to layer l's
 * post-attention mix (HB_OBS_PRE_MOE), as a predictions shard.  Both are
 * computed here, in the replay front, from observed states: the session
 * only reads them out, and hb_moe_forward is not touched.
 */
#include "hb_base.h"
#include "hb_replay_cli.h"
#include "backend/hb_backend.h"
#include "math/hb_math.h"
#include "hb_io.h"
#include "hb_sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define FEATURE_ROWS_PER_SHARD 4096u

int replay_taps_open(struct replay_taps *tp, const struct cli *c, const struct hb_model *m, struct hb_pool *pool,
		     struct hb_error *err)
{
	const struct hb_qwen_config *q = &m->cfg;
	int rc;

	memset(tp, 0, sizeof(*tp));
	tp->m = m, tp->pool = pool, tp->rfd = -1;
	tp->H = (uint32_t)q->hidden_size, tp->L = (uint32_t)q->num_layers;
	tp->E = (uint32_t)q->num_experts, tp->k = (uint32_t)q->num_experts_per_tok;
	tp->C = tp->E < HB_TRACE_MAX_TOPK ? tp->E : HB_TRACE_MAX_TOPK;
	tp->chunk_cap = c->chunk;
	if (c->features) {
		struct hb_feature_ident id;
		memset(&id, 0, sizeof(id));
		memcpy(id.artifact, m->artifact_sha, 32);
		memcpy(id.text, c->text, 32);
		id.projection_seed = c->feature_seed;
		id.width = (uint32_t)c->feature_width, id.source_width = tp->H, id.layers = tp->L;
		snprintf(id.split, sizeof(id.split), "%s", c->split_name ? c->split_name : "unsplit");
		snprintf(id.tap, sizeof(id.tap), "pre-attention-mix");
		if (c->split_file) {
			char *data;
			size_t len;
			if ((rc = hb_read_file(c->split_file, 64u << 20, &data, &len, err)))
				return rc;
			hb_sha256_buf(data, len, id.split_id);
			free(data);
		}
		if ((rc = hb_projection_make(id.projection_seed, tp->H, id.width, &tp->P, id.projection, err)))
			return rc;
		tp->width = id.width;
		tp->rows = malloc((size_t)tp->chunk_cap * tp->L * tp->width * sizeof(float));
		if (!tp->rows)
			return hb_error_set(err, HB_ERR_NOMEM, "features", "out of memory");
		if ((rc = hb_feature_writer_open(&tp->fw, c->features, &id, FEATURE_ROWS_PER_SHARD, err)))
			return rc;
	}
	if (c->router_ahead) {
		struct hb_trace_header h;
		if (mkdir(c->router_ahead, 0777) && errno != EEXIST)
			return hb_error_sys(err, errno, c->router_ahead, "cannot create");
		snprintf(tp->rpath, sizeof(tp->rpath), "%s/predictions.hbtrace", c->router_ahead);
		snprintf(tp->rtmp, sizeof(tp->rtmp), "%s/.predictions.hbtrace.tmp", c->router_ahead);
		tp->rfd = open(tp->rtmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (tp->rfd < 0)
			return hb_error_sys(err, errno, tp->rtmp, "cannot create");
		memset(&h, 0, sizeof(h));
		h.top_k = tp->C, h.layers = tp->L, h.experts = tp->E;
		memcpy(h.artifact, m->artifact_sha, 32);
		memcpy(h.text, c->text, 32);
		if ((rc = hb_trace_writer_open(&tp->rw, tp->rfd, tp->rtmp, &h, 4096, err)))
			return rc;
		tp->logits = malloc(tp->E * sizeof(float));
		tp->ahead = calloc((size_t)tp->chunk_cap * tp->L, sizeof(*tp->ahead));
		tp->scratch = malloc((size_t)hb_pool_size(pool) * tp->H * sizeof(float));
		if (!tp->logits || !tp->scratch || !tp->ahead)
			return hb_error_set(err, HB_ERR_NOMEM, "router-ahead", "out of memory");
	}
	return HB_OK;
}

int replay_taps_sequence(void *ctx, const struct hb_transcript *t, struct hb_error *err)
{
	struct replay_eng *e = ctx;
	(void)err;
	e->taps->seq = t->sequence, e->taps->owner = t->owner, e->taps->thread = t->thread;
	return HB_OK;
}

/* router-ahead: layer+1's router on layer's post-attention mix, kept in
 * the chunk's slot so that records are written position-major, in the same
 * order whatever the chunk size */
static int ahead(struct replay_taps *tp, uint32_t layer, uint64_t pos, const float *mixed)
{
	const struct hb_moe_weights *w = &tp->m->layers[layer + 1].moe;
	struct hb_route *rp, r;

	if (layer == 0 && !tp->ahead_n)
		tp->apos0 = pos;
	if (pos < tp->apos0 || pos - tp->apos0 >= tp->chunk_cap)
		return hb_error_set(&tp->err, HB_ERR_INTERNAL, "router-ahead", "a state out of its chunk");
	if (layer == 0)
		tp->ahead_n = pos - tp->apos0 + 1;
	rp = &tp->ahead[(size_t)(pos - tp->apos0) * tp->L + layer + 1];

	hb_matmul(tp->pool, &w->router, mixed, 1, tp->logits, tp->scratch);
	hb_softmax(tp->logits, tp->E); /* float32, as the router itself */
	memset(&r, 0, sizeof(r));
	hb_predict_top(tp->logits, tp->E, tp->C, r.ids); /* ties to the lower id */
	for (uint32_t j = 0; j < tp->C; j++) {
		float c = (float)tp->k * tp->logits[r.ids[j]];
		r.weights[j] = c < 1 ? c : 1;
	}
	r.sequence = tp->seq, r.ordinal = pos, r.layer = layer + 1;
	*rp = r;
	return HB_OK;
}

void replay_taps_observe(struct replay_taps *tp, enum hb_observe kind, int32_t layer, uint64_t pos, const float *x)
{
	if (tp->rc || layer < 0 || (uint32_t)layer >= tp->L)
		return;
	if (kind == HB_OBS_PRE_ATTN && tp->fw) {
		if (layer == 0 && !tp->chunk_n)
			tp->pos0 = pos;
		if (pos < tp->pos0 || pos - tp->pos0 >= tp->chunk_cap) {
			tp->rc = hb_error_set(&tp->err, HB_ERR_INTERNAL, "features", "a state out of its chunk");
			return;
		}
		if (layer == 0)
			tp->chunk_n = pos - tp->pos0 + 1;
		hb_projection_apply(tp->P, tp->H, tp->width, x,
				    tp->rows + ((size_t)(pos - tp->pos0) * tp->L + (uint32_t)layer) * tp->width);
	} else if (kind == HB_OBS_PRE_MOE && tp->rw && (uint32_t)layer + 1 < tp->L) {
		tp->rc = ahead(tp, (uint32_t)layer, pos, x);
	}
}

int replay_taps_chunk_done(struct replay_taps *tp, struct hb_error *err)
{
	int rc = tp->rc;
	for (uint64_t i = 0; !rc && tp->fw && i < tp->chunk_n; i++)
		rc = hb_feature_writer_add(tp->fw, tp->seq, tp->pos0 + i, tp->owner, tp->thread,
					   tp->rows + (size_t)i * tp->L * tp->width, &tp->err);
	tp->chunk_n = 0;
	for (uint64_t i = 0; !rc && tp->rw && i < tp->ahead_n; i++)
		for (uint32_t l = 1; !rc && l < tp->L; l++) {
			rc = hb_trace_write(tp->rw, &tp->ahead[(size_t)i * tp->L + l], &tp->err);
			tp->records++;
		}
	tp->ahead_n = 0;
	if (rc) {
		*err = tp->err;
		tp->rc = rc;
	}
	return rc;
}

int replay_taps_close(struct replay_taps *tp, bool ok, struct hb_error *err)
{
	int rc = ok ? tp->rc : -1;
	if (tp->fw) {
		if (!rc)
			rc = hb_feature_writer_close(tp->fw, &tp->feature_bytes, err);
		else
			hb_feature_writer_abort(tp->fw);
	}
	if (tp->rw) {
		int r2 = hb_trace_writer_close(tp->rw, err);
		rc = rc ? rc : r2;
	}
	if (tp->rfd >= 0) {
		if (!rc && (fsync(tp->rfd) || close(tp->rfd)))
			rc = hb_error_sys(err, errno, tp->rtmp, "cannot write");
		else if (rc)
			close(tp->rfd);
		if (!rc && rename(tp->rtmp, tp->rpath))
			rc = hb_error_sys(err, errno, tp->rpath, "cannot publish");
		if (rc)
			unlink(tp->rtmp);
	}
	free(tp->P);
	free(tp->rows);
	free(tp->logits);
	free(tp->scratch);
	free(tp->ahead);
	tp->ahead = NULL;
	tp->fw = NULL, tp->rw = NULL, tp->rfd = -1; /* a second close does nothing */
	tp->P = tp->rows = tp->logits = tp->scratch = NULL;
	return ok ? rc : HB_OK;
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
