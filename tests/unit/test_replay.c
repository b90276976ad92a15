/*
 * Unit tests: hb-replay's library (libstore/hb_replay.h) with a fake
 * engine, so that the shard contract is tested apart from the model:
 * the labeller writes position-major records under the byte bound; a run
 * interrupted after any forward (and, worse, between a shard and its
 * manifest) resumes to byte-identical shards; --shard i/N shares cover the
 * transcripts and merge proves it; parity names the first differing rank
 * and counts the rest; the diagnostic table is what the man page lists.
 * The fake engine routes like the session does: one chunk, layer by layer,
 * each layer over every position, and its routes depend on the whole
 * prefix, so a chunk that lost its state would show.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_io.h"
#include "hb_replay.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define LAYERS 3u
#define TOPK 4u
#define EXPERTS 16u

struct fake {
	uint64_t state, pos;
	unsigned forwards, fail_after; /* 0: never */
};

static uint64_t mix(uint64_t x)
{
	x += UINT64_C(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

static int fake_begin(void *ctx, uint64_t max_tokens, struct hb_error *err)
{
	struct fake *f = ctx;
	f->state = 1;
	f->pos = 0;
	return HB_OK;
}

static int fake_forward(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit, void *ectx,
			struct hb_error *err)
{
	struct fake *f = ctx;
	uint64_t st[512];

	if (f->fail_after && ++f->forwards > f->fail_after)
		return hb_error_set(err, HB_ERR_FAULT, "fake", "injected failure");
	if (n > 512)
		return hb_error_set(err, HB_ERR_INVALID, "fake", "chunk too long");
	for (size_t i = 0; i < n; i++) {
		f->state = mix(f->state ^ (uint64_t)tokens[i]);
		st[i] = f->state;
	}
	for (uint32_t l = 0; l < LAYERS; l++)
		for (size_t i = 0; i < n; i++) {
			int32_t ids[TOPK];
			float w[TOPK];
			uint64_t h = mix(st[i] + l);
			for (uint32_t r = 0; r < TOPK; r++) {
				ids[r] = (int32_t)((h >> (8 * r)) % (EXPERTS / TOPK) + r * (EXPERTS / TOPK));
				w[r] = 1.0f / (float)(r + 2);
			}
			if (emit(ectx, l, f->pos + i, ids, w, TOPK))
				return hb_error_set(err, HB_ERR_INTERNAL, "fake", "emit refused");
		}
	f->pos += n;
	return HB_OK;
}

static void engine(struct hb_replay_engine *e, struct fake *f)
{
	memset(e, 0, sizeof(*e));
	e->top_k = TOPK;
	e->layers = LAYERS;
	e->experts = EXPERTS;
	e->vocab = 100;
	memset(e->artifact, 0xab, 32);
	e->ctx = f;
	e->begin = fake_begin;
	e->forward = fake_forward;
}

static int transcripts(struct hb_transcripts *ts)
{
	static const char text[] =
		"{\"owner\":1,\"thread\":1,\"turn\":0,\"tokens\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23]}\n"
		"{\"owner\":1,\"thread\":1,\"turn\":1,\"tokens\":[5,6,7]}\n"
		"{\"owner\":2,\"thread\":2,\"turn\":0,\"tokens\":[9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9]}\n"
		"{\"owner\":3,\"thread\":3,\"turn\":0,\"sequence\":77,\"tokens\":[42]}\n";
	struct hb_error err;
	hb_error_clear(&err);
	return hb_transcripts_parse(text, strlen(text), "t.jsonl", ts, &err);
}

/* Concatenate every regular file of dir (sorted names, visible ones) with
 * its name into one heap buffer: a directory's identity. */
static char *dir_bytes(const char *dir, size_t *len, int *hidden)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort);
	char *out = NULL;
	size_t cap = 0;

	*len = 0;
	*hidden = 0;
	for (int i = 0; i < n; i++) {
		char path[512], *data = NULL;
		size_t dl = 0, nl = strlen(names[i]->d_name);
		if (names[i]->d_name[0] == '.') {
			*hidden += strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, "..");
			free(names[i]);
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		if (hb_read_file(path, 1u << 30, &data, &dl, NULL) == HB_OK) {
			char *g = realloc(out, cap + nl + dl + 1);
			if (g) {
				out = g;
				memcpy(out + cap, names[i]->d_name, nl);
				memcpy(out + cap + nl, data, dl);
				cap += nl + dl;
			}
		}
		free(data);
		free(names[i]);
	}
	free(names);
	*len = cap;
	return out;
}

