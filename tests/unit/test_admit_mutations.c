/*
 * Unit tests: the admission mutation battery.
 *
 * Two upstream fixtures (realshape, with a tokenizer.json and a chat
 * template added so that the text identity is exercised, and general, two
 * PLE tables and an EOS list) are converted once by hb_convert into the
 * case's temporary directory and admitted clean.  Then every mutation --
 * one field changed, through adm_mutate's re-emission -- must be refused
 * with the exact diagnostic id, at the exact step (hb_admit_result.step,
 * which must also be the step hb_admit_step_of gives the id), with a field
 * path naming what was changed.  Families are generated where the issue
 * says "each": every metadata key removed and retyped, every tensor
 * renamed, removed, retyped, reshaped, re-ranked, moved and duplicated,
 * every header and descriptor field of both stores, every reserved byte of
 * the ExpertMajor header, every layer type, every PLE prime, offset and
 * multiplier.  The count is printed as "# mutations: N rejected of M".
 *
 * The sparse real-profile artifact and its pinned-value mutations live in
 * test_admit_real.c.
 */
#include "hb_base.h"
#include "harness.h"
#include "adm_mutate.h"
#include "admit/hb_admit.h"
#include "artifact/hb_artifact.h"
#include "hb-convert/hb_convert.h"
#include "hb_io.h"
#include "model/hb_profile.h"
#include "hb_sha256.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUT "m.gguf"

static unsigned n_total, n_ok;
/* mutations go to a memory file admitted by its /proc path (no disk
 * traffic for thousands of re-emissions); the temp dir when none exists */
static int mem_fd = -1;
static char mem_path[64];

struct mcase {
	char label[200];
	struct adm_edit e[ADM_MAX_EDITS];
	size_t n;
	const char *id;
	int step;
	char field[200];  /* err.field must contain this */
};

/* ------------------------------------------------------------ fixtures */

static int copy_file(const char *from, const char *to)
{
	char *buf = NULL;
	size_t len = 0;
	int rc = hb_read_file(from, 64u << 20, &buf, &len, NULL);

	if (!rc)
		rc = hb_test_write_file(to, buf, len);
	free(buf);
	return rc;
}

/* realshape plus a tokenizer.json (ids up to 1000) and a chat template */
static bool stage_realshape(const char *dir)
{
	static const char *const files[] = {
		"config.json", "generation_config.json", "model.safetensors.index.json",
		"model-00001-of-00009.safetensors", "model-00002-of-00009.safetensors",
		"model-00003-of-00009.safetensors", "model-00004-of-00009.safetensors",
		"model-00005-of-00009.safetensors", "model-00006-of-00009.safetensors",
		"model-00007-of-00009.safetensors", "model-00008-of-00009.safetensors",
		"model-00009-of-00009.safetensors",
	};
	static const char tok[] =
		"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"c\":999}},"
		"\"added_tokens\":[{\"id\":1000,\"content\":\"<|end|>\",\"special\":true}]}";
	static const char tmpl[] = "{% for m in messages %}{{ m.content }}{% endfor %}";
	char from[4096], to[4096];

	if (mkdir(dir, 0755))
		return false;
	for (size_t i = 0; i < HB_ARRAY_LEN(files); i++) {
		snprintf(from, sizeof(from), "%s/tests/fixtures/upstream/realshape/checkpoint/%s",
			 hb_test_srcdir(), files[i]);
		snprintf(to, sizeof(to), "%s/%s", dir, files[i]);
		if (copy_file(from, to))
			return false;
	}
	snprintf(to, sizeof(to), "%s/tokenizer.json", dir);
	if (hb_test_write_file(to, tok, strlen(tok)))
		return false;
	snprintf(to, sizeof(to), "%s/chat_template.jinja", dir);
	return hb_test_write_file(to, tmpl, strlen(tmpl)) == 0;
}

static bool convert(const char *src, const char *out)
{
	struct hb_convert_opts o;
	struct hb_error err;
	cJSON *report = NULL;
	int rc;

	memset(&o, 0, sizeof(o));
	o.src_dir = src;
	o.out_path = out;
	o.expert_codec = HB_CONV_EXPERTS_BF16;
	o.ple_codec = HB_CONV_PLE_BF16;
	o.profile = "auto";
	o.threads = 2;
	hb_error_clear(&err);
	rc = hb_convert(&o, &report, &err);
	cJSON_Delete(report);
	if (rc)
		printf("# convert %s: %s: %s\n", src, err.field, err.msg);
	return rc == 0;
}

static bool admit(const char *path, struct hb_admit_result *res, struct hb_error *err)
{
	struct hb_admit_opts o = {.path = path};

	hb_error_clear(err);
	memset(res, 0, sizeof(*res));
	return hb_admit(&o, res, err) == HB_OK;
}

/* ------------------------------------------------------------ runner */

