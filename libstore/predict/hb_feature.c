/*
 * hb_feature.c: the seeded projection and feature sets on disk (shards and
 * their manifest), hb_predict.h.  A shard is written whole from memory; a
 * reader hashes the file before it trusts a byte of it.
 */
#include "hb_predict_int.h"
#include "model/hb_ple_hash.h"
#include "hb_checked.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_publish.h"
#include "hb_sha256.h"

#include <errno.h>
#include <math.h>
#include <sys/stat.h>

static const char *const diag_ids[HB_PDD_COUNT] = {
#define HB_PREDICT_ID_(sym, id, meaning) id,
	HB_PREDICT_DIAGS(HB_PREDICT_ID_)
#undef HB_PREDICT_ID_
};

const char *hb_predict_diag_id(enum hb_predict_diag d)
{
	return (unsigned)d < HB_PDD_COUNT ? diag_ids[d] : "predict-unknown";
}

#define DIAG(sym) hb_predict_diag_id(HB_PDD_##sym)

/* ------------------------------------------------------------ projection */

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int hb_projection_make(uint64_t seed, uint32_t source_width, uint32_t width, float **P, uint8_t digest[32],
		       struct hb_error *err)
{
	size_t n = (size_t)source_width * width;
	float *m, v;
	uint64_t s = seed, bits = 0;
	struct hb_sha256 h;
	uint8_t head[24];

	*P = NULL;
	if (!source_width || !width)
		return hb_error_set(err, HB_ERR_INVALID, "projection", "widths must be positive");
	m = malloc(n * sizeof(float));
	if (!m)
		return hb_error_set(err, HB_ERR_NOMEM, "projection", "out of memory");
	v = (float)(1.0 / sqrt((double)width));
	for (size_t i = 0; i < n; i++) {
		if (i % 64 == 0)
			bits = hb_splitmix64(s++);
		m[i] = (bits >> (i % 64)) & 1 ? -v : v;
	}
	hb_sha256_init(&h);
	hb_sha256_update(&h, HB_PROJECTION_DOMAIN, sizeof(HB_PROJECTION_DOMAIN));
	put_u64(head, seed);
	put_u64(head + 8, source_width);
	put_u64(head + 16, width);
	hb_sha256_update(&h, head, sizeof(head));
	hb_sha256_update(&h, m, n * sizeof(float));
	hb_sha256_final(&h, digest);
	*P = m;
	return HB_OK;
}

void hb_projection_apply(const float *P, uint32_t source_width, uint32_t width, const float *in, float *out)
{
	for (uint32_t i = 0; i < width; i++) {
		const float *r = P + (size_t)i * source_width;
		double a = 0;
		for (uint32_t j = 0; j < source_width; j++)
			a += (double)r[j] * (double)in[j];
		out[i] = (float)a;
	}
}

/* ------------------------------------------------------------ identity as metadata */

void hb_ident_meta(const struct hb_feature_ident *id, struct hb_st_meta *meta, char *buf)
{
	static const char *const keys[HB_IDENT_META] = {"artifact", "text", "projection_digest",
							 "projection_seed", "source_width", "width", "layers",
							 "split", "split_id", "tap", "format"};
	char *p = buf;
	for (unsigned i = 0; i < HB_IDENT_META; i++)
		meta[i].key = keys[i];
	hb_hex_encode(id->artifact, 32, p), meta[0].value = p, p += 65;
	hb_hex_encode(id->text, 32, p), meta[1].value = p, p += 65;
	hb_hex_encode(id->projection, 32, p), meta[2].value = p, p += 65;
	meta[3].value = p, p += snprintf(p, 24, "%" PRIu64, id->projection_seed) + 1;
	meta[4].value = p, p += snprintf(p, 16, "%" PRIu32, id->source_width) + 1;
	meta[5].value = p, p += snprintf(p, 16, "%" PRIu32, id->width) + 1;
	meta[6].value = p, p += snprintf(p, 16, "%" PRIu32, id->layers) + 1;
	meta[7].value = id->split;
	hb_hex_encode(id->split_id, 32, p), meta[8].value = p;
	meta[9].value = id->tap;
	meta[10].value = HB_FEATURE_FORMAT;
}

