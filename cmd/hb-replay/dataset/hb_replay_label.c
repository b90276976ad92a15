/*
 * hb_replay_label.c: route-label shards from replayed prefill, with resume.
 *
 * Owns the labelling loop (chunked causal prefill through an engine, one
 * sequence at a time), shard cutting at position boundaries under a byte
 * bound, atomic publication of each shard and then of its manifest, and the
 * resume scan.  It does not own the forward pass (struct hb_replay_engine)
 * nor the shard byte layout (hb_trace.h).  Records are buffered one chunk at
 * a time (the observer delivers them layer-major) and written
 * position-major, so a shard can be cut between two positions and a
 * resumed run produces byte-identical shards to an uninterrupted one.
 *
 * --capture-hidden adds a sidecar per shard (the layout is in hb-replay(1)
 * HIDDEN STATES and hb_replay_int.h): only a bounded, deterministic sample
 * of positions per sequence and only the layers asked for, because a full
 * capture is hc x hidden floats per layer and position (64 KiB at hc 4,
 * hidden 4096), hundreds of times a label record (40 + 8 x top-k bytes).  The sidecar of shard k holds exactly the sampled
 * positions whose labels shard k holds, so resume and coverage need no new
 * rule: the pair is committed by the manifest as before.
 */
#include "hb_replay_int.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_publish.h"
#include "hb_sha256.h"

#include <dirent.h>
#include <sys/file.h>
#include <errno.h>
#include <zlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK_RECORDS 4096u

struct range {
	const struct hb_transcript *t;
	uint64_t first, end;
};

struct shard {
	bool open;
	uint64_t index;
	struct hb_publish pub;
	struct hb_trace_writer *w;
	uint64_t records;
	uint64_t owner;
	const char *owner_name;            /* the transcript's, or NULL */
	uint32_t generation;
	struct range *ranges;
	size_t n_ranges, cap_ranges;
	/* filled by the verify pass */
	uint8_t sha[32];
	uint64_t bytes;
	/* the hidden-state sidecar (capture only) */
	bool hopen;
	struct hb_publish hpub;
	uint64_t hsamples, hbytes;
	uint8_t hsha[32];
};

struct labeller {
	const struct hb_replay_engine *e;
	const struct hb_label_config *cfg;
	struct hb_label_stats *st;
	uint32_t rb;
	struct shard sh;
	/* the chunk being labelled */
	uint64_t chunk_first;
	size_t chunk_n;
	uint32_t *ids;
	float *weights;
	uint8_t *seen;
	int emit_rc;
	/* capture: sorted layers, layer -> slot (-1: not captured), the chunk's
	 * sampled states [sample - first_sample][slot][width] */
	uint32_t *cap;
	size_t n_cap;
	int32_t *slot;
	uint64_t width, P, seq_n, first_sample, chunk_samples;
	float *hbuf;
	uint8_t *hseen;
};

uint64_t hb_replay_shard_bytes(uint64_t records, uint32_t record_bytes)
{
	uint64_t chunks = (records + CHUNK_RECORDS - 1) / CHUNK_RECORDS;
	return HB_TRACE_HEADER_BYTES + chunks * HB_TRACE_CHUNK_HEADER_BYTES + records * record_bytes;
}

