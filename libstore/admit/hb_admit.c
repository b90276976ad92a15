/*
 * hb_admit.c: the admission driver, steps 1-3 and 10-11, the diagnostic
 * table and the report (see hb_admit.h for the order and what is read).
 */
#include "hb_base.h"
#include "hb_admit_int.h"
#include "artifact/hb_artifact.h"
#include "artifact/hb_artifact_owners.h"
#include "hb_checked.h"
#include "hb_io.h"
#include "hb_json.h"

#include <unistd.h>

static const struct {
	const char *id;
	int step;
	const char *meaning;
} diags[] = {
#define HB_ADMIT_ROW_(sym, id, step, meaning) {id, step, meaning},
	HB_ADMIT_DIAGS(HB_ADMIT_ROW_)
#undef HB_ADMIT_ROW_
};

static const char *const step_names[] = {
#define HB_ADMIT_STEP_(n, name) [n] = name,
	HB_ADMIT_STEPS(HB_ADMIT_STEP_)
#undef HB_ADMIT_STEP_
};

const char *hb_admit_diag_id(enum hb_admit_diag d)
{
	return (unsigned)d < HB_ADMIT_DIAG_COUNT ? diags[d].id : NULL;
}

const char *hb_admit_diag_meaning(enum hb_admit_diag d)
{
	return (unsigned)d < HB_ADMIT_DIAG_COUNT ? diags[d].meaning : NULL;
}

int hb_admit_step_of(const char *id)
{
	if (!id)
		return 0;
	for (size_t i = 0; i < HB_ARRAY_LEN(diags); i++)
		if (!strcmp(id, diags[i].id))
			return diags[i].step;
	if (!strncmp(id, "gguf-", 5))
		return 1;
	if (!strncmp(id, "em-", 3))
		return 8;
	if (!strncmp(id, "ple-", 4))
		return 9;
	return 0;
}

const char *hb_admit_step_name(int step)
{
	return step >= 1 && step < (int)HB_ARRAY_LEN(step_names) ? step_names[step] : NULL;
}

