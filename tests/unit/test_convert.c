/*
 * Unit tests: hb_convert on the upstream fixtures.  Every expectation is
 * checked against the SOURCE checkpoint read independently through the
 * safetensors reader (not against the converter's own report): dense tensors
 * and bf16 expert records bit-identical, PLE rows bit-identical, FP8 experts
 * equal to torch's dequantisation (an oracle array) rounded to bf16, every
 * digest recomputable, nothing published on any failure.  Expected bf16
 * values and the affine4 error bound come from tests/unit/fp_ref.c (this
 * file's own round-to-nearest-even on the float32 bits, and a double case
 * analysis of the encoding rule), never from hb_f32_to_bf16 or
 * hb_affine4_error_bound, which are checked against them here.
 */
#include "hb_base.h"
#include "harness.h"
#include "fp_ref.h"
#include "codec/hb_affine4.h"
#include "artifact/hb_artifact.h"
#include "hb-convert/hb_convert.h"
#include "expert/hb_expert_store.h"
#include "hb_fault.h"
#include "gguf/hb_gguf.h"
#include "hb_half.h"
#include "hb_io.h"
#include "hb_json.h"
#include "ple/hb_ple_store.h"
#include "checkpoint/hb_safetensors.h"

#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *ckpt(const char *set)
{
	static char path[4096];
	snprintf(path, sizeof(path), "%s/tests/fixtures/upstream/%s/checkpoint", hb_test_srcdir(), set);
	return path;
}

static int convert(const char *src, const char *out, enum hb_expert_codec_opt ec,
		   cJSON **report, struct hb_error *err)
{
	struct hb_convert_opts o;

	memset(&o, 0, sizeof(o));
	o.src_dir = src;
	o.out_path = out;
	o.expert_codec = ec;
	o.ple_codec = HB_CONV_PLE_BF16;
	o.profile = "auto";
	hb_error_clear(err);
	return hb_convert(&o, report, err);
}

struct artifact {
	int fd;
	struct hb_gguf g;
};

static bool open_artifact(const char *path, struct artifact *a)
{
	a->fd = open(path, O_RDONLY);
	hb_gguf_init(&a->g);
	return a->fd >= 0 && hb_gguf_read_fd(&a->g, a->fd, NULL, NULL) == HB_OK;
}

static void close_artifact(struct artifact *a)
{
	hb_gguf_release(&a->g);
	if (a->fd >= 0)
		close(a->fd);
}

static bool tensor_equals_source(const struct artifact *a, const struct hb_gguf_tensor *t,
				 const struct hb_st_ref *src)
{
	uint8_t *x = malloc((size_t)t->nbytes + 1), *y = malloc((size_t)t->nbytes + 1);
	bool same = x && y && t->nbytes == src->tensor->nbytes &&
		    hb_pread_full(a->fd, x, (size_t)t->nbytes, t->offset, "a", NULL) == HB_OK &&
		    hb_st_read(src->file, src->tensor, 0, y, (size_t)t->nbytes, NULL) == HB_OK &&
		    memcmp(x, y, (size_t)t->nbytes) == 0;
	free(x);
	free(y);
	return same;
}

/* Every dense artifact tensor is the source tensor of the same name with the
 * multimodal prefix dropped, byte for byte. */
static void check_dense(const struct artifact *a, const struct hb_st_checkpoint *ck,
			unsigned *n_dense)
{
	for (uint64_t i = 0; i < a->g.n_tensors; i++) {
		const struct hb_gguf_tensor *t = &a->g.tensors[i];
		char src[256];
		struct hb_st_ref r;
		if (!strcmp(t->name.ptr, HB_TENSOR_EXPERT_STORE) || !strcmp(t->name.ptr, HB_TENSOR_PLE_STORE))
			continue;
		snprintf(src, sizeof(src), "%s%s", strcmp(t->name.ptr, "lm_head.weight") ?
			 "model.language_model." : "", t->name.ptr);
		if (!hb_st_checkpoint_find(ck, src, &r) || !tensor_equals_source(a, t, &r))
			hb_check_fail(__FILE__, __LINE__, "dense tensor %s differs from %s", t->name.ptr, src);
		(*n_dense)++;
	}
}

/* Every bf16 record component equals the source expert's raw bytes. */
static void check_experts_bf16(const struct artifact *a, const struct hb_st_checkpoint *ck,
			       const struct hb_em_layout *l, bool packed)
{
	static const char *const role[3] = {"gate", "up", "down"};
	size_t cap = (size_t)l->layers[0].comp[0].expert_bytes * 2;
	uint8_t *rec = malloc(cap), *src = malloc(cap);
	unsigned bad = 0;

	for (uint32_t L = 0; L < l->layer_count; L++) {
		for (uint32_t E = 0; E < l->expert_count; E++) {
			for (int k = 0; k < 3; k++) {
				char name[200];
				struct hb_st_ref r;
				size_t got = 0;
				uint64_t off;
				if (hb_em_record_read(a->fd, a->g.tensors[0].offset * 0 +
						      hb_gguf_find_tensor(&a->g, HB_TENSOR_EXPERT_STORE)->offset,
						      l, L, E, k, rec, cap, &got, NULL)) {
					bad++;
					continue;
				}
				if (packed) {
					uint64_t H = l->layers[L].comp[0].dim[0], I = l->layers[L].comp[0].dim[1];
					snprintf(name, sizeof(name), "model.language_model.layers.%u.mlp.experts.%s",
						 L, k < 2 ? "gate_up_proj" : "down_proj");
					off = k < 2 ? ((uint64_t)E * 2 * I + (k == 1 ? I : 0)) * H * 2 : (uint64_t)E * H * I * 2;
				} else {
					snprintf(name, sizeof(name), "model.language_model.layers.%u.mlp.experts.%u.%s_proj.weight",
						 L, E, role[k]);
					off = 0;
				}
				if (!hb_st_checkpoint_find(ck, name, &r) ||
				    hb_st_read(r.file, r.tensor, off, src, got, NULL) || memcmp(rec, src, got))
					bad++;
			}
		}
	}
	CHECK_EQ_INT(bad, 0);
	free(rec);
	free(src);
}

