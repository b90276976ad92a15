/*
 * hb-trace/stream.c: stream trace shards (hb-run --stream-trace,
 * hebrus-trace(5) STREAM TRACE): cat (a JSON line a record), stats (per
 * phase totals and per-token distributions), plot (the measured
 * timeline), and the measured model prefetch-sim --stream-trace compares
 * its prediction with.
 */
#include "hb_base.h"
#include "hb_trace_cli.h"
#include "hb_json.h"
#include "hb_publish.h"
#include "hb-trace/analysis/hb_trace_svg.h"
#include "trace/hb_xstrace.h"

#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#define XST_MAX_BYTES (1ull << 32)

bool trace_is_stream(const char *path)
{
	uint8_t m[8];
	int fd;
	ssize_t n;

	if (!strcmp(path, "-") || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, m, sizeof(m));
	close(fd);
	return n == (ssize_t)sizeof(m) && hb_xst_is(m, sizeof(m));
}

static int load(const char *path, uint8_t **buf, size_t *len, struct hb_error *err)
{
	struct stat st;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*buf = NULL, *len = 0;
	if (fd < 0 || fstat(fd, &st)) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return hb_error_sys(err, e, path, "cannot open");
	}
	if ((uint64_t)st.st_size > XST_MAX_BYTES || !(*buf = malloc(st.st_size ? (size_t)st.st_size : 1))) {
		close(fd);
		return hb_error_set(err, HB_ERR_NOMEM, path, "a stream trace of %lld bytes is too large",
				    (long long)st.st_size);
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, *buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			close(fd);
			free(*buf);
			*buf = NULL;
			return hb_error_sys(err, e, path, "cannot read");
		}
		got += (size_t)n;
	}
	close(fd);
	*len = got;
	return HB_OK;
}

/* Read the whole shard through fn. */
static int walk(const struct cli *c, hb_xst_record_fn fn, void *ctx, struct hb_xst_header *h, struct hb_error *err)
{
	uint8_t *buf;
	size_t len;
	int rc;

	if (c->npaths != 1)
		return hb_error_set(err, HB_ERR_INVALID, c->paths[1], "a stream trace is read alone (one TRACE)");
	if ((rc = load(c->paths[0], &buf, &len, err)))
		return rc;
	rc = hb_xst_read(buf, len, c->paths[0], fn, ctx, h, NULL, err);
	free(buf);
	return rc;
}

int trace_stream_walk(const struct cli *c, const char *path, hb_xst_record_fn fn, void *ctx, struct hb_xst_header *h,
		      struct hb_error *err)
{
	struct cli one = *c;
	const char *paths[1] = { path };

	one.paths = paths, one.npaths = 1;
	return walk(&one, fn, ctx, h, err);
}

/* ------------------------------------------------------------ cat */

static int cat_one(void *ctx, const struct hb_xst_header *h, uint64_t index, const struct hb_xst_rec *r)
{
	printf("{\"record\":%" PRIu64 ",\"kind\":\"%s\"", index, hb_xst_kind_name(r->kind));
	for (unsigned f = 0; f < hb_xst_fields(r->kind); f++)
		if (hb_xst_field_signed(r->kind, f))
			printf(",\"%s\":%" PRId64, hb_xst_field_name(r->kind, f), (int64_t)r->v[f]);
		else
			printf(",\"%s\":%" PRIu64, hb_xst_field_name(r->kind, f), r->v[f]);
	printf("}\n");
	return 0;
}

int trace_stream_cat(const struct cli *c, struct hb_error *err)
{
	struct hb_xst_header h;
	return walk(c, cat_one, NULL, &h, err);
}

/* ------------------------------------------------------------ measured model */

