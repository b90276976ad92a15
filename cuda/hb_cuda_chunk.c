/*
 * hb_cuda_chunk.c: the CUDA backend's chunk forms (hb_device_ops'
 * gdn_scan, qsa_select_batch, qsa_attend_batch, moe_experts): a chunk's
 * operands cross the bus once each way and its work is one launch (or one
 * short sequence of launches), where the single-call forms cross it per
 * token, per query head, per expert.
 *
 * Each output is that of the single calls: the delta rule's chunk kernel
 * runs the step's operations in the step's order (bit for bit), selection
 * and attention run the single kernels' bodies per query, and the routed
 * experts run the single matrix kernel's tile over each expert's packed
 * tokens, then the graph's weighted sum in rank order with each product
 * and sum rounded once.  Fail closed as the single calls: on any failure
 * the outputs are NaN (selection: one row, row 0, whose attention is NaN).
 */
#include "hb_base.h"
#include "hb_err.h"
#include "backend/hb_backend.h"
#include "hb_cuda_int.h"
#include "hb_cuda_kern.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ delta rule */

void hb_cuda_gdn_scan(float *S, const float *qkv, size_t ld, const float *beta, const float *decay, size_t T,
		      size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o, size_t ldo)
{
	size_t ns = nv * dk * dv, row = 2 * nk * dk + nv * dv, ow = nv * dv;
	bool good;

	if (!T)
		return;
	hbc_lock();
	good = hbc_begin();
	if (good) {
		float *dS = hbc_buf(B_S, ns * 4 + 4), *dx = hbc_buf(B_Q, ((T - 1) * ld + row) * 4 + 4);
		float *db = hbc_buf(B_BETA, T * nv * 4 + 4), *dd = hbc_buf(B_DECAY, T * nv * 4 + 4);
		float *dout = hbc_buf(B_O, T * ow * 4 + 4);
		good = hbc_up(dS, S, ns * 4) && hbc_up(dx, qkv, ((T - 1) * ld + row) * 4) &&
		       hbc_up(db, beta, T * nv * 4) && hbc_up(dd, decay, T * nv * 4) && dout &&
		       hbc_ok((cudaError_t)hbk_gdn_scan(dS, dx, ld, db, dd, T, nk, nv, dk, dv, qscale, dout, ow),
			      "launching the chunked delta-rule kernel") &&
		       hbc_down(S, dS, ns * 4) && hbc_down2d(o, ldo * 4, dout, ow * 4, ow * 4, T);
	}
	if (!good) {
		hbc_nan_fill(S, ns);
		for (size_t t = 0; t < T; t++)
			hbc_nan_fill(o + t * ldo, ow);
	}
	hbc_unlock();
}

/* ------------------------------------------------------------ QSA */

size_t hbc_sel_count(uint64_t groups, uint64_t keep, uint64_t ratio, uint64_t visible)
{
	uint64_t kept = groups < keep ? groups : keep;
	uint64_t tail = visible > groups * ratio ? visible - groups * ratio : 0;

	return (size_t)(kept * ratio + tail);
}

static bool select_run(const struct hb_qsa_batch *b, uint64_t most, size_t widest)
{
	size_t nq = b->nq, sld = most ? (size_t)most : 1, iqn = (nq - 1) * b->iq_ld + b->heads * b->dim;
	float *diq = hbc_buf(B_Q, iqn * 4 + 4), *dp = hbc_buf(B_POOL, (size_t)most * b->dim * 4 + 4);
	float *dsc = hbc_buf(B_SC, nq * sld * 4 + 4);
	int32_t *dfl = hbc_buf(B_FL, nq * sld * 4 + 4), *dr = hbc_buf(B_ROWS, nq * b->rows_ld * 4 + 4);
	int32_t *dc = hbc_buf(B_CNT, nq * 4 + 4), *cnt = hbc_iscratch(nq);
	uint64_t *dg = hbc_buf(B_GRP, nq * 8 + 8), *dvis = hbc_buf(B_VIS, nq * 8 + 8);

	if (!(diq && dp && dsc && dfl && dr && dc && cnt && dg && dvis) || !hbc_up(diq, b->iq, iqn * 4) ||
	    !hbc_up(dp, b->pooled, (size_t)most * b->dim * 4) || !hbc_up(dg, b->groups, nq * 8) ||
	    !hbc_up(dvis, b->visible, nq * 8) ||
	    !hbc_ok((cudaError_t)hbk_qsa_select_batch(nq, diq, b->iq_ld, b->heads, b->dim, dp, dg, dvis, most,
						       b->keep, b->ratio, dsc, sld, dfl, dr, b->rows_ld, dc),
		    "launching the batched selection kernels") ||
	    !hbc_down(cnt, dc, nq * 4))
		return false;
	for (size_t i = 0; i < nq; i++)
		if ((size_t)cnt[i] != hbc_sel_count(b->groups[i], b->keep, b->ratio, b->visible[i])) {
			hbc_fail(HB_ERR_INTERNAL, "cuda.select", "the selection kernels", "returned a wrong row count");
			return false;
		}
	return hbc_down2d(b->rows, b->rows_ld * 4, dr, b->rows_ld * 4, widest * 4, nq);
}