/* Every PLE row, read through the verified single-snapshot API, equals the
 * source table rows (shards concatenated in order). */
static void check_ple(const struct artifact *a, const struct hb_st_checkpoint *ck,
		      const char *const *shards, size_t nshards, uint64_t width)
{
	const struct hb_gguf_tensor *t = hb_gguf_find_tensor(&a->g, HB_TENSOR_PLE_STORE);
	struct hb_ple_store *s = NULL;
	struct hb_ple_verify_report rep;
	uint64_t row = 0;
	unsigned bad = 0;
	uint8_t out[4096], src[4096];

	CHECK(t != NULL);
	if (!t)
		return;
	CHECK_EQ_INT(hb_ple_store_open(&s, a->fd, t->offset, t->nbytes, NULL), HB_OK);
	if (!s)
		return;
	for (size_t k = 0; k < nshards; k++) {
		struct hb_st_ref r;
		CHECK(hb_st_checkpoint_find(ck, shards[k], &r));
		for (uint64_t i = 0; i < r.tensor->shape[0]; i++, row++) {
			if (hb_ple_row_read(s, row, NULL, out, sizeof(out), NULL) ||
			    hb_st_read(r.file, r.tensor, i * width * 2, src, (size_t)width * 2, NULL) ||
			    memcmp(out, src, (size_t)width * 2))
				bad++;
		}
	}
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_U64(row, hb_ple_store_layout(s)->physical_rows);
	CHECK_EQ_INT(hb_ple_payload_verify(s, NULL, NULL, NULL, &rep, NULL), HB_OK);
	CHECK(rep.payload_ok && rep.bad_pages == 0);
	hb_ple_store_close(s);
}

static void realshape_bf16(void)
{
	struct hb_st_checkpoint ck;
	struct artifact a;
	struct hb_error err;
	struct hb_em_layout l;
	struct hb_em_geometry geo = {8, 32, 10, 64, 0};
	cJSON *rep = NULL;
	unsigned n_dense = 0;
	uint64_t u = 0;
	const char *shards[4];
	char names[4][160];
	const struct hb_gguf_tensor *em;

	CHECK_EQ_INT(convert(ckpt("realshape"), "r.gguf", HB_CONV_EXPERTS_BF16, &rep, &err), HB_OK);
	CHECK_STR(err.msg, "");
	CHECK_EQ_INT(hb_st_checkpoint_open(&ck, ckpt("realshape"), NULL), HB_OK);
	CHECK(open_artifact("r.gguf", &a));
	/* every source tensor is listed once in the report */
	CHECK_EQ_U64((uint64_t)cJSON_GetArraySize(cJSON_GetObjectItem(rep, "tensors")), ck.ntensors);
	CHECK_EQ_INT(hb_json_u64(cJSON_GetObjectItem(rep, "exclusions")->child, "tensors", "v", &u, NULL), HB_OK);
	CHECK_EQ_U64(u, 21); /* the vision tower, by rule */
	check_dense(&a, &ck, &n_dense);
	CHECK_EQ_U64(n_dense + 2, a.g.n_tensors);
	em = hb_gguf_find_tensor(&a.g, HB_TENSOR_EXPERT_STORE);
	CHECK(em && em->offset % 4096 == 0);
	{
		uint32_t I = 0;
		CHECK_EQ_INT(hb_gguf_get_u32(&a.g, HB_KEY_EXPERT_WIDTH, &I, NULL), HB_OK);
		geo.intermediate = I;
	}
	memset(&l, 0, sizeof(l));
	CHECK_EQ_INT(hb_em_parse_fd(a.fd, em->offset, em->nbytes, &geo, &l, NULL, NULL), HB_OK);
	CHECK_EQ_INT(hb_em_verify_payload(a.fd, em->offset, &l, NULL), HB_OK);
	check_experts_bf16(&a, &ck, &l, false);
	hb_em_layout_release(&l);
	for (int k = 0; k < 4; k++) {
		snprintf(names[k], sizeof(names[k]),
			 "model.language_model.layers.1.ple.ple_embedding.ngram_embedding.shard_%d.weight", k);
		shards[k] = names[k];
	}
	check_ple(&a, &ck, shards, 4, 5);
	{
		const struct hb_gguf_str *s = NULL;
		CHECK_EQ_INT(hb_gguf_get_str(&a.g, HB_KEY_STATUS, &s, NULL), HB_OK);
		CHECK_STR(s ? s->ptr : NULL, "correctness-fixture");
		CHECK_EQ_INT(hb_gguf_get_str(&a.g, HB_KEY_PROFILE, &s, NULL), HB_OK);
		CHECK_STR(s ? s->ptr : NULL, "dev");
	}
	close_artifact(&a);
	hb_st_checkpoint_close(&ck);
	cJSON_Delete(rep);
}

