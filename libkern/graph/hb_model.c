/*
 * hb_model.c: load an admitted artifact for execution (see hb_model.h).
 */
#include "hb_base.h"
#include "admit/hb_admit.h"
#include "hb_session_test.h"
#include "artifact/hb_artifact.h"
#include "gguf/hb_gguf.h"
#include "hb_half.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_map.h"
#include "hb_model.h"
#include "artifact/hb_artifact_identity.h"
#include "hb_sha256.h"

#include <math.h>
#include <time.h>
#include <unistd.h>

struct loader {
	struct hb_model *m;
	struct hb_gguf g;
	struct hb_error *err;
	int rc;
};

static const struct hb_gguf_tensor *tensor(struct loader *ld, const char *name)
{
	const struct hb_gguf_tensor *t = hb_gguf_find_tensor(&ld->g, name);
	if (!t && !ld->rc)
		ld->rc = hb_error_set(ld->err, HB_ERR_INTERNAL, name, "admitted artifact lacks this tensor");
	return t;
}

static enum hb_wtype wtype(uint32_t ggml)
{
	return ggml == HB_GGML_BF16 ? HB_W_BF16 : ggml == HB_GGML_F16 ? HB_W_F16 : HB_W_F32;
}

/* A 2-D weight; admission proved its shape and type. */
static struct hb_wmat mat(struct loader *ld, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static struct hb_wmat mat(struct loader *ld, const char *fmt, ...)
{
	struct hb_wmat w = {0};
	const struct hb_gguf_tensor *t;
	char name[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	t = tensor(ld, name);
	if (!t)
		return w;
	w.data = ld->m->map + t->offset;
	w.type = wtype(t->ggml_type);
	w.cols = t->dims[0];
	w.rows = t->n_dims > 1 ? t->dims[1] : 1;
	w.row_bytes = w.cols * hb_ggml_type_size(t->ggml_type);
	return w;
}

/* A vector (any rank) widened to a float32 copy. */
static float *vec(struct loader *ld, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static float *vec(struct loader *ld, const char *fmt, ...)
{
	const struct hb_gguf_tensor *t;
	char name[128];
	va_list ap;
	uint64_t n = 1;
	float *out;
	struct hb_wmat w;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	t = tensor(ld, name);
	if (!t)
		return NULL;
	for (uint32_t d = 0; d < t->n_dims; d++)
		n *= t->dims[d];
	out = malloc((size_t)n * sizeof(float));
	if (!out) {
		if (!ld->rc)
			ld->rc = hb_error_set(ld->err, HB_ERR_NOMEM, name, "out of memory");
		return NULL;
	}
	w.data = ld->m->map + t->offset;
	w.type = wtype(t->ggml_type);
	w.rows = 1;
	w.cols = n;
	w.row_bytes = n * hb_ggml_type_size(t->ggml_type);
	hb_wmat_row(&w, 0, out);
	return out;
}

static void load_hc(struct loader *ld, struct hb_hc_weights *h, const char *base, bool combine)
{
	h->norm = vec(ld, "%s.hc_norm.weight", base);
	h->down = mat(ld, "%s.input_mix_weight_down.weight", base);
	h->up = mat(ld, "%s.input_mix_weight_up.weight", base);
	if (combine)
		h->inject = mat(ld, "%s.block_inject_weight.weight", base);
}

static void load_layer(struct loader *ld, uint32_t i)
{
	struct hb_model *m = ld->m;
	struct hb_layer_weights *L = &m->layers[i];
	char base[64];

	L->kind = m->cfg.layer_kind[i];
	snprintf(base, sizeof(base), "layers.%u.attn_hyper_connection", i);
	load_hc(ld, &L->attn_hc, base, true);
	snprintf(base, sizeof(base), "layers.%u.mlp_hyper_connection", i);
	load_hc(ld, &L->mlp_hc, base, true);
	if (L->kind == HB_LAYER_LINEAR) {
		struct hb_gdn_weights *g = &L->gdn;
		g->qkv = mat(ld, "layers.%u.linear_attn.in_proj_qkv.weight", i);
		g->z = mat(ld, "layers.%u.linear_attn.in_proj_z.weight", i);
		g->b = mat(ld, "layers.%u.linear_attn.in_proj_b.weight", i);
		g->a = mat(ld, "layers.%u.linear_attn.in_proj_a.weight", i);
		g->out = mat(ld, "layers.%u.linear_attn.out_proj.weight", i);
		g->conv = vec(ld, "layers.%u.linear_attn.conv1d.weight", i);
		g->dt_bias = vec(ld, "layers.%u.linear_attn.dt_bias", i);
		g->A_log = vec(ld, "layers.%u.linear_attn.A_log", i);
		g->norm = vec(ld, "layers.%u.linear_attn.norm.weight", i);
	} else {
		struct hb_qsa_weights *q = &L->qsa;
		q->q = mat(ld, "layers.%u.self_attn.q_proj.weight", i);
		q->k = mat(ld, "layers.%u.self_attn.k_proj.weight", i);
		q->v = mat(ld, "layers.%u.self_attn.v_proj.weight", i);
		q->o = mat(ld, "layers.%u.self_attn.o_proj.weight", i);
		q->index_qk = mat(ld, "layers.%u.self_attn.indexer.index_qk_proj.weight", i);
		q->q_norm = vec(ld, "layers.%u.self_attn.q_norm.weight", i);
		q->k_norm = vec(ld, "layers.%u.self_attn.k_norm.weight", i);
		q->index_q_norm = vec(ld, "layers.%u.self_attn.indexer.q_layernorm.weight", i);
		q->index_k_norm = vec(ld, "layers.%u.self_attn.indexer.k_layernorm.weight", i);
		if (m->cfg.attention_bias) {
			q->q_bias = vec(ld, "layers.%u.self_attn.q_proj.bias", i);
			q->k_bias = vec(ld, "layers.%u.self_attn.k_proj.bias", i);
			q->v_bias = vec(ld, "layers.%u.self_attn.v_proj.bias", i);
			q->o_bias = vec(ld, "layers.%u.self_attn.o_proj.bias", i);
		}
	}
	L->moe.router = mat(ld, "layers.%u.mlp.gate.weight", i);
	L->moe.shared_gate = mat(ld, "layers.%u.mlp.shared_expert.gate_proj.weight", i);
	L->moe.shared_up = mat(ld, "layers.%u.mlp.shared_expert.up_proj.weight", i);
	L->moe.shared_down = mat(ld, "layers.%u.mlp.shared_expert.down_proj.weight", i);
	L->moe.shared_gate_w = mat(ld, "layers.%u.mlp.shared_expert_gate.weight", i);
	{
		int p = hb_qwen_ple_index(&m->cfg, i + 1);
		if (p >= 0) {
			struct hb_ple_weights *w = &L->ple;
			L->has_ple = true;
			w->index = p;
			if (!ld->rc)
				ld->rc = hb_ple_hash_compute(&m->cfg, (size_t)p, &w->hash, ld->err);
			w->key = mat(ld, "layers.%u.ple.key_proj.weight", i);
			w->value = mat(ld, "layers.%u.ple.value_proj.weight", i);
			w->norm_key = vec(ld, "layers.%u.ple.norm_key.weight", i);
			w->norm_query = vec(ld, "layers.%u.ple.norm_query.weight", i);
			w->norm_conv = vec(ld, "layers.%u.ple.norm_conv.weight", i);
			w->conv = vec(ld, "layers.%u.ple.conv1d.weight", i);
		}
	}
}

/* A NUL-terminated copy of string key k, or NULL (and *len 0) when absent. */
static int copy_str(const struct hb_gguf *g, const char *k, char **out, size_t *len, struct hb_error *err)
{
	const struct hb_gguf_kv *kv = hb_gguf_find_kv(g, k);

	*out = NULL;
	*len = 0;
	if (!kv || kv->value.type != HB_GGUF_STRING) /* admission pins the type */
		return HB_OK;
	if ((uint64_t)kv->value.str.len >= SIZE_MAX || !(*out = malloc((size_t)kv->value.str.len + 1)))
		return hb_error_set(err, HB_ERR_NOMEM, "model", "out of memory");
	memcpy(*out, kv->value.str.ptr, (size_t)kv->value.str.len);
	(*out)[kv->value.str.len] = '\0';
	*len = (size_t)kv->value.str.len;
	return HB_OK;
}

static void rope_init(struct hb_model *m)
{
	uint64_t half = m->cfg.rotary_dim / 2;

	m->inv_freq = malloc((size_t)(half ? half : 1) * sizeof(float));
	if (!m->inv_freq)
		return;
	/* upstream: 1 / base ** (arange(0, dim, 2, float32) / dim), in float32 */
	for (uint64_t i = 0; i < half; i++) {
		float e = (float)(2 * i) / (float)m->cfg.rotary_dim;
		m->inv_freq[i] = 1.0f / powf((float)m->cfg.rope_theta, e);
	}
}

static int identity(struct hb_model *m, const struct hb_gguf *g, struct hb_error *err)
{
	return hb_artifact_identity(m->fd, m->path, g, &m->em, m->ple, m->artifact_sha, err);
}

void (*hb_model_after_admission_seam)(const char *path);

/* the artifact's bytes as the weights' memory (hb_weights_mode) */
static int weights_memory(struct hb_model *m, const struct hb_gguf *g, enum hb_weights_mode mode, size_t size,
			  const char *path, struct hb_error *err)
{
	const struct hb_gguf_tensor *ple = hb_gguf_find_tensor(g, HB_TENSOR_PLE_STORE);
	struct hb_map_hole hole = { ple ? ple->offset : 0, ple ? ple->nbytes : 0 };
	struct timespec t0, t1;
	int rc;

	m->weights_mode = mode;
	if (mode == HB_WEIGHTS_MAP)
		return hb_map_read(m->fd, size, &m->map, path, err);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = hb_map_load(m->fd, size, &hole, ple ? 1 : 0, &m->map, path, err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	m->weights_read_seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	return rc;
}

int hb_model_load(const char *path, struct hb_model **out, struct hb_error *err)
{
	return hb_model_load_mode(path, HB_WEIGHTS_MAP, out, err);
}

int hb_model_load_mode(const char *path, enum hb_weights_mode mode, struct hb_model **out, struct hb_error *err)
{
	struct hb_model *m = calloc(1, sizeof(*m));
	struct hb_admit_opts ao;
	struct hb_admit_result ar;
	struct loader ld;
	const struct hb_gguf_tensor *t;
	const struct hb_gguf_kv *kv;
	uint64_t size = 0;
	int rc;

	if (!m)
		return hb_error_set(err, HB_ERR_NOMEM, "model", "out of memory");
	m->fd = -1;
	memset(&ld, 0, sizeof(ld));
	ld.m = m;
	ld.err = err;
	hb_gguf_init(&ld.g);
	/* one open: admission checks the descriptor the model then maps, so a
	 * path replaced in between cannot put another file under the run */
	if ((rc = hb_open_read(path, &m->fd, err)))
		goto fail;
	memset(&ao, 0, sizeof(ao));
	ao.path = path;
	ao.cfg_out = &m->cfg;
	ao.use_fd = true;
	ao.fd = m->fd;
	rc = hb_admit(&ao, &ar, err);
	if (!rc && hb_model_after_admission_seam)
		hb_model_after_admission_seam(path);
	if (rc)
		goto fail;
	cJSON_Delete(ar.report);
	if (!ar.admitted) {
		rc = err && err->code ? err->code : HB_ERR_CONTRACT;
		goto fail;
	}
	m->path = strdup(path);
	if (!m->path) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "model", "out of memory");
		goto fail;
	}
	if ((rc = hb_file_size(m->fd, &size, path, err)) ||
	    (rc = hb_gguf_read_fd(&ld.g, m->fd, NULL, err)))
		goto fail;
	if ((unsigned)mode > HB_WEIGHTS_READ) {
		rc = hb_error_set(err, HB_ERR_INVALID, "weights", "unknown weights mode %d", (int)mode);
		goto fail;
	}
	if ((rc = weights_memory(m, &ld.g, mode, (size_t)size, path, err)))
		goto fail;
	m->map_len = (size_t)size;
	{
		const struct hb_gguf_kv *p = hb_gguf_find_kv(&ld.g, HB_KEY_PROFILE);
		const struct hb_gguf_kv *s = hb_gguf_find_kv(&ld.g, HB_KEY_STATUS);
		snprintf(m->profile, sizeof(m->profile), "%s", p ? p->value.str.ptr : "?");
		snprintf(m->status, sizeof(m->status), "%s", s ? s->value.str.ptr : "?");
	}
	m->embed = mat(&ld, "embed_tokens.weight");
	/* tied (upstream ties lm_head to embed_tokens): one matrix, both uses */
	m->lm_head = m->cfg.tie_word_embeddings ? m->embed : mat(&ld, "lm_head.weight");
	load_hc(&ld, &m->mixer, "hyper_connection_mixer", false);
	m->layers = calloc((size_t)m->cfg.num_layers, sizeof(*m->layers));
	if (!m->layers && !ld.rc)
		ld.rc = hb_error_set(err, HB_ERR_NOMEM, "model", "out of memory");
	for (uint32_t i = 0; m->layers && i < m->cfg.num_layers && !ld.rc; i++)
		load_layer(&ld, i);
	if ((rc = ld.rc))
		goto fail;
	t = tensor(&ld, HB_TENSOR_EXPERT_STORE);
	{
		struct hb_em_geometry geo = { (uint32_t)m->cfg.num_layers, (uint32_t)m->cfg.num_experts,
					      (uint32_t)m->cfg.num_experts_per_tok, m->cfg.hidden_size,
					      m->cfg.moe_intermediate_size };
		if ((rc = ld.rc) || (rc = hb_em_parse_fd(m->fd, t->offset, t->nbytes, &geo, &m->em, NULL, err)))
			goto fail;
	}
	m->em_base = m->map + t->offset;
	m->em_len = (size_t)t->nbytes;
	m->expert_type = m->em.codec->id == HB_EM_CODEC_AFFINE4_G64 ? HB_W_AFFINE4_G64 : HB_W_BF16;
	t = hb_gguf_find_tensor(&ld.g, HB_TENSOR_PLE_STORE);
	if (t)
		m->ple_off = (size_t)t->offset, m->ple_len = (size_t)t->nbytes;
	if (t && (rc = hb_ple_store_open(&m->ple, m->fd, t->offset, t->nbytes, err)))
		goto fail;
	for (uint32_t i = 0; m->ple && i < m->cfg.num_layers; i++) {
		struct hb_layer_weights *L = &m->layers[i];
		if (L->has_ple)
			L->ple.first_row = hb_ple_store_layout(m->ple)->tables[L->ple.index].first_row;
	}
	m->vocab_physical = m->cfg.vocab_size;
	m->vocab_semantic = ar.vocab_semantic; /* admission derived it (step 5) */
	kv = hb_gguf_find_kv(&ld.g, HB_KEY_STOP);
	if (kv && kv->value.count) {
		m->stop_ids = calloc((size_t)kv->value.count, sizeof(uint32_t));
		if (!m->stop_ids) {
			rc = hb_error_set(err, HB_ERR_NOMEM, "model", "out of memory");
			goto fail;
		}
		memcpy(m->stop_ids, kv->value.elems, (size_t)kv->value.count * sizeof(uint32_t));
		m->n_stop = (size_t)kv->value.count;
	}
	if ((rc = copy_str(&ld.g, HB_KEY_TOKENIZER_JSON, &m->tokenizer_json, &m->tokenizer_json_len, err)) ||
	    (rc = copy_str(&ld.g, HB_KEY_CHAT_TEMPLATE, &m->chat_template, &m->chat_template_len, err)))
		goto fail;
	rope_init(m);
	if (!m->inv_freq) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "model", "out of memory");
		goto fail;
	}
	if ((rc = identity(m, &ld.g, err)))
		goto fail;
	hb_gguf_release(&ld.g);
	*out = m;
	return HB_OK;
fail:
	hb_gguf_release(&ld.g);
	hb_model_free(m);
	return rc;
}

