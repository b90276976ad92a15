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
 * kernels need no scratch memory but a split of x (below) where given.  Weights: bf16 rows are read 16 bytes at
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
/* two products of one x in one launch: y1 = x W1^T, y2 = x W2^T, the
 * weights of one type and width (each output as hbk_mma_matmul's) */
int hbk_mma_matmul2(int type, const void *W1, uint64_t row_bytes1, uint64_t rows1, const void *W2,
		    uint64_t row_bytes2, uint64_t rows2, uint64_t cols, const float *x, size_t T, float *y1, float *y2);

/*
 * x split once: each launcher above splits x into its bf16 terms inside
 * every block, so a product of R weight rows splits each x tile R / 128
 * times.  hbk_mma_split writes the terms (and, for affine4, each 64-column
 * group's float32 sum of x) once into `split` (hbk_mma_split_bytes of
 * device memory, for the term count now set); the _split launchers read
 * them instead of x, with results bit-identical to the launchers above.
 * A split is valid until x changes or the term count does.
 */
size_t hbk_mma_split_bytes(int type, size_t T, uint64_t cols);
int hbk_mma_split(int type, const float *x, size_t T, uint64_t cols, void *split);
/* the same for the rows pack[0 .. T) / k of x (the experts' rows, in
 * their groups' order, gathered as they are split) */
int hbk_mma_split_rows(int type, const float *x, const int32_t *pack, size_t k, size_t T, uint64_t cols, void *split);
/* hbk_mma_matmul2 from a split of x (rows2 0: the first product alone) */
int hbk_mma_matmul2_split(int type, const void *W1, uint64_t row_bytes1, uint64_t rows1, const void *W2,
			  uint64_t row_bytes2, uint64_t rows2, uint64_t cols, const void *split, size_t T, float *y1,
			  float *y2);
/* hbk_mma_matmul_grouped from a split of x (its T rows: off[groups]);
 * with W2 (else NULL) a second grouped product of the same shape on the
 * same rows into y2, in the same launch (the experts' gate and up) */
int hbk_mma_grouped2_split(int type, const void *const *W, const void *const *W2, uint64_t row_bytes, uint64_t rows,
			   uint64_t cols, const int32_t *off, size_t groups, size_t most, const void *split, size_t T,
			   float *y, float *y2);
/* hbk_mma_grouped2_split on P packed rows (off[groups] = P) that are the
 * rows pack[0 .. P) / k of a split of T rows, read where they lie: the
 * products' bits are those of a split gathered by hbk_mma_split_rows */
int hbk_mma_grouped2_split_rows(int type, const void *const *W, const void *const *W2, uint64_t row_bytes,
				uint64_t rows, uint64_t cols, const int32_t *off, size_t groups, size_t most,
				const void *split, size_t T, const int32_t *pack, size_t k, size_t P, float *y, float *y2);
/* the number of bf16 terms of x in later launches (2 or 3; others leave it)
 * and the previous number: for the test and bench, which measure both */
int hbk_mma_terms(int terms);
/* the block height of later launches forced to 32 wt tokens (2, 3 or 4;
 * 0: chosen per launch, the default; others leave it) and the previous
 * setting: for the bench, which measures each */
int hbk_mma_tile(int wt);
/*
 * The split launchers can run on sm_90's warpgroup instructions (wgmma, in
 * hb_cuda_wgmma.cu) where the device is sm_90 and x has two terms, on
 * mma.sync otherwise: the same products added in the same order, and on
 * an H100 the same bits (test_cuda_mma).  HB_CUDA_WGMMA=0 in the
 * environment turns the wgmma form off, 1 on; unset, the default (on).  hbk_mma_wgmma sets it for
 * later launches: -2 as the environment says, -1 off, 0 on (the block's
 * tokens chosen per launch), 32, 64, 96 or 128 on with that many tokens a
 * block (others leave it); it returns the previous setting: for the test
 * and bench, which measure both forms.
 */
int hbk_mma_wgmma(int mode);

#ifdef __cplusplus
}
#endif

#endif