uint64_t hb_replay_hidden_bytes(uint64_t samples, size_t n_layers, uint64_t width)
{
	return HB_REPLAY_HIDDEN_FIXED + 4 * (uint64_t)n_layers + 4 +
	       samples * (HB_REPLAY_HIDDEN_SAMPLE_HEAD + (uint64_t)n_layers * width * 4);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Is pos one of the P sampled positions of a sequence of n tokens, and
 * which (*idx)?  Samples are floor(i x n / P), i < P: evenly spread, the
 * first position always among them, every position when n <= P.  The
 * products stay below 2^64: n is a token count held in memory and P is at
 * most 2^20. */
static bool sampled(uint64_t n, uint64_t P, uint64_t pos, uint64_t *idx)
{
	uint64_t i;

	if (n <= P) {
		*idx = pos;
		return pos < n;
	}
	i = (pos * P + n - 1) / n;
	*idx = i;
	return i < P && i * n / P == pos;
}

void hb_replay_shard_name(char *buf, size_t len, const struct hb_label_config *c, uint64_t k, const char *ext)
{
	snprintf(buf, len, "%s/labels-%04" PRIu32 "-of-%04" PRIu32 "-%06" PRIu64 "%s", c->outdir, c->shard_index,
		 c->shard_count, k, ext);
}

/* ------------------------------------------------------------ publication */

struct verify_ctx {
	struct shard *sh;
	uint32_t rb;
};

static int verify_shard(int fd, void *vctx, struct hb_error *err)
{
	struct verify_ctx *v = vctx;
	struct hb_sha256 h;
	uint8_t buf[1 << 16];
	uint64_t size, off = 0;
	int rc;

	if ((rc = hb_file_size(fd, &size, "shard", err)))
		return rc;
	if (size != hb_replay_shard_bytes(v->sh->records, v->rb))
		return hb_error_set(err, HB_ERR_INTERNAL, "shard", "wrote %" PRIu64 " bytes, expected %" PRIu64, size,
				    hb_replay_shard_bytes(v->sh->records, v->rb));
	hb_sha256_init(&h);
	while (off < size) {
		size_t n = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
		if ((rc = hb_pread_full(fd, buf, n, off, "shard", err)))
			return rc;
		hb_sha256_update(&h, buf, n);
		off += n;
	}
	hb_sha256_final(&h, v->sh->sha);
	v->sh->bytes = size;
	return HB_OK;
}

struct verify_hidden_ctx {
	struct shard *sh;
	uint64_t want;
};

static int verify_hidden(int fd, void *vctx, struct hb_error *err)
{
	struct verify_hidden_ctx *v = vctx;
	struct hb_sha256 h;
	uint8_t buf[1 << 16];
	uint64_t size, off = 0;
	int rc;

	if ((rc = hb_file_size(fd, &size, "hidden", err)))
		return rc;
	if (size != v->want)
		return hb_error_set(err, HB_ERR_INTERNAL, "hidden", "wrote %" PRIu64 " bytes, expected %" PRIu64, size,
				    v->want);
	hb_sha256_init(&h);
	while (off < size) {
		size_t n = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
		if ((rc = hb_pread_full(fd, buf, n, off, "hidden", err)))
			return rc;
		hb_sha256_update(&h, buf, n);
		off += n;
	}
	hb_sha256_final(&h, v->sh->hsha);
	v->sh->hbytes = size;
	return HB_OK;
}

/* The sidecar header: fixed part, layer table, CRC-32 of both. */
static size_t hidden_header(const struct labeller *L, uint64_t samples, uint8_t *out)
{
	size_t n = HB_REPLAY_HIDDEN_FIXED + 4 * L->n_cap;

	memset(out, 0, n + 4);
	memcpy(out, HB_REPLAY_HIDDEN_MAGIC, 8);
	put32(out + 8, (uint32_t)L->n_cap);
	put32(out + 12, L->e->hc);
	put32(out + 16, L->e->hidden);
	put32(out + 20, L->e->layers);
	put64(out + 24, samples);
	put64(out + 32, L->P);
	/* 40..47 reserved, zero */
	for (size_t i = 0; i < L->n_cap; i++)
		put32(out + HB_REPLAY_HIDDEN_FIXED + 4 * i, L->cap[i]);
	put32(out + n, (uint32_t)crc32(crc32(0L, Z_NULL, 0), out, (uInt)n));
	return n + 4;
}

static int write_manifest(struct labeller *L, struct hb_error *err)
{
	const struct hb_replay_engine *e = L->e;
	struct shard *sh = &L->sh;
	char name[4096], hex[65];
	cJSON *o = cJSON_CreateObject(), *a, *w;
	struct hb_publish p;
	char *text = NULL;
	size_t len = 0;
	int rc;

	if (!o)
		return hb_error_set(err, HB_ERR_NOMEM, "manifest", "out of memory");
	hb_json_add_str(o, "format", HB_REPLAY_MANIFEST_FORMAT);
	w = cJSON_AddArrayToObject(o, "worker");
	cJSON_AddItemToArray(w, cJSON_CreateNumber(L->cfg->shard_index));
	cJSON_AddItemToArray(w, cJSON_CreateNumber(L->cfg->shard_count));
	hb_json_add_u64(o, "shard", sh->index);
	hb_hex_encode(e->artifact, 32, hex);
	hb_json_add_str(o, "artifact", hex);
	hb_hex_encode(L->cfg->text, 32, hex);
	hb_json_add_str(o, "text", hex);
	hb_json_add_u64(o, "owner", sh->owner);
	if (sh->owner_name)
		hb_json_add_str(o, "owner_name", sh->owner_name);
	hb_json_add_u64(o, "generation", sh->generation);
	hb_json_add_u64(o, "top_k", e->top_k);
	hb_json_add_u64(o, "layers", e->layers);
	hb_json_add_u64(o, "experts", e->experts);
	hb_json_add_u64(o, "max_shard_bytes", L->cfg->max_shard_bytes);
	hb_json_add_u64(o, "bytes", sh->bytes);
	hb_hex_encode(sh->sha, 32, hex);
	hb_json_add_str(o, "sha256", hex);
	hb_json_add_u64(o, "records", sh->records);
	a = cJSON_AddArrayToObject(o, "ranges");
	for (size_t i = 0; a && i < sh->n_ranges; i++) {
		const struct range *r = &sh->ranges[i];
		cJSON *x = cJSON_CreateObject();
		uint8_t d[32];
		hb_json_add_u64(x, "sequence", r->t->sequence);
		hb_json_add_u64(x, "owner", r->t->owner);
		if (r->t->owner_name)
			hb_json_add_str(x, "owner_name", r->t->owner_name);
		hb_json_add_u64(x, "thread", r->t->thread);
		if (r->t->thread_name)
			hb_json_add_str(x, "thread_name", r->t->thread_name);
		hb_json_add_u64(x, "turn", r->t->turn);
		hb_json_add_u64(x, "first", r->first);
		hb_json_add_u64(x, "end", r->end);
		hb_json_add_u64(x, "length", r->t->n_tokens);
		hb_transcript_token_digest(r->t, d);
		hb_hex_encode(d, 32, hex);
		hb_json_add_str(x, "tokens_sha256", hex);
		if (L->n_cap) {
			cJSON *hp = cJSON_AddArrayToObject(x, "hidden_positions");
			uint64_t idx;
			for (uint64_t q = r->first; hp && q < r->end; q++)
				if (sampled(r->t->n_tokens, L->P, q, &idx))
					cJSON_AddItemToArray(hp, cJSON_CreateNumber((double)q));
		}
		cJSON_AddItemToArray(a, x);
	}
	if (L->n_cap) {
		cJSON *h = cJSON_AddObjectToObject(o, "hidden"), *la;
		const char *base;
		hb_replay_shard_name(name, sizeof(name), L->cfg, sh->index, ".hbhidden");
		base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
		hb_json_add_str(h, "format", HB_REPLAY_HIDDEN_FORMAT);
		hb_json_add_str(h, "file", base);
		la = cJSON_AddArrayToObject(h, "layers");
		for (size_t i = 0; la && i < L->n_cap; i++)
			cJSON_AddItemToArray(la, cJSON_CreateNumber(L->cap[i]));
		hb_json_add_u64(h, "positions_per_sequence", L->P);
		hb_json_add_u64(h, "hc", e->hc);
		hb_json_add_u64(h, "width", L->width);
		hb_json_add_u64(h, "samples", sh->hsamples);
		hb_json_add_u64(h, "bytes", sh->hbytes);
		hb_hex_encode(sh->hsha, 32, hex);
		hb_json_add_str(h, "sha256", hex);
	}
	rc = hb_json_render(o, true, &text, &len, err);
	cJSON_Delete(o);
	if (rc)
		return rc;
	hb_replay_shard_name(name, sizeof(name), L->cfg, sh->index, ".json");
	if (!(rc = hb_publish_begin(&p, name, 0, err))) {
		if ((rc = hb_publish_write(&p, text, len, err)) || (rc = hb_publish_commit(&p, NULL, NULL, err)))
			hb_publish_abort(&p);
	}
	free(text);
	return rc;
}

static int shard_open(struct labeller *L, const struct hb_transcript *t, struct hb_error *err)
{
	struct shard *sh = &L->sh;
	struct hb_trace_header h;
	char name[4096];
	int rc;

	memset(&h, 0, sizeof(h));
	h.top_k = L->e->top_k;
	h.layers = L->e->layers;
	h.experts = L->e->experts;
	memcpy(h.artifact, L->e->artifact, 32);
	memcpy(h.text, L->cfg->text, 32);
	h.owner = t->owner;
	h.generation = t->generation;
	hb_replay_shard_name(name, sizeof(name), L->cfg, sh->index, ".hbtrace");
	if ((rc = hb_publish_begin(&sh->pub, name, 0, err)))
		return rc;
	if ((rc = hb_trace_writer_open(&sh->w, sh->pub.fd, name, &h, CHUNK_RECORDS, err))) {
		hb_publish_abort(&sh->pub);
		return rc;
	}
	sh->open = true;
	sh->records = 0;
	sh->n_ranges = 0;
	sh->hsamples = 0;
	if (L->n_cap) {
		uint8_t head[HB_REPLAY_HIDDEN_FIXED + 4 * 1024 + 4];
		size_t n = hidden_header(L, 0, head);
		hb_replay_shard_name(name, sizeof(name), L->cfg, sh->index, ".hbhidden");
		if ((rc = hb_publish_begin(&sh->hpub, name, 0, err)))
			return rc;
		sh->hopen = true;
		if ((rc = hb_publish_write(&sh->hpub, head, n, err)))
			return rc;
	}
	sh->owner = t->owner;
	sh->owner_name = t->owner_name;
	sh->generation = t->generation;
	return HB_OK;
}

static void shard_abort(struct shard *sh)
{
	if (sh->hopen) {
		hb_publish_abort(&sh->hpub);
		sh->hopen = false;
	}
	if (!sh->open)
		return;
	if (sh->w) {
		struct hb_error ignored;
		hb_trace_writer_close(sh->w, &ignored);
		sh->w = NULL;
	}
	hb_publish_abort(&sh->pub);
	sh->open = false;
}

static int shard_finish(struct labeller *L, struct hb_error *err)
{
	struct shard *sh = &L->sh;
	struct verify_ctx v = {sh, L->rb};
	int rc;

	rc = hb_trace_writer_close(sh->w, err);
	sh->w = NULL;
	if (rc) {
		shard_abort(sh);
		return rc;
	}
	if ((rc = hb_publish_commit(&sh->pub, verify_shard, &v, err))) {
		shard_abort(sh);
		return rc;
	}
	sh->open = false;
	if (sh->hopen) {
		/* the count is known now; the sidecar follows its shard, and
		 * both precede the manifest that commits them */
		uint8_t head[HB_REPLAY_HIDDEN_FIXED + 4 * 1024 + 4];
		size_t n = hidden_header(L, sh->hsamples, head);
		struct verify_hidden_ctx hv = {sh, hb_replay_hidden_bytes(sh->hsamples, L->n_cap, L->width)};
		if ((rc = hb_publish_pwrite(&sh->hpub, head, n, 0, err)) ||
		    (rc = hb_publish_commit(&sh->hpub, verify_hidden, &hv, err))) {
			shard_abort(sh);
			return rc;
		}
		sh->hopen = false;
	}
	/* the manifest is the commit marker of the pair: a shard without one
	 * is partial and a resumed run discards it */
	if ((rc = write_manifest(L, err)))
		return rc;
	L->st->shards_written++;
	sh->index++;
	return HB_OK;
}

/* Write position pos of t (its L layers, from the chunk buffer). */
static int put_position(struct labeller *L, const struct hb_transcript *t, uint64_t pos, struct hb_error *err)
{
	struct shard *sh = &L->sh;
	uint32_t layers = L->e->layers, k = L->e->top_k;
	size_t row = (size_t)(pos - L->chunk_first) * layers;
	uint64_t idx = 0;
	bool sample = L->n_cap && sampled(t->n_tokens, L->P, pos, &idx);
	int rc;

	if (sh->open && (sh->owner != t->owner || sh->generation != t->generation ||
			 hb_replay_shard_bytes(sh->records + layers, L->rb) > L->cfg->max_shard_bytes ||
			 (sample && hb_replay_hidden_bytes(sh->hsamples + 1, L->n_cap, L->width) >
					    L->cfg->max_shard_bytes)))
		if ((rc = shard_finish(L, err)))
			return rc;
	if (!sh->open && (rc = shard_open(L, t, err)))
		return rc;
	if (sh->n_ranges && sh->ranges[sh->n_ranges - 1].t == t && sh->ranges[sh->n_ranges - 1].end == pos) {
		sh->ranges[sh->n_ranges - 1].end++;
	} else {
		if (sh->n_ranges == sh->cap_ranges) {
			size_t cap = sh->cap_ranges ? 2 * sh->cap_ranges : 16;
			struct range *g = realloc(sh->ranges, cap * sizeof(*g));
			if (!g)
				return hb_error_set(err, HB_ERR_NOMEM, "labels", "out of memory");
			sh->ranges = g;
			sh->cap_ranges = cap;
		}
		sh->ranges[sh->n_ranges++] = (struct range){t, pos, pos + 1};
	}
	for (uint32_t l = 0; l < layers; l++) {
		struct hb_route r;
		memset(&r, 0, sizeof(r));
		r.sequence = t->sequence;
		r.ordinal = pos;
		r.layer = l;
		r.candidate = -1;
		r.accepted = -1;
		memcpy(r.ids, L->ids + (row + l) * k, k * sizeof(uint32_t));
		memcpy(r.weights, L->weights + (row + l) * k, k * sizeof(float));
		if ((rc = hb_trace_write(sh->w, &r, err)))
			return rc;
	}
	sh->records += layers;
	L->st->records += layers;
	L->st->positions++;
	if (sample) {
		const float *src = L->hbuf + (size_t)(idx - L->first_sample) * L->n_cap * L->width;
		size_t nf = L->n_cap * (size_t)L->width;
		uint8_t head[HB_REPLAY_HIDDEN_SAMPLE_HEAD], buf[4096];
		uLong c;
		memset(head, 0, sizeof(head));
		put64(head, t->sequence);
		put64(head + 8, pos);
		c = crc32(crc32(0L, Z_NULL, 0), head, 16);
		/* CRC first (it sits before the payload), then write */
		for (size_t i = 0; i < nf; i += sizeof(buf) / 4) {
			size_t m = nf - i < sizeof(buf) / 4 ? nf - i : sizeof(buf) / 4;
			for (size_t j = 0; j < m; j++) {
				uint32_t u;
				memcpy(&u, src + i + j, 4);
				put32(buf + 4 * j, u);
			}
			c = crc32(c, buf, (uInt)(4 * m));
		}
		put32(head + 16, (uint32_t)c);
		if ((rc = hb_publish_write(&sh->hpub, head, sizeof(head), err)))
			return rc;
		for (size_t i = 0; i < nf; i += sizeof(buf) / 4) {
			size_t m = nf - i < sizeof(buf) / 4 ? nf - i : sizeof(buf) / 4;
			for (size_t j = 0; j < m; j++) {
				uint32_t u;
				memcpy(&u, src + i + j, 4);
				put32(buf + 4 * j, u);
			}
			if ((rc = hb_publish_write(&sh->hpub, buf, 4 * m, err)))
				return rc;
		}
		sh->hsamples++;
		L->st->hidden_samples++;
	}
	return HB_OK;
}

static int on_route(void *ctx, uint32_t layer, uint64_t pos, const int32_t *ids, const float *weights, size_t k)
{
	struct labeller *L = ctx;
	size_t at;

	if (L->emit_rc)
		return L->emit_rc;
	if (layer >= L->e->layers || pos < L->chunk_first || pos - L->chunk_first >= L->chunk_n ||
	    k != L->e->top_k)
		return L->emit_rc = HB_ERR_INTERNAL;
	at = (size_t)(pos - L->chunk_first) * L->e->layers + layer;
	if (L->seen[at])
		return L->emit_rc = HB_ERR_INTERNAL;
	L->seen[at] = 1;
	for (size_t i = 0; i < k; i++)
		L->ids[at * k + i] = (uint32_t)ids[i];
	memcpy(L->weights + at * k, weights, k * sizeof(float));
	return 0;
}

static int on_hidden(void *ctx, uint32_t layer, uint64_t pos, const float *state, size_t n)
{
	struct labeller *L = ctx;
	uint64_t idx;
	size_t at;

	if (L->emit_rc)
		return L->emit_rc;
	if (layer >= L->e->layers || pos < L->chunk_first || pos - L->chunk_first >= L->chunk_n || n != L->width)
		return L->emit_rc = HB_ERR_INTERNAL;
	if (L->slot[layer] < 0 || !sampled(L->seq_n, L->P, pos, &idx))
		return 0;
	if (idx < L->first_sample || idx - L->first_sample >= L->chunk_samples)
		return L->emit_rc = HB_ERR_INTERNAL;
	at = (size_t)(idx - L->first_sample) * L->n_cap + (size_t)L->slot[layer];
	if (L->hseen[at])
		return L->emit_rc = HB_ERR_INTERNAL;
	L->hseen[at] = 1;
	memcpy(L->hbuf + at * L->width, state, n * sizeof(float));
	return 0;
}

/* The samples of the chunk [first, first + n) of a sequence of L->seq_n
 * tokens: indices [*first_sample, *first_sample + *count). */
static void chunk_samples(const struct labeller *L, uint64_t first, uint64_t n, uint64_t *first_sample,
			  uint64_t *count)
{
	uint64_t a = 0, b = 0, i;

	for (uint64_t p = first; p < first + n; p++)
		if (sampled(L->seq_n, L->P, p, &i)) {
			if (!b)
				a = i;
			b++;
		}
	*first_sample = a;
	*count = b;
}

static int label_one(struct labeller *L, const struct hb_transcript *t, uint64_t from, struct hb_error *err)
{
	const struct hb_replay_engine *e = L->e;
	uint64_t pos = 0;
	int rc;

	if (e->sequence && (rc = e->sequence(e->ctx, t, err)))
		return rc;
	if ((rc = e->begin_transcript ? e->begin_transcript(e->ctx, t, err) : e->begin(e->ctx, t->n_tokens, err)))
		return rc;
	L->seq_n = t->n_tokens;
	L->chunk_samples = 0;
	while (pos < t->n_tokens) {
		size_t n = t->n_tokens - pos < L->cfg->chunk_tokens ? (size_t)(t->n_tokens - pos)
								     : (size_t)L->cfg->chunk_tokens;
		L->chunk_first = pos;
		L->chunk_n = n;
		L->emit_rc = 0;
		memset(L->seen, 0, n * e->layers);
		if (L->n_cap) {
			chunk_samples(L, pos, n, &L->first_sample, &L->chunk_samples);
			memset(L->hseen, 0, (size_t)L->chunk_samples * L->n_cap);
			rc = e->forward_hidden(e->ctx, t->tokens + pos, n, on_route, on_hidden, L, err);
		} else {
			rc = e->forward(e->ctx, t->tokens + pos, n, on_route, L, err);
		}
		if (rc)
			return rc;
		if (L->emit_rc)
			return hb_error_set(err, HB_ERR_INTERNAL, "labels", "the engine emitted a route out of place");
		for (size_t i = 0; i < n * e->layers; i++)
			if (!L->seen[i])
				return hb_error_set(err, HB_ERR_INTERNAL, "labels",
						    "the engine left position %" PRIu64 " layer %zu without a route",
						    pos + i / e->layers, i % e->layers);
		for (size_t i = 0; i < L->chunk_samples * L->n_cap; i++)
			if (!L->hseen[i])
				return hb_error_set(err, HB_ERR_INTERNAL, "labels",
						    "the engine left a hidden state of layer %" PRIu32 " out",
						    L->cap[i % L->n_cap]);
		for (size_t i = 0; i < n; i++) {
			if (pos + i < from) {
				L->st->positions_skipped++;
				continue;
			}
			if ((rc = put_position(L, t, pos + i, err)))
				return rc;
		}
		pos += n;
	}
	L->st->sequences++;
	return HB_OK;
}

/* ------------------------------------------------------------ resume */

/*
 * One labeller per (directory, shard I/N) at a time: an flock(2) on
 * OUTDIR/.labels-IIII-of-NNNN.lock, held for the whole run and the file
 * removed at its end.  A second instance (a requeued task that overlaps the
 * first, a resume started by hand) is refused as busy before it touches
 * anything; without it, its stray sweep and its discard of the partial
 * shard would delete the running instance's files.  A lock file left by a
 * killed run is unlocked and simply taken.  Taking a lock whose file is being
 * removed is caught by comparing the locked inode with the path's.
 */
static int slot_lock(const struct hb_label_config *c, int *fd_out, char *path, size_t path_len,
		     struct hb_error *err)
{
	snprintf(path, path_len, "%s/.labels-%04" PRIu32 "-of-%04" PRIu32 ".lock", c->outdir, c->shard_index,
		 c->shard_count);
	*fd_out = -1;
	for (int tries = 0; tries < 16; tries++) {
		struct stat a, b;
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666), e;

		if (fd < 0)
			return hb_error_sys(err, errno, path, "cannot create the shard lock");
		if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
			e = errno;
			close(fd);
			if (e == EWOULDBLOCK)
				return hb_error_set(err, HB_ERR_BUSY, c->outdir,
						    "another hb-replay label is writing shard %" PRIu32 "/%" PRIu32
						    " here (%s is locked)",
						    c->shard_index, c->shard_count, path);
			if (e == EOPNOTSUPP || e == ENOLCK || e == EINVAL || e == ENOSYS)
				return HB_OK; /* no flock on this file system: unguarded */
			return hb_error_sys(err, e, path, "cannot lock the shard lock");
		}
		if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
			*fd_out = fd;
			return HB_OK;
		}
		close(fd); /* locked a file just removed by its owner: again */
	}
	return hb_error_set(err, HB_ERR_BUSY, c->outdir, "the shard lock %s keeps changing", path);
}

