/*
 * hb_replay_train.c: hb-replay train and predict (hb_replay_train.h).
 *
 * The loss is AFN-021's, per label row r at layer l:
 *   L(r) = w_accept(r) w_deadline(l) L_rank + fp_cost L_fp
 * with p = softmax(scores), L_rank = -sum_j a_j log p(y_j) / sum_j a_j over
 * the native top-k y (a_j = rank_decay^j: the native rank kept where it is
 * wanted), and L_fp = 1 - sum_j p(y_j), the probability mass, and so the
 * expected share of prefetched bytes, spent on experts the router does not
 * pick.  k p_e is then the predictor's estimate that e is in the top-k, the
 * confidence it reports.  Adam, a seeded shuffle per epoch, early stopping
 * on the validation loss with the best epoch's weights kept.
 */
#include "hb_replay_train.h"
#include "hb_replay_int.h"
#include "model/hb_ple_hash.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

void hb_train_defaults(struct hb_train_config *c)
{
	memset(c, 0, sizeof(*c));
	c->rank = 16;
	c->epochs = 40;
	c->patience = 4;
	c->batch = 256;
	c->lr = 0.01;
	c->rank_decay = 1;
	c->accept_weight = 0.25;
}

/* ------------------------------------------------------------ labels joined to features */

struct lab {
	uint64_t seq, pos;
	uint32_t layer;
	bool rejected;                     /* lineage: a candidate past the accepted prefix */
	uint32_t ids[HB_TRACE_MAX_TOPK];
};

struct labs {
	struct lab *v;
	size_t n, cap;
	struct hb_trace_header h;
	bool have_h;
	int rc;
	struct hb_error *err;
	const char *what;
};

static int take_lab(void *ctx, const struct hb_trace_header *h, const struct hb_route *r)
{
	struct labs *L = ctx;
	if (!L->have_h) {
		L->h = *h;
		L->have_h = true;
	} else if (h->top_k != L->h.top_k || h->layers != L->h.layers || h->experts != L->h.experts ||
		   memcmp(h->artifact, L->h.artifact, 32) || memcmp(h->text, L->h.text, 32)) {
		L->rc = hb_error_diag(L->err, hb_replay_diag_id(HB_RPD_GEOMETRY), HB_ERR_CONTRACT, L->what, false, 0,
				      "label shards disagree on geometry or identity");
		return 1;
	}
	if (L->n == L->cap) {
		size_t cap = L->cap ? 2 * L->cap : 4096;
		struct lab *g = realloc(L->v, cap * sizeof(*g));
		if (!g) {
			L->rc = hb_error_set(L->err, HB_ERR_NOMEM, L->what, "out of memory");
			return 1;
		}
		L->v = g, L->cap = cap;
	}
	L->v[L->n].seq = r->sequence;
	L->v[L->n].pos = r->ordinal;
	L->v[L->n].layer = r->layer;
	L->v[L->n].rejected = r->lineage && r->candidate >= r->accepted;
	memcpy(L->v[L->n].ids, r->ids, h->top_k * sizeof(uint32_t));
	L->n++;
	return 0;
}

static int cmp_lab(const void *a, const void *b)
{
	const struct lab *x = a, *y = b;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	if (x->pos != y->pos)
		return x->pos < y->pos ? -1 : 1;
	return x->layer < y->layer ? -1 : x->layer > y->layer;
}

static int load_labs(const char *path, struct labs *L, struct hb_error *err)
{
	int rc;
	memset(L, 0, sizeof(*L));
	L->err = err;
	L->what = path;
	rc = hb_replay_read_shards(path, take_lab, L, &L->rc, err);
	if (!rc)
		qsort(L->v, L->n, sizeof(*L->v), cmp_lab);
	return rc;
}

struct example {
	const float *x;                    /* width floats */
	const uint32_t *ids;               /* top_k */
	uint32_t layer;
	float w;                           /* w_accept x w_deadline */
};

struct data {
	struct hb_feature_set f;
	struct labs L;
	struct example *ex;
	size_t n;
};

static void data_release(struct data *d)
{
	hb_feature_set_release(&d->f);
	free(d->L.v);
	free(d->ex);
}