static struct mcase *mc(struct mcase *c, const char *id, int step, const char *field,
			const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static struct mcase *mc(struct mcase *c, const char *id, int step, const char *field,
			const char *fmt, ...)
{
	va_list ap;

	memset(c, 0, sizeof(*c));
	c->id = id;
	c->step = step;
	snprintf(c->field, sizeof(c->field), "%s", field);
	va_start(ap, fmt);
	vsnprintf(c->label, sizeof(c->label), fmt, ap);
	va_end(ap);
	return c;
}

static struct adm_edit *ed(struct mcase *c, enum adm_edit_kind k)
{
	struct adm_edit *e = &c->e[c->n++];
	memset(e, 0, sizeof(*e));
	e->kind = k;
	return e;
}

static void run(const struct adm_src *s, const struct mcase *c)
{
	struct hb_admit_result res;
	struct hb_error err;
	int rc;
	bool ok;

	n_total++;
	hb_error_clear(&err);
	rc = mem_fd >= 0 ? adm_emit_fd(s, c->e, c->n, mem_fd, &err) : adm_emit(s, c->e, c->n, OUT, &err);
	if (rc) {
		hb_check_fail(__FILE__, __LINE__, "[%s] the mutation could not be written: %s: %s",
			      c->label, err.field, err.msg);
		return;
	}
	if (!admit(mem_fd >= 0 ? mem_path : OUT, &res, &err)) {
		hb_check_fail(__FILE__, __LINE__, "[%s] admission failed to run: %s", c->label, err.msg);
		return;
	}
	ok = !res.admitted && err.id && !strcmp(err.id, c->id) && res.step == c->step &&
	     hb_admit_step_of(err.id) == res.step && strstr(err.field, c->field);
	if (ok)
		n_ok++;
	else
		hb_check_fail(__FILE__, __LINE__,
			      "[%s] expected %s step %d field ~%s; got %s %s step %d (id's step %d) field %s: %s",
			      c->label, c->id, c->step, c->field, res.admitted ? "ADMITTED" : "refused",
			      err.id ? err.id : "(none)", res.step, hb_admit_step_of(err.id), err.field,
			      err.msg);
	cJSON_Delete(res.report);
}

/* ------------------------------------------------------------ families */

static char *tfield(const char *name)
{
	static char buf[8][160];
	static int k;
	k = (k + 1) % 8;
	snprintf(buf[k], sizeof(buf[k]), "gguf.tensors[%s]", name);
	return buf[k];
}

static bool is_store(const char *n)
{
	return !strcmp(n, HB_TENSOR_EXPERT_STORE) || !strcmp(n, HB_TENSOR_PLE_STORE);
}

/* The GGUF container (step 1): raw patches the writer would never make. */
static void family_container(const struct adm_src *s)
{
	struct mcase c;
	struct adm_edit *e;
	const struct hb_gguf_tensor *t0 = &s->g.tensors[0];

	e = ed(mc(&c, "gguf-magic", 1, "magic", "gguf.magic"), ADM_FILE_PATCH);
	memcpy(e->bytes, "GGUX", 4), e->len = 4;
	run(s, &c);
	e = ed(mc(&c, "gguf-version", 1, "version", "gguf.version 2"), ADM_FILE_PATCH);
	e->off = 4, e->bytes[0] = 2, e->len = 1;
	run(s, &c);
	e = ed(mc(&c, "gguf-padding", 1, "", "gguf.header padding byte"), ADM_FILE_PATCH);
	e->anchor = ADM_AT_TENSOR_INFO_END, e->bytes[0] = 0x5a, e->len = 1;
	run(s, &c);
	e = ed(mc(&c, "gguf-truncated", 1, "", "gguf.file truncated inside the header"), ADM_FILE_TRUNCATE);
	e->off = 100;
	run(s, &c);
	e = ed(mc(&c, "gguf-tensor-out-of-file", 1, "", "gguf.file truncated inside the data"), ADM_FILE_TRUNCATE);
	e->off = s->g.layout.file_size - 4096;
	run(s, &c);
	e = ed(mc(&c, "gguf-string-utf8", 1, HB_KEY_NAME, "general.name invalid UTF-8"), ADM_FILE_PATCH);
	e->key = HB_KEY_NAME, e->anchor = ADM_AT_KV_VALUE, e->off = 8, e->bytes[0] = 0xff, e->len = 1;
	run(s, &c);
	e = ed(mc(&c, "gguf-bool", 1, HB_KEY_ATTN_BIAS, "attention.bias byte 2"), ADM_FILE_PATCH);
	e->key = HB_KEY_ATTN_BIAS, e->anchor = ADM_AT_KV_VALUE, e->bytes[0] = 2, e->len = 1;
	run(s, &c);
	e = ed(mc(&c, "gguf-alignment", 1, HB_KEY_ALIGNMENT, "general.alignment typed i32"), ADM_KV_RETYPE);
	e->key = HB_KEY_ALIGNMENT, e->u32v = HB_GGUF_I32;
	run(s, &c);
	e = ed(mc(&c, "gguf-kv-type", 1, HB_KEY_BLOCKS, "block_count value type 13"), ADM_KV_RETYPE);
	e->key = HB_KEY_BLOCKS, e->u32v = 13;
	run(s, &c);
	e = ed(mc(&c, "gguf-duplicate-key", 1, HB_KEY_HIDDEN, "embedding_length twice"), ADM_KV_DUPLICATE);
	e->key = HB_KEY_HIDDEN;
	run(s, &c);
	e = ed(mc(&c, "gguf-duplicate-key", 1, HB_KEY_PROFILE, "hebrus.profile twice"), ADM_KV_DUPLICATE);
	e->key = HB_KEY_PROFILE;
	run(s, &c);
	e = ed(mc(&c, "gguf-tensor-type", 1, t0->name.ptr, "%s type 2 (Q4_0)", t0->name.ptr), ADM_T_RAWTYPE);
	e->tensor = t0->name.ptr, e->u32v = 2;
	run(s, &c);
	e = ed(mc(&c, "gguf-tensor-dims", 1, t0->name.ptr, "%s n_dims 5", t0->name.ptr), ADM_T_RAWNDIMS);
	e->tensor = t0->name.ptr, e->u32v = 5;
	run(s, &c);
}

/* Every key removed, every key given another GGUF type. */
static void family_keys(const struct adm_src *s, const char *tag)
{
	struct mcase c;
	struct adm_edit *e;

	for (uint64_t i = 0; i < s->g.n_kv; i++) {
		const char *k = s->g.kv[i].key.ptr;
		const struct hb_gguf_value *v = &s->g.kv[i].value;
		const char *id = "adm-key-missing", *tid = "adm-key-type";
		int step = 4;
		struct hb_gguf_value other;
		uint64_t zero64[1] = {0};

		if (!strcmp(k, HB_KEY_NAME))
			continue; /* optional, carries no meaning */
		if (!strcmp(k, HB_KEY_ARCH))
			id = tid = "adm-architecture", step = 2;
		else if (!strcmp(k, HB_KEY_PROFILE))
			id = tid = "adm-profile-unknown", step = 2;
		else if (!strcmp(k, HB_KEY_STATUS))
			id = tid = "adm-status", step = 2;
		else if (!strcmp(k, HB_KEY_SOURCE_INVENTORY) || !strcmp(k, HB_KEY_SOURCE_CONFIG))
			id = tid = "adm-source-identity", step = 3;
		else if (!strcmp(k, HB_KEY_SOURCE_TENSORS) || !strcmp(k, HB_KEY_SOURCE_BYTES) ||
			 !strcmp(k, HB_KEY_SOURCE_SHARDS) || !strcmp(k, HB_KEY_EXCL_VISION) ||
			 !strcmp(k, HB_KEY_EXCL_MTP))
			id = tid = "adm-source-pin", step = 3;
		else if (!strcmp(k, HB_KEY_TOKENIZER_SHA) || !strcmp(k, HB_KEY_TOKENIZER_JSON))
			id = "adm-tokenizer-digest", step = 5;
		else if (!strcmp(k, HB_KEY_TEMPLATE_SHA) || !strcmp(k, HB_KEY_CHAT_TEMPLATE))
			id = "adm-template-digest", step = 5;
		if (!strcmp(k, HB_KEY_ALIGNMENT)) {
			/* absent: the reader's default 32 lays the data out; the
			 * artifact rule (4096) refuses it at step 4 */
			id = "adm-key-missing";
		}
		/* the digest check names the key that is missing */
		e = ed(mc(&c, id, step, k, "%s: %s removed", tag, k), ADM_KV_REMOVE);
		e->key = k;
		run(s, &c);

		/* another type: u32 <-> u64, f64 -> f32, bool -> u8, string -> u32,
		 * array elements u32 <-> u64, string array -> u32 array */
		if (!strcmp(k, HB_KEY_ALIGNMENT))
			continue; /* the reader owns its type (gguf-alignment, above) */
		memset(&other, 0, sizeof(other));
		switch (v->type) {
		case HB_GGUF_U32: other = adm_v_u64(v->v.u32); break;
		case HB_GGUF_U64: other = adm_v_u32((uint32_t)v->v.u64); break;
		case HB_GGUF_F64: other = adm_v_f32((float)v->v.f64); break;
		case HB_GGUF_BOOL: other.type = HB_GGUF_U8; other.v.u8 = v->v.b; break;
		case HB_GGUF_STRING: other = adm_v_u32(1); break;
		case HB_GGUF_ARRAY: other = adm_v_array(v->elem_type == HB_GGUF_U64 ? HB_GGUF_U32 : HB_GGUF_U64,
							zero64, 1); break;
		default: continue;
		}
		if (step < 4)
			e = ed(mc(&c, tid, step, k, "%s: %s retyped %s", tag, k,
				  hb_gguf_type_name(other.type)), ADM_KV_SET);
		else /* the schema's exact type (text keys too) is step 4 */
			e = ed(mc(&c, "adm-key-type", 4, k, "%s: %s retyped %s", tag, k,
				  hb_gguf_type_name(other.type)), ADM_KV_SET);
		e->key = k, e->val = other;
		run(s, &c);
	}
	e = ed(mc(&c, "adm-key-unknown", 4, "qwen4exp.expert_bias", "%s: unknown qwen4exp key", tag), ADM_KV_ADD);
	e->key = "qwen4exp.expert_bias", e->val = adm_v_u32(1);
	run(s, &c);
	e = ed(mc(&c, "adm-key-unknown", 4, "hebrus.runtime_supported", "%s: unknown hebrus key", tag), ADM_KV_ADD);
	e->key = "hebrus.runtime_supported", e->val = adm_v_bool(true);
	run(s, &c);
	e = ed(mc(&c, "adm-key-unknown", 4, "llama.block_count", "%s: foreign namespace key", tag), ADM_KV_ADD);
	e->key = "llama.block_count", e->val = adm_v_u32(8);
	run(s, &c);
	e = ed(mc(&c, "adm-key-unknown", 4, "tokenizer.ggml.model", "%s: unknown tokenizer key", tag), ADM_KV_ADD);
	e->key = "tokenizer.ggml.model", e->val = adm_v_str("gpt2");
	run(s, &c);
	e = ed(mc(&c, "adm-key-unknown", 4, "general.file_type", "%s: unknown general key", tag), ADM_KV_ADD);
	e->key = "general.file_type", e->val = adm_v_u32(1);
	run(s, &c);
}

static void set_case(const struct adm_src *s, const char *tag, const char *key, struct hb_gguf_value v,
		     const char *id, int step, const char *field, const char *what)
{
	struct mcase c;
	struct adm_edit *e = ed(mc(&c, id, step, field ? field : key, "%s: %s %s", tag, key, what), ADM_KV_SET);

	e->key = key, e->val = v;
	run(s, &c);
}

/* Identity and source (steps 2-3). */
static void family_identity(const struct adm_src *s, const char *tag)
{
	set_case(s, tag, HB_KEY_ARCH, adm_v_str("qwen3next"), "adm-architecture", 2, NULL, "qwen3next");
	set_case(s, tag, HB_KEY_PROFILE, adm_v_str("qwen4exp-flash"), "adm-profile-unknown", 2, NULL, "unknown");
	set_case(s, tag, HB_KEY_PROFILE, adm_v_str("DEV"), "adm-profile-unknown", 2, NULL, "case changed");
	set_case(s, tag, HB_KEY_PROFILE, adm_v_str(HB_PROFILE_FLASH_NEXT), "adm-status", 2, HB_KEY_STATUS,
		 "claims the released profile");
	set_case(s, tag, HB_KEY_STATUS, adm_v_str(HB_STATUS_SUPPORTED), "adm-status", 2, NULL, "supported");
	set_case(s, tag, HB_KEY_STATUS, adm_v_str(HB_STATUS_PINNED_NOT_SUPPORTED), "adm-status", 2, NULL,
		 "pinned-not-supported");
	set_case(s, tag, HB_KEY_STATUS, adm_v_str(HB_STATUS_IMPLEMENTED), "adm-status", 2, NULL, "implemented");
	set_case(s, tag, HB_KEY_SOURCE_INVENTORY, adm_v_str("abc"), "adm-source-identity", 3, NULL, "short");
	set_case(s, tag, HB_KEY_SOURCE_INVENTORY,
		 adm_v_str("ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789"),
		 "adm-source-identity", 3, NULL, "uppercase hex");
	set_case(s, tag, HB_KEY_SOURCE_CONFIG,
		 adm_v_str("g000000000000000000000000000000000000000000000000000000000000000"),
		 "adm-source-identity", 3, NULL, "non-hex");
	set_case(s, tag, HB_KEY_SOURCE_CONFIG,
		 adm_v_str("00000000000000000000000000000000000000000000000000000000000000000"),
		 "adm-source-identity", 3, NULL, "65 digits");
	/* a well-formed digest of another inventory: the expert store names
	 * the inventory it was made from (step 8) */
	set_case(s, tag, HB_KEY_SOURCE_INVENTORY,
		 adm_v_str("0000000000000000000000000000000000000000000000000000000000000000"),
		 "adm-expert-source", 8, NULL, "another inventory");
}

/* Every model constant changed (dev: the constants are the geometry). */
struct const_expect {
	const char *key;
	const char *id;
	int step;
	const char *field;  /* NULL: the key */
};

static void family_constants(const struct adm_src *s, const char *tag, const struct const_expect *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct hb_gguf_kv *kv = hb_gguf_find_kv(&s->g, x[i].key);
		struct hb_gguf_value v;
		char what[64];
		if (!kv) {
			hb_check_fail(__FILE__, __LINE__, "%s: no key %s", tag, x[i].key);
			continue;
		}
		v = kv->value;
		switch (v.type) {
		case HB_GGUF_U32: v.v.u32 += 1; snprintf(what, sizeof(what), "+1 (%u)", v.v.u32); break;
		case HB_GGUF_U64: v.v.u64 += 1; snprintf(what, sizeof(what), "+1"); break;
		case HB_GGUF_F64: v.v.f64 *= 2; snprintf(what, sizeof(what), "x2"); break;
		case HB_GGUF_BOOL: v.v.b = !v.v.b; snprintf(what, sizeof(what), "flipped"); break;
		case HB_GGUF_STRING: v = adm_v_str(!strcmp(v.str.ptr, "sigmoid") ? "silu" : "sigmoid");
			snprintf(what, sizeof(what), "-> %s", v.str.ptr); break;
		default: continue;
		}
		set_case(s, tag, x[i].key, v, x[i].id, x[i].step, x[i].field, what);
	}
}

