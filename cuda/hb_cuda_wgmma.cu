/*
 * hb_cuda_wgmma.cu: the split launchers' products (hb_cuda_mma.h) on
 * sm_90's warpgroup matrix instructions, wgmma.mma_async, where the device
 * is sm_90 (H100, H200) and x comes in two terms; the mma.sync form
 * (hb_cuda_mma.cu) runs everything else.
 *
 * Orientation: the weights are the instruction's M (64 rows a warpgroup,
 * two warpgroups a block: 128 rows), the tokens its N (BN = 32, 64, 96 or
 * 128 a block: a launch's tokens, or its mean group's, padded least for
 * the rate), the columns its K, in steps of 64 (one affine4 group; one
 * 128-byte row of each operand).  Both operands are read by the
 * instruction from shared memory, K-major, in the 128-byte swizzle
 * (hb_cuda_wgmma_ops.cuh): no thread loads a fragment.
 *
 * Arithmetic as the mma.sync form's: each bf16 term of x (lo first) is its
 * own instruction on the exact weights, products exact, sums in float32;
 * affine4 nibbles are staged as bf16 q - 8, each group's sums start from
 * zero and are folded in float32, y += scale a + (bias + 8 scale) sum x,
 * with sum x the split's float32 sums.  The same products are added in
 * the same order as the mma.sync form's (16 columns a step, lo then hi,
 * then the fold), and on an H100 every output is that form's bits
 * (tests/unit/test_cuda_mma.c checks both that and the bound against
 * double precision).
 *
 * Pipeline: four stages of shared memory.  Step k's copies were issued two
 * steps before (cp.async, each thread its own chunks, zeros where out of
 * range); at step k each thread waits for its own, converts its own affine4
 * words, fences them for the instructions' reads, and one barrier makes
 * all of them visible; the warpgroups then issue step k's instructions and,
 * while those run, the copies of step k + 2 into the stage step k - 2 used
 * (its instructions are done: each warpgroup waits for all but its latest
 * group before the next barrier; affine4 waits for all of them to fold).
 */
#include "hb_cuda_kern.h"
#include "hb_cuda_mma_int.cuh"
#include "hb_cuda_mma_ops.cuh"
#include "hb_cuda_wgmma_ops.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

using namespace hb_mma;

