/*
 * hb_cuda_gdnc.cu: the delta rule's chunked parallel form (hbk_gdn_chunked),
 * which the device graph takes for a chunk of one sequence of 64 tokens or
 * more; decode steps, short chunks and batches of sequences keep the
 * recurrent scans (hb_cuda_graph.c says why).
 *
 * Why: the recurrent scan walks a chunk's tokens one after another, two
 * dependent chains of dk additions a token, with only nv x dv threads busy.
 * Over a span of C = 64 tokens the rule has a closed form (with G_i the
 * running sum of the log decays from the span's start, Gamma_i = e^G_i):
 *   A[i][j] = beta_i e^(G_i - G_j) k_i.k_j (j < i),  X = (I + A)^-1
 *   W = X diag(beta Gamma) K,  U = X diag(beta) V,   P[i][j] = e^(G_i - G_j) q_i.k_j (j <= i)
 *   D = U - W S,  O = diag(Gamma) Q S + P D,  S' = Gamma_last S + (diag(e^(G_last - G)) K)^T D
 * (D's rows are the tokens' d = beta (v - S^T k); S the state the span
 * starts from).  gdnc_prep computes X, W, U, P and the scaled keys Kt for
 * every span at once (independent of S); gdnc_scan then walks the spans
 * in order, each step only the two products on the chain (D, then S'),
 * with every value column of S independent (a block takes 32 of them),
 * the next span's operands copied in while it computes; it leaves each
 * span's D and starting S in the scratch, from which gdnc_out computes
 * every span's O at once, off the chain.
 *
 * Measured (bench/cuda-gdn, H100, 16 key and 48 value heads of 128, one
 * sequence of 4,096 tokens, medians): the three kernels 0.92, 0.80 and
 * 0.75 ms, in all 0.56 of the recurrent scan's time (16,384 tokens: 0.55).
 * The scan with O on its chain and its loads between the products took
 * 2.56 ms (40 us a span); the same bits come out (the digests of
 * bench/cuda-gdn: each output's additions are in the same order).
 *
 * The arithmetic order is not the CPU's, so the outputs are not
 * bit-identical: test_cuda_parity bounds them against the CPU reference
 * (tests/unit/test_cuda_parity.c, "the chunked delta rule").  The log
 * decays come in as themselves (hbg_gdn_gates' g), not as e^g: a decay
 * that rounds to 0 has no logarithm.  Their running sums are double, so
 * that e^(G_i - G_j) keeps float precision however long the sums grow.
 */
#include "hb_cuda_kern.h"
#include "hb_cuda_mma_int.cuh"

#include <cuda_runtime.h>

using hb_mma::cp_async16;
using hb_mma::cp_async4;
using hb_mma::cp_async_commit;
using hb_mma::cp_async_wait;

#define GC HBK_GDN_SPAN /* tokens a span */
#define CB 32           /* value columns a gdnc_scan block */
#define NT 256          /* threads a block */

/*
 * e over [0, n) a thread's share at a time (n a multiple of NT), the loop
 * unrolled by 8: a tile's global loads are issued eight at a time instead
 * of one latency after another (4 % of the scan's time on an H100).
 */
