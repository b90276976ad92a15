/*
 * harness.c: TAP output, per-case temporary directories (see harness.h).
 */
#include "hb_base.h"
#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

static int case_failures;
static bool case_running;
static bool case_skipped;
static char skip_reason[512];
static char case_dir[4096];
static char start_dir[4096];

void hb_check_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	case_failures++;
	fprintf(stdout, "# %s:%d: check failed: ", file, line);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
}

void hb_test_skip(const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!case_running) {
		/* a skip outside a case would drop no case: say so and fail */
		printf("# hb_test_skip called outside a case\n");
		case_failures++;
		return;
	}
	if (case_skipped)
		return;
	va_start(ap, fmt);
	n = vsnprintf(skip_reason, sizeof(skip_reason), fmt, ap);
	va_end(ap);
	if (n < 0)
		skip_reason[0] = '\0';
	/* one TAP line: the reason may not break it */
	for (char *p = skip_reason; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	for (const char *p = skip_reason; *p; p++)
		if (*p != ' ' && *p != '\t') {
			case_skipped = true;
			return;
		}
	hb_check_fail(__FILE__, __LINE__, "hb_test_skip without a reason");
}

double hb_test_max_nan(double acc, double x)
{
	if (isnan(acc) || isnan(x))
		return NAN;
	return x > acc ? x : acc; /* lint: ok both operands checked for NaN above */
}

double hb_test_min_nan(double acc, double x)
{
	if (isnan(acc) || isnan(x))
		return NAN;
	return x < acc ? x : acc; /* lint: ok both operands checked for NaN above */
}

double hb_test_max_abs_err(const float *a, const float *b, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		m = hb_test_max_nan(m, fabs((double)a[i] - (double)b[i]));
	return m;
}

double hb_test_max_abs_err_f64(const double *a, const double *b, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		m = hb_test_max_nan(m, fabs(a[i] - b[i]));
	return m;
}

const char *hb_test_srcdir(void)
{
	const char *s = getenv("HB_SRCDIR");
	return s && *s ? s : start_dir;
}

const char *hb_test_tmpdir(void)
{
	return case_dir;
}

int hb_test_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	size_t put;

	if (!f)
		return -1;
	put = len ? fwrite(data, 1, len, f) : 0;
	if (fclose(f) != 0 || put != len)
		return -1;
	return 0;
}

bool hb_test_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

int hb_test_count_prefix(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
			n++;
	closedir(d);
	return n;
}

static int remove_entry(const char *path, const struct stat *st, int flag,
			struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	/* Restore write permission so read-only test directories go too. */
	chmod(path, 0700);
	return remove(path);
}

int hb_test_main(const struct hb_test *tests, size_t n, int argc, char **argv)
{
	size_t failed = 0;
	const char *only = argc > 1 ? argv[1] : NULL;
	const char *tmproot = getenv("TMPDIR");

	if (!getcwd(start_dir, sizeof(start_dir)))
		start_dir[0] = '\0';
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("1..%zu\n", n);
	for (size_t i = 0; i < n; i++) {
		if (only && strcmp(only, tests[i].name) != 0) {
			printf("ok %zu - %s # SKIP not selected\n", i + 1, tests[i].name);
			continue;
		}
		snprintf(case_dir, sizeof(case_dir), "%s/hbtest.XXXXXX",
			 tmproot && *tmproot ? tmproot : "/tmp");
		if (!mkdtemp(case_dir) || chdir(case_dir) != 0) {
			printf("not ok %zu - %s # cannot make a temporary directory\n",
			       i + 1, tests[i].name);
			failed++;
			continue;
		}
		case_failures = 0;
		case_skipped = false;
		case_running = true;
		tests[i].fn();
		case_running = false;
		if (chdir(start_dir) != 0)
			case_failures++;
		nftw(case_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
		if (case_failures)
			printf("not ok %zu - %s\n", i + 1, tests[i].name);
		else if (case_skipped)
			printf("ok %zu - %s # SKIP %s\n", i + 1, tests[i].name, skip_reason);
		else
			printf("ok %zu - %s\n", i + 1, tests[i].name);
		if (case_failures)
			failed++;
	}
	return failed ? 1 : 0;
}
