/*
 * Unit tests: spec shards (libstore/trace/hb_spec.h) and the model-free
 * golden protocol replay (libkern/spec/hb_spec_verify.h, AFN-020).
 *
 * The writer and reader round-trip every field of both record kinds; the
 * writer refuses what the reader would; the reader refuses a flipped byte,
 * a truncated shard, another magic, version or header CRC with their ids.
 * The golden replay runs tests/fixtures/spec/golden.spec (make-spec.py,
 * README.md there) against the scripted target next(x, p) = (5x + 3p + 1)
 * mod 32 held in a transactional toy state, with the streaming runtime's
 * tickets: full, partial and zero acceptance and a block of one, the bonus
 * tokens, the committed tokens and the toy state equal to plain one-token
 * decoding, the rejected suffix's tickets cancelled exactly once.  Each
 * refusal shard is refused with its own id and field.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_io.h"
#include "hb_sha256.h"
#include "spec/hb_spec_verify.h"
#include "stream_fix.h"

#include <fcntl.h>
#include <unistd.h>

#define V 32

static int32_t next_of(int32_t x, uint64_t p)
{
	return (int32_t)((5 * (uint64_t)x + 3 * p + 1) % V);
}

/* ------------------------------------------------------------ toy target */

/* A transactional toy state: the committed tokens and a per-position
 * "cache" row written past the frontier during a chunk, published only
 * for the kept prefix (as QSA rows are). */
struct toy {
	uint64_t base, frontier;
	int32_t tok[256];
	uint64_t cache[256];
	uint64_t chunks, rolled_back;
};

static int toy_verify(void *ctx, const int32_t *tokens, size_t n, hb_spec_keep_fn keep, void *kctx,
		      size_t *kept, struct hb_error *err)
{
	struct toy *t = ctx;
	int32_t next[HB_SPEC_MAX_BLOCK + 1] = {0};
	size_t k;
	(void)err;

	for (size_t i = 0; i < n; i++) {
		uint64_t p = t->frontier + i;
		next[i] = next_of(tokens[i], p);
		t->cache[p - t->base] = (uint64_t)tokens[i] * 1000003u + p; /* past the frontier: private */
	}
	k = keep(kctx, next, n);
	for (size_t i = 0; i < k; i++)
		t->tok[t->frontier - t->base + i] = tokens[i];
	for (size_t i = k; i < n; i++)
		t->cache[t->frontier - t->base + i] = 0; /* rolled back: never published */
	t->rolled_back += n - k;
	t->frontier += k;
	t->chunks++;
	*kept = k;
	return HB_OK;
}

static void toy_digest(const struct toy *t, uint8_t out[32])
{
	struct hb_sha256 h;
	hb_sha256_init(&h);
	hb_sha256_update(&h, &t->frontier, sizeof(t->frontier));
	hb_sha256_update(&h, t->tok, (size_t)(t->frontier - t->base) * sizeof(int32_t));
	hb_sha256_update(&h, t->cache, sizeof(t->cache));
	hb_sha256_final(&h, out);
}

static void expect_fixture(struct hb_spec_expect *e)
{
	memset(e, 0, sizeof(*e));
	e->target.vocab_rows = V, e->target.layers = 4, e->target.hidden = 8, e->target.experts = 8;
	memset(e->target.target, 0x11, 32);
	memset(e->target.tokenizer, 0x22, 32);
	e->owner = 7, e->generation = 1;
	e->stage = HB_SPEC_STAGE_LAYER, e->dtype = HB_SPEC_F32, e->ndim = 2;
	e->shape[0] = 2, e->shape[1] = 8;
	e->n_layers = 2, e->layers[0] = 1, e->layers[1] = 3;
}

static int open_fixture(const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/tests/fixtures/spec/%s", hb_test_srcdir(), name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	return fd;
}

/* Replay a fixture shard: 0 when it replays, else the error in *err. */
static int replay(const char *name, struct hb_spec_replay *r, struct toy *toy, struct hb_spec_target *t,
		  struct hb_xs *xs, struct hb_error *err)
{
	struct hb_spec_expect e;
	struct hb_spec_replay_read rr = {.r = r};
	struct hb_spec_header h;
	uint64_t n;
	int fd, rc;

