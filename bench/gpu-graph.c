/*
 * bench/gpu-graph.c: the device graph (cuda/hb_cuda_graph.c) at the real
 * layer geometry, on a synthetic model that lives only on the GPU (GPU
 * machine only for the default mode; `make` builds it where nvcc is).
 *
 * No artifact: the model is built in memory from a config.json text parsed
 * as a real checkpoint's (so every derived field is the parser's), with
 * the geometry of bench/gpu-upstream.py: hidden 2560, 32 heads x 256, 2 KV
 * heads, GDN 16 key / 48 value heads of 128 (kernel 4), indexer 16 x 128
 * with budget 2048 and ratio 4, 512 experts of width 640 (affine4-g64, or
 * bf16), top-10, shared expert 640, hc 4, low rank 320, vocab 151936, no
 * PLE, LAYERS layers `L L L S`.  Every dense matrix and the expert store
 * get host addresses inside one unbacked reservation (PROT_NONE) that the
 * host never reads: the device copy is filled with random bf16 words
 * (hb_cuda_resident_random), so building and "uploading" 14 GB takes
 * seconds instead of the checkpoint + conversion + load of the artifact
 * path.  Small vectors (norms, taps, gates, rotary) are real host floats.
 * Should the device decline a chunk, the host graph would read the
 * reservation: a SIGSEGV handler reports that as FAILED instead of a crash.
 *
 *   gpu-graph [--layers L] [--tokens 1024,4096,16384] [--seqs N] [--batch]
 *             [--chunk C] [--keep-state] [--experts affine4|bf16] [--sparse-every 4] [--seed S]
 *       one session per sequence of T tokens (capacity T), chunks of C
 *       (default T) tokens, observer taking routes and route weights only
 *       (so the whole chunk runs on the device graph), one warm-up chunk on
 *       a session of its own, then every sequence timed chunk by chunk, its
 *       last chunk final (hb_session_final: its state is not copied back, as
 *       hb-replay label runs a transcript's last chunk; --keep-state copies
 *       it):
 *         ours T=1024 layers=8 tokens/s 1234.5 (chunks 2, median ms/chunk ...)
 *   gpu-graph --cpu-check   a tiny geometry (hidden 64, LLLS, 8 experts
 *       top-2, vocab 300) in real host memory filled with the device fill's
 *       words, run on the CPU reference; prints the logits' checksum (no GPU)
 *   gpu-graph --gpu-check   the same tiny model (its last chunk 160 tokens: the
 *       tensor-core products and the chunked delta rule) on the CPU and on the device
 *       graph, its weights uploaded (hb_cuda_resident) and then the device's
 *       own random fill (hb_cuda_resident_random, which the host fill
 *       replicates): logits within 1e-3, routes identical, every chunk on
 *       the device graph
 * Exit status 0, or 1 on any failure (FAILED printed).
 */
#include "hb_base.h"
#include "hb_err.h"
#include "hb_half.h"
#include "backend/hb_backend.h"
#include "expert/hb_expert_store.h"
#include "graph/hb_model.h"
#include "graph/hb_session.h"
#include "model/hb_qwen_config.h"
#include "hb_cuda.h"

#include <cJSON.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define ALIGN 4096u /* every matrix and the store on a page: any kernel's alignment holds */
#define MAX_T 64    /* at most this many values after --tokens */

/* the shape of a synthetic model (the config's fields that vary) */
struct geo {
	unsigned H, nh, nkv, hd, nk, nv, dk, dv, K, ih, ihd, budget, ratio, E, k, I, Is, hc, R, V, L, every;
	unsigned mrope[3];
};

/* bench/gpu-upstream.py's (the issue's) geometry */
static const struct geo REAL = { 2560, 32, 2, 256, 16, 48, 128, 128, 4, 16, 128, 2048, 4, 512, 10, 640, 640,
				 4, 320, 151936, 8, 4, { 11, 11, 10 } };
/* tests/fixtures/upstream/realshape's proportions, 8 experts top-2, vocab
 * 300; widths multiples of 64 so affine4-g64 tiles every expert matrix */
static const struct geo TINY = { 64, 4, 2, 32, 2, 4, 16, 16, 4, 8, 16, 16, 4, 8, 2, 64, 16, 4, 8, 300, 4, 4,
				 { 2, 1, 1 } };

static void die(const char *what)
{
	fprintf(stderr, "gpu-graph: %s\n", what);
	exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p)
		die("out of memory");
	return p;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* uniform in [lo, hi) */
static float unif(uint64_t *s, float lo, float hi)
{
	return lo + (hi - lo) * (float)(splitmix(s) >> 40) / 16777216.0f;
}

/*
 * Word i of hbg_fill_random (cuda/hb_cuda_gk.cu, fill_kernel) with seed:
 * a bf16 of magnitude [2^-7, 2^-4), random sign and mantissa.  The host
 * copy of the tiny model is made of the same words, so the device's own
 * fill of the same range gives the same model (--gpu-check compares both).
 */
