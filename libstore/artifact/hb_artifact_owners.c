/*
 * hb_artifact_owners.c: the byte-ownership table (see header).
 */
#include "hb_base.h"
#include "hb_artifact.h"
#include "hb_artifact_owners.h"
#include "hb_json.h"

struct owners {
	cJSON *arr;
	uint64_t next; /* the end of the last range added */
	int rc;
};

static void owner(struct owners *o, uint64_t off, uint64_t len, const char *kind, const char *name)
{
	cJSON *r;

	if (o->rc || !len)
		return;
	if (off != o->next) {
		o->rc = HB_ERR_INTERNAL; /* owners must tile the file */
		return;
	}
	r = cJSON_CreateObject();
	if (!r || hb_json_add_u64(r, "offset", off) || hb_json_add_u64(r, "length", len) ||
	    hb_json_add_str(r, "owner", kind) || (name && hb_json_add_str(r, "name", name)) ||
	    !cJSON_AddItemToArray(o->arr, r)) {
		cJSON_Delete(r);
		o->rc = HB_ERR_NOMEM;
		return;
	}
	o->next = off + len;
}

static void expert_owners(const struct hb_em_layout *l, struct owners *o, uint64_t base,
			  uint64_t extent)
{
	uint64_t pos = base + l->descriptor_offset + l->descriptor_bytes;
	char name[64];

	if (l->store_size != extent) {
		o->rc = HB_ERR_INTERNAL;
		return;
	}
	owner(o, base, l->descriptor_offset, "expert-store-header", HB_TENSOR_EXPERT_STORE);
	owner(o, base + l->descriptor_offset, l->descriptor_bytes, "expert-store-descriptors", NULL);
	for (uint32_t i = 0; i < l->layer_count; i++) {
		const struct hb_em_layer *ly = &l->layers[i];
		if (base + ly->data_offset < pos) {
			o->rc = HB_ERR_INTERNAL;
			return;
		}
		owner(o, pos, base + ly->data_offset - pos, "padding", NULL);
		snprintf(name, sizeof(name), "layer %u", ly->layer);
		owner(o, base + ly->data_offset, ly->data_size, "expert-records", name);
		pos = base + ly->data_offset + ly->data_size;
	}
	if (base + l->store_size < pos) {
		o->rc = HB_ERR_INTERNAL;
		return;
	}
	owner(o, pos, base + l->store_size - pos, "padding", NULL);
}

static void ple_owners(const struct hb_ple_layout *l, struct owners *o, uint64_t base,
		       uint64_t extent)
{
	uint64_t dir_end = l->dir_offset + l->dir_bytes;
	uint64_t digest_end = l->digest_offset + l->digest_bytes;
	uint64_t payload_end = l->payload_offset + l->payload_size;

	if (l->store_size != extent || dir_end > l->digest_offset ||
	    digest_end > l->payload_offset || payload_end > l->store_size) {
		o->rc = HB_ERR_INTERNAL;
		return;
	}
	owner(o, base, l->dir_offset, "ple-manifest", HB_TENSOR_PLE_STORE);
	owner(o, base + l->dir_offset, l->dir_bytes, "ple-table-directory", NULL);
	owner(o, base + dir_end, l->digest_offset - dir_end, "padding", NULL);
	owner(o, base + l->digest_offset, l->digest_bytes, "ple-page-digests", NULL);
	owner(o, base + digest_end, l->payload_offset - digest_end, "padding", NULL);
	owner(o, base + l->payload_offset, l->payload_size, "ple-pages", NULL);
	owner(o, base + payload_end, l->store_size - payload_end, "padding", NULL);
}

int hb_artifact_owners(const struct hb_gguf_layout *gl, const struct hb_gguf_tensor *tensors,
		       const struct hb_em_layout *em, size_t em_index,
		       const struct hb_ple_layout *ple, size_t ple_index, cJSON *arr)
{
	struct owners o = { arr, 0, arr ? 0 : HB_ERR_NOMEM };

	for (size_t i = 0; i < gl->n_ranges && !o.rc; i++) {
		const struct hb_gguf_range *r = &gl->ranges[i];
		const struct hb_gguf_tensor *t = r->owner == HB_GGUF_OWN_TENSOR ? &tensors[r->tensor] : NULL;
		if (t && r->tensor == em_index && em)
			expert_owners(em, &o, r->offset, r->length);
		else if (t && r->tensor == ple_index && ple)
			ple_owners(ple, &o, r->offset, r->length);
		else
			owner(&o, r->offset, r->length,
			      t ? "dense-tensor" : hb_gguf_owner_name(r->owner), t ? t->name.ptr : NULL);
	}
	if (!o.rc && o.next != gl->file_size)
		o.rc = HB_ERR_INTERNAL;
	return o.rc;
}
