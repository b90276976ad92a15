/*
 * hb_predictor.c: predictor checkpoints (hb_predict.h): save, load, the
 * compatibility check and the scores.  AFN-020's rule for drafters holds for
 * predictors too: a checkpoint names what it was trained on and is refused
 * against anything else, field by field, before it scores a row.
 */
#include "hb_predict_int.h"
#include "hb_sha256.h"

#include <errno.h>

#define DIAG(sym) hb_predict_diag_id(HB_PDD_##sym)

int hb_predictor_alloc(struct hb_predictor *p, struct hb_error *err)
{
	p->trunk = calloc((size_t)p->rank * p->width, sizeof(float));
	p->layer = calloc((size_t)p->layers * p->rank, sizeof(float));
	p->head = calloc((size_t)p->experts * p->rank, sizeof(float));
	p->bias = calloc(p->experts, sizeof(float));
	if (!p->trunk || !p->layer || !p->head || !p->bias)
		return hb_error_set(err, HB_ERR_NOMEM, "predictor", "out of memory");
	return HB_OK;
}

void hb_predictor_release(struct hb_predictor *p)
{
	free(p->trunk);
	free(p->layer);
	free(p->head);
	free(p->bias);
	free(p->train_threads);
	free(p->training);
	memset(p, 0, sizeof(*p));
}

int hb_predictor_save(const char *path, const struct hb_predictor *p, struct hb_error *err)
{
	struct hb_st_meta meta[HB_IDENT_META + 5];
	char buf[512], num[3][16];
	uint64_t none = 0;
	struct hb_st_out t[5] = {
		{"trunk", HB_DTYPE_F32, 2, {p->rank, p->width}, p->trunk},
		{"layer_embedding", HB_DTYPE_F32, 2, {p->layers, p->rank}, p->layer},
		{"expert_embedding", HB_DTYPE_F32, 2, {p->experts, p->rank}, p->head},
		{"expert_bias", HB_DTYPE_F32, 1, {p->experts}, p->bias},
		{"train_threads", HB_DTYPE_U64, 1, {p->n_train_threads},
		 p->n_train_threads ? (const void *)p->train_threads : (const void *)&none},
	};

	hb_ident_meta(&p->id, meta, buf);
	meta[10].value = HB_PREDICTOR_FORMAT; /* "format": the checkpoint's, not the features' */
	snprintf(num[0], sizeof(num[0]), "%" PRIu32, p->experts);
	snprintf(num[1], sizeof(num[1]), "%" PRIu32, p->top_k);
	snprintf(num[2], sizeof(num[2]), "%" PRIu32, p->rank);
	meta[11] = (struct hb_st_meta){"experts", num[0]};
	meta[12] = (struct hb_st_meta){"top_k", num[1]};
	meta[13] = (struct hb_st_meta){"rank", num[2]};
	meta[14] = (struct hb_st_meta){"training", p->training ? p->training : "{}"};
	meta[15] = (struct hb_st_meta){"score", "expert_embedding[e] . (trunk @ x + layer_embedding[l]) + expert_bias[e]"};
	return hb_st_write_file(path, t, 5, meta, HB_IDENT_META + 5, true, NULL, NULL, err);
}

static int meta_u32(const struct hb_st_file *f, const char *key, uint32_t max, uint32_t *out, struct hb_error *err)
{
	const char *v = hb_st_metadata_get(f, key);
	char *end;
	unsigned long long x;
	if (!v || !*v || *v == '-' || (errno = 0, x = strtoull(v, &end, 10), *end) || errno || !x || x > max)
		return hb_error_diag(err, DIAG(PREDICTOR_FORMAT), HB_ERR_FORMAT, key, false, 0,
				     "%s: metadata '%s' is not an integer in 1..%" PRIu32, f->path, key, max);
	*out = (uint32_t)x;
	return HB_OK;
}

