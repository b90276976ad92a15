/*
 * Unit tests: QSA selection, compact gather and attention inside a model at
 * long context (AFN-011, AFN-016, AFN-017).  This binary is make
 * test-long's (360 s wall measured on 2 shared cores: prefills of 25.6,
 * 55.8 and 250.7 s), not in make test's list; it runs
 * only with QSA_LONG=1, which test-long sets, and FAILS without it, so the
 * long evidence can never count as passed without having run.
 *
 * The model is a tiny development checkpoint with the released QSA
 * parameters (indexer budget 2048, compress ratio 4) and one decoder layer,
 * the sparse one (tests/long/make-long-model.sh), converted with the dev
 * profile.  For 65,537, 100,000 and 262,144 tokens (the released profile's
 * context) a session is prefilled in chunks of pseudo-random tokens, and:
 *
 *   every query's HB_OBS_QSA selection has min(groups, 512) whole groups
 *   plus the incomplete tail, chronological, group-aligned at the first
 *   position, never past the query, the tail always in; below the cut it is
 *   the whole visible run;
 *
 *   at sampled queries and the last ones, the selection is EXACTLY the
 *   reference (qsa_ref_select: sort every group, keep 512, emit) on the
 *   scores the session computed, and those scores agree with a double
 *   precision recomputation from the index query and every pooled group
 *   key in the session's cache; the query's attention output agrees with a
 *   double-precision gather-and-softmax over exactly the reference rows.
 *   The session exposes no scores, so the observer reads them through the
 *   session's private layout (hb_session_int.h) at the moment HB_OBS_QSA
 *   fires, after the query's block of HB_QSA_BLOCK queries was selected
 *   and attended: its slot's group count and scores, its projections and
 *   its gated output, a test-only peek, nothing is written;
 *
 *   partition invariance at full length: the last tokens as one chunk and,
 *   in a fork, as single-token decodes give identical selections, logits
 *   and state digest; at 65,537 the whole sequence as ONE chunk gives the
 *   same selections for every query (a hash over all observations) and
 *   the same digest as the chunked prefill;
 *
 *   the counters are exact: qsa_keys_attended counts selected rows once per
 *   query (all heads share the selection), so it is the sum of the
 *   observed widths and at most queries x (budget + ratio - 1);
 *   qsa_groups_scored is the sum of floor(visible / ratio);
 *   dense_mask_bytes stays 0; and peak RSS stays within the caches (linear
 *   in tokens) plus a fixed slack, far below one byte per query x key.
 *
 * Each length prints its wall time, peak RSS and counters.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb-convert/hb_convert.h"
#include "math/hb_math.h"
#include "graph/hb_model.h"
#include "hb_pool.h"
#include "graph/hb_session.h"
#include "graph/hb_session_int.h"
#include "qsa_ref.h"

#include <math.h>
#include <sys/resource.h>
#include <time.h>

enum { TAIL_K = 6, SAMPLE_STRIDE = 8191 };

/* what one observer run sees */
struct watch {
	struct hb_session *s;          /* the session running (for the peek) */
	const struct hb_model *m;
	int32_t layer;
	uint64_t base, last;           /* the last position of the run */
	uint64_t ratio, keep, budget;
	/* every query */
	uint64_t queries, width_sum, bad_count, bad_order, bad_range, bad_align, bad_tail, bad_dense;
	uint64_t hash;                 /* sum of per-observation FNV hashes */
	/* the reference, at sampled queries */
	bool reference;
	uint64_t ref_checked, ref_bad, score_bad, groups_bad;
	double score_err;
	int32_t *ref_rows, *rows_copy;
	/* attention of the sampled queries, checked as they are observed */
	uint64_t attn_checked, attn_bad;
	double attn_err;
	/* the selections of the last TAIL_K positions */
	int32_t *tail_rows[TAIL_K];
	size_t tail_n[TAIL_K];
};

static void fnv(uint64_t *h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		*h = (*h ^ b[i]) * 1099511628211ull;
}

