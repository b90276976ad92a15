/*
 * hb_stream.c: the engine's life (source, budget, open, close), its clock
 * and its introspection.  The cache is hb_stream_cache.c, the reads
 * hb_stream_io.c, the wants and predictions hb_stream_route.c, the counters
 * hb_stream_stats.c.
 */
#include "hb_base.h"
#include "hb_checked.h"
#include "hb_io.h"
#include "hb_parse.h"
#include "hb_sha256.h"
#include "artifact/hb_artifact.h"
#include "gguf/hb_gguf.h"
#include "hb_stream_int.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

void hb_xs_config_default(struct hb_xs_config *c)
{
	memset(c, 0, sizeof(*c));
	/* eight readers: with four, a step's reads ran in batches (a record
	 * hashed its last chunk and took its next read while the drive sat
	 * idle), and a layer's 7-10 misses took two; eight keep the drive
	 * busy (bench/stream.sh geometry, cold, A/B/B/A x 4: decode 11.10 ->
	 * 12.28 tok/s median with none, x 3: 9.05 -> 10.12 with router-ahead) */
	c->threads = 8;
	c->depth = 8;
	c->reserved_p0 = 1;
	c->reserve_slots = HB_XS_AUTO;
	c->direct = HB_XS_DIRECT_AUTO;
	c->policy = HB_XS_POLICY_SCORE;
	c->freq_halflife = 16;
}

static const char *const policy_names[] = {"lru", "score"};

int hb_xs_policy_parse(const char *name, enum hb_xs_policy *out, struct hb_error *err)
{
	for (size_t i = 0; i < HB_ARRAY_LEN(policy_names); i++)
		if (!strcmp(name, policy_names[i])) {
			*out = (enum hb_xs_policy)i;
			return HB_OK;
		}
	return hb_error_set(err, HB_ERR_INVALID, "expert_evict", "'%s' is not an eviction policy (lru, score)",
			    name);
}

const char *hb_xs_policy_name(enum hb_xs_policy p)
{
	return (unsigned)p < HB_ARRAY_LEN(policy_names) ? policy_names[p] : "unknown";
}

/* ------------------------------------------------------------ source */

void hb_xs_source_release(struct hb_xs_source *src)
{
	free(src->path);
	hb_em_layout_release(&src->layout);
	free(src->record_sha);
	memset(src, 0, sizeof(*src));
}

int hb_xs_source_open(const char *path, struct hb_xs_source *src, struct hb_error *err)
{
	struct hb_gguf g;
	const struct hb_gguf_tensor *t;
	const struct hb_gguf_value *v;
	struct hb_em_geometry geo;
	uint32_t layers = 0, experts = 0, used = 0, hidden = 0, width = 0;
	int fd = -1, rc;

	memset(src, 0, sizeof(*src));
	hb_gguf_init(&g);
	if ((rc = hb_open_read(path, &fd, err)))
		return rc;
	if ((rc = hb_gguf_read_fd(&g, fd, NULL, err)))
		goto out;
	t = hb_gguf_find_tensor(&g, HB_TENSOR_EXPERT_STORE);
	if (!t) {
		rc = hb_error_set(err, HB_ERR_NOTFOUND, HB_TENSOR_EXPERT_STORE, "the artifact has no expert store");
		goto out;
	}
	if ((rc = hb_gguf_get_u32(&g, HB_KEY_BLOCKS, &layers, err)) ||
	    (rc = hb_gguf_get_u32(&g, HB_KEY_EXPERTS, &experts, err)) ||
	    (rc = hb_gguf_get_u32(&g, HB_KEY_EXPERTS_USED, &used, err)) ||
	    (rc = hb_gguf_get_u32(&g, HB_KEY_HIDDEN, &hidden, err)) ||
	    (rc = hb_gguf_get_u32(&g, HB_KEY_EXPERT_WIDTH, &width, err)))
		goto out;
	geo.layers = layers, geo.experts = experts, geo.experts_used = used;
	geo.hidden = hidden, geo.intermediate = width;
	if ((rc = hb_em_parse_fd(fd, t->offset, t->nbytes, &geo, &src->layout, NULL, err)))
		goto out;
	if ((rc = hb_gguf_get_array(&g, HB_KEY_EXPERT_RECORD_SHA, HB_GGUF_U8, &v, err)))
		goto out;
	if (v->count != (uint64_t)HB_SHA256_BYTES * layers * experts) {
		rc = hb_error_set(err, HB_ERR_CONTRACT, HB_KEY_EXPERT_RECORD_SHA,
				  "%" PRIu64 " bytes for %u x %u records", v->count, layers, experts);
		goto out;
	}
	src->record_sha = malloc((size_t)v->count);
	src->path = strdup(path);
	if (!src->record_sha || !src->path) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "expert_cache", "out of memory");
		goto out;
	}
	memcpy(src->record_sha, v->elems, (size_t)v->count);
	src->base = t->offset;
