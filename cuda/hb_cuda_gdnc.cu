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
 * starts from).  gdnc_prep computes X, W, U and P for every span at once
 * (independent of S); gdnc_scan then walks the spans in order, each step
 * three small products, with every value column of S independent (a block
 * takes 32 of them).
 *
 * Measured (bench/cuda-gdn, H100, 16 key and 48 value heads of 128, one
 * sequence): 0.80 of the recurrent scan's time from 1,024 to 16,384
 * tokens; of it a quarter the preparation, the rest the scan, whose 40 us
 * a span are several times its loads and products counted: the next step
 * is to overlap a span's loads with the one before it.
 *
 * The arithmetic order is not the CPU's, so the outputs are not
 * bit-identical: test_cuda_parity bounds them against the CPU reference
 * (tests/unit/test_cuda_parity.c, "the chunked delta rule").  The log
 * decays come in as themselves (hbg_gdn_gates' g), not as e^g: a decay
 * that rounds to 0 has no logarithm.  Their running sums are double, so
 * that e^(G_i - G_j) keeps float precision however long the sums grow.
 */
#include "hb_cuda_kern.h"

#include <cuda_runtime.h>

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
	float *W = scr + ((spans_before(sq, z) + c) * nv + h) * per, *U = W + GC * DK, *P = U + GC * dv;
	float *eG = P + GC * GC, *eK = eG + GC;

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
	if (tid < GC) {
		se[tid] = expf((float)sG[tid]);
		eG[tid] = se[tid], eK[tid] = expf((float)(sG[GC - 1] - sG[tid]));
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
	/* X = (I + A)^-1 by rows (forward substitution); column j, a quarter of the sum a lane */
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
			__syncthreads();
		}
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

/* ------------------------------------------------------------ the spans in order, 32 value columns a block */

template <int DK> struct scan_layout {
	static const int BP = DK + 4, SP = CB + 1, PP = GC + 4, TP = GC + 4;
	/* sB holds W [GC][BP], then Q Gamma [GC][BP], then K's transpose [DK][TP] */
	static const int BIG = GC * BP > DK * TP ? GC * BP : DK * TP;
	static const size_t bytes = (BIG + DK * SP + GC * SP + GC * PP + 2 * GC) * sizeof(float);
};

/* acc[a] += row w + 8a of the [GC][bp] tile B times column c of the
 * [K][sp] tile S (K a multiple of 4), four products a step */
template <int K>
__device__ __forceinline__ void rows_times_cols(const float *B, int bp, const float *S, int sp, unsigned w, unsigned c,
						float (&acc)[8])
{
	for (int d = 0; d < K; d += 4) {
		float s0 = S[d * sp + c], s1 = S[(d + 1) * sp + c], s2 = S[(d + 2) * sp + c], s3 = S[(d + 3) * sp + c];
#pragma unroll
		for (int a = 0; a < 8; a++) {
			float4 x = *(const float4 *)&B[(w + 8 * a) * bp + d];
			acc[a] = fmaf(x.x, s0, fmaf(x.y, s1, fmaf(x.z, s2, fmaf(x.w, s3, acc[a]))));
		}
	}
}

/* acc[a] = row w + 8a of the [GC][bp] tile B times column c of S [DK][sp] */
template <int DK>
__device__ __forceinline__ void rows_times_state(const float *B, int bp, const float *S, int sp, unsigned w,
						 unsigned c, float (&acc)[8])
{
#pragma unroll
	for (int a = 0; a < 8; a++)
		acc[a] = 0;
	rows_times_cols<DK>(B, bp, S, sp, w, c, acc);
}

template <int DK>
__global__ void __launch_bounds__(NT) gdnc_scan(float *S0, const float *qkv, size_t ld, struct hbk_seqs sq,
						size_t nk, size_t nv, size_t dk, size_t dv, float qscale,
						const float *scr, size_t per, float *o, size_t ldo)
{
	typedef scan_layout<DK> LY;
	const int BP = LY::BP, SP = LY::SP, PP = LY::PP, TP = LY::TP;
	extern __shared__ __align__(16) unsigned char smem[];
	float *sB = (float *)smem, *sS = sB + LY::BIG, *sD = sS + DK * SP, *sP = sD + GC * SP, *se = sP + GC * PP;
	unsigned z = blockIdx.z, tid = threadIdx.x, c = tid % 32, w = tid / 32;
	size_t h = blockIdx.x, c0 = (size_t)blockIdx.y * CB, len = sq.len[z], base = spans_before(sq, z);
	size_t kh = h / (nv / nk), spans = (len + GC - 1) / GC;
	float *S = S0 + z * sq.s_stride + h * dk * dv;
	const float *xq = qkv + kh * dk, *xk = qkv + nk * dk + kh * dk;
	bool col = c0 + c < dv;

	EACH(e, DK * CB) {
		int i = e / CB, j = e % CB;
		sS[i * SP + j] = i < (int)dk && c0 + j < dv ? S[i * dv + c0 + j] : 0.0f;
	}
	for (size_t sp = 0; sp < spans; sp++) {
		const float *W = scr + ((base + sp) * nv + h) * per, *U = W + GC * DK, *P = U + GC * dv;
		size_t t0 = sq.off[z] + sp * GC;
		int n = (int)(len - sp * GC < GC ? len - sp * GC : GC);
		float acc[8];

		__syncthreads(); /* the last span's readers of sB, sD and sS are done */
		EACH(e, GC * DK / 4) {
			int i = e / (DK / 4), d = e % (DK / 4) * 4;
			*(float4 *)&sB[i * BP + d] = *(const float4 *)&W[i * DK + d];
		}
		EACH(e, GC * CB) {
			int i = e / CB, j = e % CB;
			sD[i * SP + j] = c0 + j < dv ? U[i * dv + c0 + j] : 0.0f;
		}
		EACH(e, GC * GC)
			sP[(e / GC) * PP + e % GC] = P[e];
		if (tid < 2 * GC)
			se[tid] = P[GC * GC + tid]; /* e^G, then e^(G_last - G) */
		__syncthreads();
		/* D = U - W S: rows w + 8a, column c */
		rows_times_state<DK>(sB, BP, sS, SP, w, c, acc);
#pragma unroll
		for (int a = 0; a < 8; a++)
			sD[(w + 8 * a) * SP + c] -= acc[a];
		__syncthreads();
		/* O = diag(Gamma) Q S + P D, the scaled queries rounded as the recurrent scan rounds them */
		EACH(e, GC * DK) {
			int i = e / DK, d = e % DK;
			sB[i * BP + d] = i < n && d < (int)dk ? se[i] * __fmul_rn(xq[(t0 + i) * ld + d], qscale) : 0.0f;
		}
		__syncthreads();
		rows_times_state<DK>(sB, BP, sS, SP, w, c, acc);
		rows_times_cols<GC>(sP, PP, sD, SP, w, c, acc);
#pragma unroll
		for (int a = 0; a < 8; a++)
			if ((int)(w + 8 * a) < n && col)
				o[(t0 + w + 8 * a) * ldo + h * dv + c0 + c] = acc[a];
		__syncthreads();
		/* S = Gamma_last S + Kd^T D, Kd's rows k_j e^(G_last - G_j), kept transposed [d][j] */
		EACH(e, GC * DK) {
			int j = e / DK, d = e % DK;
			sB[d * TP + j] = j < n && d < (int)dk ? se[GC + j] * xk[(t0 + j) * ld + d] : 0.0f;
		}
		__syncthreads();
		{
			float last = se[GC - 1], sacc[DK / 8];
#pragma unroll
			for (int a = 0; a < DK / 8; a++)
				sacc[a] = 0;
			for (int j = 0; j < GC; j += 4) {
				float d0 = sD[j * SP + c], d1 = sD[(j + 1) * SP + c], d2 = sD[(j + 2) * SP + c], d3 = sD[(j + 3) * SP + c];
#pragma unroll
				for (int a = 0; a < DK / 8; a++) {
					float4 k = *(const float4 *)&sB[(w + 8 * a) * TP + j];
					sacc[a] = fmaf(k.x, d0, fmaf(k.y, d1, fmaf(k.z, d2, fmaf(k.w, d3, sacc[a]))));
				}
			}
#pragma unroll
			for (int a = 0; a < DK / 8; a++)
				sS[(w + 8 * a) * SP + c] = fmaf(last, sS[(w + 8 * a) * SP + c], sacc[a]);
		}
	}
	__syncthreads();
	EACH(e, DK * CB) {
		int i = e / CB, j = e % CB;
		if (i < (int)dk && c0 + j < dv)
			S[i * dv + c0 + j] = sS[i * SP + j];
	}
}

int hbk_gdn_chunked_parts = 3;

template <int DK>
static int gdnc_launch(float *S, const float *qkv, size_t ld, const float *beta, const float *g,
		       const struct hbk_seqs *q, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o,
		       size_t ldo, float *scr)
{
	size_t per = hbk_gdn_span_floats(dk, dv), most = 0;
	cudaError_t e;

	for (uint32_t j = 0; j < q->n; j++)
		most = q->len[j] > most ? q->len[j] : most;
	if (!most)
		return 0;
	if ((e = cudaFuncSetAttribute(gdnc_prep<DK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
				      (int)prep_layout<DK>::bytes)) != cudaSuccess ||
	    (e = cudaFuncSetAttribute(gdnc_scan<DK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
				      (int)scan_layout<DK>::bytes)) != cudaSuccess)
		return (int)e;
	if (hbk_gdn_chunked_parts & 1)
		gdnc_prep<DK><<<dim3((unsigned)nv, (unsigned)((most + GC - 1) / GC), q->n), NT, prep_layout<DK>::bytes>>>(
			qkv, ld, beta, g, *q, nk, nv, dk, dv, qscale, scr, per);
	if (hbk_gdn_chunked_parts & 2)
		gdnc_scan<DK><<<dim3((unsigned)nv, (unsigned)((dv + CB - 1) / CB), q->n), NT, scan_layout<DK>::bytes>>>(
			S, qkv, ld, *q, nk, nv, dk, dv, qscale, scr, per, o, ldo);
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
