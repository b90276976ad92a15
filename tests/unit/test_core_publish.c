/*
 * Unit tests: atomic publication.  Every failure before the commit point
 * must leave the old target (or none) and no temporary file.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_fault.h"
#include "hb_io.h"
#include "hb_publish.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char new_bytes[] = "new contents of the artifact";
static const char old_bytes[] = "old";

static bool file_is(const char *path, const char *want)
{
	char *data = NULL;
	size_t len = 0;
	bool same;

	if (hb_read_file(path, 1 << 20, &data, &len, NULL))
		return false;
	same = len == strlen(want) && memcmp(data, want, len) == 0;
	free(data);
	return same;
}

static int temp_files(void)
{
	return hb_test_count_prefix(".", ".out.bin.hbtmp.");
}

static int publish(unsigned flags, struct hb_error *err)
{
	struct hb_publish p;
	int rc = hb_publish_begin(&p, "out.bin", flags, err);

	if (rc)
		return rc;
	rc = hb_publish_write(&p, new_bytes, 10, err);
	if (!rc)
		rc = hb_publish_write(&p, new_bytes + 10, strlen(new_bytes) - 10, err);
	if (rc) {
		hb_publish_abort(&p);
		return rc;
	}
	return hb_publish_commit(&p, NULL, NULL, err);
}

static void publishes_new_file(void)
{
	struct stat st;
	mode_t mask = umask(022);

	CHECK_EQ_INT(publish(0, NULL), HB_OK);
	CHECK(file_is("out.bin", new_bytes));
	CHECK_EQ_INT(temp_files(), 0);
	CHECK(stat("out.bin", &st) == 0);
	CHECK_EQ_INT(st.st_mode & 0777, 0644);
	umask(mask);
}

static void refuses_to_clobber(void)
{
	struct hb_error err;

	CHECK(hb_test_write_file("out.bin", old_bytes, 3) == 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(publish(0, &err), HB_ERR_EXISTS);
	CHECK_STR(err.field, "out.bin");
	CHECK(file_is("out.bin", old_bytes));
	CHECK_EQ_INT(temp_files(), 0);
	CHECK_EQ_INT(publish(HB_PUBLISH_REPLACE, NULL), HB_OK);
	CHECK(file_is("out.bin", new_bytes));
}

/* A target that appears between begin and commit is not clobbered either. */
static void target_created_meanwhile(void)
{
	struct hb_publish p;
	struct hb_error err;

	CHECK_EQ_INT(hb_publish_begin(&p, "out.bin", 0, NULL), HB_OK);
	CHECK_EQ_INT(hb_publish_write(&p, new_bytes, strlen(new_bytes), NULL), HB_OK);
	CHECK(hb_test_write_file("out.bin", old_bytes, 3) == 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_publish_commit(&p, NULL, NULL, &err), HB_ERR_EXISTS);
	CHECK(file_is("out.bin", old_bytes));
	CHECK_EQ_INT(temp_files(), 0);
}

static void check_fault(enum hb_fault_site site, int errno_value, bool with_old)
{
	struct hb_error err;

	if (with_old)
		CHECK(hb_test_write_file("out.bin", old_bytes, 3) == 0);
	hb_fault_reset();
	hb_fault_arm(site, 1, errno_value);
	hb_error_clear(&err);
	CHECK(publish(with_old ? HB_PUBLISH_REPLACE : 0, &err) != HB_OK);
	hb_fault_reset();
	CHECK_EQ_INT(err.sys_errno, errno_value);
	if (with_old)
		CHECK(file_is("out.bin", old_bytes));
	else
		CHECK(!hb_test_exists("out.bin"));
	CHECK_EQ_INT(temp_files(), 0);
	unlink("out.bin");
}

static void every_fault_leaves_nothing(void)
{
	static const struct { enum hb_fault_site site; int e; } faults[] = {
		{HB_FAULT_OPEN, EACCES}, {HB_FAULT_WRITE, EIO},
		{HB_FAULT_WRITE, ENOSPC}, /* a full disk */
		{HB_FAULT_FSYNC, EIO}, {HB_FAULT_DIRSYNC, EIO},
		{HB_FAULT_RENAME, EXDEV},
	};
	for (size_t i = 0; i < HB_ARRAY_LEN(faults); i++) {
		check_fault(faults[i].site, faults[i].e, false);
		check_fault(faults[i].site, faults[i].e, true);
	}
}

static void short_writes_still_publish(void)
{
	hb_fault_reset();
	hb_fault_arm(HB_FAULT_SHORT_WRITE, 1, 0);
	CHECK_EQ_INT(publish(0, NULL), HB_OK);
	hb_fault_reset();
	CHECK(file_is("out.bin", new_bytes));
}

/* The directory fsync after the rename is past the commit point: the error
 * is reported but the new, complete file stays. */
