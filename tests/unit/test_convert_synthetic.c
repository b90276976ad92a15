/*
 * Unit tests: hb_convert on synthetic checkpoints written by
 * scripts/make-synthetic-checkpoint.py (contract-control inputs, not
 * upstream captures), byte-level checks the upstream fixtures cannot make:
 * PLE rows through the affine4-g32 codec held to the independent per-group
 * bound of tests/unit/fp_ref.c (which hb_affine4_error_bound must not be
 * below), bit-exact through bf16, and F16 / F32 sources (dense tensors keep
 * their precision byte for byte, experts are rounded to bf16 to nearest
 * even and the report says so).  Every expectation is checked against the
 * SOURCE read through the safetensors reader, never against the
 * converter's own report alone; source values are decoded and rounded by
 * the test's own fp_ref.c, never by hb_half.  Whole-binary behaviour
 * (exit statuses, diagnostics, exclusions, shard sets) is in
 * tests/cli/convert-synthetic.bats.
 */
#include "hb_base.h"
#include "harness.h"
#include "fp_ref.h"
#include "codec/hb_affine4.h"
#include "artifact/hb_artifact.h"
#include "hb-convert/hb_convert.h"
#include "expert/hb_expert_store.h"
#include "gguf/hb_gguf.h"
#include "hb_io.h"
#include "hb_json.h"
#include "ple/hb_ple_store.h"
#include "checkpoint/hb_safetensors.h"

#include <fcntl.h>
#include <math.h>
#include <unistd.h>

#define PFX "model.language_model."

/* Run the generator into DIR (under the case's temporary directory). */
static bool generate(const char *dir, const char *args)
{
	char cmd[8192];
	int n = snprintf(cmd, sizeof(cmd),
			 "python3 '%s/scripts/make-synthetic-checkpoint.py' --out '%s' --summary '%s.summary.json' %s",
			 hb_test_srcdir(), dir, dir, args);
	if (n < 0 || (size_t)n >= sizeof(cmd))
		return false;
	return system(cmd) == 0;
}

static int convert(const char *src, const char *out, enum hb_expert_codec_opt ec,
		   enum hb_ple_codec_opt pc, cJSON **report)
{
	struct hb_convert_opts o;
	struct hb_error err;
	int rc;

	memset(&o, 0, sizeof(o));
	o.src_dir = src;
	o.out_path = out;
	o.expert_codec = ec;
	o.ple_codec = pc;
	o.profile = "auto";
	o.threads = 2;
	hb_error_clear(&err);
	rc = hb_convert(&o, report, &err);
	if (rc)
		hb_check_fail(__FILE__, __LINE__, "convert %s: %s", src, err.msg);
	return rc;
}

struct artifact {
	int fd;
	struct hb_gguf g;
	struct hb_st_checkpoint ck;
	bool ok;
};

static void open_both(const char *gguf, const char *src, struct artifact *a)
{
	a->fd = open(gguf, O_RDONLY);
	hb_gguf_init(&a->g);
	a->ok = a->fd >= 0 && hb_gguf_read_fd(&a->g, a->fd, NULL, NULL) == HB_OK &&
		hb_st_checkpoint_open(&a->ck, src, NULL) == HB_OK;
	CHECK(a->ok);
}

static void close_both(struct artifact *a)
{
	hb_gguf_release(&a->g);
	if (a->ok)
		hb_st_checkpoint_close(&a->ck);
	if (a->fd >= 0)
		close(a->fd);
}

static const char *report_str(const cJSON *rep, const char *obj, const char *key)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(rep, obj);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int report_bool(const cJSON *rep, const char *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rep, obj), key);
	return cJSON_IsBool(v) ? cJSON_IsTrue(v) : -1;
}

static float decode(enum hb_dtype t, const uint8_t *p)
{
	uint16_t h = (uint16_t)(p[0] | p[1] << 8);
	float f;

	switch (t) {
	case HB_DTYPE_BF16: return fp_ref_bf16_to_f32(h);
	case HB_DTYPE_F16: return (float)fp_ref_f16_to_double(h); /* exact: binary16 is inside float32 */
	default: memcpy(&f, p, 4); return f;
	}
}

