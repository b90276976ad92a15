/*
 * hb_taps.c: features, router-ahead and deadlines read out of a running
 * session (hb_taps.h).  Moved here from hb-replay's front so that hb-run's
 * decode captures and hb-replay's replay write the same files.
 */
#include "hb_base.h"
#include "hb_taps.h"
#include "backend/hb_backend.h"
#include "math/hb_math.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_publish.h"
#include "hb_sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FEATURE_ROWS_PER_SHARD 4096u

int hb_taps_split_id(const char *path, uint8_t id[32], struct hb_error *err)
{
	char *data;
	size_t len;
	int rc = hb_read_file(path, 64u << 20, &data, &len, err);

	if (rc)
		return rc;
	hb_sha256_buf(data, len, id);
	free(data);
	return HB_OK;
}

bool hb_taps_split_name_ok(const char *name)
{
	size_t n = strlen(name);
	return n && n < HB_SPLIT_NAME_MAX && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-_") == n;
}

uint64_t hb_taps_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int open_features(struct hb_taps *tp, const struct hb_taps_config *c, struct hb_error *err)
{
	struct hb_feature_ident id;
	int rc;

	memset(&id, 0, sizeof(id));
	memcpy(id.artifact, tp->m->artifact_sha, 32);
	memcpy(id.text, c->text, 32);
	memcpy(id.split_id, c->split_id, 32);
	id.projection_seed = c->feature_seed;
	id.width = c->feature_width, id.source_width = tp->H, id.layers = tp->L;
	snprintf(id.split, sizeof(id.split), "%s", c->split_name ? c->split_name : "unsplit");
	snprintf(id.tap, sizeof(id.tap), "pre-attention-mix");
	if ((rc = hb_projection_make(id.projection_seed, tp->H, id.width, &tp->P, id.projection, err)))
		return rc;
	tp->width = id.width;
	tp->rows = malloc((size_t)tp->chunk_cap * tp->L * tp->width * sizeof(float));
	if (!tp->rows)
		return hb_error_set(err, HB_ERR_NOMEM, "features", "out of memory");
	return hb_feature_writer_open(&tp->fw, c->features, &id, FEATURE_ROWS_PER_SHARD, err);
}

