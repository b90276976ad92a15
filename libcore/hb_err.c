/*
 * hb_err.c: names and recording of hb_err values.  No printing here; the
 * formatting helper writes into a caller buffer.
 */
#include "hb_base.h"
#include "hb_err.h"

static const struct {
	int code;
	const char *name;
	const char *text;
} err_table[] = {
	{HB_OK, "ok", "success"},
	{HB_ERR_NOMEM, "nomem", "out of memory"},
	{HB_ERR_IO, "io", "input/output error"},
	{HB_ERR_OVERFLOW, "overflow", "size arithmetic overflow"},
	{HB_ERR_FORMAT, "format", "malformed input"},
	{HB_ERR_CONTRACT, "contract", "input breaks the model contract"},
	{HB_ERR_INVALID, "invalid", "invalid argument"},
	{HB_ERR_EXISTS, "exists", "target already exists"},
	{HB_ERR_NOTFOUND, "notfound", "not found"},
	{HB_ERR_DIGEST, "digest", "digest mismatch"},
	{HB_ERR_UNSUPPORTED, "unsupported", "deliberately unsupported"},
	{HB_ERR_SHORT, "short", "unexpected end of input"},
	{HB_ERR_INTERNAL, "internal", "internal error"},
	{HB_ERR_NONFINITE, "nonfinite", "non-finite value"},
	{HB_ERR_CHANGED, "changed", "input changed while being read"},
	{HB_ERR_FAULT, "fault", "injected fault"},
	{HB_ERR_BUSY, "busy", "another process is writing the same target"},
};

const char *hb_err_name(int code)
{
	for (size_t i = 0; i < HB_ARRAY_LEN(err_table); i++)
		if (err_table[i].code == code)
			return err_table[i].name;
	return "unknown";
}

const char *hb_err_str(int code)
{
	for (size_t i = 0; i < HB_ARRAY_LEN(err_table); i++)
		if (err_table[i].code == code)
			return err_table[i].text;
	return "unknown error";
}

void hb_error_clear(struct hb_error *err)
{
	if (err)
		memset(err, 0, sizeof(*err));
}

static int record(struct hb_error *err, int code, int sys_errno,
		  const char *field, bool has_offset, uint64_t offset,
		  const char *fmt, va_list ap)
{
	if (!err || err->code != HB_OK)
		return code;
	err->code = code;
	err->sys_errno = sys_errno;
	err->has_offset = has_offset;
	err->offset = offset;
	snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
	if (fmt)
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	else
		snprintf(err->msg, sizeof(err->msg), "%s", hb_err_str(code));
	return code;
}

int hb_error_set(struct hb_error *err, int code, const char *field,
		 const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	record(err, code, 0, field, false, 0, fmt, ap);
	va_end(ap);
	return code;
}

int hb_error_set_at(struct hb_error *err, int code, const char *field,
		    uint64_t offset, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	record(err, code, 0, field, true, offset, fmt, ap);
	va_end(ap);
	return code;
}

int hb_error_diag(struct hb_error *err, const char *id, int code,
		  const char *field, bool has_offset, uint64_t offset,
		  const char *fmt, ...)
{
	va_list ap;
	bool first = err && err->code == HB_OK;

	va_start(ap, fmt);
	record(err, code, 0, field, has_offset, offset, fmt, ap);
	va_end(ap);
	if (first)
		err->id = id;
	return code;
}

int hb_error_sys(struct hb_error *err, int saved_errno, const char *field,
		 const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	record(err, HB_ERR_IO, saved_errno, field, false, 0, fmt, ap);
	va_end(ap);
	return HB_ERR_IO;
}

char *hb_error_format(const struct hb_error *err, char *buf, size_t len)
{
	size_t used = 0;
	int n;

	if (!buf || len == 0)
		return buf;
	buf[0] = '\0';
	if (!err)
		return buf;
	if (err->field[0]) {
		n = snprintf(buf, len, "%s: ", err->field);
		used = n < 0 ? 0 : ((size_t)n >= len ? len - 1 : (size_t)n);
	}
	n = snprintf(buf + used, len - used, "%s", err->msg);
	used += n < 0 ? 0 : ((size_t)n >= len - used ? len - used - 1 : (size_t)n);
	if (err->has_offset && used < len - 1) {
		n = snprintf(buf + used, len - used, " at byte %" PRIu64, err->offset);
		used += n < 0 ? 0 : ((size_t)n >= len - used ? len - used - 1 : (size_t)n);
	}
	if (err->sys_errno && used < len - 1)
		snprintf(buf + used, len - used, ": %s", strerror(err->sys_errno));
	return buf;
}
