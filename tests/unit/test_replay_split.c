/*
 * Unit tests: hb_split_run (cmd/hb-replay/dataset/hb_replay_split.c), a property test.
 *
 * Over many random transcript sets (random owners, threads nested in
 * owners, turns, times, runtime flags, short token alphabets so that
 * duplicate windows are common) and random settings, with windows and
 * without: no owner and no thread appears in two splits, judged from the
 * emitted windows by this test's own bookkeeping (not the library's
 * proof, which must agree and say 0); no window's tokens appear in two
 * splits; every window of every transcript is emitted or counted as a
 * dropped duplicate; the same seed gives the same output, and runtime
 * transcripts' owners land in the runtime holdout.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb-replay/dataset/hb_replay.h"

#define MAX_T 120
#define MAX_W 4096

struct rng {
	uint64_t s;
};

static uint64_t next(struct rng *r)
{
	uint64_t x = (r->s += UINT64_C(0x9e3779b97f4a7c15));
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

struct seen_w {
	int split;
	uint64_t owner, thread, seq;
	size_t n;
	int32_t tok[64];
};

struct sink {
	struct seen_w w[MAX_W];
	size_t n;
	uint64_t hash;
};

static int collect(void *ctx, int split, const struct hb_transcript *t, struct hb_error *err)
{
	struct sink *s = ctx;
	struct seen_w *w;

	if (s->n == MAX_W || t->n_tokens > 64)
		return hb_error_set(err, HB_ERR_INTERNAL, "test", "sink full");
	w = &s->w[s->n++];
	w->split = split;
	w->owner = t->owner;
	w->thread = t->thread;
	w->seq = t->sequence;
	w->n = t->n_tokens;
	memcpy(w->tok, t->tokens, t->n_tokens * sizeof(int32_t));
	s->hash = s->hash * 31 + (uint64_t)split * 7 + t->owner + t->sequence * 13 + t->n_tokens;
	return HB_OK;
}

static void make(struct rng *r, struct hb_transcripts *ts)
{
	size_t n_owners = 1 + next(r) % 30;
	ts->t = calloc(MAX_T, sizeof(*ts->t));
	ts->n = 0;
	for (size_t o = 0; o < n_owners && ts->n < MAX_T; o++) {
		uint64_t owner = next(r) % 1000 * 1000 + o; /* distinct, unordered */
		size_t threads = 1 + next(r) % 4;
		bool runtime_owner = next(r) % 9 == 0;
		for (size_t th = 0; th < threads && ts->n < MAX_T; th++) {
			size_t turns = 1 + next(r) % 3;
			for (size_t tu = 0; tu < turns && ts->n < MAX_T; tu++) {
				struct hb_transcript *t = &ts->t[ts->n];
				t->line = ts->n + 1;
				t->sequence = ts->n;
				t->owner = owner;
				t->thread = owner * 10 + th;
				t->turn = tu;
				t->has_time = next(r) % 4 != 0;
				t->time = next(r) % 50;
				t->runtime = runtime_owner && next(r) % 2;
				t->n_tokens = 1 + next(r) % 30;
				t->tokens = malloc(t->n_tokens * sizeof(int32_t));
				for (size_t i = 0; i < t->n_tokens; i++)
					t->tokens[i] = (int32_t)(next(r) % 3);
				ts->n++;
			}
		}
	}
}

static size_t windows_of(size_t n, uint64_t window, uint64_t stride)
{
	size_t k = 0;
	if (!window)
		return 1;
	for (uint64_t start = 0;; start += stride) {
		k++;
		if (n - start <= window)
			break;
	}
	return k;
}

