/*
 * hb_convert_data.c: moving tensor bytes into the artifact, in bounded
 * chunks (memory does not grow with the checkpoint: one chunk of a dense
 * tensor, one expert, or one block of PLE rows at a time).
 *
 * Exactness: a dense tensor keeps its source precision (bytes copied); an
 * FP8 E4M3 tensor is dequantised as upstream does, fp8 -> f32 times its
 * 128x128 block's f32 scale_inv, and stored as F32.  BF16 experts into the
 * bf16 codec and BF16 PLE rows into the bf16 PLE codec are bit-exact copies;
 * any other source precision into a bf16 codec is rounded to nearest even,
 * and the report says so.
 */
#include "hb_base.h"
#include "hb_checked.h"
#include "hb_convert_int.h"
#include "hb_half.h"
#include "hb_io.h"

#define COPY_CHUNK (8u << 20)
#define PLE_CHUNK_ROWS 4096u

/* Rows [row0, row0 + rows) of matrix `lead` of a (possibly 3-D) tensor whose
 * matrices are R x C, decoded to float32. */
struct matrix_src {
	struct hb_st_ref ref;
	struct hb_st_ref scale;   /* FP8 only */
	bool fp8;
	uint64_t lead, R, C, row0, rows;
};

static int decode_rows(const struct hb_conv *c, const struct matrix_src *m, float *out,
		       uint8_t *raw, struct hb_error *err)
{
	unsigned es = hb_dtype_size(m->ref.tensor->dtype);
	uint64_t first = (m->lead * m->R + m->row0) * m->C, n = m->rows * m->C;
	const char *name = m->ref.tensor->name;
	int rc;

	rc = hb_st_read(m->ref.file, m->ref.tensor, first * es, raw, (size_t)(n * es), err);
	if (rc)
		return rc;
	switch (m->ref.tensor->dtype) {
	case HB_DTYPE_BF16:
		for (uint64_t i = 0; i < n; i++)
			out[i] = hb_bf16_to_f32((uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8));
		return HB_OK;
	case HB_DTYPE_F16:
		for (uint64_t i = 0; i < n; i++)
			out[i] = hb_f16_to_f32((uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8));
		return HB_OK;
	case HB_DTYPE_F32:
		memcpy(out, raw, (size_t)n * 4);
		return HB_OK;
	case HB_DTYPE_F8_E4M3: {
		uint64_t br = c->cfg.fp8_block_rows, bc = c->cfg.fp8_block_cols;
		uint64_t sr = (m->R + br - 1) / br, sc = (m->C + bc - 1) / bc;
		uint64_t need = sr * sc;
		float *scales = malloc((size_t)need * sizeof(float));
		if (!scales)
			return hb_error_set(err, HB_ERR_NOMEM, name, "out of memory");
		rc = hb_st_read(m->scale.file, m->scale.tensor, m->lead * need * 4, scales,
				(size_t)need * 4, err);
		for (uint64_t r = 0; !rc && r < m->rows; r++) {
			const float *srow = scales + ((m->row0 + r) / br) * sc;
			for (uint64_t k = 0; k < m->C; k++)
				out[r * m->C + k] = hb_fp8e4m3_to_f32(raw[r * m->C + k]) * srow[k / bc];
		}
		free(scales);
		return rc;
	}
	default:
		return hb_error_diag(err, "inv-dtype", HB_ERR_CONTRACT, name, false, 0, "cannot decode %s",
				     hb_dtype_name(m->ref.tensor->dtype));
	}
}

static void progress(struct hb_conv *c, uint64_t n)
{
	c->bytes_written += n;
	if (c->o->progress)
		hb_progress_add(c->o->progress, n);
}