static bool watch_init(struct watch *w, const struct hb_model *m, uint64_t last)
{
	const struct hb_qwen_config *c = &m->cfg;
	size_t width = (size_t)(c->indexer_budget + c->indexer_compress_ratio);

	memset(w, 0, sizeof(*w));
	w->m = m;
	w->layer = -1;
	for (uint32_t l = 0; l < c->num_layers; l++)
		if (c->layer_kind[l] == HB_LAYER_SPARSE)
			w->layer = (int32_t)l;
	w->last = last;
	w->ratio = c->indexer_compress_ratio;
	w->budget = c->indexer_budget;
	w->keep = c->indexer_budget / c->indexer_compress_ratio;
	w->ref_rows = malloc(width * sizeof(int32_t));
	w->rows_copy = malloc(width * sizeof(int32_t));
	for (size_t i = 0; i < TAIL_K; i++)
		w->tail_rows[i] = malloc(width * sizeof(int32_t));
	return w->layer >= 0 && w->ref_rows && w->rows_copy && w->tail_rows[TAIL_K - 1];
}

static void watch_free(struct watch *w)
{
	free(w->ref_rows), free(w->rows_copy);
	for (size_t i = 0; i < TAIL_K; i++)
		free(w->tail_rows[i]);
}

/* Structure every selection must have, whatever the scores. */
static void check_shape(struct watch *w, uint64_t pos, const int32_t *p, size_t n)
{
	uint64_t visible = pos - w->base + 1, groups = visible / w->ratio, tail = visible % w->ratio;
	uint64_t whole = (groups < w->keep ? groups : w->keep) * w->ratio;

	w->queries++;
	w->width_sum += n;
	if (n != whole + tail) {
		w->bad_count++;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if ((uint64_t)p[i] < w->base || (uint64_t)p[i] > pos)
			w->bad_range++;
		if (i && p[i - 1] >= p[i])
			w->bad_order++;
	}
	/* whole groups: ratio consecutive positions starting at base + k ratio,
	 * all before the tail */
	for (size_t i = 0; i < whole; i += w->ratio) {
		uint64_t rel = (uint64_t)p[i] - w->base;
		if (rel % w->ratio || rel + w->ratio > groups * w->ratio)
			w->bad_align++;
		for (size_t r = 1; r < w->ratio; r++)
			if (p[i + r] != p[i] + (int32_t)r)
				w->bad_align++;
	}
	/* the incomplete tail, always included, last */
	for (uint64_t j = 0; j < tail; j++)
		if ((uint64_t)p[whole + j] != w->base + groups * w->ratio + j)
			w->bad_tail++;
	/* below the cut the selection is the whole visible run (AFN-017) */
	if (groups <= w->keep)
		for (size_t i = 0; i < n; i++)
			if ((uint64_t)p[i] != w->base + i)
				w->bad_dense++;
}

static void check_attention(struct watch *w, uint64_t pos, size_t n);

/* The selection against the sorting reference on the session's own scores,
 * and the scores against a double-precision recomputation from the cached
 * pooled keys (read at the moment of selection, see the file comment). */
static void check_reference(struct watch *w, uint64_t pos, const int32_t *p, size_t n)
{
	const struct hb_session *s = w->s;
	const struct hb_qwen_config *c = &w->m->cfg;
	const struct hb_qsa_state *st = &s->qsa[w->layer];
	size_t ih = (size_t)c->indexer_n_heads, ihd = (size_t)c->indexer_head_dim;
	uint64_t visible = pos - w->base + 1, groups = visible / w->ratio;
	const float *iq = s->big3 + (size_t)(pos - s->pos) * (ih + 1) * ihd;
	size_t rn, slot = (size_t)(pos - s->pos) % HB_QSA_BLOCK;
	const float *scores = s->scores + slot * s->scores_ld;

	w->ref_checked++;
	if (s->qgroups[slot] != groups) {
		w->groups_bad++;
		return;
	}
	for (uint64_t g = 0; g < groups; g++) {
		double sc = 0, err;
		for (size_t h = 0; h < ih; h++) {
			double d = 0;
			for (size_t i = 0; i < ihd; i++)
				d += (double)iq[h * ihd + i] * (double)st->pooled[g * ihd + i];
			sc += d > 0 ? d : 0;
		}
		sc /= sqrt((double)ihd);
		err = fabs(sc - (double)scores[g]);
		/* NaN-aware: a NaN score is an error, never the smallest one */
		w->score_err = hb_test_max_nan(w->score_err, err);
		if (!(err <= 1e-4 * (1.0 + fabs(sc))))
			w->score_bad++;
	}
	rn = qsa_ref_select(scores, groups, w->keep, w->ratio, visible, w->ref_rows);
	if (rn != n) {
		w->ref_bad++;
		return;
	}
	for (size_t i = 0; i < n; i++)
		if ((uint64_t)p[i] != w->base + (uint64_t)w->ref_rows[i]) {
			w->ref_bad++;
			return;
		}
	/* the query's projection (bias added, not yet normed) and its gated
	 * output are both in place while its observation runs */
	memcpy(w->rows_copy, w->ref_rows, n * sizeof(int32_t));
	check_attention(w, pos, n);
}

