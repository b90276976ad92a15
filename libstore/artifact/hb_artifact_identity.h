/*
 * hb_artifact_identity.h: the one digest that names an artifact in traces,
 * route labels and saved sessions.
 *
 * SHA-256 over the file's bytes before the tensor data (header, metadata,
 * tensor infos: everything the artifact declares), then the expert store's
 * payload and manifest digests, then the PLE store's when there is one.
 * The stores' digests stand for their payloads, so the identity costs one
 * read of the metadata, never of the payload.  Every component that names
 * an artifact computes it here, so two of them can never disagree.
 */
#ifndef HB_ARTIFACT_IDENTITY_H
#define HB_ARTIFACT_IDENTITY_H

#include "hb_base.h"
#include "hb_err.h"
#include "expert/hb_expert_store.h"
#include "gguf/hb_gguf.h"
#include "ple/hb_ple_store.h"

/* fd: the artifact; g, em: its parsed GGUF and expert store; ple: its PLE
 * store or NULL.  out receives 32 bytes; untouched on failure. */
int hb_artifact_identity(int fd, const char *what, const struct hb_gguf *g, const struct hb_em_layout *em,
			 const struct hb_ple_store *ple, uint8_t out[32], struct hb_error *err);

#endif