static void general_bf16(void)
{
	struct hb_st_checkpoint ck;
	struct artifact a;
	struct hb_error err;
	unsigned n_dense = 0;
	const char *shards[4] = {
		"model.language_model.layers.0.ple.ple_embedding.ngram_embedding.shard_0.weight",
		"model.language_model.layers.0.ple.ple_embedding.ngram_embedding.shard_1.weight",
		"model.language_model.layers.4.ple.ple_embedding.ngram_embedding.shard_0.weight",
		"model.language_model.layers.4.ple.ple_embedding.ngram_embedding.shard_1.weight",
	};
	const struct hb_gguf_value *v = NULL;

	CHECK_EQ_INT(convert(ckpt("general"), "g.gguf", HB_CONV_EXPERTS_BF16, NULL, &err), HB_OK);
	CHECK_STR(err.msg, "");
	CHECK_EQ_INT(hb_st_checkpoint_open(&ck, ckpt("general"), NULL), HB_OK);
	CHECK(open_artifact("g.gguf", &a));
	check_dense(&a, &ck, &n_dense);
	check_ple(&a, &ck, shards, 4, 4); /* two tables, one row space */
	/* resolved values, never the raw spelling: the output gate defaulted */
	{
		const struct hb_gguf_str *s = NULL;
		CHECK_EQ_INT(hb_gguf_get_str(&a.g, HB_KEY_GDN_GATE, &s, NULL), HB_OK);
		CHECK_STR(s ? s->ptr : NULL, "silu");
	}
	CHECK_EQ_INT(hb_gguf_get_array(&a.g, HB_KEY_PLE_LAYERS, HB_GGUF_U32, &v, NULL), HB_OK);
	CHECK(v && v->count == 2 && ((uint32_t *)v->elems)[0] == 1 && ((uint32_t *)v->elems)[1] == 5);
	close_artifact(&a);
	hb_st_checkpoint_close(&ck);
}

static void realshape_spelling_resolved(void)
{
	struct artifact a;
	struct hb_error err;
	const struct hb_gguf_value *v = NULL;

	CHECK_EQ_INT(convert(ckpt("realshape"), "r.gguf", HB_CONV_EXPERTS_BF16, NULL, &err), HB_OK);
	CHECK(open_artifact("r.gguf", &a));
	CHECK_EQ_INT(hb_gguf_get_array(&a.g, HB_KEY_LAYER_TYPES, HB_GGUF_STRING, &v, NULL), HB_OK);
	if (v) {
		const struct hb_gguf_str *s = v->elems;
		CHECK_EQ_U64(v->count, 8);
		CHECK_STR(s[3].ptr, "qwen_sparse_attention"); /* config.json says full_attention */
		CHECK_STR(s[0].ptr, "linear_attention");
	}
	close_artifact(&a);
}

static void packed_equals_per_expert(void)
{
	struct hb_error err;
	cJSON *r1 = NULL, *r2 = NULL;
	const char *d1 = NULL, *d2 = NULL;
	struct hb_st_checkpoint ck;
	struct artifact a;
	struct hb_em_layout l;
	struct hb_em_geometry geo = {8, 32, 10, 64, 0};

	CHECK_EQ_INT(convert(ckpt("realshape"), "a.gguf", HB_CONV_EXPERTS_BF16, &r1, &err), HB_OK);
	CHECK_EQ_INT(convert(ckpt("realshape-packed"), "b.gguf", HB_CONV_EXPERTS_BF16, &r2, &err), HB_OK);
	CHECK_STR(err.msg, "");
	if (!r1 || !r2)
		goto out;
	hb_json_str(cJSON_GetObjectItem(cJSON_GetObjectItem(r1, "stores"), "experts"), "payload_sha256", "p", &d1, NULL);
	hb_json_str(cJSON_GetObjectItem(cJSON_GetObjectItem(r2, "stores"), "experts"), "payload_sha256", "p", &d2, NULL);
	CHECK_STR(d1, d2); /* the same records, whatever the source layout */
	CHECK_EQ_INT(hb_st_checkpoint_open(&ck, ckpt("realshape-packed"), NULL), HB_OK);
	CHECK(open_artifact("b.gguf", &a));
	{
		const struct hb_gguf_tensor *em = hb_gguf_find_tensor(&a.g, HB_TENSOR_EXPERT_STORE);
		uint32_t I = 0;
		hb_gguf_get_u32(&a.g, HB_KEY_EXPERT_WIDTH, &I, NULL);
		geo.intermediate = I;
		memset(&l, 0, sizeof(l));
		CHECK_EQ_INT(hb_em_parse_fd(a.fd, em->offset, em->nbytes, &geo, &l, NULL, NULL), HB_OK);
		check_experts_bf16(&a, &ck, &l, true);
		hb_em_layout_release(&l);
	}
	close_artifact(&a);
	hb_st_checkpoint_close(&ck);
out:
	cJSON_Delete(r1);
	cJSON_Delete(r2);
}

/* FP8 experts: fp8 * scale_inv per 128x128 block (torch's float32 result,
 * an independent-cross-check array of the fixture), then rounded to bf16
 * by the test's own rounding (fp_ref_bf16_rne). */