void hb_cuda_select_batch(const struct hb_qsa_batch *b)
{
	uint64_t most = 0;
	size_t widest = 0;
	bool good;

	if (!b->nq)
		return;
	for (size_t i = 0; i < b->nq; i++) {
		size_t n = hbc_sel_count(b->groups[i], b->keep, b->ratio, b->visible[i]);
		most = b->groups[i] > most ? b->groups[i] : most;
		widest = n > widest ? n : widest;
	}
	hbc_lock();
	good = hbc_begin() && select_run(b, most, widest);
	hbc_unlock();
	for (size_t i = 0; i < b->nq; i++) {
		if (good) {
			b->n[i] = hbc_sel_count(b->groups[i], b->keep, b->ratio, b->visible[i]);
			continue;
		}
		b->n[i] = b->visible[i] ? 1 : 0;
		b->rows[i * b->rows_ld] = 0; /* attended as NaN: the device has failed */
	}
}

/* the device's copy of the K and V rows a chunk's blocks read (kv_kept) */
static struct {
	const float *K, *V;
	size_t stride, rows;
	uint64_t gen;
} kvc;

/* rows [0, need) of K and V on the device: only those past the kept copy
 * cross the bus when the caller says the copy is still good */
static bool kv_rows(const struct hb_qsa_attn *a, size_t need, float **dK, float **dV)
{
	size_t bytes = need * a->stride * 4 + 4, have = 0;

	if (a->kv_kept && kvc.K == a->K && kvc.V == a->V && kvc.stride == a->stride && kvc.gen == hbc_generation() &&
	    hbc_bufcap(B_KC) >= bytes && hbc_bufcap(B_VC) >= bytes)
		have = kvc.rows < need ? kvc.rows : need;
	kvc.K = NULL; /* invalid until the copy below completes */
	*dK = hbc_buf(B_KC, bytes), *dV = hbc_buf(B_VC, bytes);
	if (!*dK || !*dV || !hbc_up(*dK + have * a->stride, a->K + have * a->stride, (need - have) * a->stride * 4) ||
	    !hbc_up(*dV + have * a->stride, a->V + have * a->stride, (need - have) * a->stride * 4))
		return false;
	if (have < kvc.rows && a->kv_kept) /* rows kept beyond this call's reach stay valid */
		need = kvc.rows;
	kvc.K = a->K, kvc.V = a->V, kvc.stride = a->stride, kvc.rows = need, kvc.gen = hbc_generation();
	return true;
}

static bool attend_run(const struct hb_qsa_attn *a, size_t maxrow, size_t widest)
{
	size_t nq = a->nq, qn = (nq - 1) * a->q_ld + (a->heads - 1) * a->qh_ld + a->dim;
	size_t ow = a->heads * a->dim;
	float *dq = hbc_buf(B_Q, qn * 4 + 4), *dK, *dV;
	float *dout = hbc_buf(B_O, nq * ow * 4 + 4);
	int32_t *dr = hbc_buf(B_ROWS, nq * (widest ? widest : 1) * 4 + 4), *dn = hbc_buf(B_CNT, nq * 4 + 4);
	int32_t *n = hbc_iscratch(nq);
	struct hbk_attn k;

	if (!(dq && dout && dr && dn && n) || !kv_rows(a, maxrow + 1, &dK, &dV))
		return false;
	for (size_t i = 0; i < nq; i++)
		n[i] = (int32_t)a->n[i];
	k = (struct hbk_attn){ nq, a->heads, a->per_kv, a->dim, dq, a->q_ld, a->qh_ld, dK, dV, a->stride, a->scale,
			       dr, widest ? widest : 1, dn, dout, ow };
	return hbc_up(dq, a->q, qn * 4) && hbc_up2d(dr, k.rows_ld * 4, a->rows, a->rows_ld * 4, widest * 4, nq) &&
	       hbc_up(dn, n, nq * 4) &&
	       hbc_ok((cudaError_t)hbk_attend_batch(&k), "launching the batched attention kernel") &&
	       hbc_down2d(a->out, a->out_ld * 4, dout, ow * 4, ow * 4, nq);
}