/* The PLE tables of a checkpoint, in row order: one table of `parts`
 * shards per PLE layer. */
static int ple_source_rows(const struct artifact *a, const uint32_t *layers, size_t n_layers,
			   unsigned parts, struct hb_st_ref *refs)
{
	int n = 0;

	for (size_t l = 0; l < n_layers; l++) {
		for (unsigned k = 0; k < parts; k++) {
			char name[200];
			snprintf(name, sizeof(name), PFX "layers.%u.ple.ple_embedding.ngram_embedding.shard_%u.weight",
				 layers[l] - 1, k);
			if (!hb_st_checkpoint_find(&a->ck, name, &refs[n]))
				hb_check_fail(__FILE__, __LINE__, "source lacks %s", name);
			else
				n++;
		}
	}
	return n;
}

/*
 * 16 n-gram heads x 32 = ple_embed_dim 512: rows 32 wide, one affine4 group
 * each.  Two PLE tables (layers 1 and 2) share the row space.
 */
#define PLE_ARGS "--heads-per-ngram 8 --ple-embed-dim 512 --ple-layers 1,2 --split-ngram-parts 2"

static void ple_affine4_g32_within_bound(void)
{
	static const uint32_t layers[2] = {1, 2};
	struct artifact a;
	struct hb_st_ref refs[4];
	struct hb_ple_store *s = NULL;
	const struct hb_gguf_tensor *t;
	uint64_t row = 0, over = 0, inexact = 0, values = 0, lib_below = 0;
	uint8_t src[32 * 4];
	float got[32];
	int nref;

	CHECK(generate("ck", PLE_ARGS));
	if (convert("ck", "a.gguf", HB_CONV_EXPERTS_BF16, HB_CONV_PLE_AFFINE4_G32, NULL))
		return;
	open_both("a.gguf", "ck", &a);
	t = hb_gguf_find_tensor(&a.g, HB_TENSOR_PLE_STORE);
	CHECK(t != NULL);
	if (!a.ok || !t || hb_ple_store_open(&s, a.fd, t->offset, t->nbytes, NULL)) {
		CHECK(!"PLE store opens");
		close_both(&a);
		return;
	}
	CHECK_EQ_U64(hb_ple_store_layout(s)->row_width, 32);
	nref = ple_source_rows(&a, layers, 2, 2, refs);
	CHECK_EQ_INT(nref, 4);
	for (int k = 0; k < nref; k++) {
		const struct hb_st_tensor *st = refs[k].tensor;
		CHECK_EQ_U64(st->shape[1], 32);
		for (uint64_t i = 0; i < st->shape[0]; i++, row++) {
			float lo = INFINITY, hi = -INFINITY, x[32];
			double bound;
			if (hb_st_read(refs[k].file, st, i * 64, src, 64, NULL) ||
			    hb_ple_row_read_f32(s, row, NULL, got, 32, NULL)) {
				over++;
				continue;
			}
			for (int j = 0; j < 32; j++) {
				x[j] = decode(HB_DTYPE_BF16, src + 2 * j);
				lo = fminf(lo, x[j]);
				hi = fmaxf(hi, x[j]);
			}
			bound = fp_ref_affine4_bound(lo, hi);
			lib_below += !(hb_affine4_error_bound(lo, hi) >= bound);
			for (int j = 0; j < 32; j++, values++) {
				over += !(fabs((double)got[j] - (double)x[j]) <= bound);
				inexact += got[j] != x[j];
			}
		}
	}
	CHECK_EQ_U64(over, 0);
	CHECK_EQ_U64(lib_below, 0); /* the codec's documented bound is sound */
	CHECK_EQ_U64(row, hb_ple_store_layout(s)->physical_rows);
	/* the codec really quantised (a copy would pass the bound trivially) */
	CHECK(inexact > values / 2);
	hb_ple_store_close(s);
	close_both(&a);
}