static int data_load(const char *labels, const char *features, const struct hb_train_config *c, struct data *d,
		     struct hb_error *err)
{
	size_t W;
	int rc;
	memset(d, 0, sizeof(*d));
	if ((rc = hb_feature_dir_load(features, &d->f, err)) || (rc = load_labs(labels, &d->L, err)))
		return rc;
	if (memcmp(d->L.h.artifact, d->f.id.artifact, 32) || memcmp(d->L.h.text, d->f.id.text, 32))
		return hb_error_diag(err, hb_replay_diag_id(HB_RPD_IDENTITY), HB_ERR_CONTRACT, features, false, 0,
				     "the features' artifact or tokenizer digest is not their labels'");
	if (d->L.h.layers != d->f.id.layers)
		return hb_error_diag(err, hb_replay_diag_id(HB_RPD_GEOMETRY), HB_ERR_CONTRACT, features, false, 0,
				     "features of %" PRIu32 " layers, labels of %" PRIu32, d->f.id.layers, d->L.h.layers);
	if (c && c->deadline && c->n_deadline != d->f.id.layers)
		return hb_error_set(err, HB_ERR_INVALID, "deadline-weight", "%zu weights for %" PRIu32 " layers",
				    c->n_deadline, d->f.id.layers);
	W = d->f.id.width;
	d->ex = malloc((d->f.n * d->f.id.layers + 1) * sizeof(*d->ex));
	if (!d->ex)
		return hb_error_set(err, HB_ERR_NOMEM, features, "out of memory");
	for (uint64_t i = 0; i < d->f.n; i++)
		for (uint32_t l = 0; l < d->f.id.layers; l++) {
			struct lab key = {.seq = d->f.sequence[i], .pos = d->f.position[i], .layer = l};
			const struct lab *q = bsearch(&key, d->L.v, d->L.n, sizeof(*d->L.v), cmp_lab);
			struct example *e;
			if (!q)
				continue;
			e = &d->ex[d->n++];
			e->x = d->f.x + ((size_t)i * d->f.id.layers + l) * W;
			e->ids = q->ids;
			e->layer = l;
			e->w = (float)((q->rejected && c ? c->accept_weight : 1) * (c && c->deadline ? c->deadline[l] : 1));
		}
	if (!d->n)
		return hb_error_diag(err, hb_replay_diag_id(HB_RPD_MISSING), HB_ERR_CONTRACT, features, false, 0,
				     "no feature row has a label");
	return HB_OK;
}

/* ------------------------------------------------------------ model and gradient */

#define JOBS 8u                            /* fixed: the result never depends on the thread count */

struct model {
	struct hb_predictor p;
	size_t n;                          /* parameters */
	float *w;                          /* all parameters, one array: trunk, layer, head, bias */
};

struct grad_ctx {
	const struct model *m;
	const struct hb_train_config *c;
	const struct example *const *batch;
	size_t n;
	double *g;                         /* [JOBS][n params] */
	double *loss;                      /* [JOBS] */
	float *scratch;                    /* [JOBS][rank + 2 experts] */
	uint32_t top_k;
	bool want_grad;
};

static void bind(struct model *m)
{
	struct hb_predictor *p = &m->p;
	p->trunk = m->w;
	p->layer = p->trunk + (size_t)p->rank * p->width;
	p->head = p->layer + (size_t)p->layers * p->rank;
	p->bias = p->head + (size_t)p->experts * p->rank;
}

/* loss of one example; with g, its gradient added */
static double one(const struct model *m, const struct hb_train_config *c, const struct example *e, uint32_t k,
		  float *z, float *s, float *q, double *g)
{
	const struct hb_predictor *p = &m->p;
	uint32_t E = p->experts, R = p->rank;
	double mx = -INFINITY, sum = 0, asum = 0, pt = 0, loss = 0;

	hb_predictor_scores(p, e->x, e->layer, z, s);
	for (uint32_t i = 0; i < E; i++)
		mx = s[i] > mx ? s[i] : mx;
	for (uint32_t i = 0; i < E; i++)
		sum += exp(s[i] - mx);
	memset(q, 0, E * sizeof(float));
	for (uint32_t j = 0; j < k; j++) {
		double aj = pow(c->rank_decay, j);
		if (e->ids[j] >= E)
			continue;
		q[e->ids[j]] += (float)aj;
		asum += aj;
	}
	for (uint32_t i = 0; i < E; i++)
		if (q[i] > 0) {
			double lp = s[i] - mx - log(sum);
			loss -= e->w * q[i] / asum * lp;
			pt += exp(lp);
		}
	loss += c->fp_cost * (1 - pt);
	if (!g)
		return loss;
	{
		double *gt = g, *gl = gt + (size_t)R * p->width, *gh = gl + (size_t)p->layers * R, *gb = gh + (size_t)E * R;
		double dz[HB_TRAIN_RANK_MAX];
		for (uint32_t r = 0; r < R; r++)
			dz[r] = 0;
		for (uint32_t i = 0; i < E; i++) {
			double pi = exp(s[i] - mx) / sum, inT = q[i] > 0;
			double gi = e->w * (pi - q[i] / asum) - c->fp_cost * pi * (inT - pt);
			const float *v = p->head + (size_t)i * R;
			gb[i] += gi;
			for (uint32_t r = 0; r < R; r++) {
				gh[(size_t)i * R + r] += gi * z[r];
				dz[r] += gi * v[r];
			}
		}
		for (uint32_t r = 0; r < R; r++) {
			gl[(size_t)e->layer * R + r] += dz[r];
			for (uint32_t j = 0; j < p->width; j++)
				gt[(size_t)r * p->width + j] += dz[r] * e->x[j];
		}
	}
	return loss;
}

