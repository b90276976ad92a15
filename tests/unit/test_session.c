/*
 * Unit tests: session state that cannot lie (AFN-010, AFN-012, AFN-018).
 *
 * Whole-chunk transactions: a failure injected after every graph stage, a
 * non-finite intermediate and an allocation failure each leave the public
 * state digest, the frontier and the caller's logits exactly as before.
 * Partition invariance: the same tokens give bit-identical logits, observed
 * PLE rows and QSA selections, and the same state digest, as one prefill,
 * as 1/2/1 chunks, as random chunkings and token by token, EOS included,
 * with independent sessions interleaved.  Lifecycle: rewind, fork, save and
 * restore publish whole candidates; restore refuses another model's state.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb-convert/hb_convert.h"
#include "graph/hb_model.h"
#include "hb_pool.h"
#include "graph/hb_session.h"
#include "graph/hb_session_test.h"

#include <math.h>
#include <sys/mman.h>
#include <unistd.h>

static struct hb_model *load(const char *set, const char *out)
{
	struct hb_convert_opts o;
	struct hb_model *m = NULL;
	char src[4096];

	snprintf(src, sizeof(src), "%s/tests/fixtures/upstream/%s/checkpoint", hb_test_srcdir(), set);
	memset(&o, 0, sizeof(o));
	o.src_dir = src;
	o.out_path = out;
	o.expert_codec = HB_CONV_EXPERTS_BF16;
	o.ple_codec = HB_CONV_PLE_BF16;
	if (hb_convert(&o, NULL, NULL) || hb_model_load(out, &m, NULL))
		return NULL;
	return m;
}

/* A deterministic token sequence with the EOS id inside (PLE resets). */
static void sequence(const struct hb_model *m, int32_t *t, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		t[i] = (int32_t)(x % (uint32_t)m->vocab_physical);
	}
	t[n / 3] = (int32_t)m->cfg.eos_token_ids[0];
	t[n / 3 + 1] = (int32_t)m->cfg.eos_token_ids[0];
}

/* Observations arrive layer-major in a prefill and token-major in decode:
 * each one is hashed on its own and the hashes are summed, so the trail
 * depends on what was observed, not on the order. */
struct trail {
	uint64_t h, ple, qsa;
};

static void fnv(uint64_t *h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		*h = (*h ^ b[i]) * 1099511628211ull;
}

static void observe(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct trail *t = ctx;
	uint64_t h = 1469598103934665603ull;
	size_t width = kind == HB_OBS_PLE_ROWS ? 8 : 4;

	if (kind != HB_OBS_PLE_ROWS && kind != HB_OBS_QSA && kind != HB_OBS_ROUTES)
		return;
	fnv(&h, &layer, sizeof(layer));
	fnv(&h, &pos, 8);
	fnv(&h, data, n * width);
	*(kind == HB_OBS_PLE_ROWS ? &t->ple : kind == HB_OBS_QSA ? &t->qsa : &t->h) += h;
}

/* Run tokens in the given chunk sizes (0-terminated, repeated); all logits. */
static void run(struct hb_session *s, const int32_t *tok, size_t n, const size_t *chunks,
		float *logits, size_t V, struct trail *tr)
{
	size_t done = 0, c = 0;
	while (done < n) {
		size_t k = chunks[c] ? chunks[c] : 1;
		if (k > n - done)
			k = n - done;
		CHECK_EQ_INT(hb_session_forward(s, tok + done, k, logits + done * V, observe, tr, NULL), HB_OK);
		done += k;
		c = chunks[c + 1] ? c + 1 : 0;
	}
}

