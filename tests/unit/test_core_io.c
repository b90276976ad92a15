/* Unit tests: pread/pwrite loops, short transfers, injected faults. */
#include "hb_base.h"
#include "harness.h"
#include "hb_fault.h"
#include "hb_io.h"

#include <fcntl.h>
#include <unistd.h>

static int make_file(const char *path, size_t n)
{
	unsigned char buf[1000];
	for (size_t i = 0; i < n && i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 1);
	return hb_test_write_file(path, buf, n);
}

static void read_exact(void)
{
	unsigned char buf[100];
	struct hb_error err;
	int fd;

	CHECK(make_file("f", 1000) == 0);
	CHECK_EQ_INT(hb_open_read("f", &fd, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_pread_full(fd, buf, 100, 900, "f", &err), HB_OK);
	CHECK_EQ_INT(buf[0], (unsigned char)(900 * 7 + 1));
	CHECK_EQ_INT(buf[99], (unsigned char)(999 * 7 + 1));
	close(fd);
}

static void read_past_end_is_short(void)
{
	unsigned char buf[100];
	struct hb_error err;
	int fd;

	CHECK(make_file("f", 1000) == 0);
	CHECK_EQ_INT(hb_open_read("f", &fd, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_pread_full(fd, buf, 100, 950, "f", &err), HB_ERR_SHORT);
	CHECK(err.has_offset);
	CHECK_EQ_U64(err.offset, 1000);
	CHECK_STR(err.field, "f");
	close(fd);
}

static void offset_overflow_is_refused(void)
{
	unsigned char buf[4];
	struct hb_error err;
	int fd;

	CHECK(make_file("f", 10) == 0);
	CHECK_EQ_INT(hb_open_read("f", &fd, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_pread_full(fd, buf, 4, UINT64_MAX - 1, "f", &err), HB_ERR_OVERFLOW);
	close(fd);
}

/* A kernel may return fewer bytes than asked; the loop must finish. */
static void short_transfers_complete(void)
{
	unsigned char in[1000], out[1000];
	int fd;

	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (unsigned char)(i ^ 0x5a);
	fd = open("g", O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	hb_fault_reset();
	hb_fault_arm(HB_FAULT_SHORT_WRITE, 1, 0);
	CHECK_EQ_INT(hb_pwrite_full(fd, in, sizeof(in), 0, "g", NULL), HB_OK);
	CHECK(hb_fault_calls(HB_FAULT_SHORT_WRITE) >= 2); /* it looped */
	hb_fault_reset();
	hb_fault_arm(HB_FAULT_SHORT_READ, 1, 0);
	CHECK_EQ_INT(hb_pread_full(fd, out, sizeof(out), 0, "g", NULL), HB_OK);
	CHECK(hb_fault_calls(HB_FAULT_SHORT_READ) >= 2);
	hb_fault_reset();
	CHECK(memcmp(in, out, sizeof(in)) == 0);
	close(fd);
}

static void injected_failures(void)
{
	unsigned char buf[16] = {0};
	struct hb_error err;
	int fd = open("h", O_RDWR | O_CREAT | O_TRUNC, 0600);

	CHECK(fd >= 0);
	hb_fault_reset();
	hb_fault_arm(HB_FAULT_WRITE, 1, ENOSPC);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_pwrite_full(fd, buf, sizeof(buf), 0, "h", &err), HB_ERR_IO);
	CHECK_EQ_INT(err.sys_errno, ENOSPC);
	hb_fault_reset();
	CHECK_EQ_INT(hb_pwrite_full(fd, buf, sizeof(buf), 0, "h", NULL), HB_OK);
	hb_fault_arm(HB_FAULT_READ, 1, EIO);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_pread_full(fd, buf, sizeof(buf), 0, "h", &err), HB_ERR_IO);
	CHECK_EQ_INT(err.sys_errno, EIO);
	hb_fault_reset();
	hb_fault_arm(HB_FAULT_FSYNC, 1, EIO);
	CHECK_EQ_INT(hb_fsync_file(fd, "h", NULL), HB_ERR_IO);
	hb_fault_reset();
	CHECK_EQ_INT(hb_fsync_file(fd, "h", NULL), HB_OK);
	close(fd);
}

static void real_io_errors(void)
{
	unsigned char buf[4];
	struct hb_error err;
	int fd;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_open_read("missing", &fd, &err), HB_ERR_NOTFOUND);
	CHECK_EQ_INT(err.sys_errno, ENOENT);
	/* A bad descriptor is a system error, not a short read. */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_pread_full(-1, buf, 4, 0, "bad", &err), HB_ERR_IO);
	CHECK_EQ_INT(err.sys_errno, EBADF);
}

static void whole_file_limit(void)
{
	char *data = NULL;
	size_t len = 0;
	struct hb_error err;

	CHECK(hb_test_write_file("j", "{\"a\":1}", 7) == 0);
	CHECK_EQ_INT(hb_read_file("j", 7, &data, &len, NULL), HB_OK);
	CHECK_EQ_U64(len, 7);
	CHECK_STR(data, "{\"a\":1}");
	free(data);
	data = NULL;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_read_file("j", 6, &data, &len, &err), HB_ERR_UNSUPPORTED);
	CHECK(data == NULL);
}

/* "-" reads standard input to its end, under the same limit. */
static int stdin_from(const char *bytes, size_t n)
{
	int p[2];
	if (pipe(p))
		return -1;
	if (write(p[1], bytes, n) != (ssize_t)n || close(p[1]) || dup2(p[0], STDIN_FILENO) < 0)
		return -1;
	return close(p[0]);
}

static void standard_input(void)
{
	int saved = dup(STDIN_FILENO);
	char *data = NULL;
	size_t len = 0;
	struct hb_error err;

	CHECK(saved >= 0);
	CHECK_EQ_INT(stdin_from("1,2,3\n", 6), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_read_file("-", 64, &data, &len, &err), HB_OK);
	CHECK_EQ_U64(len, 6);
	CHECK(data && !strcmp(data, "1,2,3\n"));
	free(data);
	data = NULL;
	CHECK_EQ_INT(stdin_from("0123456789", 10), 0);
	CHECK_EQ_INT(hb_read_file("-", 5, &data, &len, &err), HB_ERR_UNSUPPORTED);
	CHECK(data == NULL);
	CHECK_STR(err.field, "stdin");
	/* a read error (a directory as standard input) is an error, not an end */
	{
		int d = open(".", O_RDONLY | O_DIRECTORY);
		CHECK(d >= 0 && dup2(d, STDIN_FILENO) >= 0);
		close(d);
		hb_error_clear(&err);
		CHECK(hb_read_file("-", 64, &data, &len, &err) != HB_OK);
		CHECK(data == NULL);
	}
	CHECK(dup2(saved, STDIN_FILENO) >= 0);
	close(saved);
}

HB_TEST_MAIN(T(read_exact), T(read_past_end_is_short), T(offset_overflow_is_refused),
	     T(short_transfers_complete), T(injected_failures), T(real_io_errors),
	     T(whole_file_limit), T(standard_input))