static int grad_job(void *ctx, size_t job, unsigned worker)
{
	struct grad_ctx *G = ctx;
	const struct hb_predictor *p = &G->m->p;
	size_t per = (G->n + JOBS - 1) / JOBS, lo = job * per, hi = lo + per < G->n ? lo + per : G->n;
	float *z = G->scratch + job * (p->rank + 2 * (size_t)p->experts), *s = z + p->rank, *q = s + p->experts;
	double *g = G->want_grad ? G->g + job * G->m->n : NULL, l = 0;
	(void)worker;
	if (g)
		memset(g, 0, G->m->n * sizeof(double));
	for (size_t i = lo; i < hi; i++)
		l += one(G->m, G->c, G->batch[i], G->top_k, z, s, q, g);
	G->loss[job] = l;
	return 0;
}

static double run_batch(struct hb_pool *pool, struct grad_ctx *G)
{
	double l = 0;
	hb_pool_run(pool, JOBS, grad_job, G);
	for (unsigned j = 0; j < JOBS; j++)
		l += G->loss[j];
	return l;
}

static double uniform(uint64_t *s)
{
	*s = hb_splitmix64(*s);
	return (double)(*s >> 11) * 0x1.0p-53;
}

/* mean validation loss and recall@top_k of the model on d */
static void validate(struct hb_pool *pool, struct grad_ctx *G, const struct data *d, const struct example **bp,
		     double *loss, double *recall)
{
	const struct hb_predictor *p = &G->m->p;
	double l = 0, hits = 0;
	float *z = malloc((p->rank + 2 * (size_t)p->experts) * sizeof(float)), *s = z ? z + p->rank : NULL;
	G->want_grad = false;
	for (size_t i = 0; i < d->n; i += 4096) {
		size_t n = d->n - i < 4096 ? d->n - i : 4096;
		for (size_t j = 0; j < n; j++)
			bp[j] = &d->ex[i + j];
		G->batch = bp, G->n = n;
		l += run_batch(pool, G);
	}
	for (size_t i = 0; z && i < d->n; i++) {
		const struct example *e = &d->ex[i];
		hb_predictor_scores(p, e->x, e->layer, z, s);
		for (uint32_t j = 0; j < G->top_k; j++) {
			uint32_t t = e->ids[j], above = 0;
			if (t >= p->experts)
				continue;
			for (uint32_t x = 0; x < p->experts; x++)
				above += s[x] > s[t] || (s[x] == s[t] && x < t);
			hits += above < G->top_k;
		}
	}
	free(z);
	*loss = l / (double)d->n;
	*recall = hits / ((double)d->n * G->top_k);
}

/* ------------------------------------------------------------ train */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int train_threads(struct hb_predictor *p, const struct hb_feature_set *f, struct hb_error *err)
{
	size_t n = 0;
	p->train_threads = malloc((f->n ? f->n : 1) * sizeof(uint64_t));
	if (!p->train_threads)
		return hb_error_set(err, HB_ERR_NOMEM, "train", "out of memory");
	memcpy(p->train_threads, f->thread, f->n * sizeof(uint64_t));
	qsort(p->train_threads, f->n, sizeof(uint64_t), cmp_u64);
	for (size_t i = 0; i < f->n; i++)
		if (!n || p->train_threads[n - 1] != p->train_threads[i])
			p->train_threads[n++] = p->train_threads[i];
	p->n_train_threads = n;
	return HB_OK;
}