static void slot_unlock(int fd, const char *path)
{
	if (fd < 0)
		return;
	unlink(path); /* while still held: a waiter that opened it sees the inode change */
	close(fd);
}

static int remove_strays(const struct hb_label_config *c, struct hb_error *err)
{
	char prefix[64], path[4096];
	DIR *d = opendir(c->outdir);
	struct dirent *de;

	if (!d)
		return hb_error_sys(err, errno, c->outdir, "cannot list the output directory");
	snprintf(prefix, sizeof(prefix), ".labels-%04" PRIu32 "-of-%04" PRIu32 "-", c->shard_index, c->shard_count);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, prefix, strlen(prefix)) && strstr(de->d_name, ".hbtmp.")) {
			snprintf(path, sizeof(path), "%s/%s", c->outdir, de->d_name);
			unlink(path);
		}
	closedir(d);
	return HB_OK;
}

/* Remove this worker's shards, sidecars and manifests numbered k and later: shard k
 * has no manifest (it is partial), and anything after it was made after a
 * partial shard, so the continuation starts over from k. */
static int discard_from(struct labeller *L, uint64_t k, struct hb_error *err)
{
	const struct hb_label_config *c = L->cfg;
	char prefix[64], path[4096];
	DIR *d = opendir(c->outdir);
	struct dirent *de;
	int rc = HB_OK;

	if (!d)
		return hb_error_sys(err, errno, c->outdir, "cannot list the output directory");
	snprintf(prefix, sizeof(prefix), "labels-%04" PRIu32 "-of-%04" PRIu32 "-", c->shard_index, c->shard_count);
	while ((de = readdir(d)) && !rc) {
		const char *p = de->d_name;
		uint64_t idx = 0;
		size_t digits = 0;
		bool shard;
		if (strncmp(p, prefix, strlen(prefix)))
			continue;
		p += strlen(prefix);
		while (*p >= '0' && *p <= '9' && digits < 12)
			idx = idx * 10 + (uint64_t)(*p++ - '0'), digits++;
		shard = !strcmp(p, ".hbtrace");
		if (digits != 6 || (!shard && strcmp(p, ".json") && strcmp(p, ".hbhidden")) || idx < k)
			continue;
		snprintf(path, sizeof(path), "%s/%s", c->outdir, de->d_name);
		if (unlink(path))
			rc = hb_error_sys(err, errno, path, "cannot remove a partial shard");
		else if (shard)
			L->st->partial_discarded++;
	}
	closedir(d);
	return rc;
}

