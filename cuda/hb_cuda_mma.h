/*
 * hb_cuda_mma.h: tensor-core forms of hbk_matmul and hbk_matmul_grouped
 * (hb_cuda_kern.h), same contracts, float32-level results.
 *
 * The float32 activations are split into bf16 terms, hi = bf16(x),
 * mid = bf16(x - hi) (and, with three terms, lo = bf16(x - hi - mid)); each
 * term is multiplied by the exact weights on the tensor cores (bf16 x bf16
 * products are exact, accumulated in float32).  Two terms represent x to
 * within 2^-16 |x|, three to within 2^-24 |x| (float32's own rounding), so
 * |y - exact| <= (2^-(8 terms) + the float32 accumulation's) * sum |w x|.
 * Affine4 weights enter as their nibbles centred, q - 8 (exact in bf16):
 * per 64-column group the tensor cores give a = sum (q - 8) x, and the
 * kernel adds scale * a + (bias + 8 scale) * sum x in float32.
 *
 * Every pointer is device memory; each launcher queues its kernel on the
 * default stream and returns the launch's cudaError_t as an int.  The
 * kernels need no scratch memory.  Weights: bf16 rows are read 16 bytes at
 * a time where W (each W[z]) is 16-byte aligned and row_bytes and cols are
 * multiples of 16 bytes and 8, element by element otherwise; affine4 rows
 * 4 bytes at a time where 4-byte aligned, byte by byte otherwise.
 */
#ifndef HB_CUDA_MMA_H
#define HB_CUDA_MMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* whether these kernels take the storage type (hb_cuda_kern.h's HBK_*) at
 * this width: bf16 at any width, affine4-g64 at multiples of 64; F32 and
 * F16 are left to hbk_matmul */
bool hbk_mma_takes(int type, uint64_t cols);
/* y[T][rows] = x[T][cols] . W^T, as hbk_matmul */
int hbk_mma_matmul(int type, const void *W, uint64_t row_bytes, uint64_t rows, uint64_t cols, const float *x,
		   size_t T, float *y);
/* group z: y rows [off[z], off[z + 1]) = W[z] applied to the same rows of
 * x, as hbk_matmul_grouped (W the device's array of device pointers; most
 * the largest group; groups <= 65535) */
int hbk_mma_matmul_grouped(int type, const void *const *W, uint64_t row_bytes, uint64_t rows, uint64_t cols,
			   const int32_t *off, size_t groups, size_t most, const float *x, float *y);
/* the number of bf16 terms of x in later launches (2 or 3; others leave it)
 * and the previous number: for the test and bench, which measure both */
int hbk_mma_terms(int terms);

#ifdef __cplusplus
}
#endif

#endif