namespace {

constexpr int WROWS = 128;  /* weight rows a block: two warpgroups of 64 */
constexpr int THREADS = 256;
constexpr int STAGES = 4;
constexpr int NT = 2;       /* x's terms */

template <int TYPE, int BN> struct Wcfg {
	static constexpr bool AFF = TYPE == HBK_AFFINE4_G64;
	static constexpr int W_AT = 0, W_BYTES = WROWS * 128;
	static constexpr int X_AT = W_BYTES, X_TERM = BN * 128, X_BYTES = NT * X_TERM;
	static constexpr int SB_AT = X_AT + X_BYTES, SB_BYTES = AFF ? WROWS * 8 : 0;
	static constexpr int SUM_AT = SB_AT + SB_BYTES, SUM_BYTES = AFF ? BN * 4 : 0;
	static constexpr int RAW_AT = SUM_AT + SUM_BYTES, RAW_BYTES = AFF ? WROWS * 36 : 0;
	static constexpr int STAGE = (RAW_AT + RAW_BYTES + 1023) / 1024 * 1024;
	static constexpr int SMEM = STAGES * STAGE + 1024; /* + the base's alignment to 1,024 */
	static_assert(BN % 32 == 0 && BN <= 128, "a block's tokens: an instruction's N");
	static_assert(SMEM <= 227 * 1024, "fits an sm_90 block");
};

/* where a block reads: its product (the first or the second), group and tiles */
struct Src {
	const uint8_t *W;
	uint64_t rb, rows;
	bool vw;
	const __nv_bfloat16 *xp;
	const float *xs;
	size_t T, t0;
	uint64_t r0;
	const int32_t *xrow; /* the group's (Args::xrow) */
};

/* a thread's share of every step's copies, worked out once a block
 * (the address arithmetic was most of a step's instructions): where each
 * of its chunks comes from at step 0, whether its row or token exists,
 * and where in a stage it goes (the same at every step).  Thread tid
 * copies x chunks p 256 + tid (p < XP): term and row from p, row
 * tid / 8 + a multiple of 32, chunk tid % 8.  Weights (p < 4): chunk
 * tid % 8 of row 32 p + tid / 8, 16 bytes of bf16 or an affine4 word of
 * 8 nibbles, which lands where its 8 bf16 will; affine4 (p = 4): the
 * scale and bias word of row tid, threads under 128. */
template <int TYPE, int BN> struct Feed {
	using C = Wcfg<TYPE, BN>;
	static constexpr int XP = NT * BN * 8 / THREADS;
	static constexpr int WP = WROWS * 8 / THREADS + (C::AFF ? 1 : 0);
	const uint8_t *x[XP], *w[WP];
	const float *sum;
	uint32_t xok, wok, chunk; /* row bits by p; chunk: this thread's place in a swizzled row group */
	bool sok;
};

template <int TYPE, int BN>
__device__ __forceinline__ void feed_init(Feed<TYPE, BN> &f, const Args &a, const Src &s, int tid)
{
	using C = Wcfg<TYPE, BN>;
	using F = Feed<TYPE, BN>;
	const int u = tid >> 3, ch = tid & 7;

	f.chunk = (uint32_t)(u * 128 + ((ch ^ (u & 7)) << 4));
	f.xok = f.wok = 0;
#pragma unroll
	for (int p = 0; p < F::XP; p++) {
		int term = p * 32 / BN, r = p * 32 % BN + u;
		size_t t = s.t0 + r, src = t < s.T ? split_row(s.xrow, a.xk, t) : 0;
		f.x[p] = reinterpret_cast<const uint8_t *>(s.xp + term * a.plane + src * a.colsp + ch * 8);
		f.xok |= (uint32_t)(t < s.T) << p;
	}
	if constexpr (C::AFF) {
		uint64_t ng = a.cols / BK;
		f.sok = tid < BN && s.t0 + tid < s.T;
		f.sum = s.xs + (f.sok ? split_row(s.xrow, a.xk, s.t0 + tid) * ng : 0);
#pragma unroll
		for (int p = 0; p < F::WP - 1; p++) {
			f.w[p] = s.W + (s.r0 + p * 32 + u) * s.rb + ch * 4;
			f.wok |= (uint32_t)(s.r0 + p * 32 + u < s.rows) << p;
		}
		f.w[F::WP - 1] = s.W + (s.r0 + tid) * s.rb + 32;
		f.wok |= (uint32_t)(tid < WROWS && s.r0 + tid < s.rows) << (F::WP - 1);
	} else {
#pragma unroll
		for (int p = 0; p < F::WP; p++) {
			f.w[p] = s.W + (s.r0 + p * 32 + u) * s.rb + ch * 16;
			f.wok |= (uint32_t)(s.r0 + p * 32 + u < s.rows) << p;
		}
	}
}

/* step k's copies into stage st: the x terms' BN rows, the weights' 128
 * rows (bf16: 8 chunks a row; affine4: 9 words a row, converted at the
 * step) and the tokens' group sums (affine4); zeros past the ends */
template <int TYPE, int BN>
__device__ __forceinline__ void load_step(const Args &a, const Src &s, const Feed<TYPE, BN> &f, uint64_t k, int tid,
					  uint8_t *st)
{
	using C = Wcfg<TYPE, BN>;
	using F = Feed<TYPE, BN>;
	const uint64_t c = k * BK + (tid & 7) * 8; /* this thread's first column at step k */
	const uint32_t sx = smem_u32(st + C::X_AT) + f.chunk;

#pragma unroll
	for (int p = 0; p < F::XP; p++) /* nothing is read where !ok: no address need be valid */
		cp_async16(sx + (p * 32 / BN) * C::X_TERM + (p * 32 % BN) * 128, f.x[p] + k * BK * 2,
			   (f.xok >> p & 1) && c < a.colsp);
	if constexpr (C::AFF) {
		uint32_t raw = smem_u32(st + C::RAW_AT) + 4 * tid;
		if (tid < BN)
			cp_async4(smem_u32(st + C::SUM_AT + 4 * tid), f.sum + k, f.sok);
		if (s.vw) {
#pragma unroll
			for (int p = 0; p < F::WP; p++)
				if (p < F::WP - 1 || tid < WROWS)
					cp_async4(raw + 4 * p * THREADS, f.w[p] + k * 36, f.wok >> p & 1);
		} else {
#pragma unroll
			for (int p = 0; p < F::WP; p++) {
				const uint8_t *src = f.w[p] + k * 36;
				uint32_t v = 0;
				if (p == F::WP - 1 && tid >= WROWS)
					break;
				if (f.wok >> p & 1)
					v = (uint32_t)src[0] | (uint32_t)src[1] << 8 | (uint32_t)src[2] << 16 |
					    (uint32_t)src[3] << 24;
				reinterpret_cast<uint32_t *>(st + C::RAW_AT)[p * THREADS + tid] = v;
			}
		}
	} else {
		const uint32_t sw = smem_u32(st + C::W_AT) + f.chunk;
		if (s.vw) { /* cols % 8 == 0: a chunk is wholly in or out */
#pragma unroll
			for (int p = 0; p < F::WP; p++)
				cp_async16(sw + p * 32 * 128, f.w[p] + k * BK * 2, (f.wok >> p & 1) && c < a.cols);
		} else {
#pragma unroll
			for (int p = 0; p < F::WP; p++) {
				const uint16_t *w = reinterpret_cast<const uint16_t *>(f.w[p] + k * BK * 2);
				bool row = f.wok >> p & 1;
				uint32_t v[4];
#pragma unroll
				for (int i = 0; i < 4; i++) {
					uint32_t lo = row && c + 2 * i < a.cols ? w[2 * i] : 0;
					uint32_t hi = row && c + 2 * i + 1 < a.cols ? w[2 * i + 1] : 0;
					v[i] = lo | hi << 16;
				}
				*reinterpret_cast<uint4 *>(st + C::W_AT + f.chunk + p * 32 * 128) =
					make_uint4(v[0], v[1], v[2], v[3]);
			}
		}
	}
}

/* affine4: this thread's own words of stage st as bf16 q - 8 and each
 * row's (scale, bias + 8 scale) */
template <int BN> __device__ __forceinline__ void a4_convert(uint8_t *st, const Feed<HBK_AFFINE4_G64, BN> &f, int tid)
{
	using C = Wcfg<HBK_AFFINE4_G64, BN>;
	using F = Feed<HBK_AFFINE4_G64, BN>;
	const uint32_t *raw = reinterpret_cast<const uint32_t *>(st + C::RAW_AT);

#pragma unroll
	for (int p = 0; p < F::WP - 1; p++)
		*reinterpret_cast<uint4 *>(st + C::W_AT + p * 32 * 128 + f.chunk) = a4_word_bf16(raw[p * THREADS + tid]);
	if (tid < WROWS)
		reinterpret_cast<float2 *>(st + C::SB_AT)[tid] = a4_scale_bias(raw[(F::WP - 1) * THREADS + tid]);
}

/* step k's instructions for warpgroup wg on stage st: per 16 columns, the
 * lo term then the hi term; scale_first 0 starts d from zero.  A
 * descriptor a multiple of 16 bytes further is the descriptor plus the
 * distance over 16 (the address field holds every shared address of a
 * block, so nothing carries out of it) */
template <int BN> __device__ __forceinline__ void issue(uint32_t st, int wg, float (&d)[BN / 2], int scale_first)
{
	const uint64_t da = wg_desc(st + wg * 64 * 128), db = wg_desc(st + WROWS * 128);

	wg_fence();
#pragma unroll
	for (int kk = 0; kk < BK / 16; kk++) {
#pragma unroll
		for (int term = NT - 1; term >= 0; term--)
			wg_mma<BN>(d, da + kk * 2, db + (term * BN * 128 + kk * 32) / 16,
				   kk == 0 && term == NT - 1 ? scale_first : 1);
	}
	wg_commit();
}

/* step k: its copies waited for (affine4: this thread's words converted)
 * and made visible, its instructions issued into d (scale_first 0: from
 * zero), step k + 2's copies issued; then all of this warpgroup's
 * instructions but step k's waited for */
template <int TYPE, int BN>
__device__ __forceinline__ void step(const Args &a, const Src &s, const Feed<TYPE, BN> &f, uint64_t k, uint64_t nk,
				     int tid, int wg, uint8_t *smem, float (&d)[BN / 2], int scale_first)
{
	using C = Wcfg<TYPE, BN>;
	uint8_t *st = smem + (k % STAGES) * C::STAGE;

	cp_async_wait<STAGES - 3>();
	if constexpr (C::AFF)
		a4_convert<BN>(st, f, tid);
	fence_proxy_async();
	__syncthreads();
	issue<BN>(smem_u32(st), wg, d, scale_first);
	if (k + STAGES - 2 < nk)
		load_step<TYPE, BN>(a, s, f, k + STAGES - 2, tid, smem + ((k + STAGES - 2) % STAGES) * C::STAGE);
	cp_async_commit();
	wg_wait<1>();
}

/* affine4: y += scale g + bias' sum x for this thread's (row, token) pairs:
 * rows wg 64 + warp 16 + lane / 4 (+ 8), tokens 8 j + 2 (lane % 4) (+ 1) */
template <int BN>
__device__ __forceinline__ void a4_fold(const uint8_t *st, int row, int col, const float (&g)[BN / 2],
					float (&y)[BN / 2])
{
	using C = Wcfg<HBK_AFFINE4_G64, BN>;
	const float2 *sb = reinterpret_cast<const float2 *>(st + C::SB_AT);
	const float *sum = reinterpret_cast<const float *>(st + C::SUM_AT);
	float2 qa = sb[row], qb = sb[row + 8];

#pragma unroll
	for (int j = 0; j < BN / 8; j++) {
		float s0 = sum[8 * j + col], s1 = sum[8 * j + col + 1];
		y[4 * j] = fmaf(qa.y, s0, fmaf(qa.x, g[4 * j], y[4 * j]));
		y[4 * j + 1] = fmaf(qa.y, s1, fmaf(qa.x, g[4 * j + 1], y[4 * j + 1]));
		y[4 * j + 2] = fmaf(qb.y, s0, fmaf(qb.x, g[4 * j + 2], y[4 * j + 2]));
		y[4 * j + 3] = fmaf(qb.y, s1, fmaf(qb.x, g[4 * j + 3], y[4 * j + 3]));
	}
}

template <int TYPE, int BN, bool GROUPED> __global__ void __launch_bounds__(THREADS, 1) wg_kernel(Args a)
{
	using C = Wcfg<TYPE, BN>;
	extern __shared__ __align__(1024) uint8_t smem_raw[];
	uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
	Src s = {a.W, a.row_bytes, a.rows, a.vec_w, a.xp, a.xsum, a.T, (size_t)blockIdx.y * BN, 0, NULL};
	float *y = a.y;
	uint64_t bx = blockIdx.x;
	bool second = (a.W2 || a.Wg2) && bx >= a.tx1;

	if (second)
		s.rows = a.rows2, s.rb = a.row_bytes2, y = a.y2, s.vw = a.vec_w2, bx -= a.tx1;
	if constexpr (GROUPED) {
		size_t o = (size_t)a.off[blockIdx.z];
		s.T = (size_t)a.off[blockIdx.z + 1] - o;
		if (s.t0 >= s.T) /* the whole block: no barrier is skipped by part of it */
			return;
		s.W = second ? a.Wg2[blockIdx.z] : a.Wg[blockIdx.z];
		y += o * s.rows;
		if (a.xrow) {
			s.xrow = a.xrow + o;
		} else {
			s.xp += o * a.colsp;
			if constexpr (C::AFF)
				s.xs += o * (a.cols / BK);
		}
		s.vw = s.vw && ((uintptr_t)s.W & (C::AFF ? 3 : 15)) == 0;
	} else if (second) {
		s.W = a.W2;
	}
	s.r0 = bx * WROWS;

	const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
	const int row = wg * 64 + warp * 16 + (lane >> 2), col = 2 * (lane & 3);
	const uint64_t nk = (a.cols + BK - 1) / BK;
	Feed<TYPE, BN> f;
	float d[BN / 2], yv[C::AFF ? BN / 2 : 1];

	feed_init<TYPE, BN>(f, a, s, tid);
#pragma unroll
	for (int i = 0; i < BN / 2; i++)
		d[i] = 0.0f;
#pragma unroll
	for (int i = 0; i < (C::AFF ? BN / 2 : 1); i++)
		yv[i] = 0.0f;

#pragma unroll
	for (int k = 0; k < STAGES - 2; k++) {
		if ((uint64_t)k < nk)
			load_step<TYPE, BN>(a, s, f, k, tid, smem + k * C::STAGE);
		cp_async_commit();
	}
	if constexpr (!C::AFF) {
		for (uint64_t k = 0; k < nk; k++)
			step<TYPE, BN>(a, s, f, k, nk, tid, wg, smem, d, 1);
	} else {
		for (uint64_t k = 0; k < nk; k++) {
			step<TYPE, BN>(a, s, f, k, nk, tid, wg, smem, d, 0);
			wg_wait<0>();
			wg_pin(d);
			a4_fold<BN>(smem + (k % STAGES) * C::STAGE, row, col, d, yv);
		}
	}
	wg_wait<0>();
	wg_pin(d);

#pragma unroll
	for (int j = 0; j < BN / 8; j++) {
		size_t t = s.t0 + 8 * j + col;
		uint64_t n = s.r0 + row;
		float v[4];
#pragma unroll
		for (int e = 0; e < 4; e++)
			v[e] = C::AFF ? yv[4 * j + e] : d[4 * j + e];
		if (n < s.rows && t < s.T)
			y[t * s.rows + n] = v[0];
		if (n < s.rows && t + 1 < s.T)
			y[(t + 1) * s.rows + n] = v[1];
		if (n + 8 < s.rows && t < s.T)
			y[t * s.rows + n + 8] = v[2];
		if (n + 8 < s.rows && t + 1 < s.T)
			y[(t + 1) * s.rows + n + 8] = v[3];
	}
}

constexpr int WG_DEFAULT = 1; /* on: bench/gpu-results.md, 2026-12-06 */
int g_mode = -2; /* hbk_mma_wgmma: -1 off, 0 on (chosen per launch), else the tokens a block forced; -2 as wanted() */

/* tx: the blocks of 128 weight rows (both products') */
template <int TYPE, int BN, bool G> int launch(const Args &a, uint64_t tx, size_t m, size_t groups)
{
	using C = Wcfg<TYPE, BN>;
	size_t ty = (m + BN - 1) / BN;
	cudaError_t e;

	if (ty > 65535 || tx > 0x7fffffffu)
		return (int)cudaErrorInvalidValue;
	e = cudaFuncSetAttribute(wg_kernel<TYPE, BN, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
	if (e != cudaSuccess)
		return (int)e;
	wg_kernel<TYPE, BN, G><<<dim3((unsigned)tx, (unsigned)ty, (unsigned)groups), THREADS, C::SMEM>>>(a);
	return (int)cudaGetLastError();
}

template <int TYPE, bool G> int launch_bn(const Args &a, uint64_t tx, size_t m, size_t groups, int bn)
{
	switch (bn) {
	case 32: return launch<TYPE, 32, G>(a, tx, m, groups);
	case 64: return launch<TYPE, 64, G>(a, tx, m, groups);
	case 96: return launch<TYPE, 96, G>(a, tx, m, groups);
	default: return launch<TYPE, 128, G>(a, tx, m, groups);
	}
}

/* the tokens a block for `mean` tokens a product (grouped: the mean
 * group's, each group padded alone) and `blocks` of 128 weight rows by
 * groups, on `sms` SMs: the least waves of one block an SM times each
 * width's time a block, its tokens over its rate relative to 128's (an
 * instruction of N = 32 reads as many weight bytes from shared memory as
 * one of 128) */
int pick_bn(size_t mean, uint64_t blocks, int sms)
{
	static const int bn[] = {32, 64, 96, 128};
	static const double rate[] = {0.45, 0.75, 0.9, 1.0};
	int best = 128;
	double least = 0;

	for (int i = 3; i >= 0; i--) {
		uint64_t all = blocks * ((mean + bn[i] - 1) / bn[i]), waves = (all + sms - 1) / sms;
		double cost = (double)waves * bn[i] / rate[i];
		if (i == 3 || cost < least)
			best = bn[i], least = cost;
	}
	return best;
}

/* the current device's SMs where it runs sm_90a code, else 0 (asked once
 * a device: every product's launch asks) */
int sm90_sms(void)
{
	static int known[64]; /* 0 unknown, else SMs + 1 (1: not sm_90) */
	int dev = 0, major = 0, minor = 0, sms = 0;

	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0)
		return 0;
	if (dev < 64 && known[dev])
		return known[dev] - 1;
	if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || major != 9 || minor != 0 ||
	    sms < 1)
		sms = 0;
	if (dev < 64)
		known[dev] = sms + 1;
	return sms;
}