static uint16_t fill_word(uint64_t seed, uint64_t i)
{
	uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (uint16_t)((z & 0x8000u) | (uint32_t)(120 + (z >> 16) % 3) << 7 | ((z >> 8) & 0x7fu));
}

/* ------------------------------------------------------------ the model */

/* a dense view whose data is an offset into the reservation until it exists */
struct place {
	struct hb_wmat *w;
	size_t off;
};

struct builder {
	struct hb_model *m;
	size_t off;             /* bytes laid out so far */
	struct place *pl;
	size_t n, cap;
	uint64_t rng;
};

static size_t align_up(size_t x)
{
	return (x + ALIGN - 1) / ALIGN * ALIGN;
}

static void dmat(struct builder *b, struct hb_wmat *w, uint64_t rows, uint64_t cols)
{
	if (b->n == b->cap) {
		b->cap = b->cap ? 2 * b->cap : 256;
		b->pl = realloc(b->pl, b->cap * sizeof(*b->pl));
		if (!b->pl)
			die("out of memory");
	}
	*w = (struct hb_wmat){ NULL, HB_W_BF16, rows, cols, cols * 2 };
	b->pl[b->n++] = (struct place){ w, b->off };
	b->off = align_up(b->off + (size_t)(rows * cols * 2));
}

enum vkind { V_ZC, V_PLAIN, V_TAPS, V_ALOG, V_DT };

/* n small host floats: zero-centred norm weights (applied as 1 + w) and
 * plain ones (applied as w) near their identity, taps, A_log = log U[1,16],
 * dt_bias U[-1,1] */
static float *fvec(struct builder *b, size_t n, enum vkind k)
{
	float *v = xcalloc(n, sizeof(float));

	for (size_t i = 0; i < n; i++)
		v[i] = k == V_ZC ? unif(&b->rng, -0.1f, 0.1f)
		     : k == V_PLAIN ? unif(&b->rng, 0.9f, 1.1f)
		     : k == V_TAPS ? unif(&b->rng, -0.3f, 0.3f)
		     : k == V_ALOG ? logf(unif(&b->rng, 1.0f, 16.0f))
		     : unif(&b->rng, -1.0f, 1.0f);
	return v;
}

static void hc(struct builder *b, struct hb_hc_weights *h, bool combine)
{
	const struct hb_qwen_config *c = &b->m->cfg;
	uint64_t hcH = c->hc_count * c->hidden_size;

	h->norm = fvec(b, (size_t)hcH, V_ZC);
	dmat(b, &h->down, c->hc_lowrank, hcH);
	dmat(b, &h->up, hcH, c->hc_lowrank);
	if (combine)
		dmat(b, &h->inject, c->hc_count, hcH);
}

/* the text of a config.json of geometry g, spelled as adm_sparse.c's copy
 * of the real checkpoint's (what g does not set is the real value) */
static char *config_text(const struct geo *g)
{
	size_t cap = 4096 + (size_t)g->L * 32, n = 0;
	char *types = xcalloc(cap, 1), *buf = xcalloc(cap + 4096, 1);

	for (unsigned i = 0; i < g->L; i++)
		n += (size_t)snprintf(types + n, cap - n, "%s\"%s\"", i ? "," : "",
				      (i + 1) % g->every ? "linear_attention" : "qwen_sparse_attention");
	snprintf(buf, cap + 4096,
		 "{\"architectures\":[\"Qwen4ExpForConditionalGeneration\"],\"model_type\":\"qwen4_exp\","
		 "\"tie_word_embeddings\":false,\"transformers_version\":\"5.17.0\","
		 "\"text_config\":{\"model_type\":\"qwen4_exp_text\",\"vocab_size\":%u,\"hidden_size\":%u,"
		 "\"num_hidden_layers\":%u,\"num_attention_heads\":%u,\"num_key_value_heads\":%u,\"head_dim\":%u,"
		 "\"max_position_embeddings\":262144,\"rms_norm_eps\":1e-06,\"attention_bias\":false,"
		 "\"hidden_act\":\"silu\",\"output_gate_type\":\"sigmoid\",\"tie_word_embeddings\":false,"
		 "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000000.0,"
		 "\"partial_rotary_factor\":0.25,\"mrope_section\":[%u,%u,%u],\"mrope_interleaved\":true},"
		 "\"layer_types\":[%s],\"linear_conv_kernel_dim\":%u,\"linear_key_head_dim\":%u,"
		 "\"linear_value_head_dim\":%u,\"linear_num_key_heads\":%u,\"linear_num_value_heads\":%u,"
		 "\"num_experts\":%u,\"num_experts_per_tok\":%u,\"moe_intermediate_size\":%u,"
		 "\"shared_expert_intermediate_size\":%u,\"norm_topk_prob\":true,\"hc_count\":%u,\"hc_lowrank\":%u,"
		 "\"ple_layer_ids\":[],\"indexer_n_heads\":%u,\"indexer_kv_heads\":1,\"indexer_head_dim\":%u,"
		 "\"indexer_budget\":%u,\"indexer_compress_ratio\":%u,"
		 "\"eos_token_id\":%u,\"pad_token_id\":null,\"bos_token_id\":null}}",
		 g->V, g->H, g->L, g->nh, g->nkv, g->hd, g->mrope[0], g->mrope[1], g->mrope[2], types, g->K, g->dk,
		 g->dv, g->nk, g->nv, g->E, g->k, g->I, g->Is, g->hc, g->R, g->ih, g->ihd, g->budget, g->ratio,
		 g->V - 1);
	free(types);
	return buf;
}

