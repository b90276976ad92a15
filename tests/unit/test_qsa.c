/*
 * Unit tests: QSA selection and compact attention, model-free (AFN-011,
 * AFN-016, AFN-017) with the real checkpoint's parameters (budget 2048,
 * ratio 4, 16 index heads of 128).
 *
 * The oracle is tests/unit/qsa_ref.c, which shares no code with libkern: it
 * recomputes the indexer scores in double (relu(q . k) per head, summed over
 * heads, per group), selects from ITS OWN scores with a full sort, and
 * attends in double.  Every selection is checked three ways:
 *
 *   scores     each implementation score within SCORE_ERR_ULPS units of
 *              2^-24 x (sum over heads and dims of |q_i k_i|) / sqrt(dim)
 *              of the double score (measured and chosen below);
 *   selection  against the reference's selection from the reference's
 *              scores: byte-identical rows whenever the gap between the
 *              last kept and the first dropped reference score exceeds
 *              twice the largest score bound; when it does not (a near tie
 *              at the cut, which float rounding may legitimately resolve
 *              either way), every group whose reference score is clear of
 *              the cut by more than that must be in (or out), and the count
 *              must match;
 *   tie rule   exactly, against the reference selection applied to the
 *              implementation's own float scores: for equal scores the rule
 *              (score descending, group ascending) decides, and this check
 *              sees the exact ties the double comparison cannot.
 *
 * The long contexts (65,537, 100,000 and 262,144 visible tokens) are cases
 * only when QSA_LONG=1 (make test-long); otherwise they are neither run nor
 * listed, so the plan counts only what ran.
 */
#include "hb_base.h"
#include "harness.h"
#include "backend/hb_backend.h"
#include "qsa_ref.h"

#include <math.h>
#include <sys/resource.h>
#include <time.h>

enum { HEADS = 16, DIM = 128, BUDGET = 2048, RATIO = 4, KEEP = BUDGET / RATIO, HD = 32 };

/*
 * Score bound, in units of u * A_g, u = 2^-24 and A_g = sum_h sum_i
 * |q_h,i k_g,i| / sqrt(dim).  The worst case of any summation order is
 * about (dim + heads + 3) u A_g (147 for the real shape); hb_dot's eight
 * partial sums do much better.  Measured over every score of this file
 * (16 x 128, 8 x 16, 6 x 8, 3 x 13, 1 x 1; magnitudes 1e-3 .. 1e3, and
 * every selection case): at most 1.19 u A_g with gcc -O0, -O1, -O2 and
 * -O2 -march=native (FMA), 2.91 with -O3 -ffast-math.  The gate is
 * 4 u A_g, 3.4x the normal-build measurement and 37x below the order-free
 * worst case: about 6e-6 absolute on scores of about 2 at the real shape,
 * while a missing ReLU, a ReLU after the head sum, a dropped head or a
 * missing 1/sqrt(dim) moves a score by O(1) (checked below).  The same
 * value is the tie band of the selection check (twice the largest bound).
 */
#define SCORE_ERR_ULPS 4.0
#define U24 (1.0 / 16777216.0)

/*
 * Attention bound, absolute, on outputs that are convex combinations of
 * values in [-1, 1].  Measured against the double reference over every
 * attention of this file (1 .. 2,051 rows, scale 0.17, 32 dims): at most
 * 5.96e-8 with gcc -O0 .. -O2 (and -march=native), 1.19e-7 with -O3
 * -ffast-math.  The gate is 2.5e-7, 4.2x the normal-build measurement; a
 * value weight rounded to half precision fails it (tried: outputs 1.2e-4 off).
 */
#define ATTEND_ERR 2.5e-7

static double worst_score_ulps, worst_attend_err;
static unsigned exact_selections, band_selections;

static uint32_t rng = 12345;
static float frand(void)
{
	rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
	return (float)(rng % 20001) / 10000.0f - 1.0f;
}

