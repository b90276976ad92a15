/*
 * harness.c: TAP output, per-case temporary directories (see harness.h).
 */
#include "hb_base.h"
#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

static int case_failures;
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
		tests[i].fn();
		if (chdir(start_dir) != 0)
			case_failures++;
		nftw(case_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
		printf("%s %zu - %s\n", case_failures ? "not ok" : "ok", i + 1,
		       tests[i].name);
		if (case_failures)
			failed++;
	}
	return failed ? 1 : 0;
}