static int copy_dense(struct hb_conv *c, const struct hb_conv_dense *d, uint64_t dst,
		      uint8_t *buf, struct hb_error *err)
{
	const struct hb_st_tensor *t = d->src.tensor;

	for (uint64_t off = 0; off < t->nbytes;) {
		size_t n = (size_t)(t->nbytes - off < COPY_CHUNK ? t->nbytes - off : COPY_CHUNK);
		int rc = hb_st_read(d->src.file, t, off, buf, n, err);
		if (!rc)
			rc = hb_pwrite_full(c->pub.fd, buf, n, dst + off, c->o->out_path, err);
		if (rc)
			return rc;
		progress(c, n);
		off += n;
	}
	return HB_OK;
}

static int dequant_dense(struct hb_conv *c, const struct hb_conv_dense *d, uint64_t dst,
			 uint8_t *raw, struct hb_error *err)
{
	const struct hb_st_tensor *t = d->src.tensor;
	uint64_t R = t->shape[0], C = t->ndim > 1 ? t->shape[1] : 1;
	uint64_t step = COPY_CHUNK / 4 / (C ? C : 1);
	float *f = malloc(COPY_CHUNK + 16);
	int rc = HB_OK;

	if (!f)
		return hb_error_set(err, HB_ERR_NOMEM, t->name, "out of memory");
	if (!step)
		step = 1;
	for (uint64_t r = 0; !rc && r < R; r += step) {
		struct matrix_src m = { d->src, d->scale_src, true, 0, R, C, r, R - r < step ? R - r : step };
		rc = decode_rows(c, &m, f, raw, err);
		if (!rc)
			rc = hb_pwrite_full(c->pub.fd, f, (size_t)(m.rows * C * 4), dst + r * C * 4,
					    c->o->out_path, err);
		if (!rc)
			progress(c, m.rows * C);
	}
	free(f);
	return rc;
}

int hb_conv_write_dense(struct hb_conv *c, struct hb_error *err)
{
	uint8_t *buf = malloc(COPY_CHUNK);
	int rc = HB_OK;

	if (!buf)
		return hb_error_set(err, HB_ERR_NOMEM, "dense", "out of memory");
	for (size_t i = 0; !rc && i < c->n_dense; i++) {
		const struct hb_conv_dense *d = &c->dense[i];
		uint64_t dst = c->gw.tensors[d->gguf_index].offset;
		if (d->src.tensor->dtype == HB_DTYPE_F8_E4M3)
			rc = dequant_dense(c, d, dst, buf, err);
		else
			rc = copy_dense(c, d, dst, buf, err);
	}
	free(buf);
	return rc;
}

/* ---------------------------------------------------------------- experts */

/* Per-worker working memory: one expert decoded and encoded. */
struct expert_slot {
	float *f[3];
	uint8_t *raw;            /* source bytes of one matrix, or bf16 copies */
	uint8_t *record;         /* the encoded record */
	uint8_t *bf16[3];        /* exact path: raw bf16 matrices */
	uint64_t src_bytes;
	uint8_t digest[HB_SHA256_BYTES]; /* of the record as stored */
	bool exact;
	struct hb_error err;
};

struct expert_batch {
	struct hb_conv *c;
	struct expert_slot *slots;
	uint32_t layer, first;   /* experts [first, first + jobs) */
};

static int find_ref(const struct hb_conv *c, const char *name, struct hb_st_ref *out,
		    struct hb_error *err)
{
	if (!hb_st_checkpoint_find(&c->ck, name, out))
		return hb_error_diag(err, "inv-missing-tensor", HB_ERR_CONTRACT, name, false, 0,
				     "tensor vanished from the checkpoint");
	return HB_OK;
}

/* The three matrices of (layer, expert) as matrix sources. */
static int expert_sources(const struct hb_conv *c, uint32_t layer, uint32_t expert,
			  struct matrix_src m[3], struct hb_error *err)
{
	static const char *const roles[3] = {"gate", "up", "down"};
	uint64_t H = c->cfg.hidden_size, I = c->cfg.moe_intermediate_size;
	char name[200], sname[220];
	int rc;