out:
	hb_gguf_release(&g);
	close(fd);
	if (rc)
		hb_xs_source_release(src);
	return rc;
}

/* The aligned span [*a0, *a0 + *span) holding record (layer, expert). */
static void record_span(const struct hb_em_layout *l, uint64_t base, uint32_t layer, uint32_t expert,
			uint64_t *a0, uint64_t *span, uint32_t *rec_off)
{
	uint64_t off = base + l->layers[layer].data_offset + (uint64_t)expert * l->record_bytes;
	uint64_t first = off & ~(uint64_t)(XS_ALIGN - 1);
	uint64_t end = (off + l->record_bytes + XS_ALIGN - 1) & ~(uint64_t)(XS_ALIGN - 1);

	*a0 = first;
	*span = end - first;
	*rec_off = (uint32_t)(off - first);
}

uint64_t hb_xs_slot_bytes(const struct hb_xs_source *src)
{
	const struct hb_em_layout *l = &src->layout;
	uint64_t most = 0, a0, span;
	uint32_t ro;

	/* the parser has bounded every offset by the store size, so the sums
	 * below cannot overflow for a source that parsed */
	for (uint32_t y = 0; y < l->layer_count; y++)
		for (uint32_t e = 0; e < l->expert_count; e++) {
			record_span(l, src->base, y, e, &a0, &span, &ro);
			if (span > most)
				most = span;
		}
	return most;
}

static int budget_bytes(const char *s, uint64_t *out)
{
	static const struct {
		const char *suffix;
		unsigned shift;
	} units[] = {{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"K", 10}, {"M", 20}, {"G", 30}};
	size_t n = strlen(s), digits = 0;
	char num[32];
	uint64_t v;

	while (digits < n && s[digits] >= '0' && s[digits] <= '9')
		digits++;
	if (digits == 0 || digits >= sizeof(num))
		return HB_ERR_INVALID;
	memcpy(num, s, digits);
	num[digits] = '\0';
	if (hb_parse_u64(num, &v))
		return HB_ERR_INVALID;
	if (digits == n) {
		*out = v;
		return HB_OK;
	}
	for (size_t i = 0; i < HB_ARRAY_LEN(units); i++)
		if (!strcmp(s + digits, units[i].suffix)) {
			if (v > (UINT64_MAX >> units[i].shift))
				return HB_ERR_OVERFLOW;
			*out = v << units[i].shift;
			return HB_OK;
		}
	return HB_ERR_INVALID;
}

/* The form of SIZE alone: kind 0 bytes (*v), 1 a percentage (*p), 2 all. */
static int budget_form(const char *s, int *kind, uint64_t *v, double *p, struct hb_error *err)
{
	size_t n = strlen(s);

	if (!strcmp(s, "all")) {
		*kind = 2;
		return HB_OK;
	}
	if (n > 1 && s[n - 1] == '%') {
		char num[32];
		if (n - 1 >= sizeof(num))
			return hb_error_set(err, HB_ERR_INVALID, "expert_cache", "'%s' is not a percentage", s);
		memcpy(num, s, n - 1);
		num[n - 1] = '\0';
		if (hb_parse_double(num, p) || !(*p > 0) || *p > 100)
			return hb_error_set(err, HB_ERR_INVALID, "expert_cache",
					    "'%s' is not a percentage in (0, 100]", s);
		*kind = 1;
		return HB_OK;
	}
	int rc = budget_bytes(s, v);
	if (rc)
		return hb_error_set(err, rc, "expert_cache",
				    "'%s' is not a size (bytes, K/M/G, KiB/MiB/GiB, N%%, or all)", s);
	if (*v == 0)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache", "'%s' holds no record", s);
	*kind = 0;
	return HB_OK;
}

