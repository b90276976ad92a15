/*
 * hb_draft.c: the DFlash2 compatibility gate (see hb_draft.h).
 *
 * Owns the field order, the comparisons and the draft tensor contract; the
 * target's side comes from admission (hb_admit), never re-derived here.
 * Each step reads only what it compares, and the first mismatch ends the
 * walk: a draft is never half admitted.
 */
#include "hb_base.h"
#include "admit/hb_admit.h"
#include "artifact/hb_artifact.h"
#include "checkpoint/hb_safetensors.h"
#include "draft/hb_draft.h"
#include "gguf/hb_gguf.h"
#include "hb_json.h"
#include "model/hb_qwen_config.h"

#include <fcntl.h>
#include <math.h>
#include <unistd.h>

static const char *const diag_ids[] = {
#define HB_DRAFT_ID_(sym, id, meaning) id,
	HB_DRAFT_DIAGS(HB_DRAFT_ID_)
#undef HB_DRAFT_ID_
};
static const char *const diag_meanings[] = {
#define HB_DRAFT_MEANING_(sym, id, meaning) meaning,
	HB_DRAFT_DIAGS(HB_DRAFT_MEANING_)
#undef HB_DRAFT_MEANING_
};

const char *hb_draft_diag_id(enum hb_draft_diag d)
{
	return (unsigned)d < HB_DRAFT_DIAG_COUNT ? diag_ids[d] : "draft-unknown";
}

const char *hb_draft_diag_meaning(enum hb_draft_diag d)
{
	return (unsigned)d < HB_DRAFT_DIAG_COUNT ? diag_meanings[d] : "";
}

/* ------------------------------------------------------------ the target */

static void copy_str(char *dst, size_t cap, const struct hb_gguf_str *s)
{
	size_t n = s && s->len < cap ? (size_t)s->len : 0;
	if (n)
		memcpy(dst, s->ptr, n);
	dst[n] = '\0';
}

int hb_draft_target_load(const char *artifact, struct hb_draft_target *t, bool *admitted,
			 struct hb_error *err)
{
	struct hb_qwen_config cfg;
	struct hb_admit_opts o = {.path = artifact, .cfg_out = &cfg};
	struct hb_admit_result res;
	struct hb_gguf g;
	const struct hb_gguf_str *s;
	struct hb_error ignore;
	int fd, rc;

	memset(t, 0, sizeof(*t));
	*admitted = false;
	if ((rc = hb_admit(&o, &res, err)))
		return rc;
	cJSON_Delete(res.report);
	if (!res.admitted)
		return HB_OK;
	t->vocab_physical = cfg.vocab_size;
	t->vocab_semantic = res.vocab_semantic;
	t->layers = cfg.num_layers;
	t->hidden = cfg.hidden_size;
	t->max_positions = cfg.max_position_embeddings;
	t->rope_theta = cfg.rope_theta;
	t->n_eos = cfg.n_eos < 8 ? cfg.n_eos : 8;
	memcpy(t->eos, cfg.eos_token_ids, t->n_eos * sizeof(int64_t));
	/* the two identity strings admission checked (steps 3 and 5) */
	if ((fd = open(artifact, O_RDONLY | O_CLOEXEC)) < 0)
		return hb_error_sys(err, errno, artifact, "cannot open");
	hb_gguf_init(&g);
	rc = hb_gguf_read_fd(&g, fd, NULL, err);
	close(fd);
	if (rc)
		return rc;
	/* a development artifact pins no revision: its source is then named by
	 * the inventory digest admission checked, and a tokenizer-less one by
	 * "none", so that a draft binds to something exact either way */
	hb_error_clear(&ignore);
	if (!hb_gguf_get_str(&g, HB_KEY_SOURCE_REVISION, &s, &ignore))
		copy_str(t->revision, sizeof(t->revision), s);
	hb_error_clear(&ignore);
	if (!t->revision[0] && !hb_gguf_get_str(&g, HB_KEY_SOURCE_INVENTORY, &s, &ignore) && s->len < 64 + 1) {
		memcpy(t->revision, "inventory:", 10);
		copy_str(t->revision + 10, sizeof(t->revision) - 10, s);
	}
	hb_error_clear(&ignore);
	if (!hb_gguf_get_str(&g, HB_KEY_TOKENIZER_SHA, &s, &ignore))
		copy_str(t->tokenizer_sha256, sizeof(t->tokenizer_sha256), s);
	else
		memcpy(t->tokenizer_sha256, "none", 5);
	hb_gguf_release(&g);
	*admitted = true;
	return HB_OK;
}