	memset(m, 0, 3 * sizeof(*m));
	for (int k = 0; k < 3; k++) {
		if (c->inv.expert_layout == HB_EXPERTS_PACKED) {
			snprintf(name, sizeof(name), "model.language_model.layers.%u.mlp.experts.%s",
				 layer, k < 2 ? "gate_up_proj" : "down_proj");
			m[k].lead = expert;
			m[k].R = k < 2 ? 2 * I : H;
			m[k].C = k < 2 ? H : I;
			/* upstream chunks the gate_up output: gate rows first */
			m[k].row0 = k == 1 ? I : 0;
			m[k].rows = k < 2 ? I : H;
		} else {
			snprintf(name, sizeof(name), "model.language_model.layers.%u.mlp.experts.%u.%s_proj.weight",
				 layer, expert, roles[k]);
			m[k].R = m[k].rows = k < 2 ? I : H;
			m[k].C = k < 2 ? H : I;
		}
		if ((rc = find_ref(c, name, &m[k].ref, err)))
			return rc;
		m[k].fp8 = m[k].ref.tensor->dtype == HB_DTYPE_F8_E4M3;
		if (m[k].fp8) {
			snprintf(sname, sizeof(sname), "%s_scale_inv", name);
			if ((rc = find_ref(c, sname, &m[k].scale, err)))
				return rc;
		}
	}
	return HB_OK;
}

/* Worker: read one expert and encode it into its slot (no writes). */
static int prepare_expert(void *ctx, size_t job, unsigned worker)
{
	struct expert_batch *b = ctx;
	struct hb_conv *c = b->c;
	struct expert_slot *s = &b->slots[job];
	uint32_t expert = b->first + (uint32_t)job;
	struct matrix_src m[3];
	int rc;

	(void)worker;
	hb_error_clear(&s->err);
	rc = expert_sources(c, b->layer, expert, m, &s->err);
	s->exact = c->o->expert_codec == HB_CONV_EXPERTS_BF16;
	s->src_bytes = 0;
	for (int k = 0; !rc && k < 3; k++) {
		s->exact &= m[k].ref.tensor->dtype == HB_DTYPE_BF16;
		s->src_bytes += m[k].rows * m[k].C * hb_dtype_size(m[k].ref.tensor->dtype);
	}
	if (rc)
		return rc;
	if (s->exact) {
		/* bit-exact: raw bf16 bytes, never through float; the record is
		 * gate|up|down back to back, so its digest is over the three */
		struct hb_sha256 h;
		hb_sha256_init(&h);
		for (int k = 0; !rc && k < 3; k++) {
			size_t n = (size_t)(m[k].rows * m[k].C * 2);
			rc = hb_st_read(m[k].ref.file, m[k].ref.tensor,
					(m[k].lead * m[k].R + m[k].row0) * m[k].C * 2, s->bf16[k], n, &s->err);
			hb_sha256_update(&h, s->bf16[k], n);
		}
		hb_sha256_final(&h, s->digest);
		return rc;
	}
	for (int k = 0; !rc && k < 3; k++)
		rc = decode_rows(c, &m[k], s->f[k], s->raw, &s->err);
	if (!rc)
		rc = hb_em_encode_record(&c->em_plan, b->layer, expert, s->f[0], s->f[1], s->f[2],
					 s->record, &s->err);
	if (!rc)
		hb_sha256_buf(s->record, (size_t)c->em_plan.layers[b->layer].record_bytes, s->digest);
	return rc;
}

static void slots_free(struct expert_slot *slots, unsigned n)
{
	for (unsigned i = 0; slots && i < n; i++) {
		for (int k = 0; k < 3; k++) {
			free(slots[i].f[k]);
			free(slots[i].bf16[k]);
		}
		free(slots[i].raw);
		free(slots[i].record);
	}
	free(slots);
}

/*
 * Enough slots to keep every thread busy, but no more than about 128 MiB of
 * working memory whatever the geometry (the converter's memory must not grow
 * with the checkpoint, and one real-geometry slot is ~36 MiB).
 */
