/*
 * hb_publish.c: sibling-temp, fsync, verify, rename (see hb_publish.h).
 * Fault-injection sites: OPEN, WRITE/SHORT_WRITE (via hb_io), FSYNC,
 * DIRSYNC, RENAME.
 */
#include "hb_base.h"
#include "hb_fault.h"
#include "hb_io.h"
#include "hb_publish.h"

#include <fcntl.h>
#include <dirent.h>
#include <libgen.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

static char *dup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dup_printf(const char *fmt, ...)
{
	va_list ap;
	int n;
	char *s;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	s = malloc((size_t)n + 1);
	if (!s)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

static void publish_free(struct hb_publish *p)
{
	free(p->target);
	free(p->tmp);
	free(p->dir);
	p->target = p->tmp = p->dir = NULL;
	p->fd = -1;
}

/*
 * Remove the temporary files of dead writers of p's target: siblings named
 * like p->tmp that nobody holds locked.  Sets *busy when one is held (a live
 * writer).  Errors other than a vanished entry are reported.
 */
static int sweep_stale(struct hb_publish *p, bool *busy, struct hb_error *err)
{
	const char *mine = strrchr(p->tmp, '/') + 1;
	size_t plen = strlen(mine) - 6; /* ".<base>.hbtmp." */
	DIR *d = opendir(p->dir);
	struct dirent *de;
	int rc = HB_OK;

	*busy = false;
	if (!d)
		return hb_error_sys(err, errno, p->dir, "cannot list the target's directory");
	while (!rc && (de = readdir(d))) {
		char *path;
		struct stat a, b;
		int fd;

		if (strlen(de->d_name) != plen + 6 || strncmp(de->d_name, mine, plen) || !strcmp(de->d_name, mine))
			continue;
		path = dup_printf("%s/%s", p->dir, de->d_name);
		if (!path) {
			rc = hb_error_set(err, HB_ERR_NOMEM, "publish", "out of memory");
			break;
		}
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			if (errno != ENOENT)
				rc = hb_error_sys(err, errno, path, "cannot open a leftover temporary file");
		} else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
			if (errno == EWOULDBLOCK)
				*busy = true;
			else
				rc = hb_error_sys(err, errno, path, "cannot lock a leftover temporary file");
		} else if (fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev &&
			   a.st_ino == b.st_ino && unlink(path) != 0 && errno != ENOENT) {
			/* unlocked and still that file: its writer is gone */
			rc = hb_error_sys(err, errno, path, "cannot remove a leftover temporary file");
		}
		if (fd >= 0)
			close(fd);
		free(path);
	}
	closedir(d);
	return rc;
}

/* Lock the new temporary file, then clear dead writers' leftovers. */
static int lock_and_sweep(struct hb_publish *p, struct hb_error *err)
{
	bool busy;
	int rc;

	if (flock(p->fd, LOCK_EX | LOCK_NB) != 0) {
		if (errno == EOPNOTSUPP || errno == ENOLCK || errno == EINVAL || errno == ENOSYS)
			return HB_OK; /* no flock here: nothing can be told apart */
		return hb_error_sys(err, errno, p->target, "cannot lock the temporary file");
	}
	p->locked = true;
	rc = sweep_stale(p, &busy, err);
	if (!rc && busy)
		rc = hb_error_set(err, HB_ERR_BUSY, p->target,
				  "another process is writing this target (its temporary file is locked)");
	return rc;
}

/*
 * Creating, locking and sweeping run under a short mutual exclusion: an
 * flock on the sibling ".<base>.hblock", taken blocking and removed (while
 * still held) on the way out.  Without it two writers starting together
 * could each find the other's temporary file held and both refuse, or a
 * sweeper could find a temporary file in the instant between its creation
 * and its lock and remove it as a dead writer's.  Whoever takes the lock
 * checks that the name still leads to the file it locked (a leaver may
 * have removed it meanwhile) and otherwise tries again.  *lfd is -1 where
 * the file system has no flock (nothing can be told apart there either).
 */