int hb_adm_fail(struct hb_error *err, enum hb_admit_diag d, int code, const char *field,
		const char *fmt, ...)
{
	char msg[HB_ERROR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return hb_error_diag(err, diags[d].id, code, field, false, 0, "%s", msg);
}

static const char *type_name(uint32_t type, uint32_t elem)
{
	static char buf[2][48];
	static int k;
	if (type != HB_GGUF_ARRAY)
		return hb_gguf_type_name(type);
	k ^= 1;
	snprintf(buf[k], sizeof(buf[k]), "array of %s", hb_gguf_type_name(elem));
	return buf[k];
}

int hb_adm_kv(const struct hb_adm *a, const char *key, uint32_t type, uint32_t elem_type,
	      bool required, const struct hb_gguf_value **out, struct hb_error *err)
{
	const struct hb_gguf_kv *kv = hb_gguf_find_kv(&a->g, key);

	*out = NULL;
	if (!kv) {
		if (!required)
			return HB_OK;
		return hb_adm_fail(err, HB_ADMIT_KEY_MISSING, HB_ERR_CONTRACT, key, "required key is absent");
	}
	if (kv->value.type != type || (type == HB_GGUF_ARRAY && kv->value.elem_type != elem_type))
		return hb_adm_fail(err, HB_ADMIT_KEY_TYPE, HB_ERR_CONTRACT, key, "is %s, the schema says %s",
				   type_name(kv->value.type, kv->value.elem_type), type_name(type, elem_type));
	*out = &kv->value;
	return HB_OK;
}

/* ------------------------------------------------------------ steps 2-3 */

/* An identity or source key that is absent or mistyped is seen first at
 * step 2 or 3: report it under that step's id (adm-key-missing and
 * adm-key-type belong to step 4), keeping the message that says which. */
static int own_id(int rc, struct hb_error *err, enum hb_admit_diag d)
{
	if (rc == HB_ERR_CONTRACT && err)
		err->id = hb_admit_diag_id(d);
	return rc;
}

static int step_identity(struct hb_adm *a, struct hb_error *err)
{
	const struct hb_gguf_value *v;
	int rc;

	if ((rc = hb_adm_kv(a, HB_KEY_ARCH, HB_GGUF_STRING, 0, true, &v, err)))
		return own_id(rc, err, HB_ADMIT_ARCH);
	if (strcmp(v->str.ptr, HB_ARCH))
		return hb_adm_fail(err, HB_ADMIT_ARCH, HB_ERR_CONTRACT, HB_KEY_ARCH,
				   "'%s' is not %s", v->str.ptr, HB_ARCH);
	if ((rc = hb_adm_kv(a, HB_KEY_PROFILE, HB_GGUF_STRING, 0, true, &v, err)))
		return own_id(rc, err, HB_ADMIT_PROFILE_UNKNOWN);
	a->profile = hb_profile_find(v->str.ptr);
	if (!a->profile)
		return hb_adm_fail(err, HB_ADMIT_PROFILE_UNKNOWN, HB_ERR_CONTRACT, HB_KEY_PROFILE,
				   "unknown profile '%s'", v->str.ptr);
	if (a->o->profile && strcmp(a->o->profile, a->profile->id))
		return hb_adm_fail(err, HB_ADMIT_PROFILE_DEMANDED, HB_ERR_CONTRACT, HB_KEY_PROFILE,
				   "the artifact is '%s', '%s' was demanded", a->profile->id, a->o->profile);
	if ((rc = hb_adm_kv(a, HB_KEY_STATUS, HB_GGUF_STRING, 0, true, &v, err)))
		return own_id(rc, err, HB_ADMIT_STATUS);
	if (strcmp(v->str.ptr, a->profile->status))
		return hb_adm_fail(err, HB_ADMIT_STATUS, HB_ERR_CONTRACT, HB_KEY_STATUS,
				   "'%s', but profile %s is exactly '%s'", v->str.ptr, a->profile->id,
				   a->profile->status);
	return HB_OK;
}

static bool is_hex64(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++)
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return false;
	return n == 64;
}

static int pin_u64(const struct hb_adm *a, const char *key, uint64_t want, struct hb_error *err)
{
	const struct hb_gguf_value *v;
	int rc = hb_adm_kv(a, key, HB_GGUF_U64, 0, true, &v, err);

	if (rc)
		return own_id(rc, err, HB_ADMIT_SOURCE_PIN);
	if (want && v->v.u64 != want)
		return hb_adm_fail(err, HB_ADMIT_SOURCE_PIN, HB_ERR_CONTRACT, key,
				   "%" PRIu64 ", profile %s pins %" PRIu64, v->v.u64, a->profile->id, want);
	return HB_OK;
}