int hb_xs_budget_check(const char *s, struct hb_error *err)
{
	int kind;
	uint64_t v;
	double p;

	return budget_form(s, &kind, &v, &p, err);
}

int hb_xs_budget_parse(const char *s, const struct hb_xs_source *src, uint64_t *bytes, bool *all,
		       struct hb_error *err)
{
	uint64_t slot = hb_xs_slot_bytes(src), records, whole, v = 0;
	double p = 0;
	int kind, rc;

	records = (uint64_t)src->layout.layer_count * src->layout.expert_count;
	if (slot == 0 || hb_mul_u64(records, slot, &whole))
		return hb_error_set(err, HB_ERR_OVERFLOW, "expert_cache", "the store's size overflows");
	*all = false;
	if ((rc = budget_form(s, &kind, &v, &p, err)))
		return rc;
	if (kind == 2) {
		*all = true;
		*bytes = whole;
		return HB_OK;
	}
	if (kind == 1)
		v = (uint64_t)((double)whole * (p / 100.0));
	if (v > whole)
		v = whole;
	v -= v % slot;
	if (v == 0)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache",
				    "'%s' holds no record: one slot is %" PRIu64 " bytes", s, slot);
	*bytes = v;
	return HB_OK;
}

/* ------------------------------------------------------------ clock, names */

uint64_t xs_now(struct hb_xs *s)
{
	struct timespec ts;

	if (s->clock)
		return s->clock(s->clock_ctx);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void xs_emit(struct hb_xs *s, enum hb_xs_event ev, const struct hb_xs_ticket *t)
{
	if (s->cfg.observe)
		s->cfg.observe(s->cfg.observe_ctx, ev, t);
}

void xs_name_record(char *buf, size_t len, uint32_t layer, uint32_t expert)
{
	snprintf(buf, len, "expert_store.layer[%u].expert[%u]", layer, expert);
}

/* ------------------------------------------------------------ open, close */

static int open_files(struct hb_xs *s, struct hb_error *err)
{
	int rc = hb_open_read(s->path, &s->fd_buffered, err), e;

	if (rc)
		return rc;
	s->fd = -1;
	if (s->cfg.direct == HB_XS_DIRECT_OFF) {
		snprintf(s->io_mode, sizeof(s->io_mode), "buffered (configured)");
		return HB_OK;
	}
	s->fd = open(s->path, O_RDONLY | O_CLOEXEC | O_DIRECT);
	if (s->fd >= 0) {
		s->direct = true;
		snprintf(s->io_mode, sizeof(s->io_mode), "direct");
		return HB_OK;
	}
	e = errno;
	if (s->cfg.direct == HB_XS_DIRECT_ON)
		return hb_error_sys(err, e, s->path, "the file system refuses O_DIRECT");
	snprintf(s->io_mode, sizeof(s->io_mode), "buffered (O_DIRECT refused at open: %s)", strerror(e));
	return HB_OK;
}

static int check_config(const struct hb_xs_config *c, struct hb_error *err)
{
	if (c->depth == 0)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.depth", "depth must be at least 1");
	if (c->threads && c->depth > c->threads)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.depth",
				    "depth %u exceeds the %u I/O threads", c->depth, c->threads);
	if (c->reserved_p0 >= c->depth && c->reserved_p0)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.reserved_p0",
				    "%u of depth %u reserved for P0 leaves none for predictions",
				    c->reserved_p0, c->depth);
	if (c->policy != HB_XS_POLICY_LRU && c->policy != HB_XS_POLICY_SCORE)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.policy", "unknown policy");
	if (c->direct > HB_XS_DIRECT_OFF)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.direct", "unknown O_DIRECT mode");
	if (c->extent > HB_XS_EXTENT_ALWAYS)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.extent", "unknown prefill extent mode");
	if (c->threads > 256)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.threads", "at most 256 I/O threads");
	return HB_OK;
}