/*
 * The model of geometry g.  backed: the reservation is real memory holding
 * fill_word(seed, i) at word i (--cpu-check, --gpu-check); else PROT_NONE
 * and unbacked, for the device's fill only.
 */
static struct hb_model *build(const struct geo *g, enum hb_em_codec_id codec, bool backed, uint64_t seed)
{
	struct hb_model *m = xcalloc(1, sizeof(*m));
	struct builder b = { m, 0, NULL, 0, 0, seed ^ 0x5eed };
	struct hb_error err;
	char *text = config_text(g);
	cJSON *root = cJSON_Parse(text);
	size_t em_off;
	uint8_t *base;

	hb_error_clear(&err);
	if (!root || hb_qwen_config_parse(root, &m->cfg, &err)) {
		fprintf(stderr, "gpu-graph: the synthetic config is refused: %s: %s\n", err.field, err.msg);
		exit(1);
	}
	cJSON_Delete(root);
	m->fd = -1;
	snprintf(m->profile, sizeof(m->profile), "synthetic");
	snprintf(m->status, sizeof(m->status), "bench/gpu-graph");
	/* an identity of its own (hb_session_digest and save read it) */
	hb_sha256_buf(text, strlen(text), m->artifact_sha);
	free(text);

	const struct hb_qwen_config *c = &m->cfg;
	uint64_t H = c->hidden_size;
	uint64_t kd = c->linear_num_key_heads * c->linear_key_head_dim;
	uint64_t vd = c->linear_num_value_heads * c->linear_value_head_dim, nv = c->linear_num_value_heads;
	uint64_t q = c->num_heads * c->head_dim, kv = c->num_kv_heads * c->head_dim;

