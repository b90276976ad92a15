/*
 * hb_verify.c: payload verification (see hb_verify.h).
 *
 * Full mode streams each store's payload once, in chunks of whole units
 * (PLE pages, expert records): per chunk, one pool run does three kinds of
 * job at once: read the NEXT chunk into the spare buffer, extend the
 * whole-payload SHA-256 with this chunk (one job, so the digest sees the
 * bytes in order), and check every unit of this chunk.  Findings are then
 * reported in unit order, whatever the thread count.  Selected mode
 * (--pages, --sample) checks only the chosen units, each read on its own;
 * whole-payload digests are then not checked, and the stats say so.
 */
#include "hb_base.h"
#include "admit/hb_admit.h"
#include "artifact/hb_artifact.h"
#include "expert/hb_expert_store.h"
#include "gguf/hb_gguf.h"
#include "hb_io.h"
#include "ple/hb_ple_store.h"
#include "hb_pool.h"
#include "hb_verify.h"

#include <unistd.h>

#define DEFAULT_CHUNK (32u << 20)

enum store_kind { STORE_PLE, STORE_EXPERTS };

static const char *const diag_ids[] = {
#define HB_VERIFY_ROW_(sym, id, meaning) id,
	HB_VERIFY_DIAGS(HB_VERIFY_ROW_)
#undef HB_VERIFY_ROW_
};

const char *hb_verify_diag_id(enum hb_verify_diag d)
{
	return (unsigned)d < HB_VERIFY_DIAG_COUNT ? diag_ids[d] : NULL;
}

struct vctx {
	const struct hb_verify_opts *o;
	hb_verify_fn cb;
	void *cb_ctx;
	struct hb_verify_stats *st;
	int fd;
	struct hb_gguf g;
	struct hb_pool *pool;
	/* experts */
	struct hb_em_layout em;
	bool em_ok;
	uint64_t em_base;
	const uint8_t *record_sha;  /* metadata table, 32 per record */
	/* PLE */
	struct hb_ple_store *ple;
	int rc;                     /* first failure to return */
	struct hb_error first;      /* its record */
};

struct unit_result {
	bool bad;
	struct hb_verify_finding f;
};

/* One store's geometry as a sequence of equal units. */
struct units {
	enum store_kind kind;
	uint64_t count;
	uint64_t bytes;             /* page stride or record bytes */
};

static void hex(const uint8_t *d, char *out)
{
	hb_hex_encode(d, HB_SHA256_BYTES, out);
}

static void finding(struct vctx *v, const struct hb_verify_finding *f)
{
	v->st->findings++;
	if (!v->rc) {
		v->rc = f->err.code ? f->err.code : HB_ERR_DIGEST;
		v->first = f->err;
	}
	if (v->cb)
		v->cb(v->cb_ctx, f);
}

/* Absolute file offset of unit u. */
static uint64_t unit_offset(const struct vctx *v, const struct units *us, uint64_t u)
{
	if (us->kind == STORE_PLE) {
		const struct hb_ple_layout *l = hb_ple_store_layout(v->ple);
		return hb_ple_store_base(v->ple) + l->payload_offset + u * l->page_stride;
	}
	{
		uint32_t layer = (uint32_t)(u / v->em.expert_count), e = (uint32_t)(u % v->em.expert_count);
		return v->em_base + v->em.layers[layer].data_offset + (uint64_t)e * v->em.record_bytes;
	}
}

/* Check one unit whose bytes are in buf; fills r (thread-safe). */
static void check_unit(struct vctx *v, const struct units *us, uint64_t u, const uint8_t *buf,
		       struct unit_result *r)
{
	struct hb_verify_finding *f = &r->f;
	uint8_t want[HB_SHA256_BYTES], got[HB_SHA256_BYTES];

