/*
 * hb_verify_int.h: state shared by the verifier's files (not public).
 *   hb_verify.c         driver, unit checks, selected mode
 *   hb_verify_stream.c  full mode: the read / payload digest / unit digest
 *                       pipeline
 */
#ifndef HB_VERIFY_INT_H
#define HB_VERIFY_INT_H

#include "hb_base.h"
#include "expert/hb_expert_store.h"
#include "gguf/hb_gguf.h"
#include "ple/hb_ple_store.h"
#include "hb_pool.h"
#include "hb_verify.h"

enum store_kind { STORE_PLE, STORE_EXPERTS };

struct vctx {
	const struct hb_verify_opts *o;
	hb_verify_fn cb;
	void *cb_ctx;
	struct hb_verify_stats *st;
	int fd;
	struct hb_gguf g;
	struct hb_pool *pool;       /* selected mode only */
	/* experts */
	struct hb_em_layout em;
	bool em_ok;
	uint64_t em_base;
	const uint8_t *record_sha;  /* metadata table, 32 per record */
	/* PLE */
	struct hb_ple_store *ple;
	int rc;                     /* first failure to return */
	struct hb_error first;      /* its record */
};

struct unit_result {
	bool bad;
	struct hb_verify_finding f;
};

/* One store's geometry as a sequence of equal units. */
struct units {
	enum store_kind kind;
	uint64_t count;
	uint64_t bytes;             /* page stride or record bytes */
};

/* Absolute file offset of unit u. */
uint64_t hb_verify_unit_offset(const struct vctx *v, const struct units *us, uint64_t u);
/* Check one unit whose bytes are in buf and whose SHA-256 over them is
 * digest (NULL: computed here); fills r.  Thread-safe. */
void hb_verify_check_unit(struct vctx *v, const struct units *us, uint64_t u, const uint8_t *buf,
			  const uint8_t *digest, struct unit_result *r);
/* Count and report a finding (one thread at a time, in unit order). */
void hb_verify_finding(struct vctx *v, const struct hb_verify_finding *f);
void hb_verify_payload_finding(struct vctx *v, const char *store, const uint8_t want[32],
			       const uint8_t got[32], const char *field, uint64_t off);

/* Full mode over one store: every unit and its whole-payload digest. */
int hb_verify_full_pass(struct vctx *v, const struct units *us, struct hb_error *err);

#endif
