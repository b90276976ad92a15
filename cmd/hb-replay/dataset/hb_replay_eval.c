/*
 * hb_replay_eval.c: AFN-021 Gate 3, offline predictor value at equal
 * candidate budgets.
 *
 * Owns the history baselines (random, train-split frequency, per-sequence
 * LRU, previous token same layer, adjacent layer), the reading of external
 * prediction shards, and the metrics: recall@K, precision@K, exact top-k
 * set match, mean reciprocal rank of the first true expert, per layer and
 * overall, as JSON and as an SVG chart of recall against budget.  Every
 * predictor ranks all experts; a history that names fewer is padded with
 * the frequency order, so every budget is filled and budgets are equal.
 * It does not train anything and makes no claim about decode timing
 * (Gate 4): labels are the truth here, not decode captures.
 */
#include "model/hb_ple_hash.h"
#include "hb_replay_int.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_parse.h"

#include <math.h>
#include <unistd.h>

/* ------------------------------------------------------------ metrics */

enum { P_RANDOM, P_FREQUENCY, P_LRU, P_PREV_TOKEN, P_ADJ_LAYER, P_BUILTIN };
static const char *const builtin_names[P_BUILTIN] = {"random", "frequency", "lru", "previous-token",
						     "adjacent-layer"};

#define ECE_BINS 10
#define UNION_BLOCKS 4                 /* B = 1, 2, 4, 8 */

struct acc {
	double *hits;     /* [layer][budget] */
	double *exact, *rr, *count; /* [layer] */
	/* calibration of the first budgets[nb-1] candidates, when the predictor
	 * has confidences: per bin the candidates, their confidence, their hits */
	bool has_conf;
	uint32_t count_layers;
	double ece_n[ECE_BINS], ece_c[ECE_BINS], ece_h[ECE_BINS];
	/* route union: distinct experts among the first top-k candidates of a
	 * block of B consecutive positions, per layer; stamp[u][layer][e] */
	uint64_t *stamp;
	double unions[UNION_BLOCKS];
	/* Gate 4, decode steps with deadlines: recall and timely recall */
	double *dhits, *thits, *dcount; /* [layer][budget], [layer] */
};

/* A decode step's timing: candidate i (0-based, best first) of a predictor
 * whose candidates exist at `avail` is read at the engine's predicted
 * depth D and measured latency R, so ready at avail + ceil((i+1)/D) R;
 * timely when that is not after the router's need time. */
struct tstep {
	double need, R;
	uint32_t D;
};
#define AVAIL_ALWAYS (-1e300)

static void score_timely(struct acc *a, uint32_t layer, const uint32_t *rank, const uint32_t *truth, uint32_t k,
			 const uint64_t *budgets, size_t nb, uint32_t E, const struct tstep *ts, double avail,
			 uint8_t *is_true)
{
	size_t hit = 0, thit = 0, b = 0;

	memset(is_true, 0, E);
	for (uint32_t i = 0; i < k; i++)
		if (truth[i] < E)
			is_true[truth[i]] = 1;
	for (size_t i = 0; i < E; i++) {
		if (is_true[rank[i]]) {
			hit++;
			thit += avail + (double)((i + ts->D) / ts->D) * ts->R <= ts->need;
		}
		while (b < nb && budgets[b] == i + 1) {
			a->dhits[layer * nb + b] += (double)hit;
			a->thits[layer * nb + b++] += (double)thit;
		}
	}
	while (b < nb) {
		a->dhits[layer * nb + b] += (double)hit;
		a->thits[layer * nb + b++] += (double)thit;
	}
	a->dcount[layer] += 1;
}

static cJSON *decode_metrics(const struct acc *a, uint32_t L, const uint64_t *budgets, size_t nb, uint32_t k)
{
	cJSON *o = cJSON_CreateObject(), *kk = cJSON_AddObjectToObject(o, "budgets");
	double cnt = 0;
	for (uint32_t l = 0; l < L; l++)
		cnt += a->dcount[l];
	hb_json_add_u64(o, "records", (uint64_t)cnt);
	for (size_t b = 0; b < nb; b++) {
		char name[24];
		double h = 0, t = 0;
		cJSON *x;
		for (uint32_t l = 0; l < L; l++)
			h += a->dhits[l * nb + b], t += a->thits[l * nb + b];
		snprintf(name, sizeof(name), "%" PRIu64, budgets[b]);
		x = cJSON_AddObjectToObject(kk, name);
		cJSON_AddNumberToObject(x, "recall", cnt ? h / (cnt * k) : 0);
		cJSON_AddNumberToObject(x, "timely_recall", cnt ? t / (cnt * k) : 0);
	}
	return o;
}

