/*
 * Unit tests: atomic publication.  Every failure before the commit point
 * must leave the old target (or none) and no temporary file.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_fault.h"
#include "hb_io.h"
#include "hb_publish.h"

#include <sys/stat.h>
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

HB_TEST_MAIN(T(publishes_new_file), T(refuses_to_clobber), T(target_created_meanwhile),
	     T(every_fault_leaves_nothing), T(short_writes_still_publish),
	     T(post_commit_dirsync_reported), T(verification_gates_commit),
	     T(sparse_extension), T(missing_directory))