static void adam(struct model *m, const double *g, double *mo, double *ve, uint64_t t, double lr, double scale)
{
	double b1 = 0.9, b2 = 0.999, c1 = 1 - pow(b1, (double)t), c2 = 1 - pow(b2, (double)t);
	for (size_t i = 0; i < m->n; i++) {
		double gi = 0;
		for (unsigned j = 0; j < JOBS; j++)
			gi += g[j * m->n + i];
		gi *= scale;
		mo[i] = b1 * mo[i] + (1 - b1) * gi;
		ve[i] = b2 * ve[i] + (1 - b2) * gi * gi;
		m->w[i] -= (float)(lr * (mo[i] / c1) / (sqrt(ve[i] / c2) + 1e-8));
	}
}

static cJSON *train_record(const struct hb_train_config *c, uint32_t epochs_run, uint32_t best_epoch, double best,
			   double best_recall, cJSON *curve)
{
	cJSON *o = cJSON_CreateObject(), *d;
	hb_json_add_u64(o, "seed", c->seed);
	hb_json_add_u64(o, "rank", c->rank);
	hb_json_add_u64(o, "batch", c->batch);
	hb_json_add_u64(o, "max_epochs", c->epochs);
	hb_json_add_u64(o, "patience", c->patience);
	cJSON_AddNumberToObject(o, "lr", c->lr);
	cJSON_AddNumberToObject(o, "fp_cost", c->fp_cost);
	cJSON_AddNumberToObject(o, "rank_decay", c->rank_decay);
	cJSON_AddNumberToObject(o, "accept_weight", c->accept_weight);
	d = cJSON_AddArrayToObject(o, "deadline_weight");
	for (size_t i = 0; c->deadline && i < c->n_deadline; i++)
		cJSON_AddItemToArray(d, cJSON_CreateNumber(c->deadline[i]));
	hb_json_add_u64(o, "jobs_per_batch", JOBS);
	hb_json_add_u64(o, "epochs_run", epochs_run);
	hb_json_add_u64(o, "best_epoch", best_epoch);
	cJSON_AddNumberToObject(o, "best_validation_loss", best);
	cJSON_AddNumberToObject(o, "best_validation_recall", best_recall);
	if (curve)
		cJSON_AddItemToObject(o, "curve", curve);
	return o;
}

int hb_train_run(const char *train_labels, const char *train_features, const char *val_labels,
		 const char *val_features, const struct hb_train_config *c, const char *out, char **json,
		 struct hb_error *err)
{
	struct data T, V;
	struct model m = {0};
	struct hb_pool *pool = NULL;
	struct grad_ctx G = {0};
	const struct example **order = NULL, **bp = NULL;
	double *g = NULL, *mo = NULL, *ve = NULL, best = INFINITY, best_recall = 0;
	float *best_w = NULL;
	uint32_t best_epoch = 0, epoch = 0, since = 0;
	uint64_t step = 0, s;
	cJSON *curve = cJSON_CreateArray(), *rec = NULL;
	size_t n_scratch;
	int rc;