static bool same_capture(const struct labeller *L, const struct hb_replay_manifest *m)
{
	if (!L->n_cap)
		return !m->has_hidden;
	if (!m->has_hidden || m->n_hidden_layers != L->n_cap || m->hidden_positions != L->P ||
	    m->hidden_hc != L->e->hc || m->hidden_width != L->width)
		return false;
	for (size_t i = 0; i < L->n_cap; i++)
		if (m->hidden_layers[i] != L->cap[i])
			return false;
	return true;
}

/* Check kept shards 0..k-1 and find where the run continues: transcript
 * index *next_t (into the worker's list) and position *next_pos. */
static int resume_scan(struct labeller *L, const struct hb_transcripts *ts, const size_t *list, size_t n_list,
		       size_t *next_t, uint64_t *next_pos, struct hb_error *err)
{
	const struct hb_label_config *c = L->cfg;
	char name[4096], shard[4096];
	uint64_t k = 0, last_seq = 0, last_end = 0;
	uint8_t last_sha[32], d[32];
	bool any = false;
	int rc;

	*next_t = 0;
	*next_pos = 0;
	for (;; k++) {
		struct hb_replay_manifest m;
		hb_replay_shard_name(name, sizeof(name), c, k, ".json");
		hb_replay_shard_name(shard, sizeof(shard), c, k, ".hbtrace");
		if (access(name, F_OK)) {
			/* only a manifest that is not there marks the partial shard;
			 * one that cannot be checked is no reason to delete anything */
			if (errno != ENOENT)
				return hb_error_sys(err, errno, name, "cannot check");
			if ((rc = discard_from(L, k, err)))
				return rc;
			break;
		}
		if ((rc = hb_replay_manifest_load(name, &m, err)))
			return rc;
		rc = hb_replay_manifest_check_shard(&m, shard, err);
		if (!rc && (memcmp(m.artifact, L->e->artifact, 32) || memcmp(m.text, c->text, 32) ||
			    m.top_k != L->e->top_k || m.layers != L->e->layers || m.experts != L->e->experts ||
			    m.max_shard_bytes != c->max_shard_bytes || m.shard != k || !same_capture(L, &m)))
			rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_MANIFEST), HB_ERR_CONTRACT, name, false, 0,
					   "kept shard was made with another artifact, tokenizer digest, shard size "
					   "or hidden capture; remove the output directory or use the same settings");
		if (!rc && m.n_ranges) {
			last_seq = m.ranges[m.n_ranges - 1].sequence;
			last_end = m.ranges[m.n_ranges - 1].end;
			memcpy(last_sha, m.ranges[m.n_ranges - 1].tokens_sha, 32);
			any = true;
		}
		hb_replay_manifest_release(&m);
		if (rc)
			return rc;
		L->st->shards_kept++;
	}
	L->sh.index = k;
	if (!any)
		return HB_OK;
	for (size_t i = 0; i < n_list; i++) {
		const struct hb_transcript *t = &ts->t[list[i]];
		if (t->sequence != last_seq)
			continue;
		hb_transcript_token_digest(t, d);
		if (last_end > t->n_tokens || memcmp(d, last_sha, 32))
			break;
		*next_t = last_end == t->n_tokens ? i + 1 : i;
		*next_pos = last_end == t->n_tokens ? 0 : last_end;
		return HB_OK;
	}
	return hb_error_diag(err, hb_replay_diag_id(HB_RPD_MANIFEST), HB_ERR_CONTRACT, c->outdir, false, 0,
			     "kept shards end in sequence %" PRIu64 " at %" PRIu64
			     ", which this worker's transcripts do not hold with the same tokens",
			     last_seq, last_end);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Check --capture-hidden against the model and allocate the sample
 * buffers; nothing is written before this passes. */
