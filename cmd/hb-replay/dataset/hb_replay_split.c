/*
 * hb_replay_split.c: owner/thread splits before windowing (AFN-021
 * "split threads before creating windows").
 *
 * Owns the assignment of whole owners to train / validation / temporal
 * holdout / runtime holdout, the windowing that follows it, the exact
 * duplicate-window filter across splits and the overlap proof.  Because a
 * thread belongs to one owner (hb_transcripts_parse refuses otherwise),
 * assigning owners whole assigns threads whole.  The proof is recomputed
 * from the windows actually emitted, not from the assignment table, so a
 * bug in the windowing would show as a non-zero overlap.
 */
#include "model/hb_ple_hash.h"
#include "hb_replay.h"
#include "hb_sha256.h"

static const char *const split_names[HB_SPLIT_COUNT] = {"train", "validation", "temporal", "runtime"};

const char *hb_split_name(int split)
{
	return split >= 0 && split < HB_SPLIT_COUNT ? split_names[split] : NULL;
}

/* the project's one splitmix64 (hb_ple_hash.h) */
#define mix hb_splitmix64

struct owner {
	uint64_t id, max_time;
	bool runtime;
	int split;
};

static int cmp_owner_id(const void *a, const void *b)
{
	const struct owner *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* newest first; ties by id so the order is total */
static int cmp_owner_new(const void *a, const void *b)
{
	const struct owner *const *x = a, *const *y = b;
	if ((*x)->max_time != (*y)->max_time)
		return (*x)->max_time > (*y)->max_time ? -1 : 1;
	return (*x)->id < (*y)->id ? -1 : (*x)->id > (*y)->id;
}

static struct owner *find_owner(struct owner *o, size_t n, uint64_t id)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (o[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && o[lo].id == id ? &o[lo] : NULL;
}

struct seen {
	uint8_t (*d)[32];
	int *split;
	size_t cap, n;
};

/* Open addressing on the digest's first bytes. Returns the slot. */
static size_t seen_slot(const struct seen *s, const uint8_t d[32])
{
	uint64_t h;
	size_t i;
	memcpy(&h, d, 8);
	for (i = (size_t)h & (s->cap - 1); s->split[i] >= 0; i = (i + 1) & (s->cap - 1))
		if (!memcmp(s->d[i], d, 32))
			break;
	return i;
}

static int cmp_pair(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* keys with more than one distinct split among (key, split) pairs; also
 * counts distinct keys per split into per[] */
static uint64_t overlaps(uint64_t *pairs, size_t n, uint64_t per[HB_SPLIT_COUNT])
{
	uint64_t bad = 0;
	qsort(pairs, n, 2 * sizeof(uint64_t), cmp_pair);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		uint64_t splits = 0;
		while (j < n && pairs[2 * j] == pairs[2 * i]) {
			if (!(splits & (UINT64_C(1) << pairs[2 * j + 1])))
				per[pairs[2 * j + 1]]++;
			splits |= UINT64_C(1) << pairs[2 * j + 1];
			j++;
		}
		bad += (splits & (splits - 1)) != 0;
		i = j;
	}
	return bad;
}

int hb_split_run(const struct hb_transcripts *ts, const struct hb_split_config *cfg, hb_split_emit_fn emit,
		 void *ctx, struct hb_split_result *res, struct hb_error *err)
{
	static const int order[HB_SPLIT_COUNT] = {HB_SPLIT_RUNTIME, HB_SPLIT_TEMPORAL, HB_SPLIT_VALIDATION,
						  HB_SPLIT_TRAIN};
	struct owner *o = NULL, **by_time = NULL;
	struct seen seen = {0};
	uint64_t *opairs = NULL, *tpairs = NULL, n_pairs = 0, cap_pairs = 0, next_seq = 0;
	size_t n_owners = 0, n_free = 0;
	uint64_t stride = cfg->stride ? cfg->stride : cfg->window;
	bool any_time = false;
	int rc = HB_OK;

	memset(res, 0, sizeof(*res));
	o = calloc(ts->n ? ts->n : 1, sizeof(*o));
	by_time = calloc(ts->n ? ts->n : 1, sizeof(*by_time));
	res->owner_split = calloc(ts->n ? ts->n : 1, sizeof(int));
	if (!o || !by_time || !res->owner_split) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "split", "out of memory");
		goto out;
	}
	/* owners, whole */
	for (size_t i = 0; i < ts->n; i++)
		o[i].id = ts->t[i].owner;
	qsort(o, ts->n, sizeof(*o), cmp_owner_id);
	for (size_t i = 0; i < ts->n; i++)
		if (!n_owners || o[n_owners - 1].id != o[i].id)
			o[n_owners++] = (struct owner){o[i].id, 0, false, HB_SPLIT_TRAIN};
	for (size_t i = 0; i < ts->n; i++) {
		struct owner *w = find_owner(o, n_owners, ts->t[i].owner);
		w->runtime |= ts->t[i].runtime;
		if (ts->t[i].has_time) {
			any_time = true;
			if (ts->t[i].time > w->max_time)
				w->max_time = ts->t[i].time;
		}
	}
	for (size_t i = 0; i < n_owners; i++) {
		if (o[i].runtime)
			o[i].split = HB_SPLIT_RUNTIME;
		else
			by_time[n_free++] = &o[i];
	}
	if (any_time && n_free) {
		size_t n_temporal = (size_t)(cfg->temporal_fraction * (double)n_free + 0.5);
		qsort(by_time, n_free, sizeof(*by_time), cmp_owner_new);
		for (size_t i = 0; i < n_temporal && i < n_free; i++)
			by_time[i]->split = HB_SPLIT_TEMPORAL;
	}
	for (size_t i = 0; i < n_owners; i++) {
		if (o[i].split != HB_SPLIT_TRAIN)
			continue;
		double u = (double)(mix(o[i].id ^ mix(cfg->seed)) >> 11) * 0x1.0p-53;
		if (u < cfg->validation_fraction)
			o[i].split = HB_SPLIT_VALIDATION;
	}
	for (size_t i = 0; i < ts->n; i++)
		res->owner_split[i] = find_owner(o, n_owners, ts->t[i].owner)->split;
	for (size_t i = 0; i < n_owners; i++)
		res->counts[o[i].split].owners++;

	/* windows, after the split; the digest set spans every split */
	seen.cap = 64;
	{
		uint64_t total = 0;
		for (size_t i = 0; i < ts->n; i++)
			total += cfg->window ? ts->t[i].n_tokens / stride + 2 : 1;
		while (seen.cap < 2 * total + 64)
			seen.cap *= 2;
		cap_pairs = total + 1;
	}
	seen.d = malloc(seen.cap * 32);
	seen.split = malloc(seen.cap * sizeof(int));
	opairs = malloc(cap_pairs * 2 * sizeof(uint64_t));
	tpairs = malloc(cap_pairs * 2 * sizeof(uint64_t));
	if (!seen.d || !seen.split || !opairs || !tpairs) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "split", "out of memory");
		goto out;
	}
	for (size_t i = 0; i < seen.cap; i++)
		seen.split[i] = -1;
	for (int oi = 0; oi < HB_SPLIT_COUNT && !rc; oi++) {
		int sp = order[oi];
		for (size_t i = 0; i < ts->n && !rc; i++) {
			const struct hb_transcript *t = &ts->t[i];
			uint64_t start = 0;
			if (res->owner_split[i] != sp)
				continue;
			res->counts[sp].transcripts++;
			for (;;) {
				uint64_t end = cfg->window && t->n_tokens - start > cfg->window ? start + cfg->window
												 : t->n_tokens;
				struct hb_transcript w = *t;
				struct hb_replay_boundary bb[1];
				uint8_t d[32];
				size_t slot;

				w.tokens = t->tokens + start;
				w.n_tokens = (size_t)(end - start);
				hb_transcript_token_digest(&w, d);
				slot = seen_slot(&seen, d);
				if (seen.split[slot] >= 0 && seen.split[slot] != sp) {
					res->counts[sp].duplicates_dropped++;
				} else {
					struct hb_replay_boundary *nb = NULL;
					size_t n_nb = 0;
					if (seen.split[slot] < 0) {
						memcpy(seen.d[slot], d, 32);
						seen.split[slot] = sp;
						seen.n++;
					}
					if (cfg->window) {
						/* boundaries inside the window, shifted; the message
						 * open at its start begins again at 0 */
						nb = calloc(t->n_bounds + 1, sizeof(*nb));
						if (!nb) {
							rc = hb_error_set(err, HB_ERR_NOMEM, "split", "out of memory");
							break;
						}
						for (size_t b = 0; b < t->n_bounds; b++) {
							if (t->bounds[b].at <= start) {
								bb[0] = t->bounds[b];
								bb[0].at = 0;
								n_nb = 1;
								nb[0] = bb[0];
							} else if (t->bounds[b].at < end) {
								nb[n_nb] = t->bounds[b];
								nb[n_nb++].at -= start;
							}
						}
						w.bounds = nb;
						w.n_bounds = n_nb;
						w.has_window = true;
						w.window[0] = (t->has_window ? t->window[0] : 0) + start;
						w.window[1] = (t->has_window ? t->window[0] : 0) + end;
						w.sequence = next_seq++;
					}
					rc = emit(ctx, sp, &w, err);
					free(nb);
					if (rc)
						break;
					res->counts[sp].windows++;
					res->counts[sp].tokens += w.n_tokens;
					opairs[2 * n_pairs] = t->owner;
					opairs[2 * n_pairs + 1] = (uint64_t)sp;
					tpairs[2 * n_pairs] = t->thread;
					tpairs[2 * n_pairs + 1] = (uint64_t)sp;
					n_pairs++;
				}
				if (end == t->n_tokens)
					break;
				start += stride;
			}
		}
	}
	if (!rc) {
		uint64_t per_o[HB_SPLIT_COUNT] = {0}, per_t[HB_SPLIT_COUNT] = {0};
		res->owner_overlap = overlaps(opairs, n_pairs, per_o);
		res->thread_overlap = overlaps(tpairs, n_pairs, per_t);
		for (int s = 0; s < HB_SPLIT_COUNT; s++)
			res->counts[s].threads = per_t[s];
	}
out:
	free(o), free(by_time), free(seen.d), free(seen.split), free(opairs), free(tpairs);
	if (rc)
		hb_split_result_release(res);
	return rc;
}

void hb_split_result_release(struct hb_split_result *res)
{
	free(res->owner_split);
	res->owner_split = NULL;
}