	memset(r, 0, sizeof(*r));
	f->index = u;
	f->kind = us->kind == STORE_PLE ? "page" : "record";
	f->store = us->kind == STORE_PLE ? "ple" : "experts";
	f->layer = f->expert = -1;
	if (us->kind == STORE_PLE) {
		hb_ple_store_page_digest(v->ple, u, want);
		if (hb_ple_page_check_buf(v->ple, u, buf, got, &f->err)) {
			r->bad = true;
			hex(want, f->expected);
			if (memcmp(got, (uint8_t[HB_SHA256_BYTES]){0}, HB_SHA256_BYTES))
				hex(got, f->found);
		}
		return;
	}
	f->layer = (int64_t)(u / v->em.expert_count);
	f->expert = (int64_t)(u % v->em.expert_count);
	memcpy(want, v->record_sha + u * HB_SHA256_BYTES, HB_SHA256_BYTES);
	hb_sha256_buf(buf, (size_t)us->bytes, got);
	if (memcmp(want, got, sizeof(want))) {
		char field[HB_ERROR_FIELD_MAX];
		r->bad = true;
		hex(want, f->expected);
		hex(got, f->found);
		snprintf(field, sizeof(field), "expert_store.layer[%" PRId64 "].expert[%" PRId64 "]",
			 f->layer, f->expert);
		hb_error_diag(&f->err, hb_verify_diag_id(HB_VERIFY_RECORD_DIGEST), HB_ERR_DIGEST, field, true,
			      unit_offset(v, us, u), "the record does not match its digest");
	}
}

/* ------------------------------------------------------------ full mode */

struct chunk {
	struct vctx *v;
	const struct units *us;
	uint8_t *cur, *next;
	uint64_t first, n;          /* units in cur */
	uint64_t next_first, next_n;/* units to read into next (n == 0: none) */
	struct hb_sha256 *payload;
	struct unit_result *res;
	struct hb_error read_err;
	int read_rc;
};

static int chunk_job(void *ctx, size_t job, unsigned worker)
{
	struct chunk *c = ctx;
	(void)worker;
	if (job < c->n) {
		check_unit(c->v, c->us, c->first + job, c->cur + job * c->us->bytes, &c->res[job]);
		return HB_OK;
	}
	if (job == c->n) {
		hb_sha256_update(c->payload, c->cur, (size_t)(c->n * c->us->bytes));
		return HB_OK;
	}
	/* read ahead; a failure here stops the verification */
	hb_error_clear(&c->read_err);
	c->read_rc = hb_pread_full(c->v->fd, c->next, (size_t)(c->next_n * c->us->bytes),
				   unit_offset(c->v, c->us, c->next_first), c->v->o->path, &c->read_err);
	return HB_OK;
}

/* Units [first, first + n) are contiguous in the file: PLE pages always,
 * expert records within one layer.  Streams them through the payload hash. */
static int stream_run(struct vctx *v, const struct units *us, uint64_t first, uint64_t n,
		      uint64_t per_chunk, uint8_t *buf[2], struct unit_result *res,
		      struct hb_sha256 *payload, struct hb_error *err)
{
	struct chunk c = { v, us, buf[0], buf[1], first, 0, 0, 0, payload, res, {0}, 0 };
	int rc;

	if (!n)
		return HB_OK;
	c.n = n < per_chunk ? n : per_chunk;
	rc = hb_pread_full(v->fd, c.cur, (size_t)(c.n * us->bytes), unit_offset(v, us, first),
			   v->o->path, err);
	if (rc)
		return rc;
	v->st->bytes_read += c.n * us->bytes;
	for (;;) {
		uint64_t done = c.first + c.n - first;
		c.next_first = c.first + c.n;
		c.next_n = n - done < per_chunk ? n - done : per_chunk;
		hb_pool_run(v->pool, (size_t)(c.n + 1 + (c.next_n ? 1 : 0)), chunk_job, &c);
		v->st->bytes_hashed += 2 * c.n * us->bytes; /* unit digests + payload */
		for (uint64_t i = 0; i < c.n; i++) {
			if (us->kind == STORE_PLE)
				v->st->ple_checked++;
			else
				v->st->records_checked++;
			if (res[i].bad) {
				if (us->kind == STORE_PLE)
					v->st->ple_bad++;
				else
					v->st->records_bad++;
				finding(v, &res[i].f);
			}
		}
		if (c.read_rc) {
			*err = c.read_err;
			return c.read_rc;
		}
		if (!c.next_n)
			return HB_OK;
		v->st->bytes_read += c.next_n * us->bytes;
		{
			uint8_t *t = c.cur;
			c.cur = c.next;
			c.next = t;
		}
		c.first = c.next_first;
		c.n = c.next_n;
	}
}

