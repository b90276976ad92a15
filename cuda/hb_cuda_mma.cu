/*
 * hb_cuda_mma.cu: the tensor-core matrix products of hb_cuda_mma.h.
 *
 * One block computes a tile of BT tokens (64, 96 or 128: the least
 * padding of the launch's T, or of the largest group; the split
 * launchers weigh padding against each height's measured rate,
 * pick_wt_rated) by BR = 128 weight
 * rows, in steps of BK = 64 columns (one affine4 group).  Each warp owns
 * 32 tokens by 64 rows: 2 x 8 mma.sync m16n8k16 tiles (A = x terms, token
 * major; B = weights, row major: both k-contiguous, as ldmatrix reads them).
 *
 * A step's operands are staged once per block in shared memory, already in
 * bf16: x as NT planes (hi, mid, lo), split in registers on their way from
 * global memory; bf16 weights copied as they are (cp.async); affine4
 * nibbles widened to q - 8 (exact) with the group's scale and centred bias
 * beside them.  Shared memory is double-buffered: step k+1's global loads
 * are issued before step k's products and stored after them, so one
 * barrier per step orders both.  Rows are padded to 72 bf16 (144 bytes):
 * the 8 rows an ldmatrix reads then fall in distinct banks.
 *
 * Affine4: the tensor cores accumulate a = sum (q - 8) x over the group
 * from zero; the fold y += scale a + (bias + 8 scale) sum x is float32,
 * with sum x taken over the float32 x (not its bf16 terms).  Centring the
 * nibbles halves the magnitude the tensor cores carry.
 *
 * Padding: tokens past T, rows past `rows` and columns past `cols` are
 * staged as zeros (both operands, so no NaN from stale bits), and outputs
 * outside [T) x [rows) are not written.
 */
#include "hb_cuda_mma.h"
#include "hb_cuda_kern.h"
#include "hb_cuda_mma_int.cuh"
#include "hb_cuda_mma_ops.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <string.h>

using namespace hb_mma;