static int meta_hex(const struct hb_st_file *f, const char *key, uint8_t out[32], const char *diag,
		    struct hb_error *err)
{
	const char *v = hb_st_metadata_get(f, key);
	if (!v || strlen(v) != 64 || hb_hex_decode(v, out, 32))
		return hb_error_diag(err, diag, HB_ERR_FORMAT, key, false, 0, "%s: metadata '%s' is not 64 hex digits",
				     f->path, key);
	return HB_OK;
}

static int meta_u64(const struct hb_st_file *f, const char *key, uint64_t max, uint64_t *out, const char *diag,
		    struct hb_error *err)
{
	const char *v = hb_st_metadata_get(f, key);
	char *end;
	if (!v || !*v || *v == '-' || (errno = 0, *out = strtoull(v, &end, 10), *end) || errno || *out > max)
		return hb_error_diag(err, diag, HB_ERR_FORMAT, key, false, 0,
				     "%s: metadata '%s' is not an integer up to %" PRIu64, f->path, key, max);
	return HB_OK;
}

static int meta_str(const struct hb_st_file *f, const char *key, char *out, size_t cap, const char *diag,
		    struct hb_error *err)
{
	const char *v = hb_st_metadata_get(f, key);
	if (!v || strlen(v) >= cap)
		return hb_error_diag(err, diag, HB_ERR_FORMAT, key, false, 0, "%s: metadata '%s' is missing or too long",
				     f->path, key);
	memcpy(out, v, strlen(v) + 1);
	return HB_OK;
}

int hb_ident_from_meta(const struct hb_st_file *f, struct hb_feature_ident *id, const char *diag, struct hb_error *err)
{
	uint64_t sw, w, l;
	int rc;
	memset(id, 0, sizeof(*id));
	if ((rc = meta_hex(f, "artifact", id->artifact, diag, err)) || (rc = meta_hex(f, "text", id->text, diag, err)) ||
	    (rc = meta_hex(f, "projection_digest", id->projection, diag, err)) ||
	    (rc = meta_hex(f, "split_id", id->split_id, diag, err)) ||
	    (rc = meta_u64(f, "projection_seed", UINT64_MAX, &id->projection_seed, diag, err)) ||
	    (rc = meta_u64(f, "source_width", 1u << 24, &sw, diag, err)) ||
	    (rc = meta_u64(f, "width", 1u << 16, &w, diag, err)) || (rc = meta_u64(f, "layers", 4096, &l, diag, err)) ||
	    (rc = meta_str(f, "split", id->split, sizeof(id->split), diag, err)) ||
	    (rc = meta_str(f, "tap", id->tap, sizeof(id->tap), diag, err)))
		return rc;
	if (!w || !l || !sw)
		return hb_error_diag(err, diag, HB_ERR_FORMAT, "width", false, 0, "%s: a zero width or layer count",
				     f->path);
	id->source_width = (uint32_t)sw, id->width = (uint32_t)w, id->layers = (uint32_t)l;
	return HB_OK;
}

int hb_st_expect(const struct hb_st_file *f, const char *name, enum hb_dtype dtype, unsigned ndim,
		 const uint64_t *shape, const char *diag, struct hb_error *err)
{
	const struct hb_st_tensor *t = hb_st_find(f, name);
	bool ok = t && t->dtype == dtype && t->ndim == ndim;
	for (unsigned d = 0; ok && d < ndim; d++)
		ok = t->shape[d] == shape[d];
	if (!ok)
		return hb_error_diag(err, diag, HB_ERR_FORMAT, name, false, 0,
				     "%s: tensor '%s' is missing or has another dtype or shape", f->path, name);
	return HB_OK;
}

