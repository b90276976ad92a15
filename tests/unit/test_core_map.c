/* Unit tests: hb_map (a read-only file mapping on a 2 MiB boundary) and the
 * smaps reader that tells how much of it the kernel maps 2 MiB at a time. */
#include "hb_base.h"
#include "harness.h"
#include "hb_io.h"
#include "hb_map.h"

#include <stdlib.h>
#include <unistd.h>

/* a file of n bytes, byte i = i * 131 + 7 (mod 256), not a multiple of a page */
static int make_file(const char *path, size_t n)
{
	unsigned char *b = calloc(n + 1, 1);
	int rc;

	if (!b)
		return -1;
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 131 + 7);
	rc = hb_test_write_file(path, b, n);
	free(b);
	return rc;
}

static void maps_whole_file_on_boundary(void)
{
	const size_t n = (3u << 20) + 1234;
	const uint8_t *m = NULL;
	struct hb_error err;
	int fd, same = 1;

	CHECK(make_file("f", n) == 0);
	CHECK_EQ_INT(hb_open_read("f", &fd, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_map_read(fd, n, &m, "f", &err), HB_OK);
	CHECK(m != NULL);
	/* a test process's address space always has room for the span */
	CHECK_EQ_U64((uint64_t)((uintptr_t)m % HB_MAP_ALIGN), 0);
	for (size_t i = 0; m && i < n; i++)
		same &= m[i] == (unsigned char)(i * 131 + 7);
	CHECK(same);
	/* a fresh mapping of a file just written: whatever the kernel maps
	 * huge is within the file */
	CHECK(hb_map_pmd_bytes(m) <= n);
	hb_map_release(m, n);
	close(fd);
}

static void empty_file_is_refused(void)
{
	const uint8_t *m = (const uint8_t *)"x";
	struct hb_error err;
	int fd;

	CHECK(make_file("e", 0) == 0);
	CHECK_EQ_INT(hb_open_read("e", &fd, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_map_read(fd, 0, &m, "e", &err), HB_ERR_UNSUPPORTED);
	CHECK(m == NULL);
	CHECK_STR(err.field, "e");
	close(fd);
}

/* two areas in the layout of /proc/self/smaps (fields abridged) */
static const char smaps[] =
	"55d0a0000000-55d0a0400000 r--s 00000000 fe:01 1234   /tmp/a.gguf\n"
	"Size:               4096 kB\n"
	"AnonHugePages:         0 kB\n"
	"FilePmdMapped:      2048 kB\n"
	"VmFlags: rd sh mr mw me ms hg\n"
	"7f0000000000-7f0000200000 r--s 00000000 fe:01 99     /tmp/b.gguf\n"
	"Size:               2048 kB\n"
	"FilePmdMapped:         0 kB\n"
	"7f1000000000-7f1000001000 r--p 00000000 00:00 0\n"
	"Size:                  4 kB\n"
	"7f2000000000-7f2000400000 r--s 00000000 fe:01 5      /tmp/c.gguf\n"
	"FilePmdMapped:      4096 kB\n";

static void smaps_reader(void)
{
	CHECK_EQ_U64(hb_smaps_pmd_bytes(smaps, (uintptr_t)0x55d0a0000000ull), 2048u << 10);
	CHECK_EQ_U64(hb_smaps_pmd_bytes(smaps, (uintptr_t)0x7f0000000000ull), 0);
	CHECK_EQ_U64(hb_smaps_pmd_bytes(smaps, (uintptr_t)0x7f2000000000ull), 4096u << 10);
	/* an area without the line reads 0, never the next area's */
	CHECK_EQ_U64(hb_smaps_pmd_bytes(smaps, (uintptr_t)0x7f1000000000ull), 0);
	/* an address that starts no area (the end of one) */
	CHECK_EQ_U64(hb_smaps_pmd_bytes(smaps, (uintptr_t)0x55d0a0400000ull), 0);
	CHECK_EQ_U64(hb_smaps_pmd_bytes("", (uintptr_t)0x55d0a0000000ull), 0);
	CHECK_EQ_U64(hb_map_pmd_bytes(NULL), 0);
}

HB_TEST_MAIN(T(maps_whole_file_on_boundary), T(empty_file_is_refused), T(smaps_reader))
