/*
 * crash-at.c: an LD_PRELOAD library that kills the process it is loaded
 * into with SIGKILL at a chosen filesystem-changing call, for the crash
 * tests of the cluster flows (tests/cluster/crash.bats).
 *
 * The calls counted are those through which hb_io and hb_publish change
 * what is on disk: write, pwrite, ftruncate, fsync, fdatasync, mkostemp,
 * rename, renameat2 (through syscall), link, unlink, mkdir.  Every one is a
 * crash point: with HB_CRASH_AT=N the Nth (1-based) is not made, the process
 * kills itself instead, as a node that loses power or an OOM killer would
 * stop it.  HB_CRASH_LOG=FILE appends one line per point, "N CALL PATH" (the
 * path where the call has one), so a test can choose points by what they
 * interrupt: a shard being written, a shard published without its manifest,
 * a merge.  With HB_CRASH_ONCE=FILE the kill comes only when FILE does not
 * exist, and makes it first: among several processes (the tasks of a job
 * array) the first to reach the point dies, and a rerun does not, as after a
 * node lost once.  Nothing else changes: the calls are passed on unchanged.
 *
 * Not a product feature and not linked into any binary (AFN-013): the
 * libraries' own fault seam (hb_fault.h) fails calls for unit tests; this
 * one stops a whole real process, which no return value can model.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static unsigned long counter;

/* A crash point: log it, and die at the chosen one. */
static void point(const char *call, const char *path)
{
	static unsigned long at = 0;
	static int init = 0;
	const char *log = getenv("HB_CRASH_LOG");
	int saved = errno;

	if (!init) {
		const char *s = getenv("HB_CRASH_AT");
		at = s ? strtoul(s, NULL, 10) : 0;
		init = 1;
	}
	counter++;
	if (log) {
		char line[4200];
		int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
		int n = snprintf(line, sizeof(line), "%lu %s %s\n", counter, call, path ? path : "-");
		if (fd >= 0) {
			ssize_t (*real_write)(int, const void *, size_t) =
				(ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
			if (n > 0 && real_write)
				(void)real_write(fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
			close(fd);
		}
	}
	if (at && counter == at) {
		const char *once = getenv("HB_CRASH_ONCE");
		int fd = once ? open(once, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666) : -1;
		if (!once || fd >= 0)
			kill(getpid(), SIGKILL);
	}
	errno = saved;
}

#define REAL(ret, name, args) \
	static ret(*real_##name) args; \
	if (!real_##name) \
		real_##name = (ret(*) args)dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t n)
{
	REAL(ssize_t, write, (int, const void *, size_t));
	point("write", NULL);
	return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	REAL(ssize_t, pwrite, (int, const void *, size_t, off_t));
	point("pwrite", NULL);
	return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	REAL(ssize_t, pwrite64, (int, const void *, size_t, off_t));
	point("pwrite", NULL);
	return real_pwrite64(fd, buf, n, off);
}

int ftruncate(int fd, off_t len)
{
	REAL(int, ftruncate, (int, off_t));
	point("ftruncate", NULL);
	return real_ftruncate(fd, len);
}

int fsync(int fd)
{
	REAL(int, fsync, (int));
	point("fsync", NULL);
	return real_fsync(fd);
}

int fdatasync(int fd)
{
	REAL(int, fdatasync, (int));
	point("fdatasync", NULL);
	return real_fdatasync(fd);
}

int mkostemp(char *tmpl, int flags)
{
	REAL(int, mkostemp, (char *, int));
	point("mkostemp", tmpl);
	return real_mkostemp(tmpl, flags);
}

int rename(const char *from, const char *to)
{
	REAL(int, rename, (const char *, const char *));
	point("rename", to);
	return real_rename(from, to);
}

int link(const char *from, const char *to)
{
	REAL(int, link, (const char *, const char *));
	point("link", to);
	return real_link(from, to);
}

int unlink(const char *path)
{
	REAL(int, unlink, (const char *));
	point("unlink", path);
	return real_unlink(path);
}

int mkdir(const char *path, mode_t mode)
{
	REAL(int, mkdir, (const char *, mode_t));
	point("mkdir", path);
	return real_mkdir(path, mode);
}

/* hb_publish renames with renameat2(RENAME_NOREPLACE) through syscall(2);
 * every syscall takes at most six register arguments */
long syscall(long nr, ...)
{
	long a[6];
	va_list ap;
	REAL(long, syscall, (long, ...));

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (nr == SYS_renameat2)
		point("renameat2", (const char *)a[3]);
	return real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