	*json = NULL;
	memset(&V, 0, sizeof(V));
	if ((rc = data_load(train_labels, train_features, c, &T, err)) ||
	    (rc = data_load(val_labels, val_features, c, &V, err)))
		goto out;
	if ((rc = hb_feature_check_same_origin(&T.f.id, &V.f.id, val_features, err)) ||
	    (rc = hb_feature_check_disjoint(&T.f, &V.f, err)))
		goto out;
	if (!strcmp(T.f.id.split, V.f.id.split)) {
		rc = hb_error_diag(err, hb_predict_diag_id(HB_PDD_FEATURE_LEAK), HB_ERR_CONTRACT, "split", false, 0,
				   "train and validation features are both the '%s' split", T.f.id.split);
		goto out;
	}
	if (c->rank < 1 || c->rank > HB_TRAIN_RANK_MAX || !c->batch || !c->epochs) {
		rc = hb_error_set(err, HB_ERR_INVALID, "train", "rank 1..%u, a batch and an epoch are needed",
				  HB_TRAIN_RANK_MAX);
		goto out;
	}
	m.p.width = T.f.id.width, m.p.rank = c->rank, m.p.layers = T.f.id.layers;
	m.p.experts = T.L.h.experts, m.p.top_k = T.L.h.top_k, m.p.id = T.f.id;
	m.n = (size_t)m.p.rank * m.p.width + (size_t)m.p.layers * m.p.rank + (size_t)m.p.experts * m.p.rank +
	      m.p.experts;
	m.w = calloc(m.n, sizeof(float));
	best_w = malloc(m.n * sizeof(float));
	g = malloc(JOBS * m.n * sizeof(double));
	mo = calloc(m.n, sizeof(double));
	ve = calloc(m.n, sizeof(double));
	n_scratch = JOBS * (m.p.rank + 2 * (size_t)m.p.experts);
	G.scratch = malloc(n_scratch * sizeof(float));
	G.loss = calloc(JOBS, sizeof(double));
	order = malloc(T.n * sizeof(*order));
	bp = malloc((V.n > 4096 ? 4096 : V.n) * sizeof(*bp) + sizeof(*bp));
	if (!m.w || !best_w || !g || !mo || !ve || !G.scratch || !G.loss || !order || !bp || !curve) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "train", "out of memory");
		goto out;
	}
	bind(&m);
	s = hb_splitmix64(c->seed ^ UINT64_C(0x7072656469637421));
	for (size_t i = 0; i < (size_t)m.p.rank * m.p.width; i++)
		m.p.trunk[i] = (float)((2 * uniform(&s) - 1) / sqrt((double)m.p.width));
	for (size_t i = 0; i < (size_t)m.p.experts * m.p.rank; i++)
		m.p.head[i] = (float)((2 * uniform(&s) - 1) / sqrt((double)m.p.rank));
	if ((rc = hb_pool_create(c->threads, &pool, err)))
		goto out;
	G.m = &m, G.c = c, G.g = g, G.top_k = m.p.top_k;
	for (size_t i = 0; i < T.n; i++)
		order[i] = &T.ex[i];
	memcpy(best_w, m.w, m.n * sizeof(float));
	for (epoch = 1; epoch <= c->epochs; epoch++) {
		uint64_t es = hb_splitmix64(c->seed ^ hb_splitmix64(epoch));
		double tl = 0, vl, vr;
		cJSON *pt = cJSON_CreateObject();
		for (size_t i = T.n - 1; i > 0; i--) { /* Fisher-Yates, seeded per epoch */
			size_t j = (size_t)(uniform(&es) * (double)(i + 1));
			const struct example *t = order[i];
			order[i] = order[j > i ? i : j];
			order[j > i ? i : j] = t;
		}
		for (size_t i = 0; i < T.n; i += c->batch) {
			size_t n = T.n - i < c->batch ? T.n - i : c->batch;
			G.batch = order + i, G.n = n, G.want_grad = true;
			tl += run_batch(pool, &G);
			adam(&m, g, mo, ve, ++step, c->lr, 1.0 / (double)n);
		}
		validate(pool, &G, &V, bp, &vl, &vr);
		hb_json_add_u64(pt, "epoch", epoch);
		cJSON_AddNumberToObject(pt, "train_loss", tl / (double)T.n);
		cJSON_AddNumberToObject(pt, "validation_loss", vl);
		cJSON_AddNumberToObject(pt, "validation_recall", vr);
		cJSON_AddItemToArray(curve, pt);
		if (vl < best) {
			best = vl, best_recall = vr, best_epoch = epoch, since = 0;
			memcpy(best_w, m.w, m.n * sizeof(float));
		} else if (++since >= c->patience) {
			break;
		}
	}
	if (epoch > c->epochs)
		epoch = c->epochs;
	memcpy(m.w, best_w, m.n * sizeof(float));
	rec = train_record(c, epoch, best_epoch, best, best_recall, NULL);
	m.p.training = cJSON_PrintUnformatted(rec);
	if (!m.p.training || (rc = train_threads(&m.p, &T.f, err)))
		goto nomem;
	if ((rc = hb_predictor_save(out, &m.p, err)))
		goto out;
	cJSON_AddItemToObject(rec, "curve", curve);
	curve = NULL;
	hb_json_add_u64(rec, "train_examples", T.n);
	hb_json_add_u64(rec, "validation_examples", V.n);
	hb_json_add_u64(rec, "train_threads", m.p.n_train_threads);
	{
		size_t len;
		rc = hb_json_render(rec, true, json, &len, err);
	}
	goto out;
nomem:
	if (!rc)
		rc = hb_error_set(err, HB_ERR_NOMEM, "train", "out of memory");
