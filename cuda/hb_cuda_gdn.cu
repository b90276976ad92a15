/*
 * hb_cuda_gdn.cu: the delta rule's chunk scan with its tokens overlapped
 * (hbk_gdn_scan_pipe; hbk_gdn_scan_seqs takes it for key widths 64 and 128).
 *
 * Why: a token of the rule is two chains of dk dependent float additions
 * per value column, m = sum (S dec) k, then, once d = (v - m) beta is known,
 * o = sum (S + k d) q.  The plain scan (hb_cuda_kern.cu) runs them one after
 * the other and loads each token's q, k, gates and v from global memory
 * between them, so a token costs both chains' latency plus a load's.  Here
 * token t's output chain and token t+1's m chain run in one loop (they are
 * independent: m(t+1) needs S after token t's update, column entry by
 * column entry, not o(t)), and token t+2's inputs are loaded while they
 * run, into the third of three shared buffers, so one barrier a token
 * orders everything.
 *
 * Every operation, its operands and the order of each chain are the plain
 * scan's (explicit roundings, no fused multiply-add): the outputs and
 * states are bit-identical to it, and so to the CPU reference.
 */
#include "hb_cuda_kern.h"

#include <cuda_runtime.h>

/* q is kept scaled (q qscale, rounded: the very operand the rule multiplies by) */
template <int DK> struct __align__(16) gdn_buf {
	float q[3][DK], k[3][DK], g[3][2]; /* token u in [u % 3]; g: decay, beta */
};

/* this thread's share of token u's q and k, and (thread 0) its gates */
template <int DK, int PER> struct gdn_regs {
	float q[PER], k[PER], dec, beta;
};

template <int DK, int PER>
__device__ __forceinline__ void gdn_fetch(gdn_regs<DK, PER> &r, const float *xq, const float *xk, const float *decay,
					  const float *beta, size_t u, size_t ld, size_t nv, size_t h)
{
#pragma unroll
	for (int p = 0; p < PER; p++) {
		unsigned i = threadIdx.x + p * blockDim.x;
		if (i < DK)
			r.q[p] = xq[u * ld + i], r.k[p] = xk[u * ld + i];
	}
	if (threadIdx.x == 0)
		r.dec = decay[u * nv + h], r.beta = beta[u * nv + h];
}

template <int DK, int PER>
__device__ __forceinline__ void gdn_stash(const gdn_regs<DK, PER> &r, gdn_buf<DK> &b, int slot, float qscale)
{
#pragma unroll
	for (int p = 0; p < PER; p++) {
		unsigned i = threadIdx.x + p * blockDim.x;
		if (i < DK)
			b.q[slot][i] = __fmul_rn(r.q[p], qscale), b.k[slot][i] = r.k[p];
	}
	if (threadIdx.x == 0)
		b.g[slot][0] = r.dec, b.g[slot][1] = r.beta;
}

/* one block per (value head, sequence), one thread per value column, the column of S in registers */
template <int DK, int PER>
__global__ void gdn_pipe_kernel(float *S0, const float *qkv, size_t ld, const float *beta, const float *decay,
				struct hbk_seqs sq, size_t nk, size_t nv, size_t dv, float qscale, float *o, size_t ldo)
{
	__shared__ gdn_buf<DK> b;
	size_t h = blockIdx.x, j = threadIdx.x, rep = nv / nk, r0 = sq.off[blockIdx.y], T = sq.len[blockIdx.y];
	float *S = S0 + blockIdx.y * sq.s_stride + h * DK * dv, col[DK];
	const float *x = qkv + r0 * ld, *xq = x + (h / rep) * DK, *xk = x + nk * DK + (h / rep) * DK;
	const float *xv = x + 2 * nk * DK + h * dv + j;
	bool live = j < dv;
	gdn_regs<DK, PER> r;
	float d = 0, v1 = 0, v2 = 0;