static void config(struct hb_label_config *c, const char *dir, uint32_t i, uint32_t n, uint64_t maxb, uint64_t chunk)
{
	memset(c, 0, sizeof(*c));
	c->outdir = dir;
	c->shard_index = i;
	c->shard_count = n;
	c->max_shard_bytes = maxb;
	c->chunk_tokens = chunk;
}

static void shards_stay_under_the_bound_and_cover_everything(void)
{
	struct hb_transcripts ts;
	struct fake f = {0};
	struct hb_replay_engine e;
	struct hb_label_config c;
	struct hb_label_stats st;
	struct hb_error err;
	struct hb_merge_stats ms;
	const char *dirs[] = {"L"};
	char *report = NULL;
	DIR *d;
	struct dirent *de;

	CHECK_EQ_INT(transcripts(&ts), HB_OK);
	engine(&e, &f);
	/* record bytes 40 + 8 x 4 = 72; one position = 3 records */
	config(&c, "L", 0, 1, 128 + 24 + 72 * 3 * 5, 7);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_OK);
	CHECK_EQ_U64(st.positions, 23 + 3 + 41 + 1);
	CHECK_EQ_U64(st.records, 3 * st.positions);
	/* at most 5 positions a shard, and a new owner starts a new shard */
	d = opendir("L");
	while (d && (de = readdir(d))) {
		struct stat sb;
		char p[300];
		snprintf(p, sizeof(p), "L/%s", de->d_name);
		if (strstr(de->d_name, ".hbtrace") && !stat(p, &sb))
			CHECK(sb.st_size <= (off_t)c.max_shard_bytes);
	}
	if (d)
		closedir(d);
	CHECK_EQ_INT(hb_merge_run(dirs, 1, &ts, &report, &ms, &err), HB_OK);
	CHECK_EQ_U64(ms.sequences, 4);
	CHECK_EQ_U64(ms.positions, st.positions);
	CHECK_EQ_U64(ms.shards, st.shards_written);
	free(report);
	hb_transcripts_release(&ts);
}

/* Interrupt after every possible forward, also losing the last manifest
 * (a crash between the shard's rename and its manifest's) and leaving a
 * temporary file; resume; the directory must equal an uninterrupted one. */
static void any_interruption_resumes_to_identical_shards(void)
{
	struct hb_transcripts ts;
	struct hb_replay_engine e;
	struct hb_label_config c;
	struct hb_label_stats st;
	struct hb_error err;
	struct fake f = {0};
	char *want, *got;
	size_t wl, gl;
	int hidden;

	CHECK_EQ_INT(transcripts(&ts), HB_OK);
	engine(&e, &f);
	config(&c, "ref", 0, 1, 128 + 24 + 72 * 3 * 4, 3);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_OK);
	want = dir_bytes("ref", &wl, &hidden);
	CHECK(want != NULL && wl > 0);
	for (unsigned stop = 1; stop < 24; stop++) { /* 24 forwards in all at chunk 3 */
		char dir[32];
		for (int crash = 0; crash < 2; crash++) {
			snprintf(dir, sizeof(dir), "r%u-%d", stop, crash);
			config(&c, dir, 0, 1, 128 + 24 + 72 * 3 * 4, 3);
			f.forwards = 0;
			f.fail_after = stop;
			hb_error_clear(&err);
			CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_ERR_FAULT);
			if (crash && st.shards_written) {
				char p[128];
				snprintf(p, sizeof(p), "%s/labels-0000-of-0001-%06" PRIu64 ".json", dir,
					 st.shards_written - 1);
				CHECK_EQ_INT(unlink(p), 0);
				snprintf(p, sizeof(p), "%s/.labels-0000-of-0001-%06" PRIu64 ".hbtrace.hbtmp.XyZ123", dir,
					 st.shards_written);
				CHECK_EQ_INT(hb_test_write_file(p, "x", 1), 0);
			}
			f.fail_after = 0;
			hb_error_clear(&err);
			CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_OK);
			got = dir_bytes(dir, &gl, &hidden);
			CHECK_EQ_INT(hidden, 0);
			CHECK_EQ_U64(gl, wl);
			CHECK(got && !memcmp(got, want, wl));
			free(got);
		}
	}
	free(want);
	hb_transcripts_release(&ts);
}