	/* shapes as hb_inventory expects them ([rows = out][cols = in]) */
	dmat(&b, &m->embed, c->vocab_size, H);
	dmat(&b, &m->lm_head, c->vocab_size, H); /* untied, as the real checkpoint */
	hc(&b, &m->mixer, false);
	m->layers = xcalloc((size_t)c->num_layers, sizeof(*m->layers));
	for (size_t l = 0; l < c->num_layers; l++) {
		struct hb_layer_weights *L = &m->layers[l];
		L->kind = c->layer_kind[l];
		hc(&b, &L->attn_hc, true);
		hc(&b, &L->mlp_hc, true);
		if (L->kind == HB_LAYER_LINEAR) {
			struct hb_gdn_weights *w = &L->gdn;
			dmat(&b, &w->qkv, 2 * kd + vd, H);
			dmat(&b, &w->z, vd, H);
			dmat(&b, &w->b, nv, H);
			dmat(&b, &w->a, nv, H);
			dmat(&b, &w->out, H, vd);
			w->conv = fvec(&b, (size_t)((2 * kd + vd) * c->linear_conv_kernel), V_TAPS);
			w->dt_bias = fvec(&b, (size_t)nv, V_DT);
			w->A_log = fvec(&b, (size_t)nv, V_ALOG);
			w->norm = fvec(&b, (size_t)c->linear_value_head_dim, V_PLAIN); /* hb_rmsnorm_w */
		} else {
			struct hb_qsa_weights *w = &L->qsa;
			dmat(&b, &w->q, 2 * q, H); /* queries and their output gate */
			dmat(&b, &w->k, kv, H);
			dmat(&b, &w->v, kv, H);
			dmat(&b, &w->o, H, q);
			dmat(&b, &w->index_qk, (c->indexer_n_heads + c->indexer_kv_heads) * c->indexer_head_dim, H);
			w->q_norm = fvec(&b, (size_t)c->head_dim, V_ZC);
			w->k_norm = fvec(&b, (size_t)c->head_dim, V_ZC);
			w->index_q_norm = fvec(&b, (size_t)c->indexer_head_dim, V_ZC);
			w->index_k_norm = fvec(&b, (size_t)c->indexer_head_dim, V_ZC);
		}
		dmat(&b, &L->moe.router, c->num_experts, H);
		dmat(&b, &L->moe.shared_gate, c->shared_expert_intermediate_size, H);
		dmat(&b, &L->moe.shared_up, c->shared_expert_intermediate_size, H);
		dmat(&b, &L->moe.shared_down, H, c->shared_expert_intermediate_size);
		dmat(&b, &L->moe.shared_gate_w, 1, H);
	}
	/* the routed experts: an ExpertMajor layout planned for this geometry,
	 * its store after the dense matrices (header and descriptors are never
	 * read at run time, so their bytes stay whatever the fill made them) */
	{
		struct hb_em_geometry eg = { (uint32_t)c->num_layers, (uint32_t)c->num_experts,
					     (uint32_t)c->num_experts_per_tok, H, c->moe_intermediate_size };
		if (hb_em_layout_plan(&m->em, &eg, codec, &err)) {
			fprintf(stderr, "gpu-graph: expert store: %s: %s\n", err.field, err.msg);
			exit(1);
		}
	}
	m->expert_type = m->em.codec->id == HB_EM_CODEC_AFFINE4_G64 ? HB_W_AFFINE4_G64 : HB_W_BF16;
	em_off = b.off;
	m->map_len = align_up(em_off + (size_t)m->em.store_size);
	base = mmap(NULL, m->map_len, backed ? PROT_READ | PROT_WRITE : PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		die("cannot reserve the weights' address range");
	if (backed) {
		uint16_t *w = (uint16_t *)base;
		for (size_t i = 0; i < m->map_len / 2; i++)
			w[i] = fill_word(seed, i);
		mprotect(base, m->map_len, PROT_READ); /* weights never change */
	}
	m->map = base;
	m->em_base = base + em_off;
	for (size_t i = 0; i < b.n; i++)
		b.pl[i].w->data = base + b.pl[i].off;
	free(b.pl);
	/* rotary as hb_model.c's rope_init: 1 / theta ** (2i / dim), float32 */
	m->inv_freq = xcalloc((size_t)c->rotary_dim / 2, sizeof(float));
	for (uint64_t i = 0; i < c->rotary_dim / 2; i++)
		m->inv_freq[i] = 1.0f / powf((float)c->rope_theta, (float)(2 * i) / (float)c->rotary_dim);
	m->vocab_physical = m->vocab_semantic = c->vocab_size;
	return m;
}

/* hb_model_free would close a descriptor and stores this model lacks */
static void model_free(struct hb_model *m)
{
	for (size_t i = 0; m->layers && i < m->cfg.num_layers; i++) {
		struct hb_layer_weights *L = &m->layers[i];
		free(L->attn_hc.norm), free(L->mlp_hc.norm);
		free(L->gdn.conv), free(L->gdn.dt_bias), free(L->gdn.A_log), free(L->gdn.norm);
		free(L->qsa.q_norm), free(L->qsa.k_norm), free(L->qsa.index_q_norm), free(L->qsa.index_k_norm);
	}
	free(m->layers);
	free(m->mixer.norm);
	free(m->inv_freq);
	hb_em_layout_release(&m->em);
	munmap((void *)m->map, m->map_len);
	free(m);
}

/* the host graph reading the reservation means the device declined a chunk */
static const uint8_t *guard_base;
static size_t guard_len;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	static const char msg[] = "gpu-graph: FAILED: the device graph declined a chunk and the host graph "
				  "read the unbacked weights\n";
	(void)sig, (void)uc;
	if ((const uint8_t *)si->si_addr >= guard_base && (const uint8_t *)si->si_addr < guard_base + guard_len) {
		ssize_t r = write(2, msg, sizeof(msg) - 1);
		(void)r;
		_exit(1);
	}
	/* another fault: SA_RESETHAND restored the default, which it now meets again */
}

static void guard(const struct hb_model *m)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	guard_base = m->map, guard_len = m->map_len;
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
	sigaction(SIGSEGV, &sa, NULL);
}

/* the layer kinds, "LLLS..." (L: Gated DeltaNet, S: QSA) */
static const char *pattern(const struct hb_model *m)
{
	static char p[HB_EM_MAX_LAYERS + 1];
	size_t n = 0;

	for (; n < m->cfg.num_layers && n < HB_EM_MAX_LAYERS; n++)
		p[n] = m->cfg.layer_kind[n] == HB_LAYER_SPARSE ? 'S' : 'L';
	p[n] = '\0';
	return p;
}

/* ------------------------------------------------------------ observing */

struct obs {
	uint64_t routes, weights;  /* observations of each kind */
	uint64_t digest;           /* FNV-1a of every route and route weight observed, in order */
	uint64_t pos0, N, L, k;
	int32_t *ids;              /* [L][N][k], or NULL: only count */
};