static unsigned slot_count(const struct hb_conv *c, uint64_t per_slot)
{
	unsigned n = hb_pool_size(c->pool);
	uint64_t cap = (128u << 20) / (per_slot ? per_slot : 1);

	if (cap < 1)
		cap = 1;
	if (n > cap)
		n = (unsigned)cap;
	if (n > c->em_geom.experts)
		n = c->em_geom.experts;
	return n ? n : 1;
}

int hb_conv_write_experts(struct hb_conv *c, struct hb_error *err)
{
	struct hb_em_writer w;
	uint64_t elems = c->cfg.hidden_size * c->cfg.moe_intermediate_size;
	uint64_t base = c->gw.tensors[c->em_index].offset;
	uint64_t per_slot = elems * (3 * 4 + 4 + 3 * 2) + c->em_plan.record_bytes;
	unsigned nslots = slot_count(c, per_slot);
	struct expert_slot *slots = calloc(nslots, sizeof(*slots));
	c->record_sha = calloc((size_t)c->em_geom.layers * c->em_geom.experts, 32);
	bool begun = false;
	int rc = HB_OK;

	for (unsigned i = 0; slots && i < nslots; i++) {
		for (int k = 0; k < 3; k++) {
			slots[i].f[k] = malloc((size_t)elems * 4);
			slots[i].bf16[k] = malloc((size_t)elems * 2);
			if (!slots[i].f[k] || !slots[i].bf16[k])
				rc = HB_ERR_NOMEM;
		}
		slots[i].raw = malloc((size_t)elems * 4);
		slots[i].record = malloc((size_t)c->em_plan.record_bytes);
		if (!slots[i].raw || !slots[i].record)
			rc = HB_ERR_NOMEM;
	}
	if (!slots || !c->record_sha || rc) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "experts", "out of memory");
		goto out;
	}
	rc = hb_em_writer_begin(&w, &c->em_plan, c->pub.fd, base, c->inv.bytes[HB_INV_EXPERT],
				c->inv.digest, c->inv.count[HB_INV_EXPERT], err);
	begun = !rc;
	/* Read and encode a batch in parallel, then commit it in order. */
	for (uint32_t l = 0; !rc && l < c->em_geom.layers; l++) {
		for (uint32_t e = 0; !rc && e < c->em_geom.experts; e += nslots) {
			struct expert_batch b = { c, slots, l, e };
			size_t jobs = c->em_geom.experts - e < nslots ? c->em_geom.experts - e : nslots;
			if (hb_pool_run(c->pool, jobs, prepare_expert, &b)) {
				for (size_t j = 0; j < jobs; j++)
					if (slots[j].err.code) {
						*err = slots[j].err;
						rc = slots[j].err.code;
						break;
					}
				if (!rc)
					rc = hb_error_set(err, HB_ERR_INTERNAL, "experts", "worker failed");
				break;
			}
			for (size_t j = 0; !rc && j < jobs; j++) {
				struct expert_slot *s = &slots[j];
				rc = s->exact ? hb_em_writer_put_bf16(&w, l, e + (uint32_t)j, s->bf16[0],
								       s->bf16[1], s->bf16[2], err)
					      : hb_em_writer_put_record(&w, l, e + (uint32_t)j, s->record, err);
				if (!rc) {
					memcpy(c->record_sha + ((uint64_t)l * c->em_geom.experts + e + j) * 32,
					       s->digest, 32);
					progress(c, s->src_bytes);
				}
				if (!s->exact && c->o->expert_codec == HB_CONV_EXPERTS_BF16)
					c->experts_rounded = true;
			}
		}
	}
	if (!rc) {
		rc = hb_em_writer_finish(&w, &c->em_final, err);
		c->em_finished = !rc;
	}
out:
	if (begun)
		hb_em_writer_release(&w);
	slots_free(slots, nslots);
	return rc;
}

/* -------------------------------------------------------------------- PLE */

static int cmp_shard(const void *a, const void *b)
{
	const struct hb_inv_entry *x = *(const struct hb_inv_entry *const *)a;
	const struct hb_inv_entry *y = *(const struct hb_inv_entry *const *)b;
	return (x->shard_index > y->shard_index) - (x->shard_index < y->shard_index);
}

