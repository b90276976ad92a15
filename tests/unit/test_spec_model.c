/*
 * Unit tests: speculative decoding's protocol on the model, on the upstream
 * fixture (tests/fixtures/upstream/realshape): the recorded future is
 * upstream's own greedy decode of prompt p0 (dec/p0/in_ids, then the last
 * next_ids), so the oracle's proposals are what the target must accept.
 *
 *   plain decode (B = 0: one hb_session_forward a token) commits exactly
 *     upstream's tokens;
 *   the verifier-only oracle for B = 1..5 commits the same tokens, the same
 *     logits rows bit for bit and the same state digest as plain decode;
 *     tau(B) = nf / ceil(nf / B), nothing rolled back, U_1 = top-k;
 *   a perturbed record (every third recorded token wrong) still commits
 *     plain decode's tokens, logits and digest: the rejected suffixes'
 *     GDN, QSA, PLE states rolled back by the session's verified chunks;
 *   the golden replay of a written spec shard through the session: full,
 *     partial and zero acceptance and a block of one, the bonus tokens, the
 *     state digest equal to plain decode at every step's frontier, the
 *     rejected suffix's tickets on the artifact's own expert store
 *     cancelled; a record of another target or one the target contradicts
 *     is refused and publishes nothing.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb-convert/hb_convert.h"
#include "oracle.h"
#include "spec/hb_spec_oracle.h"
#include "spec/hb_spec_verify.h"

#include <fcntl.h>
#include <unistd.h>

#define NF_MAX 64

struct fx {
	struct hb_model *m;
	struct hb_pool *pool;
	int32_t prompt[128], future[NF_MAX];
	size_t np, nf;
};

static bool fx_open(struct fx *f)
{
	struct hb_convert_opts co;
	struct oracle o;
	struct hb_error err;
	char src[4096];
	uint64_t dims[4];
	size_t n, S;
	int64_t *ids, *in_ids, *next;

	memset(f, 0, sizeof(*f));
	snprintf(src, sizeof(src), "%s/tests/fixtures/upstream/realshape/checkpoint", hb_test_srcdir());
	memset(&co, 0, sizeof(co));
	co.src_dir = src, co.out_path = "a.gguf";
	co.expert_codec = HB_CONV_EXPERTS_BF16, co.ple_codec = HB_CONV_PLE_BF16;
	CHECK_EQ_INT(hb_convert(&co, NULL, NULL), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_model_load("a.gguf", &f->m, &err), HB_OK);
	CHECK_EQ_INT(hb_pool_create(1, &f->pool, NULL), HB_OK);
	if (!f->m || !oracle_open(&o, "realshape"))
		return false;
	ids = oracle_array(&o, "pre/p0/ids", &n, dims);
	in_ids = oracle_array(&o, "dec/p0/in_ids", &S, dims);
	next = oracle_array(&o, "dec/p0/next_ids", &S, dims);
	CHECK(ids && in_ids && next && n <= 128 && S + 1 <= NF_MAX);
	for (size_t i = 0; ids && i < n && i < 128; i++)
		f->prompt[i] = (int32_t)ids[i];
	f->np = n;
	for (size_t i = 0; in_ids && i < S && i < NF_MAX; i++)
		f->future[i] = (int32_t)in_ids[i];
	if (next && S && S < NF_MAX)
		f->future[S] = (int32_t)next[S - 1];
	f->nf = S + 1;
	free(ids), free(in_ids), free(next);
	oracle_close(&o);
	return f->nf > 8;
}

static void fx_close(struct fx *f)
{
	hb_pool_destroy(f->pool);
	hb_model_free(f->m);
}

struct outcome {
	int32_t tokens[NF_MAX];
	float *logits;
	struct hb_spec_oracle_report rep;
};

static void run(const struct fx *f, const int32_t *future, size_t nf, uint32_t B, struct outcome *o)
{
	struct hb_error err;

	o->logits = malloc(nf * (size_t)f->m->vocab_physical * sizeof(float));
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_spec_oracle_run(f->m, f->pool, f->prompt, f->np, future, nf, B, o->tokens, o->logits,
					&o->rep, &err), HB_OK);
	CHECK_STR(err.msg, "");
}

static void same_as_plain(const struct fx *f, const struct outcome *a, const struct outcome *p, size_t nf)
{
	CHECK(!memcmp(a->tokens, p->tokens, nf * sizeof(int32_t)));
	CHECK(!memcmp(a->logits, p->logits, nf * (size_t)f->m->vocab_physical * sizeof(float)));
	CHECK(!memcmp(a->rep.digest, p->rep.digest, 32));
	CHECK_EQ_U64(a->rep.tokens, nf);
}

static void oracle_equals_plain_decode(void)
{
	struct fx f;
	struct outcome plain, o;

	if (!fx_open(&f)) {
		CHECK(!"fixture");
		return;
	}
	run(&f, f.future, f.nf, 0, &plain);
	/* plain decode is upstream's greedy decode */
	CHECK(!memcmp(plain.tokens, f.future, f.nf * sizeof(int32_t)));
	CHECK_EQ_U64(plain.rep.unique_experts, f.nf * plain.rep.layers * plain.rep.top_k);
	for (uint32_t B = 1; B <= 5; B++) {
		uint64_t chunks = (f.nf + B - 1) / B;
		run(&f, f.future, f.nf, B, &o);
		same_as_plain(&f, &o, &plain, f.nf);
		CHECK_EQ_U64(o.rep.chunks, chunks);
		CHECK_EQ_U64(o.rep.accepted, f.nf - chunks);
		CHECK_EQ_U64(o.rep.rolled_back, 0);
		CHECK(o.rep.unique_experts <= chunks * o.rep.layers * o.rep.top_k * B);
		if (B == 1) {
			CHECK_EQ_U64(o.rep.unique_experts, plain.rep.unique_experts);
			CHECK(hb_spec_oracle_bytes_ratio(&o.rep) == 1.0);
			CHECK(!hb_spec_oracle_break_even(&o.rep)); /* 10 < 10 is false: B = 1 is the baseline */
		}
		printf("# B=%u tau %.3f U_B %.2f bytes ratio %.3f ple pages/block %.2f\n", B,
		       hb_spec_oracle_tau(&o.rep), hb_spec_oracle_u(&o.rep), hb_spec_oracle_bytes_ratio(&o.rep),
		       (double)o.rep.ple_pages / (double)o.rep.chunks);
		free(o.logits);
	}
	/* a wrong record: every third token off by one; the target's choice wins */
	{
		int32_t bad[NF_MAX];
		memcpy(bad, f.future, sizeof(bad));
		for (size_t i = 2; i < f.nf; i += 3)
			bad[i] = (bad[i] + 1) % (int32_t)f.m->vocab_semantic;
		for (uint32_t B = 2; B <= 5; B++) {
			run(&f, bad, f.nf, B, &o);
			same_as_plain(&f, &o, &plain, f.nf);
			CHECK(o.rep.rolled_back > 0);
			CHECK_EQ_U64(o.rep.accepted + o.rep.rolled_back, o.rep.proposed);
			free(o.logits);
		}
	}
	free(plain.logits);
	fx_close(&f);
}