int hb_predictor_load(const char *path, struct hb_predictor *p, struct hb_error *err)
{
	struct hb_st_file f;
	const char *fmt, *tr;
	const struct hb_st_tensor *th;
	int rc;

	memset(p, 0, sizeof(*p));
	memset(&f, 0, sizeof(f));
	f.fd = -1;
	if ((rc = hb_st_open(&f, path, err)))
		return rc;
	fmt = hb_st_metadata_get(&f, "format");
	if (!fmt || strcmp(fmt, HB_PREDICTOR_FORMAT)) {
		rc = hb_error_diag(err, DIAG(PREDICTOR_FORMAT), HB_ERR_UNSUPPORTED, "format", false, 0,
				   "%s: format is '%s', not " HB_PREDICTOR_FORMAT, path, fmt ? fmt : "(none)");
		goto out;
	}
	if ((rc = hb_ident_from_meta(&f, &p->id, DIAG(PREDICTOR_FORMAT), err)) ||
	    (rc = meta_u32(&f, "experts", 1u << 16, &p->experts, err)) ||
	    (rc = meta_u32(&f, "top_k", 64, &p->top_k, err)) || (rc = meta_u32(&f, "rank", 4096, &p->rank, err)))
		goto out;
	p->width = p->id.width;
	p->layers = p->id.layers;
	tr = hb_st_metadata_get(&f, "training");
	p->training = strdup(tr ? tr : "{}");
	th = hb_st_find(&f, "train_threads");
	if (!p->training)
		goto nomem;
	{
		/* the shapes before the allocation: the geometry the metadata
		 * claims is allocated only once the file holds it */
		uint64_t s_trunk[2] = {p->rank, p->width}, s_layer[2] = {p->layers, p->rank};
		uint64_t s_head[2] = {p->experts, p->rank}, s_bias[1] = {p->experts};
		const char *d = DIAG(PREDICTOR_FORMAT);
		if ((rc = hb_st_expect(&f, "trunk", HB_DTYPE_F32, 2, s_trunk, d, err)) ||
		    (rc = hb_st_expect(&f, "layer_embedding", HB_DTYPE_F32, 2, s_layer, d, err)) ||
		    (rc = hb_st_expect(&f, "expert_embedding", HB_DTYPE_F32, 2, s_head, d, err)) ||
		    (rc = hb_st_expect(&f, "expert_bias", HB_DTYPE_F32, 1, s_bias, d, err)))
			goto out;
	}
	if ((rc = hb_predictor_alloc(p, err)))
		goto nomem;
	if (!th || th->ndim != 1) {
		rc = hb_error_diag(err, DIAG(PREDICTOR_FORMAT), HB_ERR_FORMAT, "train_threads", false, 0,
				   "%s: no train_threads tensor", path);
		goto out;
	}
	p->n_train_threads = (size_t)th->shape[0];
	p->train_threads = malloc((p->n_train_threads ? p->n_train_threads : 1) * sizeof(uint64_t));
	if (!p->train_threads)
		goto nomem;
	{
		uint64_t s_trunk[2] = {p->rank, p->width}, s_layer[2] = {p->layers, p->rank};
		uint64_t s_head[2] = {p->experts, p->rank}, s_bias[1] = {p->experts}, s_th[1] = {p->n_train_threads};
		const char *d = DIAG(PREDICTOR_FORMAT);
		if ((rc = hb_st_take(&f, "trunk", HB_DTYPE_F32, 2, s_trunk, p->trunk, d, err)) ||
		    (rc = hb_st_take(&f, "layer_embedding", HB_DTYPE_F32, 2, s_layer, p->layer, d, err)) ||
		    (rc = hb_st_take(&f, "expert_embedding", HB_DTYPE_F32, 2, s_head, p->head, d, err)) ||
		    (rc = hb_st_take(&f, "expert_bias", HB_DTYPE_F32, 1, s_bias, p->bias, d, err)) ||
		    (rc = hb_st_take(&f, "train_threads", HB_DTYPE_U64, 1, s_th, p->train_threads, d, err)))
			goto out;
	}
	for (size_t i = 1; i < p->n_train_threads; i++)
		if (p->train_threads[i] <= p->train_threads[i - 1]) {
			rc = hb_error_diag(err, DIAG(PREDICTOR_FORMAT), HB_ERR_FORMAT, "train_threads", false, 0,
					   "%s: train_threads is not sorted and unique", path);
			goto out;
		}
	goto out;
nomem:
	if (!rc)
		rc = hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
out:
	hb_st_close(&f);
	if (rc)
		hb_predictor_release(p);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int hb_predictor_check(const struct hb_predictor *p, const struct hb_feature_set *s, const char *what,
		       struct hb_error *err)
{
	const struct hb_feature_ident *a = &p->id, *b = &s->id;
	char hx[2][65];

	if (memcmp(a->artifact, b->artifact, 32)) {
		hb_hex_encode(a->artifact, 32, hx[0]);
		hb_hex_encode(b->artifact, 32, hx[1]);
		return hb_error_diag(err, DIAG(PREDICTOR_ARTIFACT), HB_ERR_CONTRACT, "artifact", false, 0,
				     "%s: artifact %.16s..., the predictor's is %.16s...", what, hx[1], hx[0]);
	}
	if (memcmp(a->text, b->text, 32))
		return hb_error_diag(err, DIAG(PREDICTOR_TEXT), HB_ERR_CONTRACT, "text", false, 0,
				     "%s: another tokenizer/template digest than the predictor's", what);
	if (memcmp(a->projection, b->projection, 32) || a->projection_seed != b->projection_seed ||
	    a->width != b->width || a->source_width != b->source_width || strcmp(a->tap, b->tap))
		return hb_error_diag(err, DIAG(PREDICTOR_PROJECTION), HB_ERR_CONTRACT, "projection", false, 0,
				     "%s: projection seed %" PRIu64 " (or its digest, widths or tap) differs from the "
				     "predictor's seed %" PRIu64, what, b->projection_seed, a->projection_seed);
	if (memcmp(a->split_id, b->split_id, 32))
		return hb_error_diag(err, DIAG(PREDICTOR_SPLIT), HB_ERR_CONTRACT, "split_id", false, 0,
				     "%s: cut by another split than the predictor's train split", what);
	if (!strcmp(b->split, a->split))
		return hb_error_diag(err, DIAG(PREDICTOR_SPLIT), HB_ERR_CONTRACT, "split", false, 0,
				     "%s: the '%s' split is the one the predictor was trained on", what, b->split);
	if (a->layers != b->layers)
		return hb_error_diag(err, DIAG(PREDICTOR_GEOMETRY), HB_ERR_CONTRACT, "layers", false, 0,
				     "%s: %" PRIu32 " layers, the predictor's %" PRIu32, what, b->layers, a->layers);
	for (uint64_t i = 0; i < s->n; i++)
		if (bsearch(&s->thread[i], p->train_threads, p->n_train_threads, sizeof(uint64_t), cmp_u64))
			return hb_error_diag(err, DIAG(PREDICTOR_LEAK), HB_ERR_CONTRACT, "thread", false, 0,
					     "%s: row %" PRIu64 " is of thread %" PRIu64 ", which the predictor trained on",
					     what, i, s->thread[i]);
	return HB_OK;
}

void hb_predict_top(const float *v, uint32_t E, uint32_t n, uint32_t *idx)
{
	uint32_t m = 0;
	for (uint32_t e = 0; e < E && n; e++) {
		uint32_t at;
		if (m < n)
			at = m++;
		else if (v[e] > v[idx[n - 1]])
			at = n - 1;
		else
			continue;
		while (at > 0 && v[idx[at - 1]] < v[e]) {
			idx[at] = idx[at - 1];
			at--;
		}
		idx[at] = e;
	}
}

void hb_predictor_scores(const struct hb_predictor *p, const float *x, uint32_t layer, float *z, float *scores)
{
	const float *le = p->layer + (size_t)layer * p->rank;
	for (uint32_t r = 0; r < p->rank; r++) {
		const float *u = p->trunk + (size_t)r * p->width;
		float a = le[r];
		for (uint32_t j = 0; j < p->width; j++)
			a += u[j] * x[j];
		z[r] = a;
	}
	for (uint32_t e = 0; e < p->experts; e++) {
		const float *v = p->head + (size_t)e * p->rank;
		float a = p->bias[e];
		for (uint32_t r = 0; r < p->rank; r++)
			a += v[r] * z[r];
		scores[e] = a;
	}
}
