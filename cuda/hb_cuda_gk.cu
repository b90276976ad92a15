/*
 * hb_cuda_gk.cu: the device graph's stages between the matrix products
 * (hb_cuda_gk.h says what each computes).  Each is the host graph's loop
 * (libkern/graph/hb_layer_mix.c, hb_layer_attn.c) with one thread per
 * independent item, or one block per row where a row is reduced.
 */
#include "hb_cuda_gk.h"

#include <cub/block/block_reduce.cuh>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#define BLOCK 256
typedef cub::BlockReduce<float, BLOCK> Reduce;

static unsigned blocks(size_t n)
{
	size_t b = (n + BLOCK - 1) / BLOCK;
	return (unsigned)(b ? (b < 1u << 30 ? b : 1u << 30) : 1);
}

#define LAUNCH_ERR() ((int)cudaGetLastError())

/* ---------------------------------------------------------------- e^x */

__constant__ double c_exp_tab[16];

/* libkern/math's hb_expf, step for step; explicit roundings so that no
 * step is fused into a multiply-add the host does not make */
__device__ __forceinline__ float dexpf(float x)
{
	if (isnan(x))
		return x;
	if (x > 88.8f)
		return INFINITY;
	if (x < -104.0f)
		return 0.0f;
	double xd = (double)x;
	double z = __dmul_rn(xd, 0x1.71547652b82fep+4);
	double kd = __dadd_rn(z, 0x1.8p52);
	unsigned long long kb = (unsigned long long)__double_as_longlong(kd);
	long long k = (long long)(kb - 0x4338000000000000ull);
	kd = __dadd_rn(kd, -0x1.8p52);
	double r = fma(-kd, 0x1.62e42fefa39efp-5, xd);
	double p = fma(r, 1.0 / 120, 1.0 / 24);
	p = fma(p, r, 1.0 / 6);
	p = fma(p, r, 0.5);
	p = fma(p, r, 1.0);
	p = fma(p, r, 1.0);
	unsigned long long sb = (unsigned long long)__double_as_longlong(c_exp_tab[k & 15]);
	sb += (unsigned long long)(k >> 4) << 52;
	return (float)__dmul_rn(__longlong_as_double((long long)sb), p);
}

__device__ __forceinline__ float dsigmoid(float x)
{
	return __fdiv_rn(1.0f, __fadd_rn(1.0f, dexpf(-x)));
}

__device__ __forceinline__ float dsilu(float x)
{
	return __fmul_rn(x, dsigmoid(x));
}

extern "C" int hbg_init(const double exp_table[16])
{
	return (int)cudaMemcpyToSymbol(c_exp_tab, exp_table, 16 * sizeof(double));
}

/* ---------------------------------------------------------------- rows */

/* the sum of v over a block of NTH threads (every thread gets it) */
template <int NTH> __device__ __forceinline__ float block_sum_of(float v)
{
	typedef cub::BlockReduce<float, NTH> R;
	__shared__ typename R::TempStorage tmp;
	__shared__ float total;
	float s = R(tmp).Sum(v);
	if (threadIdx.x == 0)
		total = s;
	__syncthreads();
	s = total;
	__syncthreads();
	return s;
}

/* the same for a block of BLOCK threads (every row kernel launches so) */
__device__ __forceinline__ float block_sum(float v)
{
	return block_sum_of<BLOCK>(v);
}

__device__ __forceinline__ float widen_row(int type, const uint8_t *row, size_t c)
{
	if (type == 0)
		return reinterpret_cast<const float *>(row)[c];
	if (type == 2)
		return __uint_as_float((uint32_t) reinterpret_cast<const uint16_t *>(row)[c] << 16);
	if (type == 1)
		return __half2float(reinterpret_cast<const __half *>(row)[c]);
	const uint8_t *p = row + (c / 64) * 36;
	uint32_t k = (uint32_t)(c % 64), q = (p[k / 2] >> ((k & 1) * 4)) & 0x0fu;
	float scale = __uint_as_float((uint32_t)(p[32] | p[33] << 8) << 16);
	float bias = __uint_as_float((uint32_t)(p[34] | p[35] << 8) << 16);
	return __fadd_rn(__fmul_rn(scale, (float)q), bias);
}