/* Gather-and-softmax in double over exactly the reference rows, per head,
 * gated; against what the layer wrote for that query. */
static void check_attention(struct watch *w, uint64_t pos, size_t n)
{
	const struct hb_session *s = w->s;
	const struct hb_model *m = w->m;
	const struct hb_qwen_config *c = &m->cfg;
	const struct hb_qsa_weights *qw = &m->layers[w->layer].qsa;
	const struct hb_qsa_state *st = &s->qsa[w->layer];
	size_t nh = (size_t)c->num_heads, nkv = (size_t)c->num_kv_heads, hd = (size_t)c->head_dim;
	const float *q = s->big + (size_t)(pos - s->pos) * 2 * nh * hd;
	const float *got = s->qout + (size_t)(pos - s->pos) % HB_QSA_BLOCK * nh * hd;
	double *lg = malloc(n * sizeof(double));
	float *qh = malloc(hd * sizeof(float));

	w->attn_checked++;
	for (size_t h = 0; h < nh && lg && qh; h++) {
		size_t g = h / (nh / nkv);
		double mx = -INFINITY, sum = 0;
		hb_rmsnorm_zc(q + h * 2 * hd, qw->q_norm, hd, hd, c->rms_norm_eps, qh);
		hb_rope(m, qh, pos);
		for (size_t i = 0; i < n; i++) {
			const float *k = st->k + ((size_t)w->rows_copy[i] * nkv + g) * hd;
			double d = 0;
			for (size_t j = 0; j < hd; j++)
				d += (double)qh[j] * (double)k[j];
			lg[i] = d / sqrt((double)hd);
			if (lg[i] > mx)
				mx = lg[i];
		}
		for (size_t i = 0; i < n; i++)
			sum += (lg[i] = exp(lg[i] - mx));
		for (size_t j = 0; j < hd; j++) {
			double acc = 0, gate = q[h * 2 * hd + hd + j], err;
			for (size_t i = 0; i < n; i++)
				acc += lg[i] / sum * (double)st->v[((size_t)w->rows_copy[i] * nkv + g) * hd + j];
			acc *= 1.0 / (1.0 + exp(-gate));
			err = fabs(acc - (double)got[h * hd + j]);
			w->attn_err = hb_test_max_nan(w->attn_err, err);
			if (!(err <= 1e-5 + 1e-4 * fabs(acc)))
				w->attn_bad++;
		}
	}
	free(lg), free(qh);
}

static bool sampled(const struct watch *w, uint64_t pos)
{
	uint64_t rel = pos - w->base;
	return rel % SAMPLE_STRIDE == SAMPLE_STRIDE - 2 || pos + TAIL_K + 1 >= w->last ||
	       (rel >= 2 * w->budget && rel < 2 * w->budget + 8);
}

static void observe(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct watch *w = ctx;
	const int32_t *p = data;
	uint64_t h = 1469598103934665603ull;

	if (kind != HB_OBS_QSA || layer != w->layer)
		return;
	check_shape(w, pos, p, n);
	fnv(&h, &pos, sizeof(pos));
	fnv(&h, p, n * sizeof(int32_t));
	w->hash += h;
	if (pos + TAIL_K > w->last) {
		size_t i = (size_t)(pos + TAIL_K - 1 - w->last);
		memcpy(w->tail_rows[i], p, n * sizeof(int32_t));
		w->tail_n[i] = n;
	}
	if (!w->reference)
		return;
	if (sampled(w, pos))
		check_reference(w, pos, p, n);
}

static void expect_clean(const char *what, uint64_t len, const struct watch *w)
{
	if (w->bad_count || w->bad_order || w->bad_range || w->bad_align || w->bad_tail || w->bad_dense ||
	    w->ref_bad || w->score_bad || w->groups_bad || w->attn_bad)
		hb_check_fail(__FILE__, __LINE__,
			      "%s at %" PRIu64 ": count %" PRIu64 " order %" PRIu64 " range %" PRIu64
			      " align %" PRIu64 " tail %" PRIu64 " dense %" PRIu64 " ref %" PRIu64
			      " scores %" PRIu64 " groups %" PRIu64 " attention %" PRIu64,
			      what, len, w->bad_count, w->bad_order, w->bad_range, w->bad_align, w->bad_tail,
			      w->bad_dense, w->ref_bad, w->score_bad, w->groups_bad, w->attn_bad);
}

