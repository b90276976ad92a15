/*
 * hb_admit_tensors.c: admission steps 6 (classify every tensor), 7 (the
 * exact tensor identity set), 8 (ExpertMajor manifest and descriptors) and
 * 9 (PLE manifest, geometry, hash identity, extent).  Reads store headers,
 * descriptors and the PLE manifest only, never a record or a page.
 */
#include "hb_base.h"
#include "hb_admit_int.h"
#include "artifact/hb_artifact.h"
#include "artifact/hb_artifact_owners.h"
#include "hb_sha256.h"

/* Steps 6 and 7 look every tensor up among the expected ones and every
 * expected one among the tensors: sorted names and binary search, not a
 * scan each (the real geometry's 1,069 x 1,067 strcmp took 19 ms of
 * admission, measured). */
static int cmp_expected(const void *x, const void *y)
{
	return strcmp((*(const struct hb_expected_tensor *const *)x)->dest,
		      (*(const struct hb_expected_tensor *const *)y)->dest);
}

static int key_expected(const void *key, const void *elem)
{
	return strcmp((const char *)key, (*(const struct hb_expected_tensor *const *)elem)->dest);
}

static bool expected(const struct hb_adm *a, const char *dest)
{
	return a->n_expected &&
	       bsearch(dest, a->expected_sorted, a->n_expected, sizeof(*a->expected_sorted), key_expected);
}

static int cmp_tensor(const void *x, const void *y)
{
	return strcmp((*(const struct hb_gguf_tensor *const *)x)->name.ptr,
		      (*(const struct hb_gguf_tensor *const *)y)->name.ptr);
}

static int key_tensor(const void *key, const void *elem)
{
	return strcmp((const char *)key, (*(const struct hb_gguf_tensor *const *)elem)->name.ptr);
}

/* The tensor named name (names are unique and hold no NUL: the reader
 * refuses both). */
static const struct hb_gguf_tensor *find_tensor(const struct hb_adm *a, const char *name)
{
	const struct hb_gguf_tensor *const *hit =
		a->g.n_tensors ? bsearch(name, a->tensors_sorted, (size_t)a->g.n_tensors,
					 sizeof(*a->tensors_sorted), key_tensor)
			       : NULL;
	return hit ? *hit : NULL;
}

static bool is_vision(const char *n)
{
	return !strncmp(n, "model.visual.", 13) || !strncmp(n, "visual.", 7) || !strncmp(n, "v.", 2);
}

static bool is_mtp(const char *n)
{
	return !strncmp(n, "mtp.", 4);
}

int hb_adm_classify(struct hb_adm *a, struct hb_error *err)
{
	int rc = hb_expected_dense(&a->cfg, &a->expected, &a->n_expected, err);

	if (rc)
		return rc;
	a->expected_sorted = malloc((a->n_expected ? a->n_expected : 1) * sizeof(*a->expected_sorted));
	a->tensors_sorted = malloc((a->g.n_tensors ? (size_t)a->g.n_tensors : 1) * sizeof(*a->tensors_sorted));
	if (!a->expected_sorted || !a->tensors_sorted)
		return hb_error_set(err, HB_ERR_NOMEM, "admission", "out of memory");
	for (size_t i = 0; i < a->n_expected; i++)
		a->expected_sorted[i] = &a->expected[i];
	qsort(a->expected_sorted, a->n_expected, sizeof(*a->expected_sorted), cmp_expected);
	for (uint64_t i = 0; i < a->g.n_tensors; i++)
		a->tensors_sorted[i] = &a->g.tensors[i];
	qsort(a->tensors_sorted, (size_t)a->g.n_tensors, sizeof(*a->tensors_sorted), cmp_tensor);
	a->em_index = a->ple_index = HB_NO_TENSOR;
	for (uint64_t i = 0; i < a->g.n_tensors; i++) {
		const char *n = a->g.tensors[i].name.ptr;
		char field[HB_ERROR_FIELD_MAX];
		if (!strcmp(n, HB_TENSOR_EXPERT_STORE))
			a->em_index = (size_t)i;
		else if (!strcmp(n, HB_TENSOR_PLE_STORE))
			a->ple_index = (size_t)i;
		else if (is_vision(n))
			a->vision_tensors++;   /* classified; refused by policy (step 10) */
		else if (is_mtp(n))
			a->mtp_tensors++;
		else if (!expected(a, n)) {
			snprintf(field, sizeof(field), "gguf.tensors[%s]", n);
			return hb_adm_fail(err, HB_ADMIT_TENSOR_UNKNOWN, HB_ERR_CONTRACT, field,
					   "no rule classifies this tensor");
		}
	}
	return HB_OK;
}

