/*
 * hb_cuda_graph.c: the device graph, a whole chunk of the Qwen4Exp graph
 * on the GPU (hb_device_ops.chunk; the contract is graph/hb_dev_chunk.h).
 *
 * The stages are run_chunk's (libkern/graph/hb_session.c), in its order:
 * the embedding, then per layer the PLE injection, the attention
 * hyper-connection, the Gated DeltaNet or QSA mixer, its injection, the
 * MoE hyper-connection, the router and experts, their injection; then the
 * final mix and the vocabulary projection.  Activations live on the device
 * from the first stage to the last; what crosses the bus is the chunk's
 * tokens and PLE rows, the recurrent states and cache rows the chunk reads
 * and writes, each layer's routes (the experts are packed by the host from
 * them), and the logits.  The matrix products are the seam's kernels; the
 * stages between them are hb_cuda_gk.cu's.
 *
 * Per model, once: the small float vectors (norms, gates, convolution taps,
 * biases, rotary frequencies) go up into one allocation, and every routed
 * expert's three device addresses into a table, so a layer's experts run
 * as one grouped launch over all experts (an expert no token chose has an
 * empty group).
 */
#include "hb_base.h"
#include "hb_err.h"
#include "backend/hb_backend.h"
#include "graph/hb_dev_chunk.h"
#include "graph/hb_model.h"
#include "math/hb_math.h"
#include "hb_cuda_gk.h"
#include "hb_cuda_int.h"
#include "hb_cuda_kern.h"
#include "hb_cuda_mma.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ per model */

struct lvec {
	float *attn_norm, *mlp_norm, *conv, *dt_bias, *A_log, *gnorm;
	float *qb, *kb, *vb, *ob, *qn, *kn, *iqn, *ikn;
	float *pnk, *pnq, *pnc, *pconv;
};

static struct {
	const struct hb_model *m;
	uint64_t gen;
	float *arena;          /* every small vector, device */
	size_t used, cap;
	struct lvec *lv;       /* [num_layers] */
	float *mixer_norm, *inv_freq;
	const void **experts;  /* device: [L][3][E] matrix addresses */
	bool ok;               /* the model can run here (else every chunk is declined) */
	bool failed;           /* a vector did not go up */
} gm;

void hbc_graph_free(void)
{
	cudaFree(gm.arena);
	cudaFree((void *)gm.experts);
	free(gm.lv);
	memset(&gm, 0, sizeof(gm));
}

/* n floats of host vector v into the arena (NULL stays NULL); without an
 * arena yet, only counted */
static float *vec_up(const float *v, size_t n)
{
	float *d;

	if (!v || !n)
		return NULL;
	d = gm.arena ? gm.arena + gm.used : NULL;
	gm.used += (n + 63) & ~(size_t)63;
	if (d && (gm.used > gm.cap || !hbc_up(d, v, n * sizeof(float))))
		gm.failed = true;
	return d;
}

static bool same_shape(const struct hb_wmat *a, const struct hb_wmat *b)
{
	return a->type == b->type && a->rows == b->rows && a->cols == b->cols && a->row_bytes == b->row_bytes;
}

static bool expert_table(const struct hb_model *m)
{
	const struct hb_qwen_config *c = &m->cfg;
	size_t L = (size_t)c->num_layers, E = (size_t)c->num_experts;
	const void **h = malloc(L * 3 * E * sizeof(*h));
	struct hb_wmat first[3];
	bool good = h != NULL;

	for (size_t l = 0; good && l < L; l++)
		for (size_t e = 0; good && e < E; e++) {
			struct hb_wmat w[3];
			hb_model_expert(m, (uint32_t)l, (uint32_t)e, &w[0], &w[1], &w[2]);
			for (int k = 0; good && k < 3; k++) {
				if (l == 0 && e == 0)
					first[k] = w[k];
				good = same_shape(&first[k], &w[k]) &&
				       hbc_resident(w[k].data, (size_t)(w[k].rows * w[k].row_bytes)) &&
				       (h[(l * 3 + (size_t)k) * E + e] = hbc_weight(&w[k], B_W0)) != NULL;
			}
		}
	good = good && hbc_ok(cudaMalloc((void **)&gm.experts, L * 3 * E * sizeof(*h)), "the expert table") &&
	       hbc_up((void *)gm.experts, h, L * 3 * E * sizeof(*h));
	free(h);
	return good;
}