static void fp8_matches_torch_dequantisation(void)
{
	struct hb_error err;
	struct artifact a;
	struct hb_em_layout l;
	struct hb_em_geometry geo = {8, 32, 10, 64, 0};
	cJSON *rep = NULL, *m = NULL;
	bool rounded = false;
	char path[4096];
	static const char *const roles[3] = {"gate", "up", "down"};
	unsigned bad = 0, compared = 0, inexact = 0;

	CHECK_EQ_INT(convert(ckpt("realshape-fp8"), "f.gguf", HB_CONV_EXPERTS_BF16, &rep, &err), HB_OK);
	CHECK_STR(err.msg, "");
	CHECK_EQ_INT(hb_json_bool(cJSON_GetObjectItem(rep, "codecs"), "experts_rounded_to_bf16", "r", &rounded, NULL), HB_OK);
	CHECK(rounded); /* said, not silent */
	CHECK(open_artifact("f.gguf", &a));
	{
		uint32_t I = 0;
		hb_gguf_get_u32(&a.g, HB_KEY_EXPERT_WIDTH, &I, NULL);
		geo.intermediate = I;
	}
	memset(&l, 0, sizeof(l));
	CHECK_EQ_INT(hb_em_parse_fd(a.fd, hb_gguf_find_tensor(&a.g, HB_TENSOR_EXPERT_STORE)->offset,
				    hb_gguf_find_tensor(&a.g, HB_TENSOR_EXPERT_STORE)->nbytes, &geo, &l, NULL, NULL), HB_OK);
	snprintf(path, sizeof(path), "%s/tests/fixtures/upstream/realshape-fp8/oracle/manifest.json", hb_test_srcdir());
	CHECK_EQ_INT(hb_json_parse_file(path, 64u << 20, &m, NULL), HB_OK);
	for (int L = 0; m && L < 8; L += 7) {
		for (int k = 0; k < 3; k++) {
			char file[4096], *deq = NULL;
			size_t len = 0;
			uint64_t per = l.layers[L].comp[k].dim[0] * l.layers[L].comp[k].dim[1];
			uint16_t *rec = malloc((size_t)per * 2);
			snprintf(file, sizeof(file), "%s/tests/fixtures/upstream/realshape-fp8/oracle/deq.%s.L%02d.bin",
				 hb_test_srcdir(), roles[k], L);
			CHECK_EQ_INT(hb_read_file(file, 64u << 20, &deq, &len, NULL), HB_OK);
			for (uint32_t E = 0; deq && E < 32; E++) {
				const float *want = (const float *)deq + (size_t)E * per;
				CHECK_EQ_INT(hb_em_record_read(a.fd, hb_gguf_find_tensor(&a.g, HB_TENSOR_EXPERT_STORE)->offset,
							       &l, (uint32_t)L, E, k, rec, (size_t)per * 2, NULL, NULL), HB_OK);
				for (uint64_t i = 0; i < per; i++, compared++) {
					bad += rec[i] != fp_ref_bf16_rne(want[i]);
					inexact += fp_ref_bf16_to_f32(rec[i]) != want[i];
				}
			}
			free(deq);
			free(rec);
		}
	}
	CHECK(compared > 0);
	CHECK_EQ_INT(bad, 0);
	printf("# fp8: %u of %u dequantised values needed rounding to bf16\n", inexact, compared);
	CHECK(inexact > compared / 2); /* the rounding is exercised, not a copy (measured 84%) */
	hb_em_layout_release(&l);
	close_artifact(&a);
	cJSON_Delete(m);
	cJSON_Delete(rep);
}

static int abort_at(void *ctx, const char *stage)
{
	return !strcmp(stage, (const char *)ctx);
}

/* A failure at any point leaves no target and no temporary file, and an
 * existing target exactly as it was. */
static void failures_publish_nothing(void)
{
	static const char *const stages[] = {"inventory", "plan", "header", "dense", "experts",
					     "ple", "sources-unchanged"};
	struct hb_convert_opts o;
	struct hb_error err;

	memset(&o, 0, sizeof(o));
	o.src_dir = ckpt("realshape");
	o.out_path = "out.gguf";
	o.expert_codec = HB_CONV_EXPERTS_BF16;
	o.ple_codec = HB_CONV_PLE_BF16;
	o.stage_hook = abort_at;
	for (size_t i = 0; i < HB_ARRAY_LEN(stages); i++) {
		o.stage_ctx = (void *)stages[i];
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_convert(&o, NULL, &err), HB_ERR_FAULT);
		CHECK_STR(err.id, "conv-stage");
		CHECK(!hb_test_exists("out.gguf"));
		CHECK_EQ_INT(hb_test_count_prefix(".", ".out.gguf.hbtmp"), 0);
	}
	o.stage_hook = NULL;
	/* injected system faults, with an existing target that must survive */
	CHECK(hb_test_write_file("out.gguf", "old", 3) == 0);
	o.force = true;
	{
		static const struct { enum hb_fault_site site; unsigned nth; int e; } f[] = {
			{HB_FAULT_WRITE, 1, EIO}, {HB_FAULT_WRITE, 50, ENOSPC},
			{HB_FAULT_FSYNC, 1, EIO}, {HB_FAULT_RENAME, 1, EXDEV},
			{HB_FAULT_DIRSYNC, 1, EIO}, {HB_FAULT_READ, 3, EIO},
		};
		for (size_t i = 0; i < HB_ARRAY_LEN(f); i++) {
			char *data = NULL;
			size_t len = 0;
			hb_fault_reset();
			hb_fault_arm(f[i].site, f[i].nth, f[i].e);
			hb_error_clear(&err);
			CHECK(hb_convert(&o, NULL, &err) != HB_OK);
			hb_fault_reset();
			CHECK_EQ_INT(hb_read_file("out.gguf", 100, &data, &len, NULL), HB_OK);
			CHECK(len == 3 && data && !memcmp(data, "old", 3));
			free(data);
			CHECK_EQ_INT(hb_test_count_prefix(".", ".out.gguf.hbtmp"), 0);
		}
	}
	/* without --force the old target is refused before any work */
	o.force = false;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_convert(&o, NULL, &err), HB_ERR_EXISTS);
}