/* ------------------------------------------------------------ golden replay on the model */

struct plan {
	uint32_t block;
	int wrong_at;   /* -1: none */
};

/* Write a spec shard for the plan over the recorded future; the accepted
 * prefix and bonus are what the record's own decode implies. */
static void write_shard(const struct fx *f, const struct hb_spec_header *h, const struct plan *pl, size_t n,
			int lie, uint64_t *committed_out)
{
	struct hb_spec_writer *w = NULL;
	struct hb_error err;
	uint64_t i = 0; /* index into future of the pending token */
	int fd = open("g.spec", O_WRONLY | O_CREAT | O_TRUNC, 0644);

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_spec_writer_open(&w, fd, "g.spec", h, &err), HB_OK);
	for (size_t k = 0; w && k < n; k++) {
		struct hb_spec_step s;
		struct hb_spec_route r;
		uint32_t acc = pl[k].wrong_at < 0 ? pl[k].block : (uint32_t)pl[k].wrong_at;

		memset(&s, 0, sizeof(s));
		s.owner = 5, s.generation = 2, s.stage = HB_SPEC_STAGE_FINAL, s.position = f->np + i;
		s.n_layers = 1, s.layers[0] = (uint32_t)f->m->cfg.num_layers - 1;
		s.dtype = HB_SPEC_F32, s.ndim = 1, s.shape[0] = f->m->cfg.hidden_size;
		s.block = pl[k].block, s.candidates = 2;
		for (uint32_t j = 0; j < s.block; j++) {
			int32_t truth = f->future[i + 1 + j];
			int32_t other = (truth + 1) % (int32_t)f->m->vocab_semantic;
			bool wrong = (int)j == pl[k].wrong_at;
			s.cand[j * 2] = other, s.cand[j * 2 + 1] = truth;
			s.score[j * 2] = 0.4f, s.score[j * 2 + 1] = 0.6f;
			s.path[j] = wrong ? 0 : 1;
			/* a route sidecar for every proposed position: layer 0, experts j and j + 8 */
			memset(&r, 0, sizeof(r));
			r.owner = r.ticket_owner = 5, r.generation = r.ticket_generation = 2;
			r.layer = 0, r.position = s.position + 1 + j, r.top_k = 1, r.native[0] = 0;
			r.n_pred = 2, r.pred[0] = (uint32_t)(4 * k + j) % 16, r.pred[1] = 16 + (uint32_t)(4 * k + j) % 16;
			r.confidence[0] = r.confidence[1] = 0.5f;
			CHECK_EQ_INT(hb_spec_write_route(w, &r, &err), HB_OK);
		}
		s.accepted = acc + (lie && k == n - 1);
		s.bonus = f->future[i + 1 + acc];
		CHECK_EQ_INT(hb_spec_write_step(w, &s, &err), HB_OK);
		i += acc + 1;
	}
	CHECK_EQ_INT(hb_spec_writer_close(w, &err), HB_OK);
	close(fd);
	*committed_out = i;
}