__global__ void embed_kernel(int type, const uint8_t *W, uint64_t row_bytes, size_t H, const int32_t *tok, size_t hc,
			     float *x)
{
	size_t t = blockIdx.x;
	const uint8_t *row = W + (uint64_t)tok[t] * row_bytes;
	for (size_t j = threadIdx.x; j < H; j += blockDim.x) {
		float v = widen_row(type, row, j);
		for (size_t s = 0; s < hc; s++)
			x[(t * hc + s) * H + j] = v;
	}
}

extern "C" int hbg_embed(int type, const void *W, uint64_t row_bytes, size_t H, const int32_t *tok, size_t T,
			 size_t hc, float *x)
{
	if (!T)
		return 0;
	embed_kernel<<<(unsigned)T, BLOCK>>>(type, (const uint8_t *)W, row_bytes, H, tok, hc, x);
	return LAUNCH_ERR();
}

/* a row's norm once its thread's sum of squares ss is in: out = x / rms(x)
 * * (1 + w) over its n columns, x from v (M > 0: the thread's columns
 * threadIdx.x + BLOCK m) or from xr (M 0) */
template <int M>
__device__ __forceinline__ void norm_out(const float *xr, const float *v, float ss, size_t n, float eps,
					 const float *wg, float *o)
{
	ss = block_sum(ss);
	float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, (float)n), eps)));
	if constexpr (M > 0) {
#pragma unroll
		for (int m = 0; m < M; m++) {
			size_t i = threadIdx.x + (size_t)m * BLOCK;
			if (i < n)
				o[i] = __fmul_rn(__fmul_rn(v[m], inv), __fadd_rn(1.0f, wg[i]));
		}
	} else {
		for (size_t i = threadIdx.x; i < n; i += blockDim.x)
			o[i] = __fmul_rn(__fmul_rn(xr[i], inv), __fadd_rn(1.0f, wg[i]));
	}
}

/* block (row, group): out = x / rms(x) * (1 + w).  Each thread's columns
 * (threadIdx.x + BLOCK m) read once into registers where a row has at
 * most M BLOCK of them (M > 0): the loads of a row are then all in flight
 * at once, not one latency a column; the sum of squares is the thread's
 * fused multiply-adds in column order, as the loop form's (M 0) */
template <int M>
__global__ void rmsnorm_zc_kernel(const float *x, size_t ldx, const float *w, size_t group, float eps, float *out,
				  size_t ldo)
{
	const float *xr = x + blockIdx.x * ldx + blockIdx.y * group;
	float *o = out + blockIdx.x * ldo + blockIdx.y * group;
	const float *wg = w + blockIdx.y * group;
	float ss = 0, v[M > 0 ? M : 1];

	if constexpr (M > 0) {
#pragma unroll
		for (int m = 0; m < M; m++) {
			size_t i = threadIdx.x + (size_t)m * BLOCK;
			v[m] = i < group ? xr[i] : 0.0f;
		}
#pragma unroll
		for (int m = 0; m < M; m++)
			if (threadIdx.x + (size_t)m * BLOCK < group)
				ss = fmaf(v[m], v[m], ss);
	} else {
		for (size_t i = threadIdx.x; i < group; i += blockDim.x)
			ss = fmaf(xr[i], xr[i], ss);
	}
	norm_out<M>(xr, v, ss, group, eps, wg, o);
}

/* the register form's M for rows of n columns: the least of 4, 8, 12, 16
 * BLOCKs that holds them, else 0 (the loop form) */
static int regs_for(size_t n)
{
	return n <= 4 * BLOCK ? 4 : n <= 8 * BLOCK ? 8 : n <= 12 * BLOCK ? 12 : n <= 16 * BLOCK ? 16 : 0;
}

/* kernel K<M> launched for n columns a row: the M that holds them */
#define LAUNCH_M(K, n, grid, ...)                                                      \
	do {                                                                           \
		switch (regs_for(n)) {                                                 \
		case 4: K<4><<<grid, BLOCK>>>(__VA_ARGS__); break;                     \
		case 8: K<8><<<grid, BLOCK>>>(__VA_ARGS__); break;                     \
		case 12: K<12><<<grid, BLOCK>>>(__VA_ARGS__); break;                   \
		case 16: K<16><<<grid, BLOCK>>>(__VA_ARGS__); break;                   \
		default: K<0><<<grid, BLOCK>>>(__VA_ARGS__); break;                    \
		}                                                                      \
	} while (0)

