/*
 * hb_replay_shadow.c: hb-replay shadow, AFN-021 Gate 5 driven by a trace
 * (hb-replay(1) SHADOW).  Where no model runs (the planted control) or to
 * compare predictors on exactly one route sequence, the routes of LABELS
 * are replayed through the streaming engine itself (libkern/stream, its
 * I/O workers and queues, the shadow observer of libkern/predict) over a
 * scratch ExpertMajor store of the labels' geometry whose records are
 * small and all zero: per sequence, position and layer the predictors'
 * candidates are hinted at the point their AFN-021 availability allows
 * (pre-attention and static: just before the layer's route; router-ahead:
 * after the previous layer's; previous-token: after the previous token's
 * same layer), then the native route is named and every record leased and
 * released.  Once with no predictor, then once per predictions shard, each
 * on a fresh engine of the same budget.  There is no compute between a
 * hint and its need: byte and cache counts are the engine's, its times
 * measure the queue alone, not a runtime's overlap.  Never prints.
 */
#include "hb_replay_train.h"
#include "hb_replay_int.h"
#include "expert/hb_expert_store.h"
#include "hb_json.h"
#include "hb_sha256.h"
#include "predict/hb_learned.h"
#include "stream/hb_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

/* the scratch store: hidden 32, intermediate 16, bf16 (3,072 bytes a record) */
static int build_store(const char *path, const struct hb_trace_header *h, struct hb_xs_source *src,
		       struct hb_error *err)
{
	struct hb_em_geometry g = {h->layers, h->experts, h->top_k, 32, 16};
	struct hb_em_layout plan;
	struct hb_em_writer w;
	uint8_t digest[32] = {0}, one[32], *rec = NULL;
	int fd, rc;

	memset(src, 0, sizeof(*src));
	if ((rc = hb_em_layout_plan(&plan, &g, HB_EM_CODEC_BF16, err)))
		return rc;
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		hb_em_layout_release(&plan);
		return hb_error_sys(err, errno, path, "cannot create");
	}
	rec = calloc(1, (size_t)plan.record_bytes);
	rc = rec ? hb_em_writer_begin(&w, &plan, fd, 0, 1, digest, 1, err)
		 : hb_error_set(err, HB_ERR_NOMEM, "shadow", "out of memory");
	for (uint32_t l = 0; !rc && l < g.layers; l++)
		for (uint32_t e = 0; !rc && e < g.experts; e++)
			rc = hb_em_writer_put_record(&w, l, e, rec, err);
	if (!rc)
		rc = hb_em_writer_finish(&w, &src->layout, err);
	if (rec)
		hb_em_writer_release(&w);
	if (!rc && fsync(fd))
		rc = hb_error_sys(err, errno, path, "cannot write");
	close(fd);
	if (!rc) {
		size_t n = (size_t)g.layers * g.experts;
		hb_sha256_buf(rec, (size_t)plan.record_bytes, one); /* every record is the zero record */
		src->record_sha = malloc(n * 32);
		src->path = strdup(path);
		if (!src->record_sha || !src->path)
			rc = hb_error_set(err, HB_ERR_NOMEM, "shadow", "out of memory");
		for (size_t i = 0; !rc && i < n; i++)
			memcpy(src->record_sha + i * 32, one, 32);
	}
	free(rec);
	hb_em_layout_release(&plan);
	return rc;
}

struct sim {
	const struct hb_replay_shadow_config *c;
	const struct hb_replay_recs *L, *P;  /* labels; this run's predictions (NULL: none) */
	uint8_t avail;
	struct hb_xs *xs;
	struct hb_xs_want *w;
	uint32_t *u;
	uint64_t hints;
};

static void hint(struct sim *m, uint64_t seq, uint64_t pos, uint32_t layer, uint8_t prio)
{
	const struct hb_replay_rec *q;
	uint32_t n;

	if (!m->P || layer >= m->L->h.layers || !(q = hb_replay_recs_find(m->P, seq, pos, layer)))
		return;
	n = m->c->hints ? m->c->hints : m->L->h.top_k;
	for (uint32_t j = 0; j < n && j < m->P->k; j++) {
		float c = q->w[j] > 1 ? 1 : q->w[j] >= 0 ? q->w[j] : 0;
		struct hb_xs_hint h = {.layer = layer, .expert = q->ids[j], .prio = prio, .confidence = c,
				       .owner = seq, .phase = HB_XS_PHASE_DECODE, .token_pos = pos};
		if (q->ids[j] < m->L->h.experts) {
			hb_xs_prefetch(m->xs, &h, NULL, NULL);
			m->hints++;
		}
	}
}

/* one native route, leased whole and released */
static int route(struct sim *m, const struct hb_replay_rec *r, struct hb_shadow *sh, struct hb_error *err)
{
	uint32_t E = m->L->h.experts, n = 0;
	uint64_t seen[HB_EM_MAX_EXPERTS / 64] = {0};
	int32_t ids[HB_TRACE_MAX_TOPK];
	struct hb_xs_route rt;
	struct hb_xs_lease l;
	size_t idx;
	int rc;

	for (uint32_t j = 0; j < m->L->k; j++) {
		ids[j] = (int32_t)r->ids[j];
		if (r->ids[j] < E)
			seen[r->ids[j] / 64] |= 1ull << (r->ids[j] % 64);
	}
	for (uint32_t e = 0; e < E; e++)
		if (seen[e / 64] >> (e % 64) & 1)
			m->u[n++] = e;
	hb_shadow_route(sh, r->layer, r->pos, ids, m->L->k);
	hb_xs_set_position(m->xs, r->pos, r->layer);
	hb_xs_route_init(&rt, m->w, E);
	rt.owner = r->seq, rt.phase = HB_XS_PHASE_DECODE, rt.token_pos = r->pos, rt.token_mask = 1;
	if ((rc = hb_xs_route_begin(m->xs, &rt, r->layer, m->u, n, err)))
		return rc;
	memset(&l, 0, sizeof(l));
	while (!(rc = hb_xs_route_next(m->xs, &rt, &idx, &l, err)))
		if ((rc = hb_xs_release(m->xs, &l, err)))
			break;
	hb_xs_route_end(m->xs, &rt);
	return rc == HB_XS_DONE ? HB_OK : rc;
}

