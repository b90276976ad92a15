/* Unit tests: hb_map (a file's bytes as read-only memory on a 2 MiB
 * boundary, mapped or read with holes) and the smaps reader that tells how
 * much of it the kernel maps 2 MiB at a time. */
#include "hb_base.h"
#include "harness.h"
#include "hb_io.h"
#include "hb_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	CHECK(hb_map_pmd_bytes(m, n) <= n);
	hb_map_release(m, n);
	close(fd);
}

/* the permissions /proc/self/maps gives the area that starts at a ("r--p"),
 * into perm; false where no area starts there */
static bool area_perms(const void *a, char perm[5])
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi;
		if (sscanf(line, "%llx-%llx %4s", &lo, &hi, perm) == 3 && (uintptr_t)lo == (uintptr_t)a)
			found = true;
	}
	if (f)
		fclose(f);
	return found;
}

static bool same_as_file(const uint8_t *m, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (m[i] != (unsigned char)(i * 131 + 7))
			return false;
	return true;
}

static void loads_file_around_a_hole(void)
{
	const size_t n = (9u << 20) + 1234;
	/* a hole that starts and ends inside 2 MiB blocks: only the blocks
	 * wholly inside it, [2 MiB, 6 MiB), are left out */
	const struct hb_map_hole hole = { (1u << 20) + 100, (5u << 20) + 5000 };
	size_t in0 = 2u << 20, in1 = 6u << 20;
	const uint8_t *m = NULL;
	struct hb_error err;
	char perm[5] = "";
	int fd;

	CHECK(make_file("h", n) == 0);
	CHECK_EQ_INT(hb_open_read("h", &fd, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_map_load(fd, n, &hole, 1, &m, "h", &err), HB_OK);
	CHECK(m != NULL);
	if (!m)
		return;
	CHECK_EQ_U64((uint64_t)((uintptr_t)m % HB_MAP_ALIGN), 0);
	CHECK(same_as_file(m, 0, in0));
	CHECK(same_as_file(m, in1, n));
	/* the hole's whole pages: no access, so a read there faults */
	CHECK(area_perms(m + in0, perm));
	CHECK_STR(perm, "---p");
	/* what was read is read-only */
	CHECK(area_perms(m, perm));
	CHECK_STR(perm, "r--p");
	CHECK(area_perms(m + in1, perm));
	CHECK_STR(perm, "r--p");
	CHECK(hb_map_pmd_bytes(m, n) <= n);
	hb_map_release(m, n);
	/* no hole: every byte */
	CHECK_EQ_INT(hb_map_load(fd, n, NULL, 0, &m, "h", &err), HB_OK);
	if (m)
		CHECK(same_as_file(m, 0, n));
	hb_map_release(m, n);
	close(fd);
}

static void load_refuses_short_file_and_bad_holes(void)
{
	const size_t n = 10000;
	const struct hb_map_hole beyond = { 9000, 2000 };
	const struct hb_map_hole crossed[2] = { { 4096, 4096 }, { 6000, 100 } };
	const uint8_t *m = (const uint8_t *)"x";
	struct hb_error err;
	int fd;

	CHECK(make_file("s", n) == 0);
	CHECK_EQ_INT(hb_open_read("s", &fd, NULL), HB_OK);
	/* a file shorter than the length it was opened with (cut since) */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_map_load(fd, n + 8192, NULL, 0, &m, "s", &err), HB_ERR_IO);
	CHECK(m == NULL);
	CHECK_STR(err.field, "s");
	CHECK(strstr(err.msg, "ends at byte 10000") != NULL);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_map_load(fd, n, &beyond, 1, &m, "s", &err), HB_ERR_INVALID);
	CHECK(m == NULL);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_map_load(fd, n, crossed, 2, &m, "s", &err), HB_ERR_INVALID);
	CHECK(m == NULL);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_map_load(fd, 0, NULL, 0, &m, "s", &err), HB_ERR_UNSUPPORTED);
	CHECK(m == NULL);
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
	"FilePmdMapped:      4096 kB\n"
	/* memory hb_map_load read: two read areas around a hole */
	"7f3000000000-7f3000400000 r--p 00000000 00:00 0\n"
	"AnonHugePages:      4096 kB\n"
	"FilePmdMapped:         0 kB\n"
	"7f3000400000-7f3000600000 ---p 00000000 00:00 0\n"
	"AnonHugePages:         0 kB\n"
	"7f3000600000-7f3000a00000 r--p 00000000 00:00 0\n"
	"AnonHugePages:      2048 kB\n";

static void smaps_reader(void)
{
	CHECK_EQ_U64(hb_smaps_pmd_bytes(smaps, 0x55d0a0000000ull, 0x55d0a0400000ull), 2048u << 10);
	CHECK_EQ_U64(hb_smaps_pmd_bytes(smaps, 0x7f0000000000ull, 0x7f0000200000ull), 0);
	CHECK_EQ_U64(hb_smaps_pmd_bytes(smaps, 0x7f2000000000ull, 0x7f2000400000ull), 4096u << 10);
	/* an area without the line reads 0, never the next area's */
	CHECK_EQ_U64(hb_smaps_pmd_bytes(smaps, 0x7f1000000000ull, 0x7f1000001000ull), 0);
	/* a range where no area starts (from the end of one) */
	CHECK_EQ_U64(hb_smaps_pmd_bytes(smaps, 0x55d0a0400000ull, 0x55d0a0600000ull), 0);
	/* every area of a loaded range, anonymous huge pages counted */
	CHECK_EQ_U64(hb_smaps_pmd_bytes(smaps, 0x7f3000000000ull, 0x7f3000a00000ull), 6144u << 10);
	/* an area starting at the range's end is not in it */
	CHECK_EQ_U64(hb_smaps_pmd_bytes(smaps, 0x7f3000000000ull, 0x7f3000600000ull), 4096u << 10);
	CHECK_EQ_U64(hb_smaps_pmd_bytes("", 0x55d0a0000000ull, 0x55d0a0400000ull), 0);
	CHECK_EQ_U64(hb_map_pmd_bytes(NULL, 4096), 0);
}

HB_TEST_MAIN(T(maps_whole_file_on_boundary), T(loads_file_around_a_hole), T(load_refuses_short_file_and_bad_holes),
	     T(empty_file_is_refused), T(smaps_reader))