/* every small vector into the arena (with gm.arena NULL: only counted) */
static void vectors(const struct hb_model *m)
{
	const struct hb_qwen_config *c = &m->cfg;
	size_t L = (size_t)c->num_layers, H = (size_t)c->hidden_size, hcH = (size_t)c->hc_count * H;
	size_t cd = 2 * (size_t)(c->linear_num_key_heads * c->linear_key_head_dim) +
		    (size_t)(c->linear_num_value_heads * c->linear_value_head_dim);
	size_t nh = (size_t)c->num_heads, nkv = (size_t)c->num_kv_heads, hd = (size_t)c->head_dim;

	gm.mixer_norm = vec_up(m->mixer.norm, hcH);
	gm.inv_freq = vec_up(m->inv_freq, (size_t)c->rotary_dim / 2);
	for (size_t l = 0; l < L; l++) {
		const struct hb_layer_weights *w = &m->layers[l];
		struct lvec *v = &gm.lv[l];
		v->attn_norm = vec_up(w->attn_hc.norm, hcH);
		v->mlp_norm = vec_up(w->mlp_hc.norm, hcH);
		if (w->kind == HB_LAYER_LINEAR) {
			v->conv = vec_up(w->gdn.conv, cd * (size_t)c->linear_conv_kernel);
			v->dt_bias = vec_up(w->gdn.dt_bias, (size_t)c->linear_num_value_heads);
			v->A_log = vec_up(w->gdn.A_log, (size_t)c->linear_num_value_heads);
			v->gnorm = vec_up(w->gdn.norm, (size_t)c->linear_value_head_dim);
		} else {
			v->qb = vec_up(w->qsa.q_bias, 2 * nh * hd);
			v->kb = vec_up(w->qsa.k_bias, nkv * hd);
			v->vb = vec_up(w->qsa.v_bias, nkv * hd);
			v->ob = vec_up(w->qsa.o_bias, H);
			v->qn = vec_up(w->qsa.q_norm, hd);
			v->kn = vec_up(w->qsa.k_norm, hd);
			v->iqn = vec_up(w->qsa.index_q_norm, (size_t)c->indexer_head_dim);
			v->ikn = vec_up(w->qsa.index_k_norm, (size_t)c->indexer_head_dim);
		}
		if (w->has_ple) {
			v->pnk = vec_up(w->ple.norm_key, hcH);
			v->pnq = vec_up(w->ple.norm_query, hcH);
			v->pnc = vec_up(w->ple.norm_conv, hcH);
			v->pconv = vec_up(w->ple.conv, hcH * (size_t)c->ple_conv_kernel_size);
		}
	}
}

static bool model_ready(const struct hb_model *m)
{
	if (gm.m == m && gm.gen == hbc_generation())
		return gm.ok;
	hbc_graph_free();
	gm.m = m, gm.gen = hbc_generation();
	gm.lv = calloc((size_t)m->cfg.num_layers, sizeof(*gm.lv));
	if (!gm.lv)
		return false;
	vectors(m); /* counted */
	gm.cap = gm.used + 64, gm.used = 0;
	if (!hbc_ok(cudaMalloc((void **)&gm.arena, gm.cap * sizeof(float)), "the model's vectors"))
		return false;
	vectors(m);
	gm.ok = !gm.failed && hbc_ok((cudaError_t)hbg_init(hb_expf_table), "the exponential's table") &&
		expert_table(m);
	return gm.ok;
}

/* ------------------------------------------------------------ the chunk's shapes */

struct shape {
	size_t T, L, H, hc, hcH, R, E, k, I, Is, nk, nv, dk, dv, kd, vd, cd, K, nh, nkv, hd, ih, ihd, P, V;
	size_t ratio, keep, rows_ld, Kp, dil, wide;
	uint64_t rel0; /* the chunk's first cache row */
	float eps;
};

static size_t maxz(size_t a, size_t b)
{
	return a > b ? a : b;
}

static void shape_of(const struct hb_dev_chunk *ch, struct shape *s)
{
	const struct hb_qwen_config *c = &ch->m->cfg;

	memset(s, 0, sizeof(*s));
	s->T = ch->T, s->L = (size_t)c->num_layers, s->H = (size_t)c->hidden_size, s->hc = (size_t)c->hc_count;
	s->hcH = s->hc * s->H, s->R = (size_t)c->hc_lowrank, s->E = (size_t)c->num_experts;
	s->k = (size_t)c->num_experts_per_tok, s->I = (size_t)c->moe_intermediate_size;
	s->Is = (size_t)c->shared_expert_intermediate_size;
	s->nk = (size_t)c->linear_num_key_heads, s->nv = (size_t)c->linear_num_value_heads;
	s->dk = (size_t)c->linear_key_head_dim, s->dv = (size_t)c->linear_value_head_dim;
	s->kd = s->nk * s->dk, s->vd = s->nv * s->dv, s->cd = 2 * s->kd + s->vd, s->K = (size_t)c->linear_conv_kernel;
	s->nh = (size_t)c->num_heads, s->nkv = (size_t)c->num_kv_heads, s->hd = (size_t)c->head_dim;
	s->ih = (size_t)c->indexer_n_heads, s->ihd = (size_t)c->indexer_head_dim, s->P = (size_t)c->ple_embed_dim;
	s->V = (size_t)ch->m->vocab_physical;
	s->ratio = (size_t)(c->qsa ? c->indexer_compress_ratio : 1);
	s->keep = (size_t)(c->qsa ? c->indexer_budget / s->ratio : 0);
	s->rows_ld = (size_t)(c->indexer_budget + c->indexer_compress_ratio + 8);
	s->Kp = (size_t)c->ple_conv_kernel_size, s->dil = (size_t)c->ngram_size;
	s->rel0 = ch->pos - ch->base;
	s->eps = (float)c->rms_norm_eps;
	s->wide = maxz(maxz(s->hcH, s->cd), maxz(2 * s->nh * s->hd, (s->ih + 1) * s->ihd));
	s->wide = maxz(maxz(s->wide, s->E), maxz(maxz(s->Is, s->vd), maxz(s->R, 2 * s->nkv * s->hd)));
}

