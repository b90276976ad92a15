/*
 * hb_replay_parity.c: labels from replay against decode-time traces.
 *
 * Owns the comparison that gates every label (AFN-021 "prove exact top-10
 * replay parity"): the labels are loaded into one hash table keyed by
 * (sequence, position, layer), every decode trace is streamed against it.
 * Expert ids and their rank must be equal, weights within a declared
 * tolerance; geometry, artifact and tokenizer digests must be equal, and
 * the decode trace's owner and generation must be those of the label's
 * shard (no cross-owner or cross-generation mixing), and a trace that names
 * its thread (hebrus-trace(5) version 2) must name the thread the label
 * shard's manifest gives its sequence: a label shard holds many threads of
 * one owner, so its header names none.  Every failing record
 * is counted; the first one is the error, with its location.  Labels no
 * trace reached are counted, not failed: a decode trace never holds routes
 * for its last sampled token, which is never forwarded.
 */
#include "hb_replay_int.h"
#include "hb_io.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <unistd.h>

/* a sequence's thread, from a label shard's manifest */
struct seq_thread {
	uint64_t seq, thread;
};

struct lhead {
	struct hb_trace_header h;
	char *path;
	bool has_manifest;
	struct seq_thread *threads;        /* sorted by sequence */
	size_t n_threads;
};

struct lrec {
	uint64_t seq, pos;
	uint32_t layer, shard;
	bool used;
};