/* Hash [off, off + len) of the file into payload (padding between layers). */
static int hash_span(struct vctx *v, uint64_t off, uint64_t len, uint8_t *buf, size_t cap,
		     struct hb_sha256 *payload, struct hb_error *err)
{
	while (len) {
		size_t n = len < cap ? (size_t)len : cap;
		int rc = hb_pread_full(v->fd, buf, n, off, v->o->path, err);
		if (rc)
			return rc;
		hb_sha256_update(payload, buf, n);
		v->st->bytes_read += n;
		v->st->bytes_hashed += n;
		off += n;
		len -= n;
	}
	return HB_OK;
}

static void payload_finding(struct vctx *v, const char *store, const uint8_t want[32],
			    const uint8_t got[32], const char *field, uint64_t off)
{
	struct hb_verify_finding f;

	memset(&f, 0, sizeof(f));
	f.store = store;
	f.kind = "payload";
	f.layer = f.expert = -1;
	hex(want, f.expected);
	hex(got, f.found);
	hb_error_diag(&f.err, !strcmp(store, "ple") ? "ple-payload-digest" : "em-payload-digest",
		      HB_ERR_DIGEST, field, true, off, "the whole-payload digest does not match");
	finding(v, &f);
}

static int full_pass(struct vctx *v, const struct units *us, struct hb_error *err)
{
	uint64_t chunk = v->o->chunk_bytes ? v->o->chunk_bytes : DEFAULT_CHUNK;
	uint64_t per_chunk = chunk / us->bytes ? chunk / us->bytes : 1;
	uint8_t *buf[2] = { malloc((size_t)(per_chunk * us->bytes)), malloc((size_t)(per_chunk * us->bytes)) };
	struct unit_result *res = calloc((size_t)per_chunk, sizeof(*res));
	struct hb_sha256 payload;
	uint8_t got[HB_SHA256_BYTES];
	int rc = HB_OK;

	if (!buf[0] || !buf[1] || !res) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "verify", "cannot allocate %" PRIu64 " bytes", per_chunk * us->bytes);
		goto out;
	}
	hb_sha256_init(&payload);
	if (us->kind == STORE_PLE) {
		const struct hb_ple_layout *l = hb_ple_store_layout(v->ple);
		uint8_t want[HB_SHA256_BYTES], man[HB_SHA256_BYTES];
		rc = stream_run(v, us, 0, us->count, per_chunk, buf, res, &payload, err);
		if (rc)
			goto out;
		hb_sha256_final(&payload, got);
		hb_ple_store_digests(v->ple, want, man);
		v->st->ple_payload_checked = true;
		v->st->ple_payload_ok = !memcmp(want, got, sizeof(got));
		if (!v->st->ple_payload_ok)
			payload_finding(v, "ple", want, got, "ple.manifest.payload_sha256",
					hb_ple_store_base(v->ple) + l->payload_offset);
	} else {
		uint64_t pos = v->em_base + v->em.data_offset;
		for (uint32_t L = 0; L < v->em.layer_count; L++) {
			uint64_t start = v->em_base + v->em.layers[L].data_offset;
			if ((rc = hash_span(v, pos, start - pos, buf[0], (size_t)(per_chunk * us->bytes), &payload, err)) ||
			    (rc = stream_run(v, us, (uint64_t)L * v->em.expert_count, v->em.expert_count,
					     per_chunk, buf, res, &payload, err)))
				goto out;
			pos = start + v->em.layers[L].data_size;
		}
		rc = hash_span(v, pos, v->em_base + v->em.store_size - pos, buf[0],
			       (size_t)(per_chunk * us->bytes), &payload, err);
		if (rc)
			goto out;
		hb_sha256_final(&payload, got);
		v->st->em_payload_checked = true;
		v->st->em_payload_ok = !memcmp(v->em.payload_sha256, got, sizeof(got));
		if (!v->st->em_payload_ok)
			payload_finding(v, "experts", v->em.payload_sha256, got,
					"expert_store.header.payload_sha256", v->em_base + v->em.data_offset);
	}
out:
	free(buf[0]);
	free(buf[1]);
	free(res);
	return rc;
}

/* ------------------------------------------------------------ selected mode */

struct picked {
	struct vctx *v;
	const struct units *us;
	const uint64_t *units;
	struct unit_result *res;
	uint8_t **scratch;          /* one unit buffer per worker */
	int *rc;
	struct hb_error *errs;
};