	memset(toy, 0, sizeof(*toy));
	toy->base = toy->frontier = 10;
	t->verify = toy_verify, t->ctx = toy;
	expect_fixture(&e);
	hb_spec_replay_init(r, t, &e, 10, 3, xs);
	hb_error_clear(&rr.err);
	hb_error_clear(err);
	fd = open_fixture(name);
	rc = hb_spec_read(fd, name, hb_spec_replay_record, &rr, &h, &n, err);
	close(fd);
	if (rc == 1)
		*err = rr.err;
	return rc;
}

static void golden_replay_model_free(void)
{
	static int32_t committed[64];
	struct hb_em_geometry g;
	struct hb_xs_source src;
	struct hb_xs_config c;
	struct hb_xs_stats st;
	struct hb_xs *xs = NULL;
	struct hb_spec_replay r = {.out = committed, .out_cap = 64};
	struct hb_spec_target t;
	struct hb_error err;
	struct toy toy, plain;
	uint8_t d1[32], d2[32];
	int32_t x = 3;

	sfix_geometry_aligned(&g, 4, 8);
	CHECK_EQ_INT(sfix_build("s.bin", 0, &g, HB_EM_CODEC_BF16, &src), HB_OK);
	sfix_config(&c, &src, 16);
	c.reserve_slots = 0;
	CHECK_EQ_INT(hb_xs_open(&src, &c, &xs, NULL), HB_OK);
	CHECK_EQ_INT(replay("golden.spec", &r, &toy, &t, xs, &err), 0);
	CHECK_STR(err.msg, "");
	/* README.md: four steps, one each of full, partial, zero, and a block of one */
	CHECK_EQ_U64(r.steps, 4);
	CHECK_EQ_U64(r.full, 2);
	CHECK_EQ_U64(r.partial, 1);
	CHECK_EQ_U64(r.zero, 1);
	CHECK_EQ_U64(r.accepted, 3 + 2 + 0 + 1);
	CHECK_EQ_U64(r.committed, 4 + 3 + 1 + 2);
	CHECK_EQ_U64(r.frontier, 20);
	CHECK_EQ_U64(toy.rolled_back, 0 + 2 + 2 + 0);
	CHECK_EQ_U64(toy.chunks, 4);
	/* the committed run is plain greedy decoding from pending 3 at 10 */
	CHECK_EQ_U64(r.n_out, 10);
	for (size_t i = 0; i < r.n_out; i++) {
		CHECK_EQ_INT(committed[i], x);
		x = next_of(x, 10 + i);
	}
	CHECK_EQ_INT(r.pending, x);
	/* and the toy state equals one-token chunks of the same tokens */
	memset(&plain, 0, sizeof(plain));
	plain.base = plain.frontier = 10;
	for (size_t i = 0; i < r.n_out; i++) {
		plain.tok[i] = committed[i];
		plain.cache[i] = (uint64_t)committed[i] * 1000003u + 10 + i;
	}
	plain.frontier = 20;
	toy_digest(&toy, d1);
	toy_digest(&plain, d2);
	CHECK(!memcmp(d1, d2, 32));
	/* tickets: 7 issued (layer 1 expert 6 joined thrice), the rejected
	 * suffix's 4 cancelled exactly once, 3 kept as ordinary entries */
	CHECK_EQ_U64(r.routes, 6);
	CHECK_EQ_U64(r.issued, 7);
	CHECK_EQ_U64(r.cancelled, 4);
	CHECK_EQ_U64(r.kept_tickets, 3);
	hb_xs_stats_get(xs, &st);
	CHECK_EQ_U64(st.cancelled_queued, 4);
	hb_xs_close(xs);
	hb_xs_source_release(&src);
}