namespace {

constexpr int LDS = BK + 8; /* a staged row, in bf16: 144 bytes */
constexpr int BR = 128;     /* weight rows per block: 2 warps of 64 */

template <int TYPE, int NT, int WT, bool PRE> struct Cfg {
	static constexpr bool AFF = TYPE == HBK_AFFINE4_G64;
	static constexpr int BT = 32 * WT;      /* tokens per block */
	static constexpr int THREADS = 64 * WT; /* WT x 2 warps */
	static constexpr int XS_BYTES = NT * BT * LDS * 2;
	static constexpr int WS_BYTES = BR * LDS * 2;
	static constexpr int SB_BYTES = AFF ? BR * 8 : 0; /* float2 (scale, centred bias) per row */
	static constexpr int SUM_BYTES = AFF ? BT * 4 : 0; /* sum of x over the group, per token */
	static constexpr int BUF = XS_BYTES + WS_BYTES + SB_BYTES + SUM_BYTES;
	/* after the two buffers, the raw (float32) x of the next step (none
	 * when x comes split) and its raw affine4 words: each thread converts
	 * only what it copied, so these need no barrier and no double
	 * buffering */
	static constexpr int RAWX = 2 * BUF, RAWW = RAWX + (PRE ? 0 : BT * BK * 4);
	static constexpr int SMEM = RAWW + (AFF ? BR * 9 * 4 : 0);
	static constexpr int PX = BT * (BK / 4) / THREADS;                /* float4 of x per thread: 8 */
	static_assert(PX * THREADS == BT * (BK / 4), "x tile split evenly");
	static_assert(SMEM <= 227 * 1024, "fits an sm_90 block");
};

/* p[0 .. 4), the columns c .. c + 4 of a row of cols: zeros past cols */
__device__ __forceinline__ float4 load4_tail(const float *p, uint64_t c, uint64_t cols)
{
	float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

	if (c < cols)
		v.x = p[0];
	if (c + 1 < cols)
		v.y = p[1];
	if (c + 2 < cols)
		v.z = p[2];
	if (c + 3 < cols)
		v.w = p[3];
	return v;
}

/* x[t][c .. c + 4) into shared dst, zeros past T and cols: by cp.async
 * where aligned (the caller waits), element-wise otherwise */
__device__ __forceinline__ void load_x4(const float *x, size_t T, uint64_t cols, size_t t, uint64_t c, bool vec,
					float4 *dst)
{
	bool ok = t < T && c < cols;
	const float *p = x + t * cols + c;

	if (vec) { /* cols % 4 == 0: a float4 is wholly in or out */
		cp_async16(smem_u32(dst), ok ? p : x, ok);
		return;
	}
	*dst = ok ? load4_tail(p, c, cols) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

/* four floats as NT bf16 terms, each 8 bytes into its plane: term k is
 * bf16 of what the terms before it left (x - hi is exact in float32) */
template <int NT>
__device__ __forceinline__ void split_store(float4 v, __nv_bfloat16 *dst, int plane)
{
	float f[4] = {v.x, v.y, v.z, v.w};

#pragma unroll
	for (int term = 0; term < NT; term++) {
		uint32_t h[2];
#pragma unroll
		for (int k = 0; k < 2; k++) {
			__nv_bfloat162 b = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
			h[k] = bits(b);
			if (term + 1 < NT) {
				f[2 * k] -= __low2float(b);
				f[2 * k + 1] -= __high2float(b);
			}
		}
		*reinterpret_cast<uint2 *>(dst + term * plane) = make_uint2(h[0], h[1]);
	}
}

/* step k0's x tile into the raw area: thread tid's float4 p is token
 * (p THREADS + tid) / 16, columns 4 ((p THREADS + tid) % 16) */
template <class C>
__device__ __forceinline__ void x_load(const float *x, size_t T, uint64_t cols, size_t t0, uint64_t k0, bool vec,
				       int tid, uint8_t *smem)
{
	float4 *raw = reinterpret_cast<float4 *>(smem + C::RAWX);

#pragma unroll
	for (int p = 0; p < C::PX; p++) {
		int e = p * C::THREADS + tid;
		load_x4(x, T, cols, t0 + (e >> 4), k0 + (e & 15) * 4, vec, raw + e);
	}
}

/* the raw x (this thread's own float4s) as bf16 planes into buf */
template <class C, int NT>
__device__ __forceinline__ void x_store(uint8_t *smem, uint8_t *buf, int tid)
{
	const float4 *raw = reinterpret_cast<const float4 *>(smem + C::RAWX);
	__nv_bfloat16 *xs = reinterpret_cast<__nv_bfloat16 *>(buf);

#pragma unroll
	for (int p = 0; p < C::PX; p++) {
		int e = p * C::THREADS + tid, t = e >> 4;
		float4 v = raw[e];
		split_store<NT>(v, xs + t * LDS + (e & 15) * 4, C::BT * LDS);
		if constexpr (C::AFF) {
			/* a token's 16 float4 lie in one half-warp (THREADS is a
			 * multiple of 32): reduce across it */
			float s = (v.x + v.y) + (v.z + v.w);
#pragma unroll
			for (int o = 8; o > 0; o >>= 1)
				s += __shfl_xor_sync(0xffffffffu, s, o);
			if ((tid & 15) == 0)
				reinterpret_cast<float *>(buf + C::XS_BYTES + C::WS_BYTES + C::SB_BYTES)[t] = s;
		}
	}
}

/* step k's x terms from a split (cp.async into buf; the caller waits):
 * NT planes of BT rows by 8 chunks of 16 bytes, then (affine4) the
 * tokens' sums of group k; zeros past T */
template <class C, int NT>
__device__ __forceinline__ void xp_load(const Args &a, const __nv_bfloat16 *xp, const float *xs, const int32_t *xrow,
					size_t T, size_t t0, uint64_t k, int tid, uint8_t *buf)
{
	__nv_bfloat16 *dst = reinterpret_cast<__nv_bfloat16 *>(buf);
	uint64_t ng = a.cols / BK;

#pragma unroll
	for (int p = 0; p < (NT * C::BT * 8 + C::THREADS - 1) / C::THREADS; p++) {
		int e = p * C::THREADS + tid, term = e / (C::BT * 8), r = (e >> 3) % C::BT, ch = e & 7;
		if (e >= NT * C::BT * 8)
			break;
		size_t t = t0 + r;
		uint64_t c = k * BK + ch * 8;
		bool ok = t < T && c < a.colsp;
		cp_async16(smem_u32(dst + (term * C::BT + r) * LDS + ch * 8),
			   ok ? xp + term * a.plane + split_row(xrow, a.xk, t) * a.colsp + c : xp, ok);
	}
	if constexpr (C::AFF) {
		float *sum = reinterpret_cast<float *>(buf + C::XS_BYTES + C::WS_BYTES + C::SB_BYTES);
		for (int e = tid; e < C::BT; e += C::THREADS) {
			bool ok = t0 + e < T;
			cp_async4(smem_u32(sum + e), ok ? xs + split_row(xrow, a.xk, t0 + e) * ng + k : xs, ok);
		}
	}
}

/* step k0's bf16 weight tile: 128 rows by 8 chunks of 16 bytes, by
 * cp.async where aligned (the caller waits), element-wise otherwise */
template <class C>
__device__ __forceinline__ void w_bf16(const uint8_t *W, uint64_t row_bytes, uint64_t rows, uint64_t cols,
				       uint64_t r0, uint64_t k0, uint8_t *buf, bool vec, int tid)
{
	__nv_bfloat16 *ws = reinterpret_cast<__nv_bfloat16 *>(buf + C::XS_BYTES);

#pragma unroll
	for (int p = 0; p < (BR * 8 + C::THREADS - 1) / C::THREADS; p++) {
		int e = p * C::THREADS + tid, r = e >> 3, ch = e & 7;
		if (e >= BR * 8)
			break;
		uint64_t gr = r0 + r, gc = k0 + ch * 8;
		__nv_bfloat16 *d = ws + r * LDS + ch * 8;
		if (vec) { /* cols % 8 == 0: a chunk is wholly in or out */
			bool ok = gr < rows && gc < cols;
			cp_async16(smem_u32(d), ok ? W + gr * row_bytes + gc * 2 : W, ok);
		} else {
			const uint16_t *s = reinterpret_cast<const uint16_t *>(W + gr * row_bytes) + gc;
			uint32_t u[4];
#pragma unroll
			for (int i = 0; i < 4; i++) {
				uint32_t lo = gr < rows && gc + 2 * i < cols ? s[2 * i] : 0;
				uint32_t hi = gr < rows && gc + 2 * i + 1 < cols ? s[2 * i + 1] : 0;
				u[i] = lo | hi << 16;
			}
			*reinterpret_cast<uint4 *>(d) = make_uint4(u[0], u[1], u[2], u[3]);
		}
	}
}

/* group g's affine4 words into the raw area: 9 per row (8 of nibbles,
 * then scale | bias << 16); word e of the tile is row e / 9, word e % 9 */
template <class C>
__device__ __forceinline__ void a4_load(const uint8_t *W, uint64_t row_bytes, uint64_t rows, uint64_t r0,
					uint64_t g, bool vec, int tid, uint8_t *smem)
{
	uint32_t *raw = reinterpret_cast<uint32_t *>(smem + C::RAWW);

#pragma unroll
	for (int p = 0; p < (BR * 9 + C::THREADS - 1) / C::THREADS; p++) {
		int e = p * C::THREADS + tid, r = e / 9, w = e - r * 9;
		uint64_t gr = r0 + r;
		bool ok = gr < rows;
		const uint8_t *s = W + gr * row_bytes + g * 36 + w * 4;
		if (e >= BR * 9)
			break;
		if (vec) {
			cp_async4(smem_u32(raw + e), ok ? s : W, ok);
		} else {
			uint32_t v = 0;
			if (ok)
				v = (uint32_t)s[0] | (uint32_t)s[1] << 8 | (uint32_t)s[2] << 16 | (uint32_t)s[3] << 24;
			raw[e] = v;
		}
	}
}

/* the raw words as bf16 q - 8 and (scale, bias + 8 scale) into buf */
template <class C>
__device__ __forceinline__ void a4_store(const uint8_t *smem, uint8_t *buf, int tid)
{
	const uint32_t *raw = reinterpret_cast<const uint32_t *>(smem + C::RAWW);
	__nv_bfloat16 *ws = reinterpret_cast<__nv_bfloat16 *>(buf + C::XS_BYTES);
	float2 *sb = reinterpret_cast<float2 *>(buf + C::XS_BYTES + C::WS_BYTES);

#pragma unroll
	for (int p = 0; p < (BR * 9 + C::THREADS - 1) / C::THREADS; p++) {
		int e = p * C::THREADS + tid, r = e / 9, w = e - r * 9;
		if (e >= BR * 9)
			break;
		if (w < 8)
			*reinterpret_cast<uint4 *>(ws + r * LDS + w * 8) = a4_word_bf16(raw[e]);
		else
			sb[r] = a4_scale_bias(raw[e]);
	}
}

/* a warp's accumulators (NJ of its 8 columns of tiles), from zero */
template <int NJ> __device__ __forceinline__ void zero_tile(float (&t)[2][NJ][4])
{
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < NJ; j++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				t[i][j][e] = 0.0f;
}

/* one step's products on a staged buffer: the warp's 32 tokens by the
 * NJ x 8 rows from row j0 of its 64 (acc's columns j0 .. j0 + NJ) */
template <class C, int NT, int NJ>
__device__ __forceinline__ void mma_step(const uint8_t *buf, int wt, int wr, int lane, int j0, float (&acc)[2][NJ][4])
{
	uint32_t xa = smem_u32(buf) + ((wt * 32 + (lane & 15)) * LDS + (lane >> 4) * 8) * 2;
	uint32_t wa = smem_u32(buf + C::XS_BYTES) +
		      ((wr * 64 + j0 * 8 + (lane & 7) + ((lane >> 4) << 3)) * LDS + ((lane >> 3) & 1) * 8) * 2;

#pragma unroll
	for (int kk = 0; kk < BK / 16; kk++) {
		uint32_t a[NT][2][4], b[NJ][2];
#pragma unroll
		for (int term = 0; term < NT; term++)
#pragma unroll
			for (int i = 0; i < 2; i++)
				ldsm_x4(xa + (term * C::BT * LDS + i * 16 * LDS + kk * 16) * 2, a[term][i]);
#pragma unroll
		for (int jj = 0; jj < NJ / 2; jj++) {
			uint32_t r[4];
			ldsm_x4(wa + (jj * 16 * LDS + kk * 16) * 2, r);
			b[2 * jj][0] = r[0], b[2 * jj][1] = r[1];
			b[2 * jj + 1][0] = r[2], b[2 * jj + 1][1] = r[3];
		}
#pragma unroll
		for (int i = 0; i < 2; i++)
#pragma unroll
			for (int j = 0; j < NJ; j++)
#pragma unroll
				for (int term = NT - 1; term >= 0; term--) /* smallest term first */
					mma_bf16(acc[i][j], a[term][i], b[j][0], b[j][1]);
	}
}

/* affine4: y += scale a + bias' sum x, per (token, row) of the warp's
 * columns j0 .. j0 + NJ (a: those columns' group sums) */
template <class C, int NJ>
__device__ __forceinline__ void a4_fold(const uint8_t *buf, int wt, int wr, int lane, int j0,
					const float (&acc)[2][NJ][4], float (&y)[2][8][4])
{
	const float *sb = reinterpret_cast<const float *>(buf + C::XS_BYTES + C::WS_BYTES);
	const float *xsum = reinterpret_cast<const float *>(buf + C::XS_BYTES + C::WS_BYTES + C::SB_BYTES);

#pragma unroll
	for (int i = 0; i < 2; i++) {
		int t = wt * 32 + i * 16 + (lane >> 2);
		float s0 = xsum[t], s1 = xsum[t + 8];
#pragma unroll
		for (int jh = 0; jh < NJ; jh++) {
			int j = j0 + jh;
			int n = wr * 64 + j * 8 + (lane & 3) * 2; /* even: (s, b) of rows n, n + 1 */
			float4 q = *reinterpret_cast<const float4 *>(sb + 2 * n);
			y[i][j][0] = fmaf(q.y, s0, fmaf(q.x, acc[i][jh][0], y[i][j][0]));
			y[i][j][1] = fmaf(q.w, s0, fmaf(q.z, acc[i][jh][1], y[i][j][1]));
			y[i][j][2] = fmaf(q.y, s1, fmaf(q.x, acc[i][jh][2], y[i][j][2]));
			y[i][j][3] = fmaf(q.w, s1, fmaf(q.z, acc[i][jh][3], y[i][j][3]));
		}
	}
}

/* one step on the warp's tile: bf16 into acc; affine4 a half of the
 * warp's rows at a time (each half's group sums from zero, then folded
 * into y), so that only 32 sums live beside y's 64 (the same sums in the
 * same order as a whole tile's, in fewer registers) */
template <class C, int NT>
__device__ __forceinline__ void step_products(const uint8_t *cur, int wt, int wr, int lane, float (&acc)[2][8][4],
					      float (&yv)[2][8][4])
{
	if constexpr (C::AFF) {
#pragma unroll
		for (int h = 0; h < 2; h++) {
			float g[2][4][4];
			zero_tile(g);
			mma_step<C, NT, 4>(cur, wt, wr, lane, 4 * h, g);
			a4_fold<C, 4>(cur, wt, wr, lane, 4 * h, g, yv);
		}
	} else {
		mma_step<C, NT, 8>(cur, wt, wr, lane, 0, acc);
	}
}

/* 64 and 96 tokens: registers for two blocks an SM (168 a thread at 96;
 * the affine4 tiles spill a little there and still gain, bench/cuda-mma) */
template <int TYPE, int NT, int WT, bool GROUPED, bool PRE>
__global__ void __launch_bounds__(64 * WT, WT == 4 ? 1 : 2) mma_kernel(Args a)
{
	using C = Cfg<TYPE, NT, WT, PRE>;
	extern __shared__ __align__(16) uint8_t smem[];
	const uint8_t *W = a.W;
	const float *x = a.x, *xs = a.xsum;
	const __nv_bfloat16 *xp = a.xp;
	const int32_t *xrow = NULL;
	float *y = a.y;
	size_t T = a.T;
	bool vw = a.vec_w;
	uint64_t bx = blockIdx.x, rows = a.rows, rb = a.row_bytes;
	bool second = (a.W2 || a.Wg2) && bx >= a.tx1; /* the second product's blocks */

	if (second)
		rows = a.rows2, rb = a.row_bytes2, y = a.y2, vw = a.vec_w2, bx -= a.tx1;
	if constexpr (GROUPED) {
		size_t o = (size_t)a.off[blockIdx.z];
		T = (size_t)a.off[blockIdx.z + 1] - o;
		if ((size_t)blockIdx.y * C::BT >= T) /* the whole block: no barrier is skipped by part of it */
			return;
		W = second ? a.Wg2[blockIdx.z] : a.Wg[blockIdx.z];
		y += o * rows;
		if constexpr (!PRE) {
			x += o * a.cols;
		} else if (a.xrow) {
			xrow = a.xrow + o;
		} else {
			xp += o * a.colsp;
			if constexpr (C::AFF)
				xs += o * (a.cols / BK);
		}
		vw = vw && ((uintptr_t)W & (C::AFF ? 3 : 15)) == 0;
	} else if (second) {
		W = a.W2;
	}

	const int tid = threadIdx.x, lane = tid & 31, wt = tid >> 6, wr = (tid >> 5) & 1;
	const uint64_t r0 = bx * BR, cols = a.cols;
	const size_t t0 = (size_t)blockIdx.y * C::BT;
	const uint64_t nk = (cols + BK - 1) / BK;
	float acc[2][8][4], yv[2][8][4];

	zero_tile(acc);
	zero_tile(yv);

	/* step 0 staged into buffer 0 */
	if constexpr (PRE)
		xp_load<C, NT>(a, xp, xs, xrow, T, t0, 0, tid, smem);
	else
		x_load<C>(x, T, cols, t0, 0, a.vec_x, tid, smem);
	if constexpr (C::AFF)
		a4_load<C>(W, rb, rows, r0, 0, vw, tid, smem);
	else
		w_bf16<C>(W, rb, rows, cols, r0, 0, smem, vw, tid);
	cp_async_wait_all();
	if constexpr (!PRE)
		x_store<C, NT>(smem, smem, tid);
	if constexpr (C::AFF)
		a4_store<C>(smem, smem, tid);
	__syncthreads();

	for (uint64_t k = 0; k < nk; k++) {
		uint8_t *cur = smem + (k & 1) * C::BUF, *nxt = smem + ((k + 1) & 1) * C::BUF;
		bool more = k + 1 < nk;

		if (more) { /* step k + 1's loads in flight under step k's products */
			if constexpr (PRE)
				xp_load<C, NT>(a, xp, xs, xrow, T, t0, k + 1, tid, nxt);
			else
				x_load<C>(x, T, cols, t0, (k + 1) * BK, a.vec_x, tid, smem);
			if constexpr (C::AFF)
				a4_load<C>(W, rb, rows, r0, k + 1, vw, tid, smem);
			else
				w_bf16<C>(W, rb, rows, cols, r0, (k + 1) * BK, nxt, vw, tid);
		}
		step_products<C, NT>(cur, wt, wr, lane, acc, yv);
		cp_async_wait_all();
		if (more) {
			if constexpr (!PRE)
				x_store<C, NT>(smem, nxt, tid);
			if constexpr (C::AFF)
				a4_store<C>(smem, nxt, tid);
		}
		__syncthreads();
	}

#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < 8; j++) {
			size_t t = t0 + wt * 32 + i * 16 + (lane >> 2);
			uint64_t n = r0 + wr * 64 + j * 8 + (lane & 3) * 2;
			float v[4];
#pragma unroll
			for (int e = 0; e < 4; e++)
				v[e] = C::AFF ? yv[i][j][e] : acc[i][j][e];
			if (t < T && n < rows)
				y[t * rows + n] = v[0];
			if (t < T && n + 1 < rows)
				y[t * rows + n + 1] = v[1];
			if (t + 8 < T && n < rows)
				y[(t + 8) * rows + n] = v[2];
			if (t + 8 < T && n + 1 < rows)
				y[(t + 8) * rows + n + 1] = v[3];
		}
}

int g_terms = 2; /* chosen by measurement: see hb_cuda_mma.h and tests/unit/test_cuda_mma.c */

int g_tile; /* hbk_mma_tile: 0, or the block height forced (2, 3, 4) */

/* the block height (32 WT tokens, 64 at least) that pads m least, the
 * taller on ties */
int pick_wt(size_t m)
{
	int best = 4;
	size_t least = (m + 127) / 128 * 128;

	for (int wt = 3; wt >= 2; wt--) {
		size_t bt = 32 * (size_t)wt, pad = (m + bt - 1) / bt * bt;
		if (pad < least)
			best = wt, least = pad;
	}
	return best;
}

/*
 * The block height for the split launchers: the least padded rows over
 * each height's rate, for m tokens a product (grouped: the mean group's,
 * each group padded alone).  The rates are bench/cuda-mma's on an H100
 * at T = 1,024, 4,096 and 16,384 (bench/gpu-results.md, 2026-12-05 late)
 * as TFLOP/s of padded rows, at 64, 96 and 128 tokens a block: blocks of
 * 64 and 96 tokens fit two an SM (the launch bounds below), 128 one, and
 * a second block an SM is worth more than the taller tile's reuse but in
 * affine4's dense products.  A dense launch of fewer blocks than two an SM
 * gains nothing from that and keeps the least padding (the hyper-
 * connections' 324 rows: 8.6 ms at 96 tokens against 7.1 at 128).  Only
 * the time depends on the choice, never the bits.
 */
int pick_wt_rated(int type, bool grouped, size_t m, uint64_t row_blocks)
{
	static const double rate[2][2][3] = {
		{{120, 145, 125}, {150, 160, 139}}, /* bf16: dense, grouped */
		{{82, 88, 97}, {83, 100, 102}},     /* affine4 */
	};
	const double *r = rate[type == HBK_AFFINE4_G64][grouped];
	int best = 4, dev = 0, sms = 0;
	double least = 0;

	if (!grouped && (cudaGetDevice(&dev) != cudaSuccess ||
			 cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
			 row_blocks * ((m + 95) / 96) < 2 * (uint64_t)sms))
		return pick_wt(m);
	for (int wt = 4; wt >= 2; wt--) {
		size_t bt = 32 * (size_t)wt;
		double cost = (double)((m + bt - 1) / bt * bt) / r[wt - 2];
		if (wt == 4 || cost < least)
			best = wt, least = cost;
	}
	return best;
}

template <int TYPE, int NT, int WT, bool G, bool PRE> int go(const Args &a, size_t m, size_t groups)
{
	using C = Cfg<TYPE, NT, WT, PRE>;
	size_t ty = (m + C::BT - 1) / C::BT;
	uint64_t tx = (a.rows + BR - 1) / BR + (a.W2 || a.Wg2 ? (a.rows2 + BR - 1) / BR : 0);
	cudaError_t e;

	if (ty > 65535 || tx > 0x7fffffffu)
		return (int)cudaErrorInvalidValue;
	/* above 48 KiB of dynamic shared memory a kernel must opt in (per
	 * device: so on every launch, which costs little) */
	e = cudaFuncSetAttribute(mma_kernel<TYPE, NT, WT, G, PRE>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
	if (e != cudaSuccess)
		return (int)e;
	mma_kernel<TYPE, NT, WT, G, PRE><<<dim3((unsigned)tx, (unsigned)ty, (unsigned)groups), C::THREADS, C::SMEM>>>(a);
	return (int)cudaGetLastError();
}

template <int TYPE, int NT, bool G, bool PRE> int go_wt(const Args &a, size_t m, size_t groups, int wt)
{
	switch (g_tile ? g_tile : wt) {
	case 2: return go<TYPE, NT, 2, G, PRE>(a, m, groups);
	case 3: return go<TYPE, NT, 3, G, PRE>(a, m, groups);
	default: return go<TYPE, NT, 4, G, PRE>(a, m, groups);
	}
}

/* m: the tokens of the tallest group (ungrouped: all); wt: the block height */
template <bool G, bool PRE = false> int go_type(int type, const Args &a, size_t m, size_t groups, int wt)
{
	bool three = g_terms == 3;

	if (type == HBK_BF16)
		return three ? go_wt<HBK_BF16, 3, G, PRE>(a, m, groups, wt) : go_wt<HBK_BF16, 2, G, PRE>(a, m, groups, wt);
	return three ? go_wt<HBK_AFFINE4_G64, 3, G, PRE>(a, m, groups, wt)
		     : go_wt<HBK_AFFINE4_G64, 2, G, PRE>(a, m, groups, wt);
}

/* the alignment that wide loads need, but for W[z] (the kernel checks those) */
bool w_vec(int type, uint64_t row_bytes, uint64_t cols)
{
	return type == HBK_BF16 ? row_bytes % 16 == 0 && cols % 8 == 0 : row_bytes % 4 == 0;
}

uint64_t cols_padded(uint64_t cols)
{
	return (cols + 7) / 8 * 8;
}

/* where a split's sums start: after its planes, 16-byte aligned */
size_t sums_at(size_t T, uint64_t cols)
{
	return ((size_t)g_terms * T * cols_padded(cols) * 2 + 15) / 16 * 16;
}

/*
 * The x terms of hbk_mma_split_rows: a thread per 4 columns of row t
 * (zeros past cols), read from x's row pack[t] / k (pack NULL: row t).
 * SUM (affine4, cols a multiple of 64): each 64-column group's sum too,
 * by the 16 threads of a half-warp that hold it: per float4 (x + y) +
 * (z + w), then partners 8, 4, 2 and 1 apart added, each to its own
 * partial first (the order the product kernels' own sums take, so the
 * sums are theirs to the bit).
 */
template <int NT, bool SUM>
__global__ void split_kernel(const float *x, const int32_t *pack, size_t k, size_t T, uint64_t cols, uint64_t colsp,
			     __nv_bfloat16 *xp, size_t plane, float *xs)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, q = colsp / 4;

	if (i >= T * q) /* SUM: T q is a multiple of 16, so whole half-warps leave */
		return;
	size_t t = i / q, src = pack ? (size_t)pack[t] / k : t;
	uint64_t c = (i % q) * 4;
	float4 v = load4_tail(x + src * cols + c, c, cols);

	split_store<NT>(v, xp + t * colsp + c, (int)plane);
	if (SUM) {
		unsigned half = threadIdx.x & 16 ? 0xffff0000u : 0x0000ffffu;
		float a = (v.x + v.y) + (v.z + v.w);
#pragma unroll
		for (int o = 8; o > 0; o >>= 1)
			a = a + __shfl_xor_sync(half, a, o);
		if ((threadIdx.x & 15) == 0)
			xs[t * (cols / BK) + c / BK] = a;
	}
}

template <int NT>
void split_launch(int type, const float *x, const int32_t *pack, size_t k, size_t T, uint64_t cols, void *split)
{
	uint64_t colsp = cols_padded(cols);
	size_t n = T * (colsp / 4);
	unsigned blocks = (unsigned)((n + 255) / 256);
	__nv_bfloat16 *xp = (__nv_bfloat16 *)split;

	if (type == HBK_AFFINE4_G64)
		split_kernel<NT, true><<<blocks, 256>>>(x, pack, k, T, cols, colsp, xp, T * colsp,
							(float *)((uint8_t *)split + sums_at(T, cols)));
	else
		split_kernel<NT, false><<<blocks, 256>>>(x, pack, k, T, cols, colsp, xp, T * colsp, NULL);
}

/* Args reading the split of T rows at `split` */
void split_args(Args &a, int type, const void *split, size_t T, uint64_t cols)
{
	a.xp = (const __nv_bfloat16 *)split;
	a.xsum = type == HBK_AFFINE4_G64 ? (const float *)((const uint8_t *)split + sums_at(T, cols)) : NULL;
	a.colsp = cols_padded(cols);
	a.plane = T * a.colsp;
	a.cols = cols;
}

} /* namespace */