/* Exact counter values for queries at visible lengths from..to. */
static void expected_counters(uint64_t from, uint64_t to, uint64_t ratio, uint64_t keep,
			      uint64_t *keys, uint64_t *groups)
{
	*keys = *groups = 0;
	for (uint64_t v = from; v <= to; v++) {
		uint64_t g = v / ratio;
		*groups += g;
		*keys += (g < keep ? g : keep) * ratio + v % ratio;
	}
}

static void tokens_for(int32_t *t, size_t n, uint64_t vocab, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		t[i] = (int32_t)(x % (uint32_t)vocab);
	}
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Peak RSS since the last reset_peak(): VmHWM, which writing 5 to
 * /proc/self/clear_refs resets (Linux 4.0+); getrusage's ru_maxrss (never
 * reset) where /proc cannot say. */
static void reset_peak(void)
{
	FILE *f = fopen("/proc/self/clear_refs", "w");
	if (f)
		fputs("5", f), fclose(f);
}

static long peak_rss_kib(void)
{
	struct rusage ru;
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			kib = strtol(line + 6, NULL, 10);
	if (f)
		fclose(f);
	if (kib > 0)
		return kib;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/* Bytes a session holds for `n` tokens: the caches (linear in n) and the
 * scratch of a block of HB_QSA_BLOCK queries (a score per group each, heaps,
 * selected rows, normed queries and outputs; probabilities for up to 4
 * workers). */
static uint64_t session_bytes(const struct hb_qwen_config *c, uint64_t n)
{
	uint64_t kvw = c->num_kv_heads * c->head_dim, ihd = c->indexer_head_dim, r = c->indexer_compress_ratio;
	uint64_t width = c->indexer_budget + r + 8, keep = c->indexer_budget / r;
	return n * (2 * kvw + ihd + 1) * 4 + (n / r + 1) * (ihd + HB_QSA_BLOCK) * 4 +
	       (HB_QSA_BLOCK * (keep + width) + width + 4 * width) * 4 +
	       2 * HB_QSA_BLOCK * c->num_heads * c->head_dim * 4;
}

/* Prefill tokens [0, n) in chunks of irregular sizes (odd ones included). */
static bool prefill(struct hb_session *s, const int32_t *tok, size_t n, struct watch *w)
{
	static const size_t sizes[] = {4096, 4093, 1, 4099, 2053, 3};
	size_t done = 0, c = 0;
	struct hb_error err;

	while (done < n) {
		size_t k = sizes[c++ % HB_ARRAY_LEN(sizes)];
		if (k > n - done)
			k = n - done;
		hb_error_clear(&err);
		if (hb_session_forward(s, tok + done, k, NULL, observe, w, &err)) {
			hb_check_fail(__FILE__, __LINE__, "prefill at %zu: %s", done, err.msg);
			return false;
		}
		done += k;
	}
	return true;
}

static struct hb_model *long_model(void)
{
	struct hb_convert_opts o;
	struct hb_model *m = NULL;
	struct hb_error err;
	char cmd[8192];

	snprintf(cmd, sizeof(cmd), "'%s/tests/long/make-long-model.sh' ck > ck.log 2>&1", hb_test_srcdir());
	if (system(cmd) != 0) {
		hb_check_fail(__FILE__, __LINE__, "%s failed (see ck.log)", cmd);
		return NULL;
	}
	memset(&o, 0, sizeof(o));
	o.src_dir = "ck";
	o.out_path = "long.gguf";
	o.expert_codec = HB_CONV_EXPERTS_BF16;
	o.ple_codec = HB_CONV_PLE_BF16;
	o.profile = "dev";
	o.threads = 2;
	hb_error_clear(&err);
	if (hb_convert(&o, NULL, &err) || hb_model_load("long.gguf", &m, &err)) {
		hb_check_fail(__FILE__, __LINE__, "long model: %s: %s", err.id ? err.id : "-", err.msg);
		return NULL;
	}
	return m;
}

static void one_length(const struct hb_model *m, struct hb_pool *pool, uint64_t N)
{
	const struct hb_qwen_config *c = &m->cfg;
	size_t V = (size_t)m->vocab_physical, head = (size_t)(N - TAIL_K);
	int32_t *tok = malloc((size_t)N * sizeof(int32_t));
	float *la = malloc(TAIL_K * V * sizeof(float)), *lb = malloc(TAIL_K * V * sizeof(float));
	struct hb_session *a = NULL, *b = NULL;
	struct watch wa, wb;
	struct hb_error err;
	uint8_t da[32], db[32];
	uint64_t keys, groups;
	double t0, t1, t2;
	long rss_before;

	reset_peak();
	rss_before = peak_rss_kib();

	CHECK(tok && la && lb && watch_init(&wa, m, N - 1) && watch_init(&wb, m, N - 1));
	if (!tok || !la || !lb)
		return;
	tokens_for(tok, (size_t)N, m->vocab_physical, (uint32_t)N);
	CHECK_EQ_INT(hb_session_create(m, pool, N, &a, NULL), HB_OK);
	if (!a)
		return;
	wa.s = a;
	wa.reference = true;
	t0 = now_s();
	if (!prefill(a, tok, head, &wa))
		goto out;
	t1 = now_s();
	/* the last TAIL_K tokens: one chunk here, single decodes in a fork */
	CHECK_EQ_INT(hb_session_fork(a, &b, NULL), HB_OK);
	wb.s = b;
	wb.reference = true;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_session_forward(a, tok + head, TAIL_K, la, observe, &wa, &err), HB_OK);
	t2 = now_s();
	for (size_t i = 0; b && i < TAIL_K; i++)
		CHECK_EQ_INT(hb_session_forward(b, tok + head + i, 1, lb + i * V, observe, &wb, NULL), HB_OK);
	CHECK_EQ_U64(hb_session_frontier(a), N);
	CHECK_EQ_U64(hb_session_frontier(b), N);
	expect_clean("prefill", N, &wa);
	expect_clean("decode", N, &wb);
	CHECK(wa.ref_checked >= N / SAMPLE_STRIDE + TAIL_K);
	/* every sampled query's attention, decodes and a chunk's last included */
	CHECK(wa.attn_checked == wa.ref_checked);
	CHECK(wb.ref_checked == TAIL_K);
	CHECK(wb.attn_checked == TAIL_K);
	/* the last query sees N keys: 512 groups and the tail */
	CHECK_EQ_U64(wa.tail_n[TAIL_K - 1], c->indexer_budget + N % c->indexer_compress_ratio);
	for (size_t i = 0; i < TAIL_K; i++) {
		CHECK_EQ_U64(wa.tail_n[i], wb.tail_n[i]);
		CHECK(memcmp(wa.tail_rows[i], wb.tail_rows[i], wa.tail_n[i] * sizeof(int32_t)) == 0);
	}
	CHECK(memcmp(la, lb, TAIL_K * V * sizeof(float)) == 0);
	hb_session_digest(a, da);
	if (b)
		hb_session_digest(b, db);
	CHECK(b && memcmp(da, db, 32) == 0);
	/* counters: exact, and bounded by the selected width per query */
	{
		const struct hb_session_counters *k = hb_session_counters(a);
		uint64_t cap = c->indexer_budget + c->indexer_compress_ratio - 1;
		expected_counters(1, N, c->indexer_compress_ratio, c->indexer_budget / c->indexer_compress_ratio,
				  &keys, &groups);
		CHECK_EQ_U64(k->tokens, N);
		CHECK_EQ_U64(k->qsa_keys_attended, keys);
		CHECK_EQ_U64(k->qsa_keys_attended, wa.width_sum);
		CHECK(k->qsa_keys_attended <= k->tokens * cap);
		CHECK_EQ_U64(k->qsa_groups_scored, groups);
		CHECK_EQ_U64(k->dense_mask_bytes, 0);
		if (b) {
			const struct hb_session_counters *kb = hb_session_counters(b);
			uint64_t keys_b, groups_b;
			expected_counters(N - TAIL_K + 1, N, c->indexer_compress_ratio,
					  c->indexer_budget / c->indexer_compress_ratio, &keys_b, &groups_b);
			CHECK_EQ_U64(kb->tokens, TAIL_K);
			CHECK_EQ_U64(kb->qsa_keys_attended, keys_b);
			CHECK_EQ_U64(kb->qsa_groups_scored, groups_b);
			CHECK_EQ_U64(kb->dense_mask_bytes, 0);
		}
		/* memory: two sessions' caches and a fixed slack (model, chunk
		 * workspace, reference scratch); one byte per query x key would
		 * be N^2 = 4 GiB at 65,537 */
		{
			uint64_t bound = 2 * session_bytes(c, N) + (256u << 20);
			long rss = peak_rss_kib();
			CHECK((uint64_t)rss * 1024 < bound);
			printf("# %" PRIu64 " tokens: prefill %.1f s (%.1f us/token), last %d as one chunk %.3f s; "
			       "peak RSS %ld KiB (at start %ld; bound %" PRIu64 " KiB, caches %" PRIu64 " KiB/session)\n",
			       N, t1 - t0, (t1 - t0) * 1e6 / (double)head, TAIL_K, t2 - t1, rss, rss_before,
			       bound >> 10, session_bytes(c, N) >> 10);
			printf("#   counters: tokens %" PRIu64 ", qsa_keys_attended %" PRIu64 " (<= %" PRIu64
			       " = tokens x %" PRIu64 "), qsa_groups_scored %" PRIu64 ", dense_mask_bytes %" PRIu64 "\n",
			       k->tokens, k->qsa_keys_attended, k->tokens * cap, cap, k->qsa_groups_scored,
			       k->dense_mask_bytes);
			printf("#   checked: %" PRIu64 " selections shaped, %" PRIu64 " against the reference "
			       "(max score error %.2e), %" PRIu64 " attention outputs (max error %.2e), "
			       "last %d as decodes: identical\n",
			       wa.queries + wb.queries, wa.ref_checked + wb.ref_checked, hb_test_max_nan(wa.score_err, wb.score_err),
			       wa.attn_checked + wb.attn_checked, hb_test_max_nan(wa.attn_err, wb.attn_err), TAIL_K);
		}
	}
	/* at the first length, the whole sequence as ONE chunk, on a pool of
	 * one thread more (QSA's blocks of queries spread over it): the same
	 * selection for every query and the same state */
	if (N == 65537) {
		struct hb_session *one = NULL;
		struct hb_pool *more = NULL;
		struct watch wo;
		double u0, u1;
		CHECK(watch_init(&wo, m, N - 1));
		CHECK_EQ_INT(hb_pool_create(hb_pool_size(pool) + 1, &more, NULL), HB_OK);
		CHECK_EQ_INT(hb_session_create(m, more, N, &one, NULL), HB_OK);
		wo.s = one;
		reset_peak();
		u0 = now_s();
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_session_forward(one, tok, (size_t)N, NULL, observe, &wo, &err), HB_OK);
		u1 = now_s();
		expect_clean("one chunk", N, &wo);
		CHECK_EQ_U64(wo.queries, N);
		CHECK(wo.hash == wa.hash);
		if (one) {
			hb_session_digest(one, db);
			CHECK(memcmp(da, db, 32) == 0);
			CHECK_EQ_U64(hb_session_counters(one)->qsa_keys_attended, keys);
			CHECK_EQ_U64(hb_session_counters(one)->dense_mask_bytes, 0);
		}
		/* three sessions' caches now, and a T = N chunk workspace */
		CHECK((uint64_t)peak_rss_kib() * 1024 < 3 * session_bytes(c, N) + N * 4096 + (256u << 20));
		printf("#   %" PRIu64 " tokens as one chunk on %u threads: %.1f s, peak RSS %ld KiB; every selection "
		       "and the digest as chunked on %u\n", N, hb_pool_size(more), u1 - u0, peak_rss_kib(),
		       hb_pool_size(pool));
		hb_session_free(one);
		hb_pool_destroy(more);
		watch_free(&wo);
	}