void hb_cuda_attend_batch(const struct hb_qsa_attn *a)
{
	size_t maxrow = 0, widest = 0;
	bool good;

	if (!a->nq || !a->heads)
		return;
	for (size_t i = 0; i < a->nq; i++) {
		const int32_t *r = a->rows + i * a->rows_ld;
		widest = a->n[i] > widest ? a->n[i] : widest;
		for (size_t j = 0; j < a->n[i]; j++)
			maxrow = (size_t)r[j] > maxrow ? (size_t)r[j] : maxrow;
	}
	hbc_lock();
	good = hbc_begin() && (a->dim <= HBK_ATTEND_MAXDIM || (hbc_fail(HB_ERR_UNSUPPORTED, "cuda.attend",
		"the batched attention kernel", "head wider than it takes"), false)) && attend_run(a, maxrow, widest);
	hbc_unlock();
	if (!good)
		for (size_t i = 0; i < a->nq; i++)
			hbc_nan_fill(a->out + i * a->out_ld, a->heads * a->dim);
}

/* ------------------------------------------------------------ routed experts */

/* the index of e in the ascending ids, or -1 */
static ptrdiff_t find_id(const uint32_t *ids, size_t n, uint32_t e)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ids[mid] < e)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && ids[lo] == e ? (ptrdiff_t)lo : -1;
}

bool hbc_same_shape(const struct hb_wmat *a, const struct hb_wmat *b)
{
	return a->type == b->type && a->rows == b->rows && a->cols == b->cols && a->row_bytes == b->row_bytes;
}

/* the experts' views: one shape per matrix, every one resident; else declined */
static bool moe_views(const struct hb_moe_batch *b, struct hb_wmat w[3])
{
	for (size_t i = 0; i < b->n; i++) {
		struct hb_wmat v[3];
		b->expert(b->ctx, b->ids[i], &v[0], &v[1], &v[2]);
		for (int m = 0; m < 3; m++) {
			if (i == 0)
				w[m] = v[m];
			if (!hbc_same_shape(&w[m], &v[m]) || (unsigned)v[m].type > HB_W_AFFINE4_G64 ||
			    !hbc_resident(v[m].data, (size_t)(v[m].rows * v[m].row_bytes)))
				return false;
		}
	}
	return b->n > 0 && w[0].rows == w[1].rows && w[0].cols == w[1].cols && w[2].cols == w[0].rows &&
	       b->n <= 65535;
}

/* pack: the (token, rank) slots grouped by expert, in slot order within
 * one; at: each slot's packed row; off: each expert's first packed row */
static bool moe_pack(const struct hb_moe_batch *b, int32_t *pack, int32_t *at, int32_t *off, size_t *most)
{
	size_t P = b->T * b->k;

	memset(off, 0, (b->n + 1) * sizeof(*off));
	for (size_t p = 0; p < P; p++) {
		ptrdiff_t z = find_id(b->ids, b->n, (uint32_t)b->route_ids[p]);
		if (z < 0) {
			hbc_fail(HB_ERR_INTERNAL, "cuda.moe", "the routed experts", "a route names no listed expert");
			return false;
		}
		off[z + 1]++;
	}
	*most = 0;
	for (size_t z = 0; z < b->n; z++) {
		*most = (size_t)off[z + 1] > *most ? (size_t)off[z + 1] : *most;
		off[z + 1] += off[z];
	}
	for (size_t p = 0; p < P; p++) { /* at[] counts each expert's fill meanwhile */
		size_t z = (size_t)find_id(b->ids, b->n, (uint32_t)b->route_ids[p]);
		at[p] = off[z]++;
		pack[at[p]] = (int32_t)p;
	}
	for (size_t z = b->n; z > 0; z--) /* back to each expert's first row */
		off[z] = off[z - 1];
	off[0] = 0;
	return true;
}