extern "C" size_t hbk_mma_split_bytes(int type, size_t T, uint64_t cols)
{
	return sums_at(T, cols) + (type == HBK_AFFINE4_G64 ? T * (cols / BK) * 4 : 0);
}

extern "C" int hbk_mma_split_rows(int type, const float *x, const int32_t *pack, size_t k, size_t T, uint64_t cols,
				  void *split)
{
	uint64_t colsp = cols_padded(cols);

	if (!hbk_mma_takes(type, cols) || (pack && !k))
		return (int)cudaErrorInvalidValue;
	if (!T)
		return 0;
	if (T * colsp > 0x7fffffffu) /* a plane's offset is an int in split_store */
		return (int)cudaErrorInvalidValue;
	if (g_terms == 3)
		split_launch<3>(type, x, pack, k, T, cols, split);
	else
		split_launch<2>(type, x, pack, k, T, cols, split);
	return (int)cudaGetLastError();
}

extern "C" int hbk_mma_split(int type, const float *x, size_t T, uint64_t cols, void *split)
{
	return hbk_mma_split_rows(type, x, NULL, 1, T, cols, split);
}

extern "C" int hbk_mma_matmul2_split(int type, const void *W1, uint64_t row_bytes1, uint64_t rows1, const void *W2,
				     uint64_t row_bytes2, uint64_t rows2, uint64_t cols, const void *split, size_t T,
				     float *y1, float *y2)
{
	Args a = {};

	if (!hbk_mma_takes(type, cols))
		return (int)cudaErrorInvalidValue;
	if (!T || (!rows1 && !rows2))
		return 0;
	if (!rows1) /* the second alone */
		W1 = W2, row_bytes1 = row_bytes2, rows1 = rows2, y1 = y2, rows2 = 0;
	split_args(a, type, split, T, cols);
	a.W = (const uint8_t *)W1, a.row_bytes = row_bytes1, a.rows = rows1, a.T = T, a.y = y1;
	a.vec_w = w_vec(type, row_bytes1, cols) && ((uintptr_t)W1 & (type == HBK_BF16 ? 15 : 3)) == 0;
	if (rows2) {
		a.W2 = (const uint8_t *)W2, a.row_bytes2 = row_bytes2, a.rows2 = rows2, a.y2 = y2;
		a.tx1 = (rows1 + BR - 1) / BR;
		a.vec_w2 = w_vec(type, row_bytes2, cols) && ((uintptr_t)W2 & (type == HBK_BF16 ? 15 : 3)) == 0;
	}
	int wg = wg_go(type, g_terms, a, T, T, 1, false);
	if (wg >= 0)
		return wg;
	return go_type<false, true>(type, a, T, 1,
				    pick_wt_rated(type, false, T, (rows1 + BR - 1) / BR + (rows2 + BR - 1) / BR));
}