static int step_source(struct hb_adm *a, struct hb_error *err)
{
	static const char *const digests[] = {HB_KEY_SOURCE_INVENTORY, HB_KEY_SOURCE_CONFIG};
	const struct hb_profile *p = a->profile;
	const struct hb_gguf_value *v;
	int rc;

	for (size_t i = 0; i < HB_ARRAY_LEN(digests); i++) {
		if ((rc = hb_adm_kv(a, digests[i], HB_GGUF_STRING, 0, true, &v, err)))
			return own_id(rc, err, HB_ADMIT_SOURCE_IDENTITY);
		if (!is_hex64(v->str.ptr))
			return hb_adm_fail(err, HB_ADMIT_SOURCE_IDENTITY, HB_ERR_CONTRACT, digests[i],
					   "not a lowercase hex SHA-256");
	}
	if (p->source_revision) {
		const struct { const char *key, *want; } pins[] = {
			{HB_KEY_SOURCE_REPO, p->source_repo}, {HB_KEY_SOURCE_REVISION, p->source_revision},
		};
		for (size_t i = 0; i < HB_ARRAY_LEN(pins); i++) {
			if ((rc = hb_adm_kv(a, pins[i].key, HB_GGUF_STRING, 0, true, &v, err)))
				return own_id(rc, err, HB_ADMIT_SOURCE_PIN);
			if (strcmp(v->str.ptr, pins[i].want))
				return hb_adm_fail(err, HB_ADMIT_SOURCE_PIN, HB_ERR_CONTRACT, pins[i].key,
						   "'%s', profile %s pins '%s'", v->str.ptr, p->id, pins[i].want);
		}
	}
	if ((rc = pin_u64(a, HB_KEY_SOURCE_TENSORS, p->source_tensors, err)) ||
	    (rc = pin_u64(a, HB_KEY_SOURCE_SHARDS, p->source_shards, err)) ||
	    (rc = pin_u64(a, HB_KEY_SOURCE_BYTES, p->source_bytes, err)) ||
	    (rc = pin_u64(a, HB_KEY_EXCL_VISION, p->vision_tensors, err)) ||
	    (rc = pin_u64(a, HB_KEY_EXCL_MTP, p->mtp_tensors, err)))
		return rc;
	return HB_OK;
}

/* ------------------------------------------------------------ steps 10-11 */

static int step_policy(struct hb_adm *a, struct hb_error *err)
{
	const struct hb_gguf_value *v;
	int rc;

	if (a->vision_tensors)
		return hb_adm_fail(err, HB_ADMIT_VISION_TENSOR, HB_ERR_CONTRACT, "gguf.tensors",
				   "%" PRIu64 " vision tensors in a text-only artifact", a->vision_tensors);
	if (a->mtp_tensors)
		return hb_adm_fail(err, HB_ADMIT_MTP_TENSOR, HB_ERR_CONTRACT, "gguf.tensors",
				   "%" PRIu64 " MTP tensors; MTP is excluded and never executed", a->mtp_tensors);
	if ((rc = hb_adm_kv(a, HB_KEY_TEXT_ONLY, HB_GGUF_BOOL, 0, true, &v, err)))
		return rc;
	if (!v->v.b)
		return hb_adm_fail(err, HB_ADMIT_POLICY, HB_ERR_CONTRACT, HB_KEY_TEXT_ONLY, "must be true");
	if ((rc = hb_adm_kv(a, HB_KEY_MTP_EXECUTED, HB_GGUF_BOOL, 0, true, &v, err)))
		return rc;
	if (v->v.b)
		return hb_adm_fail(err, HB_ADMIT_POLICY, HB_ERR_CONTRACT, HB_KEY_MTP_EXECUTED, "must be false");
	return HB_OK;
}

/* Apple's 16 KiB pages are the coarsest a resident warm-up would round to. */
#define WARMUP_PAGE 16384u

/*
 * The reader lists a gap between two tensors as padding it never reads.
 * An artifact has no such slack: each tensor starts at the first aligned
 * offset after its predecessor (what the writer lays out), so a padding
 * range of a whole alignment unit or more is a gap nobody owns.
 */
static int check_gaps(const struct hb_adm *a, struct hb_error *err)
{
	const struct hb_gguf_layout *L = &a->g.layout;
	uint64_t end = L->data_start;
	char field[HB_ERROR_FIELD_MAX];

	for (size_t i = 0; i < L->n_ranges; i++) {
		const struct hb_gguf_range *r = &L->ranges[i];
		if (r->owner != HB_GGUF_OWN_TENSOR)
			continue;
		if (r->offset - end >= L->alignment) {
			snprintf(field, sizeof(field), "gguf.tensors[%s].offset", a->g.tensors[r->tensor].name.ptr);
			return hb_adm_fail(err, HB_ADMIT_OWNERSHIP, HB_ERR_CONTRACT, field,
					   "starts at %" PRIu64 ", leaving a %" PRIu64 "-byte gap after %" PRIu64,
					   r->offset, r->offset - end, end);
		}
		end = r->offset + r->length;
	}
	return HB_OK;
}