static void ple_bf16_bit_exact(void)
{
	static const uint32_t layers[2] = {1, 2};
	struct artifact a;
	struct hb_st_ref refs[4];
	struct hb_ple_store *s = NULL;
	const struct hb_gguf_tensor *t;
	uint64_t row = 0, bad = 0;
	uint8_t src[64], got[64];
	int nref;

	CHECK(generate("ck", PLE_ARGS));
	if (convert("ck", "b.gguf", HB_CONV_EXPERTS_BF16, HB_CONV_PLE_BF16, NULL))
		return;
	open_both("b.gguf", "ck", &a);
	t = hb_gguf_find_tensor(&a.g, HB_TENSOR_PLE_STORE);
	if (!a.ok || !t || hb_ple_store_open(&s, a.fd, t->offset, t->nbytes, NULL)) {
		CHECK(!"PLE store opens");
		close_both(&a);
		return;
	}
	nref = ple_source_rows(&a, layers, 2, 2, refs);
	for (int k = 0; k < nref; k++) {
		const struct hb_st_tensor *st = refs[k].tensor;
		for (uint64_t i = 0; i < st->shape[0]; i++, row++)
			bad += hb_st_read(refs[k].file, st, i * 64, src, 64, NULL) ||
			       hb_ple_row_read(s, row, NULL, got, sizeof(got), NULL) ||
			       memcmp(src, got, 64);
	}
	CHECK_EQ_U64(bad, 0);
	CHECK_EQ_U64(row, hb_ple_store_layout(s)->physical_rows);
	hb_ple_store_close(s);
	close_both(&a);
}

/* Every dense artifact tensor has the source's GGUF type and bytes. */
static void check_dense(const struct artifact *a, uint32_t want_type, uint64_t *n_dense)
{
	for (uint64_t i = 0; i < a->g.n_tensors; i++) {
		const struct hb_gguf_tensor *t = &a->g.tensors[i];
		char name[256];
		struct hb_st_ref r;
		uint8_t *x, *y;
		if (!strcmp(t->name.ptr, HB_TENSOR_EXPERT_STORE) || !strcmp(t->name.ptr, HB_TENSOR_PLE_STORE))
			continue;
		snprintf(name, sizeof(name), "%s%s", strcmp(t->name.ptr, "lm_head.weight") ? PFX : "",
			 t->name.ptr);
		if (!hb_st_checkpoint_find(&a->ck, name, &r)) {
			hb_check_fail(__FILE__, __LINE__, "%s has no source %s", t->name.ptr, name);
			continue;
		}
		if (t->ggml_type != want_type)
			hb_check_fail(__FILE__, __LINE__, "%s: GGUF type %u, want %u", t->name.ptr,
				      t->ggml_type, want_type);
		x = malloc((size_t)t->nbytes + 1);
		y = malloc((size_t)t->nbytes + 1);
		if (!x || !y || t->nbytes != r.tensor->nbytes ||
		    hb_pread_full(a->fd, x, (size_t)t->nbytes, t->offset, "a", NULL) ||
		    hb_st_read(r.file, r.tensor, 0, y, (size_t)t->nbytes, NULL) ||
		    memcmp(x, y, (size_t)t->nbytes))
			hb_check_fail(__FILE__, __LINE__, "%s differs from its source", t->name.ptr);
		free(x);
		free(y);
		(*n_dense)++;
	}
}

