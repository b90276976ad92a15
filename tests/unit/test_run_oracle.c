/*
 * Unit tests: the CPU reference graph against upstream.  Each oracle set is
 * converted (bf16 experts, the exact reference codec), loaded, and run on
 * the fixture prompts, once as one prefill and once as prefill followed by
 * token-by-token decode through the cache.  Compared with the upstream
 * captures: every layer's top-k expert ids in rank order (exact), QSA
 * selected positions (exact, except rows the fixture marks as
 * tie-dependent), PLE row ids (exact); route weights, every layer's hidden
 * streams and the logits within bounds set from the error measured on each
 * fixture and phase (see `measured` below); the greedy continuation must be
 * identical.  Every maximum is NaN-aware (oracle.h), so a NaN fails.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb-convert/hb_convert.h"
#include "graph/hb_model.h"
#include "hb_pool.h"
#include "graph/hb_session.h"
#include "oracle.h"

#include <math.h>

#define MAXL 16
#define MAXT 128

struct capture {
	uint64_t pos0;
	size_t T, L, k, hcH, maxsel;
	int32_t *ids;     /* [L][T][k] */
	float *w;         /* [L][T][k] */
	float *hid;       /* [L][T][hcH] */
	int32_t *sel;     /* [L][T][maxsel] */
	int32_t *cnt;     /* [L][T] */
	int64_t *ple;     /* [L][T][64] */
};

static void cap_init(struct capture *c, const struct hb_model *m, size_t T, uint64_t pos0)
{
	memset(c, 0, sizeof(*c));
	c->pos0 = pos0;
	c->T = T;
	c->L = (size_t)m->cfg.num_layers;
	c->k = (size_t)m->cfg.num_experts_per_tok;
	c->hcH = (size_t)(m->cfg.hc_count * m->cfg.hidden_size);
	c->maxsel = (size_t)(m->cfg.indexer_budget + m->cfg.indexer_compress_ratio);
	c->ids = calloc(c->L * T * c->k, sizeof(int32_t));
	c->w = calloc(c->L * T * c->k, sizeof(float));
	c->hid = calloc(c->L * T * c->hcH, sizeof(float));
	c->sel = calloc(c->L * T * c->maxsel, sizeof(int32_t));
	c->cnt = calloc(c->L * T, sizeof(int32_t));
	c->ple = calloc(c->L * T * 64, sizeof(int64_t));
}

static void cap_free(struct capture *c)
{
	free(c->ids), free(c->w), free(c->hid), free(c->sel), free(c->cnt), free(c->ple);
}

static void observe(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct capture *c = ctx;
	size_t t = (size_t)(pos - c->pos0), l = (size_t)layer;

	if (pos < c->pos0 || t >= c->T || layer < 0)
		return;
	switch (kind) {
	case HB_OBS_ROUTES: memcpy(c->ids + (l * c->T + t) * c->k, data, n * 4); break;
	case HB_OBS_ROUTE_WEIGHTS: memcpy(c->w + (l * c->T + t) * c->k, data, n * 4); break;
	case HB_OBS_HIDDEN: memcpy(c->hid + (l * c->T + t) * c->hcH, data, n * 4); break;
	case HB_OBS_QSA:
		c->cnt[l * c->T + t] = (int32_t)n;
		memcpy(c->sel + (l * c->T + t) * c->maxsel, data, (n < c->maxsel ? n : c->maxsel) * 4);
		break;
	case HB_OBS_PLE_ROWS: memcpy(c->ple + (l * c->T + t) * 64, data, n * 8); break;
	default: break;
	}
}

/*
 * Where upstream's selection was tie-dependent (torch.topk orders equal
 * scores arbitrarily; this port breaks ties to the earlier group, AFN-017),
 * everything downstream legitimately differs: that layer and later ones at
 * that position and after, and the logits from that position on.
 */
struct taint {
	bool on;
	size_t layer;
	uint64_t pos;
};

enum { PRE, DEC, NPHASE };
static const char *const phase_name[NPHASE] = {"prefill", "decode"};

/* max |ours - upstream| of one fixture and phase (prefill: one chunk of the
 * prompt; decode: the 12 single-token steps after it) */
struct errs {
	double logits, weights, hidden[MAXL];
	size_t logit_values, weight_values, hidden_values[MAXL];
};