static int step_ownership(struct hb_adm *a, cJSON *owners, struct hb_error *err)
{
	const struct hb_ple_layout *pl = a->ple ? hb_ple_store_layout(a->ple) : NULL;
	int rc;

	if ((rc = check_gaps(a, err)))
		return rc;
	/* The file ends exactly at its last tensor padded to the alignment:
	 * no trailing bytes, and no padding cut short. */
	{
		uint64_t end = a->g.layout.data_start, want;
		for (uint64_t i = 0; i < a->g.n_tensors; i++)
			if (a->g.tensors[i].offset + a->g.tensors[i].nbytes > end)
				end = a->g.tensors[i].offset + a->g.tensors[i].nbytes;
		want = (end + a->g.layout.alignment - 1) / a->g.layout.alignment * a->g.layout.alignment;
		if (a->file_size != want || a->file_size != a->g.layout.file_size)
			return hb_adm_fail(err, HB_ADMIT_TRAILING, HB_ERR_CONTRACT, "gguf.file_size",
					   "the file has %" PRIu64 " bytes, its owners end at %" PRIu64,
					   a->file_size, want);
	}
	rc = hb_artifact_owners(&a->g.layout, a->g.tensors, &a->em, a->em_index, pl, a->ple_index, owners);
	if (rc == HB_ERR_NOMEM)
		return hb_error_set(err, rc, "admission", "out of memory");
	if (rc)
		return hb_adm_fail(err, HB_ADMIT_OWNERSHIP, HB_ERR_CONTRACT, "gguf.ranges",
				   "the byte ranges do not tile the file exactly");
	if (pl) {
		uint64_t p0 = a->g.tensors[a->ple_index].offset + pl->payload_offset;
		uint64_t p1 = p0 + pl->payload_size;
		for (uint64_t i = 0; i < a->g.n_tensors; i++) {
			const struct hb_gguf_tensor *t = &a->g.tensors[i];
			uint64_t lo = t->offset / WARMUP_PAGE * WARMUP_PAGE;
			uint64_t hi = (t->offset + t->nbytes + WARMUP_PAGE - 1) / WARMUP_PAGE * WARMUP_PAGE;
			char field[HB_ERROR_FIELD_MAX];
			if (i == a->ple_index || i == a->em_index || !t->nbytes)
				continue;
			if (lo < p1 && hi > p0) {
				snprintf(field, sizeof(field), "gguf.tensors[%s]", t->name.ptr);
				return hb_adm_fail(err, HB_ADMIT_WARMUP, HB_ERR_CONTRACT, field,
						   "its 16 KiB-rounded span reaches the PLE payload");
			}
		}
	}
	return HB_OK;
}

/* ------------------------------------------------------------ step 9, early */

/*
 * Step 9's manifest check hashes the whole PLE digest table (40 MB on the
 * real geometry: 29-39 ms, one SHA-256 stream that no second core can
 * share), while everything before it needs none of it: the header parse
 * (the 4 MB embedded tokenizer copied and checked), the tokenizer's digest
 * and ids, the tensor set, the expert descriptors.  So before step 1 a
 * skim of the header (hb_gguf_locate_tensor: lengths only) names the PLE
 * store's extent, and a thread opens the store beside steps 1-8; step 9
 * takes its result as its own, in its place in the order, when the parsed
 * tensor has exactly that extent, and opens the store itself otherwise.
 * Every refusal before step 9 waits for the thread and counts what it read
 * (bytes_read stays the same from run to run): a refusal costs the hash.
 */
static void *early_ple(void *arg)
{
	struct hb_adm_early *e = arg;

	hb_error_clear(&e->err);
	e->rc = hb_ple_store_open_manifest(&e->ple, e->a->fd, e->offset, e->nbytes, &e->err);
	return NULL;
}