static void workers_share_the_transcripts(void)
{
	struct hb_transcripts ts;
	struct hb_replay_engine e;
	struct hb_label_config c;
	struct hb_label_stats st;
	struct hb_error err;
	struct hb_merge_stats ms;
	struct fake f = {0};
	const char *dirs[] = {"W"};
	char *report = NULL;
	uint64_t positions = 0;

	CHECK_EQ_INT(transcripts(&ts), HB_OK);
	engine(&e, &f);
	for (uint32_t i = 0; i < 3; i++) {
		config(&c, "W", i, 3, 4096, 16);
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_OK);
		positions += st.positions;
		hb_error_clear(&err);
		/* before the last worker ran, coverage is incomplete */
		if (i < 2) {
			CHECK_EQ_INT(hb_merge_run(dirs, 1, &ts, &report, &ms, &err), HB_ERR_CONTRACT);
			CHECK_STR(err.id, "replay-coverage");
			free(report);
		}
	}
	CHECK_EQ_U64(positions, 68);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_merge_run(dirs, 1, &ts, &report, &ms, &err), HB_OK);
	CHECK(report && strstr(report, "\"coverage\":\ttrue"));
	free(report);
	hb_transcripts_release(&ts);
}

/* Labels of one engine; a trace written by hand with one rank changed. */
static void parity_names_the_first_difference(void)
{
	struct hb_transcripts ts;
	struct hb_replay_engine e;
	struct hb_label_config c;
	struct hb_label_stats st;
	struct hb_parity_stats ps;
	struct hb_error err;
	struct hb_trace_header h;
	struct hb_trace_writer *w;
	struct fake f = {0};
	const char *labels[] = {"L"}, *traces[] = {"d.trace"};
	int fd;

	CHECK_EQ_INT(transcripts(&ts), HB_OK);
	engine(&e, &f);
	config(&c, "L", 0, 1, 1 << 20, 5);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_OK);
	/* a "decode" trace of sequence 1 (tokens 5,6,7), one position at a time */
	memset(&h, 0, sizeof(h));
	h.top_k = TOPK;
	h.layers = LAYERS;
	h.experts = EXPERTS;
	memset(h.artifact, 0xab, 32);
	h.owner = 1;
	fd = open("d.trace", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK_EQ_INT(hb_trace_writer_open(&w, fd, "d.trace", &h, 2, &err), HB_OK);
	fake_begin(&f, 3, &err);
	for (int p = 0; p < 3; p++) {
		struct hb_route r;
		int32_t tok = 5 + p;
		uint64_t hh;
		memset(&r, 0, sizeof(r));
		f.state = mix(f.state ^ (uint64_t)tok);
		for (uint32_t l = 0; l < LAYERS; l++) {
			hh = mix(f.state + l);
			r.sequence = 1;
			r.ordinal = (uint64_t)p;
			r.layer = l;
			for (uint32_t k = 0; k < TOPK; k++) {
				r.ids[k] = (uint32_t)((hh >> (8 * k)) % (EXPERTS / TOPK) + k * (EXPERTS / TOPK));
				r.weights[k] = 1.0f / (float)(k + 2);
			}
			if (p == 2 && l == 1) {
				uint32_t t = r.ids[2];
				r.ids[2] = r.ids[3];
				r.ids[3] = t;
			}
			CHECK_EQ_INT(hb_trace_write(w, &r, &err), HB_OK);
		}
	}
	CHECK_EQ_INT(hb_trace_writer_close(w, &err), HB_OK);
	close(fd);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_parity_run(labels, 1, traces, 1, 0, &ps, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "replay-mismatch");
	CHECK(strstr(err.msg, "record 7: sequence 1 position 2 layer 1 rank 2: ") == err.msg);
	CHECK_EQ_U64(ps.failures, 1);
	CHECK_EQ_U64(ps.checked, 9);
	CHECK_EQ_U64(ps.trace_records, 9);
	CHECK_EQ_U64(ps.unchecked_labels, st.records - 9);
	hb_transcripts_release(&ts);
}