/* Each element of a numeric array changed by one. */
static void family_array(const struct adm_src *s, const char *tag, const char *key, const char *id, int step,
			 const char *field)
{
	const struct hb_gguf_kv *kv = hb_gguf_find_kv(&s->g, key);
	struct hb_gguf_value v;

	if (!kv || kv->value.type != HB_GGUF_ARRAY) {
		hb_check_fail(__FILE__, __LINE__, "%s: no array %s", tag, key);
		return;
	}
	for (uint64_t i = 0; i < kv->value.count; i++) {
		char what[48];
		if (adm_value_copy(&v, &kv->value))
			return;
		if (v.elem_type == HB_GGUF_U64)
			((uint64_t *)v.elems)[i] += 2;
		else
			((uint32_t *)v.elems)[i] += 1;
		snprintf(what, sizeof(what), "[%" PRIu64 "] changed", i);
		set_case(s, tag, key, v, id, step, field, what);
		hb_gguf_value_release(&v);
	}
	/* one element more, one fewer */
	if (adm_value_copy(&v, &kv->value))
		return;
	v.count--;
	set_case(s, tag, key, v, id, step, field, "one element fewer");
	hb_gguf_value_release(&v);
}

static bool is_ple_layer(const struct adm_src *s, uint32_t layer1)
{
	const struct hb_gguf_kv *kv = hb_gguf_find_kv(&s->g, HB_KEY_PLE_LAYERS);
	for (uint64_t i = 0; kv && i < kv->value.count; i++)
		if (((const uint32_t *)kv->value.elems)[i] == layer1)
			return true;
	return false;
}

/* general's PLE layers [1, 5] of L L S L L S moved */
static void family_ple_layers(const struct adm_src *s, const char *tag)
{
	static const struct { uint32_t ids[2]; size_t n; const char *id; int step; const char *field; } x[] = {
		{{2, 5}, 2, "adm-tensor-unknown", 6, "gguf.tensors[layers."},
		{{1, 4}, 2, "adm-tensor-unknown", 6, "gguf.tensors[layers."},
		{{1, 6}, 2, "adm-constant-invalid", 4, "text_config.ple_layer_ids"}, /* layer 6 is QSA */
		{{1, 0}, 1, "adm-tensor-unknown", 6, "gguf.tensors[layers.4.ple."},
	};
	for (size_t i = 0; i < HB_ARRAY_LEN(x); i++) {
		uint32_t ids[2] = {x[i].ids[0], x[i].ids[1]};
		char what[64];
		snprintf(what, sizeof(what), "-> [%u%s%.0u]", ids[0], x[i].n > 1 ? ", " : "", x[i].n > 1 ? ids[1] : 0);
		set_case(s, tag, HB_KEY_PLE_LAYERS, adm_v_array(HB_GGUF_U32, ids, x[i].n), x[i].id, x[i].step,
			 x[i].field, what);
	}
}

/* Each layer type flipped: the expected tensor set changes (step 6). */
static void family_layer_types(const struct adm_src *s, const char *tag)
{
	const struct hb_gguf_kv *kv = hb_gguf_find_kv(&s->g, HB_KEY_LAYER_TYPES);
	struct hb_gguf_value v;

	for (uint64_t i = 0; kv && i < kv->value.count; i++) {
		struct hb_gguf_str *el;
		const char *to;
		char what[64];
		if (adm_value_copy(&v, &kv->value))
			return;
		el = &((struct hb_gguf_str *)v.elems)[i];
		to = !strcmp(el->ptr, "linear_attention") ? "qwen_sparse_attention" : "linear_attention";
		free(el->ptr);
		el->ptr = strdup(to);
		el->len = strlen(to);
		snprintf(what, sizeof(what), "[%" PRIu64 "] -> %s", i, to);
		if (is_ple_layer(s, (uint32_t)i + 1)) /* PLE sits on linear layers only */
			set_case(s, tag, HB_KEY_LAYER_TYPES, v, "adm-constant-invalid", 4,
				 "text_config.ple_layer_ids", what);
		else
			set_case(s, tag, HB_KEY_LAYER_TYPES, v, "adm-tensor-unknown", 6, "gguf.tensors[layers.", what);
		hb_gguf_value_release(&v);
	}
	if (kv && !adm_value_copy(&v, &kv->value)) {
		/* the raw spelling of a sparse layer: an artifact records what
		 * upstream executes, never the spelling (AFN-004) */
		struct hb_gguf_str *el = &((struct hb_gguf_str *)v.elems)[3];
		free(el->ptr);
		el->ptr = strdup("full_attention");
		el->len = strlen(el->ptr);
		set_case(s, tag, HB_KEY_LAYER_TYPES, v, "adm-constant-invalid", 4, HB_KEY_LAYER_TYPES "[3]",
			 "[3] -> full_attention");
		hb_gguf_value_release(&v);
	}
}

static void two_kv(const struct adm_src *s, const char *tag, const char *k1, struct hb_gguf_value v1,
		   const char *k2, struct hb_gguf_value v2, const char *id, int step, const char *field,
		   const char *what)
{
	struct mcase c;
	struct adm_edit *e;

	mc(&c, id, step, field, "%s: %s", tag, what);
	e = ed(&c, hb_gguf_find_kv(&s->g, k1) ? ADM_KV_SET : ADM_KV_ADD);
	e->key = k1, e->val = v1;
	e = ed(&c, hb_gguf_find_kv(&s->g, k2) ? ADM_KV_SET : ADM_KV_ADD);
	e->key = k2, e->val = v2;
	run(s, &c);
}

static void sha_hex(const char *s, size_t len, char hex[HB_SHA256_HEX])
{
	uint8_t d[HB_SHA256_BYTES];
	hb_sha256_buf(s, len, d);
	hb_hex_encode(d, sizeof(d), hex);
}

