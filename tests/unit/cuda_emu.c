/*
 * cuda_emu.c: the CUDA backend's device, emulated on the host, for
 * test_cuda_emu: the CUDA runtime calls cuda/hb_cuda*.c make (memory is host
 * memory, a copy is memmove) and every kernel launcher of cuda/hb_cuda_kern.h
 * and cuda/hb_cuda_gk.h as host code.  Linked in place of libcudart and the
 * .cu objects, it runs the backend's host side (the staging, the resident
 * weights, the sticky failure, the device graph's orchestration in
 * hb_cuda_graph.c: its buffers, offsets, state traffic and stage order) on
 * a machine without a GPU, against the CPU reference.  What it cannot test
 * is the kernels' device code, which only a GPU runs (test_cuda_*).
 *
 * The launchers call the CPU reference (libkern/backend) with the device
 * uninstalled for the call, or restate hb_cuda_gk.h's contract in plain C
 * with libkern/math: an emulated kernel is the contract, independent of the
 * orchestration it serves.
 */
#include "hb_base.h"
#include "backend/hb_backend.h"
#include "math/hb_math.h"
#include "hb_cuda_gk.h"
#include "hb_cuda_kern.h"
#include "hb_cuda_mma.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ runtime */

cudaError_t cudaMalloc(void **p, size_t n)
{
	*p = malloc(n ? n : 1);
	return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p)
{
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t n)
{
	return cudaMalloc(p, n);
}

cudaError_t cudaFreeHost(void *p)
{
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMemset(void *d, int v, size_t n)
{
	memset(d, v, n);
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	(void)stream;
	return cudaMemcpy(d, s, n, kind);
}

/* events: the emulated device has run everything by the time it returns */
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
	static int one;

	(void)flags;
	*e = (cudaEvent_t)&one;
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream)
{
	(void)e, (void)stream;
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	(void)e;
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	(void)e;
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind kind)
{
	(void)kind;
	if (n)
		memmove(d, s, n);
	return cudaSuccess;
}

cudaError_t cudaMemcpy2D(void *d, size_t dpitch, const void *s, size_t spitch, size_t width, size_t height,
			 enum cudaMemcpyKind kind)
{
	(void)kind;
	for (size_t r = 0; r < height; r++)
		memmove((char *)d + r * dpitch, (const char *)s + r * spitch, width);
	return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e)
{
	return e == cudaSuccess ? "no error" : "emulated device error";
}

cudaError_t cudaGetDeviceCount(int *n)
{
	*n = 1;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
	(void)device;
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "host emulation");
	p->major = 9;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
	(void)device;
	return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	return cudaSuccess;
}

/* ------------------------------------------------------------ the CPU reference, device off */

static const struct hb_device_ops *saved;

static void off(void)
{
	saved = hb_backend_device();
	hb_backend_set_device(NULL);
}

static int on(void)
{
	hb_backend_set_device(saved);
	return 0;
}

static struct hb_wmat wmat(int type, const void *W, uint64_t row_bytes, uint64_t rows, uint64_t cols)
{
	struct hb_wmat w = { W, (enum hb_wtype)type, rows, cols, row_bytes };
	return w;
}

static int mm(const struct hb_wmat *w, const float *x, size_t T, float *y)
{
	float *scratch = malloc((size_t)w->cols * sizeof(float) + 64);

	if (!scratch)
		return (int)cudaErrorMemoryAllocation;
	off();
	hb_matmul(NULL, w, x, T, y, scratch);
	on();
	free(scratch);
	return 0;
}

int hbk_matmul(int type, const void *W, uint64_t row_bytes, uint64_t rows, uint64_t cols, const float *x, size_t T,
	       float *y)
{
	struct hb_wmat w = wmat(type, W, row_bytes, rows, cols);
	return T ? mm(&w, x, T, y) : 0;
}