static void refusals(void)
{
	static const struct {
		const char *file, *id, *field;
	} cases[] = {
		{"other-target.spec", "spec-target", "spec.header.target"},
		{"other-tokenizer.spec", "spec-tokenizer", "spec.header.tokenizer"},
		{"other-vocab.spec", "spec-vocab", "spec.header.vocab_rows"},
		{"other-hidden.spec", "spec-hidden", "step.hidden"},
		{"other-capture.spec", "spec-capture", "step.layers"},
		{"other-owner.spec", "spec-owner", "step.owner"},
		{"stale-generation.spec", "spec-generation", "step.generation"},
		{"stale-ticket.spec", "spec-generation", "route.ticket.generation"},
		{"other-position.spec", "spec-position", "step.position"},
		{"diverged.spec", "spec-diverged", "step.accepted"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct hb_spec_replay r = {0};
		struct hb_spec_target t;
		struct hb_error err;
		struct toy toy;

		CHECK_EQ_INT(replay(cases[i].file, &r, &toy, &t, NULL, &err), 1);
		CHECK_STR(err.id ? err.id : "(none)", cases[i].id);
		CHECK_STR(err.field, cases[i].field);
		/* nothing was committed by a refused step */
		CHECK_EQ_U64(toy.frontier, 10);
	}
}

static void corrupt_shards(void)
{
	static const struct {
		const char *file, *id;
	} cases[] = {{"crc.spec", "spec-crc"}, {"truncated.spec", "spec-truncated"}};
	for (size_t i = 0; i < 2; i++) {
		struct hb_spec_replay r = {0};
		struct hb_spec_target t;
		struct hb_error err;
		struct toy toy;

		CHECK(replay(cases[i].file, &r, &toy, &t, NULL, &err) < 0);
		CHECK_STR(err.id ? err.id : "(none)", cases[i].id);
		CHECK_EQ_U64(r.steps, 0);
	}
}

/* ------------------------------------------------------------ round trip */

static void fill_header(struct hb_spec_header *h)
{
	memset(h, 0, sizeof(*h));
	h->vocab_rows = 1024, h->layers = 8, h->hidden = 64, h->experts = 32;
	memset(h->target, 0xa5, 32);
}

static void fill_step(struct hb_spec_step *s, const uint8_t *feat)
{
	memset(s, 0, sizeof(*s));
	s->owner = 99, s->generation = 4, s->stage = HB_SPEC_STAGE_FINAL, s->position = 1234;
	s->n_layers = 3, s->layers[0] = 0, s->layers[1] = 5, s->layers[2] = 7;
	s->dtype = HB_SPEC_BF16, s->ndim = 2, s->shape[0] = 3, s->shape[1] = 64;
	s->hidden_inline = true, s->hidden = feat, s->hidden_bytes = 3 * 64 * 2;
	s->block = 5, s->candidates = 4, s->score_logits = true;
	for (uint32_t i = 0; i < 20; i++)
		s->cand[i] = (int32_t)(i * 37 % 1024), s->score[i] = (float)i - 7.5f;
	for (uint32_t i = 0; i < 5; i++)
		s->path[i] = i % 4;
	memset(s->target_digest, 0x5a, 32);
	s->accepted = 3, s->bonus = 1023;
}

struct got {
	struct hb_spec_step step;
	struct hb_spec_route route;
	uint8_t feat[384];
	int steps, routes;
};

static int collect(void *ctx, const struct hb_spec_header *h, const struct hb_spec_step *s,
		   const struct hb_spec_route *r)
{
	struct got *g = ctx;
	(void)h;
	if (s) {
		g->step = *s;
		memcpy(g->feat, s->hidden, sizeof(g->feat));
		g->steps++;
	} else {
		g->route = *r;
		g->routes++;
	}
	return 0;
}

static void round_trip(void)
{
	struct hb_spec_header h, back;
	struct hb_spec_step s;
	struct hb_spec_route r = {.owner = 99, .generation = 4, .layer = 7, .position = 1235, .top_k = 3,
				  .n_pred = 2, .ticket_owner = 99, .ticket_generation = 4,
				  .native = {31, 0, 9}, .pred = {9, 4}, .confidence = {0.75f, 0.25f}};
	struct hb_spec_writer *w = NULL;
	struct got g = {0};
	struct hb_error err;
	uint8_t feat[384];
	uint64_t n = 0;
	int fd;

	for (size_t i = 0; i < sizeof(feat); i++)
		feat[i] = (uint8_t)(i * 13);
	fill_header(&h);
	fill_step(&s, feat);
	fd = open("rt.spec", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK_EQ_INT(hb_spec_writer_open(&w, fd, "rt.spec", &h, &err), HB_OK);
	CHECK_EQ_INT(hb_spec_write_step(w, &s, &err), HB_OK);
	CHECK_EQ_INT(hb_spec_write_route(w, &r, &err), HB_OK);
	/* the writer refuses what the reader would, and writes nothing of it */
	s.accepted = 6;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_spec_write_step(w, &s, &err), HB_ERR_FORMAT);
	CHECK_STR(err.id, "spec-record");
	CHECK_STR(err.field, "step.accepted");
	s.accepted = 3, s.path[2] = 4;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_spec_write_step(w, &s, &err), HB_ERR_FORMAT);
	CHECK_STR(err.field, "step.path");
	s.path[2] = 2, s.hidden_bytes = 10;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_spec_write_step(w, &s, &err), HB_ERR_FORMAT);
	CHECK_STR(err.field, "step.hidden.payload");
	r.native[1] = 32;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_spec_write_route(w, &r, &err), HB_ERR_FORMAT);
	CHECK_STR(err.field, "route.native");
	r.native[1] = 0;
	CHECK_EQ_INT(hb_spec_writer_close(w, &err), HB_OK);
	close(fd);
	fill_step(&s, feat);
	fd = open("rt.spec", O_RDONLY);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_spec_read(fd, "rt.spec", collect, &g, &back, &n, &err), HB_OK);
	close(fd);
	CHECK_EQ_U64(n, 2);
	CHECK_EQ_INT(g.steps, 1);
	CHECK_EQ_INT(g.routes, 1);
	CHECK(!memcmp(&back, &h, sizeof(h)) || (back.version == 1 && !memcmp(back.target, h.target, 32)));
	CHECK_EQ_U64(back.vocab_rows, 1024);
	CHECK_EQ_U64(g.step.owner, 99);
	CHECK_EQ_U64(g.step.position, 1234);
	CHECK_EQ_INT(g.step.generation, 4);
	CHECK_EQ_INT(g.step.stage, HB_SPEC_STAGE_FINAL);
	CHECK(!memcmp(g.step.layers, s.layers, 3 * sizeof(uint32_t)) && g.step.n_layers == 3);
	CHECK(g.step.dtype == HB_SPEC_BF16 && g.step.ndim == 2 && g.step.shape[1] == 64);
	CHECK(g.step.hidden_inline && g.step.hidden_bytes == 384 && !memcmp(g.feat, feat, 384));
	CHECK(!memcmp(g.step.cand, s.cand, sizeof(s.cand)) && !memcmp(g.step.score, s.score, sizeof(s.score)));
	CHECK(g.step.score_logits && !g.step.target_inline);
	CHECK(!memcmp(g.step.path, s.path, sizeof(s.path)));
	CHECK(!memcmp(g.step.target_digest, s.target_digest, 32));
	CHECK_EQ_INT(g.step.accepted, 3);
	CHECK_EQ_INT(g.step.bonus, 1023);
	CHECK_EQ_INT(hb_spec_path_token(&g.step, 1), s.cand[1 * 4 + 1]);
	CHECK(!memcmp(&g.route, &r, sizeof(r)));
}

