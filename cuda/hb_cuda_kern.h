/*
 * hb_cuda_kern.h: the CUDA backend's kernel launchers, in C (internal to
 * cuda/: hb_cuda.c is their one caller, hb_cuda_kern.cu their body).
 *
 * Every pointer here is device memory; every launcher queues its kernels on
 * the default stream and returns the launch's cudaError_t as an int (0 when
 * queued).  Results are float32, accumulated in float32:
 *   hbk_matmul      y[T][rows] = x[T][cols] . W^T, W in its storage type
 *                   (F32, F16, BF16, MLX affine4-g64), widened in the
 *                   kernel exactly as the CPU reference widens it
 *   hbk_swiglu_act  a = silu(g) * u, silu as libkern/math (x * sigmoid x)
 *   hbk_gdn_step    the gated delta rule for one token, every value head;
 *                   the same operations in the same order as the CPU
 *                   reference (no FMA), so bit-identical to it
 *   hbk_qsa_select  group scores, top `keep` by (score desc, group asc),
 *                   chronological rows and the tail; count written to *count
 *   hbk_attend      one query over n gathered rows [n][dim] with an online
 *                   softmax (no mask, no score array)
 */
#ifndef HB_CUDA_KERN_H
#define HB_CUDA_KERN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* the storage types of hb_backend.h's enum hb_wtype */
enum { HBK_F32 = 0, HBK_F16 = 1, HBK_BF16 = 2, HBK_AFFINE4_G64 = 3 };

int hbk_matmul(int type, const void *W, uint64_t row_bytes, uint64_t rows, uint64_t cols,
	       const float *x, size_t T, float *y);
int hbk_swiglu_act(const float *g, const float *u, size_t n, float *a);
int hbk_gdn_step(float *S, const float *q, const float *k, const float *v, const float *beta,
		 const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o);
/* scores: [groups] floats of scratch, flags: [groups] ints of scratch;
 * rows: keep * ratio + ratio - 1 ints at least */
int hbk_qsa_select(const float *iq, size_t heads, size_t dim, const float *pooled, uint64_t groups,
		   uint64_t keep, uint64_t ratio, uint64_t visible, float *scores, int32_t *flags,
		   int32_t *rows, int32_t *count);
int hbk_attend(const float *q, const float *K, const float *V, size_t dim, float scale, size_t n,
	       float *out);
/* the widest head hbk_attend takes, and the widest value head of hbk_gdn_step */
#define HBK_ATTEND_MAXDIM 1024
#define HBK_GDN_MAXDV 1024

#ifdef __cplusplus
}
#endif

#endif
