/*
 * hb_io.c: pread/pwrite loops, fsync, whole-file reads (see hb_io.h).
 * Fault-injection sites: HB_FAULT_READ, SHORT_READ, WRITE, SHORT_WRITE,
 * FSYNC, DIRSYNC.
 */
#include "hb_base.h"
#include "hb_checked.h"
#include "hb_fault.h"
#include "hb_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int hb_pread_full(int fd, void *buf, size_t len, uint64_t off,
		  const char *what, struct hb_error *err)
{
	unsigned char *p = buf;
	size_t done = 0;

	if (!hb_offset_ok(off, len))
		return hb_error_set_at(err, HB_ERR_OVERFLOW, what, off,
				       "read of %zu bytes exceeds the offset range", len);
	while (done < len) {
		size_t want = len - done;
		ssize_t got;
		int inject = hb_fault_check(HB_FAULT_READ);

		if (inject)
			return hb_error_sys(err, inject, what, "read failed");
		if (hb_fault_check(HB_FAULT_SHORT_READ) && want > 1)
			want /= 2;
		got = pread(fd, p + done, want, (off_t)(off + done));
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return hb_error_sys(err, errno, what, "read failed");
		}
		if (got == 0)
			return hb_error_set_at(err, HB_ERR_SHORT, what, off + done,
					       "file ends %zu bytes before the %zu requested",
					       len - done, len);
		done += (size_t)got;
	}
	return HB_OK;
}

int hb_pwrite_full(int fd, const void *buf, size_t len, uint64_t off,
		   const char *what, struct hb_error *err)
{
	const unsigned char *p = buf;
	size_t done = 0;

	if (!hb_offset_ok(off, len))
		return hb_error_set_at(err, HB_ERR_OVERFLOW, what, off,
				       "write of %zu bytes exceeds the offset range", len);
	while (done < len) {
		size_t want = len - done;
		ssize_t put;
		int inject = hb_fault_check(HB_FAULT_WRITE);

		if (inject)
			return hb_error_sys(err, inject, what, "write failed");
		if (hb_fault_check(HB_FAULT_SHORT_WRITE) && want > 1)
			want /= 2;
		put = pwrite(fd, p + done, want, (off_t)(off + done));
		if (put < 0) {
			if (errno == EINTR)
				continue;
			return hb_error_sys(err, errno, what, "write failed");
		}
		if (put == 0)
			return hb_error_sys(err, ENOSPC, what, "write made no progress");
		done += (size_t)put;
	}
	return HB_OK;
}

int hb_fsync_file(int fd, const char *what, struct hb_error *err)
{
	int inject = hb_fault_check(HB_FAULT_FSYNC);

	if (inject)
		return hb_error_sys(err, inject, what, "fsync failed");
	while (fsync(fd) != 0) {
		if (errno == EINTR)
			continue;
		return hb_error_sys(err, errno, what, "fsync failed");
	}
	return HB_OK;
}

int hb_fsync_dir(const char *dir, struct hb_error *err)
{
	int fd, rc = HB_OK;
	int inject = hb_fault_check(HB_FAULT_DIRSYNC);

	if (inject)
		return hb_error_sys(err, inject, dir, "directory fsync failed");
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return hb_error_sys(err, errno, dir, "cannot open directory");
	while (fsync(fd) != 0) {
		if (errno == EINTR)
			continue;
		/* Some file systems refuse fsync on directories; that is not a
		 * durability failure we can do anything about. */
		if (errno != EINVAL && errno != EROFS)
			rc = hb_error_sys(err, errno, dir, "directory fsync failed");
		break;
	}
	close(fd);
	return rc;
}

int hb_file_size(int fd, uint64_t *size, const char *what, struct hb_error *err)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return hb_error_sys(err, errno, what, "cannot stat");
	if (st.st_size < 0)
		return hb_error_set(err, HB_ERR_IO, what, "negative file size");
	*size = (uint64_t)st.st_size;
	return HB_OK;
}

int hb_open_read(const char *path, int *fd, struct hb_error *err)
{
	int f = open(path, O_RDONLY | O_CLOEXEC);

	if (f < 0) {
		int e = errno;
		if (e == ENOENT) {
			hb_error_sys(err, e, path, "cannot open");
			if (err)
				err->code = HB_ERR_NOTFOUND;
			return HB_ERR_NOTFOUND;
		}
		return hb_error_sys(err, e, path, "cannot open");
	}
	*fd = f;
	return HB_OK;
}

int hb_read_fd(int fd, uint64_t max_bytes, const char *what, char **data, size_t *len,
	       struct hb_error *err)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);

	for (;;) {
		ssize_t got;
		if (!buf)
			return hb_error_set(err, HB_ERR_NOMEM, what, "out of memory");
		got = read(fd, buf + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int e = errno;
			free(buf);
			return hb_error_sys(err, e, what, "cannot read");
		}
		if (got == 0)
			break;
		n += (size_t)got;
		if (n > max_bytes) {
			free(buf);
			return hb_error_set(err, HB_ERR_UNSUPPORTED, what, "more than %" PRIu64 " bytes", max_bytes);
		}
		if (n == cap) {
			char *g = realloc(buf, 2 * cap + 1);
			if (!g)
				free(buf);
			buf = g;
			cap *= 2;
		}
	}
	buf[n] = '\0';
	*data = buf;
	*len = n;
	return HB_OK;
}

int hb_read_file(const char *path, uint64_t max_bytes, char **data,
		 size_t *len, struct hb_error *err)
{
	int fd, rc;
	uint64_t size;
	char *buf;

	if (!strcmp(path, "-"))
		return hb_read_fd(STDIN_FILENO, max_bytes, "stdin", data, len, err);
	rc = hb_open_read(path, &fd, err);
	if (rc)
		return rc;
	rc = hb_file_size(fd, &size, path, err);
	if (rc)
		goto out;
	if (size > max_bytes) {
		rc = hb_error_set(err, HB_ERR_UNSUPPORTED, path,
				  "file is %" PRIu64 " bytes, the limit is %" PRIu64,
				  size, max_bytes);
		goto out;
	}
	buf = malloc((size_t)size + 1);
	if (!buf) {
		rc = hb_error_set(err, HB_ERR_NOMEM, path, "cannot allocate %" PRIu64 " bytes", size);
		goto out;
	}
	rc = hb_pread_full(fd, buf, (size_t)size, 0, path, err);
	if (rc) {
		free(buf);
		goto out;
	}
	buf[size] = '\0';
	*data = buf;
	*len = (size_t)size;
out:
	close(fd);
	return rc;
}
