/*
 * Unit tests: hb-replay's engine (cmd/hb-replay/dataset/hb_replay.h) with a fake
 * engine, so that the shard contract is tested apart from the model:
 * the labeller writes position-major records under the byte bound; a run
 * interrupted after any forward (and, worse, between a shard and its
 * manifest) resumes to byte-identical shards; --shard i/N shares cover the
 * transcripts and merge proves it; parity names the first differing rank
 * and counts the rest; the diagnostic table is what the man page lists.
 * The fake engine routes like the session does: one chunk, layer by layer,
 * each layer over every position, and its routes depend on the whole
 * prefix, so a chunk that lost its state would show.  With hidden capture
 * it also hands over hc x hidden floats per layer and position, derived
 * from the same prefix state, and the sidecar is read back here from the
 * byte layout hb-replay(1) documents, not through the writer's code.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_io.h"
#include "hb-replay/dataset/hb_replay.h"
#include "hb_sha256.h"

#include <dirent.h>
#include <fcntl.h>
#include <zlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define LAYERS 3u
#define TOPK 4u
#define EXPERTS 16u
#define HC 2u
#define HID 40u /* a sample (24 + 2 x 80 x 4 bytes) outweighs 3 positions of labels */

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

static float fake_state(uint64_t st, uint32_t l, uint32_t j)
{
	return (float)(mix(st * 31 + l * 7 + j) & 0xffffff) / 65536.0f - 128.0f;
}

static int fake_run(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit, hb_replay_hidden_fn hidden,
		    void *ectx, struct hb_error *err)
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
			if (hidden) {
				float v[HC * HID];
				for (uint32_t j = 0; j < HC * HID; j++)
					v[j] = fake_state(st[i], l, j);
				if (hidden(ectx, l, f->pos + i, v, HC * HID))
					return hb_error_set(err, HB_ERR_INTERNAL, "fake", "hidden refused");
			}
		}
	f->pos += n;
	return HB_OK;
}

static int fake_forward(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit, void *ectx,
			struct hb_error *err)
{
	return fake_run(ctx, tokens, n, emit, NULL, ectx, err);
}

