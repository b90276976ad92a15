/*
 * hb_replay_plant.c: hb-replay plant, the planted-structure control
 * (hb_replay_train.h).  A source state h ~ N(0, I) of source_width floats
 * per position and layer is projected like a captured state (hb_predict.h's
 * seeded projection) to the feature x; the planted router scores expert e
 * at layer l as s_e = 3 V_e . (A x + T_l) / sqrt(rank) with fixed Gaussian
 * A [rank, width], T [layers, rank], V [experts, rank]; the label is the
 * top-k of s + noise x Gumbel, its weights the softmax of those k noisy
 * scores.  Ranking by the noiseless s is then the best any predictor of x
 * can do (Gumbel top-k inclusion grows with s), and that ranking is written
 * as the oracle's predictions.  States are independent across positions
 * and layers, so the history baselines have closed forms in the route
 * marginals pi[l][e], estimated here by Monte Carlo from their own stream:
 * random K/E; frequency sum of the K largest pi / k; previous token and LRU
 * at K = k sum pi^2 / k (the first position falls back to frequency);
 * adjacent layer sum pi[l-1] pi[l] / k (layer 0: frequency).
 */
#include "hb_replay_train.h"
#include "model/hb_ple_hash.h"
#include "hb_json.h"
#include "hb_publish.h"
#include "hb_sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#define THEORY_SAMPLES 2048u
#define ORACLE_DRAWS 32u

void hb_plant_defaults(struct hb_plant_config *c)
{
	memset(c, 0, sizeof(*c));
	c->sequences = 48;
	c->positions = 64;
	c->layers = 4;
	c->experts = 512;
	c->top_k = 10;
	c->width = 64;
	c->source_width = 256;
	c->rank = 8;
	c->noise = 1;
}

struct planted {
	const struct hb_plant_config *c;
	float *P, *A, *T, *V;              /* projection, planted map, layer shift, expert heads */
	float *h, *x, *u, *s, *noisy;      /* scratch */
	uint32_t *idx;
	uint8_t projection[32];
};

static double unif(uint64_t *s)
{
	*s = hb_splitmix64(*s);
	return ((double)(*s >> 11) + 0.5) * 0x1.0p-53;
}

static double gauss(uint64_t *s)
{
	double a = unif(s), b = unif(s);
	return sqrt(-2 * log(a)) * cos(6.283185307179586 * b);
}

/* the state of (stream, index): x and the noiseless scores s */
static void state(struct planted *g, uint64_t stream, uint64_t index, uint32_t layer)
{
	const struct hb_plant_config *c = g->c;
	uint64_t st = hb_splitmix64(stream ^ hb_splitmix64(index * 8191 + layer));
	for (uint32_t j = 0; j < c->source_width; j++)
		g->h[j] = (float)gauss(&st);
	hb_projection_apply(g->P, c->source_width, c->width, g->h, g->x);
	for (uint32_t r = 0; r < c->rank; r++) {
		double a = g->T[(size_t)layer * c->rank + r];
		for (uint32_t j = 0; j < c->width; j++)
			a += (double)g->A[(size_t)r * c->width + j] * g->x[j];
		g->u[r] = (float)a;
	}
	for (uint32_t e = 0; e < c->experts; e++) {
		double a = 0;
		for (uint32_t r = 0; r < c->rank; r++)
			a += (double)g->V[(size_t)e * c->rank + r] * g->u[r];
		g->s[e] = (float)(3 * a / sqrt((double)c->rank));
	}
}

/* the noisy route of the current scores (draw stream st) */
static void route(struct planted *g, uint64_t *st, uint32_t *ids)
{
	const struct hb_plant_config *c = g->c;
	for (uint32_t e = 0; e < c->experts; e++)
		g->noisy[e] = g->s[e] + (float)(c->noise * -log(-log(unif(st))));
	hb_predict_top(g->noisy, c->experts, c->top_k, ids);
}

static int open_trace(const char *dir, const char *name, const struct hb_trace_header *h, struct hb_trace_writer **w,
		      int *fd, struct hb_error *err)
{
	char path[4096];
	if (mkdir(dir, 0777) && errno != EEXIST)
		return hb_error_sys(err, errno, dir, "cannot create");
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	*fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (*fd < 0)
		return hb_error_sys(err, errno, path, "cannot create");
	return hb_trace_writer_open(w, *fd, dir, h, 4096, err);
}

