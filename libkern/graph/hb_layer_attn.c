/*
 * hb_layer_attn.c: the token mixers of a Qwen4Exp layer, transcribed from
 * upstream's Qwen4ExpTextGatedDeltaNet (recurrent form of the gated delta
 * rule), Qwen4ExpTextQSAIndexer and Qwen4ExpTextAttention.
 *
 * QSA is physically sparse (AFN-016): a query scores complete 4-token groups
 * from their pooled keys, keeps the top budget/ratio groups (membership by
 * score, ties to the earlier group; AFN-017), emits them chronologically,
 * appends the raw tail, gathers only those K/V rows and runs the softmax
 * over exactly them.  No query-by-key mask exists anywhere.
 */
#include "hb_base.h"
#include "backend/hb_backend.h"
#include "backend/simd/hb_simd.h"
#include "hb_session_int.h"
#include "math/hb_math.h"

#include <math.h>

/* Partial RoPE in upstream's layout: the first rotary_dim values rotate as
 * two halves, the rest pass through. */
void hb_rope(const struct hb_model *m, float *x, uint64_t pos)
{
	size_t half = (size_t)m->cfg.rotary_dim / 2;

	for (size_t i = 0; i < half; i++) {
		float f = (float)pos * m->inv_freq[i];
		float cs = cosf(f), sn = sinf(f);
		float a = x[i], b = x[i + half];
		x[i] = a * cs - b * sn;
		x[i + half] = b * cs + a * sn;
	}
}

/* ------------------------------------------------------------ Gated DeltaNet */

/*
 * The causal depthwise convolution (kernel K) of channels [from, to) over
 * the chunk, in place: token t's output replaces its input in x [T][cd], and
 * the state (the previous K - 1 inputs, oldest first) moves on by T.  A
 * channel's window lives in its state column, so the input it overwrites is
 * already saved there.  Per output the operations of the token-at-a-time
 * loop: acc = 0, += w[j] * window[j] oldest first, += w[K-1] * input, silu
 * (a token's block of channels at once, through the vector path).
 */
static void gdn_conv(const float *wc, float *state, float *x, size_t T, size_t cd, size_t K, size_t from,
		     size_t to)
{
	static const float ones[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };

	for (size_t c0 = from; c0 < to; c0 += 16) {
		size_t c1 = to - c0 < 16 ? to : c0 + 16;
		for (size_t t = 0; t < T; t++) {
			float *in = x + t * cd;
			for (size_t ch = c0; ch < c1; ch++) {
				float acc = 0, v = in[ch];
				for (size_t j = 0; j + 1 < K; j++)
					acc += wc[ch * K + j] * state[j * cd + ch];
				acc += wc[ch * K + K - 1] * v;
				for (size_t j = 0; j + 2 < K; j++)
					state[j * cd + ch] = state[(j + 1) * cd + ch];
				if (K > 1)
					state[(K - 2) * cd + ch] = v;
				in[ch] = acc;
			}
			/* hb_silu(acc) * 1: hb_silu's bits, the block's channels at once */
			hb_kern_silu_mul(in + c0, ones, c1 - c0, in + c0);
		}
	}
}

/* the per-token steps around the recurrence, over the pool (hb_each) */
struct gdn_ctx {
	const struct hb_gdn_weights *w;
	struct hb_gdn_state *st;
	float *qkv, *z, *ba, *core;
	size_t T;
};

/* a chunk's convolution runs on the caller below this many channels x tokens */
#define GDN_CONV_SERIAL 32768

/* channel blocks [b0, b1) of 16 through the convolution */
static void gdn_conv_blocks(struct hb_session *s, size_t b0, size_t b1, void *ctx)
{
	const struct gdn_ctx *g = ctx;
	const struct hb_qwen_config *c = &s->m->cfg;
	size_t cd = 2 * (size_t)(c->linear_num_key_heads * c->linear_key_head_dim) +
		    (size_t)(c->linear_num_value_heads * c->linear_value_head_dim);
	size_t c1 = b1 * 16 < cd ? b1 * 16 : cd;

	gdn_conv(g->w->conv, g->st->conv, g->qkv, g->T, cd, (size_t)c->linear_conv_kernel, b0 * 16, c1);
}

