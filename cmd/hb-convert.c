/*
 * hb-convert: a Qwen4Exp safetensors checkpoint directory -> one artifact.
 * Parses options, calls the converter (cmd/hb-convert/hb_convert.h), prints, maps the exit status.
 */
#include "hb_base.h"
#include "hb_cli.h"
#include "hb-convert/hb_convert.h"
#include "hb_json.h"
#include "hb_parse.h"
#include "hb_pool.h"

#include <getopt.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <unistd.h>

static const char *const prog = "hb-convert";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: hb-convert [options] SRC_DIR OUT.gguf\n"
		"\n"
		"  --expert-codec bf16|affine4-g64   routed-expert codec (default bf16)\n"
		"  --ple-codec bf16|affine4-g32      PLE row codec (default bf16)\n"
		"  --profile auto|qwen4exp-flash-next|dev\n"
		"                                    model profile (default auto)\n"
		"  --source-revision REV             record the checkpoint's revision\n"
		"  --ple-rows-per-page N             PLE rows per page (default %u)\n"
		"  --threads N                       worker threads (default: all CPUs)\n"
		"  --io auto|buffered|direct         expert payload through the page cache in synced windows\n"
		"                                    (buffered; auto, the default) or with O_DIRECT where possible\n"
		"                                    or through the page cache\n"
		"  --force                           replace an existing OUT.gguf\n"
		"  --json                            print the conversion report on stdout\n"
		"  -q, --quiet                       no progress bar\n"
		"  -h, --help                        this help\n"
		"      --version                     versions of the tool and its libraries\n",
		HB_CONV_DEFAULT_ROWS_PER_PAGE);
}

enum { OPT_EXPERT = 256, OPT_PLE, OPT_PROFILE, OPT_REVISION, OPT_ROWS, OPT_THREADS, OPT_IO,
       OPT_FORCE, OPT_JSON, OPT_VERSION };

static const struct option long_opts[] = {
	{"expert-codec", required_argument, NULL, OPT_EXPERT},
	{"ple-codec", required_argument, NULL, OPT_PLE},
	{"profile", required_argument, NULL, OPT_PROFILE},
	{"source-revision", required_argument, NULL, OPT_REVISION},
	{"ple-rows-per-page", required_argument, NULL, OPT_ROWS},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"io", required_argument, NULL, OPT_IO},
	{"force", no_argument, NULL, OPT_FORCE},
	{"json", no_argument, NULL, OPT_JSON},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, OPT_VERSION},
	{NULL, 0, NULL, 0},
};

struct cli {
	struct hb_convert_opts o;
	bool json, quiet;
};

static int parse(int argc, char **argv, struct cli *c)
{
	int opt;
	uint64_t v;

	c->o.expert_codec = HB_CONV_EXPERTS_BF16;
	c->o.ple_codec = HB_CONV_PLE_BF16;
	c->o.profile = "auto";
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":qh", long_opts, NULL)) != -1) {
		switch (opt) {
		case OPT_EXPERT:
			if (!strcmp(optarg, "bf16"))
				c->o.expert_codec = HB_CONV_EXPERTS_BF16;
			else if (!strcmp(optarg, "affine4-g64"))
				c->o.expert_codec = HB_CONV_EXPERTS_AFFINE4_G64;
			else
				return hb_cli_usage_error(prog, "unknown expert codec '%s'", optarg), -1;
			break;
		case OPT_PLE:
			if (!strcmp(optarg, "bf16"))
				c->o.ple_codec = HB_CONV_PLE_BF16;
			else if (!strcmp(optarg, "affine4-g32"))
				c->o.ple_codec = HB_CONV_PLE_AFFINE4_G32;
			else
				return hb_cli_usage_error(prog, "unknown PLE codec '%s'", optarg), -1;
			break;
		case OPT_PROFILE:
			if (strcmp(optarg, "auto") && strcmp(optarg, "qwen4exp-flash-next") && strcmp(optarg, "dev"))
				return hb_cli_usage_error(prog, "unknown profile '%s'", optarg), -1;
			c->o.profile = optarg;
			break;
		case OPT_REVISION:
			c->o.source_revision = optarg;
			break;
		case OPT_ROWS:
			if (hb_parse_u64_range(optarg, 1, 1u << 20, &v))
				return hb_cli_usage_error(prog, "--ple-rows-per-page takes 1..1048576, not '%s'", optarg), -1;
			c->o.ple_rows_per_page = (uint32_t)v;
			break;
		case OPT_THREADS:
			if (hb_parse_u64_range(optarg, 1, 1024, &v))
				return hb_cli_usage_error(prog, "--threads takes 1..1024, not '%s'", optarg), -1;
			c->o.threads = (unsigned)v;
			break;
		case OPT_IO:
			if (strcmp(optarg, "auto") && strcmp(optarg, "buffered") && strcmp(optarg, "direct"))
				return hb_cli_usage_error(prog, "--io takes auto, buffered or direct, not '%s'", optarg),
				       -1;
			c->o.io = !strcmp(optarg, "buffered") ? HB_CONV_IO_BUFFERED
				  : !strcmp(optarg, "direct") ? HB_CONV_IO_DIRECT : HB_CONV_IO_AUTO;
			break;
		case OPT_FORCE:
			c->o.force = true;
			break;
		case OPT_JSON:
			c->json = true;
			break;
		case 'q':
			c->quiet = true;
			break;
		case 'h':
			usage(stdout);
			exit(HB_EXIT_OK);
		case OPT_VERSION:
			hb_cli_version(prog);
			exit(HB_EXIT_OK);
		case ':':
		default:
			return hb_cli_getopt_error(prog, opt, argv);
		}
	}
	if (argc - optind != 2)
		return hb_cli_usage_error(prog, "expected SRC_DIR and OUT.gguf"), -1;
	c->o.src_dir = argv[optind];
	c->o.out_path = argv[optind + 1];
	return 0;
}

int main(int argc, char **argv)
{
	struct cli c;
	struct hb_error err;
	struct hb_progress prog_bar;
	cJSON *report = NULL;
	int rc;

	memset(&c, 0, sizeof(c));
	if (parse(argc, argv, &c))
		return HB_EXIT_USAGE;
#ifdef __GLIBC__
	/* glibc gives threads that contend in malloc arenas of their own, each
	 * a 64 MiB reservation made through a transient 128 MiB mapping; a
	 * converter that allocates a few large buffers would then need several
	 * times its working memory in address space, and whether it fits under
	 * ulimit -v would depend on thread timing.  One arena keeps the
	 * reservation what the working memory is.  A fixed mmap threshold
	 * keeps the large buffers mapped on their own and returned when freed
	 * (glibc's moving threshold would put later ones in the heap, which
	 * keeps freed space mapped). */
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
	hb_progress_init(&prog_bar, STDERR_FILENO, c.quiet, "hb-convert", 0);
	c.o.progress = &prog_bar;
	hb_error_clear(&err);
	rc = hb_convert(&c.o, c.json ? &report : NULL, &err);
	hb_progress_finish(&prog_bar);
	if (rc) {
		hb_cli_error(prog, &err);
		return hb_cli_exit_for(rc);
	}
	if (report && hb_cli_print_json(prog, report))
		return HB_EXIT_SYSTEM;
	return fflush(stdout) == 0 ? HB_EXIT_OK : HB_EXIT_SYSTEM;
}