static int picked_job(void *ctx, size_t job, unsigned worker)
{
	struct picked *p = ctx;
	uint64_t u = p->units[job];
	int rc;

	hb_error_clear(&p->errs[job]);
	rc = hb_pread_full(p->v->fd, p->scratch[worker], (size_t)p->us->bytes,
			   unit_offset(p->v, p->us, u), p->v->o->path, &p->errs[job]);
	p->rc[job] = rc;
	if (!rc)
		check_unit(p->v, p->us, u, p->scratch[worker], &p->res[job]);
	return HB_OK;
}

static uint64_t next_rand(uint64_t *s)
{
	/* splitmix64: a seeded, reproducible sequence */
	uint64_t x = (*s += 0x9E3779B97F4A7C15ull);
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int selected_pass(struct vctx *v, const struct units *us, struct hb_error *err)
{
	unsigned workers = hb_pool_size(v->pool);
	uint64_t n = 0, *units = NULL, seed = v->o->seed;
	struct picked p = { v, us, NULL, NULL, NULL, NULL, NULL };
	int rc = HB_OK;

	if (v->o->range && us->kind == STORE_PLE) {
		uint64_t last = v->o->last < us->count ? v->o->last : us->count - 1;
		if (v->o->first >= us->count || v->o->first > v->o->last)
			return hb_error_diag(err, hb_verify_diag_id(HB_VERIFY_RANGE), HB_ERR_INVALID, "pages", false, 0,
					     "pages %" PRIu64 "-%" PRIu64 " outside 0-%" PRIu64,
					     v->o->first, v->o->last, us->count - 1);
		n = last - v->o->first + 1;
	} else {
		n = v->o->sample < us->count ? v->o->sample : us->count;
	}
	units = malloc((size_t)(n ? n : 1) * sizeof(*units));
	p.res = calloc((size_t)(n ? n : 1), sizeof(*p.res));
	p.rc = calloc((size_t)(n ? n : 1), sizeof(int));
	p.errs = calloc((size_t)(n ? n : 1), sizeof(*p.errs));
	p.scratch = calloc(workers, sizeof(uint8_t *));
	for (unsigned w = 0; p.scratch && w < workers; w++)
		p.scratch[w] = malloc((size_t)us->bytes);
	if (!units || !p.res || !p.rc || !p.errs || !p.scratch) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "verify", "out of memory");
		goto out;
	}
	for (unsigned w = 0; w < workers; w++)
		if (!p.scratch[w]) {
			rc = hb_error_set(err, HB_ERR_NOMEM, "verify", "out of memory");
			goto out;
		}
	if (v->o->range && us->kind == STORE_PLE) {
		for (uint64_t i = 0; i < n; i++)
			units[i] = v->o->first + i;
	} else {
		/* n distinct units: a partial Fisher-Yates over an implicit
		 * identity permutation would need count memory; with n small
		 * relative to count, draw and reject duplicates instead */
		for (uint64_t i = 0; i < n;) {
			uint64_t u = next_rand(&seed) % us->count;
			bool dup = false;
			for (uint64_t j = 0; j < i && !dup; j++)
				dup = units[j] == u;
			if (!dup)
				units[i++] = u;
		}
		qsort(units, (size_t)n, sizeof(*units), cmp_u64);
	}
	p.units = units;
	hb_pool_run(v->pool, (size_t)n, picked_job, &p);
	for (uint64_t i = 0; i < n; i++) {
		if (p.rc[i]) {
			*err = p.errs[i];
			rc = p.rc[i];
			goto out;
		}
		v->st->bytes_read += us->bytes;
		v->st->bytes_hashed += us->bytes;
		if (us->kind == STORE_PLE)
			v->st->ple_checked++;
		else
			v->st->records_checked++;
		if (p.res[i].bad) {
			if (us->kind == STORE_PLE)
				v->st->ple_bad++;
			else
				v->st->records_bad++;
			finding(v, &p.res[i].f);
		}
	}
out:
	for (unsigned w = 0; p.scratch && w < workers; w++)
		free(p.scratch[w]);
	free(p.scratch);
	free(units);
	free(p.res);
	free(p.rc);
	free(p.errs);
	return rc;
}

/* ------------------------------------------------------------ driver */

