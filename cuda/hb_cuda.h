/*
 * hb_cuda.h: the CUDA backend of libkern's kernel seam (backend/hb_backend.h),
 * for the fronts that offer `--backend cuda` (hb-run, hb-replay) and the
 * tests.  Built only where nvcc is (the Makefile defines HB_WITH_CUDA for
 * the files that may call it); a binary with no business with the GPU never
 * links it.
 *
 * What runs where, today: a whole chunk runs on the device graph
 * (hb_cuda_graph.c: activations stay on the device, the session's state
 * crosses the bus once each way a chunk) wherever the session hands it one
 * (graph/hb_dev_chunk.h says when); otherwise every seam operation runs on
 * the device with the graph and the session's state on the host, so
 * activations and recurrent state cross the bus on every call, but once a
 * chunk for the chunk forms (hb_cuda_chunk.c: the delta rule's scan, QSA's batched
 * selection and attention with the chunk's K/V rows kept on the device
 * across its query blocks, the routed experts grouped by expert with their
 * weighted sum), not per token, query head or expert.  A range declared
 * resident (the model's read-only mapping) is uploaded whole when declared,
 * where the device has room, else each weight inside it on its first use,
 * and kept; any other weight (a streamed expert in a buffer that is
 * reused) is uploaded on every call.
 *
 * Failure is sticky and closed: the first device error (an out-of-memory, a
 * failed launch or copy) is kept, every later operation writes NaN into its
 * outputs (so the chunk in flight and every later one fail their finite
 * check with the public state unchanged), and hb_cuda_error reports it.
 * Silent: nothing here prints.
 */
#ifndef HB_CUDA_H
#define HB_CUDA_H

#include "hb_base.h"
#include "hb_err.h"

/*
 * Open device 0 and install the backend (hb_backend_set_device).  Refused,
 * with the CPU reference left in place: no CUDA device or driver (field
 * "cuda.device"), a device below compute capability 9.0 ("cuda.capability",
 * naming the device and its capability).  Call once, before any session.
 */
int hb_cuda_start(struct hb_error *err);
/* Uninstall (back to the CPU reference) and free every device buffer. */
void hb_cuda_stop(void);
/* Weights inside [base, base + len) never change: upload them (the whole
 * range at once where it fits) and keep them. */
void hb_cuda_resident(const void *base, size_t len);
/* For benchmarks: declare [base, base + len) resident without reading it
 * (it may be an unbacked reservation), its device copy filled with random
 * small bf16 words, every one valid as bf16 weights and as affine4 records
 * (hb_cuda_gk.h).  HB_OK, or the failure (the range is then not resident). */
int hb_cuda_resident_random(const void *base, size_t len, uint64_t seed, struct hb_error *err);
/* HB_OK, or the first device error since hb_cuda_start, copied into err. */
int hb_cuda_error(struct hb_error *err);

/*
 * HB_CUDA_PROFILE=1 (read as each device-graph pass starts): the pass
 * waits for the device after each stage and adds the stage's wall time to
 * stage_s[] (so it runs slower: for finding where a pass's time goes, not
 * for its throughput).  hb_cuda_stage_name(i) names stage i.
 */
#define HB_CUDA_STAGES 15
#define HB_CUDA_PRODUCTS 32
const char *hb_cuda_stage_name(int i);

struct hb_cuda_stats {
	uint64_t weight_bytes;   /* resident weights uploaded */
	uint64_t weights;        /* resident weight matrices */
	uint64_t calls;          /* seam operations run */
	uint64_t bytes_in, bytes_out; /* activations and state, host <-> device */
	uint64_t chunks;         /* whole chunks run by the device graph */
	uint64_t warm_chunks;    /* of them, those whose starting state the device already held */
	double stage_s[HB_CUDA_STAGES]; /* HB_CUDA_PROFILE=1: seconds per device-graph stage */
	struct hb_cuda_product_time {   /* HB_CUDA_PROFILE=1: the device graph's products by shape */
		uint64_t rows, cols, calls; /* calls 0: unused */
		int kind;               /* 0 float32 kernel, 1 tensor cores, 2 grouped float32, 3 grouped tensor cores, 4 skinny */
		double s;
	} products[HB_CUDA_PRODUCTS];
};
void hb_cuda_stats(struct hb_cuda_stats *out);

/* Test seam: the n-th device operation from now (1 = the next) fails as a
 * device error would; 0 disarms. */
void hb_cuda_test_fail_at(uint64_t n);

#endif