static void free_hc(struct hb_hc_weights *h)
{
	free(h->norm);
}

void hb_model_free(struct hb_model *m)
{
	if (!m)
		return;
	for (uint64_t i = 0; m->layers && i < m->cfg.num_layers; i++) {
		struct hb_layer_weights *L = &m->layers[i];
		free_hc(&L->attn_hc);
		free_hc(&L->mlp_hc);
		free(L->gdn.conv), free(L->gdn.dt_bias), free(L->gdn.A_log), free(L->gdn.norm);
		free(L->qsa.q_bias), free(L->qsa.k_bias), free(L->qsa.v_bias), free(L->qsa.o_bias);
		free(L->qsa.q_norm), free(L->qsa.k_norm), free(L->qsa.index_q_norm), free(L->qsa.index_k_norm);
		free(L->ple.norm_key), free(L->ple.norm_query), free(L->ple.norm_conv), free(L->ple.conv);
	}
	free(m->layers);
	free_hc(&m->mixer);
	free(m->inv_freq);
	free(m->stop_ids);
	free(m->tokenizer_json);
	free(m->chat_template);
	hb_xs_close(m->xs);
	if (m->em.layers)
		hb_em_layout_release(&m->em);
	hb_ple_store_close(m->ple);
	hb_map_release(m->map, m->map_len);
	if (m->fd >= 0)
		close(m->fd);
	free(m->path);
	free(m);
}