extern "C" int hbg_rmsnorm_zc(const float *x, size_t ldx, const float *w, size_t n, size_t group, float eps,
			      float *out, size_t ldo, size_t rows)
{
	if (!rows || !n)
		return 0;
	LAUNCH_M(rmsnorm_zc_kernel, group, dim3((unsigned)rows, (unsigned)(n / group)), x, ldx, w, group, eps, out,
		 ldo);
	return LAUNCH_ERR();
}

#define MAXHEAD 1024

__global__ void norm_rope_kernel(const float *x, size_t ldx, size_t hx, const float *w, size_t dim, float eps,
				 const float *inv_freq, size_t half, uint64_t pos0, uint64_t pstep, float *out,
				 size_t ldo, size_t ho)
{
	__shared__ float v[MAXHEAD];
	const float *xr = x + blockIdx.x * ldx + blockIdx.y * hx;
	float *o = out + blockIdx.x * ldo + blockIdx.y * ho;
	uint64_t pos = pos0 + (uint64_t)blockIdx.x * pstep;
	float ss = 0;

	for (size_t i = threadIdx.x; i < dim; i += blockDim.x) {
		v[i] = xr[i];
		ss += v[i] * v[i];
	}
	ss = block_sum(ss); /* its barrier also publishes v */
	float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, (float)dim), eps)));
	for (size_t i = threadIdx.x; i < dim; i += blockDim.x)
		v[i] = __fmul_rn(__fmul_rn(v[i], inv), __fadd_rn(1.0f, w[i]));
	__syncthreads();
	for (size_t i = threadIdx.x; i < dim; i += blockDim.x) {
		if (i < half) {
			float f = __fmul_rn((float)pos, inv_freq[i]), cs = cosf(f), sn = sinf(f);
			float a = v[i], b = v[i + half];
			o[i] = __fsub_rn(__fmul_rn(a, cs), __fmul_rn(b, sn));
			o[i + half] = __fadd_rn(__fmul_rn(b, cs), __fmul_rn(a, sn));
		} else if (i >= 2 * half) {
			o[i] = v[i];
		}
	}
}

extern "C" int hbg_norm_rope(const float *x, size_t ldx, size_t hx, const float *w, size_t dim, float eps,
			     const float *inv_freq, size_t half, uint64_t pos0, uint64_t pstep, float *out, size_t ldo,
			     size_t ho, size_t rows, size_t heads)
{
	if (!rows || !heads)
		return 0;
	if (dim > MAXHEAD)
		return (int)cudaErrorInvalidValue;
	norm_rope_kernel<<<dim3((unsigned)rows, (unsigned)heads), BLOCK>>>(x, ldx, hx, w, dim, eps, inv_freq, half,
									   pos0, pstep, out, ldo, ho);
	return LAUNCH_ERR();
}

/* ---------------------------------------------------------------- hyper-connections */

__global__ void silu_div_kernel(float *a, size_t n, float div)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		a[i] = dsilu(__fdiv_rn(a[i], div));
}

extern "C" int hbg_silu_div(float *a, size_t n, float div)
{
	if (!n)
		return 0;
	silu_div_kernel<<<blocks(n), BLOCK>>>(a, n, div);
	return LAUNCH_ERR();
}

/* the rows of a launch over (columns, rows): blockIdx.y and every
 * gridDim.y after it (a grid's y is at most 65,535), no index divided */
#define ROWS_Y(n) ((unsigned)((n) < 65535 ? (n) : 65535))

/* HC > 0: the streams' count known, their loads all in flight at once */
template <int HC>
__global__ void hc_mix_kernel(const float *mix, const float *xn, size_t T, size_t hc, size_t H, float *out)
{
	size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= H)
		return;
	for (size_t t = blockIdx.y; t < T; t += gridDim.y) {
		float acc = 0;
		if constexpr (HC > 0) {
			float m[HC], v[HC];
#pragma unroll
			for (int s = 0; s < HC; s++)
				m[s] = mix[(t * HC + s) * H + j], v[s] = xn[(t * HC + s) * H + j];
#pragma unroll
			for (int s = 0; s < HC; s++)
				acc = __fadd_rn(acc, __fmul_rn(dsigmoid(m[s]), v[s]));
		} else {
			for (size_t s = 0; s < hc; s++) {
				size_t at = (t * hc + s) * H + j;
				acc = __fadd_rn(acc, __fmul_rn(dsigmoid(mix[at]), xn[at]));
			}
		}
		out[t * H + j] = __fdiv_rn(acc, (float)hc);
	}
}