/* Every bf16 record component is the source expert rounded to nearest even. */
static void check_experts_rounded(const struct artifact *a, enum hb_dtype dt, uint32_t layers,
				  uint32_t experts, uint32_t top_k, uint64_t H, uint64_t I)
{
	static const char *const role[3] = {"gate", "up", "down"};
	struct hb_em_geometry geo = {layers, experts, top_k, H, I};
	const struct hb_gguf_tensor *em = hb_gguf_find_tensor(&a->g, HB_TENSOR_EXPERT_STORE);
	struct hb_em_layout l;
	size_t n = (size_t)(H * I), es = hb_dtype_size(dt);
	uint8_t *rec = malloc(n * 2), *src = malloc(n * es);
	uint64_t bad = 0, changed = 0;

	memset(&l, 0, sizeof(l));
	if (!em || !rec || !src || hb_em_parse_fd(a->fd, em->offset, em->nbytes, &geo, &l, NULL, NULL)) {
		CHECK(!"expert store parses");
		goto out;
	}
	for (uint32_t L = 0; L < layers; L++) {
		for (uint32_t E = 0; E < experts; E++) {
			for (int k = 0; k < 3; k++) {
				char name[200];
				struct hb_st_ref r;
				size_t got = 0;
				snprintf(name, sizeof(name), PFX "layers.%u.mlp.experts.%u.%s_proj.weight", L, E, role[k]);
				if (hb_em_record_read(a->fd, em->offset, &l, L, E, k, rec, n * 2, &got, NULL) ||
				    got != n * 2 || !hb_st_checkpoint_find(&a->ck, name, &r) ||
				    hb_st_read(r.file, r.tensor, 0, src, n * es, NULL)) {
					bad++;
					continue;
				}
				for (size_t i = 0; i < n; i++) {
					float x = decode(dt, src + i * es);
					uint16_t want = fp_ref_bf16_rne(x);
					bad += (uint16_t)(rec[2 * i] | rec[2 * i + 1] << 8) != want;
					changed += fp_ref_bf16_to_f32(want) != x;
				}
			}
		}
	}
	CHECK_EQ_U64(bad, 0);
	CHECK(changed > 0); /* the sources really needed rounding */
	hb_em_layout_release(&l);
out:
	free(rec);
	free(src);
}

static void precision_case(const char *dtype_arg, enum hb_dtype dt, uint32_t ggml, const char *name)
{
	char args[128];
	struct artifact a;
	cJSON *rep = NULL;
	uint64_t n_dense = 0;

	snprintf(args, sizeof(args), "--dtype %s", dtype_arg);
	CHECK(generate("ck", args));
	if (convert("ck", "p.gguf", HB_CONV_EXPERTS_BF16, HB_CONV_PLE_BF16, &rep))
		return;
	CHECK_STR(report_str(rep, "codecs", "experts_source_dtype"), name);
	CHECK_EQ_INT(report_bool(rep, "codecs", "experts_rounded_to_bf16"), 1);
	open_both("p.gguf", "ck", &a);
	if (a.ok) {
		check_dense(&a, ggml, &n_dense);
		/* 4 layers (3 linear, 1 sparse), PLE on layer 2: the generator's
		 * default geometry has 99 dense tensors */
		CHECK_EQ_U64(n_dense, 99);
		CHECK_EQ_U64(n_dense + 2, a.g.n_tensors);
		check_experts_rounded(&a, dt, 4, 8, 2, 64, 64);
	}
	close_both(&a);
	cJSON_Delete(rep);
}

static void f16_sources(void)
{
	precision_case("f16", HB_DTYPE_F16, HB_GGML_F16, "F16");
}

static void f32_sources(void)
{
	precision_case("f32", HB_DTYPE_F32, HB_GGML_F32, "F32");
}

static void bf16_sources_not_rounded(void)
{
	struct artifact a;
	cJSON *rep = NULL;
	uint64_t n_dense = 0;

	CHECK(generate("ck", ""));
	if (convert("ck", "p.gguf", HB_CONV_EXPERTS_BF16, HB_CONV_PLE_BF16, &rep))
		return;
	CHECK_STR(report_str(rep, "codecs", "experts_source_dtype"), "BF16");
	CHECK_EQ_INT(report_bool(rep, "codecs", "experts_rounded_to_bf16"), 0);
	CHECK_EQ_INT(report_bool(rep, "codecs", "ple_rounded_to_bf16"), 0);
	open_both("p.gguf", "ck", &a);
	if (a.ok) {
		check_dense(&a, HB_GGML_BF16, &n_dense);
		CHECK_EQ_U64(n_dense, 99);
	}
	close_both(&a);
	cJSON_Delete(rep);
}

HB_TEST_MAIN(T(ple_affine4_g32_within_bound), T(ple_bf16_bit_exact), T(f16_sources),
	     T(f32_sources), T(bf16_sources_not_rounded))
