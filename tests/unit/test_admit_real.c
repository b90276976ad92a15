/*
 * Unit tests: admission of the released profile's full geometry, without
 * 360 GB.  adm_sparse builds a sparse artifact of qwen4exp-flash-next (48
 * layers x 512 experts, 320,001,536 PLE rows, payload as holes) in the
 * case's temporary directory; admission must admit it reading only a tiny
 * fraction of it, report the exact status word and runtime_supported
 * false, and refuse the real profile's pinned-value mutations with the
 * exact id and step.  Status is not capability: every admitted artifact,
 * of either profile, says runtime_supported false.
 */
#include "hb_base.h"
#include "harness.h"
#include "adm_mutate.h"
#include "adm_sparse.h"
#include "admit/hb_admit.h"
#include "artifact/hb_artifact.h"
#include "hb-convert/hb_convert.h"
#include "model/hb_profile.h"
#include "hb_sha256.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* mutations are written to a memory file and admitted by its /proc path */
static int mem_fd = -1;
static char mem_path[64];

#define ART "flash-next.gguf"
#define OUT "m.gguf"

static bool admit(const char *path, const char *profile, struct hb_admit_result *res, struct hb_error *err)
{
	struct hb_admit_opts o = {.path = path, .profile = profile};

	hb_error_clear(err);
	memset(res, 0, sizeof(*res));
	return hb_admit(&o, res, err) == HB_OK;
}

