/*
 * hb_verify.c: payload verification (see hb_verify.h): the driver, the check
 * of one unit, and selected mode.
 *
 * Full mode (hb_verify_stream.c) streams each store's payload once through
 * a pipeline of reading, the whole-payload SHA-256 and the unit checks;
 * findings are reported in unit order, whatever the thread count.
 * Selected mode (--pages, --sample) checks only the chosen units, each read
 * on its own; whole-payload digests are then not checked, and the stats say
 * so.
 */
#include "hb_base.h"
#include "admit/hb_admit.h"
#include "artifact/hb_artifact.h"
#include "hb_io.h"
#include "hb_verify_int.h"

#include <unistd.h>

static const char *const diag_ids[] = {
#define HB_VERIFY_ROW_(sym, id, meaning) id,
	HB_VERIFY_DIAGS(HB_VERIFY_ROW_)
#undef HB_VERIFY_ROW_
};

const char *hb_verify_diag_id(enum hb_verify_diag d)
{
	return (unsigned)d < HB_VERIFY_DIAG_COUNT ? diag_ids[d] : NULL;
}

static void hex(const uint8_t *d, char *out)
{
	hb_hex_encode(d, HB_SHA256_BYTES, out);
}

void hb_verify_finding(struct vctx *v, const struct hb_verify_finding *f)
{
	v->st->findings++;
	if (!v->rc) {
		v->rc = f->err.code ? f->err.code : HB_ERR_DIGEST;
		v->first = f->err;
	}
	if (v->cb)
		v->cb(v->cb_ctx, f);
}

uint64_t hb_verify_unit_offset(const struct vctx *v, const struct units *us, uint64_t u)
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

void hb_verify_check_unit(struct vctx *v, const struct units *us, uint64_t u, const uint8_t *buf,
			  const uint8_t *digest, struct unit_result *r)
{
	struct hb_verify_finding *f = &r->f;
	uint8_t want[HB_SHA256_BYTES], got[HB_SHA256_BYTES];

	memset(r, 0, sizeof(*r));
	f->index = u;
	f->kind = us->kind == STORE_PLE ? "page" : "record";
	f->store = us->kind == STORE_PLE ? "ple" : "experts";
	f->layer = f->expert = -1;
	if (digest)
		memcpy(got, digest, sizeof(got));
	else
		hb_sha256_buf(buf, (size_t)us->bytes, got);
	if (us->kind == STORE_PLE) {
		hb_ple_store_page_digest(v->ple, u, want);
		if (hb_ple_page_check_digest(v->ple, u, buf, got, &f->err)) {
			r->bad = true;
			hex(want, f->expected);
			/* the found digest is shown when the header and fill
			 * passed and the digest was what failed */
			if (f->err.id && !strcmp(f->err.id, hb_ple_diag_id(HB_PLE_DIAG_PAGE_DIGEST)))
				hex(got, f->found);
		}
		return;
	}
	f->layer = (int64_t)(u / v->em.expert_count);
	f->expert = (int64_t)(u % v->em.expert_count);
	memcpy(want, v->record_sha + u * HB_SHA256_BYTES, HB_SHA256_BYTES);
	if (memcmp(want, got, sizeof(want))) {
		char field[HB_ERROR_FIELD_MAX];
		r->bad = true;
		hex(want, f->expected);
		hex(got, f->found);
		snprintf(field, sizeof(field), "expert_store.layer[%" PRId64 "].expert[%" PRId64 "]",
			 f->layer, f->expert);
		hb_error_diag(&f->err, hb_verify_diag_id(HB_VERIFY_RECORD_DIGEST), HB_ERR_DIGEST, field, true,
			      hb_verify_unit_offset(v, us, u), "the record does not match its digest");
	}
}

void hb_verify_payload_finding(struct vctx *v, const char *store, const uint8_t want[32],
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
	hb_verify_finding(v, &f);
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
			   hb_verify_unit_offset(p->v, p->us, u), p->v->o->path, &p->errs[job]);
	p->rc[job] = rc;
	if (!rc)
		hb_verify_check_unit(p->v, p->us, u, p->scratch[worker], NULL, &p->res[job]);
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
			hb_verify_finding(v, &p.res[i].f);
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

const char *hb_verify_bound(const struct hb_verify_stats *st)
{
	double r, p, u;

	if (!(st->wall_s > 0))
		return "none";
	r = st->read_s / (st->wall_s * (st->readers ? st->readers : 1));
	p = st->payload_s / st->wall_s;
	u = st->units_s / (st->wall_s * (st->unit_threads ? st->unit_threads : 1));
	if (r >= p && r >= u)
		return "read";
	return p >= u ? "payload-digest" : "unit-digests";
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
	struct hb_admit_opts ao = { .path = o->path, .use_fd = true };
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
	/* What admission can see is admission's to report, in its order; it
	 * checks the descriptor that the passes then read (one open: a path
	 * replaced meanwhile changes nothing). */
	if ((rc = hb_open_read(o->path, &v.fd, err)))
		return rc;
	ao.fd = v.fd;
	rc = hb_admit(&ao, &ar, err);
	if (rc)
		goto out;
	cJSON_Delete(ar.report);
	if (!ar.admitted) {
		stats->not_admitted = true;
		rc = err && err->code ? err->code : HB_ERR_CONTRACT;
		goto out;
	}
	if ((rc = open_stores(&v, err)) ||
	    (selected && (rc = hb_pool_create(o->threads, &v.pool, err))))
		goto out;
	if (o->ple && v.ple) {
		const struct hb_ple_layout *l = hb_ple_store_layout(v.ple);
		struct units us = { STORE_PLE, l->page_count, l->page_stride };
		rc = selected ? selected_pass(&v, &us, err) : hb_verify_full_pass(&v, &us, err);
		if (rc)
			goto out;
	}
	if (o->experts && !(o->range)) {
		struct units us = { STORE_EXPERTS, stats->records, v.em.record_bytes };
		rc = selected ? selected_pass(&v, &us, err) : hb_verify_full_pass(&v, &us, err);
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
