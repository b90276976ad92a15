/*
 * hb_cuda_int.h: the CUDA backend's host internals shared by hb_cuda.c (the
 * device, the resident weights, the single-call operations) and
 * hb_cuda_chunk.c (the chunk forms).  Internal to cuda/.
 *
 * Every function here runs with the backend's mutex held (hbc_lock).  The
 * first failure is kept (hbc_fail); after it every hbc_begin is false, so
 * an operation writes NaN (or its stated failure value) and nothing else.
 */
#ifndef HB_CUDA_INT_H
#define HB_CUDA_INT_H

#include "hb_base.h"
#include "backend/hb_backend.h"

#include <cuda_runtime_api.h>

/* device buffers, grown on demand and kept (hbc_buf) */
enum { B_X, B_Y, B_G, B_U, B_S, B_Q, B_K, B_V, B_BETA, B_DECAY, B_O, B_POOL, B_SC, B_FL, B_ROWS, B_CNT,
       B_W0, B_W1, B_W2, B_XG, B_OUT, B_PACK, B_AT, B_OFF, B_WP, B_RW, B_GRP, B_VIS, B_KC, B_VC,
       /* the device graph's (hb_cuda_graph.c) */
       G_TOK, G_X, G_XN, G_MIX, G_INJ, G_Y, G_A, G_B, G_C, G_D, G_S, G_CF, G_CT, G_PF, G_PT, G_QK, G_QV, G_QR,
       G_QP, G_QN, G_QO, G_SC, G_FL, G_ROWS, G_CNT, G_GRP, G_VIS, G_EMB, G_IDS, G_RW, G_PACK, G_XG,
       G_G, G_U, G_OUT, G_LOG, G_FLAG, G_GDNC, G_XS, NBUF };

void hbc_lock(void);
/* changes at every hb_cuda_start and at every failure: a device copy
 * kept across calls is valid only within one generation */
uint64_t hbc_generation(void);
/* the bytes device buffer i holds now (0: none) */
size_t hbc_bufcap(int i);
void hbc_unlock(void);
/* one operation begins: counted; false once the device has failed */
bool hbc_begin(void);
/* a whole chunk ran on the device graph (hb_cuda_stats' chunks); one
 * found its starting state already on the device (warm_chunks) */
void hbc_count_chunk(void);
void hbc_count_warm(void);
/* HB_CUDA_PROFILE=1: hbc_stage_begin waits for the device and starts the
 * clock; each hbc_stage(i) waits again and adds the time since the last
 * mark to stage i (both do nothing when profiling is off) */
void hbc_stage_begin(void);
void hbc_stage(int i);
/* HB_CUDA_PROFILE=1: one product's time (a wait before and after it) under its shape */
void hbc_product_begin(void);
void hbc_product_end(uint64_t rows, uint64_t cols, int kind);
void hbc_fail(int code, const char *field, const char *what, const char *why);
/* true when e is cudaSuccess; else the failure kept */
bool hbc_ok(cudaError_t e, const char *what);
void hbc_nan_fill(float *p, size_t n);
/* device buffer i of at least `bytes` (NULL and failed when it cannot be had) */
void *hbc_buf(int i, size_t bytes);
/* synchronous copies, counted in the statistics; dev NULL fails */
bool hbc_up(void *dev, const void *host, size_t bytes);
/* bytes of zeros at dev, made on the device (nothing crosses the bus) */
bool hbc_zero(void *dev, size_t bytes);
bool hbc_down(void *host, const void *dev, size_t bytes);
/* a copy down queued after the work before it (host: pinned memory, as
 * hbc_iscratch's), the host free to launch more; hbc_down_wait waits for
 * the last one queued */
bool hbc_down_async(void *host, const void *dev, size_t bytes);
bool hbc_down_wait(void);
/* the same for `rows` rows of `width` bytes at host and device pitches */
bool hbc_up2d(void *dev, size_t dpitch, const void *host, size_t hpitch, size_t width, size_t rows);
bool hbc_down2d(void *host, size_t hpitch, const void *dev, size_t dpitch, size_t width, size_t rows);
/* [p, p + bytes) lies inside a range declared resident */
bool hbc_resident(const void *p, size_t bytes);
/* the device copy of w (hb_cuda.c says which are kept) */
const void *hbc_weight(const struct hb_wmat *w, int spare);
/* host scratch: n int32 (hbc_iscratch), n pointers (hbc_pscratch); NULL
 * and failed when out of memory */
int32_t *hbc_iscratch(size_t n);
const void **hbc_pscratch(size_t n);

/* the rows a QSA query selects: min(groups, keep) groups of ratio, and
 * the incomplete tail (hb_backend.h's hb_qsa_select) */
size_t hbc_sel_count(uint64_t groups, uint64_t keep, uint64_t ratio, uint64_t visible);
/* the same storage type and shape (experts run as one grouped launch) */
bool hbc_same_shape(const struct hb_wmat *a, const struct hb_wmat *b);

/* the chunk forms (hb_cuda_chunk.c), as hb_device_ops takes them */
void hb_cuda_gdn_scan(float *S, const float *qkv, size_t ld, const float *beta, const float *decay, size_t T,
		      size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o, size_t ldo);
void hb_cuda_select_batch(const struct hb_qsa_batch *b);
void hb_cuda_attend_batch(const struct hb_qsa_attn *a);
bool hb_cuda_moe(const struct hb_moe_batch *b);
/* the device graph (hb_cuda_graph.c): n whole chunks as one pass; its
 * per-model tables freed (hb_cuda_gmodel.c, at hb_cuda_stop) */
bool hb_cuda_chunk(struct hb_dev_chunk *c, size_t n);
void hbc_graph_free(void);

#endif