/* where the current record lies: its block of each size, per layer */
struct where {
	uint64_t block[UNION_BLOCKS];
	size_t kmax;
};

/* the project's one splitmix64 (hb_ple_hash.h) */
#define mix hb_splitmix64

/* Complete a partial ranking (n named experts) with the frequency order. */
static size_t complete(uint32_t *rank, size_t n, const uint32_t *freq, uint32_t E, uint8_t *mark)
{
	memset(mark, 0, E);
	for (size_t i = 0; i < n; i++)
		mark[rank[i]] = 1;
	for (uint32_t i = 0; i < E && n < E; i++)
		if (!mark[freq[i]]) {
			mark[freq[i]] = 1;
			rank[n++] = freq[i];
		}
	return n;
}

static void score(struct acc *a, uint32_t layer, const uint32_t *rank, const float *conf, const struct where *wh,
		  const uint32_t *truth, uint32_t k, const uint64_t *budgets, size_t nb, uint32_t E, uint8_t *is_true)
{
	size_t hit = 0, b = 0, first = 0;
	memset(is_true, 0, E);
	for (uint32_t i = 0; i < k; i++)
		if (truth[i] < E)
			is_true[truth[i]] = 1;
	for (size_t i = 0; conf && i < wh->kmax && i < E; i++) {
		double c = conf[i] < 0 ? 0 : conf[i] > 1 ? 1 : conf[i];
		int bin = c >= 1 ? ECE_BINS - 1 : (int)(c * ECE_BINS);
		a->ece_n[bin] += 1;
		a->ece_c[bin] += c;
		a->ece_h[bin] += is_true[rank[i]];
	}
	for (int u = 0; u < UNION_BLOCKS; u++) {
		uint64_t *st = a->stamp + ((size_t)u * a->count_layers + layer) * E;
		for (uint32_t i = 0; i < k && i < E; i++)
			if (st[rank[i]] != wh->block[u]) {
				st[rank[i]] = wh->block[u];
				a->unions[u] += 1;
			}
	}
	for (size_t i = 0; i < E; i++) {
		if (is_true[rank[i]]) {
			hit++;
			if (!first)
				first = i + 1;
		}
		if (i + 1 == k)
			a->exact[layer] += hit == k;
		while (b < nb && budgets[b] == i + 1)
			a->hits[layer * nb + b++] += (double)hit;
	}
	while (b < nb)
		a->hits[layer * nb + b++] += (double)hit;
	a->rr[layer] += first ? 1.0 / (double)first : 0;
	a->count[layer] += 1;
}

static cJSON *metrics(const struct acc *a, const uint32_t *layers, size_t nl, const uint64_t *budgets, size_t nb,
		      uint32_t k)
{
	cJSON *o = cJSON_CreateObject(), *kk = cJSON_AddObjectToObject(o, "budgets");
	double cnt = 0, ex = 0, rr = 0;
	for (size_t l = 0; l < nl; l++) {
		cnt += a->count[layers[l]];
		ex += a->exact[layers[l]];
		rr += a->rr[layers[l]];
	}
	hb_json_add_u64(o, "records", (uint64_t)cnt);
	cJSON_AddNumberToObject(o, "exact_topk", cnt ? ex / cnt : 0);
	cJSON_AddNumberToObject(o, "mrr", cnt ? rr / cnt : 0);
	for (size_t b = 0; b < nb; b++) {
		char name[24];
		double h = 0;
		cJSON *x;
		for (size_t l = 0; l < nl; l++)
			h += a->hits[layers[l] * nb + b];
		snprintf(name, sizeof(name), "%" PRIu64, budgets[b]);
		x = cJSON_AddObjectToObject(kk, name);
		cJSON_AddNumberToObject(x, "recall", cnt ? h / (cnt * k) : 0);
		cJSON_AddNumberToObject(x, "precision", cnt ? h / (cnt * (double)budgets[b]) : 0);
	}
	return o;
}

/* calibration (ECE over equal-width bins, null without confidences) and
 * the mean route union per block size */
static void add_calibration(cJSON *x, const struct acc *a, const double *blocks)
{
	double n = 0, e = 0;
	cJSON *u = cJSON_AddObjectToObject(x, "route_union");
	for (int b = 0; b < ECE_BINS; b++)
		n += a->ece_n[b];
	for (int b = 0; b < ECE_BINS; b++)
		if (a->ece_n[b] > 0)
			e += a->ece_n[b] / n * fabs(a->ece_h[b] / a->ece_n[b] - a->ece_c[b] / a->ece_n[b]);
	if (a->has_conf && n > 0)
		cJSON_AddNumberToObject(x, "ece", e);
	else
		cJSON_AddNullToObject(x, "ece");
	for (int b = 0; b < UNION_BLOCKS; b++) {
		char name[8];
		snprintf(name, sizeof(name), "%d", 1 << b);
		cJSON_AddNumberToObject(u, name, blocks[b] > 0 ? a->unions[b] / blocks[b] : 0);
	}
}