/* ------------------------------------------------------------ config fields */

struct gate {
	const struct hb_draft_target *t;
	const cJSON *root, *dfc;      /* config.json, its dflash_config (or NULL) */
	struct hb_draft_result *res;
	struct hb_error *err;
	int step;
};

static int refuse(struct gate *g, enum hb_draft_diag d, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int refuse(struct gate *g, enum hb_draft_diag d, const char *field, const char *fmt, ...)
{
	char msg[HB_ERROR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	g->res->step = g->step;
	hb_error_diag(g->err, hb_draft_diag_id(d), HB_ERR_CONTRACT, field, false, 0, "%s", msg);
	return 1;
}

/* A member that must be an exact non-negative integer. */
static int need_u64(struct gate *g, const cJSON *obj, const char *key, const char *path, uint64_t *out)
{
	const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
	double d = v && cJSON_IsNumber(v) ? v->valuedouble : -1;

	if (!v || !cJSON_IsNumber(v) || d < 0 || d != floor(d) || d > HB_JSON_MAX_EXACT_INT)
		return refuse(g, HB_DRD_FIELD, path, "%s a non-negative integer",
			      v ? "is not" : "absent; the contract needs");
	*out = (uint64_t)d;
	return 0;
}

static int need_str(struct gate *g, const cJSON *obj, const char *key, const char *path, const char **out)
{
	const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;

	if (!v || !cJSON_IsString(v))
		return refuse(g, HB_DRD_FIELD, path, "%s a string", v ? "is not" : "absent; the contract needs");
	*out = v->valuestring;
	return 0;
}

static int eq_u64(struct gate *g, enum hb_draft_diag d, const char *key, const char *path,
		  uint64_t want, const char *what)
{
	uint64_t v;
	if (need_u64(g, g->root, key, path, &v))
		return 1;
	if (v != want)
		return refuse(g, d, path, "%" PRIu64 ", the target's %s is %" PRIu64, v, what, want);
	return 0;
}

static int step_architecture(struct gate *g)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(g->root, "architectures");
	const cJSON *e = cJSON_IsArray(a) && cJSON_GetArraySize(a) == 1 ? cJSON_GetArrayItem(a, 0) : NULL;

	if (!a || !cJSON_IsArray(a))
		return refuse(g, HB_DRD_FIELD, "draft.config.architectures",
			      "absent; the contract needs [\"" HB_DRAFT_ARCHITECTURE "\"]");
	if (!e || !cJSON_IsString(e) || strcmp(e->valuestring, HB_DRAFT_ARCHITECTURE))
		return refuse(g, HB_DRD_ARCHITECTURE, "draft.config.architectures",
			      "not [\"" HB_DRAFT_ARCHITECTURE "\"]");
	return 0;
}

static int step_capture(struct gate *g)
{
	const char *path = "draft.config.dflash_config.target_layer_ids";
	const cJSON *ids = g->dfc ? cJSON_GetObjectItemCaseSensitive(g->dfc, "target_layer_ids") : NULL;
	const cJSON *e;
	int64_t prev = -1;
	int n = 0;

	if (!ids || !cJSON_IsArray(ids))
		return refuse(g, HB_DRD_FIELD, path, "absent; the contract needs the captured layer ids");
	cJSON_ArrayForEach(e, ids) {
		double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
		if (d < 0 || d != floor(d) || d >= (double)g->t->layers || (int64_t)d <= prev)
			return refuse(g, HB_DRD_CAPTURE, path,
				      "element %d is not a layer id above %" PRId64 " and below %" PRIu64, n,
				      prev, g->t->layers);
		prev = (int64_t)d;
		n++;
	}
	if (!n || (unsigned)n > HB_DRAFT_MAX_CAPTURE)
		return refuse(g, HB_DRD_CAPTURE, path, "%d captured layers, not 1..%u", n, HB_DRAFT_MAX_CAPTURE);
	return 0;
}

static int step_special(struct gate *g)
{
	uint64_t mask, eos;
	size_t i;

	if (need_u64(g, g->dfc, "mask_token_id", "draft.config.dflash_config.mask_token_id", &mask))
		return 1;
	if (mask >= g->t->vocab_semantic)
		return refuse(g, HB_DRD_SPECIAL, "draft.config.dflash_config.mask_token_id",
			      "%" PRIu64 " is not a token of the target (ids below %" PRIu64 ")", mask,
			      g->t->vocab_semantic);
	if (need_u64(g, g->root, "eos_token_id", "draft.config.eos_token_id", &eos))
		return 1;
	for (i = 0; i < g->t->n_eos; i++)
		if ((uint64_t)g->t->eos[i] == eos)
			return 0;
	return refuse(g, HB_DRD_SPECIAL, "draft.config.eos_token_id", "%" PRIu64 " is not an EOS id of the target",
		      eos);
}

static int step_position(struct gate *g)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(g->root, "rope_theta");

	if (!v || !cJSON_IsNumber(v))
		return refuse(g, HB_DRD_FIELD, "draft.config.rope_theta", "absent; the contract needs a number");
	if (v->valuedouble != g->t->rope_theta)
		return refuse(g, HB_DRD_POSITION, "draft.config.rope_theta", "%.17g, the target's is %.17g",
			      v->valuedouble, g->t->rope_theta);
	return eq_u64(g, HB_DRD_POSITION, "max_position_embeddings", "draft.config.max_position_embeddings",
		      g->t->max_positions, "context");
}