out:
	cJSON_Delete(curve);
	cJSON_Delete(rec);
	hb_pool_destroy(pool);
	free(m.w);
	free(m.p.train_threads);
	free(m.p.training);
	free(best_w);
	free(g);
	free(mo);
	free(ve);
	free(G.scratch);
	free(G.loss);
	free(order);
	free(bp);
	data_release(&T);
	data_release(&V);
	return rc;
}

/* ------------------------------------------------------------ predict */

int hb_predict_run(const char *checkpoint, const char *features, const char *outdir, char **json,
		   struct hb_error *err)
{
	struct hb_predictor p;
	struct hb_feature_set f;
	struct hb_trace_header h;
	struct hb_trace_writer *w = NULL;
	float *z = NULL, *s = NULL;
	uint32_t C;
	uint64_t records = 0;
	char path[4096], tmp[4096] = "";
	int rc, fd = -1;

	*json = NULL;
	memset(&f, 0, sizeof(f));
	if ((rc = hb_predictor_load(checkpoint, &p, err)))
		return rc;
	if ((rc = hb_feature_dir_load(features, &f, err)) || (rc = hb_predictor_check(&p, &f, features, err)))
		goto out;
	C = p.experts < HB_TRACE_MAX_TOPK ? p.experts : HB_TRACE_MAX_TOPK;
	z = malloc(p.rank * sizeof(float));
	s = malloc(p.experts * sizeof(float));
	if (!z || !s) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "predict", "out of memory");
		goto out;
	}
	if (mkdir(outdir, 0777) && errno != EEXIST) {
		rc = hb_error_sys(err, errno, outdir, "cannot create the output directory");
		goto out;
	}
	memset(&h, 0, sizeof(h));
	h.top_k = C, h.layers = p.layers, h.experts = p.experts;
	memcpy(h.artifact, f.id.artifact, 32);
	memcpy(h.text, f.id.text, 32);
	snprintf(path, sizeof(path), "%s/predictions.hbtrace", outdir);
	snprintf(tmp, sizeof(tmp), "%s/.predictions.hbtrace.tmp", outdir);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0) {
		rc = hb_error_sys(err, errno, path, "cannot create");
		goto out;
	}
	if ((rc = hb_trace_writer_open(&w, fd, path, &h, 4096, err)))
		goto out;
	for (uint64_t i = 0; i < f.n && !rc; i++)
		for (uint32_t l = 0; l < p.layers && !rc; l++) {
			struct hb_route r;
			double mx = -INFINITY, sum = 0;
			memset(&r, 0, sizeof(r));
			hb_predictor_scores(&p, f.x + ((size_t)i * p.layers + l) * p.width, l, z, s);
			hb_predict_top(s, p.experts, C, r.ids);
			for (uint32_t e = 0; e < p.experts; e++)
				mx = s[e] > mx ? s[e] : mx;
			for (uint32_t e = 0; e < p.experts; e++)
				sum += exp(s[e] - mx);
			for (uint32_t j = 0; j < C; j++) {
				double c = p.top_k * exp(s[r.ids[j]] - mx) / sum;
				r.weights[j] = (float)(c < 1 ? c : 1);
			}
			r.sequence = f.sequence[i], r.ordinal = f.position[i], r.layer = l;
			rc = hb_trace_write(w, &r, err);
			records++;
		}
	if (!rc) {
		rc = hb_trace_writer_close(w, err);
		w = NULL;
	}
	if (!rc && (fsync(fd) || close(fd))) {
		rc = hb_error_sys(err, errno, tmp, "cannot write");
		close(fd);
	}
	fd = -1;
	if (!rc && rename(tmp, path))
		rc = hb_error_sys(err, errno, path, "cannot publish");
	if (!rc) {
		cJSON *o = cJSON_CreateObject();
		size_t len;
		hb_json_add_str(o, "predictions", path);
		hb_json_add_u64(o, "rows", f.n);
		hb_json_add_u64(o, "records", records);
		hb_json_add_u64(o, "candidates", C);
		rc = hb_json_render(o, false, json, &len, err);
		cJSON_Delete(o);
	}
out:
	if (w)
		hb_trace_writer_close(w, NULL);
	if (fd >= 0)
		close(fd);
	if (rc && tmp[0])
		unlink(tmp);
	free(z);
	free(s);
	hb_feature_set_release(&f);
	hb_predictor_release(&p);
	return rc;
}