/* ------------------------------------------------------------ stages */

static bool ok(int e, const char *what)
{
	return hbc_ok((cudaError_t)e, what);
}

/*
 * The tensor-core products (hb_cuda_mma.h) from this many token rows (a
 * grouped product: its largest group): below it a product reads more
 * weight than it multiplies, and the float32 kernel does as well.
 * HB_CUDA_MMA=0 keeps every product on the float32 kernel (the A/B of a
 * GPU run; neither is measured yet).
 */
#define MMA_FROM 32

static bool use_mma(int type, uint64_t cols, size_t rows)
{
	const char *v = getenv("HB_CUDA_MMA");

	return rows >= MMA_FROM && !(v && !strcmp(v, "0")) && hbk_mma_takes(type, cols);
}

/* a product is an operation of the test seam's count (hb_cuda_test_fail_at) */
static bool mm(const struct hb_wmat *w, const float *x, size_t T, float *y)
{
	const void *dw = hbc_begin() ? hbc_weight(w, B_W0) : NULL;
	int t = (int)w->type;

	return dw && ok(use_mma(t, w->cols, T) ? hbk_mma_matmul(t, dw, w->row_bytes, w->rows, w->cols, x, T, y)
					       : hbk_matmul(t, dw, w->row_bytes, w->rows, w->cols, x, T, y),
			"a matrix product");
}

static bool mm_grouped(const struct hb_wmat *w, const void *const *tab, const int32_t *off, size_t groups,
		       size_t most, const float *x, float *y)
{
	int t = (int)w->type;

	return ok(use_mma(t, w->cols, most)
			  ? hbk_mma_matmul_grouped(t, tab, w->row_bytes, w->rows, w->cols, off, groups, most, x, y)
			  : hbk_matmul_grouped(t, tab, w->row_bytes, w->rows, w->cols, off, groups, most, x, y),
		  "the experts' products");
}

static float *fbuf(int i, size_t n)
{
	return hbc_buf(i, n * sizeof(float) + 64);
}

/* mixed = mean_s(sigmoid(up(silu(down(xn) / hc))) * xn); inj as hb_hc_forward */
static bool hc_forward(const struct shape *s, const struct hb_hc_weights *w, const float *norm, bool combine)
{
	float *x = fbuf(G_X, s->T * s->hcH), *xn = fbuf(G_XN, s->T * s->hcH), *mix = fbuf(G_MIX, s->T * s->H);
	float *a = fbuf(G_A, s->T * s->wide), *b = fbuf(G_B, s->T * s->wide), *inj = fbuf(G_INJ, s->T * s->hc);

	return ok(hbg_rmsnorm_zc(x, s->hcH, norm, s->hcH, s->H, s->eps, xn, s->hcH, s->T), "a norm") &&
	       mm(&w->down, xn, s->T, a) && ok(hbg_silu_div(a, s->T * s->R, (float)s->hc), "a SiLU") &&
	       mm(&w->up, a, s->T, b) && ok(hbg_hc_mix(b, xn, s->T, s->hc, s->H, mix), "the streams' mix") &&
	       (!combine || (mm(&w->inject, xn, s->T, inj) &&
			     ok(hbg_hc_inj(inj, s->T * s->hc, (float)s->hc), "the injection weights")));
}

static bool hc_add(const struct shape *s)
{
	return ok(hbg_hc_add(fbuf(G_X, s->T * s->hcH), fbuf(G_Y, s->T * s->H), fbuf(G_INJ, s->T * s->hc), s->T, s->hc,
			     s->H), "the injection");
}

static bool ple(const struct shape *s, const struct hb_ple_weights *w, const struct lvec *v, const float *emb,
		const float *from, float *to)
{
	float *x = fbuf(G_X, s->T * s->hcH), *xn = fbuf(G_XN, s->T * s->hcH), *key = fbuf(G_A, s->T * s->wide);
	float *val = fbuf(G_B, s->T * s->wide), *gv = fbuf(G_C, s->T * s->wide), *gvn = fbuf(G_D, s->T * s->wide);

	return mm(&w->key, emb, s->T, key) && mm(&w->value, emb, s->T, val) &&
	       ok(hbg_rmsnorm_zc(key, s->hcH, v->pnk, s->hcH, s->H, s->eps, key, s->hcH, s->T), "a norm") &&
	       ok(hbg_rmsnorm_zc(x, s->hcH, v->pnq, s->hcH, s->H, s->eps, xn, s->hcH, s->T), "a norm") &&
	       ok(hbg_ple_gate(key, xn, val, s->T, s->hc, s->H, gv), "the PLE gate") &&
	       ok(hbg_rmsnorm_zc(gv, s->hcH, v->pnc, s->hcH, s->H, s->eps, gvn, s->hcH, s->T), "a norm") &&
	       ok(hbg_ple_conv(v->pconv, from, to, gvn, gv, x, s->T, s->hcH, s->Kp, s->dil), "the PLE convolution");
}

