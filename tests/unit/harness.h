/*
 * harness.h: the C unit-test harness.
 *
 * A test binary lists its cases with HB_TEST_MAIN(T(a), T(b), ...).  Each
 * case runs in a fresh temporary directory (the working directory is changed
 * into it and it is removed afterwards) and prints one TAP line, so
 * scripts/run-tests can count cases across binaries.  A failed CHECK records
 * the file, line and expression and the case continues; a case passes only
 * if no CHECK failed.
 *
 * A case may be skipped only through hb_test_skip(), for a named reason the
 * machine truly lacks (no SHA extensions, no GPU); it then prints
 * "ok N - name # SKIP <reason>", which scripts/run-tests counts as skipped
 * and reports with its reason.  A file or tool that the suite itself
 * provides (fixtures, the npm pins of scripts/npm-deps) is never a reason:
 * its absence is a failed CHECK.
 */
#ifndef HB_TEST_HARNESS_H
#define HB_TEST_HARNESS_H

#include "hb_base.h"

struct hb_test {
	const char *name;
	void (*fn)(void);
};

void hb_check_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int hb_test_main(const struct hb_test *tests, size_t n, int argc, char **argv);
/* The repository root (HB_SRCDIR, set by scripts/run-tests). */
const char *hb_test_srcdir(void);
/* The case's private temporary directory (also the working directory). */
const char *hb_test_tmpdir(void);
/* Write a file in one call; returns 0 or -1.  For building test inputs. */
int hb_test_write_file(const char *path, const void *data, size_t len);
/* Whether a path exists. */
bool hb_test_exists(const char *path);
/* Count entries of a directory whose name starts with prefix. */
int hb_test_count_prefix(const char *dir, const char *prefix);

/*
 * Skip the running case: it reports "ok N - name # SKIP <reason>" when it
 * returns (the caller returns right after).  The reason names what the
 * machine lacks; an empty reason, or a skip outside a case, fails the case.
 * A CHECK that failed before or after still fails it: a skip never hides a
 * failure.  Only the first reason of a case is kept.
 */
void hb_test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * NaN-aware maxima for error measures.  `e > m ? e : m` and fmax() drop a
 * NaN e, so an error that became NaN reads as the largest finite one (or
 * 0) and a tolerance CHECK on it passes; these return NaN once any operand
 * is NaN, and a CHECK(err <= tol) on the result then fails.
 */
/* max(acc, x), NaN if either is NaN: for `worst = hb_test_max_nan(worst, e)` */
double hb_test_max_nan(double acc, double x);
/* min(acc, x), NaN if either is NaN */
double hb_test_min_nan(double acc, double x);
/* max |a[i] - b[i]| over n elements: NaN if any difference is NaN (a NaN
 * in a or b, or inf - inf), inf if one is infinite; 0 for n == 0 */
double hb_test_max_abs_err(const float *a, const float *b, size_t n);
double hb_test_max_abs_err_f64(const double *a, const double *b, size_t n);

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond))                                                 \
			hb_check_fail(__FILE__, __LINE__, "%s", #cond);      \
	} while (0)

#define CHECK_EQ_U64(a, b)                                                   \
	do {                                                                 \
		uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);             \
		if (a_ != b_)                                                \
			hb_check_fail(__FILE__, __LINE__,                    \
				      "%s == %s (%" PRIu64 " != %" PRIu64 ")", \
				      #a, #b, a_, b_);                       \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                   \
	do {                                                                 \
		long long a_ = (long long)(a), b_ = (long long)(b);          \
		if (a_ != b_)                                                \
			hb_check_fail(__FILE__, __LINE__,                    \
				      "%s == %s (%lld != %lld)", #a, #b, a_, b_); \
	} while (0)

#define CHECK_STR(a, b)                                                      \
	do {                                                                 \
		const char *a_ = (a), *b_ = (b);                             \
		if (!a_ || !b_ || strcmp(a_, b_) != 0)                       \
			hb_check_fail(__FILE__, __LINE__,                    \
				      "%s == %s (\"%s\" != \"%s\")", #a, #b, \
				      a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
	} while (0)

#define T(fn) { #fn, fn }
#define HB_TEST_MAIN(...)                                                    \
	int main(int argc, char **argv)                                      \
	{                                                                    \
		static const struct hb_test tests_[] = { __VA_ARGS__ };      \
		return hb_test_main(tests_, HB_ARRAY_LEN(tests_), argc, argv); \
	}

#endif
