/*
 * hb-admit: CPU-only ordered admission of one artifact (libstore/admit/hb_admit.h).
 * Parses options, calls hb_admit, prints, maps the exit status:
 * 0 admitted, 1 rejected, 2 usage, 3 the file could not be read.
 */
#include "hb_base.h"
#include "admit/hb_admit.h"
#include "draft/hb_draft.h"
#include "hb_cli.h"
#include "hb_json.h"
#include "hb_publish.h"

#include <getopt.h>

static const char *const prog = "hb-admit";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: hb-admit [--json] [--profile P] [--report FILE] [-q] ARTIFACT\n"
		"   or: hb-admit --draft DIR [-q] ARTIFACT\n"
		"\n"
		"  --draft DIR     gate the DFlash2 draft in DIR against the artifact\n"
		"  --json          print the admission report on stdout\n"
		"  --profile P     demand profile P (qwen4exp-flash-next or dev)\n"
		"  --report FILE   also write the report to FILE (atomically replaced)\n"
		"  -q, --quiet     no summary line when admitted\n"
		"  -h, --help      this help\n"
		"      --version   versions of the tool and its libraries\n");
}

enum { OPT_JSON = 256, OPT_PROFILE, OPT_REPORT, OPT_VERSION, OPT_DRAFT };

static const struct option long_opts[] = {
	{"json", no_argument, NULL, OPT_JSON},
	{"draft", required_argument, NULL, OPT_DRAFT},
	{"profile", required_argument, NULL, OPT_PROFILE},
	{"report", required_argument, NULL, OPT_REPORT},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, OPT_VERSION},
	{NULL, 0, NULL, 0},
};

/* --draft DIR ARTIFACT: the artifact admitted first, then the draft gated
 * against it (libstore/draft/hb_draft.h); the same exit statuses. */
static int admit_draft(const char *dir, const char *artifact, bool quiet)
{
	struct hb_draft_target t;
	struct hb_draft_result res;
	struct hb_error err;
	bool admitted;

	hb_error_clear(&err);
	if (hb_draft_target_load(artifact, &t, &admitted, &err)) {
		hb_cli_error(prog, &err);
		return HB_EXIT_SYSTEM;
	}
	if (!admitted) {
		hb_cli_error(prog, &err);
		return HB_EXIT_NO;
	}
	if (hb_draft_check(dir, &t, &res, &err)) {
		hb_cli_error(prog, &err);
		return HB_EXIT_SYSTEM;
	}
	if (!res.admitted) {
		hb_cli_error(prog, &err);
		return HB_EXIT_NO;
	}
	if (!quiet)
		printf("admitted draft %s for %s: %" PRIu64 " tensors, every target-bound field equal\n", dir,
		       artifact, res.tensors);
	return fflush(stdout) ? HB_EXIT_SYSTEM : HB_EXIT_OK;
}

int main(int argc, char **argv)
{
	const char *draft = NULL;
	struct hb_admit_opts o = {0};
	struct hb_admit_result res;
	struct hb_error err;
	const char *report_path = NULL;
	bool json = false, quiet = false;
	char *text = NULL;
	size_t len = 0;
	int opt, rc, status;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":qh", long_opts, NULL)) != -1) {
		switch (opt) {
		case OPT_JSON: json = true; break;
		case OPT_PROFILE:
			if (strcmp(optarg, "qwen4exp-flash-next") && strcmp(optarg, "dev")) {
				hb_cli_usage_error(prog, "unknown profile '%s'", optarg);
				return HB_EXIT_USAGE;
			}
			o.profile = optarg;
			break;
		case OPT_REPORT: report_path = optarg; break;
		case OPT_DRAFT: draft = optarg; break;
		case 'q': quiet = true; break;
		case 'h': usage(stdout); return HB_EXIT_OK;
		case OPT_VERSION: hb_cli_version(prog); return HB_EXIT_OK;
		case ':':
		default:
			hb_cli_getopt_error(prog, opt, argv);
			return HB_EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		hb_cli_usage_error(prog, "expected one ARTIFACT");
		return HB_EXIT_USAGE;
	}
	o.path = argv[optind];
	if (draft && (json || report_path || o.profile)) {
		hb_cli_usage_error(prog, "--draft takes no --json, --report or --profile");
		return HB_EXIT_USAGE;
	}
	if (draft)
		return admit_draft(draft, o.path, quiet);
	hb_error_clear(&err);
	rc = hb_admit(&o, &res, &err);
	if (rc) {
		hb_cli_error(prog, &err);
		return HB_EXIT_SYSTEM;
	}
	status = res.admitted ? HB_EXIT_OK : HB_EXIT_NO;
	if (!res.admitted)
		hb_cli_error(prog, &err);
	if ((json || report_path) && hb_json_render(res.report, true, &text, &len, &err)) {
		hb_cli_error(prog, &err);
		status = HB_EXIT_SYSTEM;
	} else if (json || report_path) {
		if (json)
			fwrite(text, 1, len, stdout);
		if (report_path && hb_publish_buf(report_path, text, len, HB_PUBLISH_REPLACE, &err)) {
			hb_cli_error(prog, &err);
			status = HB_EXIT_SYSTEM;
		}
	}
	if (res.admitted && !json && !quiet) {
		const cJSON *p = cJSON_GetObjectItem(res.report, "profile");
		const cJSON *s = cJSON_GetObjectItem(res.report, "status");
		printf("admitted %s: profile %s, status %s, runtime_supported false, %" PRIu64
		       " of %" PRIu64 " bytes read\n", o.path, p ? p->valuestring : "?",
		       s ? s->valuestring : "?", res.bytes_read, res.file_size);
	}
	free(text);
	cJSON_Delete(res.report);
	if (fflush(stdout) != 0)
		status = HB_EXIT_SYSTEM;
	return status;
}