int hb_model_stream(struct hb_model *m, const char *size, const struct hb_xs_config *cfg,
		    enum hb_xs_predictor pred, struct hb_error *err)
{
	struct hb_xs_source src;
	struct hb_xs_config c = *cfg;
	struct hb_xs *xs = NULL;
	bool all = true;
	int rc;

	if (m->xs)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache", "the model streams its experts already");
	if ((unsigned)pred > HB_XS_PRED_ROUTER_AHEAD)
		return hb_error_set(err, HB_ERR_INVALID, "predictor", "unknown predictor %d", (int)pred);
	if (!size || !strcmp(size, "all"))
		return HB_OK;
	/* through the descriptor admission checked (hb_model_load), never the
	 * path again: a path replaced since then must not bring another
	 * artifact's records and digest table under this model's dense weights */
	{
		char self[64];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", m->fd);
		if ((rc = hb_xs_source_open(self, &src, err)))
			return rc;
	}
	if (src.layout.layer_count != m->em.layer_count || src.layout.expert_count != m->em.expert_count ||
	    src.layout.record_bytes != m->em.record_bytes)
		rc = hb_error_set(err, HB_ERR_CONTRACT, "expert_cache",
				  "the artifact's expert store changed since it was loaded");
	if (!rc)
		rc = hb_xs_budget_parse(size, &src, &c.budget_bytes, &all, err);
	if (!rc && !all)
		rc = hb_xs_open(&src, &c, &xs, err);
	hb_xs_source_release(&src);
	if (rc)
		return rc;
	m->xs = xs;
	m->xs_predict = pred;
	return HB_OK;
}

void hb_model_expert(const struct hb_model *m, uint32_t layer, uint32_t expert,
		     struct hb_wmat *gate, struct hb_wmat *up, struct hb_wmat *down)
{
	const struct hb_em_layer *ly = &m->em.layers[layer];
	const uint8_t *rec = m->em_base + ly->data_offset + (uint64_t)expert * ly->record_bytes;
	struct hb_wmat *w[3] = {gate, up, down};

	for (int k = 0; k < 3; k++) {
		const struct hb_em_component *c = &ly->comp[k];
		w[k]->data = rec + c->record_offset;
		w[k]->type = m->expert_type;
		w[k]->cols = c->dim[0];
		w[k]->rows = c->dim[1];
		w[k]->row_bytes = c->expert_bytes / c->dim[1];
	}
}