static int close_trace(struct hb_trace_writer *w, int fd, int rc, struct hb_error *err)
{
	if (w) {
		int r2 = hb_trace_writer_close(w, err);
		rc = rc ? rc : r2;
	}
	if (fd >= 0 && close(fd) && !rc)
		rc = hb_error_sys(err, errno, "trace", "cannot close");
	return rc;
}

static const char *const split_names[4] = {"train", "validation", "heldout", "runtime"};

/* The runtime split's synthetic deadlines (hb-replay(1) PLANTED CONTROL):
 * no model runs here, so a stated schedule stands in for the one hb-run
 * measures: layer l of position p starts at (p L + l) STEP, its
 * pre-attention mix then, its post-attention mix STEP/2 and its need
 * 3 STEP/4 later; reads take READ, PLANT_DEPTH at a time. */
#define PLANT_STEP_NS 1000.0
#define PLANT_READ_NS 250.0
#define PLANT_DEPTH 3u

static int write_deadlines(const char *sub, uint64_t seq, const struct hb_plant_config *c, struct hb_error *err)
{
	cJSON *j = cJSON_CreateObject(), *rd, *a;
	char path[4096], *text = NULL;
	size_t len;
	int rc;

	hb_json_add_str(j, "format", "hebrus-deadlines/1");
	hb_json_add_str(j, "clock", "synthetic: the planted control's stated schedule");
	hb_json_add_u64(j, "sequence", seq);
	hb_json_add_u64(j, "prompt_tokens", 0);
	hb_json_add_u64(j, "layers", c->layers);
	rd = cJSON_AddObjectToObject(j, "read");
	hb_json_add_u64(rd, "reads", 0);
	cJSON_AddNumberToObject(rd, "p50_ns", PLANT_READ_NS);
	cJSON_AddNumberToObject(rd, "p95_ns", PLANT_READ_NS);
	hb_json_add_u64(rd, "predicted_depth", PLANT_DEPTH);
	a = cJSON_AddArrayToObject(j, "records");
	for (uint32_t pos = 0; a && pos < c->positions; pos++)
		for (uint32_t l = 0; l < c->layers; l++) {
			double t0 = ((double)pos * c->layers + l) * PLANT_STEP_NS;
			double v[5] = {pos, l, t0, t0 + PLANT_STEP_NS / 2, t0 + 3 * PLANT_STEP_NS / 4};
			cJSON_AddItemToArray(a, cJSON_CreateDoubleArray(v, 5));
		}
	rc = hb_json_render(j, false, &text, &len, err);
	cJSON_Delete(j);
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "%s/deadlines", sub);
	if (mkdir(path, 0777) && errno != EEXIST)
		rc = hb_error_sys(err, errno, path, "cannot create");
	snprintf(path, sizeof(path), "%s/deadlines/%07" PRIu64 ".json", sub, seq);
	if (!rc)
		rc = hb_publish_buf(path, text, len, HB_PUBLISH_REPLACE, err);
	free(text);
	return rc;
}

/* the candidates of a predictor whose candidates exist `gap` before the
 * need that can be read in time: PLANT_DEPTH a round of PLANT_READ_NS */
static cJSON *schedule(void)
{
	static const struct {
		const char *name;
		double gap;
	} a[] = {{"pre-attention", 3 * PLANT_STEP_NS / 4}, {"router-ahead", 5 * PLANT_STEP_NS / 4},
		 {"adjacent-layer", PLANT_STEP_NS}};
	cJSON *o = cJSON_CreateObject(), *cut;

	cJSON_AddNumberToObject(o, "step_ns", PLANT_STEP_NS);
	cJSON_AddNumberToObject(o, "read_ns", PLANT_READ_NS);
	hb_json_add_u64(o, "predicted_depth", PLANT_DEPTH);
	cut = cJSON_AddObjectToObject(o, "timely_candidates");
	for (size_t i = 0; i < HB_ARRAY_LEN(a); i++)
		hb_json_add_u64(cut, a[i].name, PLANT_DEPTH * (uint64_t)floor(a[i].gap / PLANT_READ_NS));
	return o;
}