static int fake_forward_hidden(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit,
			       hb_replay_hidden_fn hidden, void *ectx, struct hb_error *err)
{
	return fake_run(ctx, tokens, n, emit, hidden, ectx, err);
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
	e->hc = HC;
	e->hidden = HID;
	e->forward_hidden = fake_forward_hidden;
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
		/* without --capture-hidden nothing beside the labels */
		CHECK(!strstr(de->d_name, ".hbhidden"));
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
			CHECK_EQ_U64(st.hidden_samples, 0);
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


/* ------------------------------------------------------------ hidden capture */

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* The fake's state after tokens[0..pos] of t. */
static uint64_t prefix_state(const struct hb_transcript *t, uint64_t pos)
{
	uint64_t st = 1;
	for (uint64_t i = 0; i <= pos; i++)
		st = mix(st ^ (uint64_t)t->tokens[i]);
	return st;
}

/* The sample the man page promises: floor(i x n / P), i < P, or all. */
static bool want_sample(uint64_t n, uint64_t P, uint64_t pos)
{
	if (n <= P)
		return true;
	for (uint64_t i = 0; i < P; i++)
		if (i * n / P == pos)
			return true;
	return false;
}

static int has_suffix(const struct dirent *d)
{
	size_t n = strlen(d->d_name);
	return n > 9 && !strcmp(d->d_name + n - 9, ".hbhidden");
}

/* Read every sidecar of dir in name order and check it byte by byte against
 * the documented layout and the fake's states: header, CRCs, the samples of
 * every sequence in order, each of the layers `layers` (ascending).
 * Returns the number of samples, or -1. */
static long read_sidecars(const char *dir, const struct hb_transcripts *ts, const uint32_t *layers, size_t n_layers,
			  uint64_t P, uint64_t max_bytes)
{
	struct dirent **names;
	int nf = scandir(dir, &names, has_suffix, alphasort);
	size_t ti = 0;
	uint64_t pos = 0;
	long samples = 0;
	int bad = nf < 1;

	for (int f = 0; f < nf; f++) {
		char path[512], *data = NULL;
		size_t len = 0, hl = 48 + 4 * n_layers, sb = 24 + n_layers * HC * HID * 4;
		const uint8_t *b;
		snprintf(path, sizeof(path), "%s/%s", dir, names[f]->d_name);
		free(names[f]);
		if (hb_read_file(path, 1u << 30, &data, &len, NULL) || len < hl + 4 || len > max_bytes) {
			bad++;
			free(data);
			continue;
		}
		b = (const uint8_t *)data;
		bad += memcmp(b, "HBHIDDN1", 8) || rd32(b + 8) != n_layers || rd32(b + 12) != HC ||
		       rd32(b + 16) != HID || rd32(b + 20) != LAYERS || rd64(b + 32) != P || rd64(b + 40) ||
		       rd32(b + hl) != (uint32_t)crc32(0, b, (uInt)hl) || len != hl + 4 + rd64(b + 24) * sb;
		for (size_t i = 0; i < n_layers; i++)
			bad += rd32(b + 48 + 4 * i) != layers[i];
		for (uint64_t k = 0; !bad && k < rd64(b + 24); k++) {
			const uint8_t *r = b + hl + 4 + k * sb;
			const struct hb_transcript *t;
			/* the next sampled position, in transcript order */
			while (ti < ts->n && !want_sample(ts->t[ti].n_tokens, P, pos))
				if (++pos == ts->t[ti].n_tokens)
					ti++, pos = 0;
			if (ti == ts->n) {
				bad++;
				break;
			}
			t = &ts->t[ti];
			bad += rd64(r) != t->sequence || rd64(r + 8) != pos || rd32(r + 20) ||
			       rd32(r + 16) != (uint32_t)crc32(crc32(0, r, 16), r + 24, (uInt)(sb - 24));
			for (size_t l = 0; l < n_layers; l++)
				for (uint32_t j = 0; j < HC * HID; j++) {
					uint32_t u = rd32(r + 24 + 4 * (l * HC * HID + j));
					float v, w = fake_state(prefix_state(t, pos), layers[l], j);
					memcpy(&v, &u, 4);
					bad += v != w;
				}
			samples++;
			if (++pos == t->n_tokens)
				ti++, pos = 0;
		}
		free(data);
	}
	free(names);
	/* and no sampled position left out after the last one read */
	while (ti < ts->n && !want_sample(ts->t[ti].n_tokens, P, pos))
		if (++pos == ts->t[ti].n_tokens)
			ti++, pos = 0;
	bad += ti != ts->n;
	return bad ? -1 : samples;
}

static void capture_writes_a_bounded_sample(void)
{
	struct hb_transcripts ts;
	struct hb_replay_engine e;
	struct hb_label_config c;
	struct hb_label_stats st;
	struct hb_error err;
	struct hb_merge_stats ms;
	struct fake f = {0};
	const char *dirs[] = {"H"}, *dirs2[] = {"HB"};
	static const uint32_t given[] = {2, 0}, sorted[] = {0, 2};
	char *report = NULL, *man = NULL;
	size_t ml = 0;
	DIR *d;
	struct dirent *de;

	CHECK_EQ_INT(transcripts(&ts), HB_OK);
	engine(&e, &f);
	config(&c, "H", 0, 1, 1 << 20, 5);
	c.capture = given;
	c.n_capture = 2;
	c.capture_positions = 4;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_OK);
	/* 4 of 23, all 3, 4 of 41, the 1 */
	CHECK_EQ_U64(st.hidden_samples, 12);
	CHECK_EQ_U64(st.shards_written, 3); /* one per owner */
	CHECK_EQ_INT((int)read_sidecars("H", &ts, sorted, 2, 4, 1 << 20), 12);
	CHECK_EQ_INT(hb_read_file("H/labels-0000-of-0001-000000.json", 1 << 20, &man, &ml, NULL), HB_OK);
	CHECK(man && strstr(man, "\"hidden_positions\":\t[0, 5, 11, 17]"));
	CHECK(man && strstr(man, "\"hidden_positions\":\t[0, 1, 2]"));
	CHECK(man && strstr(man, "\"format\":\t\"hebrus-replay-hidden/1\""));
	CHECK(man && strstr(man, "\"file\":\t\"labels-0000-of-0001-000000.hbhidden\""));
	CHECK(man && strstr(man, "\"layers\":\t[0, 2]"));
	CHECK(man && strstr(man, "\"positions_per_sequence\":\t4"));
	CHECK(man && strstr(man, "\"samples\":\t7"));
	free(man);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_merge_run(dirs, 1, &ts, &report, &ms, &err), HB_OK);
	free(report);

	/* held to the shard bound too: a sample outweighs 3 positions of labels */
	config(&c, "HB", 0, 1, 128 + 24 + 72 * 3 * 5, 5);
	c.capture = given;
	c.n_capture = 2;
	c.capture_positions = 4;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_OK);
	CHECK_EQ_U64(st.hidden_samples, 12);
	CHECK_EQ_INT((int)read_sidecars("HB", &ts, sorted, 2, 4, c.max_shard_bytes), 12);
	/* 5 positions a shard make 6 + 9 + 1 shards without capture; two
	 * samples never share one here, so owner 1 needs a seventh */
	CHECK(st.shards_written > 16);
	d = opendir("HB");
	while (d && (de = readdir(d))) {
		struct stat sb;
		char p[300];
		snprintf(p, sizeof(p), "HB/%s", de->d_name);
		if (de->d_name[0] != '.' && !stat(p, &sb))
			CHECK(strstr(de->d_name, ".json") || sb.st_size <= (off_t)c.max_shard_bytes);
	}
	if (d)
		closedir(d);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_merge_run(dirs2, 1, &ts, &report, &ms, &err), HB_OK);
	free(report);

	/* a sidecar changed by one byte fails merge and resume */
	{
		int fd = open("H/labels-0000-of-0001-000001.hbhidden", O_WRONLY);
		CHECK(fd >= 0);
		CHECK_EQ_INT((int)pwrite(fd, "\x7f", 1, 200), 1);
		close(fd);
	}
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_merge_run(dirs, 1, &ts, &report, &ms, &err), HB_ERR_CONTRACT);
	CHECK(report && strstr(report, "labels-0000-of-0001-000001.hbhidden: SHA-256 differs from its manifest's"));
	free(report);
	config(&c, "H", 0, 1, 1 << 20, 5);
	c.capture = given;
	c.n_capture = 2;
	c.capture_positions = 4;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_ERR_DIGEST);
	CHECK_STR(err.id, "replay-manifest");
	hb_transcripts_release(&ts);
}

