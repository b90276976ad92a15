/*
 * hb_cli.c: shared front-end helpers (see hb_cli.h).
 */
#include "hb_base.h"
#include "hb_cli.h"
#include "hb_json.h"

#include <cJSON.h>
#include <sodium.h>
#include <zlib.h>

void hb_cli_error(const char *prog, const struct hb_error *err)
{
	char buf[1024];

	/* A failed system call on a named file reads as git's do:
	 * "PROG: cannot open 'x.gguf': No such file or directory". */
	if (err && !err->id && err->sys_errno && err->field[0]) {
		fprintf(stderr, "%s: %s '%s': %s\n", prog, err->msg, err->field, strerror(err->sys_errno));
		return;
	}
	hb_error_format(err, buf, sizeof(buf));
	if (err && err->id)
		fprintf(stderr, "%s: %s: %s\n", prog, err->id, buf);
	else
		fprintf(stderr, "%s: %s\n", prog, buf);
}

void hb_cli_usage_error(const char *prog, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\ntry '%s --help'\n", prog);
}

int hb_cli_exit_for(int code)
{
	switch (code) {
	case HB_OK:
		return HB_EXIT_OK;
	case HB_ERR_FORMAT:
	case HB_ERR_CONTRACT:
	case HB_ERR_UNSUPPORTED:
	case HB_ERR_DIGEST:
	case HB_ERR_NONFINITE:
	case HB_ERR_NOTFOUND:
	case HB_ERR_OVERFLOW:
	case HB_ERR_SHORT: /* a truncated input file (st-buffer-short, ...) is malformed */
		return HB_EXIT_NO;
	case HB_ERR_INVALID:
	case HB_ERR_EXISTS:
		return HB_EXIT_USAGE;
	default: /* io, nomem, changed, internal, fault, busy */
		return HB_EXIT_SYSTEM;
	}
}

void hb_cli_version(const char *prog)
{
	printf("%s %s (libsodium %s, cJSON %s, zlib %s)\n", prog, HB_VERSION,
	       sodium_version_string(), cJSON_Version(), zlibVersion());
}

int hb_cli_getopt_error(const char *prog, int opt, char **argv)
{
	if (opt == ':')
		hb_cli_usage_error(prog, "option '%s' needs an argument", argv[optind - 1]);
	else if (optopt)
		hb_cli_usage_error(prog, "bad option '-%c'", optopt);
	else
		hb_cli_usage_error(prog, "bad option '%s'", argv[optind - 1]);
	return -1;
}

static bool output_failed;

int hb_cli_print_json(const char *prog, cJSON *j)
{
	char *text = NULL;
	size_t len = 0;
	struct hb_error err;

	hb_error_clear(&err);
	if (!j)
		hb_error_set(&err, HB_ERR_NOMEM, "json", "out of memory");
	if (!j || hb_json_render(j, true, &text, &len, &err)) {
		hb_cli_error(prog, &err);
		cJSON_Delete(j);
		output_failed = true;
		return HB_EXIT_SYSTEM;
	}
	fwrite(text, 1, len, stdout);
	free(text);
	cJSON_Delete(j);
	return HB_EXIT_OK;
}

bool hb_cli_output_failed(void)
{
	return output_failed;
}
