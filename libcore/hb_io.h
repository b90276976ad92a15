/*
 * hb_io.h: robust positional I/O.
 *
 * pread/pwrite may transfer fewer bytes than asked and may be interrupted;
 * these loops finish the transfer or report why not.  A read that meets end
 * of file early is HB_ERR_SHORT (a truncated input), never a silently
 * shortened buffer.  `what` names the file or field for the error record.
 */
#ifndef HB_IO_H
#define HB_IO_H

#include "hb_base.h"
#include "hb_err.h"

int hb_pread_full(int fd, void *buf, size_t len, uint64_t off,
		  const char *what, struct hb_error *err);
int hb_pwrite_full(int fd, const void *buf, size_t len, uint64_t off,
		   const char *what, struct hb_error *err);
/* fsync with EINTR retry; site selects the fault-injection point. */
int hb_fsync_file(int fd, const char *what, struct hb_error *err);
int hb_fsync_dir(const char *dir, struct hb_error *err);
/* Size of an open file (fstat), as u64. */
int hb_file_size(int fd, uint64_t *size, const char *what, struct hb_error *err);
/* Open for reading with O_CLOEXEC; HB_ERR_NOTFOUND for ENOENT. */
int hb_open_read(const char *path, int *fd, struct hb_error *err);

/*
 * Read a whole (small) file into a NUL-terminated heap buffer.  Files larger
 * than max_bytes are refused with HB_ERR_UNSUPPORTED before any allocation.
 * "-" is standard input, read to its end under the same limit; a read error
 * is an error (EINTR retried), never an early end.
 */
int hb_read_file(const char *path, uint64_t max_bytes, char **data,
		 size_t *len, struct hb_error *err);
/* The same from an open descriptor, read to its end (a pipe, or a file
 * whose size fstat does not tell, as /proc's). */
int hb_read_fd(int fd, uint64_t max_bytes, const char *what, char **data, size_t *len,
	       struct hb_error *err);

#endif