static bool gdn(const struct shape *s, const struct hb_gdn_weights *w, const struct lvec *v, int sig,
		const float *cfrom, float *cto, float *S)
{
	float *mix = fbuf(G_MIX, s->T * s->H), *qkv = fbuf(G_A, s->T * s->wide), *z = fbuf(G_B, s->T * s->wide);
	float *ba = fbuf(G_C, s->T * s->wide), *conv = fbuf(G_D, s->T * s->wide), *y = fbuf(G_Y, s->T * s->H);
	size_t T = s->T;

	return mm(&w->qkv, mix, T, qkv) && mm(&w->z, mix, T, z) && mm(&w->b, mix, T, ba) &&
	       mm(&w->a, mix, T, ba + T * s->nv) &&
	       ok(hbg_gdn_conv(v->conv, cfrom, cto, qkv, conv, T, s->cd, s->K), "the convolution") &&
	       ok(hbg_l2norm_heads(conv, s->cd, T, 2 * s->nk, s->dk, 1e-6f), "the key norms") &&
	       ok(hbg_gdn_gates(ba, ba + T * s->nv, T * s->nv, s->nv, v->A_log, v->dt_bias), "the gates") &&
	       ok(hbk_gdn_scan(S, conv, s->cd, ba, ba + T * s->nv, T, s->nk, s->nv, s->dk, s->dv,
			       1.0f / sqrtf((float)s->dk), qkv, s->vd), "the delta rule") &&
	       ok(hbg_gated_norm(qkv, z, v->gnorm, T * s->nv, s->dv, s->eps, sig), "the output gate") &&
	       mm(&w->out, qkv, T, y);
}

/* the groups complete after query t of the chunk (AFN-018: anchored at the first live position) */
static uint64_t groups_after(const struct shape *s, uint64_t from, size_t t)
{
	return from + (s->rel0 + t + 1) / s->ratio - s->rel0 / s->ratio;
}

static size_t sel_count(const struct shape *s, uint64_t groups, uint64_t visible)
{
	uint64_t kept = groups < s->keep ? groups : s->keep;

	return (size_t)(kept * s->ratio + (visible - groups * s->ratio));
}

static bool qsa_select(const struct shape *s, uint64_t gfrom, float *iq, const float *pooled, int32_t *rows,
		       int32_t *cnt)
{
	size_t T = s->T, iq_ld = (s->ih + 1) * s->ihd;
	uint64_t *hg = (uint64_t *)hbc_iscratch(4 * T), *hv = hg ? hg + T : NULL;
	uint64_t *dg = hbc_buf(G_GRP, T * 8 + 8), *dv = hbc_buf(G_VIS, T * 8 + 8);
	uint64_t most = groups_after(s, gfrom, T - 1);
	/* queries a launch: their scores at most 2^26 floats */
	size_t block = most ? (size_t)((1u << 26) / most) : T;

	if (!hg || !dg || !dv)
		return false;
	for (size_t t = 0; t < T; t++)
		hg[t] = groups_after(s, gfrom, t), hv[t] = s->rel0 + t + 1;
	if (!hbc_up(dg, hg, T * 8) || !hbc_up(dv, hv, T * 8))
		return false;
	block = block < 1 ? 1 : block > T ? T : block;
	for (size_t t0 = 0; t0 < T; t0 += block) {
		size_t nq = T - t0 < block ? T - t0 : block;
		uint64_t m = hg[t0 + nq - 1], sld = m ? m : 1;
		float *sc = fbuf(G_SC, nq * (size_t)sld);
		int32_t *fl = hbc_buf(G_FL, nq * (size_t)sld * 4 + 4);
		if (!sc || !fl ||
		    !ok(hbk_qsa_select_batch(nq, iq + t0 * iq_ld, iq_ld, s->ih, s->ihd, pooled, dg + t0, dv + t0, m, s->keep,
					     s->ratio, sc, (size_t)sld, fl, rows + t0 * s->rows_ld, s->rows_ld, cnt + t0),
			"the selection"))
			return false;
	}
	return true;
}

/* every query's row count as the host's formula says (else the device failed) */
static bool qsa_counts(const struct shape *s, uint64_t gfrom, const int32_t *cnt)
{
	int32_t *h = hbc_iscratch(s->T);

	if (!h || !hbc_down(h, cnt, s->T * 4))
		return false;
	for (size_t t = 0; t < s->T; t++)
		if ((size_t)h[t] != sel_count(s, groups_after(s, gfrom, t), s->rel0 + t + 1)) {
			hbc_fail(HB_ERR_INTERNAL, "cuda.select", "the selection kernels", "returned a wrong row count");
			return false;
		}
	return true;
}

struct qsa_cache {
	float *k, *v, *raw, *pooled; /* device, this layer's */
};