/* A shard that changes while it is being converted is not published. */
static int touch_shard(void *ctx, const char *stage)
{
	if (!strcmp(stage, "experts")) {
		int fd = open((const char *)ctx, O_WRONLY | O_APPEND);
		if (fd >= 0) {
			if (write(fd, " ", 1) != 1)
				return 1;
			close(fd);
		}
	}
	return 0;
}

static bool copy_dir(const char *from, const char *to)
{
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", from, to);
	return system(cmd) == 0;
}

static void changed_source_refused(void)
{
	struct hb_convert_opts o;
	struct hb_error err;
	char shard[4096];

	CHECK(copy_dir(ckpt("general"), "src"));
	snprintf(shard, sizeof(shard), "%s/src/model.safetensors", hb_test_tmpdir());
	memset(&o, 0, sizeof(o));
	o.src_dir = "src";
	o.out_path = "out.gguf";
	o.expert_codec = HB_CONV_EXPERTS_BF16;
	o.ple_codec = HB_CONV_PLE_BF16;
	o.stage_hook = touch_shard;
	o.stage_ctx = shard;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_convert(&o, NULL, &err), HB_ERR_CHANGED);
	CHECK_STR(err.id, "st-source-changed");
	CHECK(!hb_test_exists("out.gguf"));
	CHECK_EQ_INT(hb_test_count_prefix(".", ".out.gguf.hbtmp"), 0);
}

/* Edit one config.json value of a copied checkpoint and convert it. */
static int convert_edited(const char *set, const char *from, const char *to, struct hb_error *err)
{
	char cmd[8192], path[4096];
	snprintf(path, sizeof(path), "%s/src", hb_test_tmpdir());
	snprintf(cmd, sizeof(cmd), "rm -rf src out.gguf && cp -r '%s' src && "
		 "python3 -c \"import sys;p='src/config.json';s=open(p).read();"
		 "assert sys.argv[1] in s;open(p,'w').write(s.replace(sys.argv[1],sys.argv[2],1))\" '%s' '%s'",
		 ckpt(set), from, to);
	if (system(cmd) != 0)
		return HB_ERR_INTERNAL;
	return convert(path, "out.gguf", HB_CONV_EXPERTS_BF16, NULL, err);
}