static void transcript_schema(void)
{
	struct hb_transcripts ts;
	struct hb_error err;
	static const char ok[] = "{\"owner\":1,\"thread\":2,\"turn\":3,\"tokens\":[4,5],\"generation\":6,\"time\":7,"
				 "\"runtime\":true,\"boundaries\":[{\"at\":0,\"role\":\"user\"},{\"at\":1,\"role\":\"assistant\"}],"
				 "\"window\":[10,12]}";
	char *line;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_transcripts_parse(ok, strlen(ok), "x", &ts, &err), HB_OK);
	CHECK_EQ_U64(ts.n, 1);
	CHECK_EQ_U64(ts.t[0].sequence, 0);
	CHECK_EQ_U64(ts.t[0].generation, 6);
	CHECK_EQ_U64(ts.t[0].n_bounds, 2);
	CHECK_STR(ts.t[0].bounds[1].role, "assistant");
	line = hb_transcript_render(&ts.t[0]);
	CHECK_STR(line, "{\"owner\":1,\"thread\":2,\"turn\":3,\"sequence\":0,\"generation\":6,\"time\":7,\"runtime\":true,"
			"\"tokens\":[4,5],\"boundaries\":[{\"at\":0,\"role\":\"user\"},{\"at\":1,\"role\":\"assistant\"}],"
			"\"window\":[10,12]}");
	free(line);
	hb_transcripts_release(&ts);
	{
		static const struct {
			const char *text, *id, *field;
		} bad[] = {
			{"{\"owner\":1,\"thread\":2,\"turn\":3,\"tokens\":[4],\"window\":[0,2]}", "replay-field", "line[1].window"},
			{"{\"owner\":1,\"thread\":2,\"turn\":3,\"tokens\":[4,5],\"boundaries\":[{\"at\":1,\"role\":\"a\"},{\"at\":1,\"role\":\"b\"}]}",
			 "replay-field", "line[1].boundaries[1]"},
			{"{\"owner\":1,\"thread\":2,\"turn\":3,\"tokens\":[4],\"generation\":4294967296}", "replay-field",
			 "line[1].generation"},
			{"{\"owner\":1.5,\"thread\":2,\"turn\":3,\"tokens\":[4]}", "replay-field", "line[1].owner"},
			{"{\"owner\":1,\"thread\":2,\"turn\":3,\"tokens\":[4],\"runtime\":1}", "replay-field", "line[1].runtime"},
			{"{\"owner\":1,\"thread\":2,\"turn\":3,\"tokens\":[4]}\n\n", "replay-json", "line[2]"},
			{"", "replay-json", "x"},
		};
		for (size_t i = 0; i < HB_ARRAY_LEN(bad); i++) {
			hb_error_clear(&err);
			CHECK_EQ_INT(hb_transcripts_parse(bad[i].text, strlen(bad[i].text), "x", &ts, &err), HB_ERR_FORMAT);
			CHECK_STR(err.id, bad[i].id);
			CHECK_STR(err.field, bad[i].field);
		}
	}
}

static void diag_ids_are_the_table(void)
{
	static const char *const want[] = {"replay-json", "replay-key", "replay-field", "replay-sequence",
					   "replay-thread", "replay-token", "replay-geometry", "replay-identity",
					   "replay-owner", "replay-missing", "replay-mismatch", "replay-weight",
					   "replay-duplicate", "replay-coverage", "replay-manifest"};
	CHECK_EQ_U64(HB_RPD_COUNT, HB_ARRAY_LEN(want));
	for (size_t i = 0; i < HB_ARRAY_LEN(want); i++)
		CHECK_STR(hb_replay_diag_id((enum hb_replay_diag)i), want[i]);
	CHECK(hb_replay_diag_id(HB_RPD_COUNT) == NULL);
}

HB_TEST_MAIN(T(shards_stay_under_the_bound_and_cover_everything), T(any_interruption_resumes_to_identical_shards),
	     T(workers_share_the_transcripts), T(parity_names_the_first_difference), T(transcript_schema),
	     T(diag_ids_are_the_table))