/* The resume test again, with capture and a bound the sidecars reach. */
static void capture_resumes_to_identical_files(void)
{
	struct hb_transcripts ts;
	struct hb_replay_engine e;
	struct hb_label_config c;
	struct hb_label_stats st;
	struct hb_error err;
	struct fake f = {0};
	static const uint32_t layers[] = {1};
	char *want, *got;
	size_t wl, gl;
	int hidden;

	CHECK_EQ_INT(transcripts(&ts), HB_OK);
	engine(&e, &f);
	config(&c, "cref", 0, 1, 128 + 24 + 72 * 3 * 4, 3);
	c.capture = layers;
	c.n_capture = 1;
	c.capture_positions = 6;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_OK);
	CHECK_EQ_U64(st.hidden_samples, 6 + 3 + 6 + 1);
	want = dir_bytes("cref", &wl, &hidden);
	CHECK(want != NULL && wl > 0);
	for (unsigned stop = 1; stop < 24; stop++) {
		char dir[32];
		for (int crash = 0; crash < 2; crash++) {
			snprintf(dir, sizeof(dir), "c%u-%d", stop, crash);
			c.outdir = dir;
			f.forwards = 0;
			f.fail_after = stop;
			hb_error_clear(&err);
			CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_ERR_FAULT);
			if (crash && st.shards_written) {
				char p[128];
				snprintf(p, sizeof(p), "%s/labels-0000-of-0001-%06" PRIu64 ".json", dir,
					 st.shards_written - 1);
				CHECK_EQ_INT(unlink(p), 0);
				snprintf(p, sizeof(p), "%s/.labels-0000-of-0001-%06" PRIu64 ".hbhidden.hbtmp.XyZ123", dir,
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

static void capture_refusals(void)
{
	struct hb_transcripts ts;
	struct hb_replay_engine e;
	struct hb_label_config c;
	struct hb_label_stats st;
	struct hb_error err;
	struct fake f = {0};
	static const uint32_t out_of_range[] = {0, 3}, twice[] = {1, 2, 1}, one[] = {1}, other[] = {2};
	struct stat sb;

	CHECK_EQ_INT(transcripts(&ts), HB_OK);
	engine(&e, &f);
	config(&c, "X", 0, 1, 1 << 20, 5);
	c.capture_positions = 2;
	c.capture = out_of_range;
	c.n_capture = 2;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "replay-capture");
	CHECK_STR(err.field, "--capture-hidden");
	CHECK_STR(err.msg, "layer 3 is not below the model's 3 layers");
	c.capture = twice;
	c.n_capture = 3;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "replay-capture");
	CHECK_STR(err.msg, "layer 1 is named twice");
	CHECK(stat("X", &sb) != 0); /* nothing written */
	/* an engine that cannot capture */
	c.capture = one;
	c.n_capture = 1;
	e.forward_hidden = NULL;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_ERR_UNSUPPORTED);
	e.forward_hidden = fake_forward_hidden;
	/* the sidecar must hold one sample: 48 + 4 + 4 + 24 + 80 x 4 = 400 */
	config(&c, "X", 0, 1, 399, 5);
	c.capture_positions = 2;
	c.capture = one;
	c.n_capture = 1;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_ERR_INVALID);
	CHECK_STR(err.field, "--max-shard-bytes");
	/* resume refuses other capture settings, or none */
	config(&c, "X", 0, 1, 1 << 20, 5);
	c.capture_positions = 2;
	c.capture = one;
	c.n_capture = 1;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_OK);
	CHECK_EQ_U64(st.hidden_samples, 2 + 2 + 2 + 1);
	c.capture = other;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "replay-manifest");
	c.capture = one;
	c.capture_positions = 3;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_ERR_CONTRACT);
	c.n_capture = 0;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "replay-manifest");
	/* the same settings: nothing to do */
	c.n_capture = 1;
	c.capture_positions = 2;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_OK);
	CHECK_EQ_U64(st.shards_kept, 3);
	CHECK_EQ_U64(st.shards_written, 0);
	hb_transcripts_release(&ts);
}