int hb_st_take(const struct hb_st_file *f, const char *name, enum hb_dtype dtype, unsigned ndim,
	       const uint64_t *shape, void *dst, const char *diag, struct hb_error *err)
{
	const struct hb_st_tensor *t = hb_st_find(f, name);
	size_t len;
	int rc;
	if ((rc = hb_st_expect(f, name, dtype, ndim, shape, diag, err)))
		return rc;
	if (hb_size_from_u64(t->nbytes, &len))
		return hb_error_set(err, HB_ERR_OVERFLOW, name, "tensor too large");
	return len ? hb_st_read(f, t, 0, dst, len, err) : HB_OK;
}

/* ------------------------------------------------------------ sets in memory */

void hb_feature_set_init(struct hb_feature_set *s, const struct hb_feature_ident *id)
{
	memset(s, 0, sizeof(*s));
	s->id = *id;
}

static int grow(struct hb_feature_set *s, uint64_t need, struct hb_error *err)
{
	size_t row = (size_t)s->id.layers * s->id.width;
	uint64_t cap = s->cap ? s->cap : 256;
	void *p;
	if (need <= s->cap && s->x)
		return HB_OK;
	while (cap < need)
		cap *= 2;
#define G(f, sz)                                                                       \
	do {                                                                           \
		if (!(p = realloc(s->f, (size_t)cap * (sz))))                          \
			return hb_error_set(err, HB_ERR_NOMEM, "features", "out of memory"); \
		s->f = p;                                                              \
	} while (0)
	G(sequence, sizeof(uint64_t));
	G(position, sizeof(uint64_t));
	G(owner, sizeof(uint64_t));
	G(thread, sizeof(uint64_t));
	G(x, row * sizeof(float));
#undef G
	s->cap = cap;
	return HB_OK;
}

int hb_feature_append(struct hb_feature_set *s, uint64_t sequence, uint64_t position, uint64_t owner,
		      uint64_t thread, const float *x, struct hb_error *err)
{
	size_t row = (size_t)s->id.layers * s->id.width;
	int rc = grow(s, s->n + 1, err);
	if (rc)
		return rc;
	s->sequence[s->n] = sequence;
	s->position[s->n] = position;
	s->owner[s->n] = owner;
	s->thread[s->n] = thread;
	memcpy(s->x + (size_t)s->n * row, x, row * sizeof(float));
	s->n++;
	return HB_OK;
}

void hb_feature_set_release(struct hb_feature_set *s)
{
	free(s->sequence);
	free(s->position);
	free(s->owner);
	free(s->thread);
	free(s->x);
	memset(s, 0, sizeof(*s));
}

uint64_t hb_feature_row_bytes(uint32_t layers, uint32_t width)
{
	return (uint64_t)layers * width * 4 + 4 * 8;
}

/* ------------------------------------------------------------ on disk */

static cJSON *ident_json(const struct hb_feature_ident *id)
{
	cJSON *o = cJSON_CreateObject(), *p;
	char hex[65];
	hb_json_add_str(o, "format", HB_FEATURE_FORMAT);
	hb_hex_encode(id->artifact, 32, hex);
	hb_json_add_str(o, "artifact", hex);
	hb_hex_encode(id->text, 32, hex);
	hb_json_add_str(o, "text", hex);
	hb_json_add_str(o, "tap", id->tap);
	hb_json_add_u64(o, "layers", id->layers);
	p = cJSON_AddObjectToObject(o, "projection");
	hb_json_add_str(p, "seed", (snprintf(hex, sizeof(hex), "%" PRIu64, id->projection_seed), hex));
	hb_hex_encode(id->projection, 32, hex);
	hb_json_add_str(p, "digest", hex);
	hb_json_add_u64(p, "source_width", id->source_width);
	hb_json_add_u64(p, "width", id->width);
	p = cJSON_AddObjectToObject(o, "split");
	hb_json_add_str(p, "name", id->split);
	hb_hex_encode(id->split_id, 32, hex);
	hb_json_add_str(p, "id", hex);
	return o;
}

