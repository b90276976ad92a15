/*
 * hb_trace_artifact.c: record bytes and identity of an artifact
 * (hb_trace_artifact.h).  The GGUF and expert-store parsers validate what
 * they read; this file only combines their answers.
 */
#include "hb_base.h"
#include "hb_trace_artifact.h"
#include "hb_trace_input.h"
#include "artifact/hb_artifact.h"
#include "artifact/hb_artifact_identity.h"
#include "expert/hb_expert_store.h"
#include "gguf/hb_gguf.h"
#include "hb_io.h"
#include "ple/hb_ple_store.h"

#include <unistd.h>

int hb_trace_artifact_read(const char *path, struct hb_trace_artifact *out, struct hb_error *err)
{
	struct hb_gguf g;
	struct hb_em_layout em;
	struct hb_em_geometry geo;
	struct hb_ple_store *ple = NULL;
	const struct hb_gguf_tensor *t;
	uint32_t layers = 0, experts = 0, used = 0, hidden = 0, width = 0;
	int fd = -1, rc;

	memset(out, 0, sizeof(*out));
	memset(&em, 0, sizeof(em));
	hb_gguf_init(&g);
	if ((rc = hb_open_read(path, &fd, err)) || (rc = hb_gguf_read_fd(&g, fd, NULL, err)))
		goto out;
	t = hb_gguf_find_tensor(&g, HB_TENSOR_EXPERT_STORE);
	if (!t) {
		rc = hb_error_set(err, HB_ERR_NOTFOUND, path, "no expert store (%s)", HB_TENSOR_EXPERT_STORE);
		goto out;
	}
	if ((rc = hb_gguf_get_u32(&g, HB_KEY_BLOCKS, &layers, err)) ||
	    (rc = hb_gguf_get_u32(&g, HB_KEY_EXPERTS, &experts, err)) ||
	    (rc = hb_gguf_get_u32(&g, HB_KEY_EXPERTS_USED, &used, err)) ||
	    (rc = hb_gguf_get_u32(&g, HB_KEY_HIDDEN, &hidden, err)) ||
	    (rc = hb_gguf_get_u32(&g, HB_KEY_EXPERT_WIDTH, &width, err)))
		goto out;
	geo.layers = layers, geo.experts = experts, geo.experts_used = used;
	geo.hidden = hidden, geo.intermediate = width;
	if ((rc = hb_em_parse_fd(fd, t->offset, t->nbytes, &geo, &em, NULL, err)))
		goto out;
	t = hb_gguf_find_tensor(&g, HB_TENSOR_PLE_STORE);
	if (t && (rc = hb_ple_store_open(&ple, fd, t->offset, t->nbytes, err)))
		goto out;
	if ((rc = hb_artifact_identity(fd, path, &g, &em, ple, out->identity, err)))
		goto out;
	out->record_bytes = em.record_bytes;
	out->layers = em.layer_count;
	out->experts = em.expert_count;
	out->top_k = em.experts_used;
out:
	if (ple)
		hb_ple_store_close(ple);
	hb_em_layout_release(&em);
	hb_gguf_release(&g);
	if (fd >= 0)
		close(fd);
	return rc;
}

int hb_trace_artifact_check(const struct hb_trace_artifact *a, const struct hb_trace_header *h,
			    const char *path, struct hb_error *err)
{
	if (a->layers != h->layers || a->experts != h->experts || a->top_k != h->top_k)
		return hb_error_diag(err, hb_trace_input_diag_id(HB_TRI_ARTIFACT), HB_ERR_CONTRACT, path, false, 0,
				     "artifact has %u layers x %u experts (top %u), the trace %u x %u (top %u)",
				     a->layers, a->experts, a->top_k, h->layers, h->experts, h->top_k);
	if (memcmp(a->identity, h->artifact, HB_SHA256_BYTES))
		return hb_error_diag(err, hb_trace_input_diag_id(HB_TRI_ARTIFACT), HB_ERR_CONTRACT, path, false, 0,
				     "artifact identity differs from the trace header's artifact digest");
	return HB_OK;
}