/* ------------------------------------------------------------ SVG */

static void svg_chart(cJSON *preds, const uint64_t *budgets, size_t nb, char **out)
{
	static const char *const colours[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02",
					      "#a6761d", "#666666"};
	size_t cap = 1 << 16, len = 0, pi = 0;
	char *s = malloc(cap);
	const cJSON *p;
	double x0 = 60, y0 = 30, w = 420, h = 260;
	uint64_t kmax = budgets[nb - 1], kmin = budgets[0];

#define PUT(...)                                                                             \
	do {                                                                                 \
		int n_ = snprintf(s + len, cap - len, __VA_ARGS__);                          \
		if (n_ > 0 && (size_t)n_ < cap - len)                                        \
			len += (size_t)n_;                                                   \
	} while (0)
	if (!s) {
		*out = NULL;
		return;
	}
	PUT("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"340\" font-family=\"sans-serif\" "
	    "font-size=\"11\">\n<title>recall at equal candidate budgets (hb-replay eval)</title>\n");
	PUT("<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#000\"/>\n", x0, y0, w, h);
	for (int t = 0; t <= 4; t++)
		PUT("<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.2f</text>\n", x0 - 4, y0 + h - h * t / 4 + 4,
		    t / 4.0);
	for (size_t b = 0; b < nb; b++) {
		double x = x0 + (kmax == kmin ? w / 2 : w * (double)(budgets[b] - kmin) / (double)(kmax - kmin));
		PUT("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%" PRIu64 "</text>\n", x, y0 + h + 14, budgets[b]);
	}
	PUT("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">candidate budget K</text>\n", x0 + w / 2, y0 + h + 30);
	PUT("<text x=\"%g\" y=\"%g\">recall@K</text>\n", x0 - 50, y0 - 10);
	cJSON_ArrayForEach(p, preds) {
		const cJSON *bk = cJSON_GetObjectItem(cJSON_GetObjectItem(p, "overall"), "budgets");
		const char *c = colours[pi % HB_ARRAY_LEN(colours)];
		PUT("<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c);
		for (size_t b = 0; b < nb; b++) {
			char name[24];
			double r, x;
			snprintf(name, sizeof(name), "%" PRIu64, budgets[b]);
			r = cJSON_GetObjectItem(cJSON_GetObjectItem(bk, name), "recall")->valuedouble;
			x = x0 + (kmax == kmin ? w / 2 : w * (double)(budgets[b] - kmin) / (double)(kmax - kmin));
			PUT("%s%.2f,%.2f", b ? " " : "", x, y0 + h - h * r);
		}
		PUT("\"/>\n<text x=\"%g\" y=\"%g\" fill=\"%s\">%s</text>\n", x0 + w + 12, y0 + 12 + 16.0 * (double)pi, c,
		    p->string);
		if (len + 4096 > cap) {
			char *g = realloc(s, 2 * cap);
			if (!g)
				break;
			s = g;
			cap *= 2;
		}
		pi++;
	}
	PUT("</svg>\n");
#undef PUT
	*out = s;
}

/* ------------------------------------------------------------ Gate 4 */

static const char *pred_name(const struct hb_eval_gate4 *g, const char *const *predictions, size_t p)
{
	return g && g->names && g->names[p] ? g->names[p] : predictions[p];
}

static double avail_of(const struct hb_eval_gate4 *g, size_t p, const struct hb_timely_rec *tr,
		       const struct hb_timely_rec *tprev, const struct hb_timely_rec *tbelow)
{
	switch (g && g->available ? g->available[p] : HB_AVAIL_PRE_ATTN) {
	case HB_AVAIL_PRE_ATTN: return tr ? tr->pre_attn_ns : AVAIL_ALWAYS;
	case HB_AVAIL_AHEAD: return tbelow ? tbelow->pre_moe_ns : AVAIL_ALWAYS;
	case HB_AVAIL_PREV_TOKEN: return tprev ? tprev->need_ns : AVAIL_ALWAYS;
	default: return AVAIL_ALWAYS;
	}
}

/* an eval.json is a few kilobytes a predictor */
#define HB_EVAL_JSON_MAX (64u << 20)

static int not_eval(struct hb_error *err, const char *what, const char *why)
{
	return hb_error_diag(err, hb_replay_diag_id(HB_RPD_FIELD), HB_ERR_INVALID, what, false, 0,
			     "not an eval.json of hb-replay eval: %s", why);
}

/* A budget key as eval writes it: a decimal from 1 to 2^53 - 1, no sign,
 * no leading zero. */
static bool budget_key(const char *k)
{
	uint64_t v;

	return k && *k != '0' && hb_parse_u64_range(k, 1, HB_JSON_MAX_EXACT_U64, &v) == HB_OK;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first member name of obj given twice, or NULL (*nomem on failure):
 * which of two rows would be read is not the reader's to guess. */
static const char *twice(const cJSON *obj, bool *nomem)
{
	const cJSON *m;
	const char **k, *dup = NULL;
	size_t n = 0, i = 0;

	cJSON_ArrayForEach(m, obj) n++;
	if (n < 2)
		return NULL;
	if (!(k = malloc(n * sizeof(*k)))) {
		*nomem = true;
		return NULL;
	}
	cJSON_ArrayForEach(m, obj) k[i++] = m->string;
	qsort(k, n, sizeof(*k), cmp_key);
	for (i = 1; i < n && !dup; i++)
		if (!strcmp(k[i - 1], k[i]))
			dup = k[i];
	free(k);
	return dup;
}

int hb_eval_validation_parse(const char *text, size_t len, const char *what, cJSON **out, struct hb_error *err)
{
	cJSON *v = NULL;
	const cJSON *preds, *p, *b;
	const char *d;
	char why[320];
	bool nomem = false;
	int rc;

	*out = NULL;
	if ((rc = hb_json_parse(text, len, what, &v, err)))
		return rc;
	preds = cJSON_GetObjectItemCaseSensitive(v, "predictors");
	if (!cJSON_IsObject(v) || !cJSON_IsObject(preds)) {
		rc = not_eval(err, what, "no \"predictors\" object");
		goto out;
	}
	if ((d = twice(preds, &nomem))) {
		snprintf(why, sizeof(why), "predictors.%s is given twice", d);
		rc = not_eval(err, what, why);
		goto out;
	}
	cJSON_ArrayForEach(p, preds) {
		const cJSON *all = cJSON_GetObjectItemCaseSensitive(p, "overall"), *bk;
		if (!cJSON_IsObject(p)) {
			snprintf(why, sizeof(why), "predictors.%s is not an object", p->string);
			rc = not_eval(err, what, why);
			goto out;
		}
		if (!all)
			continue; /* a predictor without an overall table has no Gate 4 row */
		bk = cJSON_GetObjectItemCaseSensitive(all, "budgets");
		if (!cJSON_IsObject(all) || !cJSON_IsObject(bk)) {
			snprintf(why, sizeof(why), "predictors.%s.overall has no \"budgets\" object", p->string);
			rc = not_eval(err, what, why);
			goto out;
		}
		if ((d = twice(bk, &nomem))) {
			snprintf(why, sizeof(why), "predictors.%s.overall.budgets.%s is given twice", p->string, d);
			rc = not_eval(err, what, why);
			goto out;
		}
		cJSON_ArrayForEach(b, bk) {
			const cJSON *r = cJSON_GetObjectItemCaseSensitive(b, "recall");
			if (!budget_key(b->string)) {
				snprintf(why, sizeof(why), "predictors.%s.overall.budgets.%s is not a budget (1 to 2^53 - 1)",
					 p->string, b->string);
				rc = not_eval(err, what, why);
				goto out;
			}
			if (!cJSON_IsObject(b) || !cJSON_IsNumber(r) || !(r->valuedouble >= 0 && r->valuedouble <= 1)) {
				snprintf(why, sizeof(why), "predictors.%s.overall.budgets.%s.recall is not a number in [0, 1]",
					 p->string, b->string);
				rc = not_eval(err, what, why);
				goto out;
			}
		}
	}
	if (nomem) {
		rc = hb_error_set(err, HB_ERR_NOMEM, what, "out of memory");
		goto out;
	}
	*out = v;
	v = NULL;
out:
	cJSON_Delete(v);
	return rc;
}

/* "gate4": per predictor named in both reports and budget, the replay
 * validation recall (of the eval.json at vpath), this report's recall and,
 * with deadlines, the decode steps' recall and timely recall */
static int gate4_table(cJSON *root, const cJSON *preds, const char *vpath, const uint64_t *budgets, size_t nb,
		       bool timed, struct hb_error *err)
{
	char *text = NULL;
	size_t len;
	cJSON *v, *vp, *out = cJSON_AddObjectToObject(root, "gate4");
	const cJSON *p;
	int rc;

	if ((rc = hb_read_file(vpath, HB_EVAL_JSON_MAX, &text, &len, err)))
		return rc;
	rc = hb_eval_validation_parse(text, len, vpath, &v, err);
	free(text);
	if (rc)
		return rc;
	vp = cJSON_GetObjectItemCaseSensitive(v, "predictors");
	cJSON_ArrayForEach(p, preds) {
		const cJSON *q = cJSON_GetObjectItemCaseSensitive(vp, p->string);
		cJSON *row;
		if (!q)
			continue;
		row = cJSON_AddObjectToObject(out, p->string);
		for (size_t b = 0; b < nb; b++) {
			char name[24];
			cJSON *x;
#define AT(o, a, m) \
	cJSON_GetObjectItemCaseSensitive( \
		cJSON_GetObjectItemCaseSensitive( \
			cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), "budgets"), name), \
		m)
			const cJSON *vr, *dr, *ds, *dt;
			snprintf(name, sizeof(name), "%" PRIu64, budgets[b]);
			vr = AT(q, "overall", "recall"), dr = AT(p, "overall", "recall");
			ds = AT(p, "decode", "recall"), dt = AT(p, "decode", "timely_recall");
#undef AT
			x = cJSON_AddObjectToObject(row, name);
			cJSON_AddItemToObject(x, "replay_validation_recall",
					      cJSON_IsNumber(vr) ? cJSON_CreateNumber(vr->valuedouble) : cJSON_CreateNull());
			cJSON_AddNumberToObject(x, "decode_recall", cJSON_IsNumber(dr) ? dr->valuedouble : 0);
			if (timed) {
				cJSON_AddNumberToObject(x, "decode_step_recall", cJSON_IsNumber(ds) ? ds->valuedouble : 0);
				cJSON_AddNumberToObject(x, "decode_timely_recall", cJSON_IsNumber(dt) ? dt->valuedouble : 0);
			}
		}
	}
	cJSON_Delete(v);
	return HB_OK;
}

/* ------------------------------------------------------------ run */

int hb_eval_run(const char *train, const char *heldout, const char *const *predictions, size_t n_pred,
		const uint64_t *budgets, size_t nb, uint64_t seed, const struct hb_eval_gate4 *g, char **json, char **svg,
		struct hb_error *err)
{
	struct hb_timely *tm = NULL;
	struct tstep ts = {0, 0, 1};
	struct hb_replay_recs T = {0}, H = {0}, *P = NULL;
	size_t np = P_BUILTIN + n_pred;
	struct acc *acc = NULL;
	uint32_t E, Ly, k, *freq = NULL, *rank = NULL, *layers_all = NULL;
	uint64_t *counts = NULL, *last = NULL, tick = 0;
	uint8_t *mark = NULL, *is_true = NULL;
	float *conf = NULL, *fconf = NULL;
	uint64_t *lastkey = NULL, *layer_records = NULL;
	double blocks[UNION_BLOCKS] = {0};
	struct acc truth = {0};
	struct where wh = {{0}, budgets[nb - 1]};
	cJSON *root = NULL, *preds;
	size_t len = 0;
	int rc;

	*json = *svg = NULL;
	if ((rc = hb_replay_recs_load(train, &T, err)) || (rc = hb_replay_recs_load(heldout, &H, err)))
		goto out;
	if (g && g->n_deadlines) {
		if ((rc = hb_timely_load(g->deadlines, g->n_deadlines, g->read_ns, &tm, err)))
			goto out;
		ts.R = hb_timely_read_ns(tm);
		ts.D = hb_timely_depth(tm);
	}
	if (T.h.top_k != H.h.top_k || T.h.layers != H.h.layers || T.h.experts != H.h.experts) {
		rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_GEOMETRY), HB_ERR_CONTRACT, heldout, false, 0,
				   "geometry differs from the train labels'");
		goto out;
	}
	if (memcmp(T.h.artifact, H.h.artifact, 32) || memcmp(T.h.text, H.h.text, 32)) {
		rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_IDENTITY), HB_ERR_CONTRACT, heldout, false, 0,
				   "artifact or tokenizer digest differs from the train labels'");
		goto out;
	}
	E = H.h.experts;
	Ly = H.h.layers;
	k = H.h.top_k;
	P = calloc(n_pred ? n_pred : 1, sizeof(*P));
	acc = calloc(np, sizeof(*acc));
	freq = malloc((size_t)Ly * E * sizeof(uint32_t));
	counts = calloc((size_t)Ly * E, sizeof(uint64_t));
	last = calloc((size_t)Ly * E, sizeof(uint64_t));
	rank = malloc((size_t)E * sizeof(uint32_t));
	mark = malloc(E);
	is_true = malloc(E);
	layers_all = malloc(Ly * sizeof(uint32_t));
	conf = malloc((size_t)E * sizeof(float));
	fconf = malloc((size_t)Ly * E * sizeof(float));
	lastkey = malloc((size_t)UNION_BLOCKS * Ly * 3 * sizeof(uint64_t));
	layer_records = calloc(Ly, sizeof(uint64_t));
	truth.count_layers = Ly;
	truth.stamp = malloc((size_t)UNION_BLOCKS * Ly * E * sizeof(uint64_t));
	truth.hits = calloc((size_t)Ly * nb, sizeof(double));
	truth.exact = calloc(Ly, sizeof(double));
	truth.rr = calloc(Ly, sizeof(double));
	truth.count = calloc(Ly, sizeof(double));
	if (!P || !acc || !freq || !counts || !last || !rank || !mark || !is_true || !layers_all || !conf || !fconf ||
	    !lastkey || !layer_records || !truth.stamp || !truth.hits || !truth.exact || !truth.rr || !truth.count) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "eval", "out of memory");
		goto out;
	}
	for (size_t i = 0; i < np; i++) {
		acc[i].hits = calloc((size_t)Ly * nb, sizeof(double));
		acc[i].exact = calloc(Ly, sizeof(double));
		acc[i].rr = calloc(Ly, sizeof(double));
		acc[i].count = calloc(Ly, sizeof(double));
		acc[i].count_layers = Ly;
		acc[i].has_conf = i == P_RANDOM || i == P_FREQUENCY || i >= P_BUILTIN;
		acc[i].stamp = malloc((size_t)UNION_BLOCKS * Ly * E * sizeof(uint64_t));
		acc[i].dhits = calloc((size_t)Ly * nb, sizeof(double));
		acc[i].thits = calloc((size_t)Ly * nb, sizeof(double));
		acc[i].dcount = calloc(Ly, sizeof(double));
		if (!acc[i].hits || !acc[i].exact || !acc[i].rr || !acc[i].count || !acc[i].stamp || !acc[i].dhits ||
		    !acc[i].thits || !acc[i].dcount) {
			rc = hb_error_set(err, HB_ERR_NOMEM, "eval", "out of memory");
			goto out;
		}
	}
	for (size_t i = 0; i < n_pred; i++) {
		if ((rc = hb_replay_recs_load(predictions[i], &P[i], err)))
			goto out;
		if (P[i].h.layers != Ly || P[i].h.experts != E) {
			rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_GEOMETRY), HB_ERR_CONTRACT, predictions[i], false,
					   0, "layers or experts differ from the labels'");
			goto out;
		}
		if (memcmp(P[i].h.artifact, H.h.artifact, 32) || memcmp(P[i].h.text, H.h.text, 32)) {
			rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_IDENTITY), HB_ERR_CONTRACT, predictions[i], false,
					   0, "artifact or tokenizer digest differs from the labels'");
			goto out;
		}
	}
	/* frequency per layer from the train split, ties by expert id */
	for (size_t i = 0; i < T.n; i++)
		for (uint32_t j = 0; j < k; j++)
			if (T.r[i].layer < Ly && T.r[i].ids[j] < E)
				counts[(size_t)T.r[i].layer * E + T.r[i].ids[j]]++;
	for (size_t i = 0; i < T.n; i++)
		if (T.r[i].layer < Ly)
			layer_records[T.r[i].layer]++;
	memset(lastkey, 0xff, (size_t)UNION_BLOCKS * Ly * 3 * sizeof(uint64_t));
	memset(truth.stamp, 0xff, (size_t)UNION_BLOCKS * Ly * E * sizeof(uint64_t));
	for (size_t i = 0; i < np; i++)
		memset(acc[i].stamp, 0xff, (size_t)UNION_BLOCKS * Ly * E * sizeof(uint64_t));
	for (uint32_t l = 0; l < Ly; l++) {
		uint32_t *f = freq + (size_t)l * E;
		const uint64_t *c = counts + (size_t)l * E;
		for (uint32_t e = 0; e < E; e++)
			f[e] = e;
		for (uint32_t a = 1; a < E; a++) { /* insertion sort: E is a few hundred */
			uint32_t v = f[a], b = a;
			while (b > 0 && c[f[b - 1]] < c[v]) {
				f[b] = f[b - 1];
				b--;
			}
			f[b] = v;
		}
		/* the frequency baseline's confidence: the train share of records holding it */
		for (uint32_t e = 0; e < E; e++)
			fconf[(size_t)l * E + e] = layer_records[l] ? (float)((double)c[f[e]] / (double)layer_records[l]) : 0;
		layers_all[l] = l;
	}
	for (size_t i = 0; i < H.n; i++) {
		const struct hb_replay_rec *r = &H.r[i], *q;
		const struct hb_timely_rec *tr = NULL, *tprev = NULL, *tbelow = NULL;
		const uint32_t *f;
		size_t n;
		if (r->layer >= Ly)
			continue;
		if (tm && hb_timely_decode_step(tm, r->seq, r->pos) && (tr = hb_timely_find(tm, r->seq, r->pos, r->layer))) {
			ts.need = tr->need_ns;
			tprev = r->pos ? hb_timely_find(tm, r->seq, r->pos - 1, r->layer) : NULL;
			tbelow = r->layer ? hb_timely_find(tm, r->seq, r->pos, r->layer - 1) : NULL;
		}
#define TIMELY(p, av)                                                                                    \
	do {                                                                                             \
		if (tr)                                                                                  \
			score_timely(&acc[p], r->layer, rank, r->ids, k, budgets, nb, E, &ts, (av), is_true); \
	} while (0)
		f = freq + (size_t)r->layer * E;
		for (int u = 0; u < UNION_BLOCKS; u++) { /* the block of 2^u positions this record is in */
			uint64_t *lk = lastkey + ((size_t)u * Ly + r->layer) * 3;
			if (lk[0] != r->seq || lk[1] != r->pos >> u) {
				lk[0] = r->seq, lk[1] = r->pos >> u, lk[2]++;
				blocks[u] += 1;
			}
			wh.block[u] = lk[2];
		}
		memcpy(rank, r->ids, k * sizeof(uint32_t));
		complete(rank, k, f, E, mark);
		score(&truth, r->layer, rank, NULL, &wh, r->ids, k, budgets, nb, E, is_true);
		if (i == 0 || H.r[i - 1].seq != r->seq) {
			memset(last, 0, (size_t)Ly * E * sizeof(uint64_t));
			tick = 0;
		}
		/* random: a seeded shuffle per record */
		for (uint32_t e = 0; e < E; e++)
			rank[e] = e;
		{
			uint64_t s = mix(seed ^ mix(r->seq ^ mix(r->pos * 131 + r->layer)));
			for (uint32_t e = E - 1; e > 0; e--) {
				uint32_t j, t;
				s = mix(s);
				j = (uint32_t)(s % (e + 1));
				t = rank[e];
				rank[e] = rank[j];
				rank[j] = t;
			}
		}
		for (uint32_t e = 0; e < E; e++)
			conf[e] = (float)k / (float)E;
		score(&acc[P_RANDOM], r->layer, rank, conf, &wh, r->ids, k, budgets, nb, E, is_true);
		TIMELY(P_RANDOM, AVAIL_ALWAYS);
		memcpy(rank, f, E * sizeof(uint32_t));
		score(&acc[P_FREQUENCY], r->layer, rank, fconf + (size_t)r->layer * E, &wh, r->ids, k, budgets, nb, E,
		      is_true);
		TIMELY(P_FREQUENCY, AVAIL_ALWAYS);
		/* LRU: experts this sequence used at this layer, most recent first */
		{
			uint64_t *lu = last + (size_t)r->layer * E;
			n = 0;
			for (uint32_t e = 0; e < E; e++)
				if (lu[e])
					rank[n++] = e;
			for (size_t a = 1; a < n; a++) {
				uint32_t v = rank[a];
				size_t b = a;
				while (b > 0 && lu[rank[b - 1]] < lu[v]) {
					rank[b] = rank[b - 1];
					b--;
				}
				rank[b] = v;
			}
			complete(rank, n, f, E, mark);
			score(&acc[P_LRU], r->layer, rank, NULL, &wh, r->ids, k, budgets, nb, E, is_true);
			TIMELY(P_LRU, tprev ? tprev->need_ns : AVAIL_ALWAYS);
			tick++;
			for (uint32_t j = k; j-- > 0;) /* rank 0 is the most recent */
				if (r->ids[j] < E)
					lu[r->ids[j]] = tick * (k + 1) + (k - j);
		}
		q = r->pos ? hb_replay_recs_find(&H, r->seq, r->pos - 1, r->layer) : NULL;
		n = 0;
		for (uint32_t j = 0; q && j < k; j++)
			if (q->ids[j] < E)
				rank[n++] = q->ids[j];
		complete(rank, n, f, E, mark);
		score(&acc[P_PREV_TOKEN], r->layer, rank, NULL, &wh, r->ids, k, budgets, nb, E, is_true);
		TIMELY(P_PREV_TOKEN, tprev ? tprev->need_ns : AVAIL_ALWAYS);
		q = r->layer ? hb_replay_recs_find(&H, r->seq, r->pos, r->layer - 1) : NULL;
		n = 0;
		for (uint32_t j = 0; q && j < k; j++)
			if (q->ids[j] < E)
				rank[n++] = q->ids[j];
		complete(rank, n, f, E, mark);
		score(&acc[P_ADJ_LAYER], r->layer, rank, NULL, &wh, r->ids, k, budgets, nb, E, is_true);
		TIMELY(P_ADJ_LAYER, tbelow ? tbelow->need_ns : AVAIL_ALWAYS);
		for (size_t p = 0; p < n_pred; p++) {
			q = hb_replay_recs_find(&P[p], r->seq, r->pos, r->layer);
			n = 0;
			for (uint32_t j = 0; q && j < P[p].k; j++)
				if (q->ids[j] < E) {
					conf[n] = q->w[j];
					rank[n++] = q->ids[j];
				}
			/* drop repeats a predictions file might hold */
			{
				size_t m = 0;
				memset(mark, 0, E);
				for (size_t j = 0; j < n; j++)
					if (!mark[rank[j]]) {
						mark[rank[j]] = 1;
						conf[m] = conf[j];
						rank[m++] = rank[j];
					}
				n = m;
			}
			for (size_t j = n; j < E; j++) /* the padding claims nothing */
				conf[j] = 0;
			complete(rank, n, f, E, mark);
			score(&acc[P_BUILTIN + p], r->layer, rank, conf, &wh, r->ids, k, budgets, nb, E, is_true);
			TIMELY(P_BUILTIN + p, avail_of(g, p, tr, tprev, tbelow));
		}
#undef TIMELY
	}
	root = cJSON_CreateObject();
	hb_json_add_str(root, "format", "hebrus-replay-eval/1");
	hb_json_add_u64(root, "train_records", T.n);
	hb_json_add_u64(root, "heldout_records", H.n);
	hb_json_add_u64(root, "top_k", k);
	hb_json_add_u64(root, "layers", Ly);
	hb_json_add_u64(root, "experts", E);
	hb_json_add_u64(root, "seed", seed);
	{
		cJSON *b = cJSON_AddArrayToObject(root, "budgets");
		for (size_t i = 0; i < nb; i++)
			cJSON_AddItemToArray(b, cJSON_CreateNumber((double)budgets[i]));
	}
	{
		cJSON *u = cJSON_AddObjectToObject(root, "route_union_labels");
		for (int b = 0; b < UNION_BLOCKS; b++) {
			char name[8];
			snprintf(name, sizeof(name), "%d", 1 << b);
			cJSON_AddNumberToObject(u, name, blocks[b] > 0 ? truth.unions[b] / blocks[b] : 0);
		}
	}
	if (tm) {
		cJSON *t = cJSON_AddObjectToObject(root, "timing");
		cJSON_AddNumberToObject(t, "read_ns", ts.R);
		hb_json_add_u64(t, "predicted_depth", ts.D);
		hb_json_add_u64(t, "deadline_files", g->n_deadlines);
	}
	preds = cJSON_AddObjectToObject(root, "predictors");
	for (size_t p = 0; p < np; p++) {
		const char *name = p < P_BUILTIN ? builtin_names[p] : pred_name(g, predictions, p - P_BUILTIN);
		cJSON *x = cJSON_CreateObject(), *per;
		cJSON_AddItemToObject(x, "overall", metrics(&acc[p], layers_all, Ly, budgets, nb, k));
		add_calibration(x, &acc[p], blocks);
		per = cJSON_AddArrayToObject(x, "layers");
		for (uint32_t l = 0; l < Ly; l++)
			cJSON_AddItemToArray(per, metrics(&acc[p], &layers_all[l], 1, budgets, nb, k));
		if (tm)
			cJSON_AddItemToObject(x, "decode", decode_metrics(&acc[p], Ly, budgets, nb, k));
		cJSON_AddItemToObject(preds, name, x);
	}
	if (g && g->validation && (rc = gate4_table(root, preds, g->validation, budgets, nb, tm != NULL, err)))
		goto out;
	if ((rc = hb_json_render(root, true, json, &len, err)))
		goto out;
	svg_chart(preds, budgets, nb, svg);
	if (!*svg)
		rc = hb_error_set(err, HB_ERR_NOMEM, "eval", "out of memory");
out:
	cJSON_Delete(root);
	for (size_t i = 0; acc && i < np; i++) {
		free(acc[i].hits);
		free(acc[i].exact);
		free(acc[i].rr);
		free(acc[i].count);
		free(acc[i].stamp);
		free(acc[i].dhits), free(acc[i].thits), free(acc[i].dcount);
	}
	hb_timely_free(tm);
	free(truth.stamp), free(truth.hits), free(truth.exact), free(truth.rr), free(truth.count);
	free(conf), free(fconf), free(lastkey), free(layer_records);
	for (size_t i = 0; P && i < n_pred; i++)
		hb_replay_recs_release(&P[i]);
	free(P), free(acc), free(freq), free(counts), free(last), free(rank), free(mark), free(is_true);
	free(layers_all);
	hb_replay_recs_release(&T);
	hb_replay_recs_release(&H);
	return rc;
}
