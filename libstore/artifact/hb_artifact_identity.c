/*
 * hb_artifact_identity.c: see hb_artifact_identity.h.
 */
#include "hb_base.h"
#include "hb_artifact_identity.h"
#include "hb_io.h"
#include "hb_sha256.h"

int hb_artifact_identity(int fd, const char *what, const struct hb_gguf *g, const struct hb_em_layout *em,
			 const struct hb_ple_store *ple, uint8_t out[32], struct hb_error *err)
{
	size_t n = (size_t)g->layout.data_start;
	uint8_t *buf = malloc(n ? n : 1);
	struct hb_sha256 h;
	int rc;

	if (!buf)
		return hb_error_set(err, HB_ERR_NOMEM, what, "out of memory");
	rc = hb_pread_full(fd, buf, n, 0, what, err);
	if (!rc) {
		hb_sha256_init(&h);
		hb_sha256_update(&h, buf, n);
		hb_sha256_update(&h, em->payload_sha256, 32);
		hb_sha256_update(&h, em->manifest_sha256, 32);
		if (ple) {
			uint8_t pay[32], man[32];
			hb_ple_store_digests(ple, pay, man);
			hb_sha256_update(&h, pay, 32);
			hb_sha256_update(&h, man, 32);
		}
		hb_sha256_final(&h, out);
	}
	free(buf);
	return rc;
}