/* ------------------------------------------------------------ owner and thread names */

#define UUID_A "3f2504e0-4f89-11d3-9a0c-0305e82c3301"
#define UUID_B "c0ffee00-0000-4000-8000-00000000beef"

/* The documented name id, derived here from hebrus-trace(5): SHA-256 of
 * the domain, a NUL and the text; first 8 bytes little-endian; bit 63 set. */
static uint64_t doc_name_id(const char *text)
{
	uint8_t buf[512], d[32];
	size_t n = strlen("hebrus-name-id/1") + 1, len = strlen(text);
	uint64_t v = 0;

	memcpy(buf, "hebrus-name-id/1", n);
	memcpy(buf + n, text, len);
	hb_sha256_buf(buf, n + len, d);
	for (int i = 7; i >= 0; i--)
		v = v << 8 | d[i];
	return v | UINT64_C(1) << 63;
}

static void names_map_to_stable_ids(void)
{
	static const struct {
		const char *text;
		uint64_t id;
	} ints[] = {{"0", 0}, {"1", 1}, {"42", 42}, {"9223372036854775807", UINT64_C(9223372036854775807)}};
	/* not canonical decimal below 2^63: names, hashed like any other */
	static const char *const names[] = {"007", "+1", " 1", "1 ", "-1", "1e3", "0x10", "00",
					    "9223372036854775808", "18446744073709551616",
					    "3f2504e0-4f89-11d3-9a0c-0305e82c3301", "alice@example.org", "\xc3\xa9t\xc3\xa9"};
	char longest[HB_TRACE_NAME_MAX + 2];
	uint64_t id;

	for (size_t i = 0; i < HB_ARRAY_LEN(ints); i++) {
		id = 99;
		CHECK_EQ_INT(hb_trace_name_id(ints[i].text, strlen(ints[i].text), &id), HB_OK);
		CHECK_EQ_U64(id, ints[i].id);
		CHECK(hb_trace_name_is_integer(ints[i].text, strlen(ints[i].text)));
	}
	for (size_t i = 0; i < HB_ARRAY_LEN(names); i++) {
		CHECK_EQ_INT(hb_trace_name_id(names[i], strlen(names[i]), &id), HB_OK);
		CHECK_EQ_U64(id, doc_name_id(names[i]));
		CHECK(id >> 63);
		CHECK(!hb_trace_name_is_integer(names[i], strlen(names[i])));
	}
	/* hebrus-trace(5)'s example, computed apart (Python hashlib) */
	CHECK_EQ_INT(hb_trace_name_id("alice", 5, &id), HB_OK);
	CHECK_EQ_U64(id, UINT64_C(11126600883368395436));
	CHECK_EQ_INT(hb_trace_name_id(UUID_A, strlen(UUID_A), &id), HB_OK);
	CHECK_EQ_U64(id, UINT64_C(14325394032315830493));
	/* the id of a name is the id of its bytes, not of a prefix */
	CHECK_EQ_INT(hb_trace_name_id("alice", 3, &id), HB_OK);
	CHECK_EQ_U64(id, doc_name_id("ali"));
	/* refused: empty, longer than the bound, a control byte */
	memset(longest, 'x', sizeof(longest));
	CHECK_EQ_INT(hb_trace_name_id(longest, HB_TRACE_NAME_MAX, &id), HB_OK);
	CHECK_EQ_INT(hb_trace_name_id(longest, HB_TRACE_NAME_MAX + 1, &id), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_trace_name_id("", 0, &id), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_trace_name_id("a\tb", 3, &id), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_trace_name_id("a\x7f", 2, &id), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_trace_name_id("a\0b", 3, &id), HB_ERR_INVALID);
}

