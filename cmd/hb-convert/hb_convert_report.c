/*
 * hb_convert_report.c: the conversion report, a JSON document that accounts
 * for every source tensor (class, destination or exclusion rule) and every
 * byte of the artifact (owners in file order, tiling the file exactly).
 */
#include "hb_base.h"
#include "artifact/hb_artifact.h"
#include "artifact/hb_artifact_owners.h"
#include "hb_convert_int.h"
#include "hb_json.h"

static int add_owners(const struct hb_conv *c, cJSON *root)
{
	return hb_artifact_owners(&c->gw.layout, c->gw.tensors, &c->em_final, c->em_index,
				  c->has_ple ? &c->ple_layout : NULL,
				  c->has_ple ? c->ple_index : HB_NO_TENSOR,
				  cJSON_AddArrayToObject(root, "owners"));
}

static int add_tensors(const struct hb_conv *c, cJSON *root)
{
	cJSON *arr = cJSON_AddArrayToObject(root, "tensors");

	if (!arr)
		return HB_ERR_NOMEM;
	for (size_t i = 0; i < c->inv.n; i++) {
		const struct hb_inv_entry *e = &c->inv.entries[i];
		cJSON *t = cJSON_CreateObject(), *shape;
		if (!t || !cJSON_AddItemToArray(arr, t))
			return HB_ERR_NOMEM;
		if (hb_json_add_str(t, "name", e->src->name) ||
		    hb_json_add_str(t, "class", hb_inv_class_name(e->cls)) ||
		    hb_json_add_str(t, "dtype", hb_dtype_name(e->src->dtype)) ||
		    !(shape = cJSON_AddArrayToObject(t, "shape")))
			return HB_ERR_NOMEM;
		for (uint32_t d = 0; d < e->src->ndim; d++)
			if (!cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)e->src->shape[d])))
				return HB_ERR_NOMEM;
		if (hb_json_add_u64(t, "bytes", e->src->nbytes) ||
		    hb_json_add_str(t, "shard", e->src->shard) ||
		    hb_json_add_str(t, "destination", hb_inv_dest_name(e->dest)))
			return HB_ERR_NOMEM;
		if (e->dest == HB_DEST_DENSE && !e->is_scale && hb_json_add_str(t, "artifact_tensor", e->dest_name))
			return HB_ERR_NOMEM;
		if (e->is_scale && hb_json_add_str(t, "note", "FP8 block scale, consumed by dequantisation"))
			return HB_ERR_NOMEM;
		if (e->rule && hb_json_add_str(t, "rule", e->rule))
			return HB_ERR_NOMEM;
	}
	return HB_OK;
}

static int hex_field(cJSON *obj, const char *key, const uint8_t *d)
{
	char hex[HB_SHA256_HEX];
	hb_hex_encode(d, HB_SHA256_BYTES, hex);
	return hb_json_add_str(obj, key, hex);
}

