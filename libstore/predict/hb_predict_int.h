/*
 * hb_predict_int.h: what hb_feature.c and hb_predictor.c share: the
 * identity as safetensors __metadata__ strings, written and read back.
 */
#ifndef HB_PREDICT_INT_H
#define HB_PREDICT_INT_H

#include "hb_predict.h"
#include "checkpoint/hb_safetensors.h"
#include "checkpoint/hb_st_write.h"

#define HB_IDENT_META 11u

/* Fill meta[HB_IDENT_META] from id; buf holds the strings (>= 512 bytes). */
void hb_ident_meta(const struct hb_feature_ident *id, struct hb_st_meta *meta, char *buf);
/* Read id back from f's metadata (what: the file, for errors;
 * feature-identity when a key is missing or malformed). */
int hb_ident_from_meta(const struct hb_st_file *f, struct hb_feature_ident *id, const char *diag, struct hb_error *err);
/* Tensor `name` of f is there with dtype x shape[0..ndim) (diag names a
 * missing one or another dtype or shape): a reader checks this before it
 * allocates what a header claims, so a hostile count is never allocated. */
int hb_st_expect(const struct hb_st_file *f, const char *name, enum hb_dtype dtype, unsigned ndim,
		 const uint64_t *shape, const char *diag, struct hb_error *err);
/* Read tensor `name` of f, which must be dtype x shape[0..ndim), into dst. */
int hb_st_take(const struct hb_st_file *f, const char *name, enum hb_dtype dtype, unsigned ndim,
	       const uint64_t *shape, void *dst, const char *diag, struct hb_error *err);

#endif
