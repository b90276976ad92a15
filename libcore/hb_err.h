/*
 * hb_err.h: the one error vocabulary of the Hebrus libraries.
 *
 * Every fallible library function returns 0 on success or a negative hb_err
 * and, when the caller passes a struct hb_error, fills it with the code, the
 * dotted path of the field at fault (e.g. "ple.manifest.rows_per_page"), the
 * byte offset when one applies, the errno of a failed system call, and a
 * message.  Libraries never print and never exit; cmd/ decides what to show.
 *
 * STABILITY: the numeric values below are pinned.  They appear in JSON
 * reports and in scripts; a value is never reused or renumbered.  New codes
 * are appended with the next free number.
 */
#ifndef HB_ERR_H
#define HB_ERR_H

#include "hb_base.h"

enum hb_err {
	HB_OK = 0,
	HB_ERR_NOMEM = -1,       /* an allocation failed */
	HB_ERR_IO = -2,          /* a system call failed (errno kept) */
	HB_ERR_OVERFLOW = -3,    /* size or offset arithmetic overflowed */
	HB_ERR_FORMAT = -4,      /* bytes do not parse as the format says */
	HB_ERR_CONTRACT = -5,    /* parses, but breaks the model contract */
	HB_ERR_INVALID = -6,     /* a caller-supplied argument is invalid */
	HB_ERR_EXISTS = -7,      /* the target exists and may not be replaced */
	HB_ERR_NOTFOUND = -8,    /* a named file, key or tensor is absent */
	HB_ERR_DIGEST = -9,      /* a digest does not match its bytes */
	HB_ERR_UNSUPPORTED = -10,/* understood, deliberately refused */
	HB_ERR_SHORT = -11,      /* end of file before the bytes required */
	HB_ERR_INTERNAL = -12,   /* an invariant of our own code broke */
	HB_ERR_NONFINITE = -13,  /* a NaN or infinity where none is allowed */
	HB_ERR_CHANGED = -14,    /* an input changed while it was being read */
	HB_ERR_FAULT = -15,      /* a deterministic test fault was injected */
	HB_ERR_BUSY = -16,       /* another process is writing the same target */
};
#define HB_ERR_MIN (-16)

#define HB_ERROR_FIELD_MAX 128
#define HB_ERROR_MSG_MAX 384

struct hb_error {
	int code;                      /* HB_OK or an hb_err */
	const char *id;                /* stable diagnostic id, static, or NULL */
	int sys_errno;                 /* errno of the failed call, else 0 */
	bool has_offset;
	uint64_t offset;               /* byte offset in the input, if any */
	char field[HB_ERROR_FIELD_MAX];/* dotted field path, may be empty */
	char msg[HB_ERROR_MSG_MAX];
};

/* Stable lowercase name ("io", "overflow", ...); "unknown" for others. */
const char *hb_err_name(int code);
/* A short English description of a code. */
const char *hb_err_str(int code);

void hb_error_clear(struct hb_error *err);

/*
 * Record an error and return code, so that `return hb_error_set(...)` is the
 * usual idiom.  err may be NULL.  The first error wins: once err->code is
 * set, later calls keep the earlier record (the deepest cause is what the
 * user needs) and only return their code.
 */
int hb_error_set(struct hb_error *err, int code, const char *field,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int hb_error_set_at(struct hb_error *err, int code, const char *field,
		    uint64_t offset, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Like hb_error_set with code HB_ERR_IO and errno captured by the caller. */
int hb_error_sys(struct hb_error *err, int saved_errno, const char *field,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/*
 * Record an error with a stable diagnostic id (a static string such as
 * "st-offsets-gap" that tests and scripts match on).  offset is recorded
 * when has_offset is true.  Same first-error-wins rule.
 */
int hb_error_diag(struct hb_error *err, const char *id, int code,
		  const char *field, bool has_offset, uint64_t offset,
		  const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/*
 * Render "field: message[ at byte N][: strerror]" into buf (always
 * NUL-terminated).  Returns buf.
 */
char *hb_error_format(const struct hb_error *err, char *buf, size_t len);

#endif