struct hb_feature_writer {
	char *dir;
	struct hb_feature_set buf;         /* the rows of the shard being filled */
	uint64_t rows_per_shard, shards, total, rows;
	cJSON *root, *list;
	struct hb_st_meta meta[HB_IDENT_META];
	char metabuf[512];
};

int hb_feature_writer_open(struct hb_feature_writer **out, const char *dir, const struct hb_feature_ident *id,
			   uint64_t rows_per_shard, struct hb_error *err)
{
	struct hb_feature_writer *w = calloc(1, sizeof(*w));
	*out = NULL;
	if (!w || !(w->dir = strdup(dir)) || !(w->root = ident_json(id)) ||
	    !(w->list = cJSON_CreateArray())) {
		hb_feature_writer_abort(w);
		return hb_error_set(err, HB_ERR_NOMEM, dir, "out of memory");
	}
	if (mkdir(dir, 0777) && errno != EEXIST) {
		int e = errno;
		hb_feature_writer_abort(w);
		return hb_error_sys(err, e, dir, "cannot create the feature directory");
	}
	hb_feature_set_init(&w->buf, id);
	hb_ident_meta(&w->buf.id, w->meta, w->metabuf);
	w->rows_per_shard = rows_per_shard ? rows_per_shard : UINT64_MAX;
	*out = w;
	return HB_OK;
}

static int flush_shard(struct hb_feature_writer *w, struct hb_error *err)
{
	const struct hb_feature_set *s = &w->buf;
	uint64_t n = s->n, b;
	uint8_t sha[32];
	char name[64], path[4096], hex[65];
	struct hb_st_out t[5] = {
		{"features", HB_DTYPE_F32, 3, {n, s->id.layers, s->id.width}, s->x},
		{"sequence", HB_DTYPE_U64, 1, {n}, s->sequence},
		{"position", HB_DTYPE_U64, 1, {n}, s->position},
		{"owner", HB_DTYPE_U64, 1, {n}, s->owner},
		{"thread", HB_DTYPE_U64, 1, {n}, s->thread},
	};
	cJSON *e;
	int rc;

	snprintf(name, sizeof(name), "features-%06" PRIu64 ".safetensors", w->shards);
	snprintf(path, sizeof(path), "%s/%s", w->dir, name);
	if ((rc = hb_st_write_file(path, t, 5, w->meta, HB_IDENT_META, true, sha, &b, err)))
		return rc;
	e = cJSON_CreateObject();
	hb_json_add_str(e, "file", name);
	hb_json_add_u64(e, "rows", n);
	hb_json_add_u64(e, "bytes", b);
	hb_hex_encode(sha, 32, hex);
	hb_json_add_str(e, "sha256", hex);
	cJSON_AddItemToArray(w->list, e);
	w->shards++;
	w->total += b;
	w->rows += n;
	w->buf.n = 0;
	return HB_OK;
}

int hb_feature_writer_add(struct hb_feature_writer *w, uint64_t sequence, uint64_t position, uint64_t owner,
			  uint64_t thread, const float *x, struct hb_error *err)
{
	int rc = hb_feature_append(&w->buf, sequence, position, owner, thread, x, err);
	if (!rc && w->buf.n >= w->rows_per_shard)
		rc = flush_shard(w, err);
	return rc;
}