static int simulate(struct sim *m, const struct hb_xs_source *src, cJSON *out, struct hb_error *err)
{
	struct hb_xs_config cfg;
	struct hb_xs_stats st;
	struct hb_shadow sh;
	bool all;
	int rc;

	hb_shadow_init(&sh);
	hb_xs_config_default(&cfg);
	cfg.observe = hb_shadow_ticket, cfg.observe_ctx = &sh;
	cfg.direct = HB_XS_DIRECT_OFF; /* the scratch store's bytes mean nothing: the page cache may serve them */
	if ((rc = hb_xs_budget_parse(m->c->cache, src, &cfg.budget_bytes, &all, err)) ||
	    (rc = hb_xs_open(src, &cfg, &m->xs, err))) {
		hb_shadow_release(&sh);
		return rc;
	}
	for (size_t i = 0; !rc && i < m->L->n; i++) {
		const struct hb_replay_rec *r = &m->L->r[i];
		if (m->avail == HB_AVAIL_PRE_ATTN || m->avail == HB_AVAIL_STATIC)
			hint(m, r->seq, r->pos, r->layer, HB_XS_P1);
		if ((rc = route(m, r, &sh, err)))
			break;
		if (m->avail == HB_AVAIL_AHEAD)
			hint(m, r->seq, r->pos, r->layer + 1, HB_XS_P1);
		else if (m->avail == HB_AVAIL_PREV_TOKEN)
			hint(m, r->seq, r->pos + 1, r->layer, HB_XS_P2);
	}
	hb_xs_stats_get(m->xs, &st);
	hb_xs_close(m->xs); /* the last completions reach the observer first */
	m->xs = NULL;
	if (!rc && ((rc = hb_xs_stats_json(&st, out)) || (rc = hb_shadow_json(&sh, out)) ||
		    (rc = hb_json_add_u64(out, "hints", m->hints))))
		hb_error_set(err, rc, "shadow", "out of memory");
	hb_shadow_release(&sh);
	return rc;
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *x = cJSON_GetObjectItem(o, k);
	return cJSON_IsNumber(x) ? x->valuedouble : 0;
}

int hb_replay_shadow_run(const struct hb_replay_shadow_config *c, char **json, struct hb_error *err)
{
	struct hb_replay_recs L = {0}, *P = calloc(c->n_pred + 1, sizeof(*P));
	struct hb_xs_source src;
	cJSON *root = cJSON_CreateObject(), *preds, *none = NULL;
	size_t len;
	int rc;

	*json = NULL;
	memset(&src, 0, sizeof(src));
	if (!P || !root) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "shadow", "out of memory");
		goto out;
	}
	if ((rc = hb_replay_recs_load(c->labels, &L, err)))
		goto out;
	for (size_t i = 0; i < c->n_pred; i++) {
		if ((rc = hb_replay_recs_load(c->predictions[i], &P[i], err)))
			goto out;
		if (P[i].h.layers != L.h.layers || P[i].h.experts != L.h.experts ||
		    memcmp(P[i].h.artifact, L.h.artifact, 32) || memcmp(P[i].h.text, L.h.text, 32)) {
			rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_IDENTITY), HB_ERR_CONTRACT, c->predictions[i], false,
					   0, "geometry, artifact or tokenizer digest differs from the labels'");
			goto out;
		}
	}
	if ((rc = build_store(c->store, &L.h, &src, err)))
		goto out;
	hb_json_add_str(root, "format", "hebrus-replay-shadow/1");
	hb_json_add_u64(root, "records", L.n);
	hb_json_add_str(root, "expert_cache", c->cache);
	hb_json_add_u64(root, "record_bytes", src.layout.record_bytes);
	preds = cJSON_AddObjectToObject(root, "predictors");
	for (size_t p = 0; !rc && p <= c->n_pred; p++) {
		struct sim m = {c, &L, p ? &P[p - 1] : NULL, p ? c->available[p - 1] : HB_AVAIL_STATIC, NULL, NULL,
				NULL, 0};
		cJSON *o = cJSON_CreateObject();
		m.w = malloc(L.h.experts * sizeof(*m.w));
		m.u = malloc(L.h.experts * sizeof(*m.u));
		rc = m.w && m.u ? simulate(&m, &src, o, err) : hb_error_set(err, HB_ERR_NOMEM, "shadow", "out of memory");
		free(m.w), free(m.u);
		if (!none)
			none = o;
		if (!rc) { /* against no prediction on the same routes */
			cJSON_AddNumberToObject(o, "misses_avoided", num(none, "misses") - num(o, "misses"));
			cJSON_AddNumberToObject(o, "evictions_caused", num(o, "evictions") - num(none, "evictions"));
		}
		cJSON_AddItemToObject(preds, p ? (c->names && c->names[p - 1] ? c->names[p - 1] : c->predictions[p - 1])
					       : "none", o);
	}
	if (!rc)
		rc = hb_json_render(root, true, json, &len, err);
out:
	unlink(c->store);
	hb_xs_source_release(&src);
	cJSON_Delete(root);
	hb_replay_recs_release(&L);
	for (size_t i = 0; P && i < c->n_pred; i++)
		hb_replay_recs_release(&P[i]);
	free(P);
	return rc;
}