static const char *report_str(const cJSON *r, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool build(struct adm_sparse_info *info)
{
	struct hb_error err;
	int rc;

	hb_error_clear(&err);
	rc = adm_sparse_build(ART, info, &err);
	if (rc)
		printf("# adm_sparse_build: %s: %s\n", err.field, err.msg);
	return rc == 0;
}

static void full_geometry_admitted(void)
{
	struct adm_sparse_info info;
	struct hb_admit_result res;
	struct hb_error err;
	struct stat st;
	const cJSON *v;

	if (!build(&info)) {
		CHECK(false);
		return;
	}
	CHECK(stat(ART, &st) == 0);
	CHECK_EQ_U64((uint64_t)st.st_size, info.file_size);
	/* the real geometry's apparent size; few real blocks */
	CHECK(info.file_size > 340000000000ull);
	CHECK((uint64_t)st.st_blocks * 512 < 64ull << 20);
	CHECK_EQ_U64(info.ple_pages, (320001536ull + 255) / 256);
	CHECK(admit(ART, NULL, &res, &err));
	if (!res.admitted)
		printf("# refused: %s step %d %s: %s\n", err.id ? err.id : "-", res.step, err.field, err.msg);
	CHECK(res.admitted);
	CHECK_EQ_INT(res.step, 0);
	CHECK_EQ_U64(res.file_size, info.file_size);
	CHECK_STR(report_str(res.report, "profile"), HB_PROFILE_FLASH_NEXT);
	CHECK_STR(report_str(res.report, "status"), HB_STATUS_PINNED_NOT_SUPPORTED);
	CHECK_STR(report_str(res.report, "geometry_source"), "profile");
	v = cJSON_GetObjectItemCaseSensitive(res.report, "runtime_supported");
	CHECK(cJSON_IsFalse(v));
	/* what admission read: the header region, the expert store's header
	 * and 48 descriptors, the PLE manifest, directory and digest table --
	 * nothing else; all of it a sliver of the file */
	CHECK(res.bytes_read >= info.header_bytes + 256 + 48 * 224 + 512 + 32 + 32 * info.ple_pages);
	CHECK(res.bytes_read < info.header_bytes + 32 * info.ple_pages + (1u << 20));
	CHECK(res.bytes_read * 1000 < res.file_size);
	printf("# full geometry: %" PRIu64 " tensors, file %" PRIu64 " bytes (%" PRIu64
	       " allocated), admission read %" PRIu64 " bytes (%.2e of the file)\n",
	       info.tensors, info.file_size, (uint64_t)st.st_blocks * 512, res.bytes_read,
	       (double)res.bytes_read / (double)res.file_size);
	cJSON_Delete(res.report);
	/* demanding the other profile is refused at identity */
	CHECK(admit(ART, HB_PROFILE_DEV, &res, &err));
	CHECK(!res.admitted);
	CHECK_STR(err.id, "adm-profile-demanded");
	CHECK_EQ_INT(res.step, 2);
	cJSON_Delete(res.report);
}

struct rcase {
	const char *what;
	const char *key;
	struct hb_gguf_value val;
	const char *id;
	int step;
	const char *field;
};

static void run_case(const struct adm_src *s, const struct adm_edit *e, size_t n, const char *what,
		     const char *id, int step, const char *field, unsigned *ok)
{
	struct hb_admit_result res;
	struct hb_error err;
	bool good;

	hb_error_clear(&err);
	if (mem_fd >= 0 ? adm_emit_fd(s, e, n, mem_fd, &err) : adm_emit(s, e, n, OUT, &err)) {
		hb_check_fail(__FILE__, __LINE__, "[%s] cannot write: %s", what, err.msg);
		return;
	}
	if (!admit(mem_fd >= 0 ? mem_path : OUT, NULL, &res, &err)) {
		hb_check_fail(__FILE__, __LINE__, "[%s] admission did not run: %s", what, err.msg);
		return;
	}
	good = !res.admitted && err.id && !strcmp(err.id, id) && res.step == step &&
	       hb_admit_step_of(err.id) == step && strstr(err.field, field);
	if (good)
		(*ok)++;
	else
		hb_check_fail(__FILE__, __LINE__, "[%s] expected %s step %d ~%s; got %s %s step %d field %s: %s",
			      what, id, step, field, res.admitted ? "ADMITTED" : "refused",
			      err.id ? err.id : "-", res.step, err.field, err.msg);
	cJSON_Delete(res.report);
}

static void set1(const struct adm_src *s, const char *what, const char *key, struct hb_gguf_value v,
		 const char *id, int step, const char *field, unsigned *ok, unsigned *total)
{
	struct adm_edit e;

	memset(&e, 0, sizeof(e));
	e.kind = ADM_KV_SET, e.key = key, e.val = v;
	(*total)++;
	run_case(s, &e, 1, what, id, step, field, ok);
}

static void real_profile_rejections(void)
{
	struct adm_sparse_info info;
	struct adm_src s;
	struct hb_error err;
	unsigned ok = 0, total = 0;
	uint32_t stop_bad[2] = {248044, 248045}, stop_one[1] = {248044}, stop_rev[2] = {248046, 248044};
	uint32_t ple_ids[1] = {1};
	char *tok = NULL;
	size_t tok_len = 0;
	char hex[HB_SHA256_HEX];

	if (!build(&info)) {
		CHECK(false);
		return;
	}
	hb_error_clear(&err);
	if (adm_src_open(&s, ART, &err)) {
		hb_check_fail(__FILE__, __LINE__, "open: %s", err.msg);
		return;
	}
	s.meta_only = true; /* the payload is holes anyway */
	mem_fd = memfd_create("hb-real-mutation", MFD_CLOEXEC);
	if (mem_fd >= 0)
		snprintf(mem_path, sizeof(mem_path), "/proc/self/fd/%d", mem_fd);

	set1(&s, "revision changed", HB_KEY_SOURCE_REVISION,
	     adm_v_str("de4b8e4d43b917e7706784d8bb445c9af86a3541"), "adm-source-pin", 3,
	     HB_KEY_SOURCE_REVISION, &ok, &total);
	set1(&s, "repository changed", HB_KEY_SOURCE_REPO, adm_v_str("Qwen/Qwen3.8-Flash"), "adm-source-pin", 3,
	     HB_KEY_SOURCE_REPO, &ok, &total);
	set1(&s, "1657 source tensors", HB_KEY_SOURCE_TENSORS, adm_v_u64(1657), "adm-source-pin", 3,
	     HB_KEY_SOURCE_TENSORS, &ok, &total);
	set1(&s, "130 shards", HB_KEY_SOURCE_SHARDS, adm_v_u64(130), "adm-source-pin", 3, HB_KEY_SOURCE_SHARDS,
	     &ok, &total);
	set1(&s, "source bytes + 1", HB_KEY_SOURCE_BYTES, adm_v_u64(359999963129ull), "adm-source-pin", 3,
	     HB_KEY_SOURCE_BYTES, &ok, &total);
	set1(&s, "332 vision exclusions", HB_KEY_EXCL_VISION, adm_v_u64(332), "adm-source-pin", 3,
	     HB_KEY_EXCL_VISION, &ok, &total);
	set1(&s, "32 MTP exclusions", HB_KEY_EXCL_MTP, adm_v_u64(32), "adm-source-pin", 3, HB_KEY_EXCL_MTP,
	     &ok, &total);
	set1(&s, "status correctness-fixture", HB_KEY_STATUS, adm_v_str(HB_STATUS_CORRECTNESS_FIXTURE),
	     "adm-status", 2, HB_KEY_STATUS, &ok, &total);
	set1(&s, "status supported", HB_KEY_STATUS, adm_v_str(HB_STATUS_SUPPORTED), "adm-status", 2,
	     HB_KEY_STATUS, &ok, &total);
	/* pinned constants: the profile refuses them at step 4, before any
	 * tensor shape or store geometry could */
	set1(&s, "511 experts", HB_KEY_EXPERTS, adm_v_u32(511), "adm-profile-constant", 4,
	     "text_config.num_experts", &ok, &total);
	set1(&s, "top-8", HB_KEY_EXPERTS_USED, adm_v_u32(8), "adm-profile-constant", 4,
	     "text_config.num_experts_per_tok", &ok, &total);
	set1(&s, "expert width 768", HB_KEY_EXPERT_WIDTH, adm_v_u32(768), "adm-profile-constant", 4,
	     "text_config.moe_intermediate_size", &ok, &total);
	set1(&s, "context 131072", HB_KEY_CONTEXT, adm_v_u32(131072), "adm-profile-constant", 4,
	     "text_config.max_position_embeddings", &ok, &total);
	set1(&s, "vocab 248321", HB_KEY_VOCAB, adm_v_u32(248321), "adm-profile-constant", 4,
	     "text_config.vocab_size", &ok, &total);
	set1(&s, "hc_count 3", HB_KEY_HC_COUNT, adm_v_u32(3), "adm-profile-constant", 4, "text_config.hc_count",
	     &ok, &total);
	set1(&s, "PLE on layer 1", HB_KEY_PLE_LAYERS, adm_v_array(HB_GGUF_U32, ple_ids, 1),
	     "adm-profile-constant", 4, "text_config.ple_layer_ids", &ok, &total);
	/* every layer type of the 48, flipped */
	{
		const struct hb_gguf_kv *kv = hb_gguf_find_kv(&s.g, HB_KEY_LAYER_TYPES);
		for (uint64_t i = 0; kv && i < kv->value.count; i++) {
			struct hb_gguf_value v;
			struct hb_gguf_str *el;
			char what[64], field[64];
			if (adm_value_copy(&v, &kv->value))
				break;
			el = &((struct hb_gguf_str *)v.elems)[i];
			free(el->ptr);
			el->ptr = strdup((i + 1) % 4 ? "qwen_sparse_attention" : "linear_attention");
			el->len = strlen(el->ptr);
			snprintf(what, sizeof(what), "layer_types[%" PRIu64 "] flipped", i);
			snprintf(field, sizeof(field), i == 1 ? "text_config.ple_layer_ids" : "text_config.layer_types[%" PRIu64 "]", i);
			/* layer 2 (one-indexed) carries the PLE: upstream's own rule
			 * (PLE on a linear layer) sees that first */
			set1(&s, what, HB_KEY_LAYER_TYPES, v, i == 1 ? "adm-constant-invalid" : "adm-profile-constant", 4,
			     field, &ok, &total);
			hb_gguf_value_release(&v);
		}
	}
	/* text identity: 248,078 ids, stop sets with 248045, one, reversed */
	if (!adm_sparse_tokenizer(248078, &tok, &tok_len, &err)) {
		struct adm_edit e[2];
		uint8_t d[HB_SHA256_BYTES];
		hb_sha256_buf(tok, tok_len, d);
		hb_hex_encode(d, sizeof(d), hex);
		memset(e, 0, sizeof(e));
		e[0].kind = e[1].kind = ADM_KV_SET;
		e[0].key = HB_KEY_TOKENIZER_JSON, e[0].val = adm_v_strn(tok, tok_len);
		e[1].key = HB_KEY_TOKENIZER_SHA, e[1].val = adm_v_str(hex);
		total++;
		run_case(&s, e, 2, "semantic vocabulary 248078", "adm-vocab-semantic", 5, HB_KEY_TOKENIZER_JSON, &ok);
		/* and the tokenizer dropped: the profile binds one */
		e[0].kind = e[1].kind = ADM_KV_REMOVE;
		total++;
		run_case(&s, e, 2, "no tokenizer", "adm-tokenizer-missing", 5, HB_KEY_TOKENIZER_JSON, &ok);
		free(tok);
	}
	set1(&s, "stop ids 248044 248045", HB_KEY_STOP, adm_v_array(HB_GGUF_U32, stop_bad, 2), "adm-stop-ids", 5,
	     HB_KEY_STOP, &ok, &total);
	set1(&s, "stop ids 248044 only", HB_KEY_STOP, adm_v_array(HB_GGUF_U32, stop_one, 1), "adm-stop-ids", 5,
	     HB_KEY_STOP, &ok, &total);
	set1(&s, "stop ids reversed", HB_KEY_STOP, adm_v_array(HB_GGUF_U32, stop_rev, 2), "adm-stop-ids", 5,
	     HB_KEY_STOP, &ok, &total);
	/* the real geometry of the stores */
	{
		struct adm_edit e;
		memset(&e, 0, sizeof(e));
		e.kind = ADM_STORE_PATCH, e.tensor = HB_TENSOR_EXPERT_STORE, e.off = 28, e.len = 4, e.reseal = true;
		e.bytes[0] = 0xff, e.bytes[1] = 0x01; /* 511 experts in the store */
		total++;
		run_case(&s, &e, 1, "expert store of 511 experts", "em-expert-count", 8, "header.expert_count", &ok);
		e.off = 24, e.bytes[0] = 47, e.bytes[1] = 0; /* 47 layers */
		total++;
		run_case(&s, &e, 1, "expert store of 47 layers", "em-layer-count", 8, "header.layer_count", &ok);
	}
	adm_src_close(&s);
	if (mem_fd >= 0)
		close(mem_fd);
	mem_fd = -1;
	printf("# real-profile mutations: %u rejected of %u\n", ok, total);
	CHECK_EQ_U64(ok, total);
}

/* Status is not capability: every admitted artifact, of any profile,
 * reports runtime_supported false and its profile's exact status word. */
static void status_is_not_capability(void)
{
	struct adm_sparse_info info;
	struct hb_convert_opts o;
	struct hb_admit_result res;
	struct hb_error err;
	char src[4096];
	cJSON *rep = NULL;

	snprintf(src, sizeof(src), "%s/tests/fixtures/upstream/realshape/checkpoint", hb_test_srcdir());
	memset(&o, 0, sizeof(o));
	o.src_dir = src, o.out_path = "dev.gguf", o.expert_codec = HB_CONV_EXPERTS_BF16;
	o.ple_codec = HB_CONV_PLE_BF16, o.profile = "auto", o.threads = 2;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_convert(&o, &rep, &err), 0);
	cJSON_Delete(rep);
	CHECK(build(&info));
	for (int k = 0; k < 2; k++) {
		const char *path = k ? ART : "dev.gguf";
		const struct hb_profile *p = k ? hb_profile_flash_next() : hb_profile_dev();
		CHECK(admit(path, NULL, &res, &err));
		CHECK(res.admitted);
		CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(res.report, "runtime_supported")));
		CHECK_STR(report_str(res.report, "status"), p->status);
		CHECK_STR(report_str(res.report, "profile"), p->id);
		/* and neither status word is "supported" */
		CHECK(strcmp(p->status, HB_STATUS_SUPPORTED) != 0);
		cJSON_Delete(res.report);
	}
}

HB_TEST_MAIN(T(full_geometry_admitted), T(real_profile_rejections), T(status_is_not_capability))
