/*
 * hb_cuda_wgmma_ops.cuh: sm_90's warpgroup matrix instructions as the
 * wgmma form of the products (hb_cuda_wgmma.cu) issues them: shared-memory
 * descriptors of K-major tiles in the 128-byte swizzle, the fences, and
 * wgmma.mma_async m64nNk16 (bf16 products, exact, accumulated in float32)
 * for the N the launches use.  Compiled for sm_90a only.
 */
#ifndef HB_CUDA_WGMMA_OPS_CUH
#define HB_CUDA_WGMMA_OPS_CUH

#include <stdint.h>

/* 16-byte chunk ch of row r of a K-major tile of 128-byte rows in the
 * 128-byte swizzle: the chunk index XORed with the row's place in its
 * 8-row (1,024-byte) atom, as the descriptors below tell the instruction */
__device__ __forceinline__ uint32_t sw128(int r, int ch)
{
	return (uint32_t)(r * 128 + ((ch ^ (r & 7)) << 4));
}

/* the descriptor of a K-major operand at shared address addr (its tile
 * 1,024-byte aligned; addr may step 32 bytes a k16 slice into its rows):
 * start address, leading-dimension offset 16 bytes (unused in this
 * swizzle), stride 1,024 bytes (8 rows of 128), 128-byte swizzle */
__device__ __forceinline__ uint64_t wg_desc(uint32_t addr)
{
	return (uint64_t)((addr & 0x3ffffu) >> 4) | (uint64_t)1 << 16 | (uint64_t)64 << 32 | (uint64_t)1 << 62;
}

/* before a warpgroup's first instruction, and after its threads touched
 * the accumulators */
__device__ __forceinline__ void wg_fence()
{
	asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wg_commit()
{
	asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

/* until at most N committed groups are still running */
template <int N> __device__ __forceinline__ void wg_wait()
{
	asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* shared memory written by threads (the generic proxy) made visible to
 * the instructions' operand reads (the async proxy); a barrier follows */
__device__ __forceinline__ void fence_proxy_async()
{
	asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* the accumulators pinned after a wait: the compiler may not move their
 * reads above it (it sees no data flow from the wait to them) */
template <int R> __device__ __forceinline__ void wg_pin(float (&d)[R])
{
#pragma unroll
	for (int i = 0; i < R; i++)
		asm volatile("" : "+f"(d[i])::"memory");
}

/* eight accumulators from d[i] as operands read and written */
#define WG_D8(i)                                                                                              \
	"+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
		"+f"(d[i + 7])

/* d (N / 2 floats a thread) = A B^T (+ d where scale_d), A the 64 x 16
 * tile at descriptor da, B the N x 16 tile at db, both K-major */
template <int N> __device__ __forceinline__ void wg_mma(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d)
{
	static_assert(N == 32 || N == 64 || N == 96 || N == 128, "an N spelled below");
	if constexpr (N == 32) {
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
			     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
			     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
			     "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
			     : WG_D8(0), WG_D8(8)
			     : "l"(da), "l"(db), "r"(scale_d));
	} else if constexpr (N == 64) {
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
			     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
			     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
			     "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
			     "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
			     : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24)
			     : "l"(da), "l"(db), "r"(scale_d));
	} else if constexpr (N == 96) {
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
			     "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 {"
			     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
			     "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "
			     "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
			     "}, %48, %49, p, 1, 1, 0, 0;\n}\n"
			     : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40)
			     : "l"(da), "l"(db), "r"(scale_d));
	} else if constexpr (N == 128) {
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
			     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
			     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
			     "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "
			     "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "
			     "%56, %57, %58, %59, %60, %61, %62, %63"
			     "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
			     : WG_D8(0), WG_D8(8), WG_D8(16), WG_D8(24), WG_D8(32), WG_D8(40), WG_D8(48), WG_D8(56)
			     : "l"(da), "l"(db), "r"(scale_d));
	}
}

#endif
