/*
 * Unit tests: hb-replay merge proves one identity across its shards
 * (hb_merge_run: "one artifact and tokenizer identity throughout").
 *
 * Two --shard workers label halves of the same transcripts into one
 * directory with a fake engine.  When both ran with the same artifact and
 * tokenizer+template digest, merge proves coverage; when the second ran
 * with another tokenizer digest, or another artifact, merge must refuse
 * (replay-coverage, HB_ERR_CONTRACT) and name the shard, although each
 * shard agrees with its own manifest.  test_replay.c covers the shard
 * contract itself; this file owns only the cross-shard identity.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb-replay/dataset/hb_replay.h"

#define LAYERS 2u
#define TOPK 2u

struct fake {
	uint64_t state, pos;
};

static int fake_begin(void *ctx, uint64_t max_tokens, struct hb_error *err)
{
	struct fake *f = ctx;

	f->state = 1;
	f->pos = 0;
	return HB_OK;
}

/* routes that depend on the prefix, as a model's do */
static int fake_forward(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit, void *ectx,
			struct hb_error *err)
{
	struct fake *f = ctx;

	for (uint32_t l = 0; l < LAYERS; l++) {
		uint64_t st = f->state;
		for (size_t i = 0; i < n; i++) {
			int32_t ids[TOPK];
			float w[TOPK] = {0.75f, 0.25f};
			st = st * 6364136223846793005ull + (uint64_t)tokens[i] + 1442695040888963407ull;
			ids[0] = (int32_t)((st >> 33) % 4 + l);
			ids[1] = ids[0] + 4;
			if (emit(ectx, l, f->pos + i, ids, w, TOPK))
				return hb_error_set(err, HB_ERR_INTERNAL, "fake", "emit refused");
		}
		if (l + 1 == LAYERS)
			f->state = st;
	}
	f->pos += n;
	return HB_OK;
}

static void label(const struct hb_transcripts *ts, const char *dir, uint32_t worker, uint8_t artifact, uint8_t text)
{
	struct fake f = {0};
	struct hb_replay_engine e;
	struct hb_label_config c;
	struct hb_label_stats st;
	struct hb_error err;

	memset(&e, 0, sizeof(e));
	e.top_k = TOPK;
	e.layers = LAYERS;
	e.experts = 16;
	e.vocab = 100;
	memset(e.artifact, artifact, 32);
	e.ctx = &f;
	e.begin = fake_begin;
	e.forward = fake_forward;
	memset(&c, 0, sizeof(c));
	c.outdir = dir;
	c.shard_index = worker;
	c.shard_count = 2;
	c.max_shard_bytes = 1u << 20;
	c.chunk_tokens = 8;
	memset(c.text, text, 32);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(ts, &e, &c, &st, &err), HB_OK);
	CHECK(st.positions > 0);
}

/* merge of dir: rc, and the error's id and field */
static int merge(const struct hb_transcripts *ts, const char *dir, struct hb_error *err)
{
	const char *dirs[] = {dir};
	struct hb_merge_stats ms;
	char *report = NULL;
	int rc;

	hb_error_clear(err);
	rc = hb_merge_run(dirs, 1, ts, &report, &ms, err);
	CHECK(report != NULL);
	free(report);
	return rc;
}

static void merge_refuses_a_second_identity(void)
{
	static const char text[] =
		"{\"owner\":1,\"thread\":1,\"turn\":0,\"tokens\":[1,2,3,4,5,6,7,8,9,10,11]}\n"
		"{\"owner\":2,\"thread\":2,\"turn\":0,\"tokens\":[7,7,7,7,7,7]}\n";
	struct hb_transcripts ts;
	struct hb_error err;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_transcripts_parse(text, strlen(text), "t.jsonl", &ts, &err), HB_OK);
	if (err.code)
		return;
	/* the control: one identity, full coverage */
	label(&ts, "same", 0, 0xab, 0x11);
	label(&ts, "same", 1, 0xab, 0x11);
	CHECK_EQ_INT(merge(&ts, "same", &err), HB_OK);
	/* the second worker under another tokenizer+template digest */
	label(&ts, "text", 0, 0xab, 0x11);
	label(&ts, "text", 1, 0xab, 0x22);
	CHECK_EQ_INT(merge(&ts, "text", &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "replay-coverage");
	CHECK_STR(err.field, "text/labels-0001-of-0002-000000.json");
	/* the second worker with another artifact */
	label(&ts, "artifact", 0, 0xab, 0x11);
	label(&ts, "artifact", 1, 0xcd, 0x11);
	CHECK_EQ_INT(merge(&ts, "artifact", &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "replay-coverage");
	CHECK_STR(err.field, "artifact/labels-0001-of-0002-000000.json");
	hb_transcripts_release(&ts);
}

HB_TEST_MAIN(T(merge_refuses_a_second_identity))