static bool qsa(const struct shape *s, const struct hb_dev_chunk *ch, const struct hb_qsa_weights *w,
		const struct lvec *v, const struct qsa_cache *qc, uint64_t gfrom)
{
	size_t T = s->T, kvw = s->nkv * s->hd, qw = 2 * s->nh * s->hd, iq_ld = (s->ih + 1) * s->ihd;
	float *mix = fbuf(G_MIX, T * s->H), *q = fbuf(G_A, T * s->wide), *kv = fbuf(G_B, T * s->wide);
	float *iq = fbuf(G_C, T * s->wide), *qn = fbuf(G_QN, T * s->nh * s->hd), *qo = fbuf(G_QO, T * s->nh * s->hd);
	float *y = fbuf(G_Y, T * s->H);
	int32_t *rows = hbc_buf(G_ROWS, T * s->rows_ld * 4 + 4), *cnt = hbc_buf(G_CNT, T * 4 + 4);
	uint64_t gnew = groups_after(s, gfrom, T - 1);
	size_t half = (size_t)ch->m->cfg.rotary_dim / 2;
	struct hbk_attn at;

	if (!q || !kv || !iq || !qn || !qo || !y || !rows || !cnt || !mm(&w->q, mix, T, q) || !mm(&w->k, mix, T, kv) ||
	    !mm(&w->v, mix, T, kv + T * kvw) || !mm(&w->index_qk, mix, T, iq))
		return false;
	if ((v->qb && !ok(hbg_add_bias(q, qw, v->qb, qw, T), "a bias")) ||
	    (v->kb && !ok(hbg_add_bias(kv, kvw, v->kb, kvw, T), "a bias")) ||
	    (v->vb && !ok(hbg_add_bias(kv + T * kvw, kvw, v->vb, kvw, T), "a bias")))
		return false;
	/* the chunk's keys, values and raw index keys join the caches; the
	 * groups it completes are pooled, normed and rotated at their start */
	if (!ok(hbg_norm_rope(kv, kvw, s->hd, v->kn, s->hd, s->eps, gm.inv_freq, half, ch->pos, 1,
			      qc->k + s->rel0 * kvw, kvw, s->hd, T, s->nkv), "the keys") ||
	    !ok(cudaMemcpy(qc->v + s->rel0 * kvw, kv + T * kvw, T * kvw * 4, cudaMemcpyDeviceToDevice), "the values") ||
	    !ok(cudaMemcpy2D(qc->raw + s->rel0 * s->ihd, s->ihd * 4, iq + s->ih * s->ihd, iq_ld * 4, s->ihd * 4, T,
			     cudaMemcpyDeviceToDevice), "the raw index keys") ||
	    !ok(hbg_pool_groups(qc->raw, s->ihd, gfrom, gnew, s->ratio, qc->pooled), "the pooled groups") ||
	    !ok(hbg_norm_rope(qc->pooled + gfrom * s->ihd, s->ihd, 0, v->ikn, s->ihd, s->eps, gm.inv_freq, half,
			      ch->base + gfrom * s->ratio, s->ratio, qc->pooled + gfrom * s->ihd, s->ihd, 0,
			      (size_t)(gnew - gfrom), 1), "the pooled groups") ||
	    !ok(hbg_norm_rope(iq, iq_ld, s->ihd, v->iqn, s->ihd, s->eps, gm.inv_freq, half, ch->pos, 1, iq, iq_ld, s->ihd,
			      T, s->ih), "the index queries"))
		return false;
	if (!qsa_select(s, gfrom, iq, qc->pooled, rows, cnt) ||
	    !ok(hbg_norm_rope(q, qw, 2 * s->hd, v->qn, s->hd, s->eps, gm.inv_freq, half, ch->pos, 1, qn, s->nh * s->hd,
			      s->hd, T, s->nh), "the queries"))
		return false;
	at = (struct hbk_attn){ T, s->nh, s->nh / s->nkv, s->hd, qn, s->nh * s->hd, s->hd, qc->k, qc->v, kvw,
				1.0f / sqrtf((float)s->hd), rows, s->rows_ld, cnt, qo, s->nh * s->hd };
	return ok(hbk_attend_batch(&at), "the attention") && qsa_counts(s, gfrom, cnt) &&
	       ok(hbg_qsa_gate(qo, q, T, s->nh, s->hd), "the output gate") && mm(&w->o, qo, T, y) &&
	       (!v->ob || ok(hbg_add_bias(y, s->H, v->ob, s->H, T), "a bias"));
}

/* the (token, rank) slots grouped by expert id (all E; slot order within
 * one): pack[row] = slot, at[slot] = row, off[e] = expert e's first row */
static size_t moe_pack(const struct shape *s, const int32_t *ids, int32_t *pack, int32_t *at, int32_t *off)
{
	size_t P = s->T * s->k, most = 0;

	memset(off, 0, (s->E + 1) * sizeof(*off));
	for (size_t p = 0; p < P; p++)
		off[ids[p] + 1]++;
	for (size_t e = 0; e < s->E; e++) {
		most = (size_t)off[e + 1] > most ? (size_t)off[e + 1] : most;
		off[e + 1] += off[e];
	}
	for (size_t p = 0; p < P; p++)
		at[p] = off[ids[p]]++;
	for (size_t e = s->E; e > 0; e--)
		off[e] = off[e - 1];
	off[0] = 0;
	for (size_t p = 0; p < P; p++)
		pack[at[p]] = (int32_t)p;
	return most;
}