static int capture_setup(struct labeller *L, struct hb_error *err)
{
	const struct hb_replay_engine *e = L->e;
	const struct hb_label_config *c = L->cfg;
	uint64_t bufn;

	if (!e->forward_hidden || !e->hc || !e->hidden)
		return hb_error_set(err, HB_ERR_UNSUPPORTED, "--capture-hidden", "this engine cannot capture hidden states");
	if (c->n_capture > HB_REPLAY_CAPTURE_MAX || !c->capture_positions || c->capture_positions > (1u << 20))
		return hb_error_set(err, HB_ERR_INVALID, "--capture-hidden", "bad capture settings");
	L->width = (uint64_t)e->hc * e->hidden;
	if (L->width > (UINT64_C(1) << 28))
		return hb_error_set(err, HB_ERR_INVALID, "--capture-hidden", "hidden states too wide to capture");
	L->P = c->capture_positions;
	L->cap = malloc(c->n_capture * sizeof(uint32_t));
	L->slot = malloc(e->layers * sizeof(int32_t));
	if (!L->cap || !L->slot)
		return hb_error_set(err, HB_ERR_NOMEM, "labels", "out of memory");
	for (uint32_t l = 0; l < e->layers; l++)
		L->slot[l] = -1;
	for (size_t i = 0; i < c->n_capture; i++) {
		uint32_t l = c->capture[i];
		if (l >= e->layers)
			return hb_error_diag(err, hb_replay_diag_id(HB_RPD_CAPTURE), HB_ERR_INVALID, "--capture-hidden",
					     false, 0, "layer %" PRIu32 " is not below the model's %" PRIu32 " layers", l,
					     e->layers);
		if (L->slot[l] >= 0)
			return hb_error_diag(err, hb_replay_diag_id(HB_RPD_CAPTURE), HB_ERR_INVALID, "--capture-hidden",
					     false, 0, "layer %" PRIu32 " is named twice", l);
		L->slot[l] = 0;
		L->cap[i] = l;
	}
	L->n_cap = c->n_capture;
	qsort(L->cap, L->n_cap, sizeof(uint32_t), cmp_u32);
	for (size_t i = 0; i < L->n_cap; i++)
		L->slot[L->cap[i]] = (int32_t)i;
	if (c->max_shard_bytes < hb_replay_hidden_bytes(1, L->n_cap, L->width))
		return hb_error_set(err, HB_ERR_INVALID, "--max-shard-bytes",
				    "a hidden-state sidecar must hold one sample: at least %" PRIu64 " bytes",
				    hb_replay_hidden_bytes(1, L->n_cap, L->width));
	/* a chunk holds at most min(P, chunk) samples */
	bufn = L->P < c->chunk_tokens ? L->P : c->chunk_tokens;
	L->hbuf = malloc((size_t)bufn * L->n_cap * (size_t)L->width * sizeof(float));
	L->hseen = malloc((size_t)bufn * L->n_cap);
	if (!L->hbuf || !L->hseen)
		return hb_error_set(err, HB_ERR_NOMEM, "labels", "out of memory");
	return HB_OK;
}

