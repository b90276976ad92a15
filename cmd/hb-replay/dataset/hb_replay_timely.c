/*
 * hb_replay_timely.c: the deadlines hb-run measured during a decode
 * (hb-run(1) DEADLINES), read for eval's Gate 4 timely recall
 * (hb-replay(1) GATE 4).  A file holds one sequence: its prompt length,
 * the engine's measured read latency and predicted-read depth, and per
 * position and layer when the pre-attention mix, the post-attention mix
 * and the router's top-k existed.
 */
#include "hb_replay_int.h"
#include "hb_io.h"
#include "hb_json.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <sys/stat.h>

struct hb_timely {
	struct hb_timely_rec *r;
	size_t n;
	uint64_t *seq, *prompt;
	size_t n_seq;
	double read_ns;
	uint32_t depth;
};

static int cmp_trec(const void *a, const void *b)
{
	const struct hb_timely_rec *x = a, *y = b;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	if (x->pos != y->pos)
		return x->pos < y->pos ? -1 : 1;
	return x->layer < y->layer ? -1 : x->layer > y->layer;
}

static int bad(struct hb_error *err, const char *path, const char *what)
{
	return hb_error_diag(err, hb_replay_diag_id(HB_RPD_FIELD), HB_ERR_INVALID, path, false, 0,
			     "not a hebrus-deadlines/1 file: %s", what);
}

/* x is a whole number in 0..max (a double cast past its type's range is
 * undefined behaviour, and a fraction is not a position) */
static bool whole(const cJSON *x, double max, uint64_t *out)
{
	if (!cJSON_IsNumber(x) || !(x->valuedouble >= 0 && x->valuedouble <= max) ||
	    x->valuedouble != floor(x->valuedouble))
		return false;
	*out = (uint64_t)x->valuedouble;
	return true;
}

static int load_one(struct hb_timely *t, const char *path, double *read_sum, struct hb_error *err)
{
	char *text = NULL;
	size_t len;
	cJSON *j = NULL, *a, *x, *rd;
	uint64_t seq;
	int rc;

	if ((rc = hb_read_file(path, 1u << 30, &text, &len, err)))
		return rc;
	j = cJSON_ParseWithLength(text, len);
	free(text);
	if (!j || !cJSON_IsString(x = cJSON_GetObjectItem(j, "format")) || strcmp(x->valuestring, "hebrus-deadlines/1")) {
		rc = bad(err, path, "format");
		goto out;
	}
	if (!whole(cJSON_GetObjectItem(j, "sequence"), 0x1p53, &seq) ||
	    !cJSON_IsArray(a = cJSON_GetObjectItem(j, "records")) || !(rd = cJSON_GetObjectItem(j, "read"))) {
		rc = bad(err, path, "sequence, read or records");
		goto out;
	}
	for (size_t i = 0; i < t->n_seq; i++)
		if (t->seq[i] == seq) {
			rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_DUPLICATE), HB_ERR_CONTRACT, path, false, 0,
					   "sequence %" PRIu64 " has two deadline files", seq);
			goto out;
		}
	{
		uint64_t *s = realloc(t->seq, (t->n_seq + 1) * sizeof(*s)), *p;
		if (s)
			t->seq = s;
		p = s ? realloc(t->prompt, (t->n_seq + 1) * sizeof(*p)) : NULL;
		if (!p) {
			rc = hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
			goto out;
		}
		t->prompt = p;
		x = cJSON_GetObjectItem(j, "prompt_tokens");
		t->seq[t->n_seq] = seq;
		t->prompt[t->n_seq] = 0;
		if (x && !whole(x, 0x1p53, &t->prompt[t->n_seq])) {
			rc = bad(err, path, "prompt_tokens");
			goto out;
		}
		t->n_seq++;
	}
	if (cJSON_IsNumber(x = cJSON_GetObjectItem(rd, "p50_ns"))) {
		if (!(x->valuedouble >= 0 && isfinite(x->valuedouble))) {
			rc = bad(err, path, "read.p50_ns");
			goto out;
		}
		*read_sum = *read_sum < 0 ? x->valuedouble : fmax(*read_sum, x->valuedouble);
	}
	if ((x = cJSON_GetObjectItem(rd, "predicted_depth"))) {
		uint64_t d;
		if (!whole(x, UINT32_MAX, &d)) {
			rc = bad(err, path, "read.predicted_depth");
			goto out;
		}
		if (d >= 1)
			t->depth = (uint32_t)d;
	}
	{
		size_t n = (size_t)cJSON_GetArraySize(a);
		struct hb_timely_rec *g = realloc(t->r, (t->n + n + 1) * sizeof(*g));
		const cJSON *e;
		if (!g) {
			rc = hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
			goto out;
		}
		t->r = g;
		cJSON_ArrayForEach(e, a) {
			double v[5];
			uint64_t pos = 0, layer = 0;
			int m = 0;
			const cJSON *f;
			bool ok = cJSON_IsArray(e);
			cJSON_ArrayForEach(f, e) {
				if (m == 0)
					ok &= whole(f, 0x1p53, &pos);
				else if (m == 1)
					ok &= whole(f, UINT32_MAX, &layer);
				else if (m < 5)
					ok &= cJSON_IsNumber(f) && isfinite(v[m] = f->valuedouble);
				m++;
			}
			if (m != 5 || !ok) {
				rc = bad(err, path, "a record is not [pos, layer, pre_attn, pre_moe, need]");
				goto out;
			}
			t->r[t->n++] = (struct hb_timely_rec){seq, pos, (uint32_t)layer, v[2], v[3], v[4]};
		}
	}