static void transcripts_take_names(void)
{
	static const char text[] =
		"{\"owner\":\"" UUID_A "\",\"thread\":\"alice\",\"turn\":0,\"tokens\":[1,2,3]}\n"
		"{\"owner\":\"" UUID_A "\",\"thread\":\"alice\",\"turn\":1,\"tokens\":[4]}\n"
		"{\"owner\":\"" UUID_B "\",\"thread\":\"bob\",\"turn\":0,\"tokens\":[5,6]}\n"
		"{\"owner\":5,\"thread\":\"5\",\"turn\":0,\"tokens\":[7]}\n"
		"{\"owner\":\"5\",\"thread\":5,\"turn\":1,\"tokens\":[8]}\n"
		"{\"owner\":\"007\",\"thread\":9,\"turn\":0,\"tokens\":[9]}\n";
	struct hb_transcripts ts, again;
	struct hb_error err;
	char *line, *all = NULL;
	size_t len = 0;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_transcripts_parse(text, strlen(text), "n.jsonl", &ts, &err), HB_OK);
	CHECK_EQ_U64(ts.n, 6);
	if (ts.n != 6)
		return;
	CHECK_EQ_U64(ts.t[0].owner, doc_name_id(UUID_A));
	CHECK_EQ_U64(ts.t[0].thread, doc_name_id("alice"));
	CHECK_STR(ts.t[0].owner_name, UUID_A);
	CHECK_STR(ts.t[0].thread_name, "alice");
	CHECK_EQ_U64(ts.t[2].owner, doc_name_id(UUID_B));
	/* "5" and 5 are one owner and one thread: a canonical integer is its own id */
	CHECK_EQ_U64(ts.t[3].owner, 5);
	CHECK(ts.t[3].owner_name == NULL);
	CHECK_EQ_U64(ts.t[3].thread, 5);
	CHECK_STR(ts.t[3].thread_name, "5");
	CHECK_EQ_U64(ts.t[4].owner, 5);
	/* "007" is a name, not 7 */
	CHECK_EQ_U64(ts.t[5].owner, doc_name_id("007"));
	/* a name renders back as given, and parses to the same ids */
	line = hb_transcript_render(&ts.t[0]);
	CHECK_STR(line, "{\"owner\":\"" UUID_A "\",\"thread\":\"alice\",\"turn\":0,\"sequence\":0,\"tokens\":[1,2,3]}");
	free(line);
	for (size_t i = 0; i < ts.n; i++) {
		char *l = hb_transcript_render(&ts.t[i]);
		char *g = l ? realloc(all, len + strlen(l) + 2) : NULL;
		if (g) {
			all = g;
			memcpy(all + len, l, strlen(l));
			len += strlen(l);
			all[len++] = '\n';
		}
		free(l);
	}
	CHECK_EQ_INT(hb_transcripts_parse(all, len, "again", &again, &err), HB_OK);
	for (size_t i = 0; i < ts.n && i < again.n; i++) {
		CHECK_EQ_U64(again.t[i].owner, ts.t[i].owner);
		CHECK_EQ_U64(again.t[i].thread, ts.t[i].thread);
	}
	free(all);
	hb_transcripts_release(&again);
	hb_transcripts_release(&ts);
	{
		static const struct {
			const char *text, *id, *field, *msg;
		} bad[] = {
			{"{\"owner\":\"\",\"thread\":2,\"turn\":0,\"tokens\":[4]}", "replay-field", "line[1].owner",
			 "expected an unsigned integer or a name of 1..256 bytes without control characters"},
			{"{\"owner\":1,\"thread\":\"\",\"turn\":0,\"tokens\":[4]}", "replay-field", "line[1].thread", NULL},
			{"{\"owner\":\"a\\tb\",\"thread\":2,\"turn\":0,\"tokens\":[4]}", "replay-field", "line[1].owner", NULL},
			{"{\"owner\":true,\"thread\":2,\"turn\":0,\"tokens\":[4]}", "replay-field", "line[1].owner", NULL},
			{"{\"owner\":-1,\"thread\":2,\"turn\":0,\"tokens\":[4]}", "replay-field", "line[1].owner", NULL},
			{"{\"owner\":[1],\"thread\":2,\"turn\":0,\"tokens\":[4]}", "replay-field", "line[1].owner", NULL},
			/* cJSON would cut "a\u0000b" to "a" without a word */
			{"{\"owner\":\"a\\u0000b\",\"thread\":2,\"turn\":0,\"tokens\":[4]}", "replay-field", "line[1]",
			 "a string holds U+0000, which no name or role may"},
		};
		for (size_t i = 0; i < HB_ARRAY_LEN(bad); i++) {
			hb_error_clear(&err);
			CHECK_EQ_INT(hb_transcripts_parse(bad[i].text, strlen(bad[i].text), "x", &ts, &err), HB_ERR_FORMAT);
			CHECK_STR(err.id, bad[i].id);
			CHECK_STR(err.field, bad[i].field);
			if (bad[i].msg)
				CHECK_STR(err.msg, bad[i].msg);
		}
	}
	{
		/* an escaped backslash before u0000 is text, not a NUL */
		static const char ok[] = "{\"owner\":\"a\\\\u0000b\",\"thread\":2,\"turn\":0,\"tokens\":[4]}";
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_transcripts_parse(ok, strlen(ok), "x", &ts, &err), HB_OK);
		CHECK_STR(ts.n ? ts.t[0].owner_name : NULL, "a\\u0000b");
		hb_transcripts_release(&ts);
	}
	{
		/* a named thread under two owners, named in the message */
		static const char two[] = "{\"owner\":\"" UUID_A "\",\"thread\":\"alice\",\"turn\":0,\"tokens\":[4]}\n"
					  "{\"owner\":\"" UUID_B "\",\"thread\":\"alice\",\"turn\":0,\"tokens\":[4]}\n";
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_transcripts_parse(two, strlen(two), "x", &ts, &err), HB_ERR_CONTRACT);
		CHECK_STR(err.id, "replay-thread");
		CHECK_STR(err.field, "line[2].owner");
		CHECK_STR(err.msg, "thread \"alice\" belongs to owner \"" UUID_A "\" on line 1, not \"" UUID_B "\"");
	}
}