static void gdn_gates(struct hb_session *s, size_t t0, size_t t1, void *ctx)
{
	const struct gdn_ctx *gc = ctx;
	const struct hb_qwen_config *c = &s->m->cfg;
	size_t nk = (size_t)c->linear_num_key_heads, nv = (size_t)c->linear_num_value_heads;
	size_t dk = (size_t)c->linear_key_head_dim, kd = nk * dk, cd = 2 * kd + nv * (size_t)c->linear_value_head_dim;

	for (size_t t = t0; t < t1; t++) {
		float *conv = gc->qkv + t * cd;
		for (size_t h = 0; h < nk; h++) {
			hb_l2norm(conv + h * dk, dk, 1e-6);       /* q */
			hb_l2norm(conv + kd + h * dk, dk, 1e-6);  /* k */
		}
		/* beta and the decay exp(g) of every value head, in place of b and a */
		for (size_t h = 0; h < nv; h++) {
			float *b = gc->ba + t * nv + h, *a = gc->ba + gc->T * nv + t * nv + h;
			float g = -expf(gc->w->A_log[h]) * hb_softplus(*a + gc->w->dt_bias[h]);
			*b = hb_sigmoid(*b);
			*a = expf(g);
		}
	}
}

static void gdn_outgate(struct hb_session *s, size_t t0, size_t t1, void *ctx)
{
	const struct gdn_ctx *g = ctx;
	const struct hb_qwen_config *c = &s->m->cfg;
	size_t nv = (size_t)c->linear_num_value_heads, dv = (size_t)c->linear_value_head_dim, vd = nv * dv;

	for (size_t t = t0; t < t1; t++)
		for (size_t h = 0; h < nv; h++) {
			float *o = g->core + t * vd + h * dv;
			/* gated RMSNorm: w * norm(o), times act(z) */
			hb_rmsnorm_w(o, g->w->norm, dv, c->rms_norm_eps, o);
			for (size_t j = 0; j < dv; j++) {
				float zz = g->z[t * vd + h * dv + j];
				o[j] *= c->output_gate == HB_ACT_SIGMOID ? hb_sigmoid(zz) : hb_silu(zz);
			}
		}
}

void hb_gdn_forward(struct hb_session *s, uint32_t layer, size_t T)
{
	const struct hb_model *m = s->m;
	const struct hb_qwen_config *c = &m->cfg;
	const struct hb_gdn_weights *w = &m->layers[layer].gdn;
	struct hb_gdn_state *st = &s->gdn[layer];
	size_t nk = (size_t)c->linear_num_key_heads, nv = (size_t)c->linear_num_value_heads;
	size_t dk = (size_t)c->linear_key_head_dim, dv = (size_t)c->linear_value_head_dim;
	size_t kd = nk * dk, vd = nv * dv, cd = 2 * kd + vd;
	float *qkv = s->big, *z = s->big2, *ba = s->big3, *core = s->big3 + 2 * T * nv;
	float qscale = 1.0f / sqrtf((float)dk);
	struct gdn_ctx g = { w, st, qkv, z, ba, core, T };
	struct hb_mm in[] = {
		{ &w->qkv, s->mixed, qkv },     /* [T][cd] */
		{ &w->z, s->mixed, z },         /* [T][vd] */
		{ &w->b, s->mixed, ba },        /* [T][nv] */
		{ &w->a, s->mixed, ba + T * nv },
	};

	hb_matmul_group(s->pool, in, 4, T);
	/* conv then silu, in place: qkv becomes q, k, v of every token
	 * (channel blocks over the pool, but a decode step's few thousand
	 * multiply-adds on the caller: a pool run costs more), then the norms
	 * and gates (tokens) */
	if (T * cd < GDN_CONV_SERIAL)
		gdn_conv_blocks(s, 0, (cd + 15) / 16, &g);
	else
		hb_each(s, (cd + 15) / 16, gdn_conv_blocks, &g);
	hb_each(s, T, gdn_gates, &g);
	/* the recurrence, value heads over the pool, each through the chunk */
	if (!hb_gdn_scan_from(s->pool, st->S, s->gdn_from ? s->gdn_from[layer].S : st->S, qkv, cd, ba, ba + T * nv, T,
			      nk, nv, dk, dv, qscale, core, vd))
		s->gdn_bad = true;
	hb_each(s, T, gdn_outgate, &g);
	hb_matmul(s->pool, &w->out, core, T, s->y, s->scratch);
}

/* ------------------------------------------------------------ QSA */

/*
 * A chunk's queries in two passes.  First token by token: the token's
 * key, value and raw index key join the caches, a completed group is
 * pooled, the index and attention queries are normed and rotated.  Then
 * blocks of HB_QSA_BLOCK queries: selection and attention over the pool
 * (hb_qsa_select_batch, hb_qsa_attend_batch), each query reading only the
 * groups and rows visible at its own position, so its selection and output
 * are those of the token-at-a-time loop; observations and counters follow
 * in token order after each block's attention.
 */