struct ws {
	float *pooled, *scores, *iq;
	double *ref_scores, *ref_abs, *sorted;
	int32_t *heap, *rows, *ref_rows;
	uint64_t groups;
};

static void ws_init(struct ws *w, uint64_t visible)
{
	size_t g1 = (size_t)(visible / RATIO + 1);
	w->groups = visible / RATIO;
	w->pooled = malloc(g1 * DIM * sizeof(float));
	w->scores = malloc(g1 * sizeof(float));
	w->ref_scores = malloc(g1 * sizeof(double));
	w->ref_abs = malloc(g1 * sizeof(double));
	w->sorted = malloc(g1 * sizeof(double));
	w->iq = malloc(HEADS * DIM * sizeof(float));
	w->heap = malloc(KEEP * sizeof(int32_t));
	w->rows = malloc((BUDGET + RATIO) * sizeof(int32_t));
	w->ref_rows = malloc((BUDGET + RATIO) * sizeof(int32_t));
	if (!w->pooled || !w->scores || !w->ref_scores || !w->ref_abs || !w->sorted || !w->iq ||
	    !w->heap || !w->rows || !w->ref_rows) {
		fprintf(stderr, "test_qsa: out of memory\n");
		exit(2);
	}
	for (uint64_t i = 0; i < w->groups * DIM; i++)
		w->pooled[i] = frand();
	for (size_t i = 0; i < HEADS * DIM; i++)
		w->iq[i] = frand();
}

static void ws_free(struct ws *w)
{
	free(w->pooled), free(w->scores), free(w->ref_scores), free(w->ref_abs), free(w->sorted);
	free(w->iq), free(w->heap), free(w->rows), free(w->ref_rows);
}

/* Every implementation score against the double reference; returns the
 * largest bound used (the tie band of the selection check). */
static double check_scores(const float *got, const double *want, const double *abs_sum,
			   uint64_t groups)
{
	double emax = 0;
	uint64_t over = 0;

	for (uint64_t g = 0; g < groups; g++) {
		double bound = SCORE_ERR_ULPS * U24 * abs_sum[g], e = fabs((double)got[g] - want[g]);
		if (abs_sum[g] > 0 && e / (U24 * abs_sum[g]) > worst_score_ulps)
			worst_score_ulps = e / (U24 * abs_sum[g]);
		if (!(e <= bound) && over++ < 3)
			hb_check_fail(__FILE__, __LINE__, "group %" PRIu64 ": score %.9g, reference %.12g, "
				      "|diff| %.3g > bound %.3g", g, (double)got[g], want[g], e, bound);
		emax = hb_test_max_nan(emax, bound);
	}
	CHECK_EQ_U64(over, 0);
	return emax;
}

static int desc_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x < y) - (x > y);
}