/* one split: labels, features and (heldout, runtime) the oracle */
static int write_split(struct planted *g, const char *dir, int sp, const struct hb_feature_ident *base,
		       const struct hb_trace_header *hh, uint64_t *feature_bytes, struct hb_error *err)
{
	const struct hb_plant_config *c = g->c;
	uint32_t nseq = sp ? (c->sequences + 3) / 4 : c->sequences, ids[HB_TRACE_MAX_TOPK];
	struct hb_feature_ident id = *base;
	struct hb_feature_set fs;
	struct hb_trace_writer *lw = NULL, *ow = NULL;
	struct hb_trace_header oh = *hh;
	char sub[4096], sub2[4096];
	float *row = malloc((size_t)c->layers * c->width * sizeof(float));
	uint32_t *cnt = calloc(c->experts, sizeof(uint32_t));
	int rc, lfd = -1, ofd = -1;

	memcpy(id.split, split_names[sp], strlen(split_names[sp]) + 1);
	hb_feature_set_init(&fs, &id);
	snprintf(sub, sizeof(sub), "%s/%s", dir, split_names[sp]);
	if (!row || !cnt) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "plant", "out of memory");
		goto out;
	}
	if (mkdir(sub, 0777) && errno != EEXIST) {
		rc = hb_error_sys(err, errno, sub, "cannot create");
		goto out;
	}
	snprintf(sub2, sizeof(sub2), "%s/labels", sub);
	if ((rc = open_trace(sub2, "labels.hbtrace", hh, &lw, &lfd, err)))
		goto out;
	oh.top_k = c->experts < HB_TRACE_MAX_TOPK ? c->experts : HB_TRACE_MAX_TOPK;
	snprintf(sub2, sizeof(sub2), "%s/oracle", sp == 3 ? sub : dir);
	if (sp >= 2 && (rc = open_trace(sub2, "predictions.hbtrace", &oh, &ow, &ofd, err)))
		goto out;
	for (uint32_t q = 0; q < nseq && !rc; q++) {
		uint64_t seq = (uint64_t)sp * 1000000 + q;
		for (uint32_t pos = 0; pos < c->positions && !rc; pos++) {
			for (uint32_t l = 0; l < c->layers && !rc; l++) {
				uint64_t index = seq * c->positions + pos, st;
				struct hb_route r;
				double mx = -INFINITY, sum = 0;
				state(g, c->seed ^ UINT64_C(0x64617461), index, l);
				memcpy(row + (size_t)l * c->width, g->x, c->width * sizeof(float));
				st = hb_splitmix64(c->seed ^ hb_splitmix64(index * 8191 + l) ^ UINT64_C(0x6e6f697365));
				route(g, &st, ids);
				memset(&r, 0, sizeof(r));
				r.sequence = seq, r.ordinal = pos, r.layer = l;
				for (uint32_t j = 0; j < c->top_k; j++)
					mx = g->noisy[ids[j]] > mx ? g->noisy[ids[j]] : mx;
				for (uint32_t j = 0; j < c->top_k; j++)
					sum += exp(g->noisy[ids[j]] - mx);
				for (uint32_t j = 0; j < c->top_k; j++) {
					r.ids[j] = ids[j];
					r.weights[j] = (float)(exp(g->noisy[ids[j]] - mx) / sum);
				}
				rc = hb_trace_write(lw, &r, err);
				if (rc || !ow)
					continue;
				/* the oracle: noiseless order; confidence: inclusion over fresh draws */
				memset(cnt, 0, c->experts * sizeof(uint32_t));
				for (uint32_t d = 0; d < ORACLE_DRAWS; d++) {
					route(g, &st, ids);
					for (uint32_t j = 0; j < c->top_k; j++)
						cnt[ids[j]]++;
				}
				hb_predict_top(g->s, c->experts, oh.top_k, g->idx);
				for (uint32_t j = 0; j < oh.top_k; j++) {
					r.ids[j] = g->idx[j];
					r.weights[j] = (float)cnt[g->idx[j]] / ORACLE_DRAWS;
				}
				rc = hb_trace_write(ow, &r, err);
			}
			if (!rc)
				rc = hb_feature_append(&fs, seq, pos, seq, seq, row, err);
		}
		if (!rc && sp == 3)
			rc = write_deadlines(sub, seq, c, err);
	}
	rc = close_trace(lw, lfd, rc, err);
	lw = NULL, lfd = -1;
	rc = close_trace(ow, ofd, rc, err);
	ow = NULL, ofd = -1;
	snprintf(sub2, sizeof(sub2), "%s/features", sub);
	if (!rc)
		rc = hb_feature_dir_write(sub2, &fs, 1024, feature_bytes, err);
out:
	close_trace(lw, lfd, 0, NULL);
	close_trace(ow, ofd, 0, NULL);
	hb_feature_set_release(&fs);
	free(row);
	free(cnt);
	return rc;
}