int hb_adm_tensor_set(struct hb_adm *a, struct hb_error *err)
{
	char field[HB_ERROR_FIELD_MAX];

	for (size_t i = 0; i < a->n_expected; i++) {
		const struct hb_expected_tensor *x = &a->expected[i];
		const struct hb_gguf_tensor *t = find_tensor(a, x->dest);
		snprintf(field, sizeof(field), "gguf.tensors[%s]", x->dest);
		if (!t)
			return hb_adm_fail(err, HB_ADMIT_TENSOR_MISSING, HB_ERR_CONTRACT, field,
					   "expected dense tensor is absent");
		if (t->ggml_type != HB_GGML_BF16 && t->ggml_type != HB_GGML_F16 && t->ggml_type != HB_GGML_F32)
			return hb_adm_fail(err, HB_ADMIT_TENSOR_TYPE, HB_ERR_CONTRACT, field,
					   "dense tensors are BF16, F16 or F32, got type %u", t->ggml_type);
		/* GGUF dims are the reverse of the PyTorch shape */
		if (t->n_dims != x->ndim)
			return hb_adm_fail(err, HB_ADMIT_TENSOR_SHAPE, HB_ERR_CONTRACT, field,
					   "%u dimensions, the constants imply %u", t->n_dims, x->ndim);
		for (uint32_t d = 0; d < x->ndim; d++)
			if (t->dims[d] != x->shape[x->ndim - 1 - d])
				return hb_adm_fail(err, HB_ADMIT_TENSOR_SHAPE, HB_ERR_CONTRACT, field,
						   "dimension %u is %" PRIu64 ", the constants imply %" PRIu64,
						   d, t->dims[d], x->shape[x->ndim - 1 - d]);
	}
	if (a->em_index == HB_NO_TENSOR)
		return hb_adm_fail(err, HB_ADMIT_STORE_MISSING, HB_ERR_CONTRACT,
				   "gguf.tensors[" HB_TENSOR_EXPERT_STORE "]", "the routed-expert store is absent");
	if (a->cfg.n_ple_layers && a->ple_index == HB_NO_TENSOR)
		return hb_adm_fail(err, HB_ADMIT_STORE_MISSING, HB_ERR_CONTRACT,
				   "gguf.tensors[" HB_TENSOR_PLE_STORE "]", "the PLE store is absent");
	if (!a->cfg.n_ple_layers && a->ple_index != HB_NO_TENSOR)
		return hb_adm_fail(err, HB_ADMIT_STORE_EXTRA, HB_ERR_CONTRACT,
				   "gguf.tensors[" HB_TENSOR_PLE_STORE "]", "a PLE store without PLE layers");
	for (int s = 0; s < 2; s++) {
		size_t idx = s ? a->ple_index : a->em_index;
		const struct hb_gguf_tensor *t;
		if (idx == HB_NO_TENSOR)
			continue;
		t = &a->g.tensors[idx];
		if (t->ggml_type != HB_GGML_I8 || t->n_dims != 1) {
			snprintf(field, sizeof(field), "gguf.tensors[%s]", t->name.ptr);
			return hb_adm_fail(err, HB_ADMIT_TENSOR_TYPE, HB_ERR_CONTRACT, field,
					   "a store is one-dimensional I8");
		}
	}
	return HB_OK;
}

static int store_aligned(const struct hb_gguf_tensor *t, struct hb_error *err)
{
	char field[HB_ERROR_FIELD_MAX];

	if (t->offset % HB_STORE_FILE_ALIGN == 0)
		return HB_OK;
	snprintf(field, sizeof(field), "gguf.tensors[%s].offset", t->name.ptr);
	return hb_adm_fail(err, HB_ADMIT_STORE_ALIGN, HB_ERR_CONTRACT, field,
			   "file offset %" PRIu64 " is not a multiple of 4096", t->offset);
}

static int str_is(const struct hb_adm *a, const char *key, const char *want, enum hb_admit_diag d,
		  struct hb_error *err)
{
	const struct hb_gguf_value *v;
	int rc = hb_adm_kv(a, key, HB_GGUF_STRING, 0, true, &v, err);

	if (rc)
		return rc;
	if (strcmp(v->str.ptr, want))
		return hb_adm_fail(err, d, HB_ERR_CONTRACT, key, "'%s' but the store says '%s'",
				   v->str.ptr, want);
	return HB_OK;
}