static bool moe(const struct shape *s, const struct hb_model *m, size_t l, int32_t *host_ids)
{
	const struct hb_moe_weights *w = &m->layers[l].moe;
	struct hb_wmat g, u, d;
	size_t T = s->T, P = T * s->k, most;
	float *mix = fbuf(G_MIX, T * s->H), *p = fbuf(G_A, T * s->wide), *y = fbuf(G_Y, T * s->H);
	float *sg = fbuf(G_B, T * s->wide), *su = fbuf(G_C, T * s->wide), *sh = fbuf(G_D, T * s->wide);
	float *xg = fbuf(G_XG, P * s->H), *eg = fbuf(G_G, P * s->I), *eu = fbuf(G_U, P * s->I), *out = fbuf(G_OUT, P * s->H);
	int32_t *ids = (int32_t *)hbc_buf(G_IDS, s->L * P * 4 + 4) + l * P;
	float *rw = fbuf(G_RW, s->L * P) + l * P;
	int32_t *hx = hbc_iscratch(2 * P + s->E + 1);
	int32_t *dpack = hbc_buf(G_PACK, P * 4 + 4), *dat = hbc_buf(G_AT, P * 4 + 4), *doff = hbc_buf(G_OFF, s->E * 4 + 8);
	const void *const *tab = gm.experts + l * 3 * s->E;

	if (!mix || !p || !y || !sg || !su || !sh || !xg || !eg || !eu || !out || !hx || !dpack || !dat || !doff ||
	    !mm(&w->router, mix, T, p) ||
	    !ok(hbg_route(p, T, s->E, s->k, m->cfg.norm_topk_prob, ids, rw), "the router") ||
	    !hbc_down(host_ids + l * P, ids, P * 4))
		return false;
	most = moe_pack(s, host_ids + l * P, hx, hx + P, hx + 2 * P);
	hb_model_expert(m, (uint32_t)l, 0, &g, &u, &d);
	return hbc_up(dpack, hx, P * 4) && hbc_up(dat, hx + P, P * 4) && hbc_up(doff, hx + 2 * P, (s->E + 1) * 4) &&
	       ok(hbk_gather_rows(mix, s->H, dpack, s->k, P, xg), "gathering the experts' rows") &&
	       mm_grouped(&g, tab, doff, s->E, most, xg, eg) && mm_grouped(&u, tab + s->E, doff, s->E, most, xg, eu) &&
	       ok(hbk_swiglu_act(eg, eu, P * s->I, eg), "the experts' SiLU") &&
	       mm_grouped(&d, tab + 2 * s->E, doff, s->E, most, eg, out) &&
	       ok(hbk_combine(out, dat, rw, T, s->k, s->H, y), "the experts' sum") &&
	       mm(&w->shared_gate, mix, T, sg) && mm(&w->shared_up, mix, T, su) &&
	       ok(hbk_swiglu_act(sg, su, T * s->Is, sg), "the shared SiLU") && mm(&w->shared_down, sg, T, sh) &&
	       mm(&w->shared_gate_w, mix, T, su) && ok(hbg_shared_add(y, sh, su, T, s->H), "the shared expert");
}

/* ------------------------------------------------------------ state */

/*
 * The device's copy of a session's state: GDN S and convolution states
 * (from, to), PLE convolution states, and the QSA caches of every QSA
 * layer at the session's capacity (so their layout does not change from
 * chunk to chunk).  After a chunk the device holds the state that chunk
 * leaves; the next chunk that starts from it (hb_dev_chunk's epochs) sends
 * none of it again: a decode step uploads its token, not its context.
 */
struct dstate {
	float *S, *cf, *ct, *pf, *pt;
	struct qsa_cache *qc;
	size_t ns, nc, np, kvw;
	bool warm; /* the device already held epoch_in's state */
};

static struct {
	uint64_t epoch, gen;  /* the state held, 0: none */
	const void *buf[7];   /* where it is (a buffer that moved lost it) */
} held;

