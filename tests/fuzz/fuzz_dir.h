/*
 * fuzz_dir.h: inputs that are several files, for the targets whose reader
 * takes a directory (checkpoints, label shards and manifests, feature sets,
 * DFlash drafts) or a path.
 *
 * An input is split on HB_FUZZ_SEP ("\n%%HBFILE%%\n"); part i becomes the
 * file names[i] of a scratch directory, and a part of length 0 means the
 * file is absent (parts beyond the names are ignored).  The directory is
 * one per process (mkdtemp under $TMPDIR or /tmp, removed at exit), emptied
 * before each input, so libFuzzer's -fork workers never share one.  The
 * separator is in each such target's dictionary so that mutations can add
 * and drop files.  This header owns only the splitting and the scratch
 * directory; every reader it feeds is libstore's or hb-replay's.
 */
#ifndef HB_FUZZ_DIR_H
#define HB_FUZZ_DIR_H

#include "fuzz.h"
#include "hb_err.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>

#define HB_FUZZ_SEP "\n%%HBFILE%%\n"
#define HB_FUZZ_MAX_PARTS 8

struct hb_fuzz_part {
	const uint8_t *data;
	size_t len;
};

/* Split data into at most max parts on HB_FUZZ_SEP; returns the count. */
static inline size_t hb_fuzz_split(const uint8_t *data, size_t size, struct hb_fuzz_part *parts, size_t max)
{
	const size_t sl = sizeof(HB_FUZZ_SEP) - 1;
	size_t n = 0, at = 0;

	while (n < max) {
		const uint8_t *p = NULL;

		for (size_t i = at; size >= sl && i + sl <= size; i++)
			if (data[i] == '\n' && !memcmp(data + i, HB_FUZZ_SEP, sl)) {
				p = data + i;
				break;
			}
		parts[n].data = data + at;
		parts[n].len = p ? (size_t)(p - (data + at)) : size - at;
		n++;
		if (!p)
			break;
		at = (size_t)(p - data) + sl;
	}
	return n;
}

static inline int hb_fuzz_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	if (ftw->level == 0)
		return 0;
	return remove(path);
}

static char hb_fuzz_dir_path[4096];

static inline void hb_fuzz_dir_cleanup(void)
{
	if (hb_fuzz_dir_path[0]) {
		nftw(hb_fuzz_dir_path, hb_fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
		rmdir(hb_fuzz_dir_path);
	}
}

/* The scratch directory, emptied; NULL when it cannot be made (the input
 * is then skipped: a full /tmp is not a parser finding). */
static inline const char *hb_fuzz_scratch(void)
{
	if (!hb_fuzz_dir_path[0]) {
		const char *t = getenv("TMPDIR");

		snprintf(hb_fuzz_dir_path, sizeof(hb_fuzz_dir_path), "%s/hb-fuzz-XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(hb_fuzz_dir_path)) {
			hb_fuzz_dir_path[0] = '\0';
			return NULL;
		}
		atexit(hb_fuzz_dir_cleanup);
	}
	if (nftw(hb_fuzz_dir_path, hb_fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
		return NULL;
	return hb_fuzz_dir_path;
}

/* Write len bytes to dir/name; 0 or -1. */
static inline int hb_fuzz_put(const char *dir, const char *name, const void *data, size_t len)
{
	char path[4200];
	const uint8_t *p = data;
	size_t done = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	while (done < len) {
		ssize_t n = write(fd, p + done, len - done);
		if (n <= 0) {
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	return close(fd);
}

/* Read dir/name whole (at most max bytes) into a heap buffer; 0 or -1. */
static inline int hb_fuzz_get(const char *dir, const char *name, size_t max, uint8_t **out, size_t *len)
{
	char path[4200];
	struct stat st;
	int fd;

	*out = NULL;
	*len = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || (uint64_t)st.st_size > max || !(*out = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return -1;
	}
	*len = (size_t)st.st_size;
	if (*len && pread(fd, *out, *len, 0) != (ssize_t)*len) {
		free(*out);
		*out = NULL;
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Write the parts of data into the scratch directory as names[0..n)
 * (which may name files in sub-directories the caller made); returns the
 * directory or NULL (input skipped). */
static inline const char *hb_fuzz_unpack_into(const uint8_t *data, size_t size, const char *const *names, size_t n)
{
	struct hb_fuzz_part parts[HB_FUZZ_MAX_PARTS];
	const char *dir = hb_fuzz_dir_path;
	size_t np;

	if (!dir[0] || n > HB_FUZZ_MAX_PARTS)
		return NULL;
	np = hb_fuzz_split(data, size, parts, n);
	for (size_t i = 0; i < np; i++)
		if (parts[i].len && hb_fuzz_put(dir, names[i], parts[i].data, parts[i].len))
			return NULL;
	return dir;
}

/* Empty the scratch directory and write the parts of data into it as
 * names[0..n); returns the directory or NULL (input skipped). */
static inline const char *hb_fuzz_unpack(const uint8_t *data, size_t size, const char *const *names, size_t n)
{
	return hb_fuzz_scratch() ? hb_fuzz_unpack_into(data, size, names, n) : NULL;
}

/* An id belongs to a diagnostic table: it starts with one of the prefixes. */
static inline bool hb_fuzz_id_in(const char *id, const char *const *prefixes, size_t n)
{
	if (!id || !*id)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strncmp(id, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

/* Two reads refused an input the same way: the code returned is the one
 * recorded, the id and the field are the same, and the id (when there is
 * one: JSON syntax and missing files have none) is of the tables named. */
static inline void hb_fuzz_same_refusal(int rc, const struct hb_error *e1, const struct hb_error *e2,
					const char *const *prefixes, size_t n)
{
	HB_FUZZ_ASSERT(rc < 0 && e1->code == rc);
	HB_FUZZ_ASSERT(hb_fuzz_same_id(e1->id, e2->id) && !strcmp(e1->field, e2->field));
	HB_FUZZ_ASSERT(e1->id == NULL || hb_fuzz_id_in(e1->id, prefixes, n));
}

#endif