int hbk_matmul_grouped(int type, const void *const *W, uint64_t row_bytes, uint64_t rows, uint64_t cols,
		       const int32_t *o, size_t groups, size_t most, const float *x, float *y)
{
	(void)most;
	for (size_t z = 0; z < groups; z++) {
		struct hb_wmat w = wmat(type, W[z], row_bytes, rows, cols);
		size_t n = (size_t)(o[z + 1] - o[z]);
		int rc = n ? mm(&w, x + (size_t)o[z] * cols, n, y + (size_t)o[z] * rows) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

/* the tensor-core forms: their contract is the float32 kernel's */
bool hbk_mma_takes(int type, uint64_t cols)
{
	return type == HBK_BF16 || (type == HBK_AFFINE4_G64 && cols % 64 == 0);
}

int hbk_mma_matmul(int type, const void *W, uint64_t row_bytes, uint64_t rows, uint64_t cols, const float *x,
		   size_t T, float *y)
{
	return hbk_matmul(type, W, row_bytes, rows, cols, x, T, y);
}

int hbk_mma_matmul2(int type, const void *W1, uint64_t row_bytes1, uint64_t rows1, const void *W2, uint64_t row_bytes2,
		    uint64_t rows2, uint64_t cols, const float *x, size_t T, float *y1, float *y2)
{
	int rc = hbk_matmul(type, W1, row_bytes1, rows1, cols, x, T, y1);

	return rc ? rc : hbk_matmul(type, W2, row_bytes2, rows2, cols, x, T, y2);
}

int hbk_matmul_skinny(int type, const void *W, uint64_t row_bytes, uint64_t rows, uint64_t cols, const float *x,
		      size_t T, float *y)
{
	return hbk_matmul(type, W, row_bytes, rows, cols, x, T, y);
}

int hbk_mma_matmul_grouped(int type, const void *const *W, uint64_t row_bytes, uint64_t rows, uint64_t cols,
			   const int32_t *off, size_t groups, size_t most, const float *x, float *y)
{
	return hbk_matmul_grouped(type, W, row_bytes, rows, cols, off, groups, most, x, y);
}

/* the emulated split keeps x itself (the terms' products would round as x's) */
size_t hbk_mma_split_bytes(int type, size_t T, uint64_t cols)
{
	(void)type;
	return T * cols * sizeof(float);
}

int hbk_mma_split(int type, const float *x, size_t T, uint64_t cols, void *split)
{
	(void)type;
	memmove(split, x, T * cols * sizeof(float));
	return 0;
}

int hbk_mma_split_rows(int type, const float *x, const int32_t *pack, size_t k, size_t T, uint64_t cols, void *split)
{
	(void)type;
	for (size_t t = 0; t < T; t++)
		memmove((float *)split + t * cols, x + (size_t)(pack[t] / (int32_t)k) * cols, cols * sizeof(float));
	return 0;
}

int hbk_mma_matmul2_split(int type, const void *W1, uint64_t row_bytes1, uint64_t rows1, const void *W2,
			  uint64_t row_bytes2, uint64_t rows2, uint64_t cols, const void *split, size_t T, float *y1,
			  float *y2)
{
	int rc = rows1 ? hbk_matmul(type, W1, row_bytes1, rows1, cols, split, T, y1) : 0;

	return rc || !rows2 ? rc : hbk_matmul(type, W2, row_bytes2, rows2, cols, split, T, y2);
}

int hbk_mma_grouped2_split_rows(int type, const void *const *W, const void *const *W2, uint64_t row_bytes,
				uint64_t rows, uint64_t cols, const int32_t *off, size_t groups, size_t most,
				const void *split, size_t T, const int32_t *pack, size_t k, size_t P, float *y, float *y2)
{
	float *g = NULL;
	int rc;

	(void)T;
	if (pack) { /* the rows gathered, as the split of them would hold them */
		if (!(g = malloc(P * cols * sizeof(float))) || hbk_mma_split_rows(type, split, pack, k, P, cols, g)) {
			free(g);
			return 2; /* cudaErrorMemoryAllocation */
		}
		split = g;
	}
	rc = hbk_matmul_grouped(type, W, row_bytes, rows, cols, off, groups, most, split, y);
	if (!rc && W2)
		rc = hbk_matmul_grouped(type, W2, row_bytes, rows, cols, off, groups, most, split, y2);
	free(g);
	return rc;
}

int hbk_mma_grouped2_split(int type, const void *const *W, const void *const *W2, uint64_t row_bytes, uint64_t rows,
			   uint64_t cols, const int32_t *off, size_t groups, size_t most, const void *split, size_t T,
			   float *y, float *y2)
{
	return hbk_mma_grouped2_split_rows(type, W, W2, row_bytes, rows, cols, off, groups, most, split, T, NULL, 1, T,
					   y, y2);
}

int hbk_swiglu_act(const float *g, const float *u, size_t n, float *a)
{
	for (size_t i = 0; i < n; i++)
		a[i] = hb_silu(g[i]) * u[i];
	return 0;
}

int hbk_gdn_step(float *S, const float *q, const float *k, const float *v, const float *beta, const float *decay,
		 size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o)
{
	off();
	hb_gdn_step(S, q, k, v, beta, decay, nk, nv, dk, dv, qscale, o);
	return on();
}

int hbk_gdn_scan(float *S, const float *qkv, size_t ld, const float *beta, const float *decay, size_t T, size_t nk,
		 size_t nv, size_t dk, size_t dv, float qscale, float *o, size_t ldo)
{
	off();
	hb_gdn_scan(NULL, S, qkv, ld, beta, decay, T, nk, nv, dk, dv, qscale, o, ldo);
	return on();
}

int hbk_gdn_scan_seqs(float *S, const float *qkv, size_t ld, const float *beta, const float *decay,
		      const struct hbk_seqs *q, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o,
		      size_t ldo)
{
	if (q->n > HBK_SEQS_MAX)
		return (int)cudaErrorInvalidValue;
	off();
	for (uint32_t j = 0; j < q->n; j++) {
		size_t r = q->off[j];
		hb_gdn_scan(NULL, S + j * q->s_stride, qkv + r * ld, ld, beta + r * nv, decay + r * nv, q->len[j], nk, nv,
			    dk, dv, qscale, o + r * ldo, ldo);
	}
	return on();
}

int hbk_qsa_select_batch(size_t nq, const float *iq, size_t iq_ld, size_t heads, size_t dim, const float *pooled,
			 const uint64_t *groups, const uint64_t *visible, uint64_t most, uint64_t keep, uint64_t ratio,
			 float *scores, size_t scores_ld, int32_t *flags, int32_t *rows, size_t rows_ld, int32_t *count)
{
	int32_t *heap = malloc((size_t)(keep ? keep : 1) * sizeof(int32_t));

	(void)most, (void)flags;
	if (!heap)
		return (int)cudaErrorMemoryAllocation;
	off();
	for (size_t i = 0; i < nq; i++)
		count[i] = (int32_t)hb_qsa_select(iq + i * iq_ld, heads, dim, pooled, groups[i], keep, ratio, visible[i],
						  scores + i * scores_ld, heap, rows + i * rows_ld);
	on();
	free(heap);
	return 0;
}

int hbk_qsa_select(const float *iq, size_t heads, size_t dim, const float *pooled, uint64_t groups, uint64_t keep,
		   uint64_t ratio, uint64_t visible, float *scores, int32_t *flags, int32_t *rows, int32_t *count)
{
	return hbk_qsa_select_batch(1, iq, 0, heads, dim, pooled, &groups, &visible, groups, keep, ratio, scores, 0,
				    flags, rows, 0, count);
}

int hbk_attend_batch(const struct hbk_attn *a)
{
	size_t most = 1;
	float *probs;

	for (size_t i = 0; i < a->nq; i++)
		most = (size_t)a->n[i] > most ? (size_t)a->n[i] : most;
	if (!(probs = malloc(most * sizeof(float))))
		return (int)cudaErrorMemoryAllocation;
	off();
	for (size_t i = 0; i < a->nq; i++)
		for (size_t h = 0; h < a->heads; h++)
			hb_qsa_attend(a->q + i * a->q_ld + h * a->qh_ld, a->K, a->V, a->stride, (h / a->per_kv) * a->dim,
				      a->dim, a->scale, a->rows + i * a->rows_ld, (size_t)a->n[i], probs,
				      a->out + i * a->out_ld + h * a->dim);
	on();
	free(probs);
	return 0;
}

int hbk_attend(const float *q, const float *K, const float *V, size_t dim, float scale, size_t n, float *out)
{
	int32_t *rows = malloc((n ? n : 1) * sizeof(int32_t));
	int32_t cnt = (int32_t)n;
	struct hbk_attn a = { 1, 1, 1, dim, q, 0, 0, K, V, dim, scale, rows, 0, &cnt, out, 0 };
	int rc;

	if (!rows)
		return (int)cudaErrorMemoryAllocation;
	for (size_t i = 0; i < n; i++)
		rows[i] = (int32_t)i;
	rc = hbk_attend_batch(&a);
	free(rows);
	return rc;
}

int hbk_gather_rows(const float *x, size_t H, const int32_t *pack, size_t k, size_t P, float *xg)
{
	for (size_t p = 0; p < P; p++)
		memcpy(xg + p * H, x + (size_t)(pack[p] / (int32_t)k) * H, H * sizeof(float));
	return 0;
}

int hbk_combine(const float *out, const int32_t *at, const float *w, size_t T, size_t k, size_t H, float *y)
{
	for (size_t t = 0; t < T; t++)
		for (size_t j = 0; j < H; j++) {
			float acc = 0;
			for (size_t r = 0; r < k; r++)
				acc += out[(size_t)at[t * k + r] * H + j] * w[t * k + r];
			y[t * H + j] = acc;
		}
	return 0;
}

/* ------------------------------------------------------------ hb_cuda_gk.h, restated */

int hbg_init(const double exp_table[16])
{
	(void)exp_table;
	return 0;
}

int hbg_embed(int type, const void *W, uint64_t row_bytes, size_t H, const int32_t *tok, size_t T, size_t hc, float *x)
{
	struct hb_wmat w = wmat(type, W, row_bytes, 0, H);

	for (size_t t = 0; t < T; t++) {
		w.rows = (uint64_t)tok[t] + 1;
		hb_wmat_row(&w, (uint64_t)tok[t], x + t * hc * H);
		for (size_t s = 1; s < hc; s++)
			memcpy(x + (t * hc + s) * H, x + t * hc * H, H * sizeof(float));
	}
	return 0;
}

int hbg_rmsnorm_zc(const float *x, size_t ldx, const float *w, size_t n, size_t group, float eps, float *out,
		   size_t ldo, size_t rows)
{
	for (size_t r = 0; r < rows; r++)
		hb_rmsnorm_zc(x + r * ldx, w, n, group, eps, out + r * ldo);
	return 0;
}

int hbg_norm_rope(const float *x, size_t ldx, size_t hx, const float *w, size_t dim, float eps, const float *inv_freq,
		  size_t half, uint64_t pos0, uint64_t pstep, float *out, size_t ldo, size_t ho, size_t rows, size_t heads)
{
	float *v = malloc(dim * sizeof(float));

	if (!v)
		return (int)cudaErrorMemoryAllocation;
	for (size_t r = 0; r < rows; r++)
		for (size_t h = 0; h < heads; h++) {
			float *o = out + r * ldo + h * ho;
			uint64_t pos = pos0 + r * pstep;
			hb_rmsnorm_zc(x + r * ldx + h * hx, w, dim, dim, eps, v);
			for (size_t i = 0; i < half; i++) {
				float f = (float)pos * inv_freq[i], cs = cosf(f), sn = sinf(f);
				o[i] = v[i] * cs - v[i + half] * sn;
				o[i + half] = v[i + half] * cs + v[i] * sn;
			}
			memcpy(o + 2 * half, v + 2 * half, (dim - 2 * half) * sizeof(float));
		}
	free(v);
	return 0;
}

int hbg_silu_div(float *a, size_t n, float div)
{
	for (size_t i = 0; i < n; i++)
		a[i] = hb_silu(a[i] / div);
	return 0;
}

int hbg_hc_mix(const float *mix, const float *xn, size_t T, size_t hc, size_t H, float *out)
{
	for (size_t t = 0; t < T; t++)
		for (size_t j = 0; j < H; j++) {
			float acc = 0;
			for (size_t s = 0; s < hc; s++)
				acc += hb_sigmoid(mix[(t * hc + s) * H + j]) * xn[(t * hc + s) * H + j];
			out[t * H + j] = acc / (float)hc;
		}
	return 0;
}

int hbg_hc_inj(float *v, size_t n, float hc)
{
	for (size_t i = 0; i < n; i++)
		v[i] = 2.0f * hb_sigmoid(v[i] / hc);
	return 0;
}

int hbg_hc_add(float *x, const float *y, const float *inj, size_t T, size_t hc, size_t H)
{
	for (size_t t = 0; t < T; t++)
		for (size_t s = 0; s < hc; s++)
			for (size_t j = 0; j < H; j++)
				x[(t * hc + s) * H + j] += y[t * H + j] * inj[t * hc + s];
	return 0;
}

int hbg_hc_add_norm(float *x, const float *y, const float *inj, size_t T, size_t hc, size_t H, const float *w,
		    float eps, float *out)
{
	hbg_hc_add(x, y, inj, T, hc, H);
	return hbg_rmsnorm_zc(x, hc * H, w, hc * H, H, eps, out, hc * H, T);
}

/* input p of the convolution's sequence: the chunk's own, or the state's (p < 0) */
static float seq_in(const float *from, const float *in, long long p, size_t slen, size_t C, size_t c)
{
	return p >= 0 ? in[(size_t)p * C + c] : from[(size_t)((long long)slen + p) * C + c];
}

int hbg_gdn_conv(const float *w, const float *from, float *to, const float *in, float *out, size_t T, size_t cd,
		 size_t K)
{
	for (size_t t = 0; t < T; t++)
		for (size_t c = 0; c < cd; c++) {
			float acc = 0;
			for (size_t j = 0; j < K; j++)
				acc += w[c * K + j] * seq_in(from, in, (long long)t - (long long)(K - 1 - j), K - 1, cd, c);
			out[t * cd + c] = hb_silu(acc);
		}
	for (size_t j = 0; j + 1 < K; j++)
		for (size_t c = 0; c < cd; c++)
			to[j * cd + c] = seq_in(from, in, (long long)T - (long long)(K - 1 - j), K - 1, cd, c);
	return 0;
}

int hbg_l2norm_heads(float *x, size_t ld, size_t rows, size_t heads, size_t dim, float eps)
{
	for (size_t r = 0; r < rows; r++)
		for (size_t h = 0; h < heads; h++)
			hb_l2norm(x + r * ld + h * dim, dim, eps);
	return 0;
}

int hbg_gdn_gates(float *b, float *a, float *lg, size_t n, size_t nv, const float *A_log, const float *dt_bias)
{
	for (size_t i = 0; i < n; i++) {
		float g = -expf(A_log[i % nv]) * hb_softplus(a[i] + dt_bias[i % nv]);
		b[i] = hb_sigmoid(b[i]);
		a[i] = expf(g);
		if (lg)
			lg[i] = g;
	}
	return 0;
}

int hbg_gated_norm(float *o, const float *z, const float *w, size_t heads, size_t dv, float eps, int sig)
{
	for (size_t h = 0; h < heads; h++) {
		float *v = o + h * dv;
		hb_rmsnorm_w(v, w, dv, eps, v);
		for (size_t j = 0; j < dv; j++)
			v[j] *= sig ? hb_sigmoid(z[h * dv + j]) : hb_silu(z[h * dv + j]);
	}
	return 0;
}

int hbg_add_bias(float *y, size_t ld, const float *b, size_t n, size_t T)
{
	for (size_t t = 0; t < T; t++)
		for (size_t j = 0; j < n; j++)
			y[t * ld + j] += b[j];
	return 0;
}

int hbg_pool_groups(const float *raw, size_t dim, uint64_t g0, uint64_t g1, size_t ratio, float *pooled)
{
	for (uint64_t g = g0; g < g1; g++)
		for (size_t c = 0; c < dim; c++) {
			float acc = 0;
			for (size_t r = 0; r < ratio; r++)
				acc += raw[((size_t)g * ratio + r) * dim + c];
			pooled[(size_t)g * dim + c] = acc / (float)ratio;
		}
	return 0;
}

int hbg_qsa_gate(float *o, const float *q, size_t T, size_t nh, size_t hd)
{
	for (size_t t = 0; t < T; t++)
		for (size_t h = 0; h < nh; h++)
			for (size_t j = 0; j < hd; j++)
				o[(t * nh + h) * hd + j] *= hb_sigmoid(q[t * 2 * nh * hd + h * 2 * hd + hd + j]);
	return 0;
}

int hbg_route(float *p, size_t T, size_t E, size_t k, int norm, int32_t *ids, float *w)
{
	for (size_t t = 0; t < T; t++) {
		float *row = p + t * E, sum = 0;
		hb_softmax(row, E);
		for (size_t r = 0; r < k; r++) {
			int32_t best = -1;
			for (size_t e = 0; e < E; e++) {
				bool taken = false;
				for (size_t q = 0; q < r; q++)
					taken |= ids[t * k + q] == (int32_t)e;
				if (!taken && (best < 0 || row[e] > row[best]))
					best = (int32_t)e;
			}
			ids[t * k + r] = best;
			sum += row[best];
		}
		for (size_t r = 0; r < k; r++)
			w[t * k + r] = norm ? row[ids[t * k + r]] / sum : row[ids[t * k + r]];
	}
	return 0;
}

int hbg_shared_add(float *y, const float *sh, const float *gate, size_t T, size_t H)
{
	for (size_t t = 0; t < T; t++)
		for (size_t j = 0; j < H; j++)
			y[t * H + j] += hb_sigmoid(gate[t]) * sh[t * H + j];
	return 0;
}

int hbg_ple_gate(const float *key, const float *q, const float *val, size_t T, size_t hc, size_t H, float *gv)
{
	for (size_t t = 0; t < T; t++)
		for (size_t s = 0; s < hc; s++) {
			float g = hb_dot(key + (t * hc + s) * H, q + (t * hc + s) * H, H) / sqrtf((float)H);
			float mag = sqrtf(fabsf(g) > 1e-6f ? fabsf(g) : 1e-6f);
			float sg = hb_sigmoid(g > 0 ? mag : g < 0 ? -mag : 0.0f);
			for (size_t j = 0; j < H; j++)
				gv[(t * hc + s) * H + j] = sg * val[t * H + j];
		}
	return 0;
}

int hbg_ple_conv(const float *w, const float *from, float *to, const float *gvn, const float *gv, float *x, size_t T,
		 size_t C, size_t K, size_t dil)
{
	size_t slen = (K - 1) * dil;

	for (size_t t = 0; t < T; t++)
		for (size_t c = 0; c < C; c++) {
			float acc = 0;
			for (size_t j = 0; j < K; j++)
				acc += w[c * K + j] * seq_in(from, gvn, (long long)t - (long long)((K - 1 - j) * dil), slen, C, c);
			x[t * C + c] += gv[t * C + c] + hb_silu(acc);
		}
	for (size_t r = 0; r < slen; r++)
		for (size_t c = 0; c < C; c++)
			to[r * C + c] = seq_in(from, gvn, (long long)T - (long long)(slen - r), slen, C, c);
	return 0;
}

int hbg_check_finite(const float *x, size_t n, int *flag)
{
	if (!hb_all_finite(x, n))
		*flag = 0;
	return 0;
}

int hbg_fill_random(void *d, size_t bytes, uint64_t seed)
{
	uint16_t *w = d;

	for (size_t i = 0; i < bytes / 2; i++) {
		uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		w[i] = (uint16_t)((z & 0x8000u) | (uint32_t)(120 + (z >> 16) % 3) << 7 | ((z >> 8) & 0x7fu));
	}
	return 0;
}