static int cmp_desc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x > y ? -1 : x < y;
}

/* theory of the baselines at budget K (hb-replay(1) PLANTED CONTROL) */
static cJSON *theory(struct planted *g)
{
	const struct hb_plant_config *c = g->c;
	uint32_t E = c->experts, L = c->layers, k = c->top_k, ids[HB_TRACE_MAX_TOPK];
	double *pi = calloc((size_t)L * E, sizeof(double)), *srt = malloc(E * sizeof(double));
	double sq = 0, adj = 0, f0 = 0, fk = 0, P = c->positions;
	static const uint32_t Ks[] = {10, 16, 20, 32};
	cJSON *o = cJSON_CreateObject(), *rnd = cJSON_AddObjectToObject(o, "random"),
	      *fr = cJSON_AddObjectToObject(o, "frequency");
	if (!pi || !srt) {
		free(pi);
		free(srt);
		return o;
	}
	for (uint32_t l = 0; l < L; l++)
		for (uint32_t i = 0; i < THEORY_SAMPLES; i++) {
			uint64_t st = hb_splitmix64(c->seed ^ UINT64_C(0x7468656f7279) ^ hb_splitmix64(i * 8191 + l));
			state(g, c->seed ^ UINT64_C(0x7468656f7279), i, l);
			route(g, &st, ids);
			for (uint32_t j = 0; j < k; j++)
				pi[(size_t)l * E + ids[j]] += 1.0 / THEORY_SAMPLES;
		}
	for (size_t b = 0; b < HB_ARRAY_LEN(Ks); b++) {
		char name[16];
		double f = 0;
		snprintf(name, sizeof(name), "%" PRIu32, Ks[b]);
		cJSON_AddNumberToObject(rnd, name, (double)Ks[b] / E);
		for (uint32_t l = 0; l < L; l++) {
			double a = 0;
			memcpy(srt, pi + (size_t)l * E, E * sizeof(double));
			qsort(srt, E, sizeof(double), cmp_desc);
			for (uint32_t j = 0; j < Ks[b] && j < E; j++)
				a += srt[j];
			f += a / k / L;
			if (Ks[b] == k) {
				fk += a / k / L;
				if (l == 0)
					f0 = a / k;
			}
		}
		cJSON_AddNumberToObject(fr, name, f);
	}
	for (uint32_t l = 0; l < L; l++)
		for (uint32_t e = 0; e < E; e++) {
			double p = pi[(size_t)l * E + e];
			sq += p * p / k / L;
			adj += l ? p * pi[(size_t)(l - 1) * E + e] / k / L : 0;
		}
	{
		char name[16];
		double prev = (P - 1) / P * sq + fk / P;
		snprintf(name, sizeof(name), "%" PRIu32, k);
		cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "previous-token"), name, prev);
		cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "lru"), name, prev);
		cJSON_AddNumberToObject(cJSON_AddObjectToObject(o, "adjacent-layer"), name, adj + f0 / L);
	}
	hb_json_add_u64(o, "marginal_samples", THEORY_SAMPLES);
	free(pi);
	free(srt);
	return o;
}