static void spec_expect(const struct fx *f, struct hb_spec_header *h, struct hb_spec_expect *e)
{
	memset(h, 0, sizeof(*h));
	h->vocab_rows = (uint32_t)f->m->vocab_physical, h->layers = (uint32_t)f->m->cfg.num_layers;
	h->hidden = (uint32_t)f->m->cfg.hidden_size, h->experts = (uint32_t)f->m->cfg.num_experts;
	memcpy(h->target, f->m->artifact_sha, 32);
	memset(e, 0, sizeof(*e));
	e->target = *h;
	e->owner = 5, e->generation = 2, e->stage = HB_SPEC_STAGE_FINAL, e->dtype = HB_SPEC_F32;
	e->ndim = 1, e->shape[0] = f->m->cfg.hidden_size;
	e->n_layers = 1, e->layers[0] = (uint32_t)f->m->cfg.num_layers - 1;
}

/* Replay g.spec on a fresh session after the prompt; returns hb_spec_read's rc. */
static int replay_shard(const struct fx *f, const struct hb_spec_expect *e, struct hb_xs *xs,
			struct hb_spec_replay *r, struct hb_session **sp, struct hb_error *err)
{
	struct hb_spec_session ss;
	struct hb_spec_target t;
	struct hb_spec_replay_read rr = {.r = r};
	struct hb_spec_header h;
	float *pre = malloc(f->np * (size_t)f->m->vocab_physical * sizeof(float));
	uint64_t n;
	int fd, rc;