static int enter(const struct hb_publish *p, const char *lock_path, int *lfd, struct hb_error *err)
{
	*lfd = -1;
	for (int tries = 0; tries < 1000; tries++) {
		struct stat a, b;
		int fd = open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

		if (fd < 0) /* as the temporary file beside it would fail: said of the target */
			return hb_error_sys(err, errno, p->target, "cannot create temporary file");
		if (flock(fd, LOCK_EX) != 0) {
			int e = errno;
			close(fd);
			unlink(lock_path);
			if (e == EOPNOTSUPP || e == ENOLCK || e == EINVAL || e == ENOSYS)
				return HB_OK;
			return hb_error_sys(err, e, lock_path, "cannot lock the target's lock file");
		}
		if (fstat(fd, &a) == 0 && stat(lock_path, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino) {
			*lfd = fd;
			return HB_OK;
		}
		close(fd); /* removed by its last holder: take the new one */
	}
	return hb_error_set(err, HB_ERR_BUSY, p->target, "the target's lock file keeps changing");
}

static void leave(char *lock_path, int lfd)
{
	if (lfd >= 0) {
		unlink(lock_path); /* while held: a waiter re-checks and takes a new one */
		close(lfd);
	}
	free(lock_path);
}

int hb_publish_begin(struct hb_publish *p, const char *target, unsigned flags,
		     struct hb_error *err)
{
	char *lock_path = NULL;
	int lfd = -1, rc;
	char *copy1 = NULL, *copy2 = NULL;
	struct stat st;
	mode_t mask;
	int inject;

	memset(p, 0, sizeof(*p));
	p->fd = -1;
	p->flags = flags;
	if (!target || !*target)
		return hb_error_set(err, HB_ERR_INVALID, "publish.target", "empty target path");
	if (!(flags & HB_PUBLISH_REPLACE) && lstat(target, &st) == 0)
		return hb_error_set(err, HB_ERR_EXISTS, target,
				    "target exists (refusing to replace it)");
	copy1 = strdup(target);
	copy2 = strdup(target);
	p->target = strdup(target);
	if (!copy1 || !copy2 || !p->target)
		goto nomem;
	p->dir = strdup(dirname(copy1));
	if (!p->dir)
		goto nomem;
	p->tmp = dup_printf("%s/.%s.hbtmp.XXXXXX", p->dir, basename(copy2));
	lock_path = dup_printf("%s/.%s.hblock", p->dir, basename(copy2));
	if (!p->tmp || !lock_path)
		goto nomem;
	free(copy1);
	free(copy2);
	copy1 = copy2 = NULL;

	inject = hb_fault_check(HB_FAULT_OPEN);
	if (inject) {
		hb_error_sys(err, inject, p->target, "cannot create temporary file");
		free(lock_path);
		publish_free(p);
		return HB_ERR_IO;
	}
	if ((rc = enter(p, lock_path, &lfd, err))) {
		free(lock_path);
		publish_free(p);
		return rc;
	}
	p->fd = mkostemp(p->tmp, O_CLOEXEC);
	if (p->fd < 0) {
		hb_error_sys(err, errno, p->target, "cannot create temporary file");
		leave(lock_path, lfd);
		publish_free(p);
		return HB_ERR_IO;
	}
	/* mkostemp makes 0600; published files get the usual 0666 & ~umask. */
	mask = umask(0);
	umask(mask);
	if (fchmod(p->fd, 0666 & ~mask) != 0) {
		int e = errno;
		hb_publish_abort(p);
		leave(lock_path, lfd);
		return hb_error_sys(err, e, p->target, "cannot set mode");
	}
	rc = lock_and_sweep(p, err);
	if (rc)
		hb_publish_abort(p);
	leave(lock_path, lfd);
	return rc;
nomem:
	free(copy1);
	free(copy2);
	free(lock_path);
	publish_free(p);
	return hb_error_set(err, HB_ERR_NOMEM, "publish", "out of memory");
}

int hb_publish_pwrite(struct hb_publish *p, const void *buf, size_t len,
		      uint64_t off, struct hb_error *err)
{
	if (p->fd < 0)
		return hb_error_set(err, HB_ERR_INVALID, "publish", "not open");
	return hb_pwrite_full(p->fd, buf, len, off, p->target, err);
}

int hb_publish_write(struct hb_publish *p, const void *buf, size_t len,
		     struct hb_error *err)
{
	int rc = hb_publish_pwrite(p, buf, len, p->size, err);
	if (rc == HB_OK)
		p->size += len;
	return rc;
}

int hb_publish_truncate(struct hb_publish *p, uint64_t size, struct hb_error *err)
{
	if (p->fd < 0)
		return hb_error_set(err, HB_ERR_INVALID, "publish", "not open");
	if (size > (uint64_t)INT64_MAX)
		return hb_error_set(err, HB_ERR_OVERFLOW, p->target, "size out of range");
	if (ftruncate(p->fd, (off_t)size) != 0)
		return hb_error_sys(err, errno, p->target, "cannot extend file");
	if (size > p->size)
		p->size = size;
	return HB_OK;
}

void hb_publish_abort(struct hb_publish *p)
{
	if (!p)
		return;
	/* removed while still locked: a sweeper never sees it unlocked */
	if (p->tmp && !p->committed && p->fd >= 0)
		unlink(p->tmp);
	if (p->fd >= 0)
		close(p->fd);
	else if (p->tmp && !p->committed)
		unlink(p->tmp);
	p->fd = -1;
	publish_free(p);
}

static int rename_into_place(struct hb_publish *p, struct hb_error *err)
{
	int inject = hb_fault_check(HB_FAULT_RENAME);

	if (inject)
		return hb_error_sys(err, inject, p->target, "cannot rename into place");
	if (p->flags & HB_PUBLISH_REPLACE) {
		if (rename(p->tmp, p->target) != 0)
			return hb_error_sys(err, errno, p->target, "cannot rename into place");
		return HB_OK;
	}
	if (syscall(SYS_renameat2, AT_FDCWD, p->tmp, AT_FDCWD, p->target,
		    RENAME_NOREPLACE) == 0)
		return HB_OK;
	if (errno == EEXIST)
		return hb_error_set(err, HB_ERR_EXISTS, p->target,
				    "target appeared during publication (not replaced)");
	if (errno != ENOSYS && errno != EINVAL)
		return hb_error_sys(err, errno, p->target, "cannot rename into place");
	/* No renameat2 here: link() refuses an existing name atomically. */
	if (link(p->tmp, p->target) != 0) {
		if (errno == EEXIST)
			return hb_error_set(err, HB_ERR_EXISTS, p->target,
					    "target appeared during publication (not replaced)");
		return hb_error_sys(err, errno, p->target, "cannot link into place");
	}
	unlink(p->tmp);
	return HB_OK;
}

int hb_publish_commit(struct hb_publish *p, hb_publish_verify_fn verify,
		      void *ctx, struct hb_error *err)
{
	int rc, fd;

	if (p->fd < 0)
		return hb_error_set(err, HB_ERR_INVALID, "publish", "not open");
	rc = hb_fsync_file(p->fd, p->target, err);
	if (rc)
		goto fail;
	/* the write descriptor stays open, holding the lock, until the rename
	 * is done: an unlocked temporary file is a dead writer's */
	if (verify) {
		fd = open(p->tmp, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rc = hb_error_sys(err, errno, p->target, "cannot reopen for verification");
			goto fail;
		}
		rc = verify(fd, ctx, err);
		close(fd);
		if (rc)
			goto fail;
	}
	rc = hb_fsync_dir(p->dir, err);
	if (rc)
		goto fail;
	rc = rename_into_place(p, err);
	if (rc)
		goto fail;
	p->committed = true;
	/* Past the commit point: report, but do not roll back. */
	rc = hb_fsync_dir(p->dir, err);
	if (close(p->fd) != 0 && !rc)
		rc = hb_error_sys(err, errno, p->target, "close failed");
	publish_free(p);
	return rc;
fail:
	hb_publish_abort(p);
	return rc;
}

int hb_publish_buf(const char *target, const void *buf, size_t len, unsigned flags,
		   struct hb_error *err)
{
	struct hb_publish p;
	int rc = hb_publish_begin(&p, target, flags, err);

	if (rc)
		return rc;
	if ((rc = hb_publish_write(&p, buf, len, err)) || (rc = hb_publish_commit(&p, NULL, NULL, err)))
		hb_publish_abort(&p);
	return rc;
}