static int copy_layout(struct hb_em_layout *dst, const struct hb_em_layout *src)
{
	*dst = *src;
	dst->layers = calloc(src->layer_count, sizeof(*dst->layers));
	if (!dst->layers)
		return HB_ERR_NOMEM;
	memcpy(dst->layers, src->layers, src->layer_count * sizeof(*dst->layers));
	return HB_OK;
}

int hb_xs_open(const struct hb_xs_source *src, const struct hb_xs_config *cfg, struct hb_xs **out,
	       struct hb_error *err)
{
	struct hb_xs *s;
	uint64_t keys, n;
	int rc;

	*out = NULL;
	if ((rc = check_config(cfg, err)))
		return rc;
	if ((rc = hb_crypto_start(err)))
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return hb_error_set(err, HB_ERR_NOMEM, "expert_cache", "out of memory");
	s->cfg = *cfg;
	s->fd = s->fd_buffered = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->work_cv, NULL);
	pthread_cond_init(&s->done_cv, NULL);
	if (copy_layout(&s->em, &src->layout) || !(s->path = strdup(src->path))) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "expert_cache", "out of memory");
		goto fail;
	}
	s->base = src->base;
	s->layers = s->em.layer_count;
	s->experts = s->em.expert_count;
	s->used = s->em.experts_used;
	s->record_bytes = s->em.record_bytes;
	s->slot_bytes = hb_xs_slot_bytes(src);
	keys = (uint64_t)s->layers * s->experts;
	if (s->slot_bytes && (rc = xs_ring_open(s, err)))
		goto fail;
	/* the ring (prefill extents) is the budget's first share, the slots the rest */
	n = s->slot_bytes ? (cfg->budget_bytes - s->st.ring_bytes) / s->slot_bytes : 0;
	if (n > keys)
		n = keys;
	if (n == 0) {
		rc = hb_error_set(err, HB_ERR_INVALID, "expert_cache",
				  "a budget of %" PRIu64 " bytes holds no record: one slot is %" PRIu64 " bytes",
				  cfg->budget_bytes, s->slot_bytes);
		goto fail;
	}
	s->nslots = (uint32_t)n;
	s->lease_cap = 4 * s->nslots + 16;
	s->record_sha = malloc((size_t)keys * HB_SHA256_BYTES);
	s->slots = calloc(s->nslots, sizeof(*s->slots));
	s->where = malloc((size_t)keys * sizeof(*s->where));
	s->freq = calloc((size_t)keys, sizeof(*s->freq));
	s->freq_tok = calloc((size_t)keys, sizeof(*s->freq_tok));
	s->tickets = calloc(s->nslots, sizeof(*s->tickets));
	s->leases = calloc(s->lease_cap, sizeof(*s->leases));
	if (!s->record_sha || !s->slots || !s->where || !s->freq || !s->freq_tok || !s->tickets || !s->leases) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "expert_cache", "out of memory");
		goto fail;
	}
	memcpy(s->record_sha, src->record_sha, (size_t)keys * HB_SHA256_BYTES);
	for (uint64_t k = 0; k < keys; k++)
		s->where[k] = XS_NONE;
	for (uint32_t i = 0; i < s->nslots; i++) {
		s->slots[i].key = XS_NONE;
		s->slots[i].ticket = XS_NONE;
		s->slots[i].pred_prio = XS_NO_PRED;
		s->tickets[i].qnext = i + 1 < s->nslots ? (int32_t)(i + 1) : XS_NONE;
	}
	s->ticket_free = 0;
	for (int p = 0; p < HB_XS_PRIOS; p++)
		s->qhead[p] = XS_NONE;
	s->reserve_slots = cfg->reserve_slots;
	if (s->reserve_slots == HB_XS_AUTO)
		s->reserve_slots = s->used < s->nslots ? s->used : s->nslots - 1;
	s->st.budget_bytes = cfg->budget_bytes;
	s->st.slot_bytes = s->slot_bytes;
	s->st.extent_mode = (uint8_t)cfg->extent;
	s->st.slots = s->nslots;
	s->st.slack_min_ns = INT64_MAX;
	/* what the engine holds besides the slots' bytes: the stated working set */
	s->st.meta_bytes = sizeof(*s) + keys * (HB_SHA256_BYTES + sizeof(*s->where) + sizeof(*s->freq) +
						sizeof(*s->freq_tok)) +
			   (uint64_t)s->nslots * (sizeof(*s->slots) + sizeof(*s->tickets)) +
			   (uint64_t)s->lease_cap * sizeof(*s->leases) +
			   (uint64_t)s->em.layer_count * sizeof(*s->em.layers);
	if ((rc = open_files(s, err)))
		goto fail;
	xs_extent_probe(s);
	if ((rc = xs_workers_start(s, err)))
		goto fail;
	*out = s;
	return HB_OK;