static int open_stores(struct vctx *v, struct hb_error *err)
{
	const struct hb_gguf_tensor *t;
	const struct hb_gguf_kv *kv;
	int rc = hb_gguf_read_fd(&v->g, v->fd, NULL, err);

	if (rc)
		return rc;
	t = hb_gguf_find_tensor(&v->g, HB_TENSOR_EXPERT_STORE);
	kv = hb_gguf_find_kv(&v->g, HB_KEY_EXPERT_RECORD_SHA);
	if (!t || !kv)
		return hb_error_set(err, HB_ERR_INTERNAL, "verify", "an admitted artifact lacks its expert store");
	v->em_base = t->offset;
	{
		/* admission already proved these constants; read them back */
		uint32_t layers = 0, experts = 0, used = 0, hidden = 0, width = 0;
		struct hb_em_geometry geo;
		if ((rc = hb_gguf_get_u32(&v->g, HB_KEY_BLOCKS, &layers, err)) ||
		    (rc = hb_gguf_get_u32(&v->g, HB_KEY_EXPERTS, &experts, err)) ||
		    (rc = hb_gguf_get_u32(&v->g, HB_KEY_EXPERTS_USED, &used, err)) ||
		    (rc = hb_gguf_get_u32(&v->g, HB_KEY_HIDDEN, &hidden, err)) ||
		    (rc = hb_gguf_get_u32(&v->g, HB_KEY_EXPERT_WIDTH, &width, err)))
			return rc;
		geo.layers = layers, geo.experts = experts, geo.experts_used = used;
		geo.hidden = hidden, geo.intermediate = width;
		rc = hb_em_parse_fd(v->fd, t->offset, t->nbytes, &geo, &v->em, NULL, err);
	}
	if (rc)
		return rc;
	v->em_ok = true;
	v->record_sha = kv->value.elems;
	v->st->records = (uint64_t)v->em.layer_count * v->em.expert_count;
	t = hb_gguf_find_tensor(&v->g, HB_TENSOR_PLE_STORE);
	if (t) {
		rc = hb_ple_store_open(&v->ple, v->fd, t->offset, t->nbytes, err);
		if (rc)
			return rc;
		v->st->has_ple = true;
		v->st->ple_pages = hb_ple_store_layout(v->ple)->page_count;
	}
	return HB_OK;
}

int hb_verify(const struct hb_verify_opts *o, hb_verify_fn cb, void *ctx,
	      struct hb_verify_stats *stats, struct hb_error *err)
{
	struct vctx v;
	struct hb_admit_opts ao = { o->path, NULL, NULL };
	struct hb_admit_result ar;
	bool selected = o->range || o->sample;
	int rc;

	memset(stats, 0, sizeof(*stats));
	memset(&v, 0, sizeof(v));
	v.o = o;
	v.cb = cb;
	v.cb_ctx = ctx;
	v.st = stats;
	v.fd = -1;
	hb_gguf_init(&v.g);
	/* What admission can see is admission's to report, in its order. */
	rc = hb_admit(&ao, &ar, err);
	if (rc)
		return rc;
	cJSON_Delete(ar.report);
	if (!ar.admitted) {
		stats->not_admitted = true;
		return err && err->code ? err->code : HB_ERR_CONTRACT;
	}
	if ((rc = hb_open_read(o->path, &v.fd, err)) || (rc = open_stores(&v, err)) ||
	    (rc = hb_pool_create(o->threads, &v.pool, err)))
		goto out;
	if (o->ple && v.ple) {
		const struct hb_ple_layout *l = hb_ple_store_layout(v.ple);
		struct units us = { STORE_PLE, l->page_count, l->page_stride };
		rc = selected ? selected_pass(&v, &us, err) : full_pass(&v, &us, err);
		if (rc)
			goto out;
	}
	if (o->experts && !(o->range)) {
		struct units us = { STORE_EXPERTS, stats->records, v.em.record_bytes };
		rc = selected ? selected_pass(&v, &us, err) : full_pass(&v, &us, err);
		if (rc)
			goto out;
	}
	if (v.rc) {
		if (err && !err->code)
			*err = v.first;
		rc = v.rc == HB_ERR_DIGEST || v.rc == HB_ERR_FORMAT ? HB_ERR_DIGEST : v.rc;
	}
out:
	hb_pool_destroy(v.pool);
	hb_ple_store_close(v.ple);
	if (v.em_ok)
		hb_em_layout_release(&v.em);
	hb_gguf_release(&v.g);
	if (v.fd >= 0)
		close(v.fd);
	return rc;
}