/* Tokenizer and template identity, vocabulary, stop and EOS ids (step 5). */
static void family_text(const struct adm_src *s, const char *tag, bool assets)
{
	static const char big[] = "{\"model\":{\"vocab\":{\"a\":0,\"z\":1024}},\"added_tokens\":[]}";
	static const char added[] = "{\"model\":{\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":5000}]}";
	static const char notjson[] = "{\"model\":";
	static const char other_tmpl[] = "{{ messages }}";
	const struct hb_gguf_kv *stop = hb_gguf_find_kv(&s->g, HB_KEY_STOP);
	const struct hb_gguf_kv *eos = hb_gguf_find_kv(&s->g, HB_KEY_EOS);
	char hex[HB_SHA256_HEX];
	struct hb_gguf_value v;

	if (assets) {
		const struct hb_gguf_kv *tok = hb_gguf_find_kv(&s->g, HB_KEY_TOKENIZER_JSON);
		const struct hb_gguf_kv *tm = hb_gguf_find_kv(&s->g, HB_KEY_CHAT_TEMPLATE);
		char *t2 = malloc((size_t)tok->value.str.len + 2);
		memcpy(t2, tok->value.str.ptr, (size_t)tok->value.str.len);
		t2[tok->value.str.len] = ' ';
		set_case(s, tag, HB_KEY_TOKENIZER_JSON, adm_v_strn(t2, (size_t)tok->value.str.len + 1),
			 "adm-tokenizer-digest", 5, HB_KEY_TOKENIZER_SHA, "one byte appended");
		t2[0] = '[';
		set_case(s, tag, HB_KEY_TOKENIZER_JSON, adm_v_strn(t2, (size_t)tok->value.str.len),
			 "adm-tokenizer-digest", 5, HB_KEY_TOKENIZER_SHA, "first byte changed");
		free(t2);
		set_case(s, tag, HB_KEY_TOKENIZER_SHA,
			 adm_v_str("0000000000000000000000000000000000000000000000000000000000000000"),
			 "adm-tokenizer-digest", 5, NULL, "another digest");
		set_case(s, tag, HB_KEY_TEMPLATE_SHA,
			 adm_v_str("0000000000000000000000000000000000000000000000000000000000000000"),
			 "adm-template-digest", 5, NULL, "another digest");
		set_case(s, tag, HB_KEY_CHAT_TEMPLATE, adm_v_str(other_tmpl), "adm-template-digest", 5,
			 HB_KEY_TEMPLATE_SHA, "another template");
		set_case(s, tag, HB_KEY_CHAT_TEMPLATE, adm_v_strn(tm->value.str.ptr, (size_t)tm->value.str.len - 1),
			 "adm-template-digest", 5, HB_KEY_TEMPLATE_SHA, "last byte dropped");
		/* the template digest given to the tokenizer and vice versa */
		{
			const struct hb_gguf_kv *ts = hb_gguf_find_kv(&s->g, HB_KEY_TEMPLATE_SHA);
			set_case(s, tag, HB_KEY_TOKENIZER_SHA, ts->value, "adm-tokenizer-digest", 5, NULL,
				 "the template's digest");
		}
	} else {
		sha_hex(other_tmpl, strlen(other_tmpl), hex);
		two_kv(s, tag, HB_KEY_CHAT_TEMPLATE, adm_v_str(other_tmpl), HB_KEY_TEMPLATE_SHA,
		       adm_v_str("1111111111111111111111111111111111111111111111111111111111111111"),
		       "adm-template-digest", 5, HB_KEY_TEMPLATE_SHA, "template added with a wrong digest");
		{
			struct mcase c;
			struct adm_edit *e = ed(mc(&c, "adm-tokenizer-digest", 5, HB_KEY_TOKENIZER_JSON,
						   "%s: a tokenizer digest without its bytes", tag), ADM_KV_ADD);
			e->key = HB_KEY_TOKENIZER_SHA, e->val = adm_v_str(hex);
			run(s, &c);
		}
	}
	sha_hex(big, strlen(big), hex);
	two_kv(s, tag, HB_KEY_TOKENIZER_JSON, adm_v_str(big), HB_KEY_TOKENIZER_SHA, adm_v_str(hex),
	       "adm-vocab-semantic", 5, HB_KEY_TOKENIZER_JSON, "tokenizer vocab id beyond the rows");
	sha_hex(added, strlen(added), hex);
	two_kv(s, tag, HB_KEY_TOKENIZER_JSON, adm_v_str(added), HB_KEY_TOKENIZER_SHA, adm_v_str(hex),
	       "adm-vocab-semantic", 5, HB_KEY_TOKENIZER_JSON, "added token id beyond the rows");
	sha_hex(notjson, strlen(notjson), hex);
	two_kv(s, tag, HB_KEY_TOKENIZER_JSON, adm_v_str(notjson), HB_KEY_TOKENIZER_SHA, adm_v_str(hex),
	       "adm-vocab-semantic", 5, HB_KEY_TOKENIZER_JSON, "tokenizer.json that does not parse");

	/* stop ids: each changed, one more, one fewer, reversed */
	family_array(s, tag, HB_KEY_STOP, "adm-stop-ids", 5, NULL);
	if (!adm_value_copy(&v, &stop->value)) {
		uint32_t *p = realloc(v.elems, (size_t)(v.count + 1) * 4);
		if (p) {
			v.elems = p;
			p[v.count] = p[0];
			v.count++;
			set_case(s, tag, HB_KEY_STOP, v, "adm-stop-ids", 5, NULL, "an id repeated");
		}
		hb_gguf_value_release(&v);
	}
	if (stop->value.count > 1 && !adm_value_copy(&v, &stop->value)) {
		uint32_t *p = v.elems, t = p[0];
		p[0] = p[v.count - 1], p[v.count - 1] = t;
		set_case(s, tag, HB_KEY_STOP, v, "adm-stop-ids", 5, NULL, "reordered");
		hb_gguf_value_release(&v);
	}
	/* an EOS id outside the vocabulary */
	if (!adm_value_copy(&v, &eos->value)) {
		/* the constants (step 4) already refuse it: upstream's config
		 * reader does, so adm-eos-ids (step 5) is a second guard */
		((uint32_t *)v.elems)[0] = 1u << 20;
		set_case(s, tag, HB_KEY_EOS, v, "adm-constant-invalid", 4, "eos_token_id",
			 "[0] beyond the vocabulary");
		hb_gguf_value_release(&v);
	}
}

/* Every tensor renamed, removed, retyped, reshaped, re-ranked, misaligned,
 * moved out of the file, moved onto its predecessor and duplicated. */
static void family_tensors(const struct adm_src *s, const char *tag)
{
	uint64_t file_size = s->g.layout.file_size;

	for (uint64_t i = 0; i < s->g.n_tensors; i++) {
		const struct hb_gguf_tensor *t = &s->g.tensors[i];
		const char *n = t->name.ptr;
		bool em = !strcmp(n, HB_TENSOR_EXPERT_STORE), ple = !strcmp(n, HB_TENSOR_PLE_STORE);
		struct mcase c;
		struct adm_edit *e;
		char nn[HB_GGUF_MAX_TENSOR_NAME + 1];

		snprintf(nn, sizeof(nn), "%s", n);
		if (strlen(nn) + 2 <= HB_GGUF_MAX_TENSOR_NAME)
			snprintf(nn, sizeof(nn), "%s.x", n);
		else
			nn[strlen(nn) - 1] = nn[strlen(nn) - 1] == 'x' ? 'y' : 'x';
		e = ed(mc(&c, "adm-tensor-unknown", 6, tfield(nn), "%s: %s renamed", tag, n), ADM_T_RENAME);
		e->tensor = n, e->name = nn;
		run(s, &c);

		e = ed(mc(&c, is_store(n) ? "adm-store-missing" : "adm-tensor-missing", 7, tfield(n),
			  "%s: %s removed", tag, n), ADM_T_REMOVE);
		e->tensor = n;
		run(s, &c);

		e = ed(mc(&c, "adm-tensor-type", 7, tfield(n), "%s: %s retyped", tag, n), ADM_T_RETYPE);
		e->tensor = n, e->ggml_type = is_store(n) ? HB_GGML_I16 : HB_GGML_I32;
		run(s, &c);

		if (em)
			mc(&c, "em-store-size", 8, "expert_store.header.store_size", "%s: %s one page longer", tag, n);
		else if (ple)
			mc(&c, "ple-extent", 9, "ple.", "%s: %s one page longer", tag, n);
		else
			mc(&c, "adm-tensor-shape", 7, tfield(n), "%s: %s dims[0]+1", tag, n);
		e = ed(&c, ADM_T_RESHAPE);
		e->tensor = n, e->n_dims = t->n_dims;
		memcpy(e->dims, t->dims, sizeof(e->dims));
		e->dims[0] += is_store(n) ? 4096 : 1;
		run(s, &c);

		if (em)
			mc(&c, "em-store-size", 8, "expert_store.header.store_size", "%s: %s one page shorter", tag, n);
		else if (ple)
			mc(&c, "ple-extent", 9, "ple.", "%s: %s one page shorter", tag, n);
		else
			mc(&c, "adm-tensor-shape", 7, tfield(n), "%s: %s last dim doubled", tag, n);
		e = ed(&c, ADM_T_RESHAPE);
		e->tensor = n, e->n_dims = t->n_dims;
		memcpy(e->dims, t->dims, sizeof(e->dims));
		if (is_store(n))
			e->dims[0] -= 4096;
		else
			e->dims[t->n_dims - 1] *= 2;
		run(s, &c);

		if (t->n_dims < HB_GGUF_MAX_DIMS) {
			e = ed(mc(&c, is_store(n) ? "adm-tensor-type" : "adm-tensor-shape", 7, tfield(n),
				  "%s: %s rank %u", tag, n, t->n_dims + 1), ADM_T_RESHAPE);
			e->tensor = n, e->n_dims = t->n_dims + 1;
			memcpy(e->dims, t->dims, sizeof(e->dims));
			e->dims[t->n_dims] = 1;
			run(s, &c);
		}

		e = ed(mc(&c, "gguf-tensor-offset-misaligned", 1, tfield(n), "%s: %s offset +32", tag, n),
		       ADM_T_OFFSET);
		e->tensor = n, e->delta = 32;
		run(s, &c);

		e = ed(mc(&c, "gguf-tensor-out-of-file", 1, tfield(n), "%s: %s offset past the end", tag, n),
		       ADM_T_OFFSET);
		e->tensor = n, e->delta = (int64_t)file_size;
		run(s, &c);

		if (i > 0) {
			const struct hb_gguf_tensor *p = &s->g.tensors[i - 1];
			const char *flagged = t->nbytes >= p->nbytes ? n : p->name.ptr;
			e = ed(mc(&c, "gguf-tensor-overlap", 1, tfield(flagged), "%s: %s onto %s", tag, n,
				  p->name.ptr), ADM_T_OFFSET);
			e->tensor = n, e->delta = (int64_t)p->offset - (int64_t)t->offset;
			run(s, &c);
		}

		e = ed(mc(&c, "gguf-duplicate-tensor", 1, tfield(n), "%s: %s twice", tag, n), ADM_T_DUPLICATE);
		e->tensor = n;
		run(s, &c);
	}
}