/* whether the form runs where nothing forced it: HB_CUDA_WGMMA=0 or 1 in
 * the environment (read once), else the default */
bool wanted(void)
{
	static int on = -1;

	if (on < 0) {
		const char *v = getenv("HB_CUDA_WGMMA");
		on = v && !strcmp(v, "0") ? 0 : v && !strcmp(v, "1") ? 1 : WG_DEFAULT;
	}
	return on;
}

} /* namespace */

int hb_mma::wg_go(int type, int terms, const Args &a, size_t m, size_t mean, size_t groups, bool grouped)
{
	uint64_t tx = (a.rows + WROWS - 1) / WROWS + (a.W2 || a.Wg2 ? (a.rows2 + WROWS - 1) / WROWS : 0);
	int sms, bn;

	if (g_mode == -1 || (g_mode == -2 && !wanted()) || terms != NT || !(sms = sm90_sms()))
		return -1;
	bn = g_mode > 0 ? g_mode : pick_bn(mean, tx * groups, sms);
	if (type == HBK_AFFINE4_G64)
		return grouped ? launch_bn<HBK_AFFINE4_G64, true>(a, tx, m, groups, bn)
			       : launch_bn<HBK_AFFINE4_G64, false>(a, tx, m, groups, bn);
	return grouped ? launch_bn<HBK_BF16, true>(a, tx, m, groups, bn)
		       : launch_bn<HBK_BF16, false>(a, tx, m, groups, bn);
}

extern "C" int hbk_mma_wgmma(int mode)
{
	int was = g_mode;

	if (mode == -2 || mode == -1 || mode == 0 || mode == 32 || mode == 64 || mode == 96 || mode == 128)
		g_mode = mode;
	return was;
}