static int hb_read_file_fixture(const char *name, char **data, size_t *len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/tests/fixtures/spec/%s", hb_test_srcdir(), name);
	return hb_read_file(path, 1 << 20, data, len, NULL);
}

/* A byte of the header, the first frame or the payload changed: its id. */
static void reader_refusals(void)
{
	static const struct {
		size_t off;
		uint8_t x;
		const char *id;
	} cases[] = {
		{0, 'X', "spec-magic"}, {8, 2, "spec-version"}, {20, 9, "spec-header"}, {100, 1, "spec-header"},
		{128, 'X', "spec-magic"}, {136, 7, "spec-record"}, {152 + 3, 1, "spec-crc"},
	};
	char *data;
	size_t len;
	struct hb_error err;

	CHECK_EQ_INT(hb_read_file_fixture("golden.spec", &data, &len), 0);
	for (size_t i = 0; data && i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct got g = {0};
		struct hb_spec_header h;
		uint64_t n;
		int fd;

		data[cases[i].off] ^= cases[i].x;
		CHECK_EQ_INT(hb_test_write_file("m.spec", data, len), 0);
		data[cases[i].off] ^= cases[i].x;
		fd = open("m.spec", O_RDONLY);
		hb_error_clear(&err);
		CHECK(hb_spec_read(fd, "m.spec", collect, &g, &h, &n, &err) < 0);
		close(fd);
		CHECK_STR(err.id ? err.id : "(none)", cases[i].id);
	}
	free(data);
}