static int model_one(void *ctx, const struct hb_xst_header *h, uint64_t index, const struct hb_xst_rec *r)
{
	struct trace_stream_model *m = ctx;

	if (r->kind == HB_XST_TOKEN && r->v[HB_XST_T_PHASE] == 1) {
		if (!m->decode_tokens || r->v[HB_XST_T_TOKEN] < m->first_decode)
			m->first_decode = r->v[HB_XST_T_TOKEN];
		if (!m->decode_tokens || r->v[HB_XST_T_BEGIN] < m->decode_begin)
			m->decode_begin = r->v[HB_XST_T_BEGIN];
		m->decode_tokens += r->v[HB_XST_T_TOKENS];
		m->exposed_ns += r->v[HB_XST_T_EXPOSED];
		m->wall_ns += r->v[HB_XST_T_END] - r->v[HB_XST_T_BEGIN];
		m->wants += r->v[HB_XST_T_WANTS], m->hits += r->v[HB_XST_T_HITS];
		m->misses += r->v[HB_XST_T_MISSES], m->joined += r->v[HB_XST_T_JOINED];
	} else if (r->kind == HB_XST_LAYER && r->v[HB_XST_L_TOKENS] == 1) {
		uint64_t span = r->v[HB_XST_L_END] - r->v[HB_XST_L_START];
		uint64_t wait = r->v[HB_XST_L_READY] - r->v[HB_XST_L_ROUTED];
		m->steps++;
		m->wait_ns += wait;
		m->compute_ns += span - wait;
		m->before_router_ns += r->v[HB_XST_L_ROUTED] - r->v[HB_XST_L_START];
	} else if (r->kind == HB_XST_READ) {
		m->reads++;
		m->read_bytes += r->v[HB_XST_R_BYTES];
		m->service_ns += r->v[HB_XST_R_READY] - r->v[HB_XST_R_START];
		if (m->niv + 3 > m->cap_iv) {
			size_t cap = m->cap_iv ? m->cap_iv * 2 : 4096;
			uint64_t *g = realloc(m->iv, cap * sizeof(*g));
			if (!g)
				return HB_ERR_NOMEM;
			m->iv = g, m->cap_iv = cap;
		}
		m->iv[m->niv++] = r->v[HB_XST_R_START];
		m->iv[m->niv++] = r->v[HB_XST_R_READY];
		m->iv[m->niv++] = r->v[HB_XST_R_BYTES];
	}
	return 0;
}