out:
	hb_session_free(a);
	hb_session_free(b);
	watch_free(&wa);
	watch_free(&wb);
	free(tok), free(la), free(lb);
}

static void long_model_contexts(void)
{
	static const uint64_t lengths[] = {65537, 100000, 262144};
	struct hb_model *m;
	struct hb_pool *pool = NULL;

	if (!getenv("QSA_LONG") || strcmp(getenv("QSA_LONG"), "1")) {
		hb_check_fail(__FILE__, __LINE__, "QSA_LONG=1 is not set: this is make test-long's case, "
			      "which sets it; it does not pass without running");
		return;
	}
	if (!(m = long_model()))
		return;
	CHECK_EQ_U64(m->cfg.indexer_budget, 2048);
	CHECK_EQ_U64(m->cfg.indexer_compress_ratio, 4);
	CHECK_EQ_U64(m->cfg.max_position_embeddings, 262144);
	CHECK_STR(m->profile, "dev");
	CHECK_EQ_INT(hb_pool_create(0, &pool, NULL), HB_OK);
	for (size_t i = 0; i < HB_ARRAY_LEN(lengths); i++)
		one_length(m, pool, lengths[i]);
	hb_pool_destroy(pool);
	hb_model_free(m);
}

HB_TEST_MAIN(T(long_model_contexts))
