/*
 * hb_replay_recs.c: label and prediction shards read whole into memory,
 * sorted by sequence, position and layer (hb_replay_int.h), for eval and
 * shadow.
 */
#include "hb_replay_int.h"

static int take(void *ctx, const struct hb_trace_header *h, const struct hb_route *r)
{
	struct hb_replay_recs *R = ctx;

	if (!R->have_h) {
		R->h = *h;
		R->have_h = true;
		R->k = h->top_k;
	} else if (h->top_k != R->h.top_k || h->layers != R->h.layers || h->experts != R->h.experts) {
		R->rc = hb_error_diag(R->err, hb_replay_diag_id(HB_RPD_GEOMETRY), HB_ERR_CONTRACT, R->what, false, 0,
				      "shards disagree on top-k, layers or experts");
		return 1;
	}
	if (R->n == R->cap) {
		size_t cap = R->cap ? 2 * R->cap : 4096;
		struct hb_replay_rec *g = realloc(R->r, cap * sizeof(*g));
		uint32_t *gi;
		if (!g)
			goto nomem;
		R->r = g;
		gi = realloc(R->ids, cap * R->k * sizeof(uint32_t));
		if (!gi)
			goto nomem;
		R->ids = gi;
		{
			float *gw = realloc(R->ws, cap * R->k * sizeof(float));
			if (!gw)
				goto nomem;
			R->ws = gw;
		}
		R->cap = cap;
	}
	R->r[R->n].seq = r->sequence;
	R->r[R->n].pos = r->ordinal;
	R->r[R->n].layer = r->layer;
	memcpy(R->ids + R->n * R->k, r->ids, R->k * sizeof(uint32_t));
	memcpy(R->ws + R->n * R->k, r->weights, R->k * sizeof(float));
	R->n++;
	return 0;
nomem:
	R->rc = hb_error_set(R->err, HB_ERR_NOMEM, R->what, "out of memory");
	return 1;
}

static int cmp_rec(const void *a, const void *b)
{
	const struct hb_replay_rec *x = a, *y = b;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	if (x->pos != y->pos)
		return x->pos < y->pos ? -1 : 1;
	return x->layer < y->layer ? -1 : x->layer > y->layer;
}

int hb_replay_recs_load(const char *path, struct hb_replay_recs *R, struct hb_error *err)
{
	int rc;

	R->err = err;
	R->what = path;
	if ((rc = hb_replay_read_shards(path, take, R, &R->rc, err)))
		return rc;
	if (!R->n)
		return hb_error_diag(err, hb_replay_diag_id(HB_RPD_COVERAGE), HB_ERR_NOTFOUND, path, false, 0,
				     "no label records");
	for (size_t i = 0; i < R->n; i++) {
		R->r[i].ids = R->ids + i * R->k;
		R->r[i].w = R->ws + i * R->k;
	}
	qsort(R->r, R->n, sizeof(*R->r), cmp_rec);
	return HB_OK;
}

void hb_replay_recs_release(struct hb_replay_recs *R)
{
	free(R->r);
	free(R->ids);
	free(R->ws);
}

const struct hb_replay_rec *hb_replay_recs_find(const struct hb_replay_recs *R, uint64_t seq, uint64_t pos, uint32_t layer)
{
	struct hb_replay_rec key = {seq, pos, layer, NULL, NULL};
	return bsearch(&key, R->r, R->n, sizeof(*R->r), cmp_rec);
}

