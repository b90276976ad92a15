/*
 * hb_gguf_int.h: helpers shared by the GGUF writer and reader, private to
 * libstore/gguf/hb_gguf*.c.  Not an API: nothing outside these files includes it.
 */
#ifndef HB_GGUF_INT_H
#define HB_GGUF_INT_H

#include "hb_base.h"
#include "hb_gguf.h"

/* A static id string of the table in hb_gguf.h. */
#define HB_GGUF_ID(name) hb_gguf_diag_id(HB_GGUF_DIAG_##name)

/* Serialised size of a tensor-info record. */
int hb_gguf_tensor_info_size(const struct hb_gguf_tensor *t, uint64_t *out);
/* Serialised size of a kv pair (key, type, value). */
int hb_gguf_kv_size(const struct hb_gguf_kv *kv, uint64_t *out);

/*
 * Element count times element size of a tensor, checked.  Returns 0,
 * HB_ERR_UNSUPPORTED for an unknown type, HB_ERR_OVERFLOW when the product
 * overflows u64.
 */
int hb_gguf_tensor_bytes(uint32_t ggml_type, uint32_t n_dims, const uint64_t *dims,
			 uint64_t *out);

/*
 * Fill L->ranges from L's regions and the tensors' absolute extents.  order
 * lists the tensor indices sorted by offset (NULL: already in file order).
 * Extents must not overlap (the caller checked).
 */
int hb_gguf_layout_ranges(struct hb_gguf_layout *L, const struct hb_gguf_tensor *t,
			  size_t n, const size_t *order, struct hb_error *err);

/*
 * Find a repeated name among n strings: returns true and sets *first and
 * *second (second > first, the later occurrence with the smallest index)
 * when one exists.  O(n log n); allocation failure returns -1.
 */
int hb_gguf_find_duplicate(const struct hb_gguf_str *const *names, size_t n,
			   size_t *first, size_t *second);

bool hb_gguf_str_eq(const struct hb_gguf_str *s, const char *c);
bool hb_gguf_is_pow2(uint64_t v);

#endif
