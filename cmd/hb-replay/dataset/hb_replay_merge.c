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
#include "hb_checked.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_sha256.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PROBLEMS 100

struct cov {
	uint64_t seq, first, end, length;
	uint64_t rec0;         /* the range's first record in its shard */
	uint8_t tokens_sha[32];
	size_t manifest;
};

/* what each manifest said, for the checks across shards and for merge -o */
struct mfinfo {
	bool ok;               /* it matched its shard */
	bool hidden;
	uint8_t artifact[32], text[32];
	uint64_t top_k, layers, experts, max_shard_bytes, records, ranges;
};

struct merge {
	char **names;          /* manifest paths */
	size_t n_names;
	struct mfinfo *mi;     /* [n_names] */
	struct cov *c;
	size_t n, cap;
	cJSON *problems;
	struct hb_merge_stats *st;
	struct hb_error *err;
	uint64_t n_problems;
	bool have_identity;
	uint8_t artifact[32], text[32];
	size_t reference;      /* the manifest whose identity most shards share */
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

/*
 * Whether a manifest's worker, worker count and shard number are the ones
 * label wrote into its file name (hb_replay_shard_name): the proof itself
 * needs only the ranges, but a manifest that disagrees with its own name
 * (an edited or hostile one: a billion workers, shard 2^40) is refused
 * rather than believed or ignored.
 */
static bool named_as_written(const char *path, const struct hb_replay_manifest *m)
{
	const char *base = strrchr(path, '/');
	char want[96];

	base = base ? base + 1 : path;
	if (m->workers < 1 || m->workers > HB_REPLAY_MAX_WORKERS || m->worker >= m->workers)
		return false;
	snprintf(want, sizeof(want), "labels-%04" PRIu64 "-of-%04" PRIu64 "-%06" PRIu64 ".json", m->worker,
		 m->workers, m->shard);
	return strcmp(base, want) == 0;
}

/* the records a manifest's ranges promise, as text ("more than 2^64") */
static const char *ranges_need(const struct hb_replay_manifest *m, char *buf, size_t len)
{
	uint64_t total = 0, n;

	for (size_t i = 0; i < m->n_ranges; i++)
		if (hb_mul_u64(m->ranges[i].end - m->ranges[i].first, m->layers, &n) ||
		    hb_add_u64(total, n, &total)) {
			snprintf(buf, len, "more than 2^64");
			return buf;
		}
	snprintf(buf, len, "%" PRIu64, total);
	return buf;
}

static int check_one(struct merge *M, size_t idx, struct hb_error *err)
{
	const char *name = M->names[idx];
	struct hb_replay_manifest m;
	struct hb_trace_header h;
	struct hb_error e;
	char shard[4096], need[32];
	size_t len = strlen(name);
	uint64_t records = 0, rec0 = 0;
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
	if (!named_as_written(name, &m)) {
		problem(M, name, "its worker [%" PRIu64 ", %" PRIu64 "] and shard %" PRIu64
			" are not the ones its name says", m.worker, m.workers, m.shard);
		goto out;
	}
	hb_error_clear(&e);
	if (hb_replay_manifest_check_shard(&m, shard, &e)) {
		/* the field names the shard or its hidden-state sidecar */
		problem(M, e.field[0] ? e.field : shard, "%s", e.msg[0] ? e.msg : "does not match its manifest");
		goto out;
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
		problem(M, shard, "holds %" PRIu64 " records, its manifest's ranges need %s (it says %" PRIu64 ")",
			records, ranges_need(&m, need, sizeof(need)), m.records);
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
		M->c[M->n].rec0 = rec0;
		rec0 += (m.ranges[i].end - m.ranges[i].first) * m.layers;
		M->n++;
	}
	M->mi[idx] = (struct mfinfo){.ok = true, .hidden = m.has_hidden, .top_k = m.top_k, .layers = m.layers,
				     .experts = m.experts, .max_shard_bytes = m.max_shard_bytes,
				     .records = records, .ranges = m.n_ranges};
	memcpy(M->mi[idx].artifact, m.artifact, 32);
	memcpy(M->mi[idx].text, m.text, 32);
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

/* The identity (artifact and tokenizer digests) most manifests share, the
 * first such in name order on a tie; every other is a problem named by its
 * manifest, so that a stray shard is named whichever sorts first. */
static void check_identity(struct merge *M)
{
	size_t best = 0, best_n = 0;

	for (size_t i = 0; i < M->n_names; i++) {
		size_t n = 0;
		if (!M->mi[i].ok)
			continue;
		for (size_t j = 0; j < M->n_names; j++)
			n += M->mi[j].ok && !memcmp(M->mi[i].artifact, M->mi[j].artifact, 32) &&
			     !memcmp(M->mi[i].text, M->mi[j].text, 32);
		if (n > best_n)
			best = i, best_n = n;
	}
	if (!best_n)
		return;
	M->reference = best;
	memcpy(M->artifact, M->mi[best].artifact, 32);
	memcpy(M->text, M->mi[best].text, 32);
	M->have_identity = true;
	for (size_t i = 0; i < M->n_names; i++)
		if (M->mi[i].ok && (memcmp(M->artifact, M->mi[i].artifact, 32) || memcmp(M->text, M->mi[i].text, 32)))
			problem(M, M->names[i], "artifact or tokenizer digest differs from the other shards' (%zu of %zu "
				"agree with %s)", best_n, M->st->shards, M->names[best]);
}

/* Each sequence's ranges tile [0, length) once, from one set of tokens. */
static void check_tiling(struct merge *M)
{
	for (size_t i = 0; i < M->n;) {
		size_t j2 = i;
		uint64_t at = 0;
		char where[64];
		snprintf(where, sizeof(where), "sequence %" PRIu64, M->c[i].seq);
		for (; j2 < M->n && M->c[j2].seq == M->c[i].seq; j2++) {
			const struct cov *c = &M->c[j2];
			if (c->length != M->c[i].length || memcmp(c->tokens_sha, M->c[i].tokens_sha, 32))
				problem(M, where, "shards disagree on its length or tokens (%s, %s)",
					M->names[M->c[i].manifest], M->names[c->manifest]);
			if (c->first > at)
				problem(M, where, "positions %" PRIu64 "..%" PRIu64 " are in no shard", at, c->first - 1);
			else if (c->first < at)
				problem(M, where, "positions %" PRIu64 "..%" PRIu64 " are covered twice (%s)", c->first,
					(c->end < at ? c->end : at) - 1, M->names[c->manifest]);
			if (c->end > at) {
				M->st->positions += c->end - (c->first > at ? c->first : at);
				at = c->end;
			}
		}
		if (at < M->c[i].length)
			problem(M, where, "positions %" PRIu64 "..%" PRIu64 " are in no shard", at, M->c[i].length - 1);
		M->st->sequences++;
		i = j2;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Every transcript is covered from its own tokens, and every sequence of the
 * shards is a transcript's: a shard of another transcript file (another
 * split) is named by its manifest. */
static int check_transcripts(struct merge *M, const struct hb_transcripts *ts, struct hb_error *err)
{
	uint64_t *seqs = malloc((ts->n ? ts->n : 1) * sizeof(uint64_t));

	if (!seqs)
		return hb_error_set(err, HB_ERR_NOMEM, "merge", "out of memory");
	for (size_t i = 0; i < ts->n; i++) {
		const struct hb_transcript *t = &ts->t[i];
		struct cov key = {.seq = t->sequence, .first = 0};
		const struct cov *c = M->n ? bsearch(&key, M->c, M->n, sizeof(*M->c), cmp_cov) : NULL;
		uint8_t d[32];
		char where[64];
		seqs[i] = t->sequence;
		snprintf(where, sizeof(where), "line[%" PRIu64 "]", t->line);
		hb_transcript_token_digest(t, d);
		if (!c)
			problem(M, where, "sequence %" PRIu64 " is in no shard", t->sequence);
		else if (c->length != t->n_tokens || memcmp(c->tokens_sha, d, 32))
			problem(M, M->names[c->manifest], "sequence %" PRIu64 " was labelled from other tokens than %s",
				t->sequence, where);
	}
	qsort(seqs, ts->n, sizeof(uint64_t), cmp_u64);
	for (size_t i = 0; i < M->n; i++)
		if ((!i || M->c[i].seq != M->c[i - 1].seq) &&
		    !bsearch(&M->c[i].seq, seqs, ts->n, sizeof(uint64_t), cmp_u64))
			problem(M, M->names[M->c[i].manifest],
				"sequence %" PRIu64 " is not in the transcripts (a shard of another transcript file or split)",
				M->c[i].seq);
	free(seqs);
	return HB_OK;
}

static void merge_release(struct merge *M)
{
	cJSON_Delete(M->problems);
	hb_replay_free_list(M->names, M->n_names);
	free(M->mi);
	free(M->c);
}

/* The proof itself: M filled, *report the JSON; HB_ERR_CONTRACT with the
 * first problem in err when coverage fails. */
static int merge_prove(struct merge *M, const char *const *dirs, size_t n_dirs, const struct hb_transcripts *ts,
		       char **report, struct hb_merge_stats *st, struct hb_error *err, struct hb_error *probs)
{
	cJSON *j = cJSON_CreateObject();
	char hex[65];
	size_t len = 0;
	int rc = HB_OK;

	memset(M, 0, sizeof(*M));
	memset(st, 0, sizeof(*st));
	*report = NULL;
	hb_error_clear(probs);
	M->st = st;
	M->err = probs;
	M->problems = cJSON_CreateArray();
	if (!j || !M->problems) {
		cJSON_Delete(j);
		return hb_error_set(err, HB_ERR_NOMEM, "merge", "out of memory");
	}
	for (size_t i = 0; i < n_dirs && !rc; i++)
		rc = list_dir(M, dirs[i], err);
	if (!rc && M->n_names) {
		qsort(M->names, M->n_names, sizeof(char *), cmp_name);
		if (!(M->mi = calloc(M->n_names, sizeof(*M->mi))))
			rc = hb_error_set(err, HB_ERR_NOMEM, "merge", "out of memory");
	}
	for (size_t i = 0; i < M->n_names && !rc; i++)
		rc = check_one(M, i, err);
	if (rc)
		goto out;
	check_identity(M);
	if (M->n) /* every shard may have failed its check: M->c is NULL then */
		qsort(M->c, M->n, sizeof(*M->c), cmp_cov);
	check_tiling(M);
	if (ts) {
		if ((rc = check_transcripts(M, ts, err)))
			goto out;
		if (st->sequences != ts->n)
			problem(M, "transcripts", "shards hold %" PRIu64 " sequences, the transcripts %zu",
				st->sequences, ts->n);
	}
	hb_json_add_bool(j, "coverage", M->n_problems == 0);
	hb_json_add_u64(j, "shards", st->shards);
	hb_json_add_u64(j, "sequences", st->sequences);
	hb_json_add_u64(j, "positions", st->positions);
	hb_json_add_u64(j, "records", st->records);
	hb_json_add_bool(j, "transcripts_checked", ts != NULL);
	hb_hex_encode(M->artifact, 32, hex);
	hb_json_add_str(j, "artifact", M->have_identity ? hex : "");
	hb_hex_encode(M->text, 32, hex);
	hb_json_add_str(j, "text", M->have_identity ? hex : "");
	hb_json_add_u64(j, "problems_total", M->n_problems);
	cJSON_AddItemToObject(j, "problems", M->problems);
	M->problems = NULL;
	rc = hb_json_render(j, true, report, &len, err);
	if (!rc && M->n_problems) {
		*err = *probs;
		rc = HB_ERR_CONTRACT;
	}
out:
	cJSON_Delete(j);
	return rc;
}

int hb_merge_run(const char *const *dirs, size_t n_dirs, const struct hb_transcripts *ts, char **report,
		 struct hb_merge_stats *st, struct hb_error *err)
{
	struct merge M;
	struct hb_error probs;
	int rc = merge_prove(&M, dirs, n_dirs, ts, report, st, err, &probs);

	merge_release(&M);
	return rc;
}

/* ------------------------------------------------------------ merge -o */

/* A shard decoded for replay: its records in order, and how many of its
 * ranges are still to be replayed (at 0 it is freed). */
struct held {
	int32_t *ids;
	float *weights;
	uint64_t *seq, *pos;
	uint32_t *layer;
	uint64_t n, cap;
	size_t left;
	bool loaded;
};

struct gather {
	struct merge *M;
	uint32_t k, layers;
	struct held *h;        /* [M->n_names] */
	size_t cur, end;       /* the current sequence's coverage entries */
	uint64_t pos;          /* its next position */
};

static void held_free(struct held *h)
{
	free(h->ids), free(h->weights), free(h->seq), free(h->pos), free(h->layer);
	h->ids = NULL, h->weights = NULL, h->seq = NULL, h->pos = NULL, h->layer = NULL;
	h->n = 0;
}

static int held_record(void *ctx, const struct hb_trace_header *hd, const struct hb_route *r)
{
	struct held *h = ctx;

	if (h->n == h->cap || hd->top_k > HB_TRACE_MAX_TOPK)
		return 1;
	for (uint32_t i = 0; i < hd->top_k; i++)
		h->ids[h->n * hd->top_k + i] = (int32_t)r->ids[i];
	memcpy(h->weights + h->n * hd->top_k, r->weights, hd->top_k * sizeof(float));
	h->seq[h->n] = r->sequence;
	h->pos[h->n] = r->ordinal;
	h->layer[h->n] = r->layer;
	h->n++;
	return 0;
}

/* Decode shard idx (checked by the proof; read again, so its chunk
 * checksums are checked again, and its record count must not have moved). */
static int held_load(struct gather *G, size_t idx, struct hb_error *err)
{
	struct held *h = &G->h[idx];
	const struct mfinfo *mi = &G->M->mi[idx];
	const char *name = G->M->names[idx];
	char shard[4096];
	struct hb_trace_header hd;
	uint64_t records = 0;
	size_t len = strlen(name);
	int fd, rc;

	if (h->loaded)
		return HB_OK;
	snprintf(shard, sizeof(shard), "%.*s.hbtrace", (int)(len - 5), name);
	h->cap = mi->records;
	h->ids = malloc((size_t)(h->cap ? h->cap : 1) * G->k * sizeof(int32_t));
	h->weights = malloc((size_t)(h->cap ? h->cap : 1) * G->k * sizeof(float));
	h->seq = malloc((size_t)(h->cap ? h->cap : 1) * sizeof(uint64_t));
	h->pos = malloc((size_t)(h->cap ? h->cap : 1) * sizeof(uint64_t));
	h->layer = malloc((size_t)(h->cap ? h->cap : 1) * sizeof(uint32_t));
	if (!h->ids || !h->weights || !h->seq || !h->pos || !h->layer) {
		held_free(h);
		return hb_error_set(err, HB_ERR_NOMEM, "merge", "out of memory");
	}
	if ((rc = hb_open_read(shard, &fd, err)))
		return rc;
	rc = hb_trace_read(fd, shard, held_record, h, &hd, &records, err);
	close(fd);
	if (!rc && (records != mi->records || h->n != mi->records || hd.top_k != G->k))
		rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_MANIFEST), HB_ERR_CONTRACT, shard, false, 0,
				   "changed while it was merged");
	if (rc)
		return rc == 1 ? hb_error_diag(err, hb_replay_diag_id(HB_RPD_MANIFEST), HB_ERR_CONTRACT, shard, false, 0,
					       "changed while it was merged")
			       : rc;
	h->loaded = true;
	h->left = (size_t)mi->ranges;
	return HB_OK;
}

static int gather_begin(void *ctx, const struct hb_transcript *t, struct hb_error *err)
{
	struct gather *G = ctx;
	struct cov key = {.seq = t->sequence, .first = 0};
	const struct cov *c = bsearch(&key, G->M->c, G->M->n, sizeof(*G->M->c), cmp_cov);
	int rc;

	/* the proof holds: the ranges of every transcript tile it from 0 */
	if (!c)
		return hb_error_set(err, HB_ERR_INTERNAL, "merge", "sequence %" PRIu64 " has no shard", t->sequence);
	G->cur = (size_t)(c - G->M->c);
	for (G->end = G->cur; G->end < G->M->n && G->M->c[G->end].seq == t->sequence; G->end++)
		if ((rc = held_load(G, G->M->c[G->end].manifest, err)))
			return rc;
	G->pos = 0;
	return HB_OK;
}

static int gather_forward(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit, void *ectx,
			  struct hb_error *err)
{
	struct gather *G = ctx;