static void observe(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct obs *o = ctx;

	if (kind == HB_OBS_ROUTES || kind == HB_OBS_ROUTE_WEIGHTS) {
		const unsigned char *b = data;
		for (size_t i = 0; i < n * 4; i++) /* ids and weights: 4 bytes each */
			o->digest = (o->digest ^ b[i]) * 0x100000001b3u;
	}
	if (kind == HB_OBS_ROUTES) {
		o->routes++;
		if (o->ids && layer >= 0 && pos - o->pos0 < o->N && n == o->k)
			memcpy(o->ids + ((uint64_t)layer * o->N + pos - o->pos0) * o->k, data, n * sizeof(int32_t));
	} else if (kind == HB_OBS_ROUTE_WEIGHTS) {
		o->weights++;
	}
}

static uint64_t device_chunks(void)
{
	struct hb_cuda_stats st;
	hb_cuda_stats(&st);
	return st.chunks;
}

static double gpu_used_gib(void)
{
	size_t fr = 0, tot = 0;
	if (cudaMemGetInfo(&fr, &tot) != cudaSuccess)
		return -1;
	return (double)(tot - fr) / (1u << 30);
}

/* ------------------------------------------------------------ the checks */

/* a prefill past the QSA budget, decode, a second prefill, then one long
 * enough for the tensor-core products (32 rows and more, the experts'
 * groups included) and the delta rule's chunked form (spans of 64) */
static const size_t CHECK_CHUNKS[] = { 20, 1, 1, 18, 160 };
#define CHECK_N 200

/* one sequence of the check's chunks; logits [N][V], ids [L][N][k] */
static bool check_run(const struct hb_model *m, const int32_t *toks, float *logits, int32_t *ids, bool device)
{
	struct hb_session *s = NULL;
	struct hb_error err;
	struct obs o = { 0, 0, 0xcbf29ce484222325u, 0, CHECK_N, m->cfg.num_layers, m->cfg.num_experts_per_tok, ids };
	size_t at = 0, V = (size_t)m->vocab_physical;

	hb_error_clear(&err);
	if (hb_session_create(m, NULL, CHECK_N, &s, &err)) {
		fprintf(stderr, "gpu-graph: session: %s\n", err.msg);
		return false;
	}
	if (device) /* kinds a device chunk gives: the graph runs the whole chunk */
		hb_session_observe_only(s, 1u << HB_OBS_ROUTES | 1u << HB_OBS_ROUTE_WEIGHTS | 1u << HB_OBS_LOGITS);
	for (size_t i = 0; i < HB_ARRAY_LEN(CHECK_CHUNKS); i++) {
		if (hb_session_forward(s, toks + at, CHECK_CHUNKS[i], logits + at * V, observe, &o, &err)) {
			fprintf(stderr, "gpu-graph: chunk %zu: %s: %s\n", i, err.field, err.msg);
			hb_session_free(s);
			return false;
		}
		at += CHECK_CHUNKS[i];
	}
	hb_session_free(s);
	if (o.routes != CHECK_N * m->cfg.num_layers || o.weights != o.routes) {
		fprintf(stderr, "gpu-graph: %" PRIu64 " route observations, expected %" PRIu64 "\n", o.routes,
			(uint64_t)CHECK_N * m->cfg.num_layers);
		return false;
	}
	return true;
}

static bool summary(const struct hb_model *m, const float *lg, const int32_t *ids, const char *what)
{
	size_t n = CHECK_N * (size_t)m->vocab_physical, bad = 0;
	size_t nid = (size_t)(m->cfg.num_layers * CHECK_N * m->cfg.num_experts_per_tok);
	double sum = 0, abs = 0;
	uint64_t rsum = 0;

	for (size_t i = 0; i < n; i++) {
		if (!isfinite(lg[i]))
			bad++;
		else
			sum += lg[i], abs += fabs(lg[i]);
	}
	for (size_t i = 0; i < nid; i++)
		rsum += (uint64_t)ids[i] * (i % 97 + 1);
	printf("%s: %d tokens in %zu chunks, logits sum %.9g, sum |x| %.9g, %zu of %zu finite%s; route checksum %" PRIu64
	       "\n", what, CHECK_N, HB_ARRAY_LEN(CHECK_CHUNKS), sum, abs, n - bad, n, bad ? " (FAILED)" : "", rsum);
	return !bad && abs > 0;
}