extern "C" int hbg_hc_mix(const float *mix, const float *xn, size_t T, size_t hc, size_t H, float *out)
{
	dim3 grid((unsigned)((H + BLOCK - 1) / BLOCK), ROWS_Y(T));

	if (!T || !H)
		return 0;
	if (hc == 4) /* the model's */
		hc_mix_kernel<4><<<grid, BLOCK>>>(mix, xn, T, hc, H, out);
	else
		hc_mix_kernel<0><<<grid, BLOCK>>>(mix, xn, T, hc, H, out);
	return LAUNCH_ERR();
}

__global__ void hc_inj_kernel(float *v, size_t n, float hc)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		v[i] = __fmul_rn(2.0f, dsigmoid(__fdiv_rn(v[i], hc)));
}

extern "C" int hbg_hc_inj(float *v, size_t n, float hc)
{
	if (!n)
		return 0;
	hc_inj_kernel<<<blocks(n), BLOCK>>>(v, n, hc);
	return LAUNCH_ERR();
}

__global__ void hc_add_kernel(float *x, const float *y, const float *inj, size_t T, size_t hc, size_t H)
{
	size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (j >= H)
		return;
	for (size_t t = blockIdx.y; t < T; t += gridDim.y) {
		float yv = y[t * H + j];
		for (size_t s = 0; s < hc; s++) {
			size_t row = t * hc + s;
			x[row * H + j] = __fadd_rn(x[row * H + j], __fmul_rn(yv, inj[row]));
		}
	}
}

/* block (t, s): hc_add_kernel's row, then rmsnorm_zc_kernel's on it, each
 * thread the same columns in the same order as there; M as there */
template <int M>
__global__ void hc_add_norm_kernel(float *x, const float *y, const float *inj, size_t hc, size_t H, const float *w,
				   float eps, float *out)
{
	size_t row = blockIdx.x * hc + blockIdx.y;
	float *xr = x + row * H, *o = out + row * H, g = inj[row], ss = 0, v[M > 0 ? M : 1];
	const float *yr = y + blockIdx.x * H, *wg = w + blockIdx.y * H;

	if constexpr (M > 0) {
#pragma unroll
		for (int m = 0; m < M; m++) {
			size_t i = threadIdx.x + (size_t)m * BLOCK;
			v[m] = i < H ? __fadd_rn(xr[i], __fmul_rn(yr[i], g)) : 0.0f;
		}
#pragma unroll
		for (int m = 0; m < M; m++) {
			size_t i = threadIdx.x + (size_t)m * BLOCK;
			if (i < H)
				xr[i] = v[m], ss = fmaf(v[m], v[m], ss);
		}
	} else {
		for (size_t i = threadIdx.x; i < H; i += blockDim.x) {
			float u = __fadd_rn(xr[i], __fmul_rn(yr[i], g));
			xr[i] = u;
			ss = fmaf(u, u, ss);
		}
	}
	norm_out<M>(xr, v, ss, H, eps, wg, o);
}

extern "C" int hbg_hc_add_norm(float *x, const float *y, const float *inj, size_t T, size_t hc, size_t H,
			       const float *w, float eps, float *out)
{
	if (!T || !hc || !H)
		return 0;
	LAUNCH_M(hc_add_norm_kernel, H, dim3((unsigned)T, (unsigned)hc), x, y, inj, hc, H, w, eps, out);
	return LAUNCH_ERR();
}

extern "C" int hbg_hc_add(float *x, const float *y, const float *inj, size_t T, size_t hc, size_t H)
{
	if (!T || !H)
		return 0;
	hc_add_kernel<<<dim3((unsigned)((H + BLOCK - 1) / BLOCK), ROWS_Y(T)), BLOCK>>>(x, y, inj, T, hc, H);
	return LAUNCH_ERR();
}

/* ---------------------------------------------------------------- Gated DeltaNet */