void hb_adm_early_ple_start(struct hb_adm *a)
{
	uint64_t offset, nbytes, skimmed = 0;
	int rc = hb_gguf_locate_tensor(a->fd, HB_TENSOR_PLE_STORE, &offset, &nbytes, &skimmed);

	a->bytes_read_stores += skimmed;
	/* what step 9 would open; anything else it checks first itself */
	if (rc || offset % HB_STORE_FILE_ALIGN)
		return;
	a->early.a = a;
	a->early.offset = offset;
	a->early.nbytes = nbytes;
	a->early.started = !pthread_create(&a->early.thread, NULL, early_ple, &a->early);
}

static void early_join(struct hb_adm *a)
{
	if (a->early.started && !a->early.joined) {
		pthread_join(a->early.thread, NULL);
		a->early.joined = true;
	}
}

bool hb_adm_early_ple_take(struct hb_adm *a, const struct hb_gguf_tensor *t, int *rc,
			   struct hb_error *err)
{
	early_join(a);
	if (!a->early.started || a->early.taken || t->offset != a->early.offset ||
	    t->nbytes != a->early.nbytes)
		return false;
	a->early.taken = true;
	a->ple = a->early.ple;
	a->early.ple = NULL;
	*rc = a->early.rc;
	if (*rc && err)
		*err = a->early.err;
	return true;
}

void hb_adm_early_ple_finish(struct hb_adm *a)
{
	early_join(a);
	if (a->early.ple) {
		a->bytes_read_stores += hb_ple_store_meta_bytes_read(a->early.ple);
		hb_ple_store_close(a->early.ple);
		a->early.ple = NULL;
	}
}

/* ------------------------------------------------------------ report */

static int report_common(const struct hb_adm *a, const struct hb_admit_result *res, cJSON *r)
{
	int rc = 0;

	rc |= hb_json_add_str(r, "schema", "hebrus-admission-report-v1");
	rc |= hb_json_add_str(r, "artifact", a->o->path);
	rc |= hb_json_add_bool(r, "admitted", res->admitted);
	rc |= hb_json_add_u64(r, "file_bytes", a->file_size);
	rc |= hb_json_add_u64(r, "bytes_read", res->bytes_read);
	if (a->profile) {
		rc |= hb_json_add_str(r, "profile", a->profile->id);
		rc |= hb_json_add_str(r, "status", a->profile->status);
		rc |= hb_json_add_str(r, "geometry_source", a->profile->from_config ? "metadata" : "profile");
	}
	/* AFN-013: admission is not capability; no artifact is runnable yet */
	rc |= hb_json_add_bool(r, "runtime_supported", false);
	if (a->em_parsed) {
		cJSON *c = cJSON_AddObjectToObject(r, "codecs");
		rc |= !c || hb_json_add_str(c, "experts", a->em.codec->name) ||
		      hb_json_add_str(c, "experts_label", a->em.codec->label);
		if (c && a->ple) {
			const struct hb_ple_layout *l = hb_ple_store_layout(a->ple);
			rc |= hb_json_add_str(c, "ple", l->codec_id == HB_PLE_CODEC_BF16 ? "bf16" : "mlx-affine4-g32");
		}
	}
	return rc ? HB_ERR_NOMEM : HB_OK;
}

static int report_rejection(const struct hb_error *err, int step, cJSON *r)
{
	cJSON *d = cJSON_AddObjectToObject(r, "diagnostic");
	int rc = 0;

	if (!d)
		return HB_ERR_NOMEM;
	rc |= hb_json_add_str(d, "id", err->id ? err->id : hb_err_name(err->code));
	rc |= hb_json_add_u64(d, "step", (uint64_t)step);
	rc |= hb_json_add_str(d, "step_name", hb_admit_step_name(step) ? hb_admit_step_name(step) : "unknown");
	rc |= hb_json_add_str(d, "field", err->field);
	rc |= hb_json_add_str(d, "message", err->msg);
	if (err->has_offset)
		rc |= hb_json_add_u64(d, "offset", err->offset);
	return rc ? HB_ERR_NOMEM : HB_OK;
}