static int check(bool gpu, enum hb_em_codec_id codec, uint64_t seed)
{
	struct hb_model *m = build(&TINY, codec, true, seed);
	size_t V = (size_t)m->vocab_physical, nid = (size_t)(m->cfg.num_layers * CHECK_N * m->cfg.num_experts_per_tok);
	float *cpu = xcalloc(CHECK_N * V, sizeof(float)), *dev = xcalloc(CHECK_N * V, sizeof(float));
	int32_t *cid = xcalloc(nid, sizeof(int32_t)), *did = xcalloc(nid, sizeof(int32_t));
	int32_t toks[CHECK_N];
	uint64_t r = seed;
	bool good;

	printf("# tiny model: hidden %" PRIu64 ", %" PRIu64 " layers %s, %" PRIu64 " experts top-%" PRIu64
	       " (%s), vocab %" PRIu64 ", %zu bytes of weights\n", m->cfg.hidden_size, m->cfg.num_layers, pattern(m),
	       m->cfg.num_experts, m->cfg.num_experts_per_tok, m->em.codec->name, m->vocab_physical, m->map_len);
	for (size_t t = 0; t < CHECK_N; t++)
		toks[t] = (int32_t)(splitmix(&r) % V);
	good = check_run(m, toks, cpu, cid, false) && summary(m, cpu, cid, "cpu");
	for (int mode = 0; gpu && good && mode < 2; mode++) {
		struct hb_error err;
		uint64_t c0;
		double diff = 0;
		size_t rdiff = 0;

		hb_error_clear(&err);
		setenv("HB_CUDA_GRAPH", "1", 1); /* the device graph, not only the seam's operations */
		if (hb_cuda_start(&err)) {
			fprintf(stderr, "gpu-graph: no usable CUDA device: %s\n", err.msg);
			good = false;
			break;
		}
		/* mode 0 uploads the host's bytes; mode 1 has the device fill the
		 * range itself, which must be the same model (fill_word) */
		if (mode == 0)
			hb_cuda_resident(m->map, m->map_len);
		else if (hb_cuda_resident_random(m->map, m->map_len, seed, &err)) {
			fprintf(stderr, "gpu-graph: hb_cuda_resident_random: %s\n", err.msg);
			good = false;
		}
		c0 = device_chunks();
		memset(did, 0xff, nid * sizeof(int32_t));
		good = good && check_run(m, toks, dev, did, true) &&
		       summary(m, dev, did, mode ? "gpu (device fill)" : "gpu (uploaded)");
		for (size_t i = 0; good && i < CHECK_N * V; i++)
			diff = fmax(diff, fabs((double)dev[i] - cpu[i]));
		for (size_t row = 0; good && row < nid / m->cfg.num_experts_per_tok; row++)
			rdiff += memcmp(cid + row * m->cfg.num_experts_per_tok, did + row * m->cfg.num_experts_per_tok,
					(size_t)m->cfg.num_experts_per_tok * sizeof(int32_t)) != 0;
		if (good) {
			uint64_t ch = device_chunks() - c0;
			bool pass = diff <= 1e-3 && rdiff == 0 && ch == HB_ARRAY_LEN(CHECK_CHUNKS) && !hb_cuda_error(NULL);
			printf("gpu vs cpu (%s): largest |logit difference| %.3e (bound 1e-3), %zu of %zu route rows "
			       "differ, device chunks %" PRIu64 "/%zu: %s\n", mode ? "device fill" : "uploaded", diff, rdiff,
			       nid / m->cfg.num_experts_per_tok, ch, HB_ARRAY_LEN(CHECK_CHUNKS), pass ? "ok" : "FAILED");
			good = pass;
		}
		hb_cuda_stop();
	}
	printf("%s\n", good ? "check: ok" : "check: FAILED");
	free(cpu), free(dev), free(cid), free(did);
	model_free(m);
	return good ? 0 : 1;
}

/* ------------------------------------------------------------ throughput */

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* one chunk of n random ids */
static int chunk(struct hb_session *s, const struct hb_model *m, int32_t *toks, size_t n, uint64_t *rng,
		 struct obs *o, struct hb_error *err)
{
	for (size_t t = 0; t < n; t++)
		toks[t] = (int32_t)(splitmix(rng) % m->vocab_physical);
	return hb_session_forward(s, toks, n, NULL, observe, o, err);
}

/* chunk j of every sequence as one pass (hb_session_forward_batch) */
static int chunk_batch(struct hb_session **s, unsigned seqs, const struct hb_model *m, int32_t *toks, size_t n,
		       uint64_t *rng, struct obs *o, struct hb_error *err)
{
	struct hb_session *bs[64];
	const int32_t *bt[64];
	size_t bn[64];
	void *bc[64];

	for (unsigned q = 0; q < seqs; q++) {
		for (size_t t = 0; t < n; t++)
			toks[q * n + t] = (int32_t)(splitmix(rng) % m->vocab_physical);
		bs[q] = s[q], bt[q] = toks + q * n, bn[q] = n, bc[q] = o;
	}
	return hb_session_forward_batch(bs, seqs, bt, bn, NULL, observe, bc, err);
}

