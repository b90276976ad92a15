/*
 * test_cuda_emu: test_cuda_parity's cases with the device emulated on the
 * host (cuda_emu.c), so that the CUDA backend's host side, the device
 * graph's orchestration (hb_cuda_graph.c) and their fail-closed paths run
 * in make test on machines without a GPU.  The kernels' device code is not
 * exercised here: test_cuda_parity on a GPU machine runs the same cases
 * against it.
 */
#define HB_CUDA_EMULATED 1 /* cases about the device's own kernels skip */
#include "test_cuda_parity.c"