static int step_block(struct gate *g)
{
	uint64_t b, c;

	if (need_u64(g, g->root, "block_size", "draft.config.block_size", &b))
		return 1;
	if (b < 1 || b > HB_DRAFT_MAX_BLOCK)
		return refuse(g, HB_DRD_BLOCK, "draft.config.block_size", "%" PRIu64 ", not 1..%u", b,
			      HB_DRAFT_MAX_BLOCK);
	if (need_u64(g, g->dfc, "num_candidates", "draft.config.dflash_config.num_candidates", &c))
		return 1;
	if (c < 1 || c > HB_DRAFT_MAX_CANDIDATES)
		return refuse(g, HB_DRD_BLOCK, "draft.config.dflash_config.num_candidates", "%" PRIu64 ", not 1..%u",
			      c, HB_DRAFT_MAX_CANDIDATES);
	return 0;
}

static int step_word(struct gate *g, enum hb_draft_diag d, const char *key, const char *want)
{
	char path[96];
	const char *v;

	snprintf(path, sizeof(path), "draft.config.dflash_config.%s", key);
	if (need_str(g, g->dfc, key, path, &v))
		return 1;
	if (strcmp(v, want))
		return refuse(g, d, path, "'%s', the target's is '%s'", v, want);
	return 0;
}

static int step_revision(struct gate *g)
{
	const char *v;

	if (need_str(g, g->dfc, "target_revision", "draft.config.dflash_config.target_revision", &v))
		return 1;
	if (!g->t->revision[0] || strcmp(v, g->t->revision))
		return refuse(g, HB_DRD_REVISION, "draft.config.dflash_config.target_revision",
			      "'%s', the artifact's source revision is '%s'", v, g->t->revision);
	if (need_str(g, g->dfc, "tokenizer_sha256", "draft.config.dflash_config.tokenizer_sha256", &v))
		return 1;
	if (!g->t->tokenizer_sha256[0] || strcmp(v, g->t->tokenizer_sha256))
		return refuse(g, HB_DRD_REVISION, "draft.config.dflash_config.tokenizer_sha256",
			      "'%s', the artifact's tokenizer is '%s'", v, g->t->tokenizer_sha256);
	return 0;
}