fail:
	hb_xs_close(s);
	return rc;
}

void hb_xs_close(struct hb_xs *s)
{
	if (!s)
		return;
	xs_workers_stop(s);
	if (s->fd >= 0)
		close(s->fd);
	if (s->fd_buffered >= 0)
		close(s->fd_buffered);
	if (s->slots)
		for (uint32_t i = 0; i < s->nslots; i++)
			free(s->slots[i].buf);
	free(s->slots);
	xs_ring_close(s);
	free(s->tickets);
	free(s->leases);
	free(s->where);
	free(s->freq);
	free(s->freq_tok);
	free(s->record_sha);
	free(s->path);
	hb_em_layout_release(&s->em);
	pthread_cond_destroy(&s->done_cv);
	pthread_cond_destroy(&s->work_cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

const char *hb_xs_io_mode(const struct hb_xs *s)
{
	return s->io_mode;
}

uint32_t hb_xs_slots(const struct hb_xs *s)
{
	return s->nslots;
}

enum hb_xs_policy hb_xs_policy_of(const struct hb_xs *s)
{
	return s->cfg.policy;
}

void hb_xs_set_position(struct hb_xs *s, uint64_t token_pos, uint32_t layer)
{
	pthread_mutex_lock(&s->mu);
	if (!s->have_token || token_pos != s->cur_token) {
		if (s->have_token) {
			s->st.tokens++;
			if (s->token_exposed > s->st.exposed_max_token_ns)
				s->st.exposed_max_token_ns = s->token_exposed;
		}
		s->token_exposed = 0;
		s->cur_token = token_pos;
		s->have_token = true;
	}
	s->cur_layer = layer < s->layers ? layer : 0;
	pthread_mutex_unlock(&s->mu);
}

int hb_xs_slot_get(struct hb_xs *s, uint32_t slot, struct hb_xs_slot_info *out)
{
	const struct xs_slot *sl;

	if (slot >= s->nslots)
		return HB_ERR_INVALID;
	pthread_mutex_lock(&s->mu);
	sl = &s->slots[slot];
	out->state = sl->state;
	out->gen = sl->gen;
	out->layer = sl->key == XS_NONE ? -1 : (int32_t)((uint32_t)sl->key / s->experts);
	out->expert = sl->key == XS_NONE ? -1 : (int32_t)((uint32_t)sl->key % s->experts);
	out->leases = sl->leases;
	out->pins = sl->pins;
	out->predicted = sl->predicted;
	out->used = sl->used;
	pthread_mutex_unlock(&s->mu);
	return HB_OK;
}

void hb_xs_stats_get(struct hb_xs *s, struct hb_xs_stats *out)
{
	pthread_mutex_lock(&s->mu);
	*out = s->st;
	/* the token in progress counts as one */
	if (s->have_token) {
		out->tokens++;
		if (s->token_exposed > out->exposed_max_token_ns)
			out->exposed_max_token_ns = s->token_exposed;
	}
	pthread_mutex_unlock(&s->mu);
}