/* The seam makes every name hash alike, so two names share one id. */
static uint64_t colliding_hash(const char *text, size_t len)
{
	return 42;
}

static void colliding_names_are_refused(void)
{
	static const char owners[] = "{\"owner\":\"alice\",\"thread\":1,\"turn\":0,\"tokens\":[4]}\n"
				     "{\"owner\":\"alice\",\"thread\":2,\"turn\":0,\"tokens\":[4]}\n"
				     "{\"owner\":\"bob\",\"thread\":3,\"turn\":0,\"tokens\":[4]}\n";
	static const char threads[] = "{\"owner\":1,\"thread\":\"t1\",\"turn\":0,\"tokens\":[4]}\n"
				      "{\"owner\":1,\"thread\":\"t2\",\"turn\":0,\"tokens\":[4]}\n";
	static const char fine[] = "{\"owner\":\"alice\",\"thread\":\"t1\",\"turn\":0,\"tokens\":[4]}\n"
				   "{\"owner\":\"alice\",\"thread\":\"t1\",\"turn\":1,\"tokens\":[4]}\n"
				   "{\"owner\":42,\"thread\":42,\"turn\":0,\"tokens\":[4]}\n";
	struct hb_transcripts ts;
	struct hb_error err;
	uint64_t a, b;

	hb_trace_name_hash_seam(colliding_hash);
	CHECK_EQ_INT(hb_trace_name_id("alice", 5, &a), HB_OK);
	CHECK_EQ_INT(hb_trace_name_id("bob", 3, &b), HB_OK);
	CHECK_EQ_U64(a, b);
	CHECK_EQ_U64(a, (UINT64_C(1) << 63) | 42);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_transcripts_parse(owners, strlen(owners), "x", &ts, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "replay-collision");
	CHECK_STR(err.field, "line[3].owner");
	CHECK_STR(err.msg, "owner \"bob\" and owner \"alice\" of line 2 map to one id, 9223372036854775850");
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_transcripts_parse(threads, strlen(threads), "x", &ts, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "replay-collision");
	CHECK_STR(err.field, "line[2].thread");
	/* one name many times, an integer beside names: no collision (a name's
	 * id has bit 63, an integer's never) */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_transcripts_parse(fine, strlen(fine), "x", &ts, &err), HB_OK);
	hb_transcripts_release(&ts);
	hb_trace_name_hash_seam(NULL);
	CHECK_EQ_INT(hb_trace_name_id("alice", 5, &a), HB_OK);
	CHECK_EQ_U64(a, doc_name_id("alice"));
	/* with the real hash the same transcripts are fine */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_transcripts_parse(owners, strlen(owners), "x", &ts, &err), HB_OK);
	hb_transcripts_release(&ts);
}