static bool moe_run(const struct hb_moe_batch *b, const struct hb_wmat w[3])
{
	size_t P = b->T * b->k, n = b->n, H = (size_t)w[0].cols, I = (size_t)w[0].rows, Ho = (size_t)w[2].rows;
	int32_t *ix = hbc_iscratch(2 * P + n + 1), *pack = ix, *at = ix ? ix + P : NULL, *off = ix ? ix + 2 * P : NULL;
	const void **wp = hbc_pscratch(3 * n);
	float *dx = hbc_buf(B_X, b->T * H * 4 + 4), *dxg = hbc_buf(B_XG, P * H * 4 + 4);
	float *dg = hbc_buf(B_G, P * I * 4 + 4), *du = hbc_buf(B_U, P * I * 4 + 4);
	float *dout = hbc_buf(B_OUT, P * Ho * 4 + 4), *dy = hbc_buf(B_Y, b->T * Ho * 4 + 4);
	float *drw = hbc_buf(B_RW, P * 4 + 4);
	int32_t *dpack = hbc_buf(B_PACK, P * 4 + 4), *dat = hbc_buf(B_AT, P * 4 + 4), *doff = hbc_buf(B_OFF, (n + 1) * 4);
	const void **dwp = hbc_buf(B_WP, 3 * n * sizeof(void *));
	size_t most;

	if (!(ix && wp && dx && dxg && dg && du && dout && dy && drw && dpack && dat && doff && dwp) ||
	    !moe_pack(b, pack, at, off, &most))
		return false;
	for (size_t i = 0; i < n; i++) {
		struct hb_wmat v[3];
		b->expert(b->ctx, b->ids[i], &v[0], &v[1], &v[2]);
		for (int m = 0; m < 3; m++)
			if (!(wp[m * n + i] = hbc_weight(&v[m], B_W0)))
				return false;
	}
	return hbc_up(dx, b->x, b->T * H * 4) && hbc_up(drw, b->route_w, P * 4) && hbc_up(dpack, pack, P * 4) &&
	       hbc_up(dat, at, P * 4) && hbc_up(doff, off, (n + 1) * 4) && hbc_up(dwp, wp, 3 * n * sizeof(void *)) &&
	       hbc_ok((cudaError_t)hbk_gather_rows(dx, H, dpack, b->k, P, dxg), "gathering the experts' rows") &&
	       hbc_ok((cudaError_t)hbk_matmul_grouped((int)w[0].type, dwp, w[0].row_bytes, I, H, doff, n, most, dxg,
						       dg), "launching the grouped gate kernel") &&
	       hbc_ok((cudaError_t)hbk_matmul_grouped((int)w[1].type, dwp + n, w[1].row_bytes, I, H, doff, n, most,
						       dxg, du), "launching the grouped up kernel") &&
	       hbc_ok((cudaError_t)hbk_swiglu_act(dg, du, P * I, dg), "launching the SwiGLU kernel") &&
	       hbc_ok((cudaError_t)hbk_matmul_grouped((int)w[2].type, dwp + 2 * n, w[2].row_bytes, Ho, I, doff, n,
						       most, dg, dout), "launching the grouped down kernel") &&
	       hbc_ok((cudaError_t)hbk_combine(dout, dat, drw, b->T, b->k, Ho, dy), "combining the experts") &&
	       hbc_down(b->y, dy, b->T * Ho * 4);
}

bool hb_cuda_moe(const struct hb_moe_batch *b)
{
	struct hb_wmat w[3];
	bool good;

	if (!b->T || !b->k)
		return false;
	hbc_lock();
	if (!moe_views(b, w)) { /* declined: nothing counted, nothing written */
		hbc_unlock();
		return false;
	}
	good = hbc_begin() && moe_run(b, w);
	hbc_unlock();
	if (!good)
		hbc_nan_fill(b->y, b->T * (size_t)w[2].rows);
	return true;
}