/* A payload larger than the reader's growth step (1 MiB) reads back whole;
 * a frame claiming far more than its shard holds is refused as truncated. */
struct big_got {
	const uint8_t *want;
	size_t bytes;
	int steps, equal;
};

static int collect_big(void *ctx, const struct hb_spec_header *h, const struct hb_spec_step *s,
		       const struct hb_spec_route *r)
{
	struct big_got *g = ctx;
	(void)h, (void)r;
	if (s) {
		g->steps++;
		g->equal = s->hidden_bytes == g->bytes && !memcmp(s->hidden, g->want, g->bytes);
	}
	return 0;
}

static void large_and_overclaimed_payloads(void)
{
	enum { COLS = 262144 };
	size_t bytes = (size_t)3 * COLS * 2, len = 0;
	uint8_t *feat = malloc(bytes);
	struct hb_spec_header h, back;
	struct hb_spec_step s;
	struct hb_spec_writer *w = NULL;
	struct big_got g = {0};
	struct hb_error err;
	uint64_t n = 0;
	char *data = NULL;
	int fd;

	CHECK(feat != NULL);
	if (!feat)
		return;
	for (size_t i = 0; i < bytes; i++)
		feat[i] = (uint8_t)(i * 2654435761u >> 13);
	fill_header(&h);
	fill_step(&s, feat);
	s.shape[1] = COLS, s.hidden_bytes = bytes;
	fd = open("big.spec", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK_EQ_INT(hb_spec_writer_open(&w, fd, "big.spec", &h, &err), HB_OK);
	CHECK_EQ_INT(hb_spec_write_step(w, &s, &err), HB_OK);
	CHECK_EQ_INT(hb_spec_writer_close(w, &err), HB_OK);
	close(fd);
	g.want = feat, g.bytes = bytes;
	fd = open("big.spec", O_RDONLY);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_spec_read(fd, "big.spec", collect_big, &g, &back, &n, &err), HB_OK);
	close(fd);
	CHECK_EQ_U64(n, 1);
	CHECK(g.steps == 1 && g.equal);
	/* the first frame's length (at 128 + 16) raised to 64 MiB, the shard as it is */
	CHECK_EQ_INT(hb_read_file_fixture("golden.spec", &data, &len), 0);
	if (data && len > 152) {
		uint64_t claim = HB_SPEC_MAX_PAYLOAD;
		for (int i = 0; i < 8; i++)
			data[144 + i] = (char)(claim >> (8 * i));
		CHECK_EQ_INT(hb_test_write_file("claim.spec", data, len), 0);
		fd = open("claim.spec", O_RDONLY);
		hb_error_clear(&err);
		g = (struct big_got){0};
		CHECK_EQ_INT(hb_spec_read(fd, "claim.spec", collect_big, &g, &back, &n, &err), HB_ERR_SHORT);
		close(fd);
		CHECK_STR(err.id ? err.id : "(none)", "spec-truncated");
		CHECK_EQ_INT(g.steps, 0);
	}
	free(data);
	free(feat);
}

HB_TEST_MAIN(T(large_and_overclaimed_payloads), T(round_trip), T(reader_refusals), T(golden_replay_model_free), T(refusals), T(corrupt_shards))