/* A store field: `width` bytes at store offset `off` set to `val`. */
struct sfield {
	const char *name;
	uint32_t off, width;
	uint64_t val;      /* written little-endian; 0 = flip the low byte */
	const char *id;    /* with the manifest resealed */
	int step;
	const char *field;
};

static void store_case(const struct adm_src *s, const char *tag, const char *store, const char *what,
		       uint64_t off, uint32_t width, uint64_t val, bool reseal, const char *id, int step,
		       const char *field)
{
	const struct hb_gguf_tensor *t = hb_gguf_find_tensor(&s->g, store);
	struct mcase c;
	struct adm_edit *e;
	uint8_t orig[8] = {0};

	if (!t || hb_pread_full(s->fd, orig, width, t->offset + off, "store", NULL)) {
		hb_check_fail(__FILE__, __LINE__, "%s: cannot read %s", tag, store);
		return;
	}
	e = ed(mc(&c, id, step, field, "%s: %s %s%s", tag, store, what, reseal ? " (resealed)" : ""),
	       ADM_STORE_PATCH);
	e->tensor = store, e->off = off, e->len = width, e->reseal = reseal;
	if (!val || val == UINT64_MAX) { /* flip the low bit, or add one */
		memcpy(e->bytes, orig, width);
		e->bytes[0] = val ? (uint8_t)(e->bytes[0] + 1) : e->bytes[0] ^ 0x01;
	} else {
		for (unsigned b = 0; b < width; b++)
			e->bytes[b] = (uint8_t)(val >> (8 * b));
	}
	if (!memcmp(e->bytes, orig, width))
		e->bytes[0] ^= 0x02;
	run(s, &c);
}

static void family_expert_store(const struct adm_src *s, const char *tag, uint32_t layers)
{
	static const struct sfield hdr[] = {
		{"magic", 0, 8, 0x3356505845345344ull, "em-magic", 8, "header.magic"},
		{"version", 8, 4, 3, "em-version", 8, "header.version"},
		{"header_bytes", 12, 4, 512, "em-header-bytes", 8, "header.header_bytes"},
		{"family", 16, 4, 3, "em-family", 8, "header.family"},
		{"experts_used", 20, 4, 0, "em-experts-used", 8, "header.experts_used"},
		{"layer_count", 24, 4, 0, "em-layer-count", 8, "header.layer_count"},
		{"expert_count", 28, 4, 0, "em-expert-count", 8, "header.expert_count"},
		{"descriptor_count", 40, 8, 0, "em-descriptor-count", 8, "header.descriptor_count"},
		{"descriptor_bytes", 48, 8, 0, "em-descriptor-bytes", 8, "header.descriptor_bytes"},
		{"descriptor_offset", 56, 8, 0, "em-descriptor-offset", 8, "header.descriptor_offset"},
		{"data_offset", 64, 8, 0, "em-data-offset", 8, "header.data_offset"},
		{"data_size", 72, 8, 0, "em-store-size", 8, "header.store_size"}, /* checked as the sum */
		{"store_size", 80, 8, 0, "em-store-size", 8, "header.store_size"},
		{"source_sha256", 96, 1, 0, "adm-expert-source", 8, HB_KEY_SOURCE_INVENTORY},
		{"storage_format", 160, 4, 2, "em-storage", 8, "header.storage_format"},
		{"group_size", 164, 4, 64, "em-storage", 8, "header.storage_format"},
	};
	static const struct sfield desc[] = {
		{"layer", 0, 4, 0, "em-layer-index", 8, "].layer"},
		{"expert_count", 4, 4, 0, "em-layer-experts", 8, "].expert_count"},
		{"record_bytes", 8, 8, 0, "em-record-bytes", 8, "].record_bytes"},
		{"data_offset+4096", 16, 8, 0, "em-descriptor-align", 8, "].data_offset"},
		{"data_size", 24, 8, 0, "em-layer-size", 8, "].data_size"},
	};
	static const struct sfield comp[] = {
		{"role", 0, 4, 7, "em-component", 8, ".role"},
		{"element_type", 4, 4, 0, "em-component", 8, ".element_type"},
		{"ndim", 8, 4, 0, "em-component", 8, ".ndim"},
		{"block_elements", 12, 4, 0, "em-component", 8, ".block_elements"},
		{"dim0", 16, 8, 0, "em-geometry", 8, ".dim0"},
		{"dim1", 24, 8, 0, "em-geometry", 8, ".dim1"},
		{"dim2", 32, 8, 0, "em-geometry", 8, ".dim2"},
		{"expert_bytes", 40, 8, 0, "em-component", 8, ".expert_bytes"},
		{"record_offset", 48, 8, 0, "em-component", 8, ".record_offset"},
	};
	static const char *const roles[] = {"gate", "up", "down"};
	const char *st = HB_TENSOR_EXPERT_STORE;
	char what[96], field[96];

	for (size_t i = 0; i < HB_ARRAY_LEN(hdr); i++) {
		store_case(s, tag, st, hdr[i].name, hdr[i].off, hdr[i].width, hdr[i].val, true, hdr[i].id,
			   hdr[i].step, hdr[i].field);
	}
	/* fields no structural rule covers are caught by the manifest digest
	 * when it is not resealed (structural fields are checked first) */
	store_case(s, tag, st, "source_size", 88, 8, 0, false, "em-manifest-digest", 8, "manifest");
	store_case(s, tag, st, "source_tensors", 32, 8, 0, false, "em-manifest-digest", 8, "manifest");
	store_case(s, tag, st, "source_sha256", 96, 1, 0, false, "em-manifest-digest", 8, "manifest");
	store_case(s, tag, st, "payload_sha256", 128, 1, 0, false, "em-manifest-digest", 8, "manifest");
	store_case(s, tag, st, "reserved byte 255", 255, 1, 0, false, "em-reserved-nonzero", 8, "header.reserved");
	store_case(s, tag, st, "manifest_sha256", 168, 1, 0, false, "em-manifest-digest", 8, "manifest");
	for (uint32_t b = 200; b < 256; b++) {
		snprintf(what, sizeof(what), "reserved byte %u", b);
		store_case(s, tag, st, what, b, 1, 0, true, "em-reserved-nonzero", 8, "header.reserved");
	}
	for (uint32_t l = 0; l < layers; l++) {
		uint64_t base = 256 + 224ull * l;
		for (size_t i = 0; i < HB_ARRAY_LEN(desc); i++) {
			snprintf(what, sizeof(what), "descriptor[%u].%s", l, desc[i].name);
			snprintf(field, sizeof(field), "descriptor[%u%s", l, desc[i].field);
			store_case(s, tag, st, what, base + desc[i].off, desc[i].width,
				   i == 3 ? 0 : desc[i].val, true, desc[i].id, 8, field);
		}
		for (unsigned r = 0; r < 3; r++)
			for (size_t i = 0; i < HB_ARRAY_LEN(comp); i++) {
				snprintf(what, sizeof(what), "descriptor[%u].component[%s].%s", l, roles[r],
					 comp[i].name);
				snprintf(field, sizeof(field), "descriptor[%u].component[%s]%s", l, roles[r],
					 comp[i].field);
				store_case(s, tag, st, what, base + 32 + 56 * r + comp[i].off, comp[i].width,
					   comp[i].val, true, comp[i].id, 8, field);
			}
		snprintf(what, sizeof(what), "descriptor[%u] reserved byte 200", l);
		snprintf(field, sizeof(field), "descriptor[%u].reserved", l);
		store_case(s, tag, st, what, base + 200, 1, 0, true, "em-reserved-nonzero", 8, field);
		snprintf(what, sizeof(what), "descriptor[%u] reserved byte 223", l);
		store_case(s, tag, st, what, base + 223, 1, 0, true, "em-reserved-nonzero", 8, field);
	}
}

