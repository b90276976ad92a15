/*
 * hb_gguf_access.c: the life cycle of a parsed GGUF (init, release, default
 * limits) and its lookups: find a key or a tensor, and the typed accessors
 * that insist on the exact stored type (admission requires "u64, not i32";
 * nothing here converts).  Parsing is hb_gguf_read.c's.
 */
#include "hb_base.h"
#include "hb_gguf.h"
#include "hb_gguf_int.h"

void hb_gguf_limits_default(struct hb_gguf_limits *lim)
{
	lim->max_kv = HB_GGUF_MAX_KV;
	lim->max_tensors = HB_GGUF_MAX_TENSORS;
	lim->max_string = HB_GGUF_MAX_STRING;
	lim->max_array = HB_GGUF_MAX_ARRAY;
	lim->max_header_bytes = HB_GGUF_MAX_HEADER_BYTES;
	lim->read_chunk = HB_GGUF_READ_CHUNK;
}

void hb_gguf_init(struct hb_gguf *g)
{
	memset(g, 0, sizeof(*g));
}

void hb_gguf_release(struct hb_gguf *g)
{
	if (!g)
		return;
	for (uint64_t i = 0; i < g->n_kv; i++) {
		free(g->kv[i].key.ptr);
		hb_gguf_value_release(&g->kv[i].value);
	}
	for (uint64_t i = 0; i < g->n_tensors; i++)
		free(g->tensors[i].name.ptr);
	free(g->kv);
	free(g->tensors);
	free(g->layout.ranges);
	hb_gguf_init(g);
}

const struct hb_gguf_kv *hb_gguf_find_kv(const struct hb_gguf *g, const char *key)
{
	for (uint64_t i = 0; i < g->n_kv; i++)
		if (g->kv[i].key.ptr && hb_gguf_str_eq(&g->kv[i].key, key))
			return &g->kv[i];
	return NULL;
}

const struct hb_gguf_tensor *hb_gguf_find_tensor(const struct hb_gguf *g, const char *name)
{
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (g->tensors[i].name.ptr && hb_gguf_str_eq(&g->tensors[i].name, name))
			return &g->tensors[i];
	return NULL;
}

static int lookup(const struct hb_gguf *g, const char *key, uint32_t type, uint32_t elem_type,
		  const struct hb_gguf_value **out, struct hb_error *err)
{
	const struct hb_gguf_kv *kv = hb_gguf_find_kv(g, key);
	char field[HB_ERROR_FIELD_MAX];
	const char *want, *got;

	snprintf(field, sizeof(field), "gguf.kv[%s]", key);
	if (!kv)
		return hb_error_diag(err, HB_GGUF_ID(KV_MISSING), HB_ERR_NOTFOUND, field, false, 0,
				     "key is absent");
	if (kv->value.type != type ||
	    (type == HB_GGUF_ARRAY && kv->value.elem_type != elem_type)) {
		want = hb_gguf_type_name(type == HB_GGUF_ARRAY ? elem_type : type);
		got = hb_gguf_type_name(kv->value.type == HB_GGUF_ARRAY ? kv->value.elem_type
									 : kv->value.type);
		return hb_error_diag(err, HB_GGUF_ID(KV_WRONG_TYPE), HB_ERR_CONTRACT, field, true,
				     kv->offset, "is %s%s, not %s%s", got ? got : "?",
				     kv->value.type == HB_GGUF_ARRAY ? "[]" : "",
				     want ? want : "?", type == HB_GGUF_ARRAY ? "[]" : "");
	}
	*out = &kv->value;
	return HB_OK;
}

#define GETTER(suffix, ctype, tag, member)                                         \
	int hb_gguf_get_##suffix(const struct hb_gguf *g, const char *key, ctype *out, \
				 struct hb_error *err)                              \
	{                                                                          \
		const struct hb_gguf_value *v;                                     \
		int rc = lookup(g, key, tag, 0, &v, err);                          \
		if (!rc)                                                           \
			*out = v->v.member;                                        \
		return rc;                                                         \
	}
GETTER(u32, uint32_t, HB_GGUF_U32, u32)
GETTER(i32, int32_t, HB_GGUF_I32, i32)
GETTER(u64, uint64_t, HB_GGUF_U64, u64)
GETTER(f32, float, HB_GGUF_F32, f32)
GETTER(bool, bool, HB_GGUF_BOOL, u8)
#undef GETTER

int hb_gguf_get_str(const struct hb_gguf *g, const char *key, const struct hb_gguf_str **out,
		    struct hb_error *err)
{
	const struct hb_gguf_value *v;
	int rc = lookup(g, key, HB_GGUF_STRING, 0, &v, err);

	if (!rc)
		*out = &v->str;
	return rc;
}

int hb_gguf_get_array(const struct hb_gguf *g, const char *key, uint32_t elem_type,
		      const struct hb_gguf_value **out, struct hb_error *err)
{
	return lookup(g, key, HB_GGUF_ARRAY, elem_type, out, err);
}