	(void)tokens;
	for (uint64_t p = G->pos; p < G->pos + n; p++) {
		const struct cov *c;
		struct held *h;
		while (G->cur < G->end && p >= G->M->c[G->cur].end)
			G->cur++;
		if (G->cur == G->end || p < G->M->c[G->cur].first)
			return hb_error_set(err, HB_ERR_INTERNAL, "merge", "position %" PRIu64 " has no shard", p);
		c = &G->M->c[G->cur];
		h = &G->h[c->manifest];
		for (uint32_t l = 0; l < G->layers; l++) {
			uint64_t r = c->rec0 + (p - c->first) * G->layers + l;
			if (r >= h->n || h->seq[r] != c->seq || h->pos[r] != p || h->layer[r] != l)
				return hb_error_diag(err, hb_replay_diag_id(HB_RPD_MANIFEST), HB_ERR_CONTRACT,
						     G->M->names[c->manifest], false, 0, "its shard changed while it was merged");
			if (emit(ectx, l, p, h->ids + r * G->k, h->weights + r * G->k, G->k))
				return hb_error_set(err, HB_ERR_INTERNAL, "merge", "the labeller refused a record");
		}
		if (p + 1 == c->end && !--h->left)
			held_free(h);
	}
	G->pos += n;
	return HB_OK;
}

/* merge -o needs one geometry and shard size, and no sidecars. */
static int check_writable(const struct merge *M, const char *const *dirs, size_t n_dirs, const char *outdir,
			  struct hb_error *err)
{
	const struct mfinfo *r = &M->mi[M->reference];
	struct stat so, sd;