static bool state_up(const struct shape *s, const struct hb_dev_chunk *ch, struct dstate *d)
{
	const struct hb_qwen_config *c = &ch->m->cfg;
	size_t L = s->L, nq = 0, cap = (size_t)ch->cap, prow = cap / s->ratio + 1;
	struct qsa_cache *qc = calloc(L, sizeof(*qc));

	for (size_t l = 0; l < L; l++)
		nq += c->layer_kind[l] == HB_LAYER_SPARSE;
	d->ns = s->nv * s->dk * s->dv, d->nc = (s->K ? s->K - 1 : 0) * s->cd, d->np = (s->Kp ? s->Kp - 1 : 0) * s->dil * s->hcH;
	d->kvw = s->nkv * s->hd, d->qc = qc;
	d->S = fbuf(G_S, L * d->ns), d->cf = fbuf(G_CF, L * d->nc), d->ct = fbuf(G_CT, L * d->nc);
	d->pf = fbuf(G_PF, L * d->np), d->pt = fbuf(G_PT, L * d->np);
	float *K = fbuf(G_QK, nq * cap * d->kvw), *V = fbuf(G_QV, nq * cap * d->kvw);
	float *R = fbuf(G_QR, nq * cap * s->ihd), *PO = fbuf(G_QP, nq * prow * s->ihd);
	const void *where[7] = { d->S, d->cf, d->pf, K, V, R, PO };
	if (!qc)
		hbc_fail(HB_ERR_NOMEM, "cuda.host", "the chunk's caches", "out of host memory");
	if (!qc || !d->S || !d->cf || !d->ct || !d->pf || !d->pt || !K || !V || !R || !PO)
		return false;
	d->warm = held.epoch && held.epoch == ch->epoch_in && held.gen == hbc_generation() &&
		  !memcmp(held.buf, where, sizeof(where));
	held.epoch = 0; /* what the device holds changes from here on */
	for (size_t l = 0, qi = 0; l < L; l++) {
		const struct hb_dev_layer *hl = &ch->layers[l];
		if (c->layer_kind[l] == HB_LAYER_SPARSE) {
			qc[l] = (struct qsa_cache){ K + qi * cap * d->kvw, V + qi * cap * d->kvw, R + qi * cap * s->ihd,
						    PO + qi * prow * s->ihd };
			qi++;
		}
		if (d->warm)
			continue;
		if (c->layer_kind[l] == HB_LAYER_LINEAR) {
			if (!hbc_up(d->S + l * d->ns, hl->gdn_S_from, d->ns * 4) ||
			    (d->nc && !hbc_up(d->cf + l * d->nc, hl->gdn_conv_from, d->nc * 4)))
				return false;
		} else if (!hbc_up(qc[l].k, hl->qsa_k, (size_t)s->rel0 * d->kvw * 4) ||
			   !hbc_up(qc[l].v, hl->qsa_v, (size_t)s->rel0 * d->kvw * 4) ||
			   !hbc_up(qc[l].raw, hl->qsa_raw, (size_t)s->rel0 * s->ihd * 4) ||
			   !hbc_up(qc[l].pooled, hl->qsa_pooled, (size_t)hl->groups_from * s->ihd * 4)) {
			return false;
		}
		if (ch->m->layers[l].has_ple && d->np && !hbc_up(d->pf + l * d->np, hl->ple_conv_from, d->np * 4))
			return false;
	}
	memcpy(held.buf, where, sizeof(where));
	return true;
}

/* the chunk's state to the host (the session's private bank and new cache
 * rows), and the device's convolution states moved on: it holds epoch_out */
static bool state_down(const struct shape *s, const struct hb_dev_chunk *ch, const struct dstate *d)
{
	const struct hb_qwen_config *c = &ch->m->cfg;

	for (size_t l = 0; l < s->L; l++) {
		const struct hb_dev_layer *hl = &ch->layers[l];
		if (c->layer_kind[l] == HB_LAYER_LINEAR) {
			if (!hbc_down(hl->gdn_S, d->S + l * d->ns, d->ns * 4) ||
			    (d->nc && !hbc_down(hl->gdn_conv, d->ct + l * d->nc, d->nc * 4)))
				return false;
		} else {
			const struct qsa_cache *q = &d->qc[l];
			size_t g0 = (size_t)hl->groups_from, g1 = (size_t)groups_after(s, hl->groups_from, s->T - 1);
			if (!hbc_down(hl->qsa_k + s->rel0 * d->kvw, q->k + s->rel0 * d->kvw, s->T * d->kvw * 4) ||
			    !hbc_down(hl->qsa_v + s->rel0 * d->kvw, q->v + s->rel0 * d->kvw, s->T * d->kvw * 4) ||
			    !hbc_down(hl->qsa_raw + s->rel0 * s->ihd, q->raw + s->rel0 * s->ihd, s->T * s->ihd * 4) ||
			    !hbc_down(hl->qsa_pooled + g0 * s->ihd, q->pooled + g0 * s->ihd, (g1 - g0) * s->ihd * 4))
				return false;
			*hl->groups = g1;
		}
		if (ch->m->layers[l].has_ple && d->np && !hbc_down(hl->ple_conv, d->pt + l * d->np, d->np * 4))
			return false;
	}
	if (!ok(cudaMemcpy(d->cf, d->ct, s->L * d->nc * 4, cudaMemcpyDeviceToDevice), "the convolution states") ||
	    !ok(cudaMemcpy(d->pf, d->pt, s->L * d->np * 4, cudaMemcpyDeviceToDevice), "the convolution states"))
		return false;
	held.epoch = ch->epoch_out, held.gen = hbc_generation();
	return true;
}

/* ------------------------------------------------------------ the chunk */