/* HB_CUDA_PROFILE=1: each stage's share of the timed chunks (since *from) */
static void profile_print(const struct hb_cuda_stats *from, size_t chunks)
{
	struct hb_cuda_stats st;
	double all = 0;

	if (!getenv("HB_CUDA_PROFILE") || strcmp(getenv("HB_CUDA_PROFILE"), "1"))
		return;
	hb_cuda_stats(&st);
	for (int i = 0; i < HB_CUDA_STAGES; i++)
		all += st.stage_s[i] - from->stage_s[i];
	printf("# profile (a synchronisation after each stage), ms a chunk, of %.2f ms:\n", all * 1e3 / (double)chunks);
	for (int i = 0; i < HB_CUDA_STAGES; i++) {
		double d = st.stage_s[i] - from->stage_s[i];
		printf("#   %-32s %9.2f  %5.1f%%\n", hb_cuda_stage_name(i), d * 1e3 / (double)chunks,
		       all > 0 ? 100 * d / all : 0);
	}
	static const char *const kind[] = { "float32", "tensor cores", "grouped float32", "grouped tensor cores", "skinny" };
	printf("# products by shape (rows x cols: calls a chunk, ms a chunk, kernel):\n");
	for (int i = 0; i < HB_CUDA_PRODUCTS; i++) {
		const struct hb_cuda_product_time *p = &st.products[i], *f = &from->products[i];
		if (p->calls > f->calls)
			printf("#   %6" PRIu64 " x %-6" PRIu64 " %6.1f %9.2f  %s\n", p->rows, p->cols,
			       (double)(p->calls - f->calls) / (double)chunks, (p->s - f->s) * 1e3 / (double)chunks,
			       kind[p->kind >= 0 && p->kind <= 4 ? p->kind : 0]);
	}
}

/* --keep-state: every chunk's state is copied back to the host, the last
 * chunk's too; by default a sequence's last chunk is final
 * (hb_session_final), as hb-replay label runs a transcript's */
static bool keep_state;

/* seqs sequences of T tokens in chunks of C (batch: each chunk of every
 * sequence as one pass): false on any failure */
static bool bench_T(const struct hb_model *m, size_t T, size_t C, unsigned seqs, bool batch, uint64_t seed)
{
	const uint32_t kinds = 1u << HB_OBS_ROUTES | 1u << HB_OBS_ROUTE_WEIGHTS;
	size_t per = (T + C - 1) / C, n = 0, L = (size_t)m->cfg.num_layers;
	struct hb_session **s = xcalloc(seqs + 1, sizeof(*s));
	double *ms = xcalloc(per * seqs, sizeof(double)), total = 0;
	int32_t *toks = xcalloc(C * seqs, sizeof(int32_t));
	struct obs o = { 0, 0, 0xcbf29ce484222325u, 0, 0, 0, 0, NULL };
	uint64_t rng = seed + T, c0 = device_chunks(), tokens = 0;
	struct hb_error err;
	bool good = true;

	hb_error_clear(&err);
	/* sessions first (their state's allocation is not the chunk's); the
	 * last one takes the warm-up chunk */
	for (unsigned i = 0; good && i <= seqs; i++) {
		good = !hb_session_create(m, NULL, T, &s[i], &err);
		if (good)
			hb_session_observe_only(s[i], kinds);
	}
	good = good && !chunk(s[seqs], m, toks, C, &rng, &o, &err);
	hb_session_free(s[seqs]);
	s[seqs] = NULL;
	struct hb_cuda_stats st0;
	hb_cuda_stats(&st0);
	for (unsigned q = 0; good && q < (batch ? 1u : seqs); q++)
		for (size_t done = 0; good && done < T; done += C) {
			size_t len = T - done < C ? T - done : C;
			for (unsigned i = 0; !keep_state && done + len == T && i < seqs; i++)
				if (batch || i == q)
					hb_session_final(s[i]);
			double t0 = now();
			good = !(batch ? chunk_batch(s, seqs, m, toks, len, &rng, &o, &err)
				       : chunk(s[q], m, toks, len, &rng, &o, &err));
			ms[n++] = (now() - t0) * 1e3;
			total += ms[n - 1];
			tokens += batch ? len * seqs : len;
		}
	if (!good) {
		printf("ours T=%zu layers=%zu: FAILED: %s: %s\n", T, L, err.field, err.msg);
	} else {
		uint64_t ch = device_chunks() - c0;
		bool all = ch == n + 1 && o.routes == (tokens + C) * L && !hb_cuda_error(&err);
		qsort(ms, n, sizeof(double), cmp_d);
		printf("ours T=%zu layers=%zu%s tokens/s %.1f (chunks %zu, median ms/chunk %.2f, min %.2f; device chunks "
		       "%" PRIu64 "/%zu, GPU memory used %.1f GiB)%s\n", T, L, batch ? " batched" : "",
		       tokens / (total * 1e-3), n,
		       n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2, ms[0], ch, n + 1, gpu_used_gib(),
		       all ? "" : ch != n + 1 ? " FAILED: the device graph declined" : " FAILED");
		if (!all && err.code)
			printf("# device error: %s\n", err.msg);
		printf("# routes and route weights, every chunk's: digest %016" PRIx64 " (two builds agree where their "
		       "arithmetic does)\n", o.digest);
		profile_print(&st0, n);
		good = all;
	}
	fflush(stdout);
	for (unsigned i = 0; i <= seqs; i++)
		hb_session_free(s[i]);
	free(s), free(ms), free(toks);
	return good;
}