	CHECK_EQ_INT(hb_session_create(f->m, f->pool, 256, sp, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(*sp, f->prompt, f->np, pre, NULL, NULL, NULL), HB_OK);
	free(pre);
	CHECK_EQ_INT(hb_spec_session_init(&ss, f->m, *sp, &t, NULL), HB_OK);
	hb_spec_replay_init(r, &t, e, f->np, f->future[0], xs);
	hb_error_clear(&rr.err);
	hb_error_clear(err);
	fd = open("g.spec", O_RDONLY);
	rc = hb_spec_read(fd, "g.spec", hb_spec_replay_record, &rr, &h, &n, err);
	close(fd);
	if (rc == 1)
		*err = rr.err;
	hb_spec_session_release(&ss);
	return rc;
}

static void golden_replay_on_model(void)
{
	static const struct plan plan[] = {{3, -1}, {4, 1}, {2, 0}, {1, -1}};
	static int32_t committed[NF_MAX];
	struct hb_spec_replay r = {.out = committed, .out_cap = NF_MAX};
	struct hb_spec_header h;
	struct hb_spec_expect e;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_stats st;
	struct hb_xs *xs = NULL;
	struct hb_session *s = NULL;
	struct hb_error err;
	struct outcome plain;
	uint64_t n = 0;
	uint8_t d[32];
	struct fx f;

	if (!fx_open(&f)) {
		CHECK(!"fixture");
		return;
	}
	spec_expect(&f, &h, &e);
	write_shard(&f, &h, plan, 4, 0, &n);
	CHECK_EQ_U64(n, 4 + 2 + 1 + 2);
	/* the streaming runtime over the artifact's own expert store */
	CHECK_EQ_INT(hb_xs_source_open("a.gguf", &src, NULL), HB_OK);
	hb_xs_config_default(&c);
	c.threads = 0, c.depth = 1, c.reserved_p0 = 0, c.reserve_slots = 0;
	c.budget_bytes = 64 * hb_xs_slot_bytes(&src);
	CHECK_EQ_INT(hb_xs_open(&src, &c, &xs, NULL), HB_OK);
	CHECK_EQ_INT(replay_shard(&f, &e, xs, &r, &s, &err), 0);
	CHECK_STR(err.msg, "");
	CHECK_EQ_U64(r.steps, 4);
	CHECK_EQ_U64(r.full, 2);
	CHECK_EQ_U64(r.partial, 1);
	CHECK_EQ_U64(r.zero, 1);
	CHECK_EQ_U64(r.committed, n);
	CHECK(!memcmp(committed, f.future, n * sizeof(int32_t)));
	/* the state equals plain decoding of the same tokens */
	run(&f, f.future, n, 0, &plain);
	hb_session_digest(s, d);
	CHECK(!memcmp(d, plain.rep.digest, 32));
	/* step 2 accepted 1 of 4 and step 3 none of 2: 3 + 2 rejected
	 * positions x 2 predictions cancelled, each exactly once */
	CHECK_EQ_U64(r.issued, 2 * (3 + 4 + 2 + 1));
	CHECK_EQ_U64(r.cancelled, 2 * (3 + 2));
	CHECK_EQ_U64(r.kept_tickets, 2 * (3 + 1 + 0 + 1));
	hb_xs_stats_get(xs, &st);
	CHECK_EQ_U64(st.cancelled_queued, r.cancelled);
	free(plain.logits);
	hb_session_free(s);
	s = NULL;

	/* a record the target contradicts: refused, and its chunk publishes nothing */
	write_shard(&f, &h, plan, 2, 1, &n);
	memset(&r, 0, sizeof(r));
	CHECK_EQ_INT(replay_shard(&f, &e, NULL, &r, &s, &err), 1);
	CHECK_STR(err.id ? err.id : "", "spec-diverged");
	CHECK_EQ_U64(hb_session_frontier(s), f.np + 4);
	hb_session_free(s);
	s = NULL;
	/* a shard of another target revision */
	h.target[0] ^= 1;
	write_shard(&f, &h, plan, 1, 0, &n);
	CHECK_EQ_INT(replay_shard(&f, &e, NULL, &r, &s, &err), 1);
	CHECK_STR(err.id ? err.id : "", "spec-target");
	CHECK_EQ_U64(hb_session_frontier(s), f.np);
	hb_session_free(s);
	hb_xs_close(xs);
	hb_xs_source_release(&src);
	fx_close(&f);
}

HB_TEST_MAIN(T(oracle_equals_plain_decode), T(golden_replay_on_model))
