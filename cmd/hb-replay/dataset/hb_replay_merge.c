/*
 * hb_replay_merge.c: the coverage proof over label shards from many
 * workers (hb-replay merge).
 *
 * Owns the check that a set of shard directories, however the work was
 * divided (--shard i/N, resumed runs), covers each sequence exactly once:
 * every manifest still matches its shard, the shard holds exactly the
 * records its ranges promise (position-major, every layer, the header's
 * identity), the ranges of each sequence tile [0, length) with no gap and no
 * overlap, and one artifact and tokenizer identity holds throughout.  It
 * reports every problem it finds (up to a cap) in the JSON proof and names
 * the first in the error.
 */
#include "hb_replay_int.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_sha256.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#define MAX_PROBLEMS 100

struct cov {
	uint64_t seq, first, end, length;
	uint8_t tokens_sha[32];
	size_t manifest;
};

struct merge {
	char **names;          /* manifest paths */
	size_t n_names;
	struct cov *c;
	size_t n, cap;
	cJSON *problems;
	struct hb_merge_stats *st;
	struct hb_error *err;
	uint64_t n_problems;
	bool have_identity;
	uint8_t artifact[32], text[32];
};

static void problem(struct merge *M, const char *where, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void problem(struct merge *M, const char *where, const char *fmt, ...)
{
	char msg[HB_ERROR_MSG_MAX], line[HB_ERROR_MSG_MAX + 256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (M->n_problems++ < MAX_PROBLEMS) {
		snprintf(line, sizeof(line), "%s: %s", where, msg);
		cJSON_AddItemToArray(M->problems, cJSON_CreateString(line));
	}
	hb_error_diag(M->err, hb_replay_diag_id(HB_RPD_COVERAGE), HB_ERR_CONTRACT, where, false, 0, "%s", msg);
}

struct walk {
	const struct hb_replay_manifest *m;
	size_t range;
	uint64_t pos;
	uint32_t layer;
	uint64_t records;
	bool bad;
	char why[160];
};

static int walk_record(void *ctx, const struct hb_trace_header *h, const struct hb_route *r)
{
	struct walk *w = ctx;
	const struct hb_replay_range *g;

	if (w->range >= w->m->n_ranges) {
		snprintf(w->why, sizeof(w->why), "record %" PRIu64 " lies beyond the manifest's ranges", w->records);
		w->bad = true;
		return 1;
	}
	g = &w->m->ranges[w->range];
	if (r->sequence != g->sequence || r->ordinal != w->pos || r->layer != w->layer) {
		snprintf(w->why, sizeof(w->why),
			 "record %" PRIu64 " is sequence %" PRIu64 " position %" PRIu64 " layer %" PRIu32
			 ", the manifest promises %" PRIu64 " %" PRIu64 " %" PRIu32,
			 w->records, r->sequence, r->ordinal, r->layer, g->sequence, w->pos, w->layer);
		w->bad = true;
		return 1;
	}
	w->records++;
	if (++w->layer == h->layers) {
		w->layer = 0;
		if (++w->pos == g->end) {
			w->range++;
			if (w->range < w->m->n_ranges)
				w->pos = w->m->ranges[w->range].first;
		}
	}
	return 0;
}

static int check_one(struct merge *M, size_t idx, struct hb_error *err)
{
	const char *name = M->names[idx];
	struct hb_replay_manifest m;
	struct hb_trace_header h;
	struct hb_error e;
	char shard[4096];
	size_t len = strlen(name);
	uint64_t records = 0;
	struct walk w;
	int fd, rc;

	snprintf(shard, sizeof(shard), "%.*s.hbtrace", (int)(len - 5), name);
	hb_error_clear(&e);
	if ((rc = hb_replay_manifest_load(name, &m, &e))) {
		if (rc == HB_ERR_NOMEM)
			return hb_error_set(err, rc, name, "out of memory");
		problem(M, name, "%s", e.msg);
		return HB_OK;
	}
	hb_error_clear(&e);
	if (hb_replay_manifest_check_shard(&m, shard, &e)) {
		/* the field names the shard or its hidden-state sidecar */
		problem(M, e.field[0] ? e.field : shard, "%s", e.msg[0] ? e.msg : "does not match its manifest");
		goto out;
	}
	if (!M->have_identity) {
		memcpy(M->artifact, m.artifact, 32);
		memcpy(M->text, m.text, 32);
		M->have_identity = true;
	} else if (memcmp(M->artifact, m.artifact, 32) || memcmp(M->text, m.text, 32)) {
		problem(M, name, "artifact or tokenizer digest differs from the first shard's");
	}
	memset(&w, 0, sizeof(w));
	w.m = &m;
	w.pos = m.n_ranges ? m.ranges[0].first : 0;
	hb_error_clear(&e);
	if ((rc = hb_open_read(shard, &fd, &e)) == HB_OK) {
		rc = hb_trace_read(fd, shard, walk_record, &w, &h, &records, &e);
		close(fd);
	}
	if (rc && !w.bad) {
		problem(M, shard, "%s", e.msg);
		goto out;
	}
	if (w.bad) {
		problem(M, shard, "%s", w.why);
		goto out;
	}
	if (w.range != m.n_ranges || records != m.records)
		problem(M, shard, "holds %" PRIu64 " records, its manifest's ranges need %" PRIu64, records, m.records);
	if (memcmp(h.artifact, m.artifact, 32) || memcmp(h.text, m.text, 32) || h.owner != m.owner ||
	    h.generation != m.generation || h.top_k != m.top_k || h.layers != m.layers || h.experts != m.experts)
		problem(M, shard, "header identity differs from its manifest");
	for (size_t i = 0; i < m.n_ranges; i++) {
		if (M->n == M->cap) {
			size_t cap = M->cap ? 2 * M->cap : 64;
			struct cov *g = realloc(M->c, cap * sizeof(*g));
			if (!g) {
				hb_replay_manifest_release(&m);
				return hb_error_set(err, HB_ERR_NOMEM, "merge", "out of memory");
			}
			M->c = g;
			M->cap = cap;
		}
		M->c[M->n].seq = m.ranges[i].sequence;
		M->c[M->n].first = m.ranges[i].first;
		M->c[M->n].end = m.ranges[i].end;
		M->c[M->n].length = m.ranges[i].length;
		memcpy(M->c[M->n].tokens_sha, m.ranges[i].tokens_sha, 32);
		M->c[M->n].manifest = idx;
		M->n++;
	}
	M->st->shards++;
	M->st->records += records;
out:
	hb_replay_manifest_release(&m);
	return HB_OK;
}

static int cmp_cov(const void *a, const void *b)
{
	const struct cov *x = a, *y = b;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

static int list_dir(struct merge *M, const char *dir, struct hb_error *err)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return hb_error_sys(err, errno, dir, "cannot list");
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char path[4096];
		char **g;
		if (de->d_name[0] == '.' || strncmp(de->d_name, "labels-", 7))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (len > 8 && !strcmp(de->d_name + len - 8, ".hbtrace")) {
			char man[4096];
			snprintf(man, sizeof(man), "%.*s.json", (int)(strlen(path) - 8), path);
			if (access(man, F_OK))
				problem(M, path, "a shard without a manifest (partial: rerun the labeller to resume)");
			continue;
		}
		if (len < 6 || strcmp(de->d_name + len - 5, ".json"))
			continue;
		g = realloc(M->names, (M->n_names + 1) * sizeof(char *));
		if (!g || !(g[M->n_names] = strdup(path))) {
			if (g)
				M->names = g;
			closedir(d);
			return hb_error_set(err, HB_ERR_NOMEM, "merge", "out of memory");
		}
		M->names = g;
		M->n_names++;
	}
	closedir(d);
	return HB_OK;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int hb_merge_run(const char *const *dirs, size_t n_dirs, const struct hb_transcripts *ts, char **report,
		 struct hb_merge_stats *st, struct hb_error *err)
{
	struct merge M;
	struct hb_error probs;
	cJSON *j = cJSON_CreateObject();
	char hex[65];
	size_t len = 0;
	int rc = HB_OK;

	memset(&M, 0, sizeof(M));
	memset(st, 0, sizeof(*st));
	*report = NULL;
	hb_error_clear(&probs);
	M.st = st;
	M.err = &probs;
	M.problems = cJSON_CreateArray();
	if (!j || !M.problems) {
		cJSON_Delete(j);
		cJSON_Delete(M.problems);
		return hb_error_set(err, HB_ERR_NOMEM, "merge", "out of memory");
	}
	for (size_t i = 0; i < n_dirs && !rc; i++)
		rc = list_dir(&M, dirs[i], err);
	if (!rc)
		qsort(M.names, M.n_names, sizeof(char *), cmp_name);
	for (size_t i = 0; i < M.n_names && !rc; i++)
		rc = check_one(&M, i, err);
	if (rc)
		goto out;
	if (M.n) /* every shard may have failed its check: M.c is NULL then */
		qsort(M.c, M.n, sizeof(*M.c), cmp_cov);
	for (size_t i = 0; i < M.n;) {
		size_t j2 = i;
		uint64_t at = 0;
		char where[64];
		snprintf(where, sizeof(where), "sequence %" PRIu64, M.c[i].seq);
		for (; j2 < M.n && M.c[j2].seq == M.c[i].seq; j2++) {
			const struct cov *c = &M.c[j2];
			if (c->length != M.c[i].length || memcmp(c->tokens_sha, M.c[i].tokens_sha, 32))
				problem(&M, where, "shards disagree on its length or tokens (%s, %s)",
					M.names[M.c[i].manifest], M.names[c->manifest]);
			if (c->first > at)
				problem(&M, where, "positions %" PRIu64 "..%" PRIu64 " are in no shard", at, c->first - 1);
			else if (c->first < at)
				problem(&M, where, "positions %" PRIu64 "..%" PRIu64 " are covered twice (%s)", c->first,
					(c->end < at ? c->end : at) - 1, M.names[c->manifest]);
			if (c->end > at) {
				st->positions += c->end - (c->first > at ? c->first : at);
				at = c->end;
			}
		}
		if (at < M.c[i].length)
			problem(&M, where, "positions %" PRIu64 "..%" PRIu64 " are in no shard", at, M.c[i].length - 1);
		st->sequences++;
		i = j2;
	}
	if (ts) {
		for (size_t i = 0; i < ts->n; i++) {
			const struct hb_transcript *t = &ts->t[i];
			struct cov key = {.seq = t->sequence, .first = 0};
			const struct cov *c = bsearch(&key, M.c, M.n, sizeof(*M.c), cmp_cov);
			uint8_t d[32];
			char where[64];
			snprintf(where, sizeof(where), "line[%" PRIu64 "]", t->line);
			hb_transcript_token_digest(t, d);
			if (!c)
				problem(&M, where, "sequence %" PRIu64 " is in no shard", t->sequence);
			else if (c->length != t->n_tokens || memcmp(c->tokens_sha, d, 32))
				problem(&M, where, "sequence %" PRIu64 " was labelled from other tokens", t->sequence);
		}
		if (st->sequences != ts->n)
			problem(&M, "transcripts", "shards hold %" PRIu64 " sequences, the transcripts %zu",
				st->sequences, ts->n);
	}
	hb_json_add_bool(j, "coverage", M.n_problems == 0);
	hb_json_add_u64(j, "shards", st->shards);
	hb_json_add_u64(j, "sequences", st->sequences);
	hb_json_add_u64(j, "positions", st->positions);
	hb_json_add_u64(j, "records", st->records);
	hb_json_add_bool(j, "transcripts_checked", ts != NULL);
	hb_hex_encode(M.artifact, 32, hex);
	hb_json_add_str(j, "artifact", M.have_identity ? hex : "");
	hb_hex_encode(M.text, 32, hex);
	hb_json_add_str(j, "text", M.have_identity ? hex : "");
	hb_json_add_u64(j, "problems_total", M.n_problems);
	cJSON_AddItemToObject(j, "problems", M.problems);
	M.problems = NULL;
	rc = hb_json_render(j, true, report, &len, err);
	if (!rc && M.n_problems) {
		*err = probs;
		rc = HB_ERR_CONTRACT;
	}
out:
	cJSON_Delete(j);
	cJSON_Delete(M.problems);
	hb_replay_free_list(M.names, M.n_names);
	free(M.c);
	return rc;
}