/* ------------------------------------------------------------ the weights */

struct want {
	char name[64];
	unsigned ndim;
	uint64_t shape[2];
};

/* The DFlash tensor layout for this configuration (the public z-lab/dflash
 * draft names; the embedding and output head are the target's own).  A
 * DFlash2 selector or convolution tensor is not in it: no public DFlash2
 * tensor list was at hand, so such a tensor is refused as unknown. */
static int contract(struct gate *g, struct want **out, size_t *n)
{
	uint64_t L, I, nh, nkv, hd, H = g->t->hidden, ncap = (uint64_t)cJSON_GetArraySize(
		cJSON_GetObjectItemCaseSensitive(g->dfc, "target_layer_ids"));
	static const char *const per[] = {"input_layernorm", "post_attention_layernorm", "self_attn.q_proj",
					  "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
					  "self_attn.q_norm", "self_attn.k_norm", "mlp.gate_proj",
					  "mlp.up_proj", "mlp.down_proj"};
	struct want *w;
	size_t k = 0;

	if (need_u64(g, g->root, "num_hidden_layers", "draft.config.num_hidden_layers", &L) ||
	    need_u64(g, g->root, "intermediate_size", "draft.config.intermediate_size", &I) ||
	    need_u64(g, g->root, "num_attention_heads", "draft.config.num_attention_heads", &nh) ||
	    need_u64(g, g->root, "num_key_value_heads", "draft.config.num_key_value_heads", &nkv) ||
	    need_u64(g, g->root, "head_dim", "draft.config.head_dim", &hd))
		return 1;
	if (L < 1 || L > 64)
		return refuse(g, HB_DRD_FIELD, "draft.config.num_hidden_layers", "%" PRIu64 ", not 1..64", L);
	w = calloc(3 + L * 11, sizeof(*w));
	if (!w)
		return hb_error_set(g->err, HB_ERR_NOMEM, "draft", "out of memory"), -1;
	w[k++] = (struct want){"fc.weight", 2, {H, ncap * H}};
	w[k++] = (struct want){"hidden_norm.weight", 1, {H, 0}};
	w[k++] = (struct want){"norm.weight", 1, {H, 0}};
	for (uint64_t l = 0; l < L; l++) {
		const uint64_t shapes[11][2] = {{H, 0}, {H, 0}, {nh * hd, H}, {nkv * hd, H}, {nkv * hd, H},
						{H, nh * hd}, {hd, 0}, {hd, 0}, {I, H}, {I, H}, {H, I}};
		for (size_t j = 0; j < 11; j++, k++) {
			snprintf(w[k].name, sizeof(w[k].name), "layers.%" PRIu64 ".%s.weight", l, per[j]);
			w[k].ndim = shapes[j][1] ? 2 : 1;
			w[k].shape[0] = shapes[j][0];
			w[k].shape[1] = shapes[j][1];
		}
	}
	*out = w;
	*n = k;
	return 0;
}

static const struct want *find_want(const struct want *w, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(w[i].name, name))
			return &w[i];
	return NULL;
}