__global__ void gdn_conv_kernel(const float *w, const float *from, const float *in, float *out, size_t T, size_t cd,
				size_t K)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, t = i / cd, ch = i % cd;
	if (t >= T)
		return;
	float acc = 0;
	for (size_t j = 0; j + 1 < K; j++) {
		long long p = (long long)t - (long long)(K - 1) + (long long)j;
		float v = p < 0 ? from[(size_t)((long long)(K - 1) + p) * cd + ch] : in[(size_t)p * cd + ch];
		acc = __fadd_rn(acc, __fmul_rn(w[ch * K + j], v));
	}
	acc = __fadd_rn(acc, __fmul_rn(w[ch * K + K - 1], in[t * cd + ch]));
	out[i] = dsilu(acc);
}

/*
 * The same for K taps known at compile time: a thread walks CONV_RUN
 * tokens of one channel with the last K inputs in registers, so each
 * input is read once rather than K times, and no index is divided (the
 * kernel above divides a 64-bit index twice an output).  The sums are
 * the kernel above's, term for term.
 */
#define CONV_RUN 16
template <int K>
__global__ void gdn_conv_run_kernel(const float *w, const float *from, const float *in, float *out, size_t T,
				    size_t cd)
{
	size_t ch = (size_t)blockIdx.x * blockDim.x + threadIdx.x, t0 = (size_t)blockIdx.y * CONV_RUN;
	float wv[K], win[K];

	if (ch >= cd)
		return;
#pragma unroll
	for (int j = 0; j < K; j++)
		wv[j] = w[ch * K + j];
#pragma unroll
	for (int j = 0; j + 1 < K; j++) {
		long long p = (long long)t0 - (K - 1) + j;
		win[j] = p < 0 ? from[(size_t)((K - 1) + p) * cd + ch] : in[(size_t)p * cd + ch];
	}
	for (size_t t = t0; t < t0 + CONV_RUN && t < T; t++) {
		float acc = 0;
		win[K - 1] = in[t * cd + ch];
#pragma unroll
		for (int j = 0; j < K; j++)
			acc = __fadd_rn(acc, __fmul_rn(wv[j], win[j]));
		out[t * cd + ch] = dsilu(acc);
#pragma unroll
		for (int j = 0; j + 1 < K; j++)
			win[j] = win[j + 1];
	}
}

/* to[j] = the input K - 1 - j tokens before the chunk's end */
__global__ void gdn_state_kernel(const float *from, float *to, const float *in, size_t T, size_t cd, size_t K)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, j = i / cd, ch = i % cd;
	if (j + 1 >= K)
		return;
	long long p = (long long)T - (long long)(K - 1) + (long long)j;
	to[i] = p < 0 ? from[(size_t)((long long)(K - 1) + p) * cd + ch] : in[(size_t)p * cd + ch];
}

extern "C" int hbg_gdn_conv(const float *w, const float *from, float *to, const float *in, float *out, size_t T,
			    size_t cd, size_t K)
{
	if (!T)
		return 0;
	if (K == 4 && (T + CONV_RUN - 1) / CONV_RUN <= 65535)
		gdn_conv_run_kernel<4><<<dim3((unsigned)((cd + BLOCK - 1) / BLOCK), (unsigned)((T + CONV_RUN - 1) / CONV_RUN)),
					 BLOCK>>>(w, from, in, out, T, cd);
	else
		gdn_conv_kernel<<<blocks(T * cd), BLOCK>>>(w, from, in, out, T, cd, K);
	if (K > 1)
		gdn_state_kernel<<<blocks((K - 1) * cd), BLOCK>>>(from, to, in, T, cd, K);
	return LAUNCH_ERR();
}

__global__ void l2norm_kernel(float *x, size_t ld, size_t dim, float eps)
{
	float *v = x + blockIdx.x * ld + blockIdx.y * dim, ss = 0;
	for (size_t i = threadIdx.x; i < dim; i += blockDim.x)
		ss += v[i] * v[i];
	ss = block_sum(ss);
	float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(ss, eps)));
	for (size_t i = threadIdx.x; i < dim; i += blockDim.x)
		v[i] = __fmul_rn(v[i], inv);
}

extern "C" int hbg_l2norm_heads(float *x, size_t ld, size_t rows, size_t heads, size_t dim, float eps)
{
	if (!rows || !heads)
		return 0;
	l2norm_kernel<<<dim3((unsigned)rows, (unsigned)heads), BLOCK>>>(x, ld, dim, eps);
	return LAUNCH_ERR();
}

