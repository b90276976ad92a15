/*
 * hb_map.c: read-only file mappings on a 2 MiB boundary (hb_map.h).
 */
#include "hb_map.h"
#include "hb_io.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>

int hb_map_read(int fd, size_t len, const uint8_t **map, const char *what, struct hb_error *err)
{
	uint8_t *r, *a, *m;
	size_t span = len + HB_MAP_ALIGN;

	*map = NULL;
	if (!len)
		return hb_error_set(err, HB_ERR_UNSUPPORTED, what, "cannot map an empty file");
	/* reserve a span one boundary longer, then lay the file over its first
	 * boundary; the slack either side goes back */
	r = span > len ? mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
		       : MAP_FAILED;
	if (r != MAP_FAILED) {
		a = (uint8_t *)(((uintptr_t)r + HB_MAP_ALIGN - 1) & ~(uintptr_t)(HB_MAP_ALIGN - 1));
		m = mmap(a, len, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
		if (m == MAP_FAILED) {
			int e = errno;
			munmap(r, span);
			return hb_error_sys(err, e, what, "cannot map");
		}
		if (a > r)
			munmap(r, (size_t)(a - r));
		/* the tail: from the page after the file's last to the span's end */
		{
			long pg = sysconf(_SC_PAGESIZE);
			size_t p = pg > 0 ? (size_t)pg : 4096, end = (len + p - 1) / p * p;
			if ((size_t)(r + span - a) > end)
				munmap(a + end, (size_t)(r + span - a) - end);
		}
	} else {
		/* no room for the span: wherever the kernel puts it */
		m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED)
			return hb_error_sys(err, errno, what, "cannot map");
	}
#ifdef MADV_HUGEPAGE
	(void)madvise(m, len, MADV_HUGEPAGE);
#endif
	*map = m;
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

uint64_t hb_smaps_pmd_bytes(const char *smaps, uintptr_t start)
{
	const char *p = smaps;

	/* an area's entry begins "start-end perms ...": find ours, then its
	 * FilePmdMapped line before the next entry */
	while (p && *p) {
		char *e;
		unsigned long long a = strtoull(p, &e, 16);
		if (e != p && *e == '-' && (uintptr_t)a == start) {
			for (p = next_line(p); p && *p; p = next_line(p)) {
				unsigned long long kb;
				strtoull(p, &e, 16);
				if (e != p && *e == '-')
					break; /* the next area */
				if (strncmp(p, "FilePmdMapped:", 14) == 0) {
					kb = strtoull(p + 14, &e, 10);
					return e != p + 14 ? (uint64_t)kb * 1024 : 0;
				}
			}
			return 0;
		}
		p = next_line(p);
	}
	return 0;
}

uint64_t hb_map_pmd_bytes(const uint8_t *map)
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
		b = hb_smaps_pmd_bytes(text, (uintptr_t)map);
		free(text);
	}
	return b;
}
