/*
 * hb_publish.h: atomic publication of a new file.
 *
 * A writer never writes its target in place.  It writes a sibling temporary
 * file in the same directory, fsyncs it, closes and reopens it read-only for
 * a caller-supplied verification pass, fsyncs the directory, renames the
 * temporary over the target (the commit point) and fsyncs the directory
 * again.  Any failure before the rename removes the temporary file and
 * leaves the old target (or no target) exactly as it was.  A failure of the
 * final directory fsync is reported, but the new file is already visible and
 * is not rolled back (there is no safe rollback after the commit point).
 *
 * A writer holds an exclusive flock(2) on its temporary file from creation
 * until the rename is done (or the file is removed), so a temporary file
 * that nobody holds locked is the leftover of a writer that died (SIGKILL,
 * power loss): begin removes every such sibling of its target, and refuses
 * with HB_ERR_BUSY when one is still held — two writers of one target never
 * run at once, whatever the flags.  Creating and locking the temporary
 * file and the sweep run under a short flock on the sibling
 * ".<base>.hblock" (removed again before begin returns), so two writers
 * starting together never both refuse and a sweep never takes a temporary
 * file in the instant before its writer locks it.  On a file system without flock the
 * temporary file is unlocked and nothing is removed (a live writer cannot
 * be told from a dead one there).
 *
 * Without HB_PUBLISH_REPLACE an existing target is never clobbered: begin
 * refuses early, and the commit uses renameat2(RENAME_NOREPLACE) (or a
 * link/unlink pair where that is unavailable) so that a target created
 * meanwhile is not overwritten either.
 */
#ifndef HB_PUBLISH_H
#define HB_PUBLISH_H

#include "hb_base.h"
#include "hb_err.h"

#define HB_PUBLISH_REPLACE 0x1u

struct hb_publish {
	char *target;
	char *tmp;
	char *dir;
	int fd;
	unsigned flags;
	uint64_t size;   /* bytes appended so far by hb_publish_write */
	bool committed;
	bool locked;     /* fd holds the temporary file's flock */
};

/* Verification callback: fd is the reopened temporary file, read-only. */
typedef int (*hb_publish_verify_fn)(int fd, void *ctx, struct hb_error *err);

int hb_publish_begin(struct hb_publish *p, const char *target, unsigned flags,
		     struct hb_error *err);
/* Append at the current end. */
int hb_publish_write(struct hb_publish *p, const void *buf, size_t len,
		     struct hb_error *err);
/* Write at an absolute offset (does not move the append position). */
int hb_publish_pwrite(struct hb_publish *p, const void *buf, size_t len,
		      uint64_t off, struct hb_error *err);
/* Extend the file with a hole to `size` bytes (for sparse payloads). */
int hb_publish_truncate(struct hb_publish *p, uint64_t size,
			struct hb_error *err);
/* fsync, reopen, verify (verify may be NULL), rename.  Frees p on success. */
int hb_publish_commit(struct hb_publish *p, hb_publish_verify_fn verify,
		      void *ctx, struct hb_error *err);
/* Discard: close and unlink the temporary file.  Safe to call twice. */
void hb_publish_abort(struct hb_publish *p);

/* The whole sequence for one buffer: begin, write, commit (no verify
 * callback); on failure nothing is published and no temporary file stays. */
int hb_publish_buf(const char *target, const void *buf, size_t len, unsigned flags,
		   struct hb_error *err);

#endif