__device__ __forceinline__ float softplus(float x)
{
	return x > 20.0f ? x : log1pf(expf(x));
}

__global__ void gdn_gates_kernel(float *b, float *a, float *lg, size_t n, size_t nv, const float *A_log,
				 const float *dt_bias)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, h = i % nv;
	if (i >= n)
		return;
	float g = __fmul_rn(-expf(A_log[h]), softplus(__fadd_rn(a[i], dt_bias[h])));
	b[i] = dsigmoid(b[i]);
	a[i] = expf(g);
	if (lg)
		lg[i] = g;
}

extern "C" int hbg_gdn_gates(float *b, float *a, float *lg, size_t n, size_t nv, const float *A_log,
			     const float *dt_bias)
{
	if (!n)
		return 0;
	gdn_gates_kernel<<<blocks(n), BLOCK>>>(b, a, lg, n, nv, A_log, dt_bias);
	return LAUNCH_ERR();
}

/*
 * NTH threads a head.  A head of at most 128 values takes 128 threads,
 * not BLOCK: the same sums, since a warp of BLOCK's with no value adds +0
 * to a sum of squares (cub adds the warps' sums in order), and half the
 * threads idle no more (the kernel was 2 % of a chunk).
 */
template <int NTH>
__global__ void gated_norm_kernel(float *o, const float *z, const float *w, size_t dv, float eps, int sig)
{
	float *v = o + (size_t)blockIdx.x * dv, ss = 0;
	const float *zz = z + (size_t)blockIdx.x * dv;
	for (size_t i = threadIdx.x; i < dv; i += blockDim.x)
		ss += v[i] * v[i];
	ss = block_sum_of<NTH>(ss);
	float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, (float)dv), eps)));
	for (size_t i = threadIdx.x; i < dv; i += blockDim.x) {
		float y = __fmul_rn(w[i], __fmul_rn(v[i], inv));
		v[i] = __fmul_rn(y, sig ? dsigmoid(zz[i]) : dsilu(zz[i]));
	}
}

extern "C" int hbg_gated_norm(float *o, const float *z, const float *w, size_t heads, size_t dv, float eps, int sig)
{
	if (!heads)
		return 0;
	if (dv <= 128)
		gated_norm_kernel<128><<<(unsigned)heads, 128>>>(o, z, w, dv, eps, sig);
	else
		gated_norm_kernel<BLOCK><<<(unsigned)heads, BLOCK>>>(o, z, w, dv, eps, sig);
	return LAUNCH_ERR();
}

/* ---------------------------------------------------------------- QSA */

__global__ void add_bias_kernel(float *y, size_t ld, const float *b, size_t n, size_t T)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, t = i / n, j = i % n;
	if (t < T)
		y[t * ld + j] = __fadd_rn(y[t * ld + j], b[j]);
}

extern "C" int hbg_add_bias(float *y, size_t ld, const float *b, size_t n, size_t T)
{
	if (!T || !n)
		return 0;
	add_bias_kernel<<<blocks(T * n), BLOCK>>>(y, ld, b, n, T);
	return LAUNCH_ERR();
}

__global__ void pool_kernel(const float *raw, size_t dim, uint64_t g0, size_t n, size_t ratio, float *pooled)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, g = g0 + i / dim, c = i % dim;
	if (i >= n * dim)
		return;
	float acc = 0;
	for (size_t r = 0; r < ratio; r++)
		acc = __fadd_rn(acc, raw[(g * ratio + r) * dim + c]);
	pooled[g * dim + c] = __fdiv_rn(acc, (float)ratio);
}

extern "C" int hbg_pool_groups(const float *raw, size_t dim, uint64_t g0, uint64_t g1, size_t ratio, float *pooled)
{
	if (g1 <= g0)
		return 0;
	pool_kernel<<<blocks((size_t)(g1 - g0) * dim), BLOCK>>>(raw, dim, g0, (size_t)(g1 - g0), ratio, pooled);
	return LAUNCH_ERR();
}

__global__ void qsa_gate_kernel(float *o, const float *q, size_t T, size_t nh, size_t hd)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, w = nh * hd, t = i / w, h = (i % w) / hd, j = i % hd;
	if (t < T)
		o[i] = __fmul_rn(o[i], dsigmoid(q[t * 2 * w + h * 2 * hd + hd + j]));
}