#define EACH(e, n)                                                                       \
	static_assert((n) % NT == 0, "a tile splits evenly over the block");             \
	_Pragma("unroll 8") for (int e##_p = 0, e = (int)tid; e##_p < (n) / NT; e##_p++, e += NT)

/* the spans before sequence z's, over the sequences of one launch */
__device__ __forceinline__ size_t spans_before(const struct hbk_seqs &sq, unsigned z)
{
	size_t n = 0;

	for (unsigned j = 0; j < z; j++)
		n += (sq.len[j] + GC - 1) / GC;
	return n;
}

/*
 * Span i's scratch (per = hbk_gdn_span_floats floats, spans in order, the
 * value heads' within): W [GC][DK]; U [GC][dv], which the scan overwrites
 * with D; P [GC][GC]; e^G and e^(G_last - G) [2][GC]; Kt, the keys scaled
 * by e^(G_last - G), transposed [DK][GC]; Qg, the scaled queries times
 * e^G [GC][DK]; S, the state the span starts from [DK][dv] (the scan
 * writes it, gdnc_out reads it).
 */
struct span_at {
	float *W, *U, *P, *eG, *eK, *Kt, *Qg, *S;
};

__device__ __forceinline__ span_at span_of(const float *scr, size_t per, size_t i, int DK, size_t dv)
{
	span_at a;

	a.W = (float *)scr + i * per, a.U = a.W + GC * DK, a.P = a.U + GC * dv;
	a.eG = a.P + GC * GC, a.eK = a.eG + GC, a.Kt = a.eK + GC, a.Qg = a.Kt + DK * GC, a.S = a.Qg + GC * DK;
	return a;
}

/* ------------------------------------------------------------ per span, independent of the state */

template <int DK> struct prep_layout {
	static const int KP = DK + 1, AP = GC + 1;
	static const size_t bytes = (2 * GC * KP + 2 * GC * AP + 3 * GC) * sizeof(float) + GC * sizeof(double);
};

template <int DK>
__global__ void __launch_bounds__(NT) gdnc_prep(const float *qkv, size_t ld, const float *beta, const float *g,
						struct hbk_seqs sq, size_t nk, size_t nv, size_t dk, size_t dv,
						float qscale, float *scr, size_t per)
{
	typedef prep_layout<DK> LY;
	const int KP = LY::KP, AP = LY::AP;
	extern __shared__ __align__(16) unsigned char smem[];
	float *sK = (float *)smem, *sQ = sK + GC * KP, *sA = sQ + GC * KP, *sX = sA + GC * AP;
	float *sb = sX + GC * AP, *se = sb + GC, *sg = se + GC;
	double *sG = (double *)(sg + GC);
	unsigned z = blockIdx.z, tid = threadIdx.x, ti = tid / 16, tj = tid % 16;
	size_t h = blockIdx.x, c = blockIdx.y, len = sq.len[z];

	if (c * GC >= len)
		return;
	size_t t0 = sq.off[z] + c * GC, kh = h / (nv / nk);
	int n = (int)(len - c * GC < GC ? len - c * GC : GC);
	const float *xq = qkv + kh * dk, *xk = qkv + nk * dk + kh * dk, *xv = qkv + 2 * nk * dk + h * dv;
	span_at at = span_of(scr, per, (spans_before(sq, z) + c) * nv + h, DK, dv);
	float *W = at.W, *U = at.U, *P = at.P;

	/* the span's keys and scaled queries (rows past its end and columns past dk zero) */
	EACH(e, GC * DK) {
		int i = e / DK, d = e % DK;
		float kv = 0, qv = 0;
		if (i < n && d < (int)dk) {
			size_t r = (t0 + i) * ld + d;
			kv = xk[r], qv = __fmul_rn(xq[r], qscale);
		}
		sK[i * KP + d] = kv, sQ[i * KP + d] = qv;
	}
	if (tid < GC)
		sb[tid] = (int)tid < n ? beta[(t0 + tid) * nv + h] : 0.0f, sg[tid] = (int)tid < n ? g[(t0 + tid) * nv + h] : 0.0f;
	__syncthreads();
	if (tid == 0) {
		double G = 0;
		for (int i = 0; i < GC; i++)
			G += (double)sg[i], sG[i] = G;
	}
	__syncthreads();
	if (tid < GC) { /* sg, read only by the sums above, keeps e^(G_last - G) */
		se[tid] = expf((float)sG[tid]), sg[tid] = expf((float)(sG[GC - 1] - sG[tid]));
		at.eG[tid] = se[tid], at.eK[tid] = sg[tid];
	}
	/* k_i.k_j and q_i.k_j, a 4 x 4 tile a thread (rows ti + 16a, columns tj + 16b) */
	float kk[4][4], qk[4][4];
#pragma unroll
	for (int a = 0; a < 4; a++)
#pragma unroll
		for (int b = 0; b < 4; b++)
			kk[a][b] = 0, qk[a][b] = 0;
	for (int d = 0; d < DK; d++) {
		float ki[4], qi[4], kj[4];
#pragma unroll
		for (int a = 0; a < 4; a++)
			ki[a] = sK[(ti + 16 * a) * KP + d], qi[a] = sQ[(ti + 16 * a) * KP + d], kj[a] = sK[(tj + 16 * a) * KP + d];
#pragma unroll
		for (int a = 0; a < 4; a++)
#pragma unroll
			for (int b = 0; b < 4; b++)
				kk[a][b] = fmaf(ki[a], kj[b], kk[a][b]), qk[a][b] = fmaf(qi[a], kj[b], qk[a][b]);
	}
#pragma unroll
	for (int a = 0; a < 4; a++)
#pragma unroll
		for (int b = 0; b < 4; b++) {
			int i = ti + 16 * a, j = tj + 16 * b;
			float e = j <= i ? expf((float)(sG[i] - sG[j])) : 0.0f;
			sA[i * AP + j] = j < i ? sb[i] * e * kk[a][b] : 0.0f;
			P[i * GC + j] = e * qk[a][b];
		}
	__syncthreads();
	/* Kt: the keys (still unscaled in sK) times e^(G_last - G), transposed;
	 * Qg: the scaled queries (sQ, before U's columns pass through it) times e^G */
	EACH(e, DK * GC) {
		at.Kt[e] = sg[e % GC] * sK[(e % GC) * KP + e / GC];
		at.Qg[e] = se[e / DK] * sQ[(e / DK) * KP + e % DK];
	}
	/*
	 * X = (I + A)^-1 by rows (forward substitution); column j, a quarter
	 * of the sum a lane.  A column of X needs only its own rows above, and
	 * a column's four lanes are one warp's: a warp's barrier orders a row
	 * before the next, not the block's.
	 */
	{
		int j = (int)(tid / 32) * 8 + (int)(tid % 32) / 4, p = (int)(tid % 4);
		for (int i = 0; i < GC; i++) {
			float s = 0;
			for (int m = j + p; m < i; m += 4)
				s = fmaf(sA[i * AP + m], sX[m * AP + j], s);
			s += __shfl_xor_sync(0xffffffffu, s, 1);
			s += __shfl_xor_sync(0xffffffffu, s, 2);
			if (p == 0)
				sX[i * AP + j] = j == i ? 1.0f : j < i ? -s : 0.0f;
			__syncwarp();
		}
		__syncthreads();
	}
	/* W = X diag(beta Gamma) K */
	EACH(e, GC * DK)
		sK[(e / DK) * KP + e % DK] *= sb[e / DK] * se[e / DK];
	__syncthreads();
	{
		float w[4][DK / 16];
#pragma unroll
		for (int a = 0; a < 4; a++)
#pragma unroll
			for (int b = 0; b < DK / 16; b++)
				w[a][b] = 0;
		for (int j = 0; j < GC; j++) {
			float x[4];
#pragma unroll
			for (int a = 0; a < 4; a++)
				x[a] = sX[(ti + 16 * a) * AP + j];
#pragma unroll
			for (int b = 0; b < DK / 16; b++) {
				float kv = sK[j * KP + tj + 16 * b];
#pragma unroll
				for (int a = 0; a < 4; a++)
					w[a][b] = fmaf(x[a], kv, w[a][b]);
			}
		}
#pragma unroll
		for (int a = 0; a < 4; a++)
#pragma unroll
			for (int b = 0; b < DK / 16; b++)
				W[(ti + 16 * a) * DK + tj + 16 * b] = w[a][b];
	}
	/* U = X diag(beta) V, 64 value columns at a time through sQ */
	for (size_t c0 = 0; c0 < dv; c0 += GC) {
		float u[4][4];
		__syncthreads();
		EACH(e, GC * GC) {
			int i = e / GC, cc = e % GC;
			sQ[i * AP + cc] = i < n && c0 + cc < dv ? sb[i] * xv[(t0 + i) * ld + c0 + cc] : 0.0f;
		}
		__syncthreads();
#pragma unroll
		for (int a = 0; a < 4; a++)
#pragma unroll
			for (int b = 0; b < 4; b++)
				u[a][b] = 0;
		for (int j = 0; j < GC; j++) {
			float x[4], v[4];
#pragma unroll
			for (int a = 0; a < 4; a++)
				x[a] = sX[(ti + 16 * a) * AP + j], v[a] = sQ[j * AP + tj + 16 * a];
#pragma unroll
			for (int a = 0; a < 4; a++)
#pragma unroll
				for (int b = 0; b < 4; b++)
					u[a][b] = fmaf(x[a], v[b], u[a][b]);
		}
#pragma unroll
		for (int a = 0; a < 4; a++)
#pragma unroll
			for (int b = 0; b < 4; b++)
				if (c0 + tj + 16 * b < dv)
					U[(ti + 16 * a) * dv + c0 + tj + 16 * b] = u[a][b];
	}
}

/* ------------------------------------------------------------ the products on tiles in shared memory */

/* acc + x.x s0 + x.y s1 + x.z s2 + x.w s3, the last term first, fused */
__device__ __forceinline__ float chain4(float4 x, float s0, float s1, float s2, float s3, float acc)
{
	return fmaf(x.x, s0, fmaf(x.y, s1, fmaf(x.z, s2, fmaf(x.w, s3, acc))));
}

/*
 * acc[a][b] += row r0 + RS a of the tile B ([.][bp]) times column 4 tx + b
 * of the tile S ([K][sp]), K a multiple of 4, four terms a step.  Each
 * output's additions come in the order of this loop alone, whichever
 * thread takes it: the tiles may be spread over threads as suits the
 * loads without changing a bit.  A thread's loads a step: four rows of
 * S and A of B, 16 bytes each.
 */
template <int K, int A, int RS>
__device__ __forceinline__ void tile_product(const float *B, int bp, const float *S, int sp, unsigned r0, unsigned tx,
					     float (&acc)[A][4])
{
	for (int d = 0; d < K; d += 4) {
		float4 s[4];
#pragma unroll
		for (int k = 0; k < 4; k++)
			s[k] = *(const float4 *)&S[(d + k) * sp + 4 * tx];
#pragma unroll
		for (int a = 0; a < A; a++) {
			float4 x = *(const float4 *)&B[(r0 + RS * a) * bp + d];
			acc[a][0] = chain4(x, s[0].x, s[1].x, s[2].x, s[3].x, acc[a][0]);
			acc[a][1] = chain4(x, s[0].y, s[1].y, s[2].y, s[3].y, acc[a][1]);
			acc[a][2] = chain4(x, s[0].z, s[1].z, s[2].z, s[3].z, acc[a][2]);
			acc[a][3] = chain4(x, s[0].w, s[1].w, s[2].w, s[3].w, acc[a][3]);
		}
	}
}

template <int A> __device__ __forceinline__ void zero(float (&acc)[A][4])
{
#pragma unroll
	for (int a = 0; a < A; a++)
		acc[a][0] = acc[a][1] = acc[a][2] = acc[a][3] = 0;
}

/* rows x C floats of g (row stride ld) from column c0 (zeros at and past
 * dv) into t (row pitch tp), copied asynchronously; vec: 16 bytes at a
 * time (dv a multiple of 4) */
template <int C>
__device__ __forceinline__ void fetch_cols(float *t, int tp, const float *g, size_t ld, size_t c0, size_t dv, int rows,
					   bool vec, unsigned tid)
{
	if (vec)
		for (int e = (int)tid; e < rows * C / 4; e += NT) {
			int i = e / (C / 4), j = 4 * (e % (C / 4));
			bool in = c0 + j < dv;
			cp_async16(smem_u32(&t[i * tp + j]), in ? g + i * ld + c0 + j : g, in);
		}
	else
		for (int e = (int)tid; e < rows * C; e += NT) {
			int i = e / C, j = e % C;
			bool in = c0 + j < dv;
			cp_async4(smem_u32(&t[i * tp + j]), in ? g + i * ld + c0 + j : g, in);
		}
}

/* ------------------------------------------------------------ the spans in order, 32 value columns a block */

template <int DK> struct scan_layout {
	static const int BP = DK + 4, SP = CB + 4, TP = GC + 4;
	/* W [GC][BP], Kt [DK][TP], S [DK][SP], U and D [GC][SP] */
	static const size_t bytes = (GC * BP + DK * TP + DK * SP + 2 * GC * SP) * sizeof(float);
};

/* a span's W and its U's columns [c0, c0 + CB) into sW and sU, asynchronously */
template <int DK>
__device__ __forceinline__ void scan_fetch_wu(float *sW, float *sU, const span_at &at, size_t dv, size_t c0, bool vec,
					      unsigned tid)
{
	EACH(e, GC * DK / 4) {
		int i = e / (DK / 4), d = e % (DK / 4) * 4;
		cp_async16(smem_u32(&sW[i * scan_layout<DK>::BP + d]), &at.W[i * DK + d], true);
	}
	fetch_cols<CB>(sU, scan_layout<DK>::SP, at.U, dv, c0, dv, GC, vec, tid);
}

/* a span's Kt into sKt, asynchronously */
template <int DK> __device__ __forceinline__ void scan_fetch_kt(float *sKt, const span_at &at, unsigned tid)
{
	EACH(e, DK * GC / 4) {
		int d = e / (GC / 4), j = e % (GC / 4) * 4;
		cp_async16(smem_u32(&sKt[d * scan_layout<DK>::TP + j]), &at.Kt[d * GC + j], true);
	}
}

/*
 * The chain from span to span, per span two products: D = U - W S, then
 * S' = Gamma_last S + Kt D.  The next span's W and U are copied in while
 * the second product runs, its Kt while the next first product runs.
 * The outputs are not on the chain: the span's D (over U) and starting S
 * go to its scratch for gdnc_out.  A thread takes 4 columns (4 tx ..) of
 * rows r0 + 32 a.
 */
template <int DK>
__global__ void __launch_bounds__(NT, 2) gdnc_scan(float *S0, struct hbk_seqs sq, size_t nv, size_t dk, size_t dv,
						   const float *scr, size_t per)
{
	typedef scan_layout<DK> LY;
	const int BP = LY::BP, SP = LY::SP, TP = LY::TP;
	extern __shared__ __align__(16) unsigned char smem[];
	float *sW = (float *)smem, *sKt = sW + GC * BP, *sS = sKt + DK * TP, *sU = sS + DK * SP, *sD = sU + GC * SP;
	unsigned z = blockIdx.z, tid = threadIdx.x, tx = tid % (CB / 4), r0 = tid / (CB / 4);
	size_t h = blockIdx.x, c0 = (size_t)blockIdx.y * CB, len = sq.len[z], base = spans_before(sq, z);
	size_t spans = (len + GC - 1) / GC;
	float *S = S0 + z * sq.s_stride + h * dk * dv;
	bool vec = dv % 4 == 0;
	static_assert(NT == 32 * (CB / 4), "the rows a thread takes are 32 apart");

	EACH(e, DK * CB) {
		int i = e / CB, j = e % CB;
		sS[i * SP + j] = i < (int)dk && c0 + j < dv ? S[i * dv + c0 + j] : 0.0f;
	}
	if (spans) {
		span_at at = span_of(scr, per, base * nv + h, DK, dv);
		scan_fetch_wu<DK>(sW, sU, at, dv, c0, vec, tid);
		cp_async_commit();
		scan_fetch_kt<DK>(sKt, at, tid);
		cp_async_commit();
	}
	for (size_t sp = 0; sp < spans; sp++) {
		span_at at = span_of(scr, per, (base + sp) * nv + h, DK, dv);
		float acc[GC / 32][4], last;

		cp_async_wait<1>(); /* this span's W and U (its Kt may still be coming) */
		__syncthreads();    /* ... for every thread; and the last span's S' written */
		last = at.eG[GC - 1];
		EACH(e, DK * CB) {
			int i = e / CB, j = e % CB;
			if (c0 + j < dv)
				at.S[i * dv + c0 + j] = sS[i * SP + j];
		}
		/* D = U - W S */
		zero(acc);
		tile_product<DK, GC / 32, 32>(sW, BP, sS, SP, r0, tx, acc);
#pragma unroll
		for (int a = 0; a < GC / 32; a++)
#pragma unroll
			for (int b = 0; b < 4; b++) {
				int i = (int)r0 + 32 * a, j = 4 * (int)tx + b;
				float d = sU[i * SP + j] - acc[a][b];
				sD[i * SP + j] = d;
				if (c0 + j < dv)
					at.U[i * dv + c0 + j] = d;
			}
		__syncthreads(); /* sW and sU read, sD whole */
		if (sp + 1 < spans)
			scan_fetch_wu<DK>(sW, sU, span_of(scr, per, (base + sp + 1) * nv + h, DK, dv), dv, c0, vec, tid);
		cp_async_commit();
		cp_async_wait<1>(); /* this span's Kt */
		__syncthreads();
		/* S = Gamma_last S + Kt D */
		{
			float sacc[DK / 32][4];
			zero(sacc);
			tile_product<GC, DK / 32, 32>(sKt, TP, sD, SP, r0, tx, sacc);
#pragma unroll
			for (int a = 0; a < DK / 32; a++)
#pragma unroll
				for (int b = 0; b < 4; b++) {
					float *x = &sS[((int)r0 + 32 * a) * SP + 4 * (int)tx + b];
					*x = fmaf(last, *x, sacc[a][b]);
				}
		}
		__syncthreads(); /* sKt read */
		if (sp + 1 < spans)
			scan_fetch_kt<DK>(sKt, span_of(scr, per, (base + sp + 1) * nv + h, DK, dv), tid);
		cp_async_commit();
	}
	cp_async_wait<0>();
	__syncthreads();
	EACH(e, DK * CB) {
		int i = e / CB, j = e % CB;
		if (i < (int)dk && c0 + j < dv)
			S[i * dv + c0 + j] = sS[i * SP + j];
	}
}

/* ------------------------------------------------------------ the outputs, every span at once */

#define OC 64 /* value columns a gdnc_out block */

template <int DK> struct out_layout {
	static const int BP = DK + 4, CP = OC + 4, PP = GC + 4;
	/* Q Gamma [GC][BP], S [DK][CP], D [GC][CP], P [GC][PP] */
	static const size_t bytes = (GC * BP + DK * CP + GC * CP + GC * PP) * sizeof(float);
};

/*
 * O = diag(Gamma) Q S + P D for one span's rows and 64 value columns,
 * from the S and D the scan left and the Qg gdnc_prep left (the products
 * in the order the scan once took them on its chain; the scaled queries
 * rounded as the recurrent scan rounds them).  A thread takes 4 columns (4 tx ..) of rows
 * r0 + 16 a.
 */
template <int DK>
__global__ void __launch_bounds__(NT, 2) gdnc_out(struct hbk_seqs sq, size_t nv, size_t dv, const float *scr,
						  size_t per, float *o, size_t ldo)
{
	typedef out_layout<DK> LY;
	const int BP = LY::BP, CP = LY::CP, PP = LY::PP;
	extern __shared__ __align__(16) unsigned char smem[];
	float *sQ = (float *)smem, *sS = sQ + GC * BP, *sD = sS + DK * CP, *sP = sD + GC * CP;
	unsigned z = blockIdx.z, tid = threadIdx.x, tx = tid % (OC / 4), r0 = tid / (OC / 4);
	unsigned ncb = (unsigned)((dv + OC - 1) / OC);
	size_t h = blockIdx.x / ncb, c0 = (size_t)(blockIdx.x % ncb) * OC, sp = blockIdx.y, len = sq.len[z];
	static_assert(NT * 16 == OC * GC, "a thread takes 4 rows of 4 columns");

	if (sp * GC >= len)
		return;
	span_at at = span_of(scr, per, (spans_before(sq, z) + sp) * nv + h, DK, dv);
	size_t t0 = sq.off[z] + sp * GC;
	int n = (int)(len - sp * GC < GC ? len - sp * GC : GC);
	float acc[4][4];

	/* the first product's operands, then the second's, so that the first
	 * starts while the second's come in */
	EACH(e, GC * DK / 4)
		cp_async16(smem_u32(&sQ[(e / (DK / 4)) * BP + e % (DK / 4) * 4]), &at.Qg[4 * e], true);
	fetch_cols<OC>(sS, CP, at.S, dv, c0, dv, DK, dv % 4 == 0, tid);
	cp_async_commit();
	fetch_cols<OC>(sD, CP, at.U, dv, c0, dv, GC, dv % 4 == 0, tid);
	EACH(e, GC * GC / 4)
		cp_async16(smem_u32(&sP[(e / (GC / 4)) * PP + e % (GC / 4) * 4]), &at.P[4 * e], true);
	cp_async_commit();
	cp_async_wait<1>();
	__syncthreads();
	zero(acc);
	tile_product<DK, 4, 16>(sQ, BP, sS, CP, r0, tx, acc);
	cp_async_wait<0>();
	__syncthreads();
	tile_product<GC, 4, 16>(sP, PP, sD, CP, r0, tx, acc);
#pragma unroll
	for (int a = 0; a < 4; a++)
#pragma unroll
		for (int b = 0; b < 4; b++) {
			int i = (int)r0 + 16 * a;
			size_t j = c0 + 4 * tx + b;
			if (i < n && j < dv)
				o[(t0 + i) * ldo + h * dv + j] = acc[a][b];
		}
}

int hbk_gdn_chunked_parts = 7;

template <int DK>
static int gdnc_launch(float *S, const float *qkv, size_t ld, const float *beta, const float *g,
		       const struct hbk_seqs *q, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o,
		       size_t ldo, float *scr)
{
	size_t per = hbk_gdn_span_floats(dk, dv), most = 0;
	unsigned spans, ncb = (unsigned)((dv + CB - 1) / CB), nob = (unsigned)((dv + OC - 1) / OC);
	cudaError_t e;

	for (uint32_t j = 0; j < q->n; j++)
		most = q->len[j] > most ? q->len[j] : most;
	if (!most)
		return 0;
	spans = (unsigned)((most + GC - 1) / GC);
	if ((e = cudaFuncSetAttribute(gdnc_prep<DK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
				      (int)prep_layout<DK>::bytes)) != cudaSuccess ||
	    (e = cudaFuncSetAttribute(gdnc_scan<DK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
				      (int)scan_layout<DK>::bytes)) != cudaSuccess ||
	    (e = cudaFuncSetAttribute(gdnc_out<DK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
				      (int)out_layout<DK>::bytes)) != cudaSuccess)
		return (int)e;
	if (hbk_gdn_chunked_parts & 1)
		gdnc_prep<DK><<<dim3((unsigned)nv, spans, q->n), NT, prep_layout<DK>::bytes>>>(qkv, ld, beta, g, *q, nk,
												nv, dk, dv, qscale, scr, per);
	if (hbk_gdn_chunked_parts & 2)
		gdnc_scan<DK><<<dim3((unsigned)nv, ncb, q->n), NT, scan_layout<DK>::bytes>>>(S, *q, nv, dk, dv, scr, per);
	if (hbk_gdn_chunked_parts & 4)
		gdnc_out<DK><<<dim3((unsigned)nv * nob, spans, q->n), NT, out_layout<DK>::bytes>>>(*q, nv, dv, scr, per,
												      o, ldo);
	return (int)cudaGetLastError();
}

extern "C" int hbk_gdn_chunked(float *S, const float *qkv, size_t ld, const float *beta, const float *g,
			       const struct hbk_seqs *q, size_t nk, size_t nv, size_t dk, size_t dv, float qscale,
			       float *o, size_t ldo, float *scratch)
{
	if (!nv || !nk || nv % nk || q->n > HBK_SEQS_MAX)
		return (int)cudaErrorInvalidValue;
	if (!q->n)
		return 0;
	if (dk <= 64)
		return gdnc_launch<64>(S, qkv, ld, beta, g, q, nk, nv, dk, dv, qscale, o, ldo, scratch);
	if (dk <= 128)
		return gdnc_launch<128>(S, qkv, ld, beta, g, q, nk, nv, dk, dv, qscale, o, ldo, scratch);
	return -1;
}