out:
	cJSON_Delete(j);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_json(const char *dir, char ***out, size_t *n, struct hb_error *err)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **v = NULL;
	size_t m = 0;

	*out = NULL, *n = 0;
	if (!d)
		return hb_error_sys(err, errno, dir, "cannot open");
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		char **g;
		if (len < 6 || strcmp(e->d_name + len - 5, ".json") || e->d_name[0] == '.')
			continue;
		size_t sz = strlen(dir) + len + 2;
		if (!(g = realloc(v, (m + 1) * sizeof(*v))) || !(g[m] = malloc(sz))) {
			closedir(d);
			hb_replay_free_list(g ? g : v, m);
			return hb_error_set(err, HB_ERR_NOMEM, dir, "out of memory");
		}
		v = g;
		snprintf(v[m], sz, "%s/%s", dir, e->d_name);
		m++;
	}
	closedir(d);
	qsort(v, m, sizeof(*v), cmp_str);
	*out = v, *n = m;
	return HB_OK;
}

int hb_timely_load(const char *const *files, size_t n, double read_ns, struct hb_timely **out, struct hb_error *err)
{
	struct hb_timely *t = calloc(1, sizeof(*t));
	double measured = -1;
	int rc = HB_OK;

	*out = NULL;
	if (!t)
		return hb_error_set(err, HB_ERR_NOMEM, "deadlines", "out of memory");
	t->depth = 1;
	for (size_t i = 0; !rc && i < n; i++) {
		struct stat sb;
		char **list = NULL;
		size_t m = 0;
		if (stat(files[i], &sb) || !S_ISDIR(sb.st_mode)) {
			rc = load_one(t, files[i], &measured, err);
			continue;
		}
		/* a directory: its *.json files in name order */
		if (!(rc = list_json(files[i], &list, &m, err)))
			for (size_t j = 0; !rc && j < m; j++)
				rc = load_one(t, list[j], &measured, err);
		hb_replay_free_list(list, m);
	}
	if (!rc && read_ns <= 0 && measured < 0)
		rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_FIELD), HB_ERR_INVALID, "read-ns", false, 0,
				   "the deadline files measured no read (a resident run): give --read-ns");
	if (rc) {
		hb_timely_free(t);
		return rc;
	}
	t->read_ns = read_ns > 0 ? read_ns : measured;
	qsort(t->r, t->n, sizeof(*t->r), cmp_trec);
	*out = t;
	return HB_OK;
}

void hb_timely_free(struct hb_timely *t)
{
	if (!t)
		return;
	free(t->r), free(t->seq), free(t->prompt);
	free(t);
}

const struct hb_timely_rec *hb_timely_find(const struct hb_timely *t, uint64_t seq, uint64_t pos, uint32_t layer)
{
	struct hb_timely_rec key = {seq, pos, layer, 0, 0, 0};
	return t ? bsearch(&key, t->r, t->n, sizeof(*t->r), cmp_trec) : NULL;
}

bool hb_timely_decode_step(const struct hb_timely *t, uint64_t seq, uint64_t pos)
{
	for (size_t i = 0; t && i < t->n_seq; i++)
		if (t->seq[i] == seq)
			return pos >= t->prompt[i];
	return false;
}

double hb_timely_read_ns(const struct hb_timely *t)
{
	return t->read_ns;
}

uint32_t hb_timely_depth(const struct hb_timely *t)
{
	return t->depth;
}
