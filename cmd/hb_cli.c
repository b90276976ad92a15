/*
 * hb_cli.c: shared front-end helpers (see hb_cli.h).
 */
#include "hb_base.h"
#include "hb_cli.h"
#include "hb_json.h"
#include "hb_parse.h"

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

/* ------------------------------------------------------------ --expert-cache */

void hb_cli_xs_init(struct hb_cli_xs *x)
{
	memset(x, 0, sizeof(*x));
	x->pred = HB_XS_PRED_ROUTER_AHEAD;
	x->evict = HB_XS_POLICY_SCORE;
}

int hb_cli_xs_option(const char *prog, struct hb_cli_xs *x, enum hb_cli_xs_opt which, const char *arg)
{
	struct hb_error err;

	hb_error_clear(&err);
	if (which == HB_CLI_XS_CACHE) {
		if (hb_xs_budget_check(arg, &err))
			return hb_cli_usage_error(prog, "--expert-cache takes bytes (K, M, G suffixes), N%% of the "
						  "expert store, or all, not '%s'", arg), -1;
		x->cache = strcmp(arg, "all") ? arg : NULL;
	} else if (which == HB_CLI_XS_PREDICT) {
		uint64_t w;
		x->learned = NULL;
		x->ahead_width = 0;
		if (!strncmp(arg, "learned:", 8) && arg[8]) {
			x->learned = arg + 8;
			x->pred = HB_XS_PRED_NONE;
		} else if (!strncmp(arg, "router-ahead:", 13)) {
			/* the W most probable of the next layer's router: fewer
			 * hints, fewer wasted bytes (byte amplification) */
			if (hb_parse_u64_range(arg + 13, 1, HB_EM_MAX_EXPERTS, &w))
				return hb_cli_usage_error(prog, "--expert-predict router-ahead:W takes a width W of 1 "
							  "or more, not '%s'", arg + 13), -1;
			x->pred = HB_XS_PRED_ROUTER_AHEAD;
			x->ahead_width = (uint32_t)w;
		} else if (hb_xs_predictor_parse(arg, &x->pred, &err)) {
			return hb_cli_usage_error(prog, "--expert-predict takes none, previous or router-ahead, not '%s' "
						  "(or router-ahead:W, learned:CHECKPOINT)", arg), -1;
		}
		x->pred_set = true;
	} else if (which == HB_CLI_XS_EXTENT) {
		if (hb_xs_extent_parse(arg, &x->extent, &err))
			return hb_cli_usage_error(prog, "--prefill-extent takes off, auto or always, not '%s'", arg), -1;
		x->extent_set = true;
	} else {
		if (hb_xs_policy_parse(arg, &x->evict, &err))
			return hb_cli_usage_error(prog, "--expert-evict takes lru or score, not '%s'", arg), -1;
		x->evict_set = true;
	}
	return 0;
}

int hb_cli_xs_check(const char *prog, const struct hb_cli_xs *x)
{
	if (!x->cache && (x->pred_set || x->evict_set || x->extent_set))
		return hb_cli_usage_error(prog, "%s needs --expert-cache SIZE other than all (resident experts "
					  "are neither predicted, evicted nor streamed)",
					  x->pred_set    ? "--expert-predict"
					  : x->evict_set ? "--expert-evict"
							 : "--prefill-extent"),
		       -1;
	return 0;
}

int hb_cli_xs_apply(const char *prog, struct hb_model *m, const struct hb_cli_xs *x)
{
	struct hb_xs_config cfg;
	struct hb_error err;
	int rc;

	if (!x->cache)
		return HB_EXIT_OK;
	hb_xs_config_default(&cfg);
	cfg.policy = x->evict;
	cfg.extent = x->extent;
	cfg.observe = x->observe;
	cfg.observe_ctx = x->observe_ctx;
	hb_error_clear(&err);
	if (x->ahead_width > m->cfg.num_experts_per_tok) {
		hb_error_set(&err, HB_ERR_INVALID, "--expert-predict",
			     "router-ahead:%u hints more experts than the %u the router takes", x->ahead_width,
			     (unsigned)m->cfg.num_experts_per_tok);
		hb_cli_error(prog, &err);
		return HB_EXIT_USAGE;
	}
	if (!(rc = hb_model_stream(m, x->cache, &cfg, x->pred, &err))) {
		m->xs_ahead_width = x->ahead_width;
		return HB_EXIT_OK;
	}
	if (!strcmp(err.field, "expert_cache"))
		snprintf(err.field, sizeof(err.field), "--expert-cache");
	hb_cli_error(prog, &err);
	return hb_cli_exit_for(rc);
}

static int xs_object(cJSON *o, const struct hb_model *m, const struct hb_xs_stats *st)
{
	int rc;

	if ((rc = hb_json_add_str(o, "mode", "stream")) || (rc = hb_json_add_str(o, "io", hb_xs_io_mode(m->xs))) ||
	    (rc = hb_json_add_str(o, "predictor", hb_xs_predictor_name(m->xs_predict))) ||
	    (m->xs_predict == HB_XS_PRED_ROUTER_AHEAD &&
	     (rc = hb_json_add_u64(o, "predictor_width", m->xs_ahead_width ? m->xs_ahead_width
									  : (uint64_t)m->cfg.num_experts_per_tok))) ||
	    (rc = hb_json_add_str(o, "policy", hb_xs_policy_name(hb_xs_policy_of(m->xs)))))
		return rc;
	return hb_xs_stats_json(st, o);
}

int hb_cli_xs_json(cJSON *j, const struct hb_model *m, const struct hb_xs_stats *since)
{
	cJSON *o = cJSON_AddObjectToObject(j, "expert_cache");
	struct hb_xs_stats st, d;
	int rc;

	if (!o)
		return HB_ERR_NOMEM;
	if (!m->xs)
		return hb_json_add_str(o, "mode", "all");
	hb_xs_stats_get(m->xs, &st);
	if ((rc = xs_object(o, m, &st)) || !since)
		return rc;
	if (!(o = cJSON_AddObjectToObject(j, "expert_cache_decode")))
		return HB_ERR_NOMEM;
	hb_xs_stats_since(&st, since, &d);
	return xs_object(o, m, &d);
}
