/*
 * bench/cuda-gdn.c: the delta rule's forms on the GPU at the model's
 * shape (16 key and 48 value heads of 128), model free, on random device
 * data (GPU machine only; `make` builds it where nvcc is): the recurrent
 * scan (hbk_gdn_scan_seqs: the pipelined kernel) against the chunked
 * parallel form (hbk_gdn_chunked), whole and by its three kernels (the
 * spans' preparation, the scan over spans, the outputs:
 * hbk_gdn_chunked_parts), one sequence of T tokens and then 4 of T / 4.
 * Each timed with events after a warm-up, 5 runs interleaved A B B A ...,
 * min and median ms.  Prints; asserts nothing (tests/unit/test_cuda_parity
 * checks the values); the digests of the chunked form's bits compare two
 * builds (equal where their arithmetic is the same).
 *
 *   cuda-gdn [T ...]     (default: 4096 16384)
 */
#include "hb_base.h"
#include "hb_cuda_kern.h"

#include <cuda_runtime_api.h>
#include <math.h>

enum { NK = 16, NV = 48, DK = 128, DV = 128, RUNS = 5, FORMS = 5 };

static uint64_t rng = 0x243f6a8885a308d3u;

static float urand(void)
{
	rng = rng * 6364136223846793005u + 1442695040888963407u;
	return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static void *dev(size_t bytes, const void *host)
{
	void *d = NULL;

	if (cudaMalloc(&d, bytes) != cudaSuccess) {
		fprintf(stderr, "cuda-gdn: cudaMalloc of %zu bytes failed\n", bytes);
		exit(1);
	}
	if (host)
		cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);
	return d;
}

static int cmp_f(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

struct bufs {
	float *S, *qkv, *beta, *g, *dec, *o, *scr;
	size_t ld;
};

/* form 0 recurrent, 1 chunked, 2 its preparation alone, 3 its scan
 * alone, 4 its outputs alone */
static float run(int form, const struct bufs *b, const struct hbk_seqs *q)
{
	cudaEvent_t e0, e1;
	float ms = 0;
	int rc;

	cudaEventCreate(&e0), cudaEventCreate(&e1);
	hbk_gdn_chunked_parts = form >= 2 ? 1 << (form - 2) : 7;
	cudaEventRecord(e0, 0);
	rc = form ? hbk_gdn_chunked(b->S, b->qkv, b->ld, b->beta, b->g, q, NK, NV, DK, DV, 0.088f, b->o, NV * DV, b->scr)
		  : hbk_gdn_scan_seqs(b->S, b->qkv, b->ld, b->beta, b->dec, q, NK, NV, DK, DV, 0.088f, b->o, NV * DV);
	cudaEventRecord(e1, 0);
	cudaEventSynchronize(e1);
	cudaEventElapsedTime(&ms, e0, e1);
	cudaEventDestroy(e0), cudaEventDestroy(e1);
	hbk_gdn_chunked_parts = 7;
	if (rc || cudaGetLastError() != cudaSuccess) {
		fprintf(stderr, "cuda-gdn: form %d failed (%d)\n", form, rc);
		exit(1);
	}
	return ms;
}

static uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3u;
	return h;
}

/* the chunked form's outputs and final states from zero states, as
 * digests of their bits: equal across two builds when the arithmetic is */
static void digest(const struct bufs *b, const struct hbk_seqs *q, size_t T, size_t ns)
{
	float *o = malloc(T * NV * DV * sizeof(float)), *S = malloc(q->n * ns * sizeof(float));

	cudaMemset(b->S, 0, q->n * ns * 4);
	run(1, b, q);
	cudaMemcpy(o, b->o, T * NV * DV * 4, cudaMemcpyDeviceToHost);
	cudaMemcpy(S, b->S, q->n * ns * 4, cudaMemcpyDeviceToHost);
	printf("T=%zu seqs=%u chunked: digest of the outputs %016llx, of the final states %016llx\n", T, q->n,
	       (unsigned long long)fnv1a(o, T * NV * DV * 4, 0xcbf29ce484222325u),
	       (unsigned long long)fnv1a(S, q->n * ns * 4, 0xcbf29ce484222325u));
	free(o), free(S);
}

static void bench(size_t T, uint32_t seqs)
{
	static const char *const name[] = { "recurrent (pipelined scan)", "chunked, whole", "chunked: preparation",
					    "chunked: scan over spans", "chunked: outputs" };
	struct hbk_seqs q;
	struct bufs b;
	size_t ns = (size_t)NV * DK * DV;
	float t[FORMS][RUNS];

	q.n = seqs, q.s_stride = ns;
	for (uint32_t j = 0; j < seqs; j++)
		q.off[j] = (uint32_t)(j * (T / seqs)), q.len[j] = (uint32_t)(T / seqs);
	b.ld = 2 * NK * DK + NV * DV;
	float *h = malloc(T * b.ld * sizeof(float)), *hb = malloc(T * NV * sizeof(float));
	float *hg = malloc(T * NV * sizeof(float)), *hd = malloc(T * NV * sizeof(float));
	for (size_t i = 0; i < T * b.ld; i++)
		h[i] = urand() * 0.09f; /* keys and queries near unit norm */
	for (size_t i = 0; i < T * NV; i++)
		hb[i] = 0.5f + 0.5f * urand(), hg[i] = -0.25f * (1 + urand()), hd[i] = expf(hg[i]);
	b.qkv = dev(T * b.ld * 4, h), b.beta = dev(T * NV * 4, hb), b.g = dev(T * NV * 4, hg), b.dec = dev(T * NV * 4, hd);
	b.S = dev(seqs * ns * 4, NULL), b.o = dev(T * NV * DV * 4, NULL);
	b.scr = dev(hbk_gdn_chunked_scratch(&q, NV, DK, DV) * 4, NULL);
	digest(&b, &q, T, ns);
	for (int f = 0; f < FORMS; f++)
		run(f, &b, &q); /* warm-up (and the scan's spans prepared) */
	for (int r = 0; r < RUNS; r++)
		for (int k = 0; k < FORMS; k++) {
			int f = r % 2 ? FORMS - 1 - k : k; /* A B C ..., ... C B A, ... */
			t[f][r] = run(f, &b, &q);
		}
	for (int f = 0; f < FORMS; f++) {
		qsort(t[f], RUNS, sizeof(float), cmp_f);
		printf("T=%zu seqs=%u %-28s min %8.3f ms, median %8.3f ms%s\n", T, seqs, name[f], t[f][0], t[f][RUNS / 2],
		       f == 1 ? "" : "");
	}
	printf("T=%zu seqs=%u chunked / recurrent (medians): %.3f\n", T, seqs, t[1][RUNS / 2] / t[0][RUNS / 2]);
	cudaFree(b.qkv), cudaFree(b.beta), cudaFree(b.g), cudaFree(b.dec), cudaFree(b.S), cudaFree(b.o), cudaFree(b.scr);
	free(h), free(hb), free(hg), free(hd);
}

int main(int argc, char **argv)
{
	size_t Ts[16] = { 4096, 16384 }, nT = 2;

	if (argc > 1)
		for (nT = 0; nT < 16 && (int)nT + 1 < argc; nT++)
			Ts[nT] = strtoul(argv[nT + 1], NULL, 10);
	for (size_t i = 0; i < nT; i++)
		if (Ts[i] >= 64 && Ts[i] % 4 == 0)
			bench(Ts[i], 1), bench(Ts[i], 4);
	return 0;
}