static void family_ple_store(const struct adm_src *s, const char *tag, uint32_t tables)
{
	static const struct sfield hdr[] = {
		{"magic", 0, 8, 0x3256454c50345344ull, "ple-magic", 9, "manifest.magic"},
		{"version", 8, 4, 2, "ple-version", 9, "manifest.version"},
		{"header_bytes", 12, 4, 1024, "ple-geometry", 9, "manifest.header_bytes"},
		{"family", 16, 4, 3, "ple-family", 9, "manifest.family"},
		{"codec_id", 20, 4, 3, "ple-codec", 9, "manifest.codec_id"},
		{"codec_version", 24, 4, 2, "ple-codec", 9, "manifest.codec_version"},
		{"group_size", 28, 4, 32, "ple-codec", 9, "manifest.group_size"},
		{"row_width", 32, 4, 0, "ple-geometry", 9, "manifest.encoded_row_bytes"},
		{"encoded_row_bytes", 36, 4, 0, "ple-geometry", 9, "manifest.encoded_row_bytes"},
		{"rows_per_page", 40, 4, 128, "ple-geometry", 9, "manifest.page_count"},
		{"page_header_bytes", 44, 4, 128, "ple-geometry", 9, "manifest.page_header_bytes"},
		{"page_alignment", 48, 4, 8192, "ple-geometry", 9, "manifest.page_alignment"},
		{"row_alignment", 52, 4, 64, "ple-table-directory", 9, "].physical_rows"},
		{"table_count", 56, 4, 3, "ple-geometry", 9, "manifest.table_directory_bytes"},
		{"reserved0", 60, 4, 1, "ple-reserved-nonzero", 9, "manifest.reserved0"},
		{"page_stride", 64, 8, 0, "ple-geometry", 9, "manifest.page_stride"},
		{"page_count", 72, 8, 0, "ple-geometry", 9, "manifest.page_count"},
		{"physical_rows", 80, 8, 0, "ple-geometry", 9, "manifest.physical_rows"},
		{"table_directory_offset", 88, 8, 0, "ple-geometry", 9, "manifest.table_directory_offset"},
		{"table_directory_bytes", 96, 8, 0, "ple-geometry", 9, "manifest.table_directory_bytes"},
		{"digest_table_offset", 104, 8, 0, "ple-geometry", 9, "manifest.digest_table_offset"},
		{"digest_table_bytes", 112, 8, 0, "ple-geometry", 9, "manifest.digest_table_bytes"},
		{"payload_offset", 120, 8, 0, "ple-geometry", 9, "manifest.payload_offset"},
		{"payload_size", 128, 8, 0, "ple-geometry", 9, "manifest.payload_size"},
		{"store_size", 136, 8, 0, "ple-geometry", 9, "manifest.store_size"},
		{"hash_identity", 144, 1, 0, "adm-ple-hash", 9, "ple.manifest.hash_identity"},
	};
	static const struct sfield dir[] = {
		{"layer_id", 0, 4, UINT64_MAX, "adm-ple-geometry", 9, "ple.directory["},
		{"reserved", 4, 4, 1, "ple-reserved-nonzero", 9, "].reserved"},
		{"first_row", 8, 8, 0, "ple-table-directory", 9, "].first_row"},
		{"physical_rows", 16, 8, 0, "ple-table-directory", 9, "].physical_rows"},
		{"logical_rows", 24, 8, 0, "adm-ple-geometry", 9, "ple.directory["},
	};
	const char *st = HB_TENSOR_PLE_STORE;
	char what[96], field[96];

	for (size_t i = 0; i < HB_ARRAY_LEN(hdr); i++) {
		store_case(s, tag, st, hdr[i].name, hdr[i].off, hdr[i].width, hdr[i].val, true, hdr[i].id,
			   hdr[i].step, hdr[i].field);
	}
	store_case(s, tag, st, "hash_identity", 144, 1, 0, false, "ple-manifest-digest", 9, "manifest");
	store_case(s, tag, st, "payload_sha256 (not resealed)", 176, 1, 0, false, "ple-manifest-digest", 9,
		   "manifest");
	store_case(s, tag, st, "manifest_sha256", 208, 1, 0, false, "ple-manifest-digest", 9, "manifest");
	for (uint32_t b = 240; b < 512; b += 16) {
		snprintf(what, sizeof(what), "reserved byte %u", b);
		store_case(s, tag, st, what, b, 1, 0, true, "ple-reserved-nonzero", 9, "manifest.reserved");
	}
	store_case(s, tag, st, "reserved byte 511", 511, 1, 0, true, "ple-reserved-nonzero", 9,
		   "manifest.reserved");
	for (uint32_t t = 0; t < tables; t++)
		for (size_t i = 0; i < HB_ARRAY_LEN(dir); i++) {
			snprintf(what, sizeof(what), "directory[%u].%s", t, dir[i].name);
			if (!strncmp(dir[i].field, "ple.", 4))
				snprintf(field, sizeof(field), "ple.directory[%u]", t);
			else
				snprintf(field, sizeof(field), "[%u%s", t, dir[i].field);
			store_case(s, tag, st, what, 512 + 32ull * t + dir[i].off, dir[i].width, dir[i].val,
				   true, dir[i].id, 9, field);
		}
	store_case(s, tag, st, "digest table entry 0", 512 + 32ull * tables, 1, 0, false,
		   "ple-manifest-digest", 9, "manifest");
}

/* Text-only and MTP policy (step 10), ownership (step 11), a second store. */
static void family_policy(const struct adm_src *s, const char *tag)
{
	static const char *const vision[] = {"model.visual.blocks.0.attn.qkv.weight", "visual.merger.mlp.0.weight",
					     "v.patch_embd.weight"};
	static const char *const mtp[] = {"mtp.fc.weight", "mtp.layers.0.mlp.gate.weight"};
	struct mcase c;
	struct adm_edit *e;

	for (size_t i = 0; i < HB_ARRAY_LEN(vision); i++) {
		e = ed(mc(&c, "adm-vision-tensor", 10, "gguf.tensors", "%s: vision tensor %s", tag, vision[i]),
		       ADM_T_ADD);
		e->name = vision[i], e->ggml_type = HB_GGML_BF16, e->n_dims = 2, e->dims[0] = 16, e->dims[1] = 16;
		run(s, &c);
	}
	for (size_t i = 0; i < HB_ARRAY_LEN(mtp); i++) {
		e = ed(mc(&c, "adm-mtp-tensor", 10, "gguf.tensors", "%s: MTP tensor %s", tag, mtp[i]), ADM_T_ADD);
		e->name = mtp[i], e->ggml_type = HB_GGML_BF16, e->n_dims = 2, e->dims[0] = 16, e->dims[1] = 16;
		run(s, &c);
	}
	set_case(s, tag, HB_KEY_TEXT_ONLY, adm_v_bool(false), "adm-policy", 10, NULL, "false");
	set_case(s, tag, HB_KEY_MTP_EXECUTED, adm_v_bool(true), "adm-policy", 10, NULL, "true");

	e = ed(mc(&c, "adm-tensor-unknown", 6, "ds4.expert_major.v1", "%s: a second expert store", tag), ADM_T_ADD);
	e->name = "ds4.expert_major.v1", e->ggml_type = HB_GGML_I8, e->n_dims = 1, e->dims[0] = 4096;
	run(s, &c);
	e = ed(mc(&c, "adm-tensor-unknown", 6, "ds4.ple_rows.v2", "%s: a second PLE store", tag), ADM_T_ADD);
	e->name = "ds4.ple_rows.v2", e->ggml_type = HB_GGML_I8, e->n_dims = 1, e->dims[0] = 4096;
	run(s, &c);
	e = ed(mc(&c, "adm-tensor-unknown", 6, "blk.0.attn_q.weight", "%s: a llama.cpp-style tensor", tag),
	       ADM_T_ADD);
	e->name = "blk.0.attn_q.weight", e->ggml_type = HB_GGML_BF16, e->n_dims = 2, e->dims[0] = 8,
	e->dims[1] = 8;
	run(s, &c);

	e = ed(mc(&c, "adm-trailing-bytes", 11, "gguf.file_size", "%s: 100 bytes appended", tag), ADM_FILE_APPEND);
	memset(e->bytes, 0xa5, 64), e->len = 64;
	run(s, &c);
	e = ed(mc(&c, "adm-trailing-bytes", 11, "gguf.file_size", "%s: 4096 zero bytes appended", tag),
	       ADM_FILE_TRUNCATE);
	e->off = s->g.layout.file_size + 4096;
	run(s, &c);
	e = ed(mc(&c, "adm-ownership", 11, tfield(HB_TENSOR_PLE_STORE), "%s: a one-page gap before the PLE store", tag),
	       ADM_T_OFFSET);
	e->tensor = HB_TENSOR_PLE_STORE, e->delta = 4096, e->carry = true;
	run(s, &c);
	/* a dense tensor placed after the PLE store: its 16 KiB-rounded span
	 * reaches back into the PLE payload (a resident warm-up would touch it) */
	{
		/* moving tensor k after the store shifts the store down by k's
		 * 4096-aligned size: pick one that leaves the store's end off a
		 * 16 KiB boundary, so the moved tensor's rounded start reaches
		 * back into the payload */
		const struct hb_gguf_tensor *p = hb_gguf_find_tensor(&s->g, HB_TENSOR_PLE_STORE);
		uint64_t end = p->offset + p->nbytes;
		for (uint64_t k = 0; k < s->g.n_tensors; k++) {
			const struct hb_gguf_tensor *t = &s->g.tensors[k];
			uint64_t shift = (t->nbytes + 4095) / 4096 * 4096;
			if (is_store(t->name.ptr) || (end - shift) % 16384 == 0)
				continue;
			e = ed(mc(&c, "adm-warmup-overlap", 11, tfield(t->name.ptr), "%s: %s after the PLE store", tag,
				  t->name.ptr), ADM_T_LAST);
			e->tensor = t->name.ptr;
			run(s, &c);
			break;
		}
	}
	/* one record digest short of 32 x layers x experts */
	{
		const struct hb_gguf_kv *kv = hb_gguf_find_kv(&s->g, HB_KEY_EXPERT_RECORD_SHA);
		struct hb_gguf_value v;
		if (kv && !adm_value_copy(&v, &kv->value)) {
			v.count -= 32;
			set_case(s, tag, HB_KEY_EXPERT_RECORD_SHA, v, "adm-expert-digests", 8, NULL, "one digest short");
			v.count += 31;
			set_case(s, tag, HB_KEY_EXPERT_RECORD_SHA, v, "adm-expert-digests", 8, NULL, "one byte short");
			hb_gguf_value_release(&v);
		}
	}
	/* codecs named in metadata against the stores */
	set_case(s, tag, HB_KEY_EXPERT_CODEC, adm_v_str("mlx-affine4-g64"), "adm-expert-codec", 8, NULL,
		 "affine4 over a bf16 store");
	set_case(s, tag, HB_KEY_EXPERT_CODEC_LABEL, adm_v_str("phase2-structural-not-release-qualified"),
		 "adm-expert-codec", 8, NULL, "another label");
	set_case(s, tag, HB_KEY_PLE_CODEC, adm_v_str("mlx-affine4-g32"), "adm-ple-codec", 9, NULL,
		 "affine4 over a bf16 store");
}

