/*
 * hb_cuda_graph_int.h: the device graph's per-model state, shared by
 * hb_cuda_gmodel.c (which builds it) and hb_cuda_graph.c (which runs
 * chunks on it).  Internal to cuda/; every function runs with the
 * backend's mutex held.
 */
#ifndef HB_CUDA_GRAPH_INT_H
#define HB_CUDA_GRAPH_INT_H

#include "hb_base.h"
#include "graph/hb_model.h"

/* one layer's small float vectors on the device (NULL: the layer has none) */
struct hbg_lvec {
	float *attn_norm, *mlp_norm, *conv, *dt_bias, *A_log, *gnorm;
	float *qb, *kb, *vb, *ob, *qn, *kn, *iqn, *ikn;
	float *pnk, *pnq, *pnc, *pconv;
};

struct hbg_model {
	const struct hb_model *m;
	uint64_t gen;          /* the backend's generation it was built in */
	float *arena;          /* every small vector, device */
	size_t used, cap;
	struct hbg_lvec *lv;   /* [num_layers] */
	float *mixer_norm, *inv_freq;
	const void **experts;  /* device: [L][3][E] matrix addresses */
	bool ok;               /* the model can run here (else every chunk is declined) */
	bool failed;           /* a vector did not go up */
};

/* the model the device holds now */
extern struct hbg_model hbg_m;

/* m's vectors and expert table on the device, and the e^x table the
 * kernels repeat (built once per model and backend generation); false: the
 * device cannot run m (a routed expert outside the resident ranges or of
 * another shape) or failed */
bool hbg_model_ready(const struct hb_model *m, const double *exp_table);

#endif