extern "C" int hbk_mma_grouped2_split_rows(int type, const void *const *W, const void *const *W2, uint64_t row_bytes,
					   uint64_t rows, uint64_t cols, const int32_t *off, size_t groups, size_t most,
					   const void *split, size_t T, const int32_t *pack, size_t k, size_t P, float *y,
					   float *y2)
{
	Args a = {};

	if (!hbk_mma_takes(type, cols) || groups > 65535 || (pack && !k))
		return (int)cudaErrorInvalidValue;
	if (!groups || !most || !rows || !P)
		return 0;
	split_args(a, type, split, T, cols);
	a.xrow = pack, a.xk = pack ? k : 1;
	a.Wg = (const uint8_t *const *)W, a.row_bytes = row_bytes, a.rows = rows, a.y = y, a.off = off;
	a.vec_w = w_vec(type, row_bytes, cols);
	if (W2) {
		a.Wg2 = (const uint8_t *const *)W2, a.row_bytes2 = row_bytes, a.rows2 = rows, a.y2 = y2;
		a.tx1 = (rows + BR - 1) / BR, a.vec_w2 = a.vec_w;
	}
	/* the height from the mean group, not the tallest: the tallest of 512
	 * experts' groups is well above the mean (T = 4,096, top-10: a mean of
	 * 80, a tallest near 120) and would take 128-token blocks, mostly
	 * padding, one an SM */
	int wg = wg_go(type, g_terms, a, most, (P + groups - 1) / groups, groups, true);
	if (wg >= 0)
		return wg;
	return go_type<true, true>(type, a, most, groups, pick_wt_rated(type, true, (P + groups - 1) / groups, 0));
}