static int throughput(struct geo g, enum hb_em_codec_id codec, const size_t *Ts, size_t nT, size_t C,
		      unsigned seqs, bool batch, uint64_t seed)
{
	struct hb_error err;
	struct hb_model *m;
	double t0 = now(), t1, t2;
	bool good = true;

	hb_error_clear(&err);
	setenv("HB_CUDA_GRAPH", "1", 1); /* the device graph, not only the seam's operations */
	m = build(&g, codec, false, seed);
	guard(m);
	t1 = now();
	if (hb_cuda_start(&err) || hb_cuda_resident_random(m->map, m->map_len, seed, &err)) {
		printf("gpu-graph: FAILED: %s: %s\n", err.field, err.msg);
		model_free(m);
		return 1;
	}
	t2 = now();
	printf("# ours: synthetic model, %u layers %s, %s experts, %.2f GiB of weights on the GPU only; built in "
	       "%.2f s, device started and filled in %.2f s (%.2f s in all); GPU memory used %.1f GiB; %s\n", g.L,
	       pattern(m), m->em.codec->name, (double)m->map_len / (1u << 30), t1 - t0, t2 - t1, t2 - t0,
	       gpu_used_gib(),
	       keep_state ? "every chunk's state copied back (--keep-state)"
			  : "a sequence's last chunk final, its state left on the device (as hb-replay label)");
	fflush(stdout);
	for (size_t i = 0; i < nT; i++)
		good &= bench_T(m, Ts[i], C && C < Ts[i] ? C : Ts[i], seqs, batch, seed);
	hb_cuda_stop();
	model_free(m);
	return good ? 0 : 1;
}

/* ------------------------------------------------------------ main */

static unsigned long num(const char *s, const char *opt)
{
	char *end;
	unsigned long v = strtoul(s ? s : "", &end, 10);

	if (!s || !*s || *end || !v) {
		fprintf(stderr, "gpu-graph: %s wants a positive integer\n", opt);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	struct geo g = REAL;
	enum hb_em_codec_id codec = HB_EM_CODEC_AFFINE4_G64;
	size_t Ts[MAX_T] = { 1024, 4096, 16384 }, nT = 3, C = 0;
	unsigned seqs = 2;
	bool batch = false;
	uint64_t seed = 0x51ed270b;
	int mode = 0; /* 1 --cpu-check, 2 --gpu-check */

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--cpu-check") || !strcmp(a, "--gpu-check")) {
			mode = a[2] == 'c' ? 1 : 2;
			continue;
		}
		if (!strcmp(a, "--batch")) { /* the sequences' chunks as one pass each */
			batch = true;
			continue;
		}
		if (!strcmp(a, "--keep-state")) {
			keep_state = true;
			continue;
		}
		i++;
		if (!strcmp(a, "--layers")) {
			g.L = (unsigned)num(v, a);
		} else if (!strcmp(a, "--sparse-every")) {
			g.every = (unsigned)num(v, a);
		} else if (!strcmp(a, "--seqs")) {
			seqs = (unsigned)num(v, a);
		} else if (!strcmp(a, "--chunk")) {
			C = num(v, a);
		} else if (!strcmp(a, "--seed")) {
			seed = num(v, a);
		} else if (!strcmp(a, "--experts") && v && (!strcmp(v, "affine4") || !strcmp(v, "bf16"))) {
			codec = !strcmp(v, "bf16") ? HB_EM_CODEC_BF16 : HB_EM_CODEC_AFFINE4_G64;
		} else if (!strcmp(a, "--tokens") && v) {
			char *copy = strdup(v), *save = NULL;
			if (!copy)
				die("out of memory");
			nT = 0;
			for (char *t = strtok_r(copy, ",", &save); t && nT < MAX_T; t = strtok_r(NULL, ",", &save))
				Ts[nT++] = num(t, a);
			free(copy);
		} else {
			fprintf(stderr, "usage: gpu-graph [--layers L] [--tokens T,...] [--seqs N] [--batch] [--chunk C] "
					"[--keep-state] [--experts affine4|bf16] [--sparse-every N] [--seed S] | --cpu-check | "
					"--gpu-check\n");
			return 2;
		}
	}
	if (g.L > HB_EM_MAX_LAYERS)
		die("--layers: at most 128");
	if (seqs > 64)
		die("--seqs: at most 64");
	if (mode)
		return check(mode == 2, codec, seed);
	return throughput(g, codec, Ts, nT, C, seqs, batch, seed);
}
