/*
 * hb_artifact_owners.h: the ownership table of an artifact.
 *
 * Every byte of an artifact has exactly one owner: the GGUF header, the kv
 * block, the tensor-info block, alignment padding, each dense tensor, and
 * inside the two stores their own regions (expert store header, descriptors,
 * each layer's records; PLE manifest, table directory, page digests, pages)
 * with their padding.  The converter reports this table; admission proves
 * it tiles the file exactly.
 */
#ifndef HB_ARTIFACT_OWNERS_H
#define HB_ARTIFACT_OWNERS_H

#include "hb_base.h"
#include "expert/hb_expert_store.h"
#include "gguf/hb_gguf.h"
#include "ple/hb_ple_store.h"
#include <cJSON.h>

#define HB_NO_TENSOR SIZE_MAX

/*
 * Append {offset, length, owner, name?} objects to arr in file order.
 * em / ple describe the stores at tensors[em_index] / tensors[ple_index]
 * (ple may be NULL with ple_index HB_NO_TENSOR).  Returns 0, HB_ERR_NOMEM,
 * or HB_ERR_INTERNAL when the ranges do not tile [0, file_size) exactly
 * (a gap, an overlap, or a store region outside its tensor).
 */
int hb_artifact_owners(const struct hb_gguf_layout *gl, const struct hb_gguf_tensor *tensors,
		       const struct hb_em_layout *em, size_t em_index,
		       const struct hb_ple_layout *ple, size_t ple_index, cJSON *arr);

#endif