struct stats {
	unsigned tainted_skipped;
	unsigned route_rows, route_mismatch, qsa_rows, qsa_mismatch, qsa_tie_skipped, ple_rows, ple_mismatch;
	struct errs e[NPHASE];
	/* inside the tie-tainted region, for the record only (not asserted):
	 * whether this port's other valid choice actually changed anything */
	unsigned tainted_route_mismatch;
	double tainted_logit_err;
};

/*
 * Bounds.  Each number below is the largest |ours - upstream| measured on
 * that fixture and phase, rounded up to two significant digits, by
 * `HB_SRCDIR=$PWD build/tests/unit/test_run_oracle` (it prints the
 * measurement as "# measured SET PHASE: ..."; x86-64, gcc -O2, 2 threads for
 * realshape, 1 for general: the result does not depend on the count, see
 * test_threads.c); the bound asserted is MARGIN x that number.  Rows of the
 * tie-tainted region are not in these maxima (they are skipped, counted).
 * For scale: upstream's own cached-vs-one-shot logit gap is <= 2.9e-6
 * (manifest agreement.pN) and the |logits| are ~2, so 4x is two float32
 * ulps' worth of headroom on the largest error, not a hundredfold one.
 * Before this table: logits 1e-3, weights 1e-5, hidden states unchecked.
 */
#define MARGIN 4.0

struct measured {
	const char *set;
	int phase;
	double logits, weights, hidden[MAXL];
};

static const struct measured measured[] = {
	/* measured realshape prefill: logits 1.001e-05, weights 1.922e-06, hidden L00..L07
	 * 3.010e-06 7.093e-06 7.629e-06 7.361e-06 3.397e-05 3.421e-05 3.314e-05 3.266e-05 */
	{"realshape", PRE, 1.1e-5, 2.0e-6, {3.1e-6, 7.1e-6, 7.7e-6, 7.4e-6, 3.4e-5, 3.5e-5, 3.4e-5, 3.3e-5}},
	/* measured realshape decode: logits 3.517e-06, weights 7.153e-07, hidden L00..L07
	 * 1.848e-06 5.722e-06 5.960e-06 5.841e-06 5.841e-06 7.033e-06 1.204e-05 1.192e-05 */
	{"realshape", DEC, 3.6e-6, 7.2e-7, {1.9e-6, 5.8e-6, 6.0e-6, 5.9e-6, 5.9e-6, 7.1e-6, 1.3e-5, 1.2e-5}},
	/* measured general prefill: logits 2.682e-06, weights 5.066e-07, hidden L00..L05
	 * 4.977e-06 5.305e-06 5.156e-06 5.245e-06 5.603e-06 5.722e-06 */
	{"general", PRE, 2.7e-6, 5.1e-7, {5.0e-6, 5.4e-6, 5.2e-6, 5.3e-6, 5.7e-6, 5.8e-6}},
	/* measured general decode: logits 3.539e-06, weights 8.047e-07, hidden L00..L05
	 * 9.537e-07 9.537e-07 9.537e-07 2.027e-06 8.106e-06 8.106e-06 (p0's decode
	 * lies wholly in its tie-tainted region from L02 on: p1, p2 only there) */
	{"general", DEC, 3.6e-6, 8.1e-7, {9.6e-7, 9.6e-7, 9.6e-7, 2.1e-6, 8.2e-6, 8.2e-6}},
};

static const struct measured *measured_for(const char *set, int phase)
{
	for (size_t i = 0; i < HB_ARRAY_LEN(measured); i++)
		if (!strcmp(measured[i].set, set) && measured[i].phase == phase)
			return &measured[i];
	return NULL;
}

/* Every error of st within MARGIN x its measurement, over values that were
 * actually compared; the number of failed bounds. */
static unsigned bounds_failed(const char *set, size_t L, const struct stats *st, bool report)
{
	unsigned bad = 0;
	char what[96];

	for (int ph = 0; ph < NPHASE; ph++) {
		const struct measured *x = measured_for(set, ph);
		const struct errs *e = &st->e[ph];
		CHECK(x != NULL);
		if (!x)
			return 1;
		CHECK(e->logit_values > 0 && e->weight_values > 0);
		snprintf(what, sizeof(what), "%s %s logits", set, phase_name[ph]);
		bad += !oracle_within(e->logits, MARGIN * x->logits);
		if (report)
			CHECK_ERR(what, e->logits, MARGIN * x->logits);
		snprintf(what, sizeof(what), "%s %s route weights", set, phase_name[ph]);
		bad += !oracle_within(e->weights, MARGIN * x->weights);
		if (report)
			CHECK_ERR(what, e->weights, MARGIN * x->weights);
		for (size_t l = 0; l < L; l++) {
			CHECK(e->hidden_values[l] > 0);
			CHECK(x->hidden[l] > 0);
			snprintf(what, sizeof(what), "%s %s hidden L%02zu", set, phase_name[ph], l);
			bad += !oracle_within(e->hidden[l], MARGIN * x->hidden[l]);
			if (report)
				CHECK_ERR(what, e->hidden[l], MARGIN * x->hidden[l]);
		}
	}
	return bad;
}