/* A decode trace of transcript t as the fake engine routes it. */
static void write_decode(const char *path, const struct hb_transcript *t, uint64_t owner, bool has_thread,
			 uint64_t thread)
{
	struct hb_trace_header h;
	struct hb_trace_writer *w = NULL;
	struct hb_error err;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	memset(&h, 0, sizeof(h));
	h.top_k = TOPK;
	h.layers = LAYERS;
	h.experts = EXPERTS;
	memset(h.artifact, 0xab, 32);
	h.owner = owner;
	h.has_thread = has_thread;
	h.thread = thread;
	hb_error_clear(&err);
	CHECK(fd >= 0);
	CHECK_EQ_INT(hb_trace_writer_open(&w, fd, path, &h, 64, &err), HB_OK);
	for (uint64_t p = 0; w && p < t->n_tokens; p++)
		for (uint32_t l = 0; l < LAYERS; l++) {
			struct hb_route r;
			uint64_t hh = mix(prefix_state(t, p) + l);
			memset(&r, 0, sizeof(r));
			r.sequence = t->sequence;
			r.ordinal = p;
			r.layer = l;
			for (uint32_t k = 0; k < TOPK; k++) {
				r.ids[k] = (uint32_t)((hh >> (8 * k)) % (EXPERTS / TOPK) + k * (EXPERTS / TOPK));
				r.weights[k] = 1.0f / (float)(k + 2);
			}
			CHECK_EQ_INT(hb_trace_write(w, &r, &err), HB_OK);
		}
	CHECK_EQ_INT(hb_trace_writer_close(w, &err), HB_OK);
	close(fd);
}

/* Labels of named owners and threads: the manifest keeps the names beside
 * their ids, which it must agree with; parity checks a capture's owner
 * and thread ids against them. */