static void post_commit_dirsync_reported(void)
{
	struct hb_error err;

	hb_fault_reset();
	hb_fault_arm(HB_FAULT_DIRSYNC, 2, EIO);
	hb_error_clear(&err);
	CHECK_EQ_INT(publish(0, &err), HB_ERR_IO);
	hb_fault_reset();
	CHECK(file_is("out.bin", new_bytes));
	CHECK_EQ_INT(temp_files(), 0);
}

static int verify_len(int fd, void *ctx, struct hb_error *err)
{
	uint64_t size = 0;
	int rc = hb_file_size(fd, &size, "verify", err);
	if (rc)
		return rc;
	if (size != *(uint64_t *)ctx)
		return hb_error_set(err, HB_ERR_DIGEST, "verify", "size %" PRIu64, size);
	return HB_OK;
}

/* Verification callback: while the writer verifies, a second writer of the
 * same target is refused (the temporary file is still locked). */
static int verify_second_refused(int fd, void *ctx, struct hb_error *err)
{
	struct hb_publish b;

	(void)fd;
	(void)ctx;
	if (hb_publish_begin(&b, "out.bin", HB_PUBLISH_REPLACE, NULL) != HB_ERR_BUSY) {
		hb_publish_abort(&b);
		return hb_error_set(err, HB_ERR_INTERNAL, "test", "second writer admitted during verification");
	}
	return HB_OK;
}

static void verification_gates_commit(void)
{
	struct hb_publish p;
	uint64_t want = strlen(new_bytes), wrong = 1;
	struct hb_error err;

	CHECK_EQ_INT(hb_publish_begin(&p, "out.bin", 0, NULL), HB_OK);
	CHECK_EQ_INT(hb_publish_write(&p, new_bytes, want, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_publish_commit(&p, verify_len, &wrong, &err), HB_ERR_DIGEST);
	CHECK(!hb_test_exists("out.bin"));
	CHECK_EQ_INT(temp_files(), 0);

	CHECK_EQ_INT(hb_publish_begin(&p, "out.bin", 0, NULL), HB_OK);
	CHECK_EQ_INT(hb_publish_write(&p, new_bytes, want, NULL), HB_OK);
	CHECK_EQ_INT(hb_publish_commit(&p, verify_len, &want, NULL), HB_OK);
	CHECK(file_is("out.bin", new_bytes));
}

static void sparse_extension(void)
{
	struct hb_publish p;
	struct stat st;

	CHECK_EQ_INT(hb_publish_begin(&p, "out.bin", 0, NULL), HB_OK);
	CHECK_EQ_INT(hb_publish_truncate(&p, 1u << 30, NULL), HB_OK);
	CHECK_EQ_INT(hb_publish_pwrite(&p, "x", 1, (1u << 30) - 1, NULL), HB_OK);
	CHECK_EQ_INT(hb_publish_commit(&p, NULL, NULL, NULL), HB_OK);
	CHECK(stat("out.bin", &st) == 0);
	CHECK_EQ_U64(st.st_size, 1u << 30);
	CHECK((uint64_t)st.st_blocks * 512 < (1u << 20)); /* a hole, not 1 GiB */
}

static void missing_directory(void)
{
	struct hb_publish p;
	struct hb_error err;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_publish_begin(&p, "no/such/dir/out.bin", 0, &err), HB_ERR_IO);
	CHECK_EQ_INT(err.sys_errno, ENOENT);
	hb_publish_abort(&p); /* harmless after a failed begin */
}

/* A dead writer's temporary file (nobody holds its lock) is removed by the
 * next publication of the same target; an unrelated file of a similar name
 * is left alone. */