int hb_plant_run(const char *dir, const struct hb_plant_config *c, char **json, struct hb_error *err)
{
	struct planted g = {.c = c};
	struct hb_feature_ident id;
	struct hb_trace_header h;
	cJSON *root = NULL, *fb;
	uint64_t st = hb_splitmix64(c->seed ^ UINT64_C(0x706c616e74)), bytes[4] = {0};
	uint8_t buf[64];
	char hex[65], *text = NULL, path[4096];
	size_t len;
	int rc;

	*json = NULL;
	if (!c->sequences || !c->positions || !c->layers || c->top_k < 1 || c->top_k > HB_TRACE_MAX_TOPK ||
	    c->experts < c->top_k || !c->rank || !c->width || !c->source_width || !(c->noise >= 0))
		return hb_error_set(err, HB_ERR_INVALID, "plant", "a geometry value is out of range");
	memset(&id, 0, sizeof(id));
	id.projection_seed = c->seed ^ UINT64_C(0x70726f6a);
	id.width = c->width, id.source_width = c->source_width, id.layers = c->layers;
	memcpy(id.tap, "planted", 8);
	if ((rc = hb_projection_make(id.projection_seed, c->source_width, c->width, &g.P, id.projection, err)))
		return rc;
	/* the planted artifact and split are named by the generator's inputs */
	memset(buf, 0, sizeof(buf));
	snprintf((char *)buf, sizeof(buf), "hebrus-plant/1 %" PRIu64 " %u %u %u %u %u", c->seed, c->layers,
		 c->experts, c->top_k, c->width, c->rank);
	hb_sha256_buf(buf, sizeof(buf), id.artifact);
	buf[0] = 'S';
	snprintf((char *)buf + 1, sizeof(buf) - 1, "plit %" PRIu64 " %u", c->seed, c->sequences);
	hb_sha256_buf(buf, sizeof(buf), id.split_id);
	g.A = malloc((size_t)c->rank * c->width * sizeof(float));
	g.T = malloc((size_t)c->layers * c->rank * sizeof(float));
	g.V = malloc((size_t)c->experts * c->rank * sizeof(float));
	g.h = malloc(c->source_width * sizeof(float));
	g.x = malloc(c->width * sizeof(float));
	g.u = malloc(c->rank * sizeof(float));
	g.s = malloc(c->experts * sizeof(float));
	g.noisy = malloc(c->experts * sizeof(float));
	g.idx = malloc(HB_TRACE_MAX_TOPK * sizeof(uint32_t));
	if (!g.A || !g.T || !g.V || !g.h || !g.x || !g.u || !g.s || !g.noisy || !g.idx) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "plant", "out of memory");
		goto out;
	}
	/* x has variance source_width / width a coordinate: A makes A x unit */
	for (size_t i = 0; i < (size_t)c->rank * c->width; i++)
		g.A[i] = (float)(gauss(&st) / sqrt((double)c->source_width));
	for (size_t i = 0; i < (size_t)c->layers * c->rank; i++)
		g.T[i] = (float)(0.5 * gauss(&st));
	for (size_t i = 0; i < (size_t)c->experts * c->rank; i++)
		g.V[i] = (float)gauss(&st);
	memset(&h, 0, sizeof(h));
	h.top_k = c->top_k, h.layers = c->layers, h.experts = c->experts;
	memcpy(h.artifact, id.artifact, 32);
	if (mkdir(dir, 0777) && errno != EEXIST) {
		rc = hb_error_sys(err, errno, dir, "cannot create");
		goto out;
	}
	for (int sp = 0; sp < 4 && !rc; sp++)
		rc = write_split(&g, dir, sp, &id, &h, &bytes[sp], err);
	if (rc)
		goto out;
	root = cJSON_CreateObject();
	hb_json_add_str(root, "format", "hebrus-planted/1");
	hb_json_add_u64(root, "seed", c->seed);
	hb_json_add_u64(root, "sequences", c->sequences);
	hb_json_add_u64(root, "positions", c->positions);
	hb_json_add_u64(root, "layers", c->layers);
	hb_json_add_u64(root, "experts", c->experts);
	hb_json_add_u64(root, "top_k", c->top_k);
	hb_json_add_u64(root, "width", c->width);
	hb_json_add_u64(root, "source_width", c->source_width);
	hb_json_add_u64(root, "rank", c->rank);
	cJSON_AddNumberToObject(root, "noise", c->noise);
	hb_hex_encode(id.artifact, 32, hex);
	hb_json_add_str(root, "artifact", hex);
	hb_hex_encode(id.projection, 32, hex);
	hb_json_add_str(root, "projection", hex);
	hb_hex_encode(id.split_id, 32, hex);
	hb_json_add_str(root, "split_id", hex);
	fb = cJSON_AddObjectToObject(root, "feature_bytes");
	for (int sp = 0; sp < 4; sp++)
		hb_json_add_u64(fb, split_names[sp], bytes[sp]);
	cJSON_AddItemToObject(root, "theory", theory(&g));
	cJSON_AddItemToObject(root, "deadlines", schedule());
	if ((rc = hb_json_render(root, true, &text, &len, err)))
		goto out;
	snprintf(path, sizeof(path), "%s/planted.json", dir);
	if (!(rc = hb_publish_buf(path, text, len, HB_PUBLISH_REPLACE, err)))
		*json = text, text = NULL;
out:
	cJSON_Delete(root);
	free(text);
	free(g.P);
	free(g.A);
	free(g.T);
	free(g.V);
	free(g.h);
	free(g.x);
	free(g.u);
	free(g.s);
	free(g.noisy);
	free(g.idx);
	return rc;
}
