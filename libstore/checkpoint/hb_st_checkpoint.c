/*
 * hb_st_checkpoint.c: a checkpoint directory as one set of tensors (see
 * hb_safetensors.h, the ck-* diagnostics).
 *
 * This file owns which files are shards, the agreement between
 * model.safetensors.index.json and the shards, the uniqueness of tensor
 * names across shards, and lookup and sorted iteration over all of them.
 * It does not validate a shard's bytes (hb_safetensors.c does, and its st-*
 * diagnostics pass through unchanged) nor read config.json.
 *
 * Fail closed: a *.safetensors file the index does not name is refused
 * rather than ignored, because a loader that globs the directory and one
 * that follows the index would then see different models.
 */
#include "hb_base.h"
#include "hb_checked.h"
#include "hb_json.h"
#include "hb_safetensors.h"

#include <dirent.h>
#include <sys/stat.h>

#define SUFFIX ".safetensors"
#define SUFFIX_LEN (sizeof(SUFFIX) - 1)

struct mapped {
	const char *tensor; /* owned by the index JSON */
	const char *shard;
};

static int ck_fail(struct hb_error *err, enum hb_st_diag d, int code,
		   const char *field, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static int ck_fail(struct hb_error *err, enum hb_st_diag d, int code,
		   const char *field, const char *fmt, ...)
{
	char msg[HB_ERROR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return hb_error_diag(err, hb_st_diag_table[d].id, code, field, false, 0, "%s", msg);
}

static bool has_suffix(const char *name)
{
	size_t n = strlen(name);
	return n > SUFFIX_LEN && strcmp(name + n - SUFFIX_LEN, SUFFIX) == 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

/* Every *.safetensors name in dir, sorted. */
static int list_shards(const char *dir, char ***out, size_t *count, struct hb_error *err)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = HB_OK;

	if (!d) {
		int e = errno;
		rc = ck_fail(err, HB_ST_DIAG_CK_DIR_INVALID,
			     e == ENOENT ? HB_ERR_NOTFOUND : HB_ERR_IO, dir,
			     "cannot list the directory: %s", strerror(e));
		if (err)
			err->sys_errno = e;
		return rc;
	}
	while ((de = readdir(d)) != NULL) {
		char *copy;
		if (!has_suffix(de->d_name))
			continue;
		if (n == HB_ST_SHARDS_MAX) {
			rc = ck_fail(err, HB_ST_DIAG_CK_TOO_MANY_SHARDS, HB_ERR_UNSUPPORTED, dir,
				     "more than %u shard files", HB_ST_SHARDS_MAX);
			break;
		}
		if (n == cap) {
			char **nn;
			cap = cap ? cap * 2 : 16;
			nn = realloc(names, cap * sizeof(*nn));
			if (!nn) {
				rc = hb_error_set(err, HB_ERR_NOMEM, dir, "out of memory");
				break;
			}
			names = nn;
		}
		copy = strdup(de->d_name);
		if (!copy) {
			rc = hb_error_set(err, HB_ERR_NOMEM, dir, "out of memory");
			break;
		}
		names[n++] = copy;
	}
	closedir(d);
	if (rc) {
		free_names(names, n);
		return rc;
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	*out = names;
	*count = n;
	return HB_OK;
}

static int cmp_mapped(const void *a, const void *b)
{
	return strcmp(((const struct mapped *)a)->tensor, ((const struct mapped *)b)->tensor);
}

/* A shard name in the index must be a plain file name in this directory. */
static bool plain_shard_name(const char *s)
{
	return has_suffix(s) && s[0] != '.' && !strchr(s, '/');
}

/*
 * Parse and check the index: {"metadata": {...}, "weight_map": {tensor:
 * shard}}.  On success *map holds the weight map sorted by tensor name.
 */
static int read_index(const char *path, cJSON **doc, struct mapped **map, size_t *nmap,
		      bool *has_total, uint64_t *total, struct hb_error *err)
{
	const char *file = HB_ST_INDEX_NAME;
	char field[HB_ERROR_FIELD_MAX];
	struct hb_error perr;
	const cJSON *it, *wm = NULL, *meta = NULL;
	struct mapped *m;
	size_t n = 0;

	hb_error_clear(&perr);
	if (hb_json_parse_file(path, HB_ST_INDEX_MAX, doc, &perr))
		return ck_fail(err, HB_ST_DIAG_CK_INDEX_INVALID,
			       perr.code == HB_ERR_IO ? HB_ERR_IO : HB_ERR_FORMAT, file,
			       "%s", perr.msg);
	if (!cJSON_IsObject(*doc))
		return ck_fail(err, HB_ST_DIAG_CK_INDEX_INVALID, HB_ERR_FORMAT, file,
			       "the index is not a JSON object");
	/* STRICTER than loaders that ignore extra keys: the two that writers
	 * produce are the only ones with a meaning we could check. */
	cJSON_ArrayForEach(it, *doc) {
		const cJSON **slot = !strcmp(it->string, "weight_map") ? &wm :
				     !strcmp(it->string, "metadata") ? &meta : NULL;
		snprintf(field, sizeof(field), "%s:%s", file, it->string);
		if (!slot)
			return ck_fail(err, HB_ST_DIAG_CK_INDEX_INVALID, HB_ERR_FORMAT, field,
				       "unknown top-level key");
		if (*slot)
			return ck_fail(err, HB_ST_DIAG_CK_INDEX_INVALID, HB_ERR_FORMAT, field,
				       "key appears twice");
		if (!cJSON_IsObject(it))
			return ck_fail(err, HB_ST_DIAG_CK_INDEX_INVALID, HB_ERR_FORMAT, field,
				       "not an object");
		*slot = it;
	}
	if (!wm) {
		snprintf(field, sizeof(field), "%s:weight_map", file);
		return ck_fail(err, HB_ST_DIAG_CK_INDEX_INVALID, HB_ERR_FORMAT, field, "missing");
	}
	*has_total = false;
	if (meta && cJSON_GetObjectItemCaseSensitive(meta, "total_size")) {
		snprintf(field, sizeof(field), "%s:metadata.total_size", file);
		if (hb_json_u64(meta, "total_size", field, total, NULL))
			return ck_fail(err, HB_ST_DIAG_CK_INDEX_INVALID, HB_ERR_FORMAT, field,
				       "not a non-negative integer of at most 2^53 - 1");
		*has_total = true;
	}
	cJSON_ArrayForEach(it, wm)
		n++;
	m = calloc(n ? n : 1, sizeof(*m));
	if (!m)
		return hb_error_set(err, HB_ERR_NOMEM, file, "out of memory");
	*map = m;
	n = 0;
	cJSON_ArrayForEach(it, wm) {
		snprintf(field, sizeof(field), "%s:weight_map[%s]", file, it->string);
		if (!cJSON_IsString(it) || !plain_shard_name(it->valuestring))
			return ck_fail(err, HB_ST_DIAG_CK_INDEX_INVALID, HB_ERR_FORMAT, field,
				       "value is not a plain *.safetensors file name");
		m[n].tensor = it->string;
		m[n].shard = it->valuestring;
		n++;
	}
	qsort(m, n, sizeof(*m), cmp_mapped);
	for (size_t i = 1; i < n; i++) {
		if (strcmp(m[i - 1].tensor, m[i].tensor) == 0) {
			snprintf(field, sizeof(field), "%s:weight_map[%s]", file, m[i].tensor);
			return ck_fail(err, HB_ST_DIAG_CK_INDEX_INVALID, HB_ERR_FORMAT, field,
				       "tensor is mapped twice");
		}
	}
	*nmap = n;
	return HB_OK;
}

static bool name_in(char **sorted, size_t n, const char *name)
{
	return n && bsearch(&name, sorted, n, sizeof(*sorted), cmp_str) != NULL;
}

/* The index's shard set and the directory listing must be equal. */
static int index_shards(const struct mapped *m, size_t nmap, char **disk, size_t ndisk,
			struct hb_error *err)
{
	char field[HB_ERROR_FIELD_MAX];
	char **want = NULL;
	size_t nwant = 0;
	int rc = HB_OK;

	want = calloc(nmap ? nmap : 1, sizeof(*want));
	if (!want)
		return hb_error_set(err, HB_ERR_NOMEM, HB_ST_INDEX_NAME, "out of memory");
	for (size_t i = 0; i < nmap; i++)
		want[nwant++] = (char *)m[i].shard;
	qsort(want, nwant, sizeof(*want), cmp_str);
	for (size_t i = 0; i < nwant && !rc; i++) {
		if (i && !strcmp(want[i - 1], want[i]))
			continue;
		if (!name_in(disk, ndisk, want[i])) {
			snprintf(field, sizeof(field), "%s:weight_map", HB_ST_INDEX_NAME);
			rc = ck_fail(err, HB_ST_DIAG_CK_INDEX_MISSING_SHARD, HB_ERR_NOTFOUND, field,
				     "the index names '%s', which is not in the directory", want[i]);
		}
	}
	for (size_t i = 0; i < ndisk && !rc; i++)
		if (!name_in(want, nwant, disk[i]))
			rc = ck_fail(err, HB_ST_DIAG_CK_STRAY_SHARD, HB_ERR_FORMAT, disk[i],
				     "shard file not named by %s", HB_ST_INDEX_NAME);
	free(want);
	return rc;
}

static int cmp_ref(const void *a, const void *b)
{
	const struct hb_st_ref *x = a, *y = b;
	int r = strcmp(x->tensor->name, y->tensor->name);

	return r ? r : (x->file < y->file ? -1 : x->file > y->file);
}

/* Merge-walk the sorted weight map against the sorted tensors. */
static int check_agreement(const struct hb_st_checkpoint *ck, const struct mapped *m,
			   size_t nmap, struct hb_error *err)
{
	char field[HB_ERROR_FIELD_MAX];
	size_t i = 0, j = 0;

	while (i < nmap || j < ck->ntensors) {
		const struct hb_st_ref *r = j < ck->ntensors ? &ck->by_name[j] : NULL;
		int c = !r ? -1 : i == nmap ? 1 : strcmp(m[i].tensor, r->tensor->name);

		if (c < 0) {
			snprintf(field, sizeof(field), "%s:weight_map[%s]", HB_ST_INDEX_NAME,
				 m[i].tensor);
			return ck_fail(err, HB_ST_DIAG_CK_INDEX_MISSING_TENSOR, HB_ERR_NOTFOUND,
				       field, "mapped to '%s', which does not hold it",
				       m[i].shard);
		}
		if (c > 0) {
			snprintf(field, sizeof(field), "%s:tensors[%s]", r->file->base,
				 r->tensor->name);
			return ck_fail(err, HB_ST_DIAG_CK_INDEX_UNMAPPED_TENSOR, HB_ERR_FORMAT,
				       field, "tensor is not in the index weight_map");
		}
		if (strcmp(m[i].shard, r->file->base) != 0) {
			snprintf(field, sizeof(field), "%s:weight_map[%s]", HB_ST_INDEX_NAME,
				 m[i].tensor);
			return ck_fail(err, HB_ST_DIAG_CK_INDEX_WRONG_SHARD, HB_ERR_FORMAT, field,
				       "mapped to '%s' but held by '%s'", m[i].shard,
				       r->file->base);
		}
		i++;
		j++;
	}
	return HB_OK;
}

static int index_tensors(struct hb_st_checkpoint *ck, struct hb_error *err)
{
	size_t n = 0, k = 0;

	/* each shard's count is bounded by its header size, so no overflow */
	for (size_t s = 0; s < ck->nshards; s++)
		n += ck->shards[s].ntensors;
	ck->by_name = calloc(n ? n : 1, sizeof(*ck->by_name));
	if (!ck->by_name)
		return hb_error_set(err, HB_ERR_NOMEM, ck->dir, "out of memory");
	ck->total_bytes = 0;
	for (size_t s = 0; s < ck->nshards; s++) {
		const struct hb_st_file *f = &ck->shards[s];
		for (size_t t = 0; t < f->ntensors; t++) {
			ck->by_name[k].file = f;
			ck->by_name[k].tensor = &f->tensors[t];
			if (hb_add_u64(ck->total_bytes, f->tensors[t].nbytes, &ck->total_bytes))
				return hb_error_set(err, HB_ERR_OVERFLOW, ck->dir,
						    "total tensor bytes overflow");
			k++;
		}
	}
	ck->ntensors = n;
	qsort(ck->by_name, n, sizeof(*ck->by_name), cmp_ref);
	for (size_t i = 1; i < n; i++) {
		const struct hb_st_ref *a = &ck->by_name[i - 1], *b = &ck->by_name[i];
		char field[HB_ERROR_FIELD_MAX];
		if (strcmp(a->tensor->name, b->tensor->name) != 0)
			continue;
		snprintf(field, sizeof(field), "%s:tensors[%s]", b->file->base, b->tensor->name);
		return ck_fail(err, HB_ST_DIAG_CK_DUPLICATE_TENSOR, HB_ERR_FORMAT, field,
			       "tensor is defined in both '%s' and '%s'", a->file->base,
			       b->file->base);
	}
	return HB_OK;
}

static char *join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = malloc(a + b + 2);

	if (p) {
		memcpy(p, dir, a);
		p[a] = '/';
		memcpy(p + a + 1, name, b + 1);
	}
	return p;
}

int hb_st_checkpoint_open(struct hb_st_checkpoint *ck, const char *dir,
			  struct hb_error *err)
{
	char **names = NULL, *ipath = NULL;
	size_t nnames = 0, nmap = 0;
	struct mapped *map = NULL;
	cJSON *doc = NULL;
	bool has_total = false;
	uint64_t total = 0;
	struct stat st;
	int rc;

	memset(ck, 0, sizeof(*ck));
	ck->dir = strdup(dir);
	ipath = join(dir, HB_ST_INDEX_NAME);
	if (!ck->dir || !ipath) {
		rc = hb_error_set(err, HB_ERR_NOMEM, dir, "out of memory");
		goto out;
	}
	if ((rc = list_shards(dir, &names, &nnames, err)))
		goto out;
	ck->has_index = stat(ipath, &st) == 0;
	if (ck->has_index) {
		if ((rc = read_index(ipath, &doc, &map, &nmap, &has_total, &total, err)) ||
		    (rc = index_shards(map, nmap, names, nnames, err)))
			goto out;
	}
	if (nnames == 0) {
		rc = ck_fail(err, HB_ST_DIAG_CK_NO_SHARDS, HB_ERR_NOTFOUND, dir,
			     "no *.safetensors file%s", ck->has_index ? " (the index maps none)" : "");
		goto out;
	}
	ck->shards = calloc(nnames, sizeof(*ck->shards));
	if (!ck->shards) {
		rc = hb_error_set(err, HB_ERR_NOMEM, dir, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < nnames; i++) {
		char *p = join(dir, names[i]);
		if (!p) {
			rc = hb_error_set(err, HB_ERR_NOMEM, dir, "out of memory");
			goto out;
		}
		rc = hb_st_open(&ck->shards[i], p, err);
		free(p);
		ck->nshards = i + 1; /* a failed open leaves a closed, zeroed file */
		if (rc)
			goto out;
	}
	if ((rc = index_tensors(ck, err)))
		goto out;
	if (ck->has_index) {
		if ((rc = check_agreement(ck, map, nmap, err)))
			goto out;
		if (has_total && total != ck->total_bytes) {
			char field[HB_ERROR_FIELD_MAX];
			snprintf(field, sizeof(field), "%s:metadata.total_size", HB_ST_INDEX_NAME);
			rc = ck_fail(err, HB_ST_DIAG_CK_INDEX_TOTAL_SIZE, HB_ERR_FORMAT, field,
				     "total_size %" PRIu64 ", the tensors hold %" PRIu64 " bytes",
				     total, ck->total_bytes);
			goto out;
		}
	}
out:
	free(map);
	cJSON_Delete(doc);
	free(ipath);
	free_names(names, nnames);
	if (rc)
		hb_st_checkpoint_close(ck);
	return rc;
}

void hb_st_checkpoint_close(struct hb_st_checkpoint *ck)
{
	if (!ck)
		return;
	for (size_t i = 0; ck->shards && i < ck->nshards; i++)
		hb_st_close(&ck->shards[i]);
	free(ck->shards);
	free(ck->by_name);
	free(ck->dir);
	memset(ck, 0, sizeof(*ck));
}

bool hb_st_checkpoint_find(const struct hb_st_checkpoint *ck, const char *name,
			   struct hb_st_ref *out)
{
	size_t lo = 0, hi = ck->ntensors;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = strcmp(ck->by_name[mid].tensor->name, name);
		if (r == 0) {
			*out = ck->by_name[mid];
			return true;
		}
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

struct hb_st_ref hb_st_checkpoint_at(const struct hb_st_checkpoint *ck, size_t i)
{
	return ck->by_name[i];
}

int hb_st_checkpoint_check_unchanged(const struct hb_st_checkpoint *ck,
				     struct hb_error *err)
{
	for (size_t i = 0; i < ck->nshards; i++) {
		int rc = hb_st_check_unchanged(&ck->shards[i], err);
		if (rc)
			return rc;
	}
	return HB_OK;
}