static void named_labels_keep_names_and_check_threads(void)
{
	static const char text[] =
		"{\"owner\":\"" UUID_A "\",\"thread\":\"alice\",\"turn\":0,\"tokens\":[1,2,3,4,5,6]}\n"
		"{\"owner\":\"" UUID_A "\",\"thread\":\"carol\",\"turn\":0,\"tokens\":[7,8]}\n"
		"{\"owner\":\"" UUID_B "\",\"thread\":\"bob\",\"turn\":0,\"tokens\":[9,9,9]}\n";
	struct hb_transcripts ts;
	struct hb_replay_engine e;
	struct hb_label_config c;
	struct hb_label_stats st;
	struct hb_parity_stats ps;
	struct hb_merge_stats ms;
	struct hb_error err;
	struct fake f = {0};
	const char *labels[] = {"N"}, *dirs[] = {"N"}, *traces[] = {"n.trace"};
	char *man = NULL, *report = NULL, want[512];
	size_t ml = 0;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_transcripts_parse(text, strlen(text), "n.jsonl", &ts, &err), HB_OK);
	if (ts.n != 3)
		return;
	engine(&e, &f);
	config(&c, "N", 0, 1, 1 << 20, 4);
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_OK);
	CHECK_EQ_U64(st.shards_written, 2); /* one per owner, threads together */
	CHECK_EQ_INT(hb_read_file("N/labels-0000-of-0001-000000.json", 1 << 20, &man, &ml, NULL), HB_OK);
	/* ids past 2^53 are decimal strings (hb_json), the names beside them */
	snprintf(want, sizeof(want), "\"owner\":\t\"%" PRIu64 "\",\n\t\"owner_name\":\t\"" UUID_A "\"",
		 doc_name_id(UUID_A));
	CHECK(man && strstr(man, want));
	snprintf(want, sizeof(want), "\"thread\":\t\"%" PRIu64 "\",\n\t\t\t\"thread_name\":\t\"carol\"",
		 doc_name_id("carol"));
	CHECK(man && strstr(man, want));
	/* resume reads them back: nothing to do */
	CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_OK);
	CHECK_EQ_U64(st.shards_kept, 2);
	CHECK_EQ_INT(hb_merge_run(dirs, 1, &ts, &report, &ms, &err), HB_OK);
	free(report);

	/* parity: owner and thread of the capture are those of the transcript */
	write_decode("n.trace", &ts.t[1], ts.t[1].owner, true, ts.t[1].thread);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_parity_run(labels, 1, traces, 1, 0, &ps, &err), HB_OK);
	CHECK_EQ_U64(ps.checked, 2 * LAYERS);
	/* without a thread in the trace, only owner and generation are checked */
	write_decode("n.trace", &ts.t[1], ts.t[1].owner, false, 0);
	CHECK_EQ_INT(hb_parity_run(labels, 1, traces, 1, 0, &ps, &err), HB_OK);
	/* another thread of the same owner fails at the first record */
	write_decode("n.trace", &ts.t[1], ts.t[1].owner, true, ts.t[0].thread);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_parity_run(labels, 1, traces, 1, 0, &ps, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "replay-owner");
	snprintf(want, sizeof(want),
		 "record 0: sequence 1: thread %" PRIu64 ", label shard N/labels-0000-of-0001-000000.hbtrace has thread %" PRIu64,
		 ts.t[0].thread, ts.t[1].thread);
	CHECK_STR(err.msg, want);
	CHECK_EQ_U64(ps.failures, 2 * LAYERS);
	/* another owner: refused as before */
	write_decode("n.trace", &ts.t[1], ts.t[2].owner, true, ts.t[1].thread);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_parity_run(labels, 1, traces, 1, 0, &ps, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "replay-owner");
	CHECK(strstr(err.msg, "record 0: sequence 1: owner ") == err.msg);
	/* a label shard without its manifest cannot say the thread: refused */
	CHECK_EQ_INT(rename("N/labels-0000-of-0001-000000.json", "N0.json"), 0);
	write_decode("n.trace", &ts.t[1], ts.t[1].owner, true, ts.t[1].thread);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_parity_run(labels, 1, traces, 1, 0, &ps, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "replay-owner");
	CHECK(strstr(err.msg, "has no manifest to say its thread"));
	CHECK_EQ_INT(rename("N0.json", "N/labels-0000-of-0001-000000.json"), 0);
	/* a manifest whose name does not map to its id is refused */
	if (man) {
		char *p = strstr(man, "\"carol\"");
		CHECK(p != NULL);
		if (p) {
			p[1] = 'k';
			CHECK_EQ_INT(hb_test_write_file("N/labels-0000-of-0001-000000.json", man, ml), 0);
			hb_error_clear(&err);
			CHECK_EQ_INT(hb_label_run(&ts, &e, &c, &st, &err), HB_ERR_FORMAT);
			CHECK_STR(err.id, "replay-manifest");
			CHECK_STR(err.field, "ranges[1]");
			hb_error_clear(&err);
			CHECK_EQ_INT(hb_parity_run(labels, 1, traces, 1, 0, &ps, &err), HB_ERR_FORMAT);
			CHECK_STR(err.id, "replay-manifest");
		}
	}
	free(man);
	hb_transcripts_release(&ts);
}

static void diag_ids_are_the_table(void)
{
	static const char *const want[] = {"replay-json", "replay-key", "replay-field", "replay-sequence",
					   "replay-thread", "replay-token", "replay-geometry", "replay-identity",
					   "replay-owner", "replay-missing", "replay-mismatch", "replay-weight",
					   "replay-duplicate", "replay-coverage", "replay-manifest", "replay-capture",
					   "replay-collision"};
	CHECK_EQ_U64(HB_RPD_COUNT, HB_ARRAY_LEN(want));
	for (size_t i = 0; i < HB_ARRAY_LEN(want); i++)
		CHECK_STR(hb_replay_diag_id((enum hb_replay_diag)i), want[i]);
	CHECK(hb_replay_diag_id(HB_RPD_COUNT) == NULL);
}

HB_TEST_MAIN(T(shards_stay_under_the_bound_and_cover_everything), T(any_interruption_resumes_to_identical_shards),
	     T(workers_share_the_transcripts), T(parity_names_the_first_difference), T(transcript_schema),
	     T(diag_ids_are_the_table), T(capture_writes_a_bounded_sample), T(capture_resumes_to_identical_files),
	     T(capture_refusals), T(names_map_to_stable_ids), T(transcripts_take_names),
	     T(colliding_names_are_refused), T(named_labels_keep_names_and_check_threads))