/* ------------------------------------------------------------ driver */

static bool system_failure(int code)
{
	return code == HB_ERR_IO || code == HB_ERR_NOMEM || code == HB_ERR_INTERNAL;
}

int hb_admit(const struct hb_admit_opts *o, struct hb_admit_result *res, struct hb_error *err)
{
	struct hb_adm a;
	cJSON *report = cJSON_CreateObject(), *owners = NULL;
	int step = 1, rc;

	memset(res, 0, sizeof(*res));
	memset(&a, 0, sizeof(a));
	a.o = o;
	a.fd = -1;
	a.em_index = a.ple_index = HB_NO_TENSOR;
	hb_gguf_init(&a.g);
	if (!report)
		return hb_error_set(err, HB_ERR_NOMEM, "admission", "out of memory");
	if (o->use_fd)
		a.fd = o->fd; /* the caller's, not closed here */
	rc = o->use_fd ? (o->fd >= 0 ? HB_OK : hb_error_set(err, HB_ERR_INVALID, "admission.fd", "no descriptor"))
		       : hb_open_read(o->path, &a.fd, err);
	if (!rc)
		rc = hb_file_size(a.fd, &a.file_size, o->path, err);
	if (rc)
		goto system;
	hb_adm_early_ple_start(&a);
	rc = hb_gguf_read_fd(&a.g, a.fd, NULL, err);
	if (rc && system_failure(rc))
		goto system;
	if (!rc) {
		step = 2;
		rc = step_identity(&a, err);
	}
	if (!rc) { step = 3; rc = step_source(&a, err); }
	if (!rc) { step = 4; rc = hb_adm_constants(&a, err); }
	if (!rc) { step = 5; rc = hb_adm_text(&a, err); }
	if (!rc) { step = 6; rc = hb_adm_classify(&a, err); }
	if (!rc) { step = 7; rc = hb_adm_tensor_set(&a, err); }
	if (!rc) { step = 8; rc = hb_adm_experts(&a, err); }
	if (!rc) { step = 9; rc = hb_adm_ple(&a, err); }
	if (!rc) { step = 10; rc = step_policy(&a, err); }
	if (!rc) {
		step = 11;
		owners = cJSON_CreateArray();
		rc = owners ? step_ownership(&a, owners, err) : hb_error_set(err, HB_ERR_NOMEM, "admission", "out of memory");
	}
	if (rc && system_failure(rc))
		goto system;
	res->admitted = rc == HB_OK;
	res->step = rc ? step : 0;
	if (res->admitted && o->cfg_out)
		*o->cfg_out = a.cfg;
	hb_adm_early_ple_finish(&a);
	res->bytes_read = a.g.bytes_read + a.bytes_read_stores;
	res->file_size = a.file_size;
	res->vocab_semantic = a.vocab_semantic ? a.vocab_semantic : a.cfg.vocab_size;
	rc = report_common(&a, res, report);
	if (!rc && !res->admitted)
		rc = report_rejection(err, step, report);
	if (!rc && res->admitted) {
		cJSON_AddItemToObject(report, "owners", owners);
		owners = NULL;
	}
	if (rc) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "admission", "out of memory");
		goto system;
	}
	res->report = report;
	report = NULL;
	goto out;
system:
	res->admitted = false;
out:
	hb_adm_early_ple_finish(&a);
	cJSON_Delete(owners);
	cJSON_Delete(report);
	if (a.em_parsed)
		hb_em_layout_release(&a.em);
	hb_ple_store_close(a.ple);
	free(a.expected);
	free(a.expected_sorted);
	free(a.tensors_sorted);
	hb_gguf_release(&a.g);
	if (a.fd >= 0 && !o->use_fd)
		close(a.fd);
	return res->report ? HB_OK : rc;
}