/* Compare a capture of T positions with the oracle arrays under prefix. */
static bool tainted(const struct taint *tn, size_t layer, uint64_t pos)
{
	return tn->on && layer >= tn->layer && pos >= tn->pos;
}

static void compare(const struct oracle *o, const struct hb_model *m, const char *prefix, int phase,
		    const struct capture *c, const float *logits, const struct taint *tn, struct stats *st)
{
	struct errs *e = &st->e[phase];

	char name[128];
	size_t n;
	uint64_t dims[4];

	for (size_t l = 0; l < c->L; l++) {
		int32_t *ids, *sel, *cnt, *tie;
		float *w, *hid;
		int64_t *ple;
		snprintf(name, sizeof(name), "%s/route/ids/L%02zu", prefix, l);
		ids = oracle_array(o, name, &n, dims);
		snprintf(name, sizeof(name), "%s/route/w/L%02zu", prefix, l);
		w = oracle_array(o, name, &n, dims);
		snprintf(name, sizeof(name), "%s/hid/L%02zu", prefix, l);
		hid = oracle_array(o, name, &n, dims);
		CHECK(ids && w && hid);
		for (size_t t = 0; ids && w && t < c->T; t++) {
			bool differ = memcmp(ids + t * c->k, c->ids + (l * c->T + t) * c->k, c->k * 4) != 0;
			if (tainted(tn, l, c->pos0 + t)) {
				st->tainted_skipped++;
				st->tainted_route_mismatch += differ;
				continue;
			}
			st->route_rows++;
			st->route_mismatch += differ;
			e->weights = oracle_max(e->weights, oracle_max_abs_diff(w + t * c->k, c->w + (l * c->T + t) * c->k, c->k));
			e->weight_values += c->k;
		}
		for (size_t t = 0; hid && t < c->T; t++) {
			if (tainted(tn, l, c->pos0 + t))
				continue;
			e->hidden[l] = oracle_max(e->hidden[l],
				oracle_max_abs_diff(hid + t * c->hcH, c->hid + (l * c->T + t) * c->hcH, c->hcH));
			e->hidden_values[l] += c->hcH;
		}
		free(ids), free(w), free(hid);
		snprintf(name, sizeof(name), "%s/qsa/sel/L%02zu", prefix, l);
		sel = oracle_array(o, name, &n, dims);
		if (sel) {
			size_t width = (size_t)dims[1];
			snprintf(name, sizeof(name), "%s/qsa/cnt/L%02zu", prefix, l);
			cnt = oracle_array(o, name, &n, dims);
			snprintf(name, sizeof(name), "%s/qsa/tie/L%02zu", prefix, l);
			tie = oracle_array(o, name, &n, dims);
			for (size_t t = 0; cnt && tie && t < c->T; t++) {
				if (tie[t] & 1) {
					st->qsa_tie_skipped++; /* upstream's topk order is undefined on ties */
					continue;
				}
				if (tainted(tn, l, c->pos0 + t))
					continue;
				st->qsa_rows++;
				if (cnt[t] != c->cnt[l * c->T + t] ||
				    memcmp(sel + t * width, c->sel + (l * c->T + t) * c->maxsel, (size_t)cnt[t] * 4))
					st->qsa_mismatch++;
			}
			free(cnt), free(tie);
		}
		free(sel);
		snprintf(name, sizeof(name), "%s/ple/ids/L%02zu", prefix, l);
		ple = oracle_array(o, name, &n, dims);
		if (ple) {
			size_t heads = (size_t)dims[1];
			const struct hb_layer_weights *L = &m->layers[l];
			for (size_t t = 0; t < c->T; t++) {
				st->ple_rows++;
				for (size_t h = 0; h < heads; h++)
					if (ple[t * heads + h] != c->ple[(l * c->T + t) * 64 + h])
						{ st->ple_mismatch++; break; }
			}
			(void)L;
		}
		free(ple);
	}
	snprintf(name, sizeof(name), "%s/logits", prefix);
	{
		float *lg = oracle_array(o, name, &n, dims);
		CHECK(lg != NULL);
		size_t V = (size_t)m->vocab_physical;
		CHECK(!lg || n == c->T * V);
		for (size_t t = 0; lg && n == c->T * V && t < c->T; t++) {
			double d = oracle_max_abs_diff(lg + t * V, logits + t * V, V);
			if (tn->on && c->pos0 + t >= tn->pos) { /* logits follow every layer */
				st->tainted_logit_err = oracle_max(st->tainted_logit_err, d);
				continue;
			}
			e->logits = oracle_max(e->logits, d);
			e->logit_values += V;
		}
		free(lg);
	}
}