int hb_feature_writer_close(struct hb_feature_writer *w, uint64_t *bytes, struct hb_error *err)
{
	char path[4096], *text = NULL;
	size_t tlen;
	int rc = HB_OK;

	if (w->buf.n || !w->shards)
		rc = flush_shard(w, err);
	if (!rc) {
		hb_json_add_u64(w->root, "rows", w->rows);
		hb_json_add_u64(w->root, "row_bytes", hb_feature_row_bytes(w->buf.id.layers, w->buf.id.width));
		hb_json_add_u64(w->root, "bytes", w->total);
		cJSON_AddItemToObject(w->root, "shards", w->list);
		w->list = NULL;
		rc = hb_json_render(w->root, true, &text, &tlen, err);
	}
	if (!rc) {
		snprintf(path, sizeof(path), "%s/%s", w->dir, HB_FEATURE_MANIFEST);
		rc = hb_publish_buf(path, text, tlen, HB_PUBLISH_REPLACE, err);
	}
	if (!rc && bytes)
		*bytes = w->total;
	free(text);
	hb_feature_writer_abort(w);
	return rc;
}

void hb_feature_writer_abort(struct hb_feature_writer *w)
{
	if (!w)
		return;
	hb_feature_set_release(&w->buf);
	cJSON_Delete(w->root);
	cJSON_Delete(w->list);
	free(w->dir);
	free(w);
}

int hb_feature_dir_write(const char *dir, const struct hb_feature_set *s, uint64_t rows_per_shard, uint64_t *bytes,
			 struct hb_error *err)
{
	struct hb_feature_writer *w;
	size_t row = (size_t)s->id.layers * s->id.width;
	int rc = hb_feature_writer_open(&w, dir, &s->id, rows_per_shard, err);
	for (uint64_t i = 0; !rc && i < s->n; i++)
		rc = hb_feature_writer_add(w, s->sequence[i], s->position[i], s->owner[i], s->thread[i],
					   s->x + (size_t)i * row, err);
	if (rc) {
		hb_feature_writer_abort(w);
		return rc;
	}
	return hb_feature_writer_close(w, bytes, err);
}

static int same_ident(const struct hb_feature_ident *a, const struct hb_feature_ident *b)
{
	return !memcmp(a->artifact, b->artifact, 32) && !memcmp(a->text, b->text, 32) &&
	       !memcmp(a->projection, b->projection, 32) && !memcmp(a->split_id, b->split_id, 32) &&
	       a->projection_seed == b->projection_seed && a->width == b->width &&
	       a->source_width == b->source_width && a->layers == b->layers && !strcmp(a->split, b->split) &&
	       !strcmp(a->tap, b->tap);
}