static int by_start(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The decode's delivered bandwidth: bytes over the union of service intervals. */
static void delivered(struct trace_stream_model *m)
{
	uint64_t end = 0, busy = 0;
	size_t n = m->niv / 3;

	qsort(m->iv, n, 3 * sizeof(uint64_t), by_start);
	for (size_t i = 0; i < n; i++) {
		uint64_t s = m->iv[3 * i], e = m->iv[3 * i + 1];
		if (s < m->decode_begin)
			continue;
		m->dec_reads++, m->dec_bytes += m->iv[3 * i + 2], m->dec_service_ns += e - s;
		if (s >= end)
			busy += e - s, end = e;
		else if (e > end)
			busy += e - end, end = e;
	}
	m->dec_busy_ns = busy;
	m->delivered_bw = busy ? (double)m->dec_bytes * 1e9 / (double)busy : NAN;
}

int trace_stream_model(const struct cli *c, const char *path, struct trace_stream_model *m, struct hb_error *err)
{
	struct cli one = *c;
	const char *paths[1] = { path };
	int rc;

	memset(m, 0, sizeof(*m));
	one.paths = paths, one.npaths = 1;
	rc = walk(&one, model_one, m, &m->h, err);
	if (rc == HB_ERR_NOMEM && !err->code)
		hb_error_set(err, rc, path, "out of memory");
	if (!rc)
		delivered(m);
	free(m->iv);
	m->iv = NULL, m->niv = m->cap_iv = 0;
	if (rc)
		return rc;
	if (!m->steps || !m->decode_tokens)
		return hb_error_set(err, HB_ERR_UNSUPPORTED, path, "holds no decode step (hb-run -n 3 or more)");
	m->layer_time = (double)m->compute_ns / (double)m->steps / 1e9;
	m->attn_fraction = m->compute_ns ? (double)m->before_router_ns / (double)m->compute_ns : 0.5;
	if (m->attn_fraction > 1)
		m->attn_fraction = 1;
	return HB_OK;
}

/* ------------------------------------------------------------ stats */

static const char *const pred_names[] = { "none", "previous", "router-ahead" };

static void model_print(const struct cli *c, const struct trace_stream_model *m)
{
	double tok = (double)m->decode_tokens;
	if (c->json) {
		cJSON *j = cJSON_CreateObject();
		hb_json_add_u64(j, "layers", m->h.layers);
		hb_json_add_u64(j, "experts", m->h.experts);
		hb_json_add_u64(j, "slots", m->h.slots);
		hb_json_add_u64(j, "slot_bytes", m->h.slot_bytes);
		hb_json_add_u64(j, "depth", m->h.depth);
		hb_json_add_str(j, "predictor", pred_names[m->h.predictor]);
		hb_json_add_str(j, "policy", m->h.policy ? "score" : "lru");
		hb_json_add_bool(j, "direct", m->h.direct);
		hb_json_add_u64(j, "decode_tokens", m->decode_tokens);
		hb_json_add_u64(j, "first_decode_token", m->first_decode);
		trace_jnum(j, "decode_wall_per_token_s", (double)m->wall_ns / tok / 1e9);
		trace_jnum(j, "wall_wait_per_token_s", (double)m->wait_ns / tok / 1e9);
		trace_jnum(j, "exposed_wait_per_token_s", (double)m->exposed_ns / tok / 1e9);
		trace_jnum(j, "layer_compute_s", m->layer_time);
		trace_jnum(j, "attn_fraction", m->attn_fraction);
		hb_json_add_u64(j, "wants", m->wants);
		hb_json_add_u64(j, "hits", m->hits);
		hb_json_add_u64(j, "joined", m->joined);
		hb_json_add_u64(j, "misses", m->misses);
		hb_json_add_u64(j, "reads", m->reads);
		hb_json_add_u64(j, "read_bytes", m->read_bytes);
		trace_jnum(j, "read_service_mean_s", m->reads ? (double)m->service_ns / (double)m->reads / 1e9 : NAN);
		hb_json_add_u64(j, "decode_reads", m->dec_reads);
		trace_jnum(j, "decode_read_service_mean_s",
			   m->dec_reads ? (double)m->dec_service_ns / (double)m->dec_reads / 1e9 : NAN);
		trace_jnum(j, "decode_delivered_bandwidth", m->delivered_bw);
		trace_print_json(j);
		return;
	}
	printf("stream trace: %u layers x %u experts, %u slots of %" PRIu64 " bytes, depth %u, predictor %s, "
	       "eviction %s, %s reads\n",
	       m->h.layers, m->h.experts, m->h.slots, m->h.slot_bytes, m->h.depth, pred_names[m->h.predictor],
	       m->h.policy ? "score" : "lru", m->h.direct ? "direct" : "buffered");
	printf("decode: %" PRIu64 " tokens from t%" PRIu64 ", %.3f ms a token; wall wait %.3f ms a token (router's "
	       "decision to the last exact record ready), exposed wait %.3f ms a token (the workers' blocked time, "
	       "summed); compute %.3f ms a layer step (%.2f before the router decides)\n",
	       m->decode_tokens, m->first_decode, (double)m->wall_ns / tok / 1e6, (double)m->wait_ns / tok / 1e6,
	       (double)m->exposed_ns / tok / 1e6, m->layer_time * 1e3, m->attn_fraction);
	printf("wants %" PRIu64 ": hits %" PRIu64 ", joined %" PRIu64 ", misses %" PRIu64 "; %" PRIu64
	       " reads of %.1f MB in all, %.3f ms mean service\n",
	       m->wants, m->hits, m->joined, m->misses, m->reads, (double)m->read_bytes / 1e6,
	       m->reads ? (double)m->service_ns / (double)m->reads / 1e6 : 0.0);
	printf("decode reads: %" PRIu64 ", %.3f ms mean service; delivered %.1f MB/s (bytes over the time any was "
	       "in service, SHA-256 check included)\n",
	       m->dec_reads, m->dec_reads ? (double)m->dec_service_ns / (double)m->dec_reads / 1e6 : 0.0,
	       m->delivered_bw / 1e6);
}

int trace_stream_stats(const struct cli *c, struct hb_error *err)
{
	struct trace_stream_model m;
	int rc;

	if ((rc = trace_stream_model(c, c->paths[0], &m, err)))
		return rc;
	model_print(c, &m);
	return HB_OK;
}

/* ------------------------------------------------------------ plot */

static int plot_one(void *ctx, const struct hb_xst_header *h, uint64_t index, const struct hb_xst_rec *r)
{
	struct hb_tpf_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.measured = true;
	if (r->kind == HB_XST_LAYER) {
		ev.is_step = true;
		ev.token = r->v[HB_XST_L_TOKEN];
		ev.layer = (uint32_t)r->v[HB_XST_L_LAYER];
		ev.tokens = (uint32_t)r->v[HB_XST_L_TOKENS];
		ev.start = r->v[HB_XST_L_START], ev.moe = r->v[HB_XST_L_MOE];
		ev.router = r->v[HB_XST_L_ROUTED], ev.end = r->v[HB_XST_L_END];
		ev.ready = r->v[HB_XST_L_READY];
		ev.exposed = ev.ready - ev.router;
	} else if (r->kind == HB_XST_READ) {
		ev.token = r->v[HB_XST_R_TOKEN];
		ev.layer = (uint32_t)r->v[HB_XST_R_LAYER];
		ev.expert = (uint32_t)r->v[HB_XST_R_EXPERT];
		ev.cls_issued = (uint8_t)r->v[HB_XST_R_CLASS];
		ev.cls = (uint8_t)r->v[HB_XST_R_CLASS_END];
		ev.predicted = !(r->v[HB_XST_R_FLAGS] & HB_XST_READ_EXACT);
		ev.promoted = r->v[HB_XST_R_FLAGS] & HB_XST_READ_PROMOTED;
		ev.submit = r->v[HB_XST_R_ISSUE], ev.dispatch = r->v[HB_XST_R_START], ev.done = r->v[HB_XST_R_READY];
	} else {
		return 0;
	}
	hb_tsvg_timeline_event(ctx, &ev);
	return 0;
}

int trace_stream_plot(const struct cli *c, struct hb_error *err)
{
	struct hb_tsvg_timeline *tl = NULL;
	struct hb_xst_header h;
	char title[200], path[4096], *text = NULL;
	size_t len = 0;
	int rc;

	if ((rc = hb_tsvg_timeline_create(&tl, c->have_tokens ? c->first : HB_TSVG_AUTO, c->count, err)))
		return rc;
	if ((rc = walk(c, plot_one, tl, &h, err)))
		goto out;
	snprintf(title, sizeof(title), "Measured streamed decode: predictor %s, eviction %s, %u slots, depth %u",
		 pred_names[h.predictor], h.policy ? "score" : "lru", h.slots, h.depth);
	if ((rc = hb_tsvg_timeline_render(tl, title, &text, &len, err)))
		goto out;
	snprintf(path, sizeof(path), "%s/timeline.svg", c->out);
	rc = hb_publish_buf(path, text, len, HB_PUBLISH_REPLACE, err);
	free(text);
	if (!rc) {
		if (c->json) {
			cJSON *j = cJSON_CreateObject(), *files = cJSON_AddArrayToObject(j, "files");
			cJSON_AddItemToArray(files, cJSON_CreateString(path));
			trace_print_json(j);
		} else {
			printf("wrote %s\n", path);
		}
	}
out:
	hb_tsvg_timeline_free(tl);
	return rc;
}
