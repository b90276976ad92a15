/*
 * hb_cuda_mma_ops.cuh: the warp-level tensor-core operations the matrix
 * products (hb_cuda_mma.cu) and the attention (hb_cuda_attn_mma.cu) share:
 * shared-memory addresses, bf16 pairs as 32-bit registers, ldmatrix and
 * mma.sync m16n8k16 (bf16 products, exact, accumulated in float32).
 */
#ifndef HB_CUDA_MMA_OPS_CUH
#define HB_CUDA_MMA_OPS_CUH

#include <cuda_bf16.h>
#include <stdint.h>
#include <string.h>

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ uint32_t bits(__nv_bfloat162 h)
{
	uint32_t u;
	memcpy(&u, &h, 4);
	return u;
}

__device__ __forceinline__ __nv_bfloat162 bf2(uint32_t u)
{
	__nv_bfloat162 h;
	memcpy(&h, &u, 4);
	return h;
}

/* volatile: it reads what other threads stored before the barrier, so it
 * must not move above it */
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t (&r)[4])
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr));
}

/* the same, each 8 x 8 matrix transposed: B fragments from a [k][n] tile */
__device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t (&r)[4])
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr));
}

__device__ __forceinline__ void ldsm_x2(uint32_t addr, uint32_t (&r)[2])
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
		     : "=r"(r[0]), "=r"(r[1])
		     : "r"(addr));
}

/* d += a . b, bf16 products (exact) accumulated in float32 */
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
	asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
	    "{%0, %1, %2, %3};\n"
	    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* two floats as bf16 hi terms and lo = bf16 of what hi left (x - hi is
 * exact in float32): x to within 2^-16 |x| */
__device__ __forceinline__ void split2(float x0, float x1, uint32_t &hi, uint32_t &lo)
{
	__nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
	hi = bits(h);
	lo = bits(__floats2bfloat162_rn(x0 - __low2float(h), x1 - __high2float(h)));
}

#endif