static void no_owner_or_thread_leaks_across_random_transcripts(void)
{
	static struct sink a, b;
	struct rng r = {20261129};
	unsigned cases = 0;

	for (int round = 0; round < 300; round++) {
		struct hb_transcripts ts;
		struct hb_split_config cfg;
		struct hb_split_result res, res2;
		struct hb_error err;
		uint64_t dropped = 0, expected = 0;

		make(&r, &ts);
		memset(&cfg, 0, sizeof(cfg));
		cfg.seed = next(&r);
		cfg.validation_fraction = (double)(next(&r) % 11) / 10;
		cfg.temporal_fraction = (double)(next(&r) % 6) / 10;
		cfg.window = next(&r) % 3 ? 1 + next(&r) % 10 : 0;
		cfg.stride = cfg.window && next(&r) % 2 ? 1 + next(&r) % cfg.window : 0;
		a.n = b.n = 0;
		a.hash = b.hash = 0;
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_split_run(&ts, &cfg, collect, &a, &res, &err), HB_OK);
		CHECK_EQ_U64(res.owner_overlap, 0);
		CHECK_EQ_U64(res.thread_overlap, 0);
		for (size_t i = 0; i < a.n; i++)
			for (size_t j = i + 1; j < a.n; j++) {
				if (a.w[i].split == a.w[j].split)
					continue;
				if (a.w[i].owner == a.w[j].owner || a.w[i].thread == a.w[j].thread) {
					hb_check_fail(__FILE__, __LINE__, "round %d: owner %" PRIu64 " / thread %" PRIu64
						      " in splits %d and %d", round, a.w[i].owner, a.w[i].thread,
						      a.w[i].split, a.w[j].split);
					goto next_round;
				}
				if (a.w[i].n == a.w[j].n && !memcmp(a.w[i].tok, a.w[j].tok, a.w[i].n * sizeof(int32_t))) {
					hb_check_fail(__FILE__, __LINE__, "round %d: a window in splits %d and %d", round,
						      a.w[i].split, a.w[j].split);
					goto next_round;
				}
			}
		for (size_t i = 0; i < ts.n; i++) {
			uint64_t stride = cfg.stride ? cfg.stride : cfg.window;
			expected += windows_of(ts.t[i].n_tokens, cfg.window, stride);
			if (ts.t[i].runtime)
				CHECK_EQ_INT(res.owner_split[i], HB_SPLIT_RUNTIME);
		}
		for (int s = 0; s < HB_SPLIT_COUNT; s++)
			dropped += res.counts[s].duplicates_dropped;
		CHECK_EQ_U64(a.n + dropped, expected);
		/* determinism */
		CHECK_EQ_INT(hb_split_run(&ts, &cfg, collect, &b, &res2, &err), HB_OK);
		CHECK_EQ_U64(a.n, b.n);
		CHECK_EQ_U64(a.hash, b.hash);
		hb_split_result_release(&res2);
		cases++;
	next_round:
		hb_split_result_release(&res);
		hb_transcripts_release(&ts);
	}
	CHECK_EQ_U64(cases, 300);
}

static void validation_fraction_is_roughly_honoured(void)
{
	struct hb_transcripts ts;
	struct hb_split_config cfg;
	struct hb_split_result res;
	struct hb_error err;
	static struct sink s;

	ts.n = 2000;
	ts.t = calloc(ts.n, sizeof(*ts.t));
	for (size_t i = 0; i < ts.n; i++) {
		ts.t[i].owner = i;
		ts.t[i].thread = i;
		ts.t[i].sequence = i;
		ts.t[i].n_tokens = 1;
		ts.t[i].tokens = malloc(sizeof(int32_t));
		ts.t[i].tokens[0] = (int32_t)i;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.seed = 1;
	cfg.validation_fraction = 0.25;
	hb_error_clear(&err);
	s.n = 0;
	CHECK_EQ_INT(hb_split_run(&ts, &cfg, collect, &s, &res, &err), HB_OK);
	CHECK(res.counts[HB_SPLIT_VALIDATION].owners > 420 && res.counts[HB_SPLIT_VALIDATION].owners < 580);
	CHECK_EQ_U64(res.counts[HB_SPLIT_TRAIN].owners + res.counts[HB_SPLIT_VALIDATION].owners, 2000);
	hb_split_result_release(&res);
	hb_transcripts_release(&ts);
}

HB_TEST_MAIN(T(no_owner_or_thread_leaks_across_random_transcripts), T(validation_fraction_is_roughly_honoured))