extern "C" int hbg_qsa_gate(float *o, const float *q, size_t T, size_t nh, size_t hd)
{
	if (!T)
		return 0;
	qsa_gate_kernel<<<blocks(T * nh * hd), BLOCK>>>(o, q, T, nh, hd);
	return LAUNCH_ERR();
}

/* ---------------------------------------------------------------- MoE */

struct fmax_op {
	__device__ __forceinline__ float operator()(float a, float b) const
	{
		return fmaxf(a, b);
	}
};

struct best {
	float p;
	int id;
};

struct best_op {
	__device__ __forceinline__ best operator()(const best &a, const best &b) const
	{
		if (a.id < 0)
			return b;
		if (b.id < 0)
			return a;
		if (a.p > b.p || (!(b.p > a.p) && a.id < b.id))
			return a;
		return b;
	}
};

/* one block a token: the softmax (max, exp, sum, divide: hb_softmax's
 * steps), then k rounds of the largest untaken probability, ties to the
 * lower id (the host's top_k), then the weights */
__global__ void route_kernel(float *p, size_t E, size_t k, int norm, int32_t *ids, float *wt)
{
	typedef cub::BlockReduce<best, BLOCK> BestReduce;
	__shared__ typename BestReduce::TempStorage btmp;
	__shared__ int32_t chosen[64];
	__shared__ float mx;
	float *row = p + (size_t)blockIdx.x * E, m = -INFINITY;

	for (size_t e = threadIdx.x; e < E; e += blockDim.x)
		m = fmaxf(m, row[e]);
	{
		__shared__ typename Reduce::TempStorage tmp;
		float r = Reduce(tmp).Reduce(m, fmax_op());
		if (threadIdx.x == 0)
			mx = r;
		__syncthreads();
	}
	float s = 0;
	for (size_t e = threadIdx.x; e < E; e += blockDim.x) {
		row[e] = expf(__fsub_rn(row[e], mx));
		s += row[e];
	}
	s = block_sum(s);
	for (size_t e = threadIdx.x; e < E; e += blockDim.x)
		row[e] = __fdiv_rn(row[e], s);
	__syncthreads();
	for (size_t r = 0; r < k; r++) {
		best b = { -INFINITY, -1 };
		for (size_t e = threadIdx.x; e < E; e += blockDim.x) {
			bool taken = false;
			for (size_t q = 0; q < r; q++)
				taken |= chosen[q] == (int32_t)e;
			if (!taken)
				b = best_op()(b, best{ row[e], (int)e });
		}
		best w = BestReduce(btmp).Reduce(b, best_op());
		if (threadIdx.x == 0)
			chosen[r] = w.id;
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		float sum = 0;
		for (size_t r = 0; r < k; r++)
			sum = __fadd_rn(sum, row[chosen[r]]);
		for (size_t r = 0; r < k; r++) {
			ids[blockIdx.x * k + r] = chosen[r];
			wt[blockIdx.x * k + r] = norm ? __fdiv_rn(row[chosen[r]], sum) : row[chosen[r]];
		}
	}
}

extern "C" int hbg_route(float *p, size_t T, size_t E, size_t k, int norm, int32_t *ids, float *w)
{
	if (!T)
		return 0;
	if (k > 64 || k > E)
		return (int)cudaErrorInvalidValue;
	route_kernel<<<(unsigned)T, BLOCK>>>(p, E, k, norm, ids, w);
	return LAUNCH_ERR();
}

__global__ void shared_add_kernel(float *y, const float *sh, const float *gate, size_t T, size_t H)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, t = i / H;
	if (t < T)
		y[i] = __fadd_rn(y[i], __fmul_rn(dsigmoid(gate[t]), sh[i]));
}

extern "C" int hbg_shared_add(float *y, const float *sh, const float *gate, size_t T, size_t H)
{
	if (!T)
		return 0;
	shared_add_kernel<<<blocks(T * H), BLOCK>>>(y, sh, gate, T, H);
	return LAUNCH_ERR();
}

/* ---------------------------------------------------------------- PLE */