static int load_shard(const char *path, const cJSON *e, struct hb_feature_set *s, struct hb_error *err)
{
	struct hb_st_file f;
	struct hb_feature_ident id;
	const char *want;
	uint8_t sha[32], wsha[32];
	uint64_t rows, bytes;
	char *data = NULL;
	size_t len, row = (size_t)s->id.layers * s->id.width;
	int rc;

	memset(&f, 0, sizeof(f));
	f.fd = -1;
	{
		/* the helper's error names the field; the refusal is feature-manifest */
		struct hb_error sub;
		hb_error_clear(&sub);
		if (hb_json_u64(e, "rows", "shards[].rows", &rows, &sub) ||
		    hb_json_u64(e, "bytes", "shards[].bytes", &bytes, &sub) ||
		    hb_json_str(e, "sha256", "shards[].sha256", &want, &sub))
			return hb_error_diag(err, DIAG(FEATURE_MANIFEST), HB_ERR_FORMAT, sub.field, false, 0,
					     "%s: bad shard entry: %s", path, sub.msg);
	}
	if (strlen(want) != 64 || hb_hex_decode(want, wsha, 32))
		return hb_error_diag(err, DIAG(FEATURE_MANIFEST), HB_ERR_FORMAT, path, false, 0, "bad sha256");
	if ((rc = hb_read_file(path, UINT64_C(1) << 40, &data, &len, err)))
		return rc;
	hb_sha256_buf(data, len, sha);
	free(data);
	if (len != bytes || memcmp(sha, wsha, 32))
		return hb_error_diag(err, DIAG(FEATURE_DIGEST), HB_ERR_DIGEST, path, false, 0,
				     "size or SHA-256 differ from the manifest's");
	if ((rc = hb_st_open(&f, path, err)))
		return rc;
	if ((rc = hb_ident_from_meta(&f, &id, DIAG(FEATURE_IDENTITY), err)))
		goto out;
	if (!same_ident(&id, &s->id)) {
		rc = hb_error_diag(err, DIAG(FEATURE_IDENTITY), HB_ERR_CONTRACT, path, false, 0,
				   "the shard's identity differs from its manifest's");
		goto out;
	}
	{
		uint64_t sh3[3] = {rows, s->id.layers, s->id.width}, sh1[1] = {rows};
		const char *d = DIAG(FEATURE_IDENTITY);
		/* the shapes first: what the manifest claims is allocated only
		 * once the shard holds it (a hostile count is refused here) */
		if ((rc = hb_st_expect(&f, "features", HB_DTYPE_F32, 3, sh3, d, err)) ||
		    (rc = hb_st_expect(&f, "sequence", HB_DTYPE_U64, 1, sh1, d, err)) ||
		    (rc = hb_st_expect(&f, "position", HB_DTYPE_U64, 1, sh1, d, err)) ||
		    (rc = hb_st_expect(&f, "owner", HB_DTYPE_U64, 1, sh1, d, err)) ||
		    (rc = hb_st_expect(&f, "thread", HB_DTYPE_U64, 1, sh1, d, err)) ||
		    (rc = grow(s, s->n + rows, err)))
			goto out;
		if ((rc = hb_st_take(&f, "features", HB_DTYPE_F32, 3, sh3, s->x + (size_t)s->n * row, d, err)) ||
		    (rc = hb_st_take(&f, "sequence", HB_DTYPE_U64, 1, sh1, s->sequence + s->n, d, err)) ||
		    (rc = hb_st_take(&f, "position", HB_DTYPE_U64, 1, sh1, s->position + s->n, d, err)) ||
		    (rc = hb_st_take(&f, "owner", HB_DTYPE_U64, 1, sh1, s->owner + s->n, d, err)) ||
		    (rc = hb_st_take(&f, "thread", HB_DTYPE_U64, 1, sh1, s->thread + s->n, d, err)))
			goto out;
	}
	s->n += rows;
out:
	hb_st_close(&f);
	return rc;
}

static int ident_from_json(const cJSON *root, const char *path, struct hb_feature_ident *id, struct hb_error *err)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "projection");
	const cJSON *sp = cJSON_GetObjectItemCaseSensitive(root, "split");
	const char *fmt, *a, *t, *tap, *seed, *dg, *sn, *sid;
	uint64_t l, w, sw;
	char *end;
	/* the helpers' own errors name the field; the refusal is always
	 * feature-manifest, whatever failed first */
	struct hb_error sub;

	hb_error_clear(&sub);
	memset(id, 0, sizeof(*id));
	if (hb_json_str(root, "format", "format", &fmt, &sub) || strcmp(fmt, HB_FEATURE_FORMAT) ||
	    hb_json_str(root, "artifact", "artifact", &a, &sub) || hb_json_str(root, "text", "text", &t, &sub) ||
	    hb_json_str(root, "tap", "tap", &tap, &sub) || hb_json_u64(root, "layers", "layers", &l, &sub) || !p || !sp ||
	    hb_json_str(p, "seed", "projection.seed", &seed, &sub) ||
	    hb_json_str(p, "digest", "projection.digest", &dg, &sub) ||
	    hb_json_u64(p, "width", "projection.width", &w, &sub) ||
	    hb_json_u64(p, "source_width", "projection.source_width", &sw, &sub) ||
	    hb_json_str(sp, "name", "split.name", &sn, &sub) || hb_json_str(sp, "id", "split.id", &sid, &sub) ||
	    strlen(a) != 64 || hb_hex_decode(a, id->artifact, 32) || strlen(t) != 64 || hb_hex_decode(t, id->text, 32) ||
	    strlen(dg) != 64 || hb_hex_decode(dg, id->projection, 32) || strlen(sid) != 64 ||
	    hb_hex_decode(sid, id->split_id, 32) || strlen(sn) >= sizeof(id->split) || strlen(tap) >= sizeof(id->tap) ||
	    !l || l > 4096 || !w || w > (1u << 16) || !sw || sw > (1u << 24) || !*seed ||
	    (errno = 0, id->projection_seed = strtoull(seed, &end, 10), *end) || errno)
		return hb_error_diag(err, DIAG(FEATURE_MANIFEST), HB_ERR_FORMAT, sub.field[0] ? sub.field : path, false,
				     0, "%s: not a %s manifest with every identity field", path, HB_FEATURE_FORMAT);
	memcpy(id->split, sn, strlen(sn) + 1);
	memcpy(id->tap, tap, strlen(tap) + 1);
	id->layers = (uint32_t)l, id->width = (uint32_t)w, id->source_width = (uint32_t)sw;
	return HB_OK;
}