/* the engine told the transcripts still to label, in order */
static int plan(const struct hb_replay_engine *e, const struct hb_transcripts *ts, const size_t *list, size_t n,
		uint64_t chunk_tokens, struct hb_error *err)
{
	const struct hb_transcript **order = malloc((n ? n : 1) * sizeof(*order));
	int rc;

	if (!order)
		return hb_error_set(err, HB_ERR_NOMEM, "labels", "out of memory");
	for (size_t i = 0; i < n; i++)
		order[i] = &ts->t[list[i]];
	rc = e->plan(e->ctx, order, n, chunk_tokens, err);
	free(order);
	return rc;
}

int hb_label_run(const struct hb_transcripts *ts, const struct hb_replay_engine *e, const struct hb_label_config *cfg,
		 struct hb_label_stats *st, struct hb_error *err)
{
	struct labeller L;
	size_t *list = NULL, n_list = 0, next_t = 0;
	uint64_t next_pos = 0;
	char lock_path[4200];
	int rc = HB_OK, lock_fd = -1;

	memset(&L, 0, sizeof(L));
	memset(st, 0, sizeof(*st));
	L.e = e;
	L.cfg = cfg;
	L.st = st;
	if (!cfg->shard_count || cfg->shard_index >= cfg->shard_count || !cfg->chunk_tokens || !e->layers ||
	    !e->top_k || e->top_k > HB_TRACE_MAX_TOPK)
		return hb_error_set(err, HB_ERR_INVALID, "labels", "bad shard, chunk or model geometry");
	L.rb = hb_trace_record_bytes(e->top_k);
	if (cfg->max_shard_bytes < hb_replay_shard_bytes(e->layers, L.rb))
		return hb_error_set(err, HB_ERR_INVALID, "--max-shard-bytes",
				    "a shard must hold one position: at least %" PRIu64 " bytes",
				    hb_replay_shard_bytes(e->layers, L.rb));
	if (cfg->n_capture && (rc = capture_setup(&L, err)))
		goto out;
	for (size_t i = 0; i < ts->n; i++)
		for (size_t j = 0; j < ts->t[i].n_tokens; j++)
			if ((uint64_t)ts->t[i].tokens[j] >= e->vocab) {
				char f[64];
				snprintf(f, sizeof(f), "line[%" PRIu64 "].tokens[%zu]", ts->t[i].line, j);
				rc = hb_error_diag(err, hb_replay_diag_id(HB_RPD_TOKEN), HB_ERR_CONTRACT, f, false, 0,
						   "token %" PRId32 " is not below the vocabulary size %" PRIu64,
						   ts->t[i].tokens[j], e->vocab);
				goto out;
			}
	if (mkdir(cfg->outdir, 0777) && errno != EEXIST) {
		rc = hb_error_sys(err, errno, cfg->outdir, "cannot create the output directory");
		goto out;
	}
	list = malloc((ts->n ? ts->n : 1) * sizeof(size_t));
	L.ids = malloc((size_t)cfg->chunk_tokens * e->layers * e->top_k * sizeof(uint32_t));
	L.weights = malloc((size_t)cfg->chunk_tokens * e->layers * e->top_k * sizeof(float));
	L.seen = malloc((size_t)cfg->chunk_tokens * e->layers);
	if (!list || !L.ids || !L.weights || !L.seen) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "labels", "out of memory");
		goto out;
	}
	for (size_t i = 0; i < ts->n; i++)
		if (i % cfg->shard_count == cfg->shard_index)
			list[n_list++] = i;
	if ((rc = slot_lock(cfg, &lock_fd, lock_path, sizeof(lock_path), err)) || (rc = remove_strays(cfg, err)) ||
	    (rc = resume_scan(&L, ts, list, n_list, &next_t, &next_pos, err)))
		goto out;
	if (e->plan && (rc = plan(e, ts, list + next_t, n_list - next_t, cfg->chunk_tokens, err)))
		goto out;
	for (size_t i = next_t; i < n_list; i++) {
		if ((rc = label_one(&L, &ts->t[list[i]], i == next_t ? next_pos : 0, err)))
			goto out;
	}
	if (L.sh.open)
		rc = shard_finish(&L, err);
out:
	shard_abort(&L.sh);
	slot_unlock(lock_fd, lock_path);
	free(L.sh.ranges);
	free(list), free(L.ids), free(L.weights), free(L.seen);
	free(L.cap), free(L.slot), free(L.hbuf), free(L.hseen);
	return rc;
}