static int add_summary(const struct hb_conv *c, cJSON *root)
{
	cJSON *src = cJSON_AddObjectToObject(root, "source");
	cJSON *cod = cJSON_AddObjectToObject(root, "codecs");
	cJSON *cnt = cJSON_AddObjectToObject(root, "counts");
	cJSON *exc = cJSON_AddObjectToObject(root, "exclusions");
	cJSON *st = cJSON_AddObjectToObject(root, "stores");
	cJSON *em, *vis, *mtp;
	const struct hb_em_codec *codec = c->em_final.codec;
	int rc = 0;

	if (!src || !cod || !cnt || !exc || !st)
		return HB_ERR_NOMEM;
	rc |= hb_json_add_str(root, "schema", "hebrus-convert-report-v1");
	rc |= hb_json_add_str(root, "artifact", c->o->out_path);
	rc |= hb_json_add_u64(root, "artifact_bytes", c->gw.layout.file_size);
	rc |= hb_json_add_str(root, "profile", c->profile->id);
	rc |= hb_json_add_str(root, "status", c->profile->status);
	rc |= hb_json_add_bool(root, "runtime_supported", false);
	rc |= hb_json_add_str(root, "geometry_source", c->profile->from_config ? "config.json" : "profile");
	rc |= hb_json_add_str(src, "dir", c->o->src_dir);
	rc |= hb_json_add_str(src, "revision", c->o->source_revision ? c->o->source_revision : "unknown");
	rc |= hex_field(src, "config_sha256", c->config_sha);
	rc |= hex_field(src, "inventory_sha256", c->inv.digest);
	rc |= hb_json_add_u64(src, "tensors", c->inv.n);
	rc |= hb_json_add_u64(src, "bytes", c->ck.total_bytes);
	rc |= hb_json_add_u64(src, "shards", c->ck.nshards);
	rc |= hb_json_add_str(src, "expert_layout",
			      c->inv.expert_layout == HB_EXPERTS_PACKED ? "packed" : "per-expert");
	if (c->tokenizer_json)
		rc |= hex_field(src, "tokenizer_sha256", c->tokenizer_sha);
	if (c->chat_template)
		rc |= hex_field(src, "template_sha256", c->template_sha);
	rc |= hb_json_add_str(cod, "experts", codec->name);
	rc |= hb_json_add_str(cod, "experts_label", codec->label);
	rc |= hb_json_add_str(cod, "experts_source_dtype", c->expert_source_dtype ? c->expert_source_dtype : "none");
	rc |= hb_json_add_bool(cod, "experts_rounded_to_bf16", c->experts_rounded);
	if (c->has_ple) {
		rc |= hb_json_add_str(cod, "ple", c->o->ple_codec == HB_CONV_PLE_AFFINE4_G32 ? "mlx-affine4-g32" : "bf16");
		rc |= hb_json_add_str(cod, "ple_source_dtype", c->ple_source_dtype ? c->ple_source_dtype : "none");
		rc |= hb_json_add_bool(cod, "ple_rounded_to_bf16", c->ple_rounded);
	}
	for (int k = HB_INV_BASE; k <= HB_INV_MTP; k++)
		rc |= hb_json_add_u64(cnt, hb_inv_class_name((enum hb_inv_class)k), c->inv.count[k]);
	rc |= hb_json_add_u64(cnt, "dense_tensors", c->n_dense);
	rc |= hb_json_add_u64(cnt, "artifact_tensors", c->gw.n_tensors);
	vis = cJSON_AddObjectToObject(exc, "vision");
	mtp = cJSON_AddObjectToObject(exc, "mtp");
	if (!vis || !mtp)
		return HB_ERR_NOMEM;
	rc |= hb_json_add_u64(vis, "tensors", c->inv.count[HB_INV_VISION]);
	rc |= hb_json_add_u64(vis, "bytes", c->inv.bytes[HB_INV_VISION]);
	rc |= hb_json_add_str(vis, "rule", "vision: model.visual.*");
	rc |= hb_json_add_u64(mtp, "tensors", c->inv.count[HB_INV_MTP]);
	rc |= hb_json_add_u64(mtp, "bytes", c->inv.bytes[HB_INV_MTP]);
	rc |= hb_json_add_str(mtp, "rule", "mtp: mtp.*");
	{
		/* how long each stage took and what bounded the expert pipeline
		 * (times vary from run to run; nothing else depends on them) */
		cJSON *tm = cJSON_AddObjectToObject(root, "timing"), *pp;
		const struct hb_conv_pipe_stats *ps = &c->pipe;
		if (!tm || !(pp = cJSON_AddObjectToObject(tm, "expert_pipeline")))
			return HB_ERR_NOMEM;
		rc |= !cJSON_AddNumberToObject(tm, "dense_s", c->dense_s);
		rc |= !cJSON_AddNumberToObject(tm, "experts_s", c->experts_s);
		rc |= !cJSON_AddNumberToObject(tm, "ple_s", c->ple_s);
		rc |= !cJSON_AddNumberToObject(tm, "header_s", c->header_s);
		rc |= !cJSON_AddNumberToObject(tm, "commit_s", c->commit_s);
		rc |= hb_json_add_str(pp, "io", ps->direct_io ? "direct" : "buffered");
		rc |= hb_json_add_u64(pp, "producers", ps->producers);
		rc |= hb_json_add_u64(pp, "records_in_flight", ps->slots);
		rc |= hb_json_add_u64(pp, "window_bytes", ps->window_bytes);
		rc |= hb_json_add_u64(pp, "source_bytes", ps->src_bytes);
		rc |= hb_json_add_u64(pp, "payload_bytes", ps->bytes);
		rc |= !cJSON_AddNumberToObject(pp, "wall_s", ps->wall_s);
		rc |= !cJSON_AddNumberToObject(pp, "cpu_s", ps->cpu_s);
		rc |= !cJSON_AddNumberToObject(pp, "read_s", ps->read_s);
		rc |= !cJSON_AddNumberToObject(pp, "encode_s", ps->encode_s);
		rc |= !cJSON_AddNumberToObject(pp, "record_digest_s", ps->digest_s);
		rc |= !cJSON_AddNumberToObject(pp, "payload_digest_s", ps->payload_s);
		rc |= !cJSON_AddNumberToObject(pp, "write_s", ps->write_s);
		rc |= !cJSON_AddNumberToObject(pp, "read_back_s", ps->readback_s);
		rc |= hb_json_add_str(pp, "bound", hb_conv_pipe_bound(ps));
	}
	em = cJSON_AddObjectToObject(st, "experts");
	if (!em)
		return HB_ERR_NOMEM;
	rc |= hb_json_add_u64(em, "offset", c->gw.tensors[c->em_index].offset);
	rc |= hb_json_add_u64(em, "bytes", c->em_final.store_size);
	rc |= hb_json_add_u64(em, "record_bytes", c->em_final.record_bytes);
	rc |= hex_field(em, "payload_sha256", c->em_final.payload_sha256);
	rc |= hex_field(em, "manifest_sha256", c->em_final.manifest_sha256);
	if (c->has_ple) {
		cJSON *p = cJSON_AddObjectToObject(st, "ple");
		if (!p)
			return HB_ERR_NOMEM;
		rc |= hb_json_add_u64(p, "offset", c->gw.tensors[c->ple_index].offset);
		rc |= hb_json_add_u64(p, "bytes", c->ple_layout.store_size);
		rc |= hb_json_add_u64(p, "rows", c->ple_layout.physical_rows);
		rc |= hb_json_add_u64(p, "rows_per_page", c->ple_layout.rows_per_page);
		rc |= hb_json_add_u64(p, "page_stride", c->ple_layout.page_stride);
		rc |= hb_json_add_u64(p, "pages", c->ple_layout.page_count);
		rc |= hex_field(p, "payload_sha256", c->ple_payload_sha);
		rc |= hex_field(p, "manifest_sha256", c->ple_manifest_sha);
		rc |= hex_field(p, "hash_identity_sha256", c->ple_hash_digest);
	}
	return rc ? HB_ERR_NOMEM : HB_OK;
}

int hb_conv_report(const struct hb_conv *c, cJSON **out, struct hb_error *err)
{
	cJSON *root = cJSON_CreateObject();
	int rc;

	if (!root)
		return hb_error_set(err, HB_ERR_NOMEM, "report", "out of memory");
	rc = add_summary(c, root);
	if (!rc)
		rc = add_tensors(c, root);
	if (!rc)
		rc = add_owners(c, root);
	if (rc) {
		cJSON_Delete(root);
		return hb_error_set(err, rc, "report", rc == HB_ERR_INTERNAL ?
				    "the artifact's owners do not tile the file" : "out of memory");
	}
	*out = root;
	return HB_OK;
}