extern "C" int hbk_mma_grouped2_split(int type, const void *const *W, const void *const *W2, uint64_t row_bytes,
				      uint64_t rows, uint64_t cols, const int32_t *off, size_t groups, size_t most,
				      const void *split, size_t T, float *y, float *y2)
{
	return hbk_mma_grouped2_split_rows(type, W, W2, row_bytes, rows, cols, off, groups, most, split, T, NULL, 1, T,
					   y, y2);
}

extern "C" bool hbk_mma_takes(int type, uint64_t cols)
{
	return cols > 0 && (type == HBK_BF16 || (type == HBK_AFFINE4_G64 && cols % 64 == 0));
}

extern "C" int hbk_mma_terms(int terms)
{
	int was = g_terms;

	if (terms == 2 || terms == 3)
		g_terms = terms;
	return was;
}

extern "C" int hbk_mma_tile(int wt)
{
	int was = g_tile;

	if (wt == 0 || wt == 2 || wt == 3 || wt == 4)
		g_tile = wt;
	return was;
}

extern "C" int hbk_mma_matmul(int type, const void *W, uint64_t row_bytes, uint64_t rows, uint64_t cols,
			      const float *x, size_t T, float *y)
{
	Args a = {};

	if (!hbk_mma_takes(type, cols))
		return (int)cudaErrorInvalidValue;
	if (!T || !rows)
		return 0;
	a.W = (const uint8_t *)W, a.row_bytes = row_bytes, a.rows = rows, a.cols = cols;
	a.x = x, a.T = T, a.y = y;
	a.vec_x = ((uintptr_t)x & 15) == 0 && cols % 4 == 0;
	a.vec_w = w_vec(type, row_bytes, cols) && ((uintptr_t)W & (type == HBK_BF16 ? 15 : 3)) == 0;
	return go_type<false>(type, a, T, 1, pick_wt(T));
}