int hb_adm_experts(struct hb_adm *a, struct hb_error *err)
{
	const struct hb_gguf_tensor *t = &a->g.tensors[a->em_index];
	struct hb_em_geometry geo;
	uint64_t nread = 0;
	char hex[HB_SHA256_HEX];
	int rc = store_aligned(t, err);

	if (rc)
		return rc;
	if (a->profile->from_config) {
		geo.layers = (uint32_t)a->cfg.num_layers;
		geo.experts = (uint32_t)a->cfg.num_experts;
		geo.experts_used = (uint32_t)a->cfg.num_experts_per_tok;
		geo.hidden = a->cfg.hidden_size;
		geo.intermediate = a->cfg.moe_intermediate_size;
	} else {
		hb_em_geometry_qwen4exp(&geo);
	}
	memset(&a->em, 0, sizeof(a->em));
	rc = hb_em_parse_fd(a->fd, t->offset, t->nbytes, &geo, &a->em, &nread, err);
	a->bytes_read_stores += nread;
	if (rc)
		return rc;
	a->em_parsed = true;
	if ((rc = str_is(a, HB_KEY_EXPERT_CODEC, a->em.codec->name, HB_ADMIT_EXPERT_CODEC, err)) ||
	    (rc = str_is(a, HB_KEY_EXPERT_CODEC_LABEL, a->em.codec->label, HB_ADMIT_EXPERT_CODEC, err)))
		return rc;
	/* the store names the source inventory it was made from */
	hb_hex_encode(a->em.source_sha256, HB_SHA256_BYTES, hex);
	if ((rc = str_is(a, HB_KEY_SOURCE_INVENTORY, hex, HB_ADMIT_EXPERT_SOURCE, err)))
		return rc;
	{
		const struct hb_gguf_value *v;
		uint64_t want = 32ull * a->em.layer_count * a->em.expert_count;
		if ((rc = hb_adm_kv(a, HB_KEY_EXPERT_RECORD_SHA, HB_GGUF_ARRAY, HB_GGUF_U8, true, &v, err)))
			return rc;
		if (v->count != want)
			return hb_adm_fail(err, HB_ADMIT_EXPERT_DIGESTS, HB_ERR_CONTRACT, HB_KEY_EXPERT_RECORD_SHA,
					   "%" PRIu64 " bytes for %u x %u records (%" PRIu64 " expected)",
					   v->count, a->em.layer_count, a->em.expert_count, want);
	}
	return HB_OK;
}

static int u64_array_is(const struct hb_adm *a, const char *key, const uint64_t *want, size_t n,
			enum hb_admit_diag d, struct hb_error *err)
{
	const struct hb_gguf_value *v;
	int rc = hb_adm_kv(a, key, HB_GGUF_ARRAY, HB_GGUF_U64, true, &v, err);

	if (rc)
		return rc;
	if (v->count != n)
		return hb_adm_fail(err, d, HB_ERR_CONTRACT, key, "%" PRIu64 " values, %zu expected", v->count, n);
	for (size_t i = 0; i < n; i++)
		if (((const uint64_t *)v->elems)[i] != want[i])
			return hb_adm_fail(err, d, HB_ERR_CONTRACT, key, "[%zu] is %" PRIu64 ", expected %" PRIu64,
					   i, ((const uint64_t *)v->elems)[i], want[i]);
	return HB_OK;
}