static void qsa_prepare(struct hb_session *s, uint32_t layer, size_t T)
{
	const struct hb_model *m = s->m;
	const struct hb_qwen_config *c = &m->cfg;
	const struct hb_qsa_weights *w = &m->layers[layer].qsa;
	struct hb_qsa_state *st = &s->qsa[layer];
	size_t nh = (size_t)c->num_heads, nkv = (size_t)c->num_kv_heads, hd = (size_t)c->head_dim;
	size_t ih = (size_t)c->indexer_n_heads, ihd = (size_t)c->indexer_head_dim;
	size_t ratio = (size_t)c->indexer_compress_ratio;
	float *qg = s->big, *kv = s->big2, *idx = s->big3;

	for (size_t t = 0; t < T; t++) {
		uint64_t pos = s->pos + t, rel = pos - s->base, visible = rel + 1;
		float *q = qg + t * 2 * nh * hd, *kt = kv + t * nkv * hd, *vt = kv + T * nkv * hd + t * nkv * hd;
		float *iq = idx + t * (ih + 1) * ihd, *raw = iq + ih * ihd;

		if (w->q_bias)
			for (size_t i = 0; i < 2 * nh * hd; i++)
				q[i] += w->q_bias[i];
		if (w->k_bias)
			for (size_t i = 0; i < nkv * hd; i++)
				kt[i] += w->k_bias[i], vt[i] += w->v_bias[i];
		/* this token's key, value and raw index key join the caches (rows
		 * past the public frontier: invisible until the chunk publishes) */
		for (size_t h = 0; h < nkv; h++) {
			float *kk = st->k + (rel * nkv + h) * hd;
			hb_rmsnorm_zc(kt + h * hd, w->k_norm, hd, hd, c->rms_norm_eps, kk);
			hb_rope(m, kk, pos);
			memcpy(st->v + (rel * nkv + h) * hd, vt + h * hd, hd * sizeof(float));
		}
		memcpy(st->raw + rel * ihd, raw, ihd * sizeof(float));
		/* a group completes: pool its raw keys, norm, rotate at its start;
		 * groups are anchored at the first live position (AFN-018) */
		if (visible % ratio == 0) {
			uint64_t gi = s->groups[layer];
			float *pk = st->pooled + gi * ihd;
			for (size_t i = 0; i < ihd; i++) {
				float acc = 0;
				for (size_t r = 0; r < ratio; r++)
					acc += st->raw[(gi * ratio + r) * ihd + i];
				pk[i] = acc / (float)ratio;
			}
			hb_rmsnorm_zc(pk, w->index_k_norm, ihd, ihd, c->rms_norm_eps, pk);
			hb_rope(m, pk, s->base + gi * ratio);
			s->groups[layer] = gi + 1;
		}
		/* index queries: norm, rotate at this position */
		for (size_t h = 0; h < ih; h++) {
			hb_rmsnorm_zc(iq + h * ihd, w->index_q_norm, ihd, ihd, c->rms_norm_eps, iq + h * ihd);
			hb_rope(m, iq + h * ihd, pos);
		}
	}
}

/* a block's queries [i0, i1) (block = its layer and first token) */
struct qsa_blk {
	uint32_t layer;
	size_t t0;
};

/* attention queries, normed and rotated, into s->qnorm (the projections
 * stay as they are until the block's observations are made) */
static void qsa_queries(struct hb_session *s, size_t i0, size_t i1, void *ctx)
{
	const struct qsa_blk *b = ctx;
	const struct hb_model *m = s->m;
	const struct hb_qwen_config *c = &m->cfg;
	size_t nh = (size_t)c->num_heads, hd = (size_t)c->head_dim;

	for (size_t i = i0; i < i1; i++)
		for (size_t h = 0; h < nh; h++) {
			float *qh = s->qnorm + (i * nh + h) * hd;
			hb_rmsnorm_zc(s->big + (b->t0 + i) * 2 * nh * hd + h * 2 * hd, m->layers[b->layer].qsa.q_norm, hd,
				      hd, c->rms_norm_eps, qh);
			hb_rope(m, qh, s->pos + b->t0 + i);
		}
}

/* the output gate: sigmoid of the projection's gate half */
static void qsa_gate(struct hb_session *s, size_t i0, size_t i1, void *ctx)
{
	const struct qsa_blk *b = ctx;
	size_t nh = (size_t)s->m->cfg.num_heads, hd = (size_t)s->m->cfg.head_dim;

	for (size_t i = i0; i < i1; i++) {
		const float *q = s->big + (b->t0 + i) * 2 * nh * hd;
		float *o = s->qout + i * nh * hd;
		for (size_t h = 0; h < nh; h++)
			for (size_t j = 0; j < hd; j++)
				o[h * hd + j] *= hb_sigmoid(q[h * 2 * hd + hd + j]);
	}
}