extern "C" int hbk_mma_matmul2(int type, const void *W1, uint64_t row_bytes1, uint64_t rows1, const void *W2,
			       uint64_t row_bytes2, uint64_t rows2, uint64_t cols, const float *x, size_t T, float *y1,
			       float *y2)
{
	Args a = {};

	if (!hbk_mma_takes(type, cols))
		return (int)cudaErrorInvalidValue;
	if (!T || !rows1)
		return rows2 ? hbk_mma_matmul(type, W2, row_bytes2, rows2, cols, x, T, y2) : 0;
	a.W = (const uint8_t *)W1, a.row_bytes = row_bytes1, a.rows = rows1, a.cols = cols;
	a.x = x, a.T = T, a.y = y1;
	a.vec_x = ((uintptr_t)x & 15) == 0 && cols % 4 == 0;
	a.vec_w = w_vec(type, row_bytes1, cols) && ((uintptr_t)W1 & (type == HBK_BF16 ? 15 : 3)) == 0;
	if (rows2) {
		a.W2 = (const uint8_t *)W2, a.row_bytes2 = row_bytes2, a.rows2 = rows2, a.y2 = y2;
		a.tx1 = (rows1 + BR - 1) / BR;
		a.vec_w2 = w_vec(type, row_bytes2, cols) && ((uintptr_t)W2 & (type == HBK_BF16 ? 15 : 3)) == 0;
	}
	return go_type<false>(type, a, T, 1, pick_wt(T));
}

extern "C" int hbk_mma_matmul_grouped(int type, const void *const *W, uint64_t row_bytes, uint64_t rows,
				      uint64_t cols, const int32_t *off, size_t groups, size_t most, const float *x,
				      float *y)
{
	Args a = {};

	if (!hbk_mma_takes(type, cols))
		return (int)cudaErrorInvalidValue;
	if (!groups || !most || !rows)
		return 0;
	if (groups > 65535)
		return (int)cudaErrorInvalidValue;
	a.Wg = (const uint8_t *const *)W, a.row_bytes = row_bytes, a.rows = rows, a.cols = cols;
	a.x = x, a.y = y, a.off = off;
	a.vec_x = ((uintptr_t)x & 15) == 0 && cols % 4 == 0;
	a.vec_w = w_vec(type, row_bytes, cols);
	return go_type<true>(type, a, most, groups, pick_wt(most));
}
