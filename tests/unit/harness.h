/*
 * harness.h: the C unit-test harness.
 *
 * A test binary lists its cases with HB_TEST_MAIN(T(a), T(b), ...).  Each
 * case runs in a fresh temporary directory (the working directory is changed
 * into it and it is removed afterwards) and prints one TAP line, so
 * scripts/run-tests can count cases across binaries.  A failed CHECK records
 * the file, line and expression and the case continues; a case passes only
 * if no CHECK failed.
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