__global__ void ple_gate_kernel(const float *key, const float *q, const float *val, size_t hc, size_t H, float *gv)
{
	size_t t = blockIdx.x, s = blockIdx.y;
	const float *kk = key + (t * hc + s) * H, *qq = q + (t * hc + s) * H;
	float d = 0;
	for (size_t j = threadIdx.x; j < H; j += blockDim.x)
		d += kk[j] * qq[j];
	d = block_sum(d);
	float g = __fdiv_rn(d, __fsqrt_rn((float)H));
	float mag = __fsqrt_rn(fabsf(g) > 1e-6f ? fabsf(g) : 1e-6f);
	float sg = dsigmoid(g > 0 ? mag : g < 0 ? -mag : 0.0f);
	for (size_t j = threadIdx.x; j < H; j += blockDim.x)
		gv[(t * hc + s) * H + j] = __fmul_rn(sg, val[t * H + j]);
}

extern "C" int hbg_ple_gate(const float *key, const float *q, const float *val, size_t T, size_t hc, size_t H,
			    float *gv)
{
	if (!T)
		return 0;
	ple_gate_kernel<<<dim3((unsigned)T, (unsigned)hc), BLOCK>>>(key, q, val, hc, H, gv);
	return LAUNCH_ERR();
}

/* the normed input `back` tokens before token t: the chunk's own, or the state's */
__device__ __forceinline__ float ple_in(const float *from, const float *gvn, long long t, size_t back, size_t slen,
					size_t C, size_t c)
{
	long long p = t - (long long)back;
	return p >= 0 ? gvn[(size_t)p * C + c] : from[(size_t)((long long)slen + p) * C + c];
}

__global__ void ple_conv_kernel(const float *w, const float *from, const float *gvn, const float *gv, float *x,
				size_t T, size_t C, size_t K, size_t dil)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, t = i / C, c = i % C, slen = (K - 1) * dil;
	if (t >= T)
		return;
	float acc = 0;
	for (size_t j = 0; j < K; j++) {
		size_t back = (K - 1 - j) * dil;
		acc = __fadd_rn(acc, __fmul_rn(w[c * K + j], ple_in(from, gvn, (long long)t, back, slen, C, c)));
	}
	x[i] = __fadd_rn(x[i], __fadd_rn(gv[i], dsilu(acc)));
}

__global__ void ple_state_kernel(const float *from, float *to, const float *gvn, size_t T, size_t C, size_t slen)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, r = i / C, c = i % C;
	if (r < slen)
		to[i] = ple_in(from, gvn, (long long)T, slen - r, slen, C, c);
}

extern "C" int hbg_ple_conv(const float *w, const float *from, float *to, const float *gvn, const float *gv, float *x,
			    size_t T, size_t C, size_t K, size_t dil)
{
	size_t slen = (K - 1) * dil;
	if (!T)
		return 0;
	ple_conv_kernel<<<blocks(T * C), BLOCK>>>(w, from, gvn, gv, x, T, C, K, dil);
	if (slen)
		ple_state_kernel<<<blocks(slen * C), BLOCK>>>(from, to, gvn, T, C, slen);
	return LAUNCH_ERR();
}

/* ---------------------------------------------------------------- random weights */

/* every 16-bit word a bf16 of magnitude in [2^-7, 2^-4) with a random sign
 * and mantissa (splitmix64 of its index): valid read as bf16 rows and as
 * affine4 records alike (nibbles any, scale and bias such words) */
__global__ void fill_kernel(uint16_t *w, size_t n, uint64_t seed)
{
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		w[i] = (uint16_t)((z & 0x8000u) | (uint32_t)(120 + (z >> 16) % 3) << 7 | ((z >> 8) & 0x7fu));
	}
}

extern "C" int hbg_fill_random(void *d, size_t bytes, uint64_t seed)
{
	if (bytes < 2)
		return 0;
	fill_kernel<<<4096, BLOCK>>>((uint16_t *)d, bytes / 2, seed);
	return LAUNCH_ERR();
}

/* ---------------------------------------------------------------- finite */

__global__ void finite_kernel(const float *x, size_t n, int *flag)
{
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		if (!isfinite(x[i]))
			*flag = 0;
}

extern "C" int hbg_check_finite(const float *x, size_t n, int *flag)
{
	if (!n)
		return 0;
	finite_kernel<<<blocks(n) < 4096 ? blocks(n) : 4096, BLOCK>>>(x, n, flag);
	return LAUNCH_ERR();
}