static void partition_invariance_on(const char *set)
{
	struct hb_model *m = load(set, "a.gguf");
	struct hb_pool *pool = NULL;
	enum { N = 70 };
	int32_t tok[N];
	size_t V;
	static const size_t one[] = {N, 0}, pattern[] = {1, 2, 1, 0}, single[] = {1, 0};
	size_t random[32];
	const size_t *plans[4] = {one, pattern, single, random};
	float *ref = NULL, *got = NULL;
	uint8_t d0[32], d[32];
	struct trail t0 = {0, 0, 0};

	CHECK(m != NULL);
	if (!m)
		return;
	V = (size_t)m->vocab_physical;
	CHECK_EQ_INT(hb_pool_create(2, &pool, NULL), HB_OK);
	sequence(m, tok, N, 7);
	{
		uint32_t x = 99;
		for (size_t i = 0; i < 31; i++) {
			x ^= x << 13, x ^= x >> 17, x ^= x << 5;
			random[i] = 1 + x % 9;
		}
		random[31] = 0;
	}
	ref = malloc(N * V * sizeof(float));
	got = malloc(N * V * sizeof(float));
	for (int p = 0; p < 4; p++) {
		struct hb_session *s = NULL;
		struct trail tr = {0, 0, 0};
		CHECK_EQ_INT(hb_session_create(m, pool, 128, &s, NULL), HB_OK);
		run(s, tok, N, plans[p], p ? got : ref, V, &tr);
		hb_session_digest(s, p ? d : d0);
		if (!p) {
			t0 = tr;
			CHECK(t0.h && t0.ple && t0.qsa); /* the trails observed something */
		} else {
			if (memcmp(ref, got, N * V * sizeof(float)))
				hb_check_fail(__FILE__, __LINE__, "%s: plan %d logits differ", set, p);
			CHECK(memcmp(d0, d, 32) == 0);
			CHECK(tr.h == t0.h && tr.ple == t0.ple && tr.qsa == t0.qsa);
		}
		hb_session_free(s);
	}
	/* two sessions interleaved see nothing of each other */
	{
		struct hb_session *a = NULL, *b = NULL;
		int32_t tok2[N];
		float *la = malloc(N * V * sizeof(float)), *lb = malloc(N * V * sizeof(float));
		struct trail ta = {0, 0, 0}, tb = {0, 0, 0};
		sequence(m, tok2, N, 8);
		CHECK_EQ_INT(hb_session_create(m, pool, 128, &a, NULL), HB_OK);
		CHECK_EQ_INT(hb_session_create(m, pool, 128, &b, NULL), HB_OK);
		for (size_t i = 0; i < N; i += 5) {
			size_t k = N - i < 5 ? N - i : 5;
			CHECK_EQ_INT(hb_session_forward(a, tok + i, k, la + i * V, observe, &ta, NULL), HB_OK);
			CHECK_EQ_INT(hb_session_forward(b, tok2 + i, 3 < k ? 3 : k, lb + i * V, observe, &tb, NULL), HB_OK);
			if (k > 3)
				CHECK_EQ_INT(hb_session_forward(b, tok2 + i + 3, k - 3, lb + (i + 3) * V, observe, &tb, NULL), HB_OK);
		}
		CHECK(memcmp(la, ref, N * V * sizeof(float)) == 0);
		hb_session_digest(a, d);
		CHECK(memcmp(d, d0, 32) == 0);
		CHECK(memcmp(la, lb, N * V * sizeof(float)) != 0);
		hb_session_free(a);
		hb_session_free(b);
		free(la), free(lb);
	}
	free(ref), free(got);
	hb_pool_destroy(pool);
	hb_model_free(m);
}

static void partition_invariance_realshape(void)
{
	partition_invariance_on("realshape");
}

static void partition_invariance_general(void)
{
	partition_invariance_on("general");
}

struct stages {
	char names[128][32];
	size_t n;
	const char *fail_at;
	const char *poison_at;
	struct hb_session *s;
};

static int record_stage(void *ctx, const char *stage)
{
	struct stages *st = ctx;
	if (st->n < 128)
		snprintf(st->names[st->n++], 32, "%s", stage);
	if (st->poison_at && !strcmp(stage, st->poison_at))
		hb_session_test_poison(st->s);
	return st->fail_at && !strcmp(stage, st->fail_at);
}