/* The hash identity in metadata and in the store equals the recomputation. */
static int check_ple_hash(struct hb_adm *a, const struct hb_ple_layout *l, struct hb_error *err)
{
	uint64_t mult[HB_QWEN_MAX_LAYERS * HB_PLE_MAX_NGRAM], sizes[HB_QWEN_MAX_LAYERS * HB_PLE_MAX_HEADS];
	uint64_t offs[HB_QWEN_MAX_LAYERS * HB_PLE_MAX_HEADS], rows[HB_QWEN_MAX_LAYERS], logical[HB_QWEN_MAX_LAYERS];
	size_t nm = 0, nh = 0, np = a->cfg.n_ple_layers;
	uint8_t digest[HB_SHA256_BYTES];
	char hex[HB_SHA256_HEX], field[HB_ERROR_FIELD_MAX];
	int rc;

	if (np > HB_PLE_MAX_TABLES)
		return hb_adm_fail(err, HB_ADMIT_PLE_GEOMETRY, HB_ERR_UNSUPPORTED, HB_KEY_PLE_LAYERS,
				   "more than %u PLE tables", HB_PLE_MAX_TABLES);
	for (size_t p = 0; p < np; p++) {
		struct hb_ple_table_hash h;
		if ((rc = hb_ple_hash_compute(&a->cfg, p, &h, err)))
			return rc;
		for (uint32_t i = 0; i < h.ngram_size; i++)
			mult[nm++] = h.multipliers[i];
		for (uint32_t i = 0; i < h.heads; i++, nh++) {
			sizes[nh] = h.head_sizes[i];
			offs[nh] = h.head_offsets[i];
		}
		rows[p] = h.physical_rows;
		logical[p] = h.logical_rows;
		snprintf(field, sizeof(field), "ple.directory[%zu]", p);
		if (l->tables[p].layer_id != h.layer_id || l->tables[p].physical_rows != h.physical_rows ||
		    l->tables[p].logical_rows != h.logical_rows)
			return hb_adm_fail(err, HB_ADMIT_PLE_GEOMETRY, HB_ERR_CONTRACT, field,
					   "layer %u, %" PRIu64 " rows (%" PRIu64 " logical); the constants give "
					   "layer %u, %" PRIu64 " (%" PRIu64 ")", l->tables[p].layer_id,
					   l->tables[p].physical_rows, l->tables[p].logical_rows, h.layer_id,
					   h.physical_rows, h.logical_rows);
		if (l->row_width != h.row_width)
			return hb_adm_fail(err, HB_ADMIT_PLE_GEOMETRY, HB_ERR_CONTRACT, "ple.manifest.row_width",
					   "%u values, the constants give %" PRIu64, l->row_width, h.row_width);
		{
			struct hb_error sub;
			hb_error_clear(&sub);
			if (hb_profile_check_ple(a->profile, &h, &sub))
				return hb_adm_fail(err, HB_ADMIT_PROFILE_CONSTANT, HB_ERR_CONTRACT, sub.field, "%s", sub.msg);
		}
	}
	if (l->table_count != np)
		return hb_adm_fail(err, HB_ADMIT_PLE_GEOMETRY, HB_ERR_CONTRACT, "ple.manifest.table_count",
				   "%u tables for %zu PLE layers", l->table_count, np);
	if ((rc = u64_array_is(a, HB_KEY_PLE_MULTIPLIERS, mult, nm, HB_ADMIT_PLE_HASH, err)) ||
	    (rc = u64_array_is(a, HB_KEY_PLE_HEAD_SIZES, sizes, nh, HB_ADMIT_PLE_HASH, err)) ||
	    (rc = u64_array_is(a, HB_KEY_PLE_HEAD_OFFSETS, offs, nh, HB_ADMIT_PLE_HASH, err)) ||
	    (rc = u64_array_is(a, HB_KEY_PLE_ROWS, rows, np, HB_ADMIT_PLE_GEOMETRY, err)) ||
	    (rc = u64_array_is(a, HB_KEY_PLE_LOGICAL_ROWS, logical, np, HB_ADMIT_PLE_GEOMETRY, err)))
		return rc;
	if ((rc = hb_ple_hash_digest(&a->cfg, digest, err)))
		return rc;
	if (memcmp(digest, l->hash_identity, sizeof(digest)))
		return hb_adm_fail(err, HB_ADMIT_PLE_HASH, HB_ERR_CONTRACT, "ple.manifest.hash_identity",
				   "the store's hash identity differs from the one the constants give");
	hb_hex_encode(digest, sizeof(digest), hex);
	return str_is(a, HB_KEY_PLE_HASH, hex, HB_ADMIT_PLE_HASH, err);
}

int hb_adm_ple(struct hb_adm *a, struct hb_error *err)
{
	const struct hb_gguf_tensor *t;
	const struct hb_ple_layout *l;
	const struct hb_gguf_value *v;
	const char *codec;
	int rc;

	if (a->ple_index == HB_NO_TENSOR)
		return HB_OK;
	t = &a->g.tensors[a->ple_index];
	if ((rc = store_aligned(t, err)))
		return rc;
	if (!hb_adm_early_ple_take(a, t, &rc, err))
		rc = hb_ple_store_open_manifest(&a->ple, a->fd, t->offset, t->nbytes, err);
	if (a->ple)
		a->bytes_read_stores += hb_ple_store_meta_bytes_read(a->ple);
	if (rc)
		return rc;
	l = hb_ple_store_layout(a->ple);
	if ((rc = hb_adm_kv(a, HB_KEY_PLE_ROW_WIDTH, HB_GGUF_U32, 0, true, &v, err)))
		return rc;
	if (v->v.u32 != l->row_width)
		return hb_adm_fail(err, HB_ADMIT_PLE_GEOMETRY, HB_ERR_CONTRACT, HB_KEY_PLE_ROW_WIDTH,
				   "%u, the store's rows are %u wide", v->v.u32, l->row_width);
	codec = l->codec_id == HB_PLE_CODEC_BF16 ? "bf16" :
		l->codec_id == HB_PLE_CODEC_AFFINE4 && l->group_size == 32 ? "mlx-affine4-g32" : "unknown";
	if ((rc = str_is(a, HB_KEY_PLE_CODEC, codec, HB_ADMIT_PLE_CODEC, err)))
		return rc;
	return check_ple_hash(a, l, err);
}