struct labels {
	struct lhead *heads;
	size_t n_heads;
	struct lrec *rec;
	uint32_t *ids;
	float *w;
	size_t n, cap;
	uint32_t k;
	size_t *table; /* index + 1, 0 empty */
	size_t mask;
	int rc;
	struct hb_error *err;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= UINT64_C(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

static size_t slot_of(const struct labels *L, uint64_t seq, uint64_t pos, uint32_t layer)
{
	size_t i = (size_t)mix(mix(seq) ^ (pos * 0x9E3779B97F4A7C15u) ^ layer) & L->mask;
	for (;;) {
		size_t v = L->table[i];
		if (!v)
			return i;
		v--;
		if (L->rec[v].seq == seq && L->rec[v].pos == pos && L->rec[v].layer == layer)
			return i;
		i = (i + 1) & L->mask;
	}
}

static int load_record(void *ctx, const struct hb_trace_header *h, const struct hb_route *r)
{
	struct labels *L = ctx;
	struct lrec *x;

	if (!L->k)
		L->k = h->top_k;
	if (h->top_k != L->k) {
		L->rc = hb_error_diag(L->err, hb_replay_diag_id(HB_RPD_GEOMETRY), HB_ERR_CONTRACT, "labels", false, 0,
				      "label shards disagree on top-k (%u, %u)", L->k, h->top_k);
		return 1;
	}
	if (L->n == L->cap) {
		size_t cap = L->cap ? 2 * L->cap : 4096;
		struct lrec *g = realloc(L->rec, cap * sizeof(*g));
		uint32_t *gi;
		float *gw;
		if (!g)
			goto nomem;
		L->rec = g;
		gi = realloc(L->ids, cap * L->k * sizeof(uint32_t));
		if (!gi)
			goto nomem;
		L->ids = gi;
		gw = realloc(L->w, cap * L->k * sizeof(float));
		if (!gw)
			goto nomem;
		L->w = gw;
		L->cap = cap;
	}
	x = &L->rec[L->n];
	x->seq = r->sequence;
	x->pos = r->ordinal;
	x->layer = r->layer;
	x->shard = (uint32_t)(L->n_heads - 1);
	x->used = false;
	memcpy(L->ids + L->n * L->k, r->ids, L->k * sizeof(uint32_t));
	memcpy(L->w + L->n * L->k, r->weights, L->k * sizeof(float));
	L->n++;
	return 0;
nomem:
	L->rc = hb_error_set(L->err, HB_ERR_NOMEM, "labels", "out of memory");
	return 1;
}

static int geometry_equal(const struct hb_trace_header *a, const struct hb_trace_header *b)
{
	return a->top_k == b->top_k && a->layers == b->layers && a->experts == b->experts;
}

static int cmp_seq_thread(const void *a, const void *b)
{
	const struct seq_thread *x = a, *y = b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The sequences' threads of the manifest beside shard (x.hbtrace: x.json),
 * when there is one; a manifest that is there but cannot be read is an
 * error, not a reason to check less. */
static int load_threads(struct lhead *lh, struct hb_error *err)
{
	struct hb_replay_manifest m;
	char man[4096];
	size_t len = strlen(lh->path);
	int rc;

	if (len < 8 || strcmp(lh->path + len - 8, ".hbtrace") || len + 1 > sizeof(man))
		return HB_OK;
	snprintf(man, sizeof(man), "%.*s.json", (int)(len - 8), lh->path);
	if (access(man, F_OK))
		return errno == ENOENT ? HB_OK : hb_error_sys(err, errno, man, "cannot check");
	if ((rc = hb_replay_manifest_load(man, &m, err)))
		return rc;
	lh->threads = malloc((m.n_ranges ? m.n_ranges : 1) * sizeof(*lh->threads));
	if (!lh->threads) {
		hb_replay_manifest_release(&m);
		return hb_error_set(err, HB_ERR_NOMEM, "labels", "out of memory");
	}
	for (size_t i = 0; i < m.n_ranges; i++)
		lh->threads[i] = (struct seq_thread){m.ranges[i].sequence, m.ranges[i].thread};
	lh->n_threads = m.n_ranges;
	lh->has_manifest = true;
	hb_replay_manifest_release(&m);
	qsort(lh->threads, lh->n_threads, sizeof(*lh->threads), cmp_seq_thread);
	return HB_OK;
}

static const struct seq_thread *thread_of(const struct lhead *lh, uint64_t seq)
{
	struct seq_thread key = {seq, 0};
	return lh->n_threads ? bsearch(&key, lh->threads, lh->n_threads, sizeof(key), cmp_seq_thread) : NULL;
}

static int load_labels(struct labels *L, const char *const *paths, size_t n_paths, struct hb_error *err)
{
	int rc = HB_OK;

	for (size_t p = 0; p < n_paths && !rc; p++) {
		char **files = NULL;
		size_t nf = 0;
		if ((rc = hb_replay_list_shards(paths[p], &files, &nf, err)))
			break;
		if (!nf)
			rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_COVERAGE), HB_ERR_NOTFOUND, paths[p], false, 0,
					   "no label shards (*.hbtrace)");
		for (size_t f = 0; f < nf && !rc; f++) {
			struct lhead *g = realloc(L->heads, (L->n_heads + 1) * sizeof(*g));
			struct hb_trace_header h;
			uint64_t records = 0;
			int fd;
			if (!g) {
				rc = hb_error_set(err, HB_ERR_NOMEM, "labels", "out of memory");
				break;
			}
			L->heads = g;
			if ((rc = hb_open_read(files[f], &fd, err)))
				break;
			memset(&L->heads[L->n_heads], 0, sizeof(L->heads[0]));
			L->heads[L->n_heads].path = files[f];
			files[f] = NULL;
			L->n_heads++;
			L->rc = 0;
			L->err = err;
			rc = hb_trace_read(fd, L->heads[L->n_heads - 1].path, load_record, L, &h, &records, err);
			if (L->rc)
				rc = L->rc;
			if (!rc) {
				L->heads[L->n_heads - 1].h = h;
				if (!geometry_equal(&h, &L->heads[0].h) || (L->k && L->k != h.top_k))
					rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_GEOMETRY), HB_ERR_CONTRACT,
							   L->heads[L->n_heads - 1].path, false, 0,
							   "top-k %u, %u layers, %u experts; %s has %u, %u, %u", h.top_k,
							   h.layers, h.experts, L->heads[0].path, L->heads[0].h.top_k,
							   L->heads[0].h.layers, L->heads[0].h.experts);
				L->k = h.top_k;
			}
			close(fd);
			if (!rc)
				rc = load_threads(&L->heads[L->n_heads - 1], err);
		}
		hb_replay_free_list(files, nf);
	}
	if (rc)
		return rc;
	{
		size_t cap = 16;
		while (cap < 2 * L->n + 16)
			cap *= 2;
		L->table = calloc(cap, sizeof(size_t));
		if (!L->table)
			return hb_error_set(err, HB_ERR_NOMEM, "labels", "out of memory");
		L->mask = cap - 1;
	}
	for (size_t i = 0; i < L->n; i++) {
		const struct lrec *x = &L->rec[i];
		size_t s = slot_of(L, x->seq, x->pos, x->layer);
		if (L->table[s]) {
			const struct lrec *y = &L->rec[L->table[s] - 1];
			return hb_error_diag(err, hb_replay_diag_id(HB_RPD_DUPLICATE), HB_ERR_CONTRACT,
					     L->heads[x->shard].path, false, 0,
					     "sequence %" PRIu64 " position %" PRIu64 " layer %" PRIu32
					     " is also labelled in %s",
					     x->seq, x->pos, x->layer, L->heads[y->shard].path);
		}
		L->table[s] = i + 1;
	}
	return HB_OK;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct cmp_ctx {
	struct labels *L;
	const char *trace;
	double tol;
	struct hb_parity_stats *st;
	struct hb_error *err;
	uint64_t index;
	bool header_done;
	int fatal;
};

