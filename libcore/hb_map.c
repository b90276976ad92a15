/*
 * hb_map.c: read-only weights on a 2 MiB boundary, mapped or read (hb_map.h).
 */
#include "hb_map.h"
#include "hb_io.h"

#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>

/* hb_map_load reads this many bytes a call */
#define HB_LOAD_PIECE ((size_t)8 << 20)

/* len bytes of address space on an HB_MAP_ALIGN boundary, inaccessible:
 * a span one boundary longer is reserved and its slack either side given
 * back (the tail from the page after len's last); NULL where there is no
 * room for the span */
static uint8_t *reserve_aligned(size_t len)
{
	size_t span = len + HB_MAP_ALIGN;
	uint8_t *r, *a;
	long pg = sysconf(_SC_PAGESIZE);
	size_t p = pg > 0 ? (size_t)pg : 4096, end = (len + p - 1) / p * p;

	if (span < len)
		return NULL;
	r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return NULL;
	a = (uint8_t *)(((uintptr_t)r + HB_MAP_ALIGN - 1) & ~(uintptr_t)(HB_MAP_ALIGN - 1));
	if (a > r)
		munmap(r, (size_t)(a - r));
	if ((size_t)(r + span - a) > end)
		munmap(a + end, (size_t)(r + span - a) - end);
	return a;
}

int hb_map_read(int fd, size_t len, const uint8_t **map, const char *what, struct hb_error *err)
{
	uint8_t *a, *m;

	*map = NULL;
	if (!len)
		return hb_error_set(err, HB_ERR_UNSUPPORTED, what, "cannot map an empty file");
	/* the file over a reserved boundary, or wherever the kernel puts it
	 * when the address space has no room for the span */
	a = reserve_aligned(len);
	m = mmap(a, len, PROT_READ, MAP_SHARED | (a ? MAP_FIXED : 0), fd, 0);
	if (m == MAP_FAILED) {
		int e = errno;
		if (a)
			munmap(a, len);
		return hb_error_sys(err, e, what, "cannot map");
	}
#ifdef MADV_HUGEPAGE
	(void)madvise(m, len, MADV_HUGEPAGE);
#endif
	*map = m;
	return HB_OK;
}

/* bytes [off, off + n) of fd into dst, in pieces, whatever pread returns
 * short; an end of file before them is an error naming the offset */