static int step_weights(struct gate *g, const char *dir)
{
	char path[4096], field[HB_ERROR_FIELD_MAX];
	struct hb_st_file f = {0};
	struct hb_error st;
	struct want *w = NULL;
	size_t n = 0, i;
	int rc;

	if ((rc = contract(g, &w, &n)))
		return rc;
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	hb_error_clear(&st);
	if (hb_st_open(&f, path, &st)) {
		free(w);
		return refuse(g, HB_DRD_WEIGHTS, "draft.weights", "%s: %s%s%s", path, st.id ? st.id : "",
			      st.id ? ": " : "", st.msg);
	}
	rc = 0;
	/* unknown names first, in file order: they say what was brought */
	for (i = 0; !rc && i < f.ntensors; i++)
		if (!find_want(w, n, f.tensors[i].name)) {
			snprintf(field, sizeof(field), "draft.weights.%s", f.tensors[i].name);
			rc = refuse(g, HB_DRD_TENSOR_UNKNOWN, field, "not a tensor of the draft contract");
		}
	for (i = 0; !rc && i < n; i++)
		if (!hb_st_find(&f, w[i].name)) {
			snprintf(field, sizeof(field), "draft.weights.%s", w[i].name);
			rc = refuse(g, HB_DRD_TENSOR_MISSING, field, "absent");
		}
	for (i = 0; !rc && i < n; i++) {
		const struct hb_st_tensor *t = hb_st_find(&f, w[i].name);
		snprintf(field, sizeof(field), "draft.weights.%s", w[i].name);
		if (t->ndim != w[i].ndim || t->shape[0] != w[i].shape[0] ||
		    (w[i].ndim == 2 && t->shape[1] != w[i].shape[1]))
			rc = refuse(g, HB_DRD_TENSOR_SHAPE, field,
				    "shape differs from [%" PRIu64 "%s%.0" PRIu64 "] the configuration gives",
				    w[i].shape[0], w[i].ndim == 2 ? ", " : "", w[i].ndim == 2 ? w[i].shape[1] : 0);
		else if (t->dtype != HB_DTYPE_BF16 && t->dtype != HB_DTYPE_F16 && t->dtype != HB_DTYPE_F32)
			rc = refuse(g, HB_DRD_TENSOR_TYPE, field, "%s", hb_dtype_name(t->dtype));
	}
	g->res->tensors = f.ntensors;
	hb_st_close(&f);
	free(w);
	return rc;
}

/* ------------------------------------------------------------ the walk */

int hb_draft_check(const char *dir, const struct hb_draft_target *t, struct hb_draft_result *res,
		   struct hb_error *err)
{
	char path[4096];
	struct hb_error je;
	cJSON *root = NULL;
	struct gate g = {.t = t, .res = res, .err = err, .step = 1};
	int rc;

	memset(res, 0, sizeof(*res));
	snprintf(path, sizeof(path), "%s/config.json", dir);
	hb_error_clear(&je);
	if (hb_json_parse_file(path, HB_DRAFT_CONFIG_MAX, &root, &je) || !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		refuse(&g, HB_DRD_CONFIG, "draft.config", "%s: %s", path, je.msg[0] ? je.msg : "not an object");
		return HB_OK;
	}
	g.root = root;
	g.dfc = cJSON_GetObjectItemCaseSensitive(root, "dflash_config");
	if (g.dfc && !cJSON_IsObject(g.dfc))
		g.dfc = NULL;
	rc = step_architecture(&g);
	if (!rc && (g.step = 2))
		rc = eq_u64(&g, HB_DRD_VOCAB, "vocab_size", "draft.config.vocab_size", t->vocab_physical,
			    "vocabulary");
	if (!rc && (g.step = 3))
		rc = eq_u64(&g, HB_DRD_TARGET_LAYERS, "num_target_layers", "draft.config.num_target_layers",
			    t->layers, "layer count");
	if (!rc && (g.step = 4))
		rc = eq_u64(&g, HB_DRD_WIDTH, "hidden_size", "draft.config.hidden_size", t->hidden,
			    "hidden width");
	if (!rc && (g.step = 5))
		rc = step_capture(&g);
	if (!rc && (g.step = 6))
		rc = step_special(&g);
	if (!rc && (g.step = 7))
		rc = step_position(&g);
	if (!rc && (g.step = 8))
		rc = step_block(&g);
	if (!rc && (g.step = 9))
		rc = step_word(&g, HB_DRD_VERIFIER, "verifier", HB_DRAFT_VERIFIER);
	if (!rc && (g.step = 10))
		rc = step_word(&g, HB_DRD_ROLLBACK, "rollback", HB_DRAFT_ROLLBACK);
	if (!rc && (g.step = 11))
		rc = step_revision(&g);
	if (!rc && (g.step = 12))
		rc = step_weights(&g, dir);
	cJSON_Delete(root);
	if (rc < 0)
		return rc;
	res->admitted = rc == 0;
	if (res->admitted)
		res->step = 0;
	return HB_OK;
}