static bool layer(const struct shape *s, struct hb_dev_chunk *ch, size_t l, const struct dstate *d, size_t *ple_i)
{
	const struct hb_model *m = ch->m;
	const struct hb_layer_weights *w = &m->layers[l];
	const struct lvec *v = &gm.lv[l];
	float *emb = fbuf(G_EMB, 1);
	int sig = m->cfg.output_gate == HB_ACT_SIGMOID;

	if (w->has_ple && !ple(s, &w->ple, v, emb + (*ple_i)++ * s->T * s->P, d->pf + l * d->np, d->pt + l * d->np))
		return false;
	if (!hc_forward(s, &w->attn_hc, v->attn_norm, true))
		return false;
	if (w->kind == HB_LAYER_LINEAR) {
		if (!gdn(s, &w->gdn, v, sig, d->cf + l * d->nc, d->ct + l * d->nc, d->S + l * d->ns))
			return false;
	} else if (!qsa(s, ch, &w->qsa, v, &d->qc[l], ch->layers[l].groups_from)) {
		return false;
	}
	return hc_add(s) && hc_forward(s, &w->mlp_hc, v->mlp_norm, true) && moe(s, m, l, ch->route_ids) && hc_add(s);
}

static bool chunk_run(struct hb_dev_chunk *ch)
{
	const struct hb_model *m = ch->m;
	struct shape s;
	struct dstate d;
	size_t ple_i = 0, nple = 0;
	int one = 1, flag = 0;
	bool good;

	shape_of(ch, &s);
	for (size_t l = 0; l < s.L; l++)
		nple += m->layers[l].has_ple;
	memset(&d, 0, sizeof(d));
	int32_t *tok = hbc_buf(G_TOK, s.T * 4 + 4), *dflag = hbc_buf(G_FLAG, 8);
	float *x = fbuf(G_X, s.T * s.hcH), *emb = fbuf(G_EMB, nple * s.T * s.P + 1);
	const void *embed = hbc_weight(&m->embed, B_W1);
	good = tok && dflag && x && emb && embed && state_up(&s, ch, &d) && hbc_up(tok, ch->tokens, s.T * 4) &&
	       hbc_up(emb, ch->ple_emb, nple * s.T * s.P * 4) && hbc_up(dflag, &one, 4) &&
	       ok(hbg_embed((int)m->embed.type, embed, m->embed.row_bytes, s.H, tok, s.T, s.hc, x), "the embedding");
	for (size_t l = 0; good && l < s.L; l++)
		good = layer(&s, ch, l, &d, &ple_i);
	good = good && hc_forward(&s, &m->mixer, gm.mixer_norm, false);
	if (good && ch->logits) {
		float *lg = fbuf(G_LOG, s.T * s.V);
		good = lg && mm(&m->lm_head, fbuf(G_MIX, s.T * s.H), s.T, lg) && hbc_down(ch->logits, lg, s.T * s.V * 4);
	}
	/* what the chunk keeps to itself: the streams and the recurrent states */
	good = good && ok(hbg_check_finite(x, s.T * s.hcH, dflag), "the finite check");
	for (size_t l = 0; good && l < s.L; l++)
		if (m->cfg.layer_kind[l] == HB_LAYER_LINEAR)
			good = ok(hbg_check_finite(d.S + l * d.ns, d.ns, dflag), "the finite check");
	good = good && hbc_down(&flag, dflag, 4) &&
	       hbc_down(ch->route_w, fbuf(G_RW, s.L * s.T * s.k), s.L * s.T * s.k * 4) && state_down(&s, ch, &d);
	free(d.qc);
	if (good && d.warm)
		hbc_count_warm();
	ch->finite = good && flag == 1;
	return good;
}

/* whether the device holds everything this chunk reads */
static bool takes(const struct hb_dev_chunk *ch)
{
	const struct hb_qwen_config *c = &ch->m->cfg;

	for (size_t l = 0; l < (size_t)c->num_layers; l++)
		if (c->layer_kind[l] == HB_LAYER_SPARSE && !c->qsa)
			return false;
	return ch->T > 0 && hbc_resident(ch->m->map, ch->m->map_len) && c->head_dim <= 1024 &&
	       c->indexer_head_dim <= 1024 && c->linear_value_head_dim <= HBK_GDN_MAXDV &&
	       c->head_dim <= HBK_ATTEND_MAXDIM && c->num_experts_per_tok <= 64 && c->num_experts <= 65535 &&
	       c->num_experts >= c->num_experts_per_tok && !ch->m->xs;
}

/*
 * Off unless HB_CUDA_GRAPH=1: written without a device to run it on (the
 * session that built it had none), it is not yet the default of --backend
 * cuda; tests/unit/test_cuda_parity turns it on against the CPU reference.
 */
static bool graph_on(void)
{
	const char *v = getenv("HB_CUDA_GRAPH");

	return v && !strcmp(v, "1");
}

bool hb_cuda_chunk(struct hb_dev_chunk *ch)
{
	bool good;

	if (!graph_on())
		return false;
	hbc_lock();
	if (!takes(ch) || !model_ready(ch->m)) {
		hbc_unlock();
		return false; /* declined: nothing written */
	}
	good = hbc_begin() && chunk_run(ch);
	hbc_count_chunk();
	if (!good && ch->logits)
		hbc_nan_fill(ch->logits, ch->T * (size_t)ch->m->vocab_physical);
	if (!good)
		ch->finite = false;
	hbc_unlock();
	return true;
}