static int open_ahead(struct hb_taps *tp, const struct hb_taps_config *c, struct hb_error *err)
{
	struct hb_trace_header h;
	int rc;

	if (mkdir(c->router_ahead, 0777) && errno != EEXIST)
		return hb_error_sys(err, errno, c->router_ahead, "cannot create");
	snprintf(tp->rpath, sizeof(tp->rpath), "%s/predictions.hbtrace", c->router_ahead);
	snprintf(tp->rtmp, sizeof(tp->rtmp), "%s/.predictions.hbtrace.tmp", c->router_ahead);
	tp->rfd = open(tp->rtmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (tp->rfd < 0)
		return hb_error_sys(err, errno, tp->rtmp, "cannot create");
	memset(&h, 0, sizeof(h));
	h.top_k = tp->C, h.layers = tp->L, h.experts = tp->E;
	memcpy(h.artifact, tp->m->artifact_sha, 32);
	memcpy(h.text, c->text, 32);
	h.owner = c->owner, h.generation = c->generation;
	h.has_thread = c->has_thread, h.thread = c->thread;
	if ((rc = hb_trace_writer_open(&tp->rw, tp->rfd, tp->rtmp, &h, 4096, err)))
		return rc;
	tp->logits = malloc(tp->E * sizeof(float));
	tp->ahead = calloc((size_t)tp->chunk_cap * tp->L, sizeof(*tp->ahead));
	tp->scratch = malloc((size_t)hb_pool_size(tp->pool) * tp->H * sizeof(float));
	if (!tp->logits || !tp->scratch || !tp->ahead)
		return hb_error_set(err, HB_ERR_NOMEM, "router-ahead", "out of memory");
	return HB_OK;
}

int hb_taps_open(struct hb_taps *tp, const struct hb_taps_config *c, const struct hb_model *m,
		 struct hb_pool *pool, struct hb_error *err)
{
	const struct hb_qwen_config *q = &m->cfg;
	int rc;

	memset(tp, 0, sizeof(*tp));
	tp->m = m, tp->pool = pool, tp->rfd = -1, tp->cfg = *c;
	tp->H = (uint32_t)q->hidden_size, tp->L = (uint32_t)q->num_layers;
	tp->E = (uint32_t)q->num_experts, tp->k = (uint32_t)q->num_experts_per_tok;
	tp->C = tp->E < HB_TRACE_MAX_TOPK ? tp->E : HB_TRACE_MAX_TOPK;
	tp->chunk_cap = c->chunk_cap ? c->chunk_cap : 1;
	tp->t0_ns = hb_taps_now_ns();
	if (c->features && (rc = open_features(tp, c, err)))
		return rc;
	if (c->router_ahead && (rc = open_ahead(tp, c, err)))
		return rc;
	return HB_OK;
}

void hb_taps_sequence(struct hb_taps *tp, uint64_t sequence, uint64_t owner, uint64_t thread)
{
	tp->seq = sequence, tp->owner = owner, tp->thread = thread;
}

/* router-ahead: layer+1's router on layer's post-attention mix, kept in
 * the chunk's slot so that records are written position-major, in the same
 * order whatever the chunk size */
static int ahead(struct hb_taps *tp, uint32_t layer, uint64_t pos, const float *mixed)
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

/* deadlines: the record of (pos, layer), appended at its pre-attention tap */
static struct hb_taps_time *time_of(struct hb_taps *tp, uint64_t pos, uint32_t layer, bool add)
{
	/* a chunk appends its positions layer by layer: the record is among
	 * the last chunk_cap */
	for (size_t i = tp->n_times; i-- > 0 && i + tp->chunk_cap >= tp->n_times;) {
		struct hb_taps_time *t = &tp->times[i];
		if (t->pos == pos && t->layer == layer)
			return t;
	}
	if (!add)
		return NULL;
	if (tp->n_times == tp->cap_times) {
		size_t cap = tp->cap_times ? 2 * tp->cap_times : 1024;
		struct hb_taps_time *g = realloc(tp->times, cap * sizeof(*g));
		if (!g) {
			tp->rc = hb_error_set(&tp->err, HB_ERR_NOMEM, "deadlines", "out of memory");
			return NULL;
		}
		tp->times = g, tp->cap_times = cap;
	}
	tp->times[tp->n_times] = (struct hb_taps_time){.pos = pos, .layer = layer};
	return &tp->times[tp->n_times++];
}

static void observe_time(struct hb_taps *tp, enum hb_observe kind, uint32_t layer, uint64_t pos)
{
	struct hb_taps_time *t = time_of(tp, pos, layer, kind == HB_OBS_PRE_ATTN);
	uint64_t now = hb_taps_now_ns() - tp->t0_ns;

	if (!t)
		return;
	if (kind == HB_OBS_PRE_ATTN)
		t->pre_attn_ns = now;
	else if (kind == HB_OBS_PRE_MOE)
		t->pre_moe_ns = now;
	else if (kind == HB_OBS_ROUTES)
		t->need_ns = now;
}

void hb_taps_observe(struct hb_taps *tp, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data)
{
	if (tp->rc || layer < 0 || (uint32_t)layer >= tp->L)
		return;
	if (tp->cfg.deadlines && (kind == HB_OBS_PRE_ATTN || kind == HB_OBS_PRE_MOE || kind == HB_OBS_ROUTES))
		observe_time(tp, kind, (uint32_t)layer, pos);
	if (kind == HB_OBS_PRE_ATTN && tp->fw) {
		if (layer == 0 && !tp->chunk_n)
			tp->pos0 = pos;
		if (pos < tp->pos0 || pos - tp->pos0 >= tp->chunk_cap) {
			tp->rc = hb_error_set(&tp->err, HB_ERR_INTERNAL, "features", "a state out of its chunk");
			return;
		}
		if (layer == 0)
			tp->chunk_n = pos - tp->pos0 + 1;
		hb_projection_apply(tp->P, tp->H, tp->width, data,
				    tp->rows + ((size_t)(pos - tp->pos0) * tp->L + (uint32_t)layer) * tp->width);
	} else if (kind == HB_OBS_PRE_MOE && tp->rw && (uint32_t)layer + 1 < tp->L) {
		tp->rc = ahead(tp, (uint32_t)layer, pos, data);
	}
}

int hb_taps_chunk_done(struct hb_taps *tp, struct hb_error *err)
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

/* the deadlines file (hb-run(1) DEADLINES) */
static int write_deadlines(struct hb_taps *tp, const struct hb_xs_stats *xs, struct hb_error *err)
{
	struct hb_xs_config dc;
	cJSON *j = cJSON_CreateObject(), *rd, *a;
	struct hb_publish pub;
	char *text = NULL;
	size_t len = 0;
	int rc;

	hb_xs_config_default(&dc);
	hb_json_add_str(j, "format", "hebrus-deadlines/1");
	hb_json_add_str(j, "clock", "CLOCK_MONOTONIC ns since the capture began");
	hb_json_add_u64(j, "sequence", tp->seq);
	hb_json_add_u64(j, "prompt_tokens", tp->prompt_tokens);
	hb_json_add_u64(j, "layers", tp->L);
	rd = cJSON_AddObjectToObject(j, "read");
	if (xs && xs->ready.n) {
		hb_json_add_u64(rd, "reads", xs->ready.n);
		hb_json_add_u64(rd, "p50_ns", hb_xs_hist_quantile(&xs->ready, 0.5));
		hb_json_add_u64(rd, "p95_ns", hb_xs_hist_quantile(&xs->ready, 0.95));
	} else {
		hb_json_add_u64(rd, "reads", 0);
		cJSON_AddNullToObject(rd, "p50_ns");
		cJSON_AddNullToObject(rd, "p95_ns");
	}
	hb_json_add_u64(rd, "predicted_depth", dc.depth > dc.reserved_p0 ? dc.depth - dc.reserved_p0 : 1);
	a = cJSON_AddArrayToObject(j, "records");
	for (size_t i = 0; a && i < tp->n_times; i++) {
		const struct hb_taps_time *t = &tp->times[i];
		double v[5] = {(double)t->pos, t->layer, (double)t->pre_attn_ns, (double)t->pre_moe_ns, (double)t->need_ns};
		cJSON_AddItemToArray(a, cJSON_CreateDoubleArray(v, 5));
	}
	if ((rc = hb_json_render(j, false, &text, &len, err)))
		goto out;
	if ((rc = hb_publish_begin(&pub, tp->cfg.deadlines, HB_PUBLISH_REPLACE, err)))
		goto out;
	if ((rc = hb_publish_write(&pub, text, len, err)) || (rc = hb_publish_write(&pub, "\n", 1, err))) {
		hb_publish_abort(&pub);
		goto out;
	}
	rc = hb_publish_commit(&pub, NULL, NULL, err);
out:
	cJSON_Delete(j);
	free(text);
	return rc;
}

int hb_taps_close(struct hb_taps *tp, bool ok, const struct hb_xs_stats *xs, struct hb_error *err)
{
	int rc = ok ? tp->rc : -1;
	if (rc > 0 && err)
		*err = tp->err;
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
	if (!rc && tp->cfg.deadlines)
		rc = write_deadlines(tp, xs, err);
	free(tp->P);
	free(tp->rows);
	free(tp->logits);
	free(tp->scratch);
	free(tp->ahead);
	free(tp->times);
	tp->ahead = NULL, tp->times = NULL, tp->n_times = tp->cap_times = 0;
	tp->fw = NULL, tp->rw = NULL, tp->rfd = -1; /* a second close does nothing */
	tp->cfg.deadlines = NULL;
	tp->P = tp->rows = tp->logits = tp->scratch = NULL;
	return ok ? rc : HB_OK;
}