static void stale_temp_is_swept(void)
{
	static const char *const stale = ".out.bin.hbtmp.Ab12Cd";
	int fd = open(stale, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);

	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	fd = open(".out.bin.hbtmp.toolong", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	CHECK_EQ_INT(temp_files(), 2);
	CHECK_EQ_INT(publish(0, NULL), HB_OK);
	CHECK(file_is("out.bin", new_bytes));
	CHECK(!hb_test_exists(stale));
	CHECK(hb_test_exists(".out.bin.hbtmp.toolong")); /* not a temp name of ours */
}

/*
 * A temporary file is created and locked, and others are swept, under the
 * target's short lock (.out.bin.hblock): while another writer holds it (here
 * the test, standing for a writer between creating its temporary file and
 * locking it), a new publication waits instead of sweeping that still
 * unlocked file away as a dead writer's; once it is released, the
 * publication goes on and leaves no lock file behind.
 */
static void creation_and_sweep_are_exclusive(void)
{
	static const char *const fresh = ".out.bin.hbtmp.Fr35hX";
	int lfd = open(".out.bin.hblock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	int fd = open(fresh, O_CREAT | O_WRONLY | O_CLOEXEC, 0600), status = -1;
	pid_t pid;

	CHECK(lfd >= 0 && fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK_EQ_INT(flock(lfd, LOCK_EX), 0);
	pid = fork();
	if (pid == 0) {
		close(lfd); /* the lock belongs to the test's descriptor, not to this writer */
		_exit(publish(0, NULL) == HB_OK ? 0 : 1);
	}
	usleep(300 * 1000);
	/* still waiting: the unlocked file of the writer inside is untouched */
	CHECK(hb_test_exists(fresh));
	CHECK(!hb_test_exists("out.bin"));
	unlink(".out.bin.hblock"); /* as a writer leaving does: removed while held */
	close(lfd);
	CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(file_is("out.bin", new_bytes));
	CHECK(!hb_test_exists(fresh)); /* swept once the lock was free: its writer is gone */
	CHECK(!hb_test_exists(".out.bin.hblock"));
}

/* A live writer's temporary file is held: a second writer of the same target
 * is refused with HB_ERR_BUSY (whatever its flags) and leaves nothing; the
 * first then publishes normally. */
static void second_writer_is_refused(void)
{
	struct hb_publish a, b;
	struct hb_error err;

	CHECK_EQ_INT(hb_publish_begin(&a, "out.bin", HB_PUBLISH_REPLACE, NULL), HB_OK);
	CHECK_EQ_INT(hb_publish_write(&a, new_bytes, strlen(new_bytes), NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_publish_begin(&b, "out.bin", HB_PUBLISH_REPLACE, &err), HB_ERR_BUSY);
	CHECK_STR(err.field, "out.bin");
	CHECK_EQ_INT(temp_files(), 1); /* a's, b's own removed */
	CHECK_EQ_INT(hb_publish_commit(&a, NULL, NULL, NULL), HB_OK);
	CHECK(file_is("out.bin", new_bytes));
	CHECK_EQ_INT(temp_files(), 0);
	/* held through verification too: the lock is not dropped before the rename */
	CHECK_EQ_INT(hb_publish_begin(&a, "out.bin", HB_PUBLISH_REPLACE, NULL), HB_OK);
	CHECK_EQ_INT(hb_publish_write(&a, old_bytes, strlen(old_bytes), NULL), HB_OK);
	CHECK_EQ_INT(hb_publish_commit(&a, verify_second_refused, NULL, NULL), HB_OK);
	CHECK(file_is("out.bin", old_bytes));
}

/*
 * SIGKILL at every I/O step of a publication (the crash seam, in a forked
 * child), over no old target and over an old one: afterwards the target is
 * the complete old file, the complete new one, or absent where there was
 * none; the next publication succeeds and leaves no temporary file.
 */
static void killed_at_every_step(void)
{
	for (int with_old = 0; with_old < 2; with_old++) {
		unsigned points = 0, killed = 0;

		for (unsigned n = 1; n < 64; n++) {
			pid_t pid;
			int status = 0;

			unlink("out.bin");
			if (with_old)
				CHECK_EQ_INT(hb_publish_buf("out.bin", old_bytes, strlen(old_bytes), 0, NULL), HB_OK);
			fflush(NULL);
			pid = fork();
			if (pid == 0) {
				hb_fault_arm_kill(n);
				_exit(publish(HB_PUBLISH_REPLACE, NULL) == HB_OK ? 0 : 1);
			}
			CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
			points++;
			if (WIFEXITED(status)) {
				CHECK_EQ_INT(WEXITSTATUS(status), 0);
				CHECK(file_is("out.bin", new_bytes));
				CHECK_EQ_INT(temp_files(), 0);
				break;
			}
			CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
			killed++;
			if (with_old)
				CHECK(file_is("out.bin", old_bytes) || file_is("out.bin", new_bytes));
			else
				CHECK(!hb_test_exists("out.bin") || file_is("out.bin", new_bytes));
			CHECK_EQ_INT(publish(HB_PUBLISH_REPLACE, NULL), HB_OK);
			CHECK(file_is("out.bin", new_bytes));
			CHECK_EQ_INT(temp_files(), 0);
		}
		CHECK(killed >= 5); /* open, two writes, fsync, dirsync, rename at least */
		printf("# %s old target: killed at %u of %u steps, every time old, new or absent\n",
			     with_old ? "with an" : "without an", killed, points);
	}
}

HB_TEST_MAIN(T(publishes_new_file), T(refuses_to_clobber), T(target_created_meanwhile),
	     T(every_fault_leaves_nothing), T(short_writes_still_publish),
	     T(post_commit_dirsync_reported), T(verification_gates_commit),
	     T(sparse_extension), T(missing_directory), T(stale_temp_is_swept),
	     T(second_writer_is_refused), T(creation_and_sweep_are_exclusive), T(killed_at_every_step))