static void transactions(void)
{
	struct hb_model *m = load("realshape", "a.gguf");
	struct hb_session *s = NULL, *clean = NULL;
	enum { N = 40 };
	int32_t tok[N];
	size_t V;
	float *out, *want;
	uint8_t d0[32], d[32];
	struct stages st;
	struct hb_error err;
	unsigned failures = 0;

	CHECK(m != NULL);
	if (!m)
		return;
	V = (size_t)m->vocab_physical;
	sequence(m, tok, N, 3);
	out = malloc(8 * V * sizeof(float));
	want = malloc(8 * V * sizeof(float));
	CHECK_EQ_INT(hb_session_create(m, NULL, 128, &s, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_create(m, NULL, 128, &clean, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(s, tok, 30, NULL, NULL, NULL, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(clean, tok, 30, NULL, NULL, NULL, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(clean, tok + 30, 8, want, NULL, NULL, NULL), HB_OK);
	hb_session_digest(s, d0);
	/* learn the stage names of a chunk */
	memset(&st, 0, sizeof(st));
	st.s = s;
	{
		struct hb_session *probe = NULL;
		CHECK_EQ_INT(hb_session_fork(s, &probe, NULL), HB_OK);
		hb_session_test_fault(probe, record_stage, &st);
		CHECK_EQ_INT(hb_session_forward(probe, tok + 30, 8, NULL, NULL, NULL, NULL), HB_OK);
		hb_session_free(probe);
	}
	CHECK(st.n >= 2 + 2 * (size_t)m->cfg.num_layers);
	/* a failure after every stage: nothing published */
	for (size_t i = 0; i < st.n; i++) {
		struct stages f;
		memset(&f, 0, sizeof(f));
		f.fail_at = st.names[i];
		f.s = s;
		for (size_t j = 0; j < 8 * V; j++)
			out[j] = 12345.0f;
		hb_session_test_fault(s, record_stage, &f);
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_session_forward(s, tok + 30, 8, out, NULL, NULL, &err), HB_ERR_FAULT);
		hb_session_digest(s, d);
		if (memcmp(d, d0, 32) || hb_session_frontier(s) != 30 || out[0] != 12345.0f || out[8 * V - 1] != 12345.0f)
			failures++;
	}
	CHECK_EQ_INT(failures, 0);
	/* a non-finite intermediate */
	{
		struct stages f;
		memset(&f, 0, sizeof(f));
		f.poison_at = "layer2.moe";
		f.s = s;
		hb_session_test_fault(s, record_stage, &f);
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_session_forward(s, tok + 30, 8, out, NULL, NULL, &err), HB_ERR_NONFINITE);
		CHECK_STR(err.id, "session-nonfinite");
		hb_session_digest(s, d);
		CHECK(memcmp(d, d0, 32) == 0);
		CHECK(out[0] == 12345.0f);
	}
	hb_session_test_fault(s, NULL, NULL);
	/* an allocation failure */
	hb_session_test_fail_alloc(s);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_session_forward(s, tok + 30, 8, out, NULL, NULL, &err), HB_ERR_NOMEM);
	hb_session_digest(s, d);
	CHECK(memcmp(d, d0, 32) == 0);
	/* refusals before any work */
	CHECK_EQ_INT(hb_session_forward(s, (int32_t[]){-1}, 1, out, NULL, NULL, &err), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_session_forward(s, tok, 99, out, NULL, NULL, &err), HB_ERR_INVALID);
	hb_session_digest(s, d);
	CHECK(memcmp(d, d0, 32) == 0);
	/* after all that, the chunk gives exactly what a never-failed session gave */
	CHECK_EQ_INT(hb_session_forward(s, tok + 30, 8, out, NULL, NULL, NULL), HB_OK);
	CHECK(memcmp(out, want, 8 * V * sizeof(float)) == 0);
	hb_session_free(s);
	hb_session_free(clean);
	free(out), free(want);
	hb_model_free(m);
}

/* hb_session_reserve: a refused reservation leaves the state and the
 * session's use as they were; a reserved session computes the bits of one
 * that never reserved, through chunks smaller, equal and larger */
static void reserve_changes_nothing(void)
{
	struct hb_model *m = load("realshape", "a.gguf");
	struct hb_session *s = NULL, *ref = NULL;
	enum { N = 40 };
	int32_t tok[N];
	uint8_t d0[32], d[32];
	struct hb_error err;
	float *l1, *l2;
	size_t V;

	CHECK(m != NULL);
	if (!m)
		return;
	V = (size_t)m->vocab_physical;
	l1 = malloc(24 * V * sizeof(float));
	l2 = malloc(24 * V * sizeof(float));
	sequence(m, tok, N, 7);
	CHECK_EQ_INT(hb_session_create(m, NULL, 64, &s, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_create(m, NULL, 64, &ref, NULL), HB_OK);
	hb_session_digest(s, d0);
	hb_session_test_fail_alloc(s);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_session_reserve(s, 16, &err), HB_ERR_NOMEM);
	hb_session_digest(s, d);
	CHECK(memcmp(d, d0, 32) == 0);
	CHECK_EQ_INT(hb_session_reserve(s, 16, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_reserve(s, 1000, NULL), HB_OK); /* past the capacity: the capacity */
	hb_session_digest(s, d);
	CHECK(memcmp(d, d0, 32) == 0);
	for (size_t t0 = 0, i = 0, len[] = { 16, 24 }; i < 2; t0 += len[i++]) {
		CHECK_EQ_INT(hb_session_forward(s, tok + t0, len[i], l1, NULL, NULL, NULL), HB_OK);
		CHECK_EQ_INT(hb_session_forward(ref, tok + t0, len[i], l2, NULL, NULL, NULL), HB_OK);
		CHECK(memcmp(l1, l2, len[i] * V * sizeof(float)) == 0);
	}
	hb_session_digest(s, d);
	hb_session_digest(ref, d0);
	CHECK(memcmp(d, d0, 32) == 0);
	hb_session_free(s);
	hb_session_free(ref);
	free(l1), free(l2);
	hb_model_free(m);
}

struct residency {
	size_t buffers, bytes, absent; /* absent: pages mincore says are not in */
};

static void count_absent(void *ctx, const void *p, size_t bytes)
{
	struct residency *r = ctx;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1), e = (uintptr_t)p + bytes;
	size_t n = (e - a + pg - 1) / pg;
	unsigned char *v = malloc(n);

	r->buffers++, r->bytes += bytes;
	if (!v || mincore((void *)a, e - a, v) != 0)
		r->absent += n;
	else
		for (size_t i = 0; i < n; i++)
			r->absent += !(v[i] & 1);
	free(v);
}

/* hb_session_reserve faults every page of the workspace in (the prefill's
 * clock starts after it: a malloc + memset of zeros that the compiler
 * made a calloc left them to the first chunk) */
static void reserve_faults_the_workspace_in(void)
{
	struct hb_model *m = load("realshape", "a.gguf");
	struct hb_pool *pool = NULL;
	struct hb_session *s = NULL;
	struct residency none = { 0, 0, 0 }, r = { 0, 0, 0 };

	CHECK(m != NULL);
	if (!m)
		return;
	CHECK_EQ_INT(hb_pool_create(2, &pool, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_create(m, pool, 512, &s, NULL), HB_OK);
	if (s) {
		hb_session_test_workspace(s, count_absent, &none);
		CHECK_EQ_U64(none.buffers, 0);
		CHECK_EQ_INT(hb_session_reserve(s, 512, NULL), HB_OK);
		hb_session_test_workspace(s, count_absent, &r);
		CHECK_EQ_U64(r.buffers, 10);
		CHECK(r.bytes > (1u << 20)); /* more than the heap had free */
		CHECK_EQ_U64(r.absent, 0);
	}
	hb_session_free(s);
	hb_pool_destroy(pool);
	hb_model_free(m);
}

static void lifecycle(void)
{
	struct hb_model *m = load("realshape", "a.gguf"), *other = load("general", "b.gguf");
	struct hb_session *s = NULL, *ref = NULL, *f = NULL, *r = NULL, *o = NULL;
	enum { N = 48 };
	int32_t tok[N];
	uint8_t d[32], e[32];
	struct hb_error err;
	float *l1, *l2;
	size_t V;

	CHECK(m && other);
	if (!m || !other)
		return;
	V = (size_t)m->vocab_physical;
	l1 = malloc(8 * V * sizeof(float));
	l2 = malloc(8 * V * sizeof(float));
	sequence(m, tok, N, 5);
	CHECK_EQ_INT(hb_session_create(m, NULL, 128, &s, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_create(m, NULL, 128, &ref, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(ref, tok, 20, NULL, NULL, NULL, NULL), HB_OK);
	/* rewind-then-replay equals never having gone further */
	CHECK_EQ_INT(hb_session_forward(s, tok, 37, NULL, NULL, NULL, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_rewind(s, 20, NULL), HB_OK);
	CHECK_EQ_U64(hb_session_frontier(s), 20);
	hb_session_digest(s, d);
	hb_session_digest(ref, e);
	CHECK(memcmp(d, e, 32) == 0);
	CHECK_EQ_INT(hb_session_rewind(s, 21, &err), HB_ERR_INVALID);
	/* a fork continues exactly as the original */
	CHECK_EQ_INT(hb_session_fork(s, &f, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(s, tok + 20, 8, l1, NULL, NULL, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(f, tok + 20, 8, l2, NULL, NULL, NULL), HB_OK);
	CHECK(memcmp(l1, l2, 8 * V * sizeof(float)) == 0);
	/* save and restore publish the same state; another model refuses it */
	CHECK_EQ_INT(hb_session_save(s, "s.state", NULL), HB_OK);
	CHECK_EQ_INT(hb_session_create(m, NULL, 128, &r, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_restore(r, "s.state", NULL), HB_OK);
	hb_session_digest(s, d);
	hb_session_digest(r, e);
	CHECK(memcmp(d, e, 32) == 0);
	CHECK_EQ_INT(hb_session_create(other, NULL, 128, &o, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_session_restore(o, "s.state", &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "session-model");
	CHECK_EQ_U64(hb_session_frontier(o), 0);
	/* reset: an empty sequence again */
	CHECK_EQ_INT(hb_session_reset(s, NULL), HB_OK);
	CHECK_EQ_U64(hb_session_frontier(s), 0);
	hb_session_free(s), hb_session_free(ref), hb_session_free(f), hb_session_free(r), hb_session_free(o);
	free(l1), free(l2);
	hb_model_free(m), hb_model_free(other);
}

/* AFN-018: a sequence may start anywhere (left padding, an evicted
 * prefix); groups are anchored there and chunking still changes nothing. */
struct starts {
	uint64_t base, ratio;
	unsigned misaligned, below;
};

static void check_groups(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct starts *st = ctx;
	const int32_t *p = data;
	(void)layer;
	if (kind != HB_OBS_QSA)
		return;
	for (size_t i = 0; i < n; i++) {
		if ((uint64_t)p[i] < st->base || (uint64_t)p[i] > pos)
			st->below++;
		/* a selected complete group starts at base + k * ratio */
		if (i + st->ratio <= n && (uint64_t)p[i] + st->ratio - 1 <= pos &&
		    ((uint64_t)p[i] - st->base) % st->ratio == 0)
			i += st->ratio - 1;
		else if ((uint64_t)p[i] < pos + 1 - ((pos + 1 - st->base) % st->ratio))
			st->misaligned++;
	}
}

static void first_position_is_free(void)
{
	struct hb_model *m = load("realshape", "a.gguf");
	struct hb_session *a = NULL, *b = NULL;
	enum { N = 40 };
	int32_t tok[N];
	float *la, *lb;
	size_t V;
	struct starts st;
	struct hb_error err;

	CHECK(m != NULL);
	if (!m)
		return;
	V = (size_t)m->vocab_physical;
	la = malloc(N * V * sizeof(float));
	lb = malloc(N * V * sizeof(float));
	sequence(m, tok, N, 11);
	memset(&st, 0, sizeof(st));
	st.base = 101;
	st.ratio = m->cfg.indexer_compress_ratio;
	CHECK_EQ_INT(hb_session_create(m, NULL, 64, &a, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_create(m, NULL, 64, &b, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_set_start(a, 101, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_set_start(b, 101, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(a, tok, N, la, check_groups, &st, NULL), HB_OK);
	for (size_t i = 0; i < N; i++)
		CHECK_EQ_INT(hb_session_forward(b, tok + i, 1, lb + i * V, NULL, NULL, NULL), HB_OK);
	CHECK(memcmp(la, lb, N * V * sizeof(float)) == 0);
	CHECK_EQ_U64(hb_session_frontier(a), 141);
	CHECK_EQ_INT(st.below, 0);
	CHECK_EQ_INT(st.misaligned, 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_session_set_start(a, 5, &err), HB_ERR_INVALID); /* not empty */
	CHECK_STR(err.id, "session-not-empty");
	/* positions never wrap: the capacity's run must fit below 2^64 */
	hb_session_free(b);
	b = NULL;
	CHECK_EQ_INT(hb_session_create(m, NULL, 64, &b, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_session_set_start(b, UINT64_MAX - 63, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "session-start-range");
	CHECK_EQ_U64(hb_session_frontier(b), 0);
	CHECK_EQ_INT(hb_session_set_start(b, UINT64_MAX - 64, NULL), HB_OK);
	CHECK_EQ_U64(hb_session_frontier(b), UINT64_MAX - 64);
	hb_session_free(a), hb_session_free(b);
	free(la), free(lb);
	hb_model_free(m);
}

/* hb_session_final: the last chunk publishes the same logits as any
 * chunk; a failed last chunk leaves the request standing; afterwards
 * every operation that would go on from the state is refused, the digest
 * is 0xff bytes, and reset makes the session usable again. */
static void a_final_chunk_spends_the_session(void)
{
	struct hb_model *m = load("realshape", "a.gguf");
	struct hb_session *s = NULL, *ref = NULL, *f = NULL;
	enum { N = 24 };
	int32_t tok[N];
	uint8_t d[32], spent[32];
	struct hb_error err;
	float *l1, *l2;
	size_t V, kept = 0;

	CHECK(m != NULL);
	if (!m)
		return;
	V = (size_t)m->vocab_physical;
	l1 = malloc(8 * V * sizeof(float)), l2 = malloc(8 * V * sizeof(float));
	memset(spent, 0xff, 32);
	sequence(m, tok, N, 9);
	CHECK_EQ_INT(hb_session_create(m, NULL, 64, &s, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_create(m, NULL, 64, &ref, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(s, tok, 16, NULL, NULL, NULL, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(ref, tok, 16, NULL, NULL, NULL, NULL), HB_OK);
	hb_session_final(s);
	CHECK(!hb_session_spent(s));
	/* a failing last chunk (a token out of range) publishes nothing and keeps the request */
	tok[20] = -1;
	CHECK_EQ_INT(hb_session_forward(s, tok + 16, 8, l1, NULL, NULL, &err), HB_ERR_INVALID);
	CHECK(!hb_session_spent(s));
	sequence(m, tok, N, 9);
	CHECK_EQ_INT(hb_session_forward(s, tok + 16, 8, l1, NULL, NULL, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(ref, tok + 16, 8, l2, NULL, NULL, NULL), HB_OK);
	CHECK(memcmp(l1, l2, 8 * V * sizeof(float)) == 0);
	CHECK(hb_session_spent(s));
	CHECK_EQ_U64(hb_session_frontier(s), 24);
	hb_session_digest(s, d);
	CHECK(memcmp(d, spent, 32) == 0);
	hb_session_digest(ref, d);
	CHECK(memcmp(d, spent, 32) != 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_session_forward(s, tok, 1, NULL, NULL, NULL, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "session-spent");
	CHECK_EQ_INT(hb_session_verify(s, tok, 2, l1, NULL, NULL, NULL, NULL, &kept, &err), HB_ERR_INVALID);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_session_rewind(s, 3, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "session-spent");
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_session_fork(s, &f, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "session-spent");
	CHECK(f == NULL);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_session_save(s, "spent.state", &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "session-spent");
	CHECK(access("spent.state", F_OK) != 0);
	/* reset: empty and usable, the same as a fresh session */
	CHECK_EQ_INT(hb_session_reset(s, NULL), HB_OK);
	CHECK(!hb_session_spent(s));
	CHECK_EQ_INT(hb_session_reset(ref, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(s, tok, 5, l1, NULL, NULL, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(ref, tok, 5, l2, NULL, NULL, NULL), HB_OK);
	CHECK(memcmp(l1, l2, 5 * V * sizeof(float)) == 0);
	hb_session_free(s), hb_session_free(ref);
	free(l1), free(l2);
	hb_model_free(m);
}

/* counts HB_OBS_LOGITS observations and remembers the last position */
struct logits_seen {
	unsigned n;
	uint64_t pos;
};

static void count_logits(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct logits_seen *l = ctx;

	(void)layer, (void)data, (void)n;
	if (kind == HB_OBS_LOGITS)
		l->n++, l->pos = pos;
}

/* hb_session_forward_last: the last row of hb_session_forward's logits, bit
 * for bit, one observation of it, the same state after; on two threads too */
static void forward_last_is_the_last_row(void)
{
	struct hb_model *m = load("realshape", "a.gguf");
	struct hb_pool *pool = NULL;
	enum { N = 24 };
	int32_t tok[N];
	float *all, *last;
	uint8_t d[32], e[32];
	size_t V;

	CHECK(m != NULL);
	if (!m)
		return;
	V = (size_t)m->vocab_physical;
	sequence(m, tok, N, 7);
	all = malloc(N * V * sizeof(float));
	last = malloc(V * sizeof(float));
	CHECK_EQ_INT(hb_pool_create(2, &pool, NULL), HB_OK);
	for (int threaded = 0; threaded < 2 && all && last; threaded++) {
		struct hb_session *a = NULL, *b = NULL;
		struct logits_seen seen = { 0, 0 };
		struct hb_error err;
		CHECK_EQ_INT(hb_session_create(m, threaded ? pool : NULL, 64, &a, NULL), HB_OK);
		CHECK_EQ_INT(hb_session_create(m, threaded ? pool : NULL, 64, &b, NULL), HB_OK);
		if (!a || !b) {
			hb_session_free(a), hb_session_free(b);
			break;
		}
		/* a prompt, then a decode step, each way */
		CHECK_EQ_INT(hb_session_forward(a, tok, N - 1, all, NULL, NULL, NULL), HB_OK);
		CHECK_EQ_INT(hb_session_forward_last(b, tok, N - 1, last, count_logits, &seen, NULL), HB_OK);
		CHECK(memcmp(last, all + (N - 2) * V, V * sizeof(float)) == 0);
		CHECK_EQ_INT(seen.n, 1);
		CHECK_EQ_U64(seen.pos, N - 2);
		hb_session_digest(a, d), hb_session_digest(b, e);
		CHECK(memcmp(d, e, 32) == 0);
		CHECK_EQ_INT(hb_session_forward(a, tok + N - 1, 1, all, NULL, NULL, NULL), HB_OK);
		CHECK_EQ_INT(hb_session_forward_last(b, tok + N - 1, 1, last, NULL, NULL, NULL), HB_OK);
		CHECK(memcmp(last, all, V * sizeof(float)) == 0);
		hb_session_digest(a, d), hb_session_digest(b, e);
		CHECK(memcmp(d, e, 32) == 0);
		/* a row is required */
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_session_forward_last(b, tok, 1, NULL, NULL, NULL, &err), HB_ERR_INVALID);
		CHECK_STR(err.field, "logits");
		hb_session_free(a), hb_session_free(b);
	}
	hb_pool_destroy(pool);
	free(all), free(last);
	hb_model_free(m);
}

/* layer `layer`'s PLE row ids of a one-token chunk (HB_OBS_PLE_ROWS) */
struct ple_ids {
	int32_t layer;
	size_t n;
	int64_t ids[64];
};

static void take_ple_ids(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct ple_ids *p = ctx;

	(void)pos;
	if (kind == HB_OBS_PLE_ROWS && layer == p->layer && n <= 64)
		memcpy(p->ids, data, n * sizeof(int64_t)), p->n = n;
}

static bool copy_file(const char *from, const char *to)
{
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	char buf[1 << 16];
	size_t n;
	bool ok = a && b;

	while (ok && (n = fread(buf, 1, sizeof(buf), a)) > 0)
		ok = fwrite(buf, 1, n, b) == n;
	if (a)
		fclose(a);
	if (b && fclose(b))
		ok = false;
	return ok;
}

/* flip one byte of the file at off */
static bool flip_byte(const char *path, uint64_t off)
{
	FILE *f = fopen(path, "r+b");
	int c;
	bool ok = f && fseek(f, (long)off, SEEK_SET) == 0 && (c = fgetc(f)) != EOF &&
		  fseek(f, (long)off, SEEK_SET) == 0 && fputc(c ^ 0x5a, f) != EOF;

	if (f && fclose(f))
		ok = false;
	return ok;
}

/*
 * A chunk's PLE rows are read over the pool in runs of (token, head) rows,
 * so a decode step's heads are spread over the threads too.  With two of
 * one token's rows on pages that do not verify, the failure named is the
 * earlier head's page whatever the thread count: each run stops at its
 * first bad row, and the earliest of those is kept.
 */
static void ple_failure_is_the_first_head_at_any_thread_count(void)
{
	struct hb_model *m = load("realshape", "a.gguf"), *bad = NULL;
	struct ple_ids p = { -1, 0, { 0 } };
	struct hb_session *s = NULL;
	uint64_t page[64], off[64];
	size_t k1 = 0, k2 = 0;
	int32_t tok = 5;
	float *logits;
	char want[64];

	CHECK(m != NULL);
	if (!m)
		return;
	for (uint32_t l = 0; l < m->cfg.num_layers && p.layer < 0; l++)
		if (m->layers[l].has_ple)
			p.layer = (int32_t)l;
	CHECK(p.layer >= 0);
	logits = malloc((size_t)m->vocab_physical * sizeof(float));
	CHECK_EQ_INT(hb_session_create(m, NULL, 8, &s, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(s, &tok, 1, logits, take_ple_ids, &p, NULL), HB_OK);
	hb_session_free(s);
	CHECK(p.n >= 3); /* heads enough for the two bad ones to lie in different runs */
	if (p.layer < 0 || p.n < 3 || !logits) {
		free(logits), hb_model_free(m);
		return;
	}
	for (size_t k = 0; k < p.n; k++) {
		struct hb_ple_loc loc;
		CHECK_EQ_INT(hb_ple_locate(hb_ple_store_layout(m->ple),
					   m->layers[p.layer].ple.first_row + (uint64_t)p.ids[k], &loc, NULL),
			     HB_OK);
		page[k] = loc.page, off[k] = (uint64_t)m->ple_off + loc.page_offset + loc.row_offset;
	}
	/* k1: the first head after head 0 on a page of its own so far; k2:
	 * the last head, if its page is none of heads 0..k1's */
	for (size_t k = 1; k < p.n && !k1; k++) {
		bool fresh = true;
		for (size_t j = 0; j < k; j++)
			fresh = fresh && page[j] != page[k];
		if (fresh)
			k1 = k;
	}
	for (size_t j = 0; k1 && j <= k1; j++)
		if (page[j] == page[p.n - 1])
			k1 = 0;
	k2 = p.n - 1;
	CHECK(k1 > 0 && k2 > k1);
	CHECK(copy_file("a.gguf", "b.gguf"));
	CHECK(flip_byte("b.gguf", off[k1]));
	CHECK(flip_byte("b.gguf", off[k2]));
	CHECK_EQ_INT(hb_model_load("b.gguf", &bad, NULL), HB_OK);
	snprintf(want, sizeof(want), "ple.page[%" PRIu64 "]", page[k1]);
	for (unsigned threads = 1; bad && k1 && threads <= 3; threads++) {
		struct hb_pool *pool = NULL;
		struct hb_error err;
		CHECK_EQ_INT(hb_pool_create(threads, &pool, NULL), HB_OK);
		CHECK_EQ_INT(hb_session_create(bad, pool, 8, &s, NULL), HB_OK);
		hb_error_clear(&err);
		CHECK(hb_session_forward(s, &tok, 1, logits, NULL, NULL, &err) != HB_OK);
		CHECK_STR(err.field, want);
		hb_session_free(s);
		hb_pool_destroy(pool);
	}
	hb_model_free(bad);
	free(logits);
	hb_model_free(m);
}

/* every PLE layer's row ids of a chunk, by (layer, position) */
struct ple_all {
	const struct hb_model *m;
	size_t rows;                  /* observed */
	uint64_t pages[64];           /* distinct pages a PLE layer, whole chunk */
	uint64_t seen[64][4096];      /* the pages met, a layer */
	size_t nseen[64];
};

static void take_ple_pages(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct ple_all *a = ctx;
	const int64_t *ids = data;

	(void)pos;
	if (kind != HB_OBS_PLE_ROWS || layer < 0 || layer >= 64)
		return;
	for (size_t k = 0; k < n; k++) {
		struct hb_ple_loc loc;
		bool met = false;
		a->rows++;
		if (hb_ple_locate(hb_ple_store_layout(a->m->ple), a->m->layers[layer].ple.first_row + (uint64_t)ids[k],
				  &loc, NULL))
			continue;
		for (size_t i = 0; i < a->nseen[layer] && !met; i++)
			met = a->seen[layer][i] == loc.page;
		if (!met && a->nseen[layer] < 4096)
			a->seen[layer][a->nseen[layer]++] = loc.page, a->pages[layer]++;
	}
}

/*
 * A chunk reads each PLE page its rows lie on once (one pread, one
 * SHA-256), however many of its rows share it: the pages counter equals
 * the distinct pages of the rows observed, a PLE layer at a time, at 1, 2
 * and 3 threads, and the rows counter every row.  The fixture's small
 * table makes rows share pages, so the count is below the rows'.
 */
static void ple_pages_are_read_once_a_chunk(void)
{
	struct hb_model *m = load("realshape", "a.gguf");
	enum { N = 40 };
	int32_t tok[N];
	float *logits;

	CHECK(m != NULL);
	if (!m)
		return;
	sequence(m, tok, N, 11);
	logits = malloc(N * (size_t)m->vocab_physical * sizeof(float));
	for (unsigned threads = 1; logits && threads <= 3; threads++)
		for (size_t T = 1; T <= N; T += N - 1) { /* a decode step, then a prompt */
			static struct ple_all a;
			struct hb_pool *pool = NULL;
			struct hb_session *s = NULL;
			uint64_t pages = 0;
			memset(&a, 0, sizeof(a));
			a.m = m;
			CHECK_EQ_INT(hb_pool_create(threads, &pool, NULL), HB_OK);
			CHECK_EQ_INT(hb_session_create(m, pool, 64, &s, NULL), HB_OK);
			CHECK_EQ_INT(hb_session_forward(s, tok, T, logits, take_ple_pages, &a, NULL), HB_OK);
			for (size_t l = 0; l < 64; l++)
				pages += a.pages[l];
			CHECK_EQ_U64(hb_session_counters(s)->ple_rows_read, a.rows);
			CHECK_EQ_U64(hb_session_counters(s)->ple_pages_read, pages);
			CHECK(a.rows > 0);
			if (T > 1)
				CHECK(pages < a.rows);
			hb_session_free(s);
			hb_pool_destroy(pool);
		}
	free(logits);
	hb_model_free(m);
}

HB_TEST_MAIN(T(partition_invariance_realshape), T(partition_invariance_general), T(transactions), T(reserve_changes_nothing), T(reserve_faults_the_workspace_in),
	     T(lifecycle), T(first_position_is_free), T(a_final_chunk_spends_the_session), T(forward_last_is_the_last_row),
	     T(ple_failure_is_the_first_head_at_any_thread_count), T(ple_pages_are_read_once_a_chunk))
