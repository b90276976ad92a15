/*
 * Sample input for tests/runner/test-lint-tests.sh: each line that
 * scripts/lint-tests must flag carries "expect: <rule>"; no other line may
 * be flagged.  Never compiled.
 */
#include <math.h>

struct stats {
	double max_err;
	size_t maxsel;
	double worst_ratio;
};

static double helper(double m, double e)
{
	return isnan(e) || e > m ? e : m;
}

static void sample(struct stats *st, const float *a, const float *b, size_t n)
{
	double worst = 0, max_diff = 0, e;
	size_t max = 0, big = 0;
	float lo = INFINITY, hi = -INFINITY;

	for (size_t i = 0; i < n; i++) {
		e = fabs(a[i] - b[i]);
		st->max_err = e > st->max_err ? e : st->max_err; /* expect: nan-max */
		worst = e / 2 > worst ? e / 2 : worst; /* expect: nan-max */
		max_diff = max_diff < e ? e : max_diff; /* expect: nan-max */
		if (e > worst) /* expect: nan-max */
			worst = e;
		if (e > st->worst_ratio) st->worst_ratio = e; /* expect: nan-max */
		max_diff = fmax(max_diff, e); /* expect: nan-max */
		printf("%g\n", e > max_diff ? e : max_diff); /* expect: nan-max */
		/* not flagged: NaN-aware, integers, data ranges, allowed */
		worst = hb_test_max_nan(worst, e);
		if (!(e <= worst))
			worst = e;
		if (isnan(e) || e > max_diff)
			max_diff = e;
		max = i > max ? i : max;
		big = n < st->maxsel ? n : st->maxsel;
		lo = a[i] < lo ? a[i] : lo;
		hi = fmaxf(hi, a[i]);
		worst = e > worst ? e : worst; /* lint: ok e is never NaN here: sample */
		st->max_err = helper(st->max_err, e);
		if (e > st->max_err)
			hb_check_fail(__FILE__, __LINE__, "over");
		/* worst = e > worst ? e : worst; in a comment */
		puts("worst = e > worst ? e : worst;");
		worst = e > worst ? e : worst; /* expect: nan-max; lint: ok */
	}
}

static void skips(void)
{
	printf("# SKIP no tokenizer\n"); /* expect: skip-note */
	printf("# long contexts skipped: run make test-long\n"); /* expect: skip-note */
	printf("# %u route rows downstream of a tie skipped\n", 3u);
	hb_test_skip("no GPU");
	printf("ok %d - x # SKIP not selected\n", 1);
}