int hb_feature_dir_load(const char *dir, struct hb_feature_set *s, struct hb_error *err)
{
	char path[4096];
	cJSON *root = NULL;
	const cJSON *shards, *e;
	struct hb_feature_ident id;
	struct hb_error scratch;
	int rc;

	memset(s, 0, sizeof(*s));
	snprintf(path, sizeof(path), "%s/%s", dir, HB_FEATURE_MANIFEST);
	if ((rc = hb_json_parse_file(path, 64u << 20, &root, err)))
		return rc;
	hb_error_clear(&scratch);
	if ((rc = ident_from_json(root, path, &id, &scratch))) {
		*err = scratch;
		goto out;
	}
	hb_feature_set_init(s, &id);
	shards = cJSON_GetObjectItemCaseSensitive(root, "shards");
	if (!cJSON_IsArray(shards) || !cJSON_GetArraySize(shards)) {
		rc = hb_error_diag(err, DIAG(FEATURE_MANIFEST), HB_ERR_FORMAT, path, false, 0, "no shards");
		goto out;
	}
	cJSON_ArrayForEach(e, shards) {
		const char *file;
		if (hb_json_str(e, "file", "shards[].file", &file, &scratch) || strchr(file, '/') || file[0] == '.') {
			rc = hb_error_diag(err, DIAG(FEATURE_MANIFEST), HB_ERR_FORMAT, path, false, 0,
					   "a shard entry has no plain file name");
			goto out;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, file);
		if ((rc = load_shard(path, e, s, err)))
			goto out;
	}
out:
	cJSON_Delete(root);
	if (rc)
		hb_feature_set_release(s);
	return rc;
}

/* ------------------------------------------------------------ checks */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int hb_feature_check_disjoint(const struct hb_feature_set *a, const struct hb_feature_set *b, struct hb_error *err)
{
	uint64_t *t = malloc((a->n ? a->n : 1) * sizeof(uint64_t));
	int rc = HB_OK;
	if (!t)
		return hb_error_set(err, HB_ERR_NOMEM, "features", "out of memory");
	memcpy(t, a->thread, a->n * sizeof(uint64_t));
	qsort(t, a->n, sizeof(uint64_t), cmp_u64);
	for (uint64_t i = 0; i < b->n && !rc; i++)
		if (bsearch(&b->thread[i], t, a->n, sizeof(uint64_t), cmp_u64))
			rc = hb_error_diag(err, DIAG(FEATURE_LEAK), HB_ERR_CONTRACT, "thread", false, 0,
					   "thread %" PRIu64 " is in both the %s and the %s split", b->thread[i],
					   a->id.split, b->id.split);
	free(t);
	return rc;
}