static int read_range(int fd, uint8_t *dst, uint64_t off, size_t n, const char *what, struct hb_error *err)
{
	while (n) {
		size_t want = n < HB_LOAD_PIECE ? n : HB_LOAD_PIECE;
		ssize_t got = pread(fd, dst, want, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return hb_error_sys(err, errno, what, "cannot read at byte %llu", (unsigned long long)off);
		if (got == 0)
			return hb_error_set(err, HB_ERR_IO, what,
					    "the file ends at byte %llu, %zu bytes before the length it was opened with",
					    (unsigned long long)off, n);
		dst += got, off += (uint64_t)got, n -= (size_t)got;
	}
	return HB_OK;
}

int hb_map_load(int fd, size_t len, const struct hb_map_hole *holes, size_t nholes, const uint8_t **map,
		const char *what, struct hb_error *err)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t p = pg > 0 ? (size_t)pg : 4096, at = 0;
	uint8_t *a;
	int rc = HB_OK;

	*map = NULL;
	if (!len)
		return hb_error_set(err, HB_ERR_UNSUPPORTED, what, "cannot load an empty file");
	for (size_t i = 0; i < nholes; i++)
		if (holes[i].off > len || holes[i].len > len - holes[i].off ||
		    (i && holes[i].off < holes[i - 1].off + holes[i - 1].len))
			return hb_error_set(err, HB_ERR_INVALID, what, "hole %zu is outside the file or out of order", i);
	a = reserve_aligned(len);
	if (!a)
		return hb_error_set(err, HB_ERR_NOMEM, what, "no address space for %zu bytes", len);
	/* each stretch between holes made writable, advised huge, read.  A
	 * hole keeps only its whole 2 MiB blocks: the bytes of the blocks at
	 * its edges are read with their neighbours, so that the weights beside
	 * it stay in 2 MiB pages (an area that ends inside a block is mapped
	 * 4 KiB at a time: the small bench model's artifact then has 853.5
	 * of its 855.7 MB in 2 MiB pages, against 851.4 with the hole cut at
	 * 4 KiB pages) */
	for (size_t i = 0; i <= nholes && !rc; i++) {
		size_t h0 = i < nholes ? (size_t)holes[i].off : len, h1 = i < nholes ? h0 + (size_t)holes[i].len : len;
		size_t in0 = (h0 + HB_MAP_ALIGN - 1) / HB_MAP_ALIGN * HB_MAP_ALIGN;
		size_t in1 = h1 / HB_MAP_ALIGN * HB_MAP_ALIGN; /* the hole's whole blocks */
		size_t stop = in0 < in1 ? in0 : h1, next = in0 < in1 ? in1 : h1;
		if (stop > at) {
			size_t lo = at / p * p, hi = (stop + p - 1) / p * p;
			if (mprotect(a + lo, hi - lo, PROT_READ | PROT_WRITE))
				rc = hb_error_sys(err, errno, what, "cannot make %zu bytes of memory writable", hi - lo);
#ifdef MADV_HUGEPAGE
			if (!rc)
				(void)madvise(a + lo, hi - lo, MADV_HUGEPAGE);
#endif
			if (!rc)
				rc = read_range(fd, a + at, (uint64_t)at, stop - at, what, err);
			if (!rc && mprotect(a + lo, hi - lo, PROT_READ))
				rc = hb_error_sys(err, errno, what, "cannot make the weights read-only");
		}
		if (next > at)
			at = next;
	}
	if (rc) {
		munmap(a, len);
		return rc;
	}
	*map = a;
	return HB_OK;
}

void hb_map_release(const uint8_t *map, size_t len)
{
	if (map)
		munmap((void *)map, len);
}

/* the line after p's, or NULL at the end */
static const char *next_line(const char *p)
{
	const char *nl = strchr(p, '\n');
	return nl ? nl + 1 : NULL;
}

/* the kB figure of line p if it is field `name` (with its colon), else -1 */
static long long field_kb(const char *p, const char *name)
{
	size_t n = strlen(name);
	char *e;
	unsigned long long kb;

	if (strncmp(p, name, n) != 0)
		return -1;
	kb = strtoull(p + n, &e, 10);
	return e != p + n ? (long long)kb : -1;
}

uint64_t hb_smaps_pmd_bytes(const char *smaps, uintptr_t start, uintptr_t end)
{
	const char *p = smaps;
	uint64_t sum = 0;
	bool ours = false;

	/* an area's entry begins "start-end perms ...", its fields follow */
	for (; p && *p; p = next_line(p)) {
		char *e;
		unsigned long long a = strtoull(p, &e, 16);
		long long kb;
		if (e != p && *e == '-') {
			ours = (uintptr_t)a >= start && (uintptr_t)a < end;
			continue;
		}
		if (ours && ((kb = field_kb(p, "FilePmdMapped:")) >= 0 || (kb = field_kb(p, "AnonHugePages:")) >= 0))
			sum += (uint64_t)kb * 1024;
	}
	return sum;
}

uint64_t hb_map_pmd_bytes(const uint8_t *map, size_t len)
{
	char *text = NULL;
	size_t n = 0;
	uint64_t b = 0;
	int fd, rc;
	struct hb_error err;

	if (!map || hb_open_read("/proc/self/smaps", &fd, &err))
		return 0;
	rc = hb_read_fd(fd, (uint64_t)1 << 30, "/proc/self/smaps", &text, &n, &err);
	close(fd);
	if (!rc) {
		b = hb_smaps_pmd_bytes(text, (uintptr_t)map, (uintptr_t)map + len);
		free(text);
	}
	return b;
}