	beta += r0 * nv, decay += r0 * nv, o += r0 * ldo;
	if (!T)
		return;
	if (live)
#pragma unroll
		for (int i = 0; i < DK; i++)
			col[i] = S[i * dv + j];
	/* tokens 0 and 1 staged; token 0's m chain */
	for (size_t u = 0; u < 2 && u < T; u++) {
		gdn_fetch<DK, PER>(r, xq, xk, decay, beta, u, ld, nv, h);
		gdn_stash<DK, PER>(r, b, (int)u, qscale);
	}
	if (live)
		v1 = xv[0], v2 = T > 1 ? xv[ld] : 0;
	__syncthreads();
	if (live) {
		float dec = b.g[0][0], m = 0;
#pragma unroll
		for (int i = 0; i < DK; i++) {
			col[i] = __fmul_rn(col[i], dec);
			m = __fadd_rn(m, __fmul_rn(col[i], b.k[0][i]));
		}
		d = __fmul_rn(__fadd_rn(v1, -m), b.g[0][1]);
		v1 = v2;
	}
	for (size_t t = 0; t < T; t++) {
		int bt = (int)(t % 3), bn = (int)((t + 1) % 3);
		bool next = t + 1 < T, ahead = t + 2 < T;
		if (ahead) { /* token t+2's inputs in flight while the chains run */
			gdn_fetch<DK, PER>(r, xq, xk, decay, beta, t + 2, ld, nv, h);
			if (live)
				v2 = xv[(t + 2) * ld];
		}
		if (live) {
			float acc = 0, m = 0, dec = b.g[bn][0];
			/* four entries a step: one shared-memory load of each operand, not four */
			if (next) {
#pragma unroll
				for (int i = 0; i < DK; i += 4) {
					float4 kt = *(const float4 *)&b.k[bt][i], qt = *(const float4 *)&b.q[bt][i];
					float4 kn = *(const float4 *)&b.k[bn][i];
					const float ktv[4] = { kt.x, kt.y, kt.z, kt.w }, qtv[4] = { qt.x, qt.y, qt.z, qt.w };
					const float knv[4] = { kn.x, kn.y, kn.z, kn.w };
#pragma unroll
					for (int e = 0; e < 4; e++) {
						col[i + e] = __fadd_rn(col[i + e], __fmul_rn(ktv[e], d));
						acc = __fadd_rn(acc, __fmul_rn(col[i + e], qtv[e]));
						col[i + e] = __fmul_rn(col[i + e], dec);
						m = __fadd_rn(m, __fmul_rn(col[i + e], knv[e]));
					}
				}
			} else {
#pragma unroll
				for (int i = 0; i < DK; i++) {
					col[i] = __fadd_rn(col[i], __fmul_rn(b.k[bt][i], d));
					acc = __fadd_rn(acc, __fmul_rn(col[i], b.q[bt][i]));
				}
			}
			o[t * ldo + h * dv + j] = acc;
			if (next)
				d = __fmul_rn(__fadd_rn(v1, -m), b.g[bn][1]);
			v1 = v2;
		}
		if (ahead)
			gdn_stash<DK, PER>(r, b, (int)((t + 2) % 3), qscale); /* last read in token t-1's turn */
		__syncthreads();
	}
	if (live)
#pragma unroll
		for (int i = 0; i < DK; i++)
			S[i * dv + j] = col[i];
}

/* -1: not a key width this kernel is built for */
extern "C" int hbk_gdn_scan_pipe(float *S, const float *qkv, size_t ld, const float *beta, const float *decay,
				 const struct hbk_seqs *q, size_t nk, size_t nv, size_t dk, size_t dv, float qscale,
				 float *o, size_t ldo)
{
	unsigned threads = (unsigned)((dv + 31) / 32 * 32);
	dim3 grid((unsigned)nv, q->n);

	/* PER: each thread's share of a token's q and k (threads >= 32) */
	if (dk == 128)
		gdn_pipe_kernel<128, 4><<<grid, threads>>>(S, qkv, ld, beta, decay, *q, nk, nv, dv, qscale, o, ldo);
	else if (dk == 64)
		gdn_pipe_kernel<64, 2><<<grid, threads>>>(S, qkv, ld, beta, decay, *q, nk, nv, dv, qscale, o, ldo);
	else
		return -1;
	return (int)cudaGetLastError();
}