void hb_qsa_forward(struct hb_session *s, uint32_t layer, size_t T, hb_observe_fn obs, void *ctx)
{
	const struct hb_model *m = s->m;
	const struct hb_qwen_config *c = &m->cfg;
	const struct hb_qsa_weights *w = &m->layers[layer].qsa;
	struct hb_qsa_state *st = &s->qsa[layer];
	size_t nh = (size_t)c->num_heads, nkv = (size_t)c->num_kv_heads, hd = (size_t)c->head_dim;
	size_t ih = (size_t)c->indexer_n_heads, ihd = (size_t)c->indexer_head_dim;
	size_t ratio = (size_t)c->indexer_compress_ratio, keep = (size_t)(c->indexer_budget / ratio);
	size_t rows_ld = hb_qsa_rows_ld(c);
	uint64_t groups = s->groups[layer];
	int32_t *heap = s->sel, *rows = heap + HB_QSA_BLOCK * keep, *abs = rows + HB_QSA_BLOCK * rows_ld;
	struct hb_qsa_batch sb = { 0, ih, ihd, s->big3, (ih + 1) * ihd, st->pooled, s->qgroups, s->qvisible,
				   keep, ratio, s->scores, s->scores_ld, heap, rows, rows_ld, s->qn };
	struct hb_qsa_attn ab = { 0, nh, nh / nkv, hd, s->qnorm, nh * hd, hd, st->k, st->v, nkv * hd,
				  1.0f / sqrtf((float)hd), rows, rows_ld, s->qn, s->probs, rows_ld, s->qout, nh * hd, false };

	struct qsa_blk blk = { layer, 0 };
	struct hb_mm in[] = {
		{ &w->q, s->mixed, s->big },                   /* [T][2 nh hd] q and gate */
		{ &w->k, s->mixed, s->big2 },                  /* [T][nkv hd] k, then v */
		{ &w->v, s->mixed, s->big2 + T * nkv * hd },
		{ &w->index_qk, s->mixed, s->big3 },           /* [T][(ih + 1) ihd] */
	};

	hb_matmul_group(s->pool, in, 4, T);
	qsa_prepare(s, layer, T);
	for (size_t t0 = 0; t0 < T; t0 += HB_QSA_BLOCK) {
		size_t nq = T - t0 < HB_QSA_BLOCK ? T - t0 : HB_QSA_BLOCK;
		for (size_t i = 0; i < nq; i++) {
			uint64_t visible = s->pos + t0 + i - s->base + 1;
			groups += visible % ratio == 0; /* as qsa_prepare counted them */
			s->qgroups[i] = groups, s->qvisible[i] = visible;
			s->ctr.qsa_groups_scored += groups;
		}
		sb.nq = ab.nq = nq;
		ab.kv_kept = t0 > 0; /* qsa_prepare wrote every row of the chunk before the first block */
		sb.iq = s->big3 + t0 * (ih + 1) * ihd;
		hb_qsa_select_batch(s->pool, &sb);
		/* attention over exactly the selected rows, per query and head */
		blk.t0 = t0;
		hb_each(s, nq, qsa_queries, &blk);
		hb_qsa_attend_batch(s->pool, &ab);
		hb_each(s, nq, qsa_gate, &blk);
		/* in token order: observations (the query's projections, scores
		 * and output are still in place for an observer), counters, and
		 * the output over its query */
		for (size_t i = 0; i < nq; i++) {
			const int32_t *tok = rows + i * rows_ld;
			if (obs) {
				for (size_t r = 0; r < s->qn[i]; r++)
					abs[r] = tok[r] + (int32_t)s->base;
				obs(ctx, HB_OBS_QSA, (int32_t)layer, s->pos + t0 + i, abs, s->qn[i]);
			}
			s->ctr.qsa_keys_attended += s->qn[i];
		}
		for (size_t i = 0; i < nq; i++)
			memcpy(s->big + (t0 + i) * 2 * nh * hd, s->qout + i * nh * hd, nh * hd * sizeof(float));
	}
	/* o_proj over the gated outputs, packed at stride 2 nh hd */
	for (size_t t = 0; t < T; t++)
		memmove(s->big + t * nh * hd, s->big + t * 2 * nh * hd, nh * hd * sizeof(float));
	hb_matmul(s->pool, &w->o, s->big, T, s->y, s->scratch);
	if (w->o_bias)
		for (size_t t = 0; t < T; t++)
			for (size_t j = 0; j < (size_t)c->hidden_size; j++)
				s->y[t * (size_t)c->hidden_size + j] += w->o_bias[j];
}