int hb_feature_check_same_origin(const struct hb_feature_ident *a, const struct hb_feature_ident *b,
				 const char *what, struct hb_error *err)
{
	const char *field = NULL;
	if (memcmp(a->artifact, b->artifact, 32))
		field = "artifact";
	else if (memcmp(a->text, b->text, 32))
		field = "text";
	else if (memcmp(a->projection, b->projection, 32) || a->width != b->width)
		field = "projection";
	else if (memcmp(a->split_id, b->split_id, 32))
		field = "split_id";
	else if (a->layers != b->layers || strcmp(a->tap, b->tap))
		field = "layers";
	if (field)
		return hb_error_diag(err, DIAG(FEATURE_IDENTITY), HB_ERR_CONTRACT, field, false, 0,
				     "%s: its %s differs from the train features'", what, field);
	return HB_OK;
}

/* ------------------------------------------------------------ parity */

struct fkey {
	uint64_t seq, pos;
	uint64_t row;
};

static int cmp_fkey(const void *a, const void *b)
{
	const struct fkey *x = a, *y = b;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

int hb_feature_compare(const struct hb_feature_set *dec, const struct hb_feature_set *rep, double tol,
		       struct hb_feature_parity *st, struct hb_error *err)
{
	const struct hb_feature_ident *a = &dec->id, *b = &rep->id;
	size_t W = (size_t)a->layers * a->width;
	struct fkey *keys;
	int rc = HB_OK;

	memset(st, 0, sizeof(*st));
	if (memcmp(a->artifact, b->artifact, 32) || memcmp(a->text, b->text, 32) ||
	    memcmp(a->projection, b->projection, 32) || a->projection_seed != b->projection_seed ||
	    a->width != b->width || a->source_width != b->source_width || a->layers != b->layers || strcmp(a->tap, b->tap))
		return hb_error_diag(err, DIAG(FEATURE_IDENTITY), HB_ERR_CONTRACT, "projection", false, 0,
				     "the decode and replay features differ in artifact, text, projection, tap or layers");
	if (!(keys = malloc((rep->n + 1) * sizeof(*keys))))
		return hb_error_set(err, HB_ERR_NOMEM, "features", "out of memory");
	for (uint64_t i = 0; i < rep->n; i++)
		keys[i] = (struct fkey){rep->sequence[i], rep->position[i], i};
	qsort(keys, rep->n, sizeof(*keys), cmp_fkey);
	for (uint64_t i = 0; i < dec->n; i++) {
		struct fkey k = {dec->sequence[i], dec->position[i], 0};
		const struct fkey *f = bsearch(&k, keys, rep->n, sizeof(*keys), cmp_fkey);
		const float *x = dec->x + i * W, *y;
		double worst = 0;
		if (!f || rep->owner[f->row] != dec->owner[i] || rep->thread[f->row] != dec->thread[i]) {
			if (!st->failures++)
				rc = hb_error_diag(err, DIAG(FEATURE_PARITY), HB_ERR_CONTRACT, "row", false, 0,
						   "decode row %" PRIu64 " (sequence %" PRIu64 ", position %" PRIu64
						   ") has %s", i, k.seq, k.pos, f ? "another owner or thread" : "no replay row");
			continue;
		}
		y = rep->x + f->row * W;
		st->rows++;
		for (size_t j = 0; j < W; j++) {
			double d = isnan(x[j]) || isnan(y[j]) ? INFINITY : fabs((double)x[j] - (double)y[j]);
			st->floats++;
			st->identical += !memcmp(&x[j], &y[j], sizeof(float));
			worst = d > worst ? d : worst;
		}
		st->max_abs = worst > st->max_abs ? worst : st->max_abs;
		if (!(worst <= tol) && !st->failures++)
			rc = hb_error_diag(err, DIAG(FEATURE_PARITY), HB_ERR_CONTRACT, "row", false, 0,
					   "decode row %" PRIu64 " (sequence %" PRIu64 ", position %" PRIu64
					   ") differs from replay's by %.3g, beyond %.3g", i, k.seq, k.pos, worst, tol);
	}
	free(keys);
	return rc;
}
