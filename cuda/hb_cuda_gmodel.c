/*
 * hb_cuda_gmodel.c: the device graph's copy of a model (hb_cuda_graph_int.h):
 * once per model, the small float vectors (norms, gates, convolution taps,
 * biases, rotary frequencies) go up into one allocation, and every routed
 * expert's three device addresses into a table, so that a layer's experts
 * run as one grouped launch over all experts (an expert no token chose has
 * an empty group).  The matrices themselves are the resident mapping's
 * device copy (hb_cuda_resident).
 */
#include "hb_base.h"
#include "hb_err.h"
#include "backend/hb_backend.h"
#include "hb_cuda_gk.h"
#include "hb_cuda_graph_int.h"
#include "hb_cuda_int.h"

#include <stdlib.h>
#include <string.h>

struct hbg_model hbg_m;

void hbc_graph_free(void)
{
	cudaFree(hbg_m.arena);
	cudaFree((void *)hbg_m.experts);
	free(hbg_m.lv);
	memset(&hbg_m, 0, sizeof(hbg_m));
}

/* n floats of host vector v into the arena (NULL stays NULL); without an
 * arena yet, only counted */
static float *vec_up(const float *v, size_t n)
{
	float *d;

	if (!v || !n)
		return NULL;
	d = hbg_m.arena ? hbg_m.arena + hbg_m.used : NULL;
	hbg_m.used += (n + 63) & ~(size_t)63;
	if (d && (hbg_m.used > hbg_m.cap || !hbc_up(d, v, n * sizeof(float))))
		hbg_m.failed = true;
	return d;
}

static bool expert_table(const struct hb_model *m)
{
	const struct hb_qwen_config *c = &m->cfg;
	size_t L = (size_t)c->num_layers, E = (size_t)c->num_experts;
	const void **h = malloc(L * 3 * E * sizeof(*h));
	struct hb_wmat first[3];
	bool good = h != NULL;

	for (size_t l = 0; good && l < L; l++)
		for (size_t e = 0; good && e < E; e++) {
			struct hb_wmat w[3];
			hb_model_expert(m, (uint32_t)l, (uint32_t)e, &w[0], &w[1], &w[2]);
			for (int k = 0; good && k < 3; k++) {
				if (l == 0 && e == 0)
					first[k] = w[k];
				good = hbc_same_shape(&first[k], &w[k]) &&
				       hbc_resident(w[k].data, (size_t)(w[k].rows * w[k].row_bytes)) &&
				       (h[(l * 3 + (size_t)k) * E + e] = hbc_weight(&w[k], B_W0)) != NULL;
			}
		}
	good = good && hbc_ok(cudaMalloc((void **)&hbg_m.experts, L * 3 * E * sizeof(*h)), "the expert table") &&
	       hbc_up((void *)hbg_m.experts, h, L * 3 * E * sizeof(*h));
	free(h);
	return good;
}

/* every small vector into the arena (with hbg_m.arena NULL: only counted) */
static void vectors(const struct hb_model *m)
{
	const struct hb_qwen_config *c = &m->cfg;
	size_t L = (size_t)c->num_layers, H = (size_t)c->hidden_size, hcH = (size_t)c->hc_count * H;
	size_t cd = 2 * (size_t)(c->linear_num_key_heads * c->linear_key_head_dim) +
		    (size_t)(c->linear_num_value_heads * c->linear_value_head_dim);
	size_t nh = (size_t)c->num_heads, nkv = (size_t)c->num_kv_heads, hd = (size_t)c->head_dim;

	hbg_m.mixer_norm = vec_up(m->mixer.norm, hcH);
	hbg_m.inv_freq = vec_up(m->inv_freq, (size_t)c->rotary_dim / 2);
	for (size_t l = 0; l < L; l++) {
		const struct hb_layer_weights *w = &m->layers[l];
		struct hbg_lvec *v = &hbg_m.lv[l];
		v->attn_norm = vec_up(w->attn_hc.norm, hcH);
		v->mlp_norm = vec_up(w->mlp_hc.norm, hcH);
		if (w->kind == HB_LAYER_LINEAR) {
			v->conv = vec_up(w->gdn.conv, cd * (size_t)c->linear_conv_kernel);
			v->dt_bias = vec_up(w->gdn.dt_bias, (size_t)c->linear_num_value_heads);
			v->A_log = vec_up(w->gdn.A_log, (size_t)c->linear_num_value_heads);
			v->gnorm = vec_up(w->gdn.norm, (size_t)c->linear_value_head_dim);
		} else {
			v->qb = vec_up(w->qsa.q_bias, 2 * nh * hd);
			v->kb = vec_up(w->qsa.k_bias, nkv * hd);
			v->vb = vec_up(w->qsa.v_bias, nkv * hd);
			v->ob = vec_up(w->qsa.o_bias, H);
			v->qn = vec_up(w->qsa.q_norm, hd);
			v->kn = vec_up(w->qsa.k_norm, hd);
			v->iqn = vec_up(w->qsa.index_q_norm, (size_t)c->indexer_head_dim);
			v->ikn = vec_up(w->qsa.index_k_norm, (size_t)c->indexer_head_dim);
		}
		if (w->has_ple) {
			v->pnk = vec_up(w->ple.norm_key, hcH);
			v->pnq = vec_up(w->ple.norm_query, hcH);
			v->pnc = vec_up(w->ple.norm_conv, hcH);
			v->pconv = vec_up(w->ple.conv, hcH * (size_t)c->ple_conv_kernel_size);
		}
	}
}

bool hbg_model_ready(const struct hb_model *m, const double *exp_table)
{
	if (hbg_m.m == m && hbg_m.gen == hbc_generation())
		return hbg_m.ok;
	hbc_graph_free();
	hbg_m.m = m, hbg_m.gen = hbc_generation();
	hbg_m.lv = calloc((size_t)m->cfg.num_layers, sizeof(*hbg_m.lv));
	if (!hbg_m.lv)
		return false;
	vectors(m); /* counted */
	hbg_m.cap = hbg_m.used + 64, hbg_m.used = 0;
	if (!hbc_ok(cudaMalloc((void **)&hbg_m.arena, hbg_m.cap * sizeof(float)), "the model's vectors"))
		return false;
	vectors(m);
	hbg_m.ok = !hbg_m.failed && hbc_ok((cudaError_t)hbg_init(exp_table), "the exponential's table") &&
		expert_table(m);
	return hbg_m.ok;
}

