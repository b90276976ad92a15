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

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define COPY_CHUNK (8u << 20)
#define PLE_CHUNK_ROWS 4096u

/* bf16 -> float32 is the 16 bits moved up (exact).  SSE2 (the x86-64
 * baseline) widens eight at a time: hb_bf16_to_f32 per value, an
 * out-of-line call, took about 4 ns a value of the affine4 conversion
 * (measured, read_s of the --json timing). */
static void widen_bf16(const uint8_t *raw, float *out, uint64_t n)
{
	uint64_t i = 0;
#if defined(__SSE2__)
	const __m128i zero = _mm_setzero_si128();
	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm_loadu_si128((const __m128i *)(const void *)(raw + 2 * i));
		_mm_storeu_si128((__m128i *)(void *)(out + i), _mm_unpacklo_epi16(zero, h));
		_mm_storeu_si128((__m128i *)(void *)(out + i + 4), _mm_unpackhi_epi16(zero, h));
	}
#endif
	for (; i < n; i++)
		out[i] = hb_bf16_to_f32((uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8));
}

int hb_conv_decode_rows(const struct hb_conv *c, const struct hb_conv_matrix *m, float *out,
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
		widen_bf16(raw, out, n);
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

void hb_conv_progress(struct hb_conv *c, uint64_t n)
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
		hb_conv_progress(c, n);
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
		struct hb_conv_matrix m = { d->src, d->scale_src, true, 0, R, C, r, R - r < step ? R - r : step };
		rc = hb_conv_decode_rows(c, &m, f, raw, err);
		if (!rc)
			rc = hb_pwrite_full(c->pub.fd, f, (size_t)(m.rows * C * 4), dst + r * C * 4,
					    c->o->out_path, err);
		if (!rc)
			hb_conv_progress(c, m.rows * C);
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

/* ---------------------------------------------------------------- experts
 * (the pipeline that writes them is hb_convert_experts.c) */

int hb_conv_find_ref(const struct hb_conv *c, const char *name, struct hb_st_ref *out,
		    struct hb_error *err)
{
	if (!hb_st_checkpoint_find(&c->ck, name, out))
		return hb_error_diag(err, "inv-missing-tensor", HB_ERR_CONTRACT, name, false, 0,
				     "tensor vanished from the checkpoint");
	return HB_OK;
}

/* The three matrices of (layer, expert) as matrix sources. */
int hb_conv_expert_sources(const struct hb_conv *c, uint32_t layer, uint32_t expert,
			   struct hb_conv_matrix m[3], struct hb_error *err)
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
		if ((rc = hb_conv_find_ref(c, name, &m[k].ref, err)))
			return rc;
		m[k].fp8 = m[k].ref.tensor->dtype == HB_DTYPE_F8_E4M3;
		if (m[k].fp8) {
			snprintf(sname, sizeof(sname), "%s_scale_inv", name);
			if ((rc = hb_conv_find_ref(c, sname, &m[k].scale, err)))
				return rc;
		}
	}
	return HB_OK;
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
	int rc = hb_conv_find_ref(c, e->src->name, &ref, err);

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
			hb_conv_progress(c, cnt * es);
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