	if (!M->have_identity)
		return hb_error_diag(err, hb_replay_diag_id(HB_RPD_COVERAGE), HB_ERR_CONTRACT, "merge", false, 0,
				     "no shards to merge");
	if (!stat(outdir, &so))
		for (size_t i = 0; i < n_dirs; i++)
			if (!stat(dirs[i], &sd) && sd.st_dev == so.st_dev && sd.st_ino == so.st_ino)
				return hb_error_set(err, HB_ERR_INVALID, outdir, "is also an input of the merge");
	for (size_t i = 0; i < M->n_names; i++) {
		const struct mfinfo *m = &M->mi[i];
		if (m->hidden)
			return hb_error_diag(err, hb_replay_diag_id(HB_RPD_MANIFEST), HB_ERR_CONTRACT, M->names[i], false,
					     0, "has a hidden-state sidecar, which merge -o does not carry");
		if (m->top_k != r->top_k || m->layers != r->layers || m->experts != r->experts ||
		    m->max_shard_bytes != r->max_shard_bytes)
			return hb_error_diag(err, hb_replay_diag_id(HB_RPD_MANIFEST), HB_ERR_CONTRACT, M->names[i], false,
					     0, "geometry or shard size differs from %s's", M->names[M->reference]);
	}
	return HB_OK;
}

int hb_merge_write(const char *const *dirs, size_t n_dirs, const struct hb_transcripts *ts, const char *outdir,
		   char **report, struct hb_merge_stats *st, struct hb_label_stats *lst, struct hb_error *err)
{
	struct merge M;
	struct hb_error probs;
	struct gather G;
	struct hb_replay_engine e;
	struct hb_label_config cfg;
	int rc;

	memset(&G, 0, sizeof(G));
	memset(lst, 0, sizeof(*lst));
	if (!ts)
		return hb_error_set(err, HB_ERR_INVALID, "merge", "writing merged labels needs the transcripts");
	rc = merge_prove(&M, dirs, n_dirs, ts, report, st, err, &probs);
	if (rc || (rc = check_writable(&M, dirs, n_dirs, outdir, err)))
		goto out;
	G.M = &M;
	G.k = (uint32_t)M.mi[M.reference].top_k;
	G.layers = (uint32_t)M.mi[M.reference].layers;
	if (!(G.h = calloc(M.n_names, sizeof(*G.h)))) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "merge", "out of memory");
		goto out;
	}
	memset(&e, 0, sizeof(e));
	e.top_k = G.k;
	e.layers = G.layers;
	e.experts = (uint32_t)M.mi[M.reference].experts;
	e.vocab = UINT64_MAX; /* the tokens were checked when they were labelled */
	memcpy(e.artifact, M.artifact, 32);
	e.ctx = &G;
	e.begin_transcript = gather_begin;
	e.forward = gather_forward;
	memset(&cfg, 0, sizeof(cfg));
	cfg.outdir = outdir;
	cfg.shard_index = 0;
	cfg.shard_count = 1;
	cfg.max_shard_bytes = M.mi[M.reference].max_shard_bytes;
	cfg.chunk_tokens = 256; /* the shards do not depend on it */
	memcpy(cfg.text, M.text, 32);
	rc = hb_label_run(ts, &e, &cfg, lst, err);
out:
	for (size_t i = 0; G.h && i < M.n_names; i++)
		held_free(&G.h[i]);
	free(G.h);
	merge_release(&M);
	return rc;
}