/* ------------------------------------------------------------ cases */

struct fixture {
	struct adm_src r, g;
	bool ok;
};

static void setup(struct fixture *f)
{
	struct hb_error err;
	char src[4096];

	memset(f, 0, sizeof(*f));
	f->r.fd = f->g.fd = -1;
	snprintf(src, sizeof(src), "%s/tests/fixtures/upstream/general/checkpoint", hb_test_srcdir());
	f->ok = stage_realshape("realshape") && convert("realshape", "realshape.gguf") &&
		convert(src, "general.gguf");
	CHECK(f->ok);
	hb_error_clear(&err);
	f->ok = f->ok && !adm_src_open(&f->r, "realshape.gguf", &err) && !adm_src_open(&f->g, "general.gguf", &err);
	CHECK(f->ok);
}

static void teardown(struct fixture *f)
{
	adm_src_close(&f->r);
	adm_src_close(&f->g);
}

static void clean_artifacts_admit(void)
{
	static const char *const paths[] = {"realshape.gguf", "general.gguf"};
	struct fixture f;

	setup(&f);
	for (size_t i = 0; f.ok && i < HB_ARRAY_LEN(paths); i++) {
		struct hb_admit_result res;
		struct hb_error err;
		const cJSON *v;
		CHECK(admit(paths[i], &res, &err));
		CHECK(res.admitted);
		CHECK_EQ_INT(res.step, 0);
		CHECK(res.bytes_read > 0 && res.bytes_read < res.file_size);
		v = cJSON_GetObjectItemCaseSensitive(res.report, "runtime_supported");
		CHECK(cJSON_IsFalse(v));
		v = cJSON_GetObjectItemCaseSensitive(res.report, "status");
		CHECK(cJSON_IsString(v) && !strcmp(v->valuestring, HB_STATUS_CORRECTNESS_FIXTURE));
		v = cJSON_GetObjectItemCaseSensitive(res.report, "profile");
		CHECK(cJSON_IsString(v) && !strcmp(v->valuestring, HB_PROFILE_DEV));
		cJSON_Delete(res.report);
	}
	/* a faithful re-emission (no edit) is admitted too: the battery's
	 * rejections come from the edits, not from the re-emission */
	for (int k = 0; f.ok && k < 4; k++) {
		struct adm_src *s = k & 1 ? &f.g : &f.r;
		struct hb_admit_result res, orig;
		struct hb_error err;
		s->meta_only = k >= 2; /* the battery's mode: payload as holes */
		hb_error_clear(&err);
		CHECK_EQ_INT(adm_emit(s, NULL, 0, OUT, &err), 0);
		CHECK(admit(OUT, &res, &err));
		CHECK(res.admitted);
		/* the same bytes read as the original: admission does not look
		 * at what meta-only emission leaves out */
		CHECK(admit(k & 1 ? "general.gguf" : "realshape.gguf", &orig, &err));
		CHECK_EQ_U64(res.bytes_read, orig.bytes_read);
		CHECK_EQ_U64(res.file_size, orig.file_size);
		cJSON_Delete(res.report);
		cJSON_Delete(orig.report);
	}
	teardown(&f);
}

/*
 * Each model constant +1 (f64 doubled, bool flipped, gate swapped) and the
 * first boundary that sees it: upstream's own config rules (step 4), the
 * tensor shapes the constants imply (step 7), the stores' geometry (steps
 * 8-9).  Not listed, because a dev artifact has no witness for them (no
 * pin, no shape, no store field): context_length, rms_norm_eps,
 * rope.freq_base, rope.mrope_interleaved, gdn.output_gate,
 * moe.norm_topk_prob; and ple.vocab_size_base + 1 is the same hash (the
 * next prime is unchanged), so it is moved by 100 below instead.
 */