static void fail(struct cmp_ctx *c, int diag, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void fail(struct cmp_ctx *c, int diag, const char *fmt, ...)
{
	char msg[HB_ERROR_MSG_MAX];
	va_list ap;

	c->st->failures++;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	hb_error_diag(c->err, hb_replay_diag_id((enum hb_replay_diag)diag), HB_ERR_CONTRACT, c->trace, false, 0,
		      "%s", msg);
}

static int check_header(struct cmp_ctx *c, const struct hb_trace_header *h)
{
	const struct lhead *l0 = &c->L->heads[0];

	c->header_done = true;
	if (!geometry_equal(h, &l0->h)) {
		fail(c, HB_RPD_GEOMETRY, "top-k %u, %u layers, %u experts; labels %s have %u, %u, %u", h->top_k,
		     h->layers, h->experts, l0->path, l0->h.top_k, l0->h.layers, l0->h.experts);
		return c->fatal = 1;
	}
	return 0;
}

static int compare_record(void *ctx, const struct hb_trace_header *h, const struct hb_route *r)
{
	struct cmp_ctx *c = ctx;
	struct labels *L = c->L;
	size_t s;
	struct lrec *x;
	const struct lhead *lh;
	uint64_t at = c->index++;

	if (!c->header_done && check_header(c, h))
		return 1;
	c->st->trace_records++;
	s = slot_of(L, r->sequence, r->ordinal, r->layer);
	if (!L->table[s]) {
		fail(c, HB_RPD_MISSING,
		     "record %" PRIu64 ": sequence %" PRIu64 " position %" PRIu64 " layer %" PRIu32 " has no label", at,
		     r->sequence, r->ordinal, r->layer);
		return 0;
	}
	x = &L->rec[L->table[s] - 1];
	lh = &L->heads[x->shard];
	if (memcmp(h->artifact, lh->h.artifact, 32) || memcmp(h->text, lh->h.text, 32)) {
		fail(c, HB_RPD_IDENTITY,
		     "record %" PRIu64 ": sequence %" PRIu64 ": %s digest differs from label shard %s", at, r->sequence,
		     memcmp(h->artifact, lh->h.artifact, 32) ? "artifact" : "tokenizer/template", lh->path);
		return 0;
	}
	if (h->owner != lh->h.owner || h->generation != lh->h.generation) {
		fail(c, HB_RPD_OWNER,
		     "record %" PRIu64 ": sequence %" PRIu64 ": owner %" PRIu64 " generation %" PRIu32
		     ", label shard %s has owner %" PRIu64 " generation %" PRIu32,
		     at, r->sequence, h->owner, h->generation, lh->path, lh->h.owner, lh->h.generation);
		return 0;
	}
	if (h->has_thread) {
		const struct seq_thread *st = thread_of(lh, r->sequence);
		if (!st || st->thread != h->thread) {
			char have[64];
			if (st)
				snprintf(have, sizeof(have), "has thread %" PRIu64, st->thread);
			fail(c, HB_RPD_OWNER, "record %" PRIu64 ": sequence %" PRIu64 ": thread %" PRIu64 ", label shard %s %s",
			     at, r->sequence, h->thread, lh->path,
			     st ? have : lh->has_manifest ? "has a manifest without this sequence"
							  : "has no manifest to say its thread");
			return 0;
		}
	}
	if (x->used) {
		fail(c, HB_RPD_DUPLICATE,
		     "record %" PRIu64 ": sequence %" PRIu64 " position %" PRIu64 " layer %" PRIu32
		     " appears twice in the decode traces",
		     at, r->sequence, r->ordinal, r->layer);
		return 0;
	}
	x->used = true;
	c->st->checked++;
	for (uint32_t i = 0; i < h->top_k; i++) {
		uint32_t want = L->ids[(size_t)(x - L->rec) * L->k + i];
		if (r->ids[i] != want) {
			fail(c, HB_RPD_MISMATCH,
			     "record %" PRIu64 ": sequence %" PRIu64 " position %" PRIu64 " layer %" PRIu32 " rank %" PRIu32
			     ": decode expert %" PRIu32 ", label expert %" PRIu32 " (%s)",
			     at, r->sequence, r->ordinal, r->layer, i, r->ids[i], want, lh->path);
			return 0;
		}
	}
	for (uint32_t i = 0; i < h->top_k; i++) {
		double d = fabs((double)r->weights[i] - (double)L->w[(size_t)(x - L->rec) * L->k + i]);
		if (!(d <= c->tol)) {
			fail(c, HB_RPD_WEIGHT,
			     "record %" PRIu64 ": sequence %" PRIu64 " position %" PRIu64 " layer %" PRIu32 " rank %" PRIu32
			     ": |weight difference| %.3g exceeds %.3g",
			     at, r->sequence, r->ordinal, r->layer, i, d, c->tol);
			return 0;
		}
		if (d > c->st->max_weight_diff)
			c->st->max_weight_diff = d;
	}
	return 0;
}

int hb_parity_run(const char *const *labels, size_t n_labels, const char *const *traces, size_t n_traces,
		  double weight_tol, struct hb_parity_stats *st, struct hb_error *err)
{
	struct labels L;
	int rc;

	memset(&L, 0, sizeof(L));
	memset(st, 0, sizeof(*st));
	if ((rc = load_labels(&L, labels, n_labels, err)))
		goto out;
	st->label_records = L.n;
	for (size_t t = 0; t < n_traces && !rc; t++) {
		struct cmp_ctx c = {&L, traces[t], weight_tol, st, err, 0, false, 0};
		struct hb_trace_header h;
		uint64_t records = 0;
		int fd;
		if ((rc = hb_open_read(traces[t], &fd, err)))
			break;
		rc = hb_trace_read(fd, traces[t], compare_record, &c, &h, &records, err);
		close(fd);
		if (c.fatal)
			rc = HB_ERR_CONTRACT;
		else if (!rc && !c.header_done)
			rc = check_header(&c, &h) ? HB_ERR_CONTRACT : HB_OK;
	}
	if (!rc) {
		uint64_t *seqs = malloc((L.n ? L.n : 1) * sizeof(uint64_t));
		if (!seqs) {
			rc = hb_error_set(err, HB_ERR_NOMEM, "labels", "out of memory");
			goto out;
		}
		for (size_t i = 0; i < L.n; i++) {
			st->unchecked_labels += !L.rec[i].used;
			seqs[i] = L.rec[i].seq;
		}
		qsort(seqs, L.n, sizeof(uint64_t), cmp_u64);
		for (size_t i = 0; i < L.n; i++)
			st->sequences += !i || seqs[i] != seqs[i - 1];
		free(seqs);
		if (st->failures)
			rc = HB_ERR_CONTRACT;
	}
out:
	for (size_t i = 0; i < L.n_heads; i++) {
		free(L.heads[i].path);
		free(L.heads[i].threads);
	}
	free(L.heads), free(L.rec), free(L.ids), free(L.w), free(L.table);
	return rc;
}