static size_t argmax(const float *x, size_t n)
{
	size_t b = 0;
	for (size_t i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

static struct hb_model *convert_load(const char *set)
{
	struct hb_model *m = NULL;
	struct hb_convert_opts co;
	struct hb_error err;
	char src[4096];

	snprintf(src, sizeof(src), "%s/tests/fixtures/upstream/%s/checkpoint", hb_test_srcdir(), set);
	memset(&co, 0, sizeof(co));
	co.src_dir = src;
	co.out_path = "a.gguf";
	co.expert_codec = HB_CONV_EXPERTS_BF16;
	co.ple_codec = HB_CONV_PLE_BF16;
	CHECK_EQ_INT(hb_convert(&co, NULL, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_model_load("a.gguf", &m, &err), HB_OK);
	CHECK_STR(err.msg, "");
	return m;
}

/* The prompt's ids (at most MAXT) into toks; its length, 0 when absent. */
static size_t prompt_ids(const struct oracle *o, int p, int32_t *toks)
{
	char name[64];
	size_t T;
	uint64_t dims[4];
	int64_t *ids64;

	snprintf(name, sizeof(name), "pre/p%d/ids", p);
	ids64 = oracle_array(o, name, &T, dims);
	CHECK(ids64 && T <= MAXT);
	if (!ids64 || T > MAXT) {
		free(ids64);
		return 0;
	}
	for (size_t t = 0; t < T; t++)
		toks[t] = (int32_t)ids64[t];
	free(ids64);
	return T;
}

/* The first tie-dependent QSA selection of prompt p (qsa/tie bit 0), if any. */
static struct taint first_tie(const struct oracle *o, const struct hb_model *m, int p)
{
	struct taint tn = {false, 0, 0};
	char name[64];
	size_t n;
	uint64_t dims[4];

	for (size_t l = 0; l < (size_t)m->cfg.num_layers && !tn.on; l++) {
		int32_t *tie;
		snprintf(name, sizeof(name), "pre/p%d/qsa/tie/L%02zu", p, l);
		tie = oracle_array(o, name, &n, dims);
		for (size_t t = 0; tie && t < n && !tn.on; t++)
			if (tie[t] & 1)
				tn = (struct taint){true, l, t};
		free(tie);
	}
	return tn;
}

/*
 * expect_tainted: the route rows the tie rule must skip.  Only general p0
 * has a tie-dependent selection (pre/p0/qsa/tie/L02, row 9, bit 0; no other
 * tie bit is set in either set), so the skipped region there is layers
 * L02..L05 at positions 9..27 of the prefill and all 12 decode positions:
 * 4 x (19 + 12) = 124 rows; realshape skips none.
 */
static void run_set(const char *set, unsigned threads, unsigned expect_tainted, unsigned expect_qsa_ties)
{
	struct oracle o;
	struct hb_model *m = convert_load(set);
	struct hb_pool *pool = NULL;
	struct hb_error err;
	struct stats st;
	unsigned greedy_mismatch = 0;

	memset(&st, 0, sizeof(st));
	CHECK(oracle_open(&o, set));
	CHECK_EQ_INT(hb_pool_create(threads, &pool, NULL), HB_OK);
	for (int p = 0; m && p < 3; p++) {
		char name[64], prefix[32];
		size_t n, T, S;
		uint64_t dims[4];
		int64_t *in_ids, *next;
		int32_t toks[MAXT];
		float *logits;
		struct hb_session *s = NULL;
		struct capture c;
		struct taint tn;

		T = prompt_ids(&o, p, toks);
		if (!T)
			continue;
		tn = first_tie(&o, m, p);
		/* one prefill */
		logits = malloc(T * m->vocab_physical * sizeof(float));
		CHECK_EQ_INT(hb_session_create(m, pool, 256, &s, NULL), HB_OK);
		cap_init(&c, m, T, 0);
		CHECK_EQ_INT(hb_session_forward(s, toks, T, logits, observe, &c, &err), HB_OK);
		snprintf(prefix, sizeof(prefix), "pre/p%d", p);
		compare(&o, m, prefix, PRE, &c, logits, &tn, &st);
		cap_free(&c);
		free(logits);
		/* decode: token by token through the cache after the prefill */
		snprintf(name, sizeof(name), "dec/p%d/in_ids", p);
		in_ids = oracle_array(&o, name, &S, dims);
		snprintf(name, sizeof(name), "dec/p%d/next_ids", p);
		next = oracle_array(&o, name, &n, dims);
		CHECK(in_ids && next);
		logits = malloc(S * m->vocab_physical * sizeof(float));
		cap_init(&c, m, S, T);
		for (size_t i = 0; in_ids && next && i < S; i++) {
			int32_t tok = (int32_t)in_ids[i];
			float *row = logits + i * m->vocab_physical;
			CHECK_EQ_INT(hb_session_forward(s, &tok, 1, row, observe, &c, NULL), HB_OK);
			if (tn.on)
				continue; /* the continuation may legitimately differ */
			if ((int64_t)argmax(row, (size_t)m->vocab_physical) != next[i])
				greedy_mismatch++;
			if (i + 1 < S && (int64_t)argmax(row, (size_t)m->vocab_physical) != in_ids[i + 1])
				greedy_mismatch++;
		}
		snprintf(prefix, sizeof(prefix), "dec/p%d", p);
		compare(&o, m, prefix, DEC, &c, logits, &tn, &st);
		cap_free(&c);
		free(logits), free(in_ids), free(next);
		CHECK_EQ_INT(hb_session_counters(s)->dense_mask_bytes, 0);
		hb_session_free(s);
	}
	printf("# %s: %u route rows downstream of a tie skipped (%u of them differ from upstream; "
	       "max |logit err| there %.3g)\n", set, st.tainted_skipped, st.tainted_route_mismatch,
	       st.tainted_logit_err);
	printf("# %s: routes %u/%u exact, qsa %u/%u exact (%u tie rows skipped), ple %u/%u exact, "
	       "greedy mismatches %u\n",
	       set, st.route_rows - st.route_mismatch, st.route_rows, st.qsa_rows - st.qsa_mismatch, st.qsa_rows,
	       st.qsa_tie_skipped, st.ple_rows - st.ple_mismatch, st.ple_rows, greedy_mismatch);
	for (int ph = 0; ph < NPHASE; ph++) {
		printf("# measured %s %s: logits %.3e, weights %.3e, hidden", set, phase_name[ph],
		       st.e[ph].logits, st.e[ph].weights);
		for (size_t l = 0; m && l < (size_t)m->cfg.num_layers; l++)
			printf(" %.3e", st.e[ph].hidden[l]);
		printf("\n");
	}
	CHECK(st.route_rows > 0 && st.qsa_rows > 0 && st.ple_rows > 0);
	CHECK_EQ_INT(st.route_mismatch, 0);
	CHECK_EQ_INT(st.qsa_mismatch, 0);
	CHECK_EQ_INT(st.ple_mismatch, 0);
	CHECK_EQ_INT(greedy_mismatch, 0);
	CHECK_EQ_INT(st.tainted_skipped, expect_tainted);
	CHECK_EQ_INT(st.qsa_tie_skipped, expect_qsa_ties);
	if (m) {
		CHECK((size_t)m->cfg.num_layers <= MAXL);
		bounds_failed(set, (size_t)m->cfg.num_layers, &st, true);
	}
	hb_pool_destroy(pool);
	hb_model_free(m);
	oracle_close(&o);
}

static void realshape_matches_upstream(void)
{
	run_set("realshape", 0, 0, 0);
}

static void general_matches_upstream(void)
{
	run_set("general", 1, 124, 1);
}

/*
 * The comparisons can fail.  realshape p0 is prefilled and decoded once,
 * compared (within every bound), then compared again with one value of its
 * capture spoiled at a time: a NaN in a hidden stream, a route weight or a
 * logit must make that maximum NaN and fail its bound, and an error of
 * 1.5 x the bound added to one value must fail it too.
 */
static void comparisons_fail_on_nan_and_excess(void)
{
	struct oracle o;
	struct hb_model *m = convert_load("realshape");
	struct hb_pool *pool = NULL;
	struct hb_session *s = NULL;
	struct capture pre, dec;
	float *lpre = NULL, *ldec = NULL;
	int32_t toks[MAXT];
	size_t T, S, V, L, hcH, k;
	uint64_t dims[4];
	int64_t *in_ids = NULL;
	const struct taint none = {false, 0, 0};
	const struct measured *x = measured_for("realshape", PRE);

	CHECK(m != NULL && x != NULL);
	CHECK(oracle_open(&o, "realshape"));
	if (!m || !x)
		return;
	CHECK_EQ_INT(hb_pool_create(1, &pool, NULL), HB_OK);
	V = (size_t)m->vocab_physical;
	L = (size_t)m->cfg.num_layers;
	T = prompt_ids(&o, 0, toks);
	in_ids = oracle_array(&o, "dec/p0/in_ids", &S, dims);
	CHECK(T > 0 && in_ids != NULL);
	if (!T || !in_ids)
		return;
	lpre = malloc(T * V * sizeof(float));
	ldec = malloc(S * V * sizeof(float));
	CHECK_EQ_INT(hb_session_create(m, pool, 256, &s, NULL), HB_OK);
	cap_init(&pre, m, T, 0);
	cap_init(&dec, m, S, T);
	CHECK_EQ_INT(hb_session_forward(s, toks, T, lpre, observe, &pre, NULL), HB_OK);
	for (size_t i = 0; i < S; i++) {
		int32_t tok = (int32_t)in_ids[i];
		CHECK_EQ_INT(hb_session_forward(s, &tok, 1, ldec + i * V, observe, &dec, NULL), HB_OK);
	}
	hcH = pre.hcH;
	k = pre.k;
	for (int mut = 0; mut <= 6; mut++) {
		struct stats st;
		float *slot = NULL, keep = 0;
		double *got = NULL, bound = 0;
		size_t l = 5, t = 11;

		memset(&st, 0, sizeof(st));
		switch (mut) {
		case 1: case 4: slot = &pre.hid[(l * T + t) * hcH + 77]; got = &st.e[PRE].hidden[l];
			bound = MARGIN * x->hidden[l]; break;
		case 2: case 5: slot = &pre.w[(l * T + t) * k + 3]; got = &st.e[PRE].weights;
			bound = MARGIN * x->weights; break;
		case 3: case 6: slot = &lpre[t * V + 500]; got = &st.e[PRE].logits;
			bound = MARGIN * x->logits; break;
		default: break;
		}
		if (slot) {
			keep = *slot;
			*slot = mut <= 3 ? NAN : (float)(*slot + 1.5 * bound);
		}
		compare(&o, m, "pre/p0", PRE, &pre, lpre, &none, &st);
		compare(&o, m, "dec/p0", DEC, &dec, ldec, &none, &st);
		if (!slot) {
			/* p0 alone is within the bounds measured over p0..p2 */
			CHECK_EQ_INT(bounds_failed("realshape", L, &st, true), 0);
		} else {
			if (mut <= 3)
				CHECK(isnan(*got));
			CHECK(!oracle_within(*got, bound));
			/* exactly the spoiled maximum fails, and it fails the table too */
			CHECK_EQ_INT(bounds_failed("realshape", L, &st, false), 1);
			*slot = keep;
		}
	}
	/* the helpers themselves: NaN survives a running maximum from either side */
	{
		const float a[3] = {1, NAN, 3}, b[3] = {1, 2, 3}, inf[1] = {INFINITY};
		CHECK(isnan(oracle_max(NAN, 1)) && isnan(oracle_max(1, NAN)));
		CHECK(isnan(oracle_max_abs_diff(a, b, 3)) && isnan(oracle_max_abs_diff(b, a, 3)));
		CHECK(isinf(oracle_max_abs_diff(inf, b, 1)) && isnan(oracle_max_abs_diff(inf, inf, 1)));
		CHECK(oracle_max_abs_diff(a, b, 1) == 0 && oracle_max_abs_diff(b, b, 3) == 0);
		CHECK(!oracle_within(NAN, 1) && !oracle_within(INFINITY, 1e300) && oracle_within(1, 1));
	}
	cap_free(&pre), cap_free(&dec);
	free(lpre), free(ldec), free(in_ids);
	hb_session_free(s);
	hb_pool_destroy(pool);
	hb_model_free(m);
	oracle_close(&o);
}

HB_TEST_MAIN(T(realshape_matches_upstream), T(general_matches_upstream),
	     T(comparisons_fail_on_nan_and_excess))