static const struct const_expect r_consts[] = {
	{"qwen4exp.block_count", "adm-constant-invalid", 4, "text_config.layer_types"},
	{"qwen4exp.embedding_length", "adm-tensor-shape", 7, "gguf.tensors[lm_head.weight]"},
	{"qwen4exp.vocab_size", "adm-tensor-shape", 7, "gguf.tensors[lm_head.weight]"},
	{"qwen4exp.hc.count", "adm-tensor-shape", 7, "gguf.tensors[hyper_connection_mixer.hc_norm.weight]"},
	{"qwen4exp.hc.lowrank", "adm-tensor-shape", 7, "gguf.tensors[hyper_connection_mixer.input_mix_weight_down.weight]"},
	{"qwen4exp.attention.head_count", "adm-constant-invalid", 4, "text_config.num_key_value_heads"},
	{"qwen4exp.attention.head_count_kv", "adm-constant-invalid", 4, "text_config.num_key_value_heads"},
	{"qwen4exp.attention.key_length", "adm-tensor-shape", 7, "gguf.tensors[layers.3.self_attn.k_norm.weight]"},
	{"qwen4exp.attention.bias", "adm-tensor-missing", 7, "gguf.tensors[layers.3.self_attn.k_proj.bias]"},
	{"qwen4exp.rope.partial_rotary_factor", "adm-constant-invalid", 4, "qwen4exp.rope.dimension_count"},
	{"qwen4exp.rope.dimension_count", "adm-constant-invalid", 4, NULL},
	{"qwen4exp.gdn.conv_kernel", "adm-tensor-shape", 7, "gguf.tensors[layers.0.linear_attn.conv1d.weight]"},
	{"qwen4exp.gdn.key_head_dim", "adm-tensor-shape", 7, "gguf.tensors[layers.0.linear_attn.conv1d.weight]"},
	{"qwen4exp.gdn.value_head_dim", "adm-tensor-shape", 7, "gguf.tensors[layers.0.linear_attn.conv1d.weight]"},
	{"qwen4exp.gdn.key_head_count", "adm-constant-invalid", 4, "text_config.linear_num_value_heads"},
	{"qwen4exp.gdn.value_head_count", "adm-constant-invalid", 4, "text_config.linear_num_value_heads"},
	{"qwen4exp.qsa.index_head_count", "adm-tensor-shape", 7, "gguf.tensors[layers.3.self_attn.indexer.index_qk_proj.weight]"},
	{"qwen4exp.qsa.index_kv_head_count", "adm-constant-invalid", 4, "text_config.indexer_kv_heads"},
	{"qwen4exp.qsa.index_head_dim", "adm-tensor-shape", 7, "gguf.tensors[layers.3.self_attn.indexer.index_qk_proj.weight]"},
	{"qwen4exp.qsa.budget", "adm-constant-invalid", 4, "text_config.indexer_budget"},
	{"qwen4exp.qsa.compress_ratio", "adm-constant-invalid", 4, "text_config.indexer_budget"},
	{"qwen4exp.moe.expert_count", "adm-tensor-shape", 7, "gguf.tensors[layers.0.mlp.gate.weight]"},
	{"qwen4exp.moe.expert_used_count", "em-experts-used", 8, "expert_store.header.experts_used"},
	{"qwen4exp.moe.expert_width", "em-geometry", 8, "expert_store.descriptor[0].component[gate].dim1"},
	{"qwen4exp.moe.shared_expert_width", "adm-tensor-shape", 7, "gguf.tensors[layers.0.mlp.shared_expert.down_proj.weight]"},
	{"qwen4exp.ple.embed_dim", "adm-constant-invalid", 4, "text_config.ple_embed_dim"},
	{"qwen4exp.ple.conv_kernel", "adm-tensor-shape", 7, "gguf.tensors[layers.1.ple.conv1d.weight]"},
	{"qwen4exp.ple.ngram_size", "adm-constant-invalid", 4, "text_config.ple_embed_dim"},
	{"qwen4exp.ple.heads_per_ngram", "adm-constant-invalid", 4, "text_config.ple_embed_dim"},
	{"qwen4exp.ple.vocab_divisor", "adm-ple-geometry", 9, "ple.directory[0]"},
	{"qwen4exp.ple.seed", "adm-ple-hash", 9, "qwen4exp.ple.multipliers"},
	{"qwen4exp.ple.row_width", "adm-ple-geometry", 9, NULL},
	{"qwen4exp.ple.hash_sha256", "adm-ple-hash", 9, NULL},
};
static const struct const_expect g_consts[] = {
	{"qwen4exp.block_count", "adm-constant-invalid", 4, "text_config.layer_types"},
	{"qwen4exp.embedding_length", "adm-tensor-shape", 7, "gguf.tensors[lm_head.weight]"},
	{"qwen4exp.vocab_size", "adm-tensor-shape", 7, "gguf.tensors[lm_head.weight]"},
	{"qwen4exp.hc.count", "adm-tensor-shape", 7, "gguf.tensors[hyper_connection_mixer.hc_norm.weight]"},
	{"qwen4exp.hc.lowrank", "adm-tensor-shape", 7, "gguf.tensors[hyper_connection_mixer.input_mix_weight_down.weight]"},
	{"qwen4exp.attention.head_count", "adm-constant-invalid", 4, "text_config.num_key_value_heads"},
	{"qwen4exp.attention.head_count_kv", "adm-tensor-shape", 7, "gguf.tensors[layers.2.self_attn.k_proj.weight]"},
	{"qwen4exp.attention.key_length", "adm-tensor-shape", 7, "gguf.tensors[layers.2.self_attn.k_norm.weight]"},
	{"qwen4exp.attention.bias", "adm-tensor-missing", 7, "gguf.tensors[layers.2.self_attn.k_proj.bias]"},
	{"qwen4exp.rope.partial_rotary_factor", "adm-constant-invalid", 4, "text_config.indexer_head_dim"},
	{"qwen4exp.rope.dimension_count", "adm-constant-invalid", 4, NULL},
	{"qwen4exp.gdn.conv_kernel", "adm-tensor-shape", 7, "gguf.tensors[layers.0.linear_attn.conv1d.weight]"},
	{"qwen4exp.gdn.key_head_dim", "adm-tensor-shape", 7, "gguf.tensors[layers.0.linear_attn.conv1d.weight]"},
	{"qwen4exp.gdn.value_head_dim", "adm-tensor-shape", 7, "gguf.tensors[layers.0.linear_attn.conv1d.weight]"},
	{"qwen4exp.gdn.key_head_count", "adm-tensor-shape", 7, "gguf.tensors[layers.0.linear_attn.conv1d.weight]"},
	{"qwen4exp.gdn.value_head_count", "adm-constant-invalid", 4, "text_config.linear_num_value_heads"},
	{"qwen4exp.qsa.index_head_count", "adm-tensor-shape", 7, "gguf.tensors[layers.2.self_attn.indexer.index_qk_proj.weight]"},
	{"qwen4exp.qsa.index_kv_head_count", "adm-constant-invalid", 4, "text_config.indexer_kv_heads"},
	{"qwen4exp.qsa.index_head_dim", "adm-tensor-shape", 7, "gguf.tensors[layers.2.self_attn.indexer.index_qk_proj.weight]"},
	{"qwen4exp.qsa.budget", "adm-constant-invalid", 4, "text_config.indexer_budget"},
	{"qwen4exp.qsa.compress_ratio", "adm-constant-invalid", 4, "text_config.indexer_budget"},
	{"qwen4exp.moe.expert_count", "adm-tensor-shape", 7, "gguf.tensors[layers.0.mlp.gate.weight]"},
	{"qwen4exp.moe.expert_used_count", "em-experts-used", 8, "expert_store.header.experts_used"},
	{"qwen4exp.moe.expert_width", "em-geometry", 8, "expert_store.descriptor[0].component[gate].dim1"},
	{"qwen4exp.moe.shared_expert_width", "adm-tensor-shape", 7, "gguf.tensors[layers.0.mlp.shared_expert.down_proj.weight]"},
	{"qwen4exp.ple.embed_dim", "adm-constant-invalid", 4, "text_config.ple_embed_dim"},
	{"qwen4exp.ple.conv_kernel", "adm-tensor-shape", 7, "gguf.tensors[layers.0.ple.conv1d.weight]"},
	{"qwen4exp.ple.ngram_size", "adm-ple-geometry", 9, "ple.directory[0]"},
	{"qwen4exp.ple.heads_per_ngram", "adm-constant-invalid", 4, "text_config.ple_embed_dim"},
	{"qwen4exp.ple.vocab_divisor", "adm-ple-geometry", 9, "ple.directory[0]"},
	{"qwen4exp.ple.seed", "adm-ple-hash", 9, "qwen4exp.ple.multipliers"},
	{"qwen4exp.ple.row_width", "adm-ple-geometry", 9, NULL},
	{"qwen4exp.ple.hash_sha256", "adm-ple-hash", 9, NULL},
};

static void mutation_battery(void)
{
	struct fixture f;
	unsigned t0 = n_total, k0 = n_ok;

	setup(&f);
	if (!f.ok)
		return;
	f.r.meta_only = f.g.meta_only = true;
	mem_fd = memfd_create("hb-mutation", MFD_CLOEXEC);
	if (mem_fd >= 0)
		snprintf(mem_path, sizeof(mem_path), "/proc/self/fd/%d", mem_fd);
	family_container(&f.r);
	family_keys(&f.r, "realshape");
	family_keys(&f.g, "general");
	family_identity(&f.r, "realshape");
	family_constants(&f.r, "realshape", r_consts, HB_ARRAY_LEN(r_consts));
	family_constants(&f.g, "general", g_consts, HB_ARRAY_LEN(g_consts));
	{
		const struct hb_gguf_kv *b = hb_gguf_find_kv(&f.r.g, HB_KEY_PLE_BASE);
		set_case(&f.r, "realshape", HB_KEY_PLE_BASE, adm_v_u64(b->value.v.u64 + 100), "adm-ple-geometry", 9,
			 "ple.directory[0]", "+100");
		b = hb_gguf_find_kv(&f.g.g, HB_KEY_PLE_BASE);
		set_case(&f.g, "general", HB_KEY_PLE_BASE, adm_v_u64(b->value.v.u64 + 100), "adm-ple-geometry", 9,
			 "ple.directory[0]", "+100");
	}
	family_layer_types(&f.r, "realshape");
	family_layer_types(&f.g, "general");
	family_array(&f.r, "realshape", HB_KEY_PLE_MULTIPLIERS, "adm-ple-hash", 9, NULL);
	family_array(&f.g, "general", HB_KEY_PLE_MULTIPLIERS, "adm-ple-hash", 9, NULL);
	family_array(&f.r, "realshape", HB_KEY_PLE_HEAD_SIZES, "adm-ple-hash", 9, NULL);
	family_array(&f.g, "general", HB_KEY_PLE_HEAD_SIZES, "adm-ple-hash", 9, NULL);
	family_array(&f.r, "realshape", HB_KEY_PLE_HEAD_OFFSETS, "adm-ple-hash", 9, NULL);
	family_array(&f.g, "general", HB_KEY_PLE_HEAD_OFFSETS, "adm-ple-hash", 9, NULL);
	family_array(&f.r, "realshape", HB_KEY_PLE_ROWS, "adm-ple-geometry", 9, NULL);
	family_array(&f.g, "general", HB_KEY_PLE_ROWS, "adm-ple-geometry", 9, NULL);
	family_array(&f.r, "realshape", HB_KEY_PLE_LOGICAL_ROWS, "adm-ple-geometry", 9, NULL);
	family_array(&f.g, "general", HB_KEY_PLE_LOGICAL_ROWS, "adm-ple-geometry", 9, NULL);
	family_ple_layers(&f.g, "general");
	family_text(&f.r, "realshape", true);
	family_text(&f.g, "general", false);
	family_tensors(&f.r, "realshape");
	family_tensors(&f.g, "general");
	family_expert_store(&f.r, "realshape", 8);
	family_expert_store(&f.g, "general", 6);
	family_ple_store(&f.r, "realshape", 1);
	family_ple_store(&f.g, "general", 2);
	family_policy(&f.r, "realshape");
	family_policy(&f.g, "general");
	teardown(&f);
	if (mem_fd >= 0)
		close(mem_fd);
	mem_fd = -1;
	printf("# mutations: %u rejected of %u\n", n_ok - k0, n_total - t0);
	CHECK(n_total - t0 > 153);
}

HB_TEST_MAIN(T(clean_artifacts_admit), T(mutation_battery))