static bool row_selected(const int32_t *rows, size_t n, int32_t row)
{
	size_t lo = 0, hi = n;
	while (lo < hi) { /* rows are chronological (checked by the caller) */
		size_t mid = lo + (hi - lo) / 2;
		if (rows[mid] == row)
			return true;
		if (rows[mid] < row)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* The implementation's selection against the reference's own selection
 * from the reference's scores (see the header comment for ties). */
static void check_selection(struct ws *w, size_t n, uint64_t visible, double tol)
{
	size_t rn = qsa_ref_select_d(w->ref_scores, w->groups, KEEP, RATIO, visible, w->ref_rows);
	double cut_in, cut_out;

	CHECK_EQ_U64(n, rn);
	if (w->groups <= KEEP) {
		CHECK(n == rn && memcmp(w->rows, w->ref_rows, n * sizeof(int32_t)) == 0);
		exact_selections++;
		return;
	}
	memcpy(w->sorted, w->ref_scores, (size_t)w->groups * sizeof(double));
	qsort(w->sorted, (size_t)w->groups, sizeof(double), desc_double);
	cut_in = w->sorted[KEEP - 1]; /* the last kept reference score */
	cut_out = w->sorted[KEEP];    /* the first dropped one */
	if (cut_in - cut_out > 2 * tol) {
		CHECK(n == rn && memcmp(w->rows, w->ref_rows, n * sizeof(int32_t)) == 0);
		exact_selections++;
		return;
	}
	/* a near tie at the cut: only the groups clear of it are decided */
	band_selections++;
	for (uint64_t g = 0; g < w->groups; g++) {
		bool in = row_selected(w->rows, n, (int32_t)(g * RATIO));
		if (w->ref_scores[g] - 2 * tol > cut_out && !in)
			hb_check_fail(__FILE__, __LINE__, "group %" PRIu64 " (score %.9g) clears the cut "
				      "%.9g but was dropped", g, w->ref_scores[g], cut_out);
		if (w->ref_scores[g] + 2 * tol < cut_in && in)
			hb_check_fail(__FILE__, __LINE__, "group %" PRIu64 " (score %.9g) is below the cut "
				      "%.9g but was kept", g, w->ref_scores[g], cut_in);
	}
}

/* Select at `visible` and check scores, selection and tie rule; returns
 * the selected width. */
static size_t select_and_compare(struct ws *w, uint64_t visible)
{
	size_t n = hb_qsa_select(w->iq, HEADS, DIM, w->pooled, w->groups, KEEP, RATIO, visible,
				 w->scores, w->heap, w->rows), rn;
	double tol;

	CHECK(n <= BUDGET + RATIO - 1);
	for (size_t i = 1; i < n; i++)
		CHECK(w->rows[i - 1] < w->rows[i]); /* chronological */
	qsa_ref_scores(w->iq, HEADS, DIM, w->pooled, w->groups, w->ref_scores, w->ref_abs);
	tol = check_scores(w->scores, w->ref_scores, w->ref_abs, w->groups);
	check_selection(w, n, visible, tol);
	/* the tie rule, exactly, on the implementation's own scores */
	rn = qsa_ref_select(w->scores, w->groups, KEEP, RATIO, visible, w->ref_rows);
	CHECK_EQ_U64(n, rn);
	CHECK(n == rn && memcmp(w->rows, w->ref_rows, n * sizeof(int32_t)) == 0);
	return n;
}

static void check_attend(const float *got, const float *want, size_t dim)
{
	for (size_t j = 0; j < dim; j++) {
		double e = fabs((double)got[j] - (double)want[j]);
		if (!(e <= ATTEND_ERR))
			hb_check_fail(__FILE__, __LINE__, "attention[%zu] %.9g, reference %.9g", j,
				      (double)got[j], (double)want[j]);
		worst_attend_err = hb_test_max_nan(worst_attend_err, e);
	}
}

/* Below the cut every complete group fits: the sparse row IS the dense row
 * (AFN-017), attention over it is bit-identical to the implementation's
 * attention over the dense row, and both agree with the double oracle. */
static void dense_parity_at_the_edges(void)
{
	static const uint64_t lengths[] = {1, 2, 3, 4, 5, 2047, 2048, 2049, 2050, 2051};
	float *K = malloc(2052 * HD * sizeof(float)), *V = malloc(2052 * HD * sizeof(float));
	float q[HD], sparse[HD], dense[HD], ref[HD], probs[QSA_DENSE_MAX_KEYS];
	int32_t identity[QSA_DENSE_MAX_KEYS];

	for (size_t i = 0; i < 2052 * HD; i++)
		K[i] = frand(), V[i] = frand();
	for (size_t i = 0; i < HD; i++)
		q[i] = frand();
	for (size_t i = 0; i < QSA_DENSE_MAX_KEYS; i++)
		identity[i] = (int32_t)i;
	for (size_t i = 0; i < HB_ARRAY_LEN(lengths); i++) {
		struct ws w;
		uint64_t vis = lengths[i];
		size_t n;
		ws_init(&w, vis);
		n = select_and_compare(&w, vis);
		CHECK_EQ_U64(n, vis);
		for (size_t j = 0; j < n; j++)
			CHECK_EQ_INT(w.rows[j], (int32_t)j);
		hb_qsa_attend(q, K, V, HD, 0, HD, 0.17f, w.rows, n, probs, sparse);
		hb_qsa_attend(q, K, V, HD, 0, HD, 0.17f, identity, (size_t)vis, probs, dense);
		CHECK(memcmp(sparse, dense, sizeof(dense)) == 0);
		CHECK_EQ_INT(qsa_ref_dense(q, K, V, HD, 0, HD, 0.17f, vis, ref), 0);
		check_attend(sparse, ref, HD);
		ws_free(&w);
	}
	/* 2,052 visible keys: one group more than the budget; sparse drops a
	 * group, and the dense oracle refuses instead of growing (AFN-011) */
	{
		struct ws w;
		float sentinel[HD];
		ws_init(&w, 2052);
		CHECK_EQ_U64(select_and_compare(&w, 2052), 2048);
		for (size_t j = 0; j < HD; j++)
			sentinel[j] = ref[j] = 7.0f;
		CHECK_EQ_INT(qsa_ref_dense(q, K, V, HD, 0, HD, 0.17f, 2052, ref), -1);
		CHECK(memcmp(sentinel, ref, sizeof(ref)) == 0);
		ws_free(&w);
	}
	free(K), free(V);
}

/* One shape of indexer: heads x dim, `groups` groups, inputs scaled by mag. */
static void scores_case(size_t heads, size_t dim, uint64_t groups, float mag)
{
	float *iq = malloc(heads * dim * sizeof(float)), *pooled = malloc((size_t)groups * dim * sizeof(float));
	float *sc = malloc((size_t)groups * sizeof(float));
	double *ref = malloc((size_t)groups * sizeof(double)), *abs_sum = malloc((size_t)groups * sizeof(double));
	int32_t *heap = malloc((size_t)groups * sizeof(int32_t)), *rows = malloc((size_t)groups * 4 * sizeof(int32_t));
	uint64_t far_sum_relu = 0, far_head = 0, far_scale = 0;

	if (!iq || !pooled || !sc || !ref || !abs_sum || !heap || !rows) {
		CHECK(!"allocation");
		goto out;
	}
	for (size_t i = 0; i < heads * dim; i++)
		iq[i] = frand() * mag;
	for (size_t i = 0; i < (size_t)groups * dim; i++)
		pooled[i] = frand() * mag;
	/* keep = groups: the scores are the subject here, not the cut */
	hb_qsa_select(iq, heads, dim, pooled, groups, groups, 4, groups * 4, sc, heap, rows);
	qsa_ref_scores(iq, heads, dim, pooled, groups, ref, abs_sum);
	check_scores(sc, ref, abs_sum, groups);
	/* the check has teeth: the plausible mistakes land far outside it */
	for (uint64_t g = 0; g < groups; g++) {
		const float *k = pooled + g * dim;
		double bound = SCORE_ERR_ULPS * U24 * abs_sum[g], all = 0, last = 0;
		for (size_t h = 0; h < heads; h++) {
			double d = 0;
			for (size_t i = 0; i < dim; i++)
				d += (double)iq[h * dim + i] * (double)k[i];
			all += d;
			last = d > 0 ? d : 0;
		}
		all = (all > 0 ? all : 0) / sqrt((double)dim); /* ReLU after the head sum */
		far_sum_relu += fabs(all - ref[g]) > bound;
		far_head += heads > 1 && last / sqrt((double)dim) > bound; /* the last head dropped */
		far_scale += fabs(ref[g] * sqrt((double)dim) - ref[g]) > bound; /* no 1/sqrt(dim) */
	}
	if (heads > 1) {
		CHECK(far_sum_relu > groups / 4);
		CHECK(far_head > groups / 4);
	}
	if (dim > 1)
		CHECK(far_scale > groups / 4);
out:
	free(iq), free(pooled), free(sc), free(ref), free(abs_sum), free(heap), free(rows);
}

/* The indexer scores against the double reference, at the real shape, the
 * fixtures' shapes (realshape 8 x 16, general 6 x 8), a dim that is not a
 * multiple of eight and one head of one, over six decades of magnitude. */
static void indexer_scores_match_reference(void)
{
	static const struct { size_t heads, dim; } shapes[] = {{16, 128}, {8, 16}, {6, 8}, {3, 13}, {1, 1}};
	static const float mags[] = {1e-3f, 1.0f, 1e3f};

	for (size_t s = 0; s < HB_ARRAY_LEN(shapes); s++)
		for (size_t m = 0; m < HB_ARRAY_LEN(mags); m++)
			scores_case(shapes[s].heads, shapes[s].dim, 700, mags[m]);
	printf("# indexer scores: worst |score - double reference| %.2f u A (gate %.0f u A)\n",
	       worst_score_ulps, SCORE_ERR_ULPS);
}

/* Equal scores: membership prefers the earlier group (AFN-017). */
static void ties_go_to_the_earlier_group(void)
{
	struct ws w;
	size_t n;

	ws_init(&w, 4000);
	memset(w.iq, 0, HEADS * DIM * sizeof(float)); /* every score is exactly 0, both sides */
	n = select_and_compare(&w, 4000);
	CHECK_EQ_U64(n, KEEP * RATIO);
	for (size_t j = 0; j < n; j++)
		CHECK_EQ_INT(w.rows[j], (int32_t)j); /* groups 0..511 */
	/* two groups tie above the rest: both in, the later one out when only
	 * one slot is left */
	{
		double sc[3] = {1.0, 2.0, 2.0};
		int32_t rows[16];
		size_t k = qsa_ref_select_d(sc, 3, 1, RATIO, 12, rows);
		CHECK_EQ_U64(k, 4);
		CHECK_EQ_INT(rows[0], 4); /* group 1 beats group 2 at equal score */
	}
	/* the implementation, with scores tied on purpose: groups 2 and 3 have
	 * identical keys, group 1 a smaller one, keep 1 of 4 */
	{
		float iq[2] = {1.0f, 0.5f}, pooled[8] = {-1, -1, 0.5f, 0.5f, 1, 1, 1, 1}, sc[4];
		int32_t heap[2], rows[16];
		double ref[4];
		size_t k = hb_qsa_select(iq, 1, 2, pooled, 4, 1, RATIO, 17, sc, heap, rows);
		qsa_ref_scores(iq, 1, 2, pooled, 4, ref, NULL);
		CHECK(ref[2] == ref[3] && sc[2] == sc[3] && ref[2] > ref[1]);
		CHECK_EQ_U64(k, 5);
		CHECK_EQ_INT(rows[0], 8); /* group 2, not 3 */
		CHECK_EQ_INT(rows[4], 16); /* then the tail */
		CHECK_EQ_U64(qsa_ref_select_d(ref, 4, 1, RATIO, 17, w.ref_rows), 5);
		CHECK(memcmp(rows, w.ref_rows, 5 * sizeof(int32_t)) == 0);
	}
	ws_free(&w);
}

static void random_selection_matches_reference(void)
{
	unsigned e0 = exact_selections, b0 = band_selections;

	for (uint64_t vis = 2053; vis < 2053 + 40 * 97; vis += 97) {
		struct ws w;
		ws_init(&w, vis);
		select_and_compare(&w, vis);
		ws_free(&w);
	}
	printf("# random selections: %u exact against the reference's own selection, "
	       "%u near a tie at the cut (band-checked)\n", exact_selections - e0, band_selections - b0);
	/* the tie band must not be what passes most cases */
	CHECK(exact_selections - e0 >= 30);
}

/* Sparse selections (past the cut), at a head offset inside wider rows:
 * the implementation's attention over its rows against the double oracle
 * over the REFERENCE's rows (the same rows where the selection is exact). */
static void attention_matches_double_reference(void)
{
	enum { KV_HEADS = 3, STRIDE = KV_HEADS * HD };
	static const uint64_t lengths[] = {2052, 2600, 4099, 8192};

	for (size_t i = 0; i < HB_ARRAY_LEN(lengths); i++) {
		uint64_t vis = lengths[i];
		float *K = malloc((size_t)vis * STRIDE * sizeof(float)), *V = malloc((size_t)vis * STRIDE * sizeof(float));
		float q[HD], got[HD], want[HD], probs[BUDGET + RATIO];
		struct ws w;
		size_t n;
		if (!K || !V) {
			CHECK(!"allocation");
			free(K), free(V);
			return;
		}
		for (size_t j = 0; j < (size_t)vis * STRIDE; j++)
			K[j] = frand(), V[j] = frand();
		for (size_t j = 0; j < HD; j++)
			q[j] = frand() * 2.0f;
		ws_init(&w, vis);
		n = select_and_compare(&w, vis);
		CHECK_EQ_U64(n, BUDGET + vis % RATIO);
		hb_qsa_attend(q, K, V, STRIDE, 2 * HD, HD, 0.17f, w.rows, n, probs, got);
		qsa_ref_attend(q, K, V, STRIDE, 2 * HD, HD, 0.17f, w.rows, n, want);
		check_attend(got, want, HD);
		ws_free(&w);
		free(K), free(V);
	}
	printf("# attention: worst |out - double reference| %.3g (gate %.2g)\n", worst_attend_err, ATTEND_ERR);
}

static long peak_rss_kib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/* The long cases: scores and selection against the double reference;
 * work is the groups scored plus the selected width, never queries x keys. */
static void long_contexts(void)
{
	static const uint64_t lengths[] = {65537, 100000, 262144};
	unsigned e0 = exact_selections, b0 = band_selections;

	for (size_t i = 0; i < HB_ARRAY_LEN(lengths); i++) {
		struct ws w;
		struct timespec a, b;
		size_t n;
		long before = peak_rss_kib();
		ws_init(&w, lengths[i]);
		clock_gettime(CLOCK_MONOTONIC, &a);
		n = hb_qsa_select(w.iq, HEADS, DIM, w.pooled, w.groups, KEEP, RATIO, lengths[i], w.scores,
				  w.heap, w.rows);
		clock_gettime(CLOCK_MONOTONIC, &b);
		CHECK_EQ_U64(n, BUDGET + lengths[i] % RATIO);
		select_and_compare(&w, lengths[i]);
		printf("# %" PRIu64 " visible: %" PRIu64 " groups scored, %zu rows selected, select %.2f ms, "
		       "scratch %zu bytes (groups + budget), peak RSS %ld KiB (was %ld)\n",
		       lengths[i], w.groups, n,
		       (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6,
		       (size_t)(w.groups * sizeof(float) + KEEP * 4 + (BUDGET + RATIO) * 4), peak_rss_kib(), before);
		ws_free(&w);
	}
	printf("# long contexts: %u selections exact, %u band-checked; worst score error %.2f u A\n",
	       exact_selections - e0, band_selections - b0, worst_score_ulps);
}

int main(int argc, char **argv)
{
	/* the long cases exist only when asked for: no pass is printed for
	 * work that did not run */
	static const struct hb_test tests[] = {
		T(dense_parity_at_the_edges), T(indexer_scores_match_reference),
		T(ties_go_to_the_earlier_group), T(random_selection_matches_reference),
		T(attention_matches_double_reference), T(long_contexts),
	};
	const char *l = getenv("QSA_LONG");
	bool with_long = l && !strcmp(l, "1");

	return hb_test_main(tests, HB_ARRAY_LEN(tests) - (with_long ? 0 : 1), argc, argv);
}