static int put_rows(struct hb_conv *c, struct hb_ple_writer *pw, const struct hb_inv_entry *e,
		    uint8_t *raw, float *f, uint16_t *h, struct hb_error *err)
{
	struct hb_st_ref ref;
	uint64_t rows = e->src->shape[0], width = e->src->shape[1];
	enum hb_dtype dt = e->src->dtype;
	unsigned es = hb_dtype_size(dt);
	bool affine = c->o->ple_codec == HB_CONV_PLE_AFFINE4_G32;
	int rc = find_ref(c, e->src->name, &ref, err);

	for (uint64_t r = 0; !rc && r < rows; r += PLE_CHUNK_ROWS) {
		uint64_t n = rows - r < PLE_CHUNK_ROWS ? rows - r : PLE_CHUNK_ROWS;
		uint64_t cnt = n * width;
		rc = hb_st_read(ref.file, ref.tensor, r * width * es, raw, (size_t)(cnt * es), err);
		if (rc)
			break;
		if (dt == HB_DTYPE_BF16) {
			for (uint64_t i = 0; i < cnt; i++)
				h[i] = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);
			rc = hb_ple_writer_put_bf16(pw, h, n, err);
		} else {
			for (uint64_t i = 0; i < cnt; i++) {
				if (dt == HB_DTYPE_F16)
					f[i] = hb_f16_to_f32((uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8));
				else
					memcpy(&f[i], raw + 4 * i, 4);
			}
			if (affine) {
				rc = hb_ple_writer_put_f32(pw, f, n, err);
			} else {
				for (uint64_t i = 0; i < cnt; i++) {
					h[i] = hb_f32_to_bf16(f[i]);
					c->ple_rounded |= hb_bf16_to_f32(h[i]) != f[i];
				}
				rc = hb_ple_writer_put_bf16(pw, h, n, err);
			}
		}
		if (!rc)
			progress(c, cnt * es);
	}
	return rc;
}

int hb_conv_write_ple(struct hb_conv *c, struct hb_error *err)
{
	struct hb_ple_writer *pw = NULL;
	const struct hb_inv_entry **parts = NULL;
	uint64_t width, base;
	uint8_t *raw = NULL;
	float *f = NULL;
	uint16_t *h = NULL;
	int rc;

	if (!c->has_ple)
		return HB_OK;
	width = c->ple_layout.row_width;
	base = c->gw.tensors[c->ple_index].offset;
	raw = malloc((size_t)(PLE_CHUNK_ROWS * width * 4));
	f = malloc((size_t)(PLE_CHUNK_ROWS * width * 4));
	h = malloc((size_t)(PLE_CHUNK_ROWS * width * 2));
	parts = calloc(c->inv.n ? c->inv.n : 1, sizeof(*parts));
	if (!raw || !f || !h || !parts) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "ple", "out of memory");
		goto out;
	}
	rc = hb_ple_writer_begin(&pw, c->pub.fd, base, &c->ple_layout, err);
	for (size_t p = 0; !rc && p < c->cfg.n_ple_layers; p++) {
		size_t np = 0;
		for (size_t i = 0; i < c->inv.n; i++) {
			const struct hb_inv_entry *e = &c->inv.entries[i];
			if (e->role == HB_ROLE_PLE_TABLE && e->layer == (int32_t)c->ple_hash[p].layer_id - 1)
				parts[np++] = e;
		}
		qsort(parts, np, sizeof(*parts), cmp_shard);
		for (size_t k = 0; !rc && k < np; k++)
			rc = put_rows(c, pw, parts[k], raw, f, h, err);
	}
	if (!rc)
		rc = hb_ple_writer_finish(pw, c->ple_payload_sha, c->ple_manifest_sha, err);
out:
	hb_ple_writer_free(pw);
	free(raw);
	free(f);
	free(h);
	free(parts);
	return rc;
}