static void ple_hash_identity_enforced(void)
{
	struct hb_error err;

	/* a different seed: the stored multipliers disagree */
	CHECK_EQ_INT(convert_edited("general", "\"seed\": 77", "\"seed\": 78", &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "conv-ple-hash");
	CHECK(strstr(err.field, "layer_multipliers") != NULL);
	/* no seed at all: upstream's default 1234 is not what general used */
	CHECK_EQ_INT(convert_edited("general", "\"seed\": 77,", "", &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "conv-ple-hash");
	CHECK(strstr(err.msg, "no seed") != NULL);
	/* realshape used 1234: the stored buffers settle the default */
	CHECK_EQ_INT(convert_edited("realshape", "\"seed\": 1234,", "", &err), HB_OK);
	/* a different prime base moves the head sizes */
	CHECK_EQ_INT(convert_edited("general", "\"ngram_vocab_size_base\": 500", "\"ngram_vocab_size_base\": 499", &err),
		     HB_ERR_CONTRACT);
	CHECK_STR(err.id, "conv-ple-hash");
	/* a layer-type spelling upstream does not know */
	CHECK_EQ_INT(convert_edited("realshape", "\"full_attention\"", "\"dense_attention\"", &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "cfg-invalid");
	/* the real profile on a development checkpoint */
	{
		struct hb_convert_opts o;
		memset(&o, 0, sizeof(o));
		o.src_dir = ckpt("realshape");
		o.out_path = "out.gguf";
		o.expert_codec = HB_CONV_EXPERTS_BF16;
		o.ple_codec = HB_CONV_PLE_BF16;
		o.profile = "qwen4exp-flash-next";
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_convert(&o, NULL, &err), HB_ERR_CONTRACT);
		CHECK_STR(err.id, "profile-mismatch");
		CHECK(!hb_test_exists("out.gguf"));
	}
}

static void codecs_that_do_not_tile_are_refused(void)
{
	struct hb_convert_opts o;
	struct hb_error err;

	/* general: routed width 8 does not tile 64-weight groups */
	CHECK_EQ_INT(convert(ckpt("general"), "a.gguf", HB_CONV_EXPERTS_AFFINE4_G64, NULL, &err),
		     HB_ERR_UNSUPPORTED);
	CHECK_STR(err.id, "em-codec-tiling");
	CHECK(!hb_test_exists("a.gguf"));
	/* realshape PLE rows are 5 wide: group 32 does not tile them */
	memset(&o, 0, sizeof(o));
	o.src_dir = ckpt("realshape");
	o.out_path = "p.gguf";
	o.expert_codec = HB_CONV_EXPERTS_BF16;
	o.ple_codec = HB_CONV_PLE_AFFINE4_G32;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_convert(&o, NULL, &err), HB_ERR_UNSUPPORTED);
	CHECK_STR(err.id, "ple-codec-tiling");
	CHECK(!hb_test_exists("p.gguf"));
}

/* affine4-g64 on realshape (routed widths 64 and 64 tile the groups): every
 * decoded weight lies within the independent per-group bound
 * (fp_ref_affine4_bound) of the source, and the codec's own documented
 * bound (hb_affine4_error_bound) is never below the independent one. */
static void realshape_affine4_within_bound(void)
{
	struct hb_error err;
	struct artifact a;
	struct hb_em_layout l;
	struct hb_em_geometry geo = {8, 32, 10, 64, 64};
	struct hb_st_checkpoint ck;
	cJSON *rep = NULL;
	const char *label = NULL;
	static const char *const roles[3] = {"gate", "up", "down"};
	unsigned outside = 0, outside_lib = 0, lib_below = 0;
	uint64_t checked = 0;
	double worst = 0, worst_lib = 0, lib_over_ref_max = 0, lib_over_ref_min = INFINITY;

	CHECK_EQ_INT(convert(ckpt("realshape"), "q.gguf", HB_CONV_EXPERTS_AFFINE4_G64, &rep, &err), HB_OK);
	CHECK_STR(err.msg, "");
	CHECK_EQ_INT(hb_json_str(cJSON_GetObjectItem(rep, "codecs"), "experts_label", "l", &label, NULL), HB_OK);
	CHECK_STR(label, "phase2-structural-not-release-qualified");
	CHECK(open_artifact("q.gguf", &a));
	CHECK_EQ_INT(hb_st_checkpoint_open(&ck, ckpt("realshape"), NULL), HB_OK);
	memset(&l, 0, sizeof(l));
	CHECK_EQ_INT(hb_em_parse_fd(a.fd, hb_gguf_find_tensor(&a.g, HB_TENSOR_EXPERT_STORE)->offset,
				    hb_gguf_find_tensor(&a.g, HB_TENSOR_EXPERT_STORE)->nbytes, &geo, &l, NULL, NULL), HB_OK);
	for (uint32_t L = 0; l.layers && L < 8; L++) {
		for (uint32_t E = 0; E < 32; E++) {
			for (int k = 0; k < 3; k++) {
				const struct hb_em_component *cp = &l.layers[L].comp[k];
				size_t n = (size_t)(cp->dim[0] * cp->dim[1]);
				uint8_t *rec = malloc((size_t)cp->expert_bytes), *raw = malloc(n * 2);
				float *dec = malloc(n * 4);
				char name[200];
				struct hb_st_ref r;
				snprintf(name, sizeof(name), "model.language_model.layers.%u.mlp.experts.%u.%s_proj.weight",
					 L, E, roles[k]);
				CHECK(hb_st_checkpoint_find(&ck, name, &r));
				CHECK_EQ_INT(hb_em_record_read(a.fd, hb_gguf_find_tensor(&a.g, HB_TENSOR_EXPERT_STORE)->offset,
							       &l, L, E, k, rec, (size_t)cp->expert_bytes, NULL, NULL), HB_OK);
				CHECK_EQ_INT(hb_affine4_decode(rec, (size_t)cp->expert_bytes, 64, dec, n, "t", NULL), HB_OK);
				CHECK_EQ_INT(hb_st_read(r.file, r.tensor, 0, raw, n * 2, NULL), HB_OK);
				for (size_t g = 0; g < n; g += 64) {
					float lo = INFINITY, hi = -INFINITY;
					double bound, lib;
					for (size_t i = g; i < g + 64; i++) {
						float v = fp_ref_bf16_to_f32((uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8));
						lo = v < lo ? v : lo;
						hi = v > hi ? v : hi;
					}
					bound = fp_ref_affine4_bound(lo, hi);
					lib = hb_affine4_error_bound(lo, hi);
					lib_below += !(lib >= bound);
					lib_over_ref_max = hb_test_max_nan(lib_over_ref_max, lib / bound);
					lib_over_ref_min = hb_test_min_nan(lib_over_ref_min, lib / bound);
					for (size_t i = g; i < g + 64; i++) {
						float v = fp_ref_bf16_to_f32((uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8));
						double e = fabs((double)dec[i] - (double)v);
						outside += !(e <= bound);
						outside_lib += !(e <= lib);
						worst = hb_test_max_nan(worst, e / bound);
						worst_lib = hb_test_max_nan(worst_lib, e / lib);
						checked++;
					}
				}
				free(rec), free(raw), free(dec);
			}
		}
	}
	printf("# realshape affine4-g64: worst error %.6f of the independent bound, %.4f of "
	       "hb_affine4_error_bound; library/independent bound %.3f .. %.3f\n",
	       worst, worst_lib, lib_over_ref_min, lib_over_ref_max);
	CHECK_EQ_U64(checked, 8ull * 32 * 3 * 64 * 64);
	CHECK_EQ_INT(outside, 0);
	CHECK_EQ_INT(outside_lib, 0);
	CHECK_EQ_INT(lib_below, 0);
	CHECK(worst_lib > 0.05); /* a bound no weight approaches would prove nothing */
	/* the independent bound is the worst case of the rule, and the source
	 * has 49,152 groups: some weight comes close to it (measured 0.999999, a
	 * weight half a step from both neighbours); the library's closed form
	 * is 1.26 .. 1.32 times it here */
	CHECK(worst > 0.9);
	hb_em_layout_release(&l);
	hb_st_checkpoint_close(&ck);
	close_artifact(&a);
	cJSON_Delete(rep);
}

/* bf16 by the arithmetic definition instead of bits: scale to the bf16
 * quantum of x's binade, rint (round half even in the default mode),
 * scale back; all exact in double.  Not for NaN. */
static uint16_t bf16_by_arithmetic(float x)
{
	double q, r;
	int e;
	uint32_t u;

	if (x == 0.0f || isinf(x))
		return (uint16_t)(fp_ref_f32_bits(x) >> 16); /* exact in bf16 */
	e = ilogb((double)x);
	q = ldexp(1.0, (e < -126 ? -126 : e) - 7); /* 8 significant bits */
	r = rint((double)x / q) * q;
	if (fabs(r) >= ldexp(1.0, 128))
		return r < 0 ? 0xff80u : 0x7f80u;
	u = fp_ref_f32_bits((float)r); /* exact: r has at most 8 significant bits */
	return (uint16_t)(u >> 16);
}

/* The test's bf16 rounding, which the expectations above rely on: fixed
 * cases (ties, overflow, NaN, infinities, subnormals), the arithmetic
 * definition over every upper half with the interesting lower halves, and
 * then the library's hb_f32_to_bf16 held to it. */
static void bf16_reference_rounds_to_nearest_even(void)
{
	static const struct { uint32_t in; uint16_t out; } fixed[] = {
		{0x3f808000u, 0x3f80}, /* tie, even kept */
		{0x3f818000u, 0x3f82}, /* tie, odd rounds up */
		{0x3f808001u, 0x3f81}, {0x3f807fffu, 0x3f80},
		{0x80000000u, 0x8000}, /* -0 */
		{0x7f800000u, 0x7f80}, {0xff800000u, 0xff80}, /* infinities stay */
		{0x7f7f7fffu, 0x7f7f}, /* the largest bf16 stays */
		{0x7f7f8000u, 0x7f80}, {0xff7fffffu, 0xff80}, /* past it: infinity */
		{0x7fc00000u, 0x7fc0}, {0x7fa00000u, 0x7fe0}, /* NaN: quiet, payload kept */
		{0x7f800001u, 0x7fc0}, {0xff800001u, 0xffc0}, /* payload below the cut: still NaN */
		{0x00000001u, 0x0000}, /* the smallest float32 subnormal vanishes */
		{0x00008000u, 0x0000}, {0x00018000u, 0x0002}, /* subnormal ties */
		{0x00008001u, 0x0001}, /* the smallest bf16 subnormal */
		{0x007fffffu, 0x0080}, {0x807fffffu, 0x8080}, /* up into the normals */
		{0x00800000u, 0x0080},
	};
	static const uint32_t lows[] = {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, 0x5a5au, 0xc3c3u};
	uint64_t bad_ref = 0, bad_lib = 0, nans = 0;

	for (size_t i = 0; i < HB_ARRAY_LEN(fixed); i++) {
		uint16_t got = fp_ref_bf16_rne_bits(fixed[i].in);
		if (got != fixed[i].out)
			hb_check_fail(__FILE__, __LINE__, "reference bf16(0x%08x) = 0x%04x, want 0x%04x",
				      fixed[i].in, got, fixed[i].out);
		if (hb_f32_to_bf16(fp_ref_bits_f32(fixed[i].in)) != fixed[i].out)
			hb_check_fail(__FILE__, __LINE__, "hb_f32_to_bf16(0x%08x) = 0x%04x, want 0x%04x",
				      fixed[i].in, hb_f32_to_bf16(fp_ref_bits_f32(fixed[i].in)), fixed[i].out);
	}
	for (uint32_t hi = 0; hi < 0x10000u; hi++) {
		for (size_t k = 0; k < HB_ARRAY_LEN(lows); k++) {
			uint32_t u = hi << 16 | lows[k];
			float f = fp_ref_bits_f32(u);
			uint16_t ref = fp_ref_bf16_rne_bits(u);
			if (isnan(f)) {
				/* a NaN in, a quiet NaN of the same sign out */
				nans++;
				bad_ref += !((ref & 0x7fc0u) == 0x7fc0u && (ref & 0x8000u) == (u >> 16 & 0x8000u));
			} else {
				bad_ref += ref != bf16_by_arithmetic(f);
			}
			bad_lib += hb_f32_to_bf16(f) != ref;
		}
	}
	CHECK_EQ_U64(bad_ref, 0);
	CHECK_EQ_U64(bad_lib, 0);
	CHECK(nans > 0);
	/* binary16 decoding, used for F16 sources: fixed points */
	CHECK(fp_ref_f16_to_double(0x3c00) == 1.0);
	CHECK(fp_ref_f16_to_double(0xc000) == -2.0);
	CHECK(fp_ref_f16_to_double(0x7bff) == 65504.0);
	CHECK(fp_ref_f16_to_double(0x0001) == ldexp(1.0, -24));
	CHECK(fp_ref_f16_to_double(0x03ff) == ldexp(1023.0, -24));
	CHECK(fp_ref_f16_to_double(0x0400) == ldexp(1.0, -14));
	CHECK(fp_ref_f16_to_double(0x3555) == 1365.0 / 4096.0); /* 0x555 = 1365: 1.333.. x 2^-2 */
	CHECK(isinf(fp_ref_f16_to_double(0xfc00)) && fp_ref_f16_to_double(0xfc00) < 0);
	CHECK(isnan(fp_ref_f16_to_double(0x7e00)));
}

/*
 * hb_affine4_error_bound against the independent derivation
 * (fp_ref_affine4_bound) over groups of 64 weights at magnitudes 2^-140
 * .. 2^120, mixed signs, one-signed, constant and near-constant: the
 * library's bound is never below the independent one (it is sound), and
 * the codec's real error never exceeds the independent one.
 */
static void affine4_bound_against_independent_derivation(void)
{
	static const int exps[] = {-140, -130, -126, -60, -20, -8, -1, 0, 3, 30, 90, 120};
	uint32_t st = 0x9e3779b9u;
	uint64_t lib_below = 0, outside = 0, groups = 0, refused = 0;
	double worst = 0, ratio_min = INFINITY, ratio_mixed = 0;
	float w[64], dec[64];
	uint8_t enc[36];

	for (size_t x = 0; x < HB_ARRAY_LEN(exps); x++) {
		for (int shape = 0; shape < 5; shape++) {
			for (int rep = 0; rep < 40; rep++, groups++) {
				float lo = INFINITY, hi = -INFINITY;
				double ref, lib;
				for (int i = 0; i < 64; i++) {
					double v;
					st ^= st << 13, st ^= st >> 17, st ^= st << 5;
					v = ldexp((double)(st % 1000001u) / 1000000.0, exps[x]);
					switch (shape) {
					case 0: v = (st & 1u) ? -v : v; break;          /* mixed signs */
					case 1: v = v + ldexp(1.0, exps[x]); break;     /* one-signed, offset */
					case 2: v = ldexp(1.0, exps[x]); break;         /* constant */
					case 3: v = ldexp(1.0, exps[x]) * (1 + (i & 1) * 0x1p-20); break; /* near-constant */
					default: v = -v * (double)(i % 7); break;       /* negative, uneven */
					}
					w[i] = (float)v;
					lo = w[i] < lo ? w[i] : lo;
					hi = w[i] > hi ? w[i] : hi;
				}
				ref = fp_ref_affine4_bound(lo, hi);
				lib = hb_affine4_error_bound(lo, hi);
				if (hb_affine4_encode(w, 64, 64, enc, sizeof(enc), NULL, NULL) != HB_OK) {
					refused++; /* only where the parameters do not fit bf16 */
					CHECK(isinf(ref));
					continue;
				}
				lib_below += !(lib >= ref);
				ratio_min = hb_test_min_nan(ratio_min, lib / ref);
				if (shape == 0 && exps[x] > -100)
					ratio_mixed = hb_test_max_nan(ratio_mixed, lib / ref);
				CHECK_EQ_INT(hb_affine4_decode(enc, sizeof(enc), 64, dec, 64, NULL, NULL), HB_OK);
				for (int i = 0; i < 64; i++) {
					double e = fabs((double)dec[i] - (double)w[i]);
					outside += !(e <= ref);
					worst = hb_test_max_nan(worst, e / ref);
				}
			}
		}
	}
	printf("# affine4 bound: %" PRIu64 " groups, worst error %.6f of the independent bound; "
	       "library bound %.3f x the independent one at least, up to %.3f on mixed-sign normal groups\n",
	       groups, worst, ratio_min, ratio_mixed);
	CHECK_EQ_U64(lib_below, 0);
	CHECK_EQ_U64(outside, 0);
	CHECK_EQ_U64(refused, 0);
	CHECK(worst > 0.9);
}

/* --threads changes the speed, never the bytes. */
static void threads_do_not_change_bytes(void)
{
	struct hb_convert_opts o;
	char *x = NULL, *y = NULL;
	size_t lx = 0, ly = 0;

	memset(&o, 0, sizeof(o));
	o.src_dir = ckpt("realshape");
	o.expert_codec = HB_CONV_EXPERTS_AFFINE4_G64;
	o.ple_codec = HB_CONV_PLE_BF16;
	o.threads = 1;
	o.out_path = "t1.gguf";
	CHECK_EQ_INT(hb_convert(&o, NULL, NULL), HB_OK);
	o.threads = 5;
	o.out_path = "t5.gguf";
	CHECK_EQ_INT(hb_convert(&o, NULL, NULL), HB_OK);
	CHECK_EQ_INT(hb_read_file("t1.gguf", 64u << 20, &x, &lx, NULL), HB_OK);
	CHECK_EQ_INT(hb_read_file("t5.gguf", 64u << 20, &y, &ly, NULL), HB_OK);
	CHECK(x && y && lx == ly && memcmp(x, y, lx) == 0);
	free(x);
	free(y);
}

HB_TEST_MAIN(T(realshape_bf16), T(general_bf16), T(realshape_spelling_resolved),
	     T(packed_equals_per_expert), T(fp8_matches_torch_dequantisation),
	     T(failures_publish_nothing), T(changed_source_refused), T(ple_hash_identity_enforced),
	     T(codecs_that_do_not_tile_are_refused),
	     T(realshape_affine4_within_bound), T(threads_do_not_change_bytes),
	     T(bf16_reference_rounds_to_nearest_even), T(affine4_bound_against_independent_derivation))
