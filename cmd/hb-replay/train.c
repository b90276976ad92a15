/*
 * hb-replay/train.c: hb-replay plant, train and predict (AFN-021 Gate 3):
 * their options, and the runs of hb_replay_train.h, printed as JSON.
 */
#include "hb_base.h"
#include "hb_replay_cli.h"
#include "hb_parse.h"

enum { T_SEQUENCES, T_NOISE, T_RANK, T_EPOCHS, T_PATIENCE, T_BATCH, T_LR, T_FP, T_DECAY, T_ACCEPT, T_DEADLINE,
       T_PREDICTOR, T_FEATURES, T_FWIDTH, T_FSEED, T_SPLIT_FILE, T_SPLIT_NAME, T_AHEAD };

void replay_train_option_defaults(struct cli *c)
{
	hb_plant_defaults(&c->plant);
	hb_train_defaults(&c->train_cfg);
	c->feature_width = 128;
}

static int bad(const char *opt, const char *what, const char *arg)
{
	return hb_cli_usage_error(prog, "%s takes %s, not '%s'", opt, what, arg), -1;
}

static int parse_weights(const char *s, struct cli *c)
{
	size_t n = 0;
	while (*s) {
		char buf[32];
		size_t len = strcspn(s, ",");
		double v;
		if (!len || len >= sizeof(buf) || n == HB_REPLAY_DEADLINE_MAX)
			return -1;
		memcpy(buf, s, len);
		buf[len] = '\0';
		if (hb_parse_double(buf, &v) || !(v >= 0) || v > 1e6)
			return -1;
		c->deadline[n++] = v;
		s += len;
		if (*s == ',' && !*++s)
			return -1;
	}
	if (!n)
		return -1;
	c->train_cfg.deadline = c->deadline;
	c->train_cfg.n_deadline = n;
	return 0;
}

int replay_parse_train_option(int which, const char *arg, struct cli *c)
{
	struct hb_train_config *t = &c->train_cfg;
	uint64_t v;
	double d;

	switch (which) {
	case T_SEQUENCES:
		if (hb_parse_u64_range(arg, 1, 100000, &v))
			return bad("--sequences", "1..100000", arg);
		c->plant.sequences = (uint32_t)v;
		return 0;
	case T_NOISE:
		if (hb_parse_double(arg, &c->plant.noise) || !(c->plant.noise >= 0) || c->plant.noise > 1e6)
			return bad("--noise", "a number in [0, 1e6]", arg);
		return 0;
	case T_RANK:
		if (hb_parse_u64_range(arg, 1, HB_TRAIN_RANK_MAX, &v))
			return bad("--rank", "1..256", arg);
		t->rank = (uint32_t)v;
		return 0;
	case T_EPOCHS:
	case T_PATIENCE:
	case T_BATCH:
		if (hb_parse_u64_range(arg, 1, 1u << 20, &v))
			return bad(which == T_EPOCHS ? "--epochs" : which == T_PATIENCE ? "--patience" : "--batch",
				   "1..1048576", arg);
		*(which == T_EPOCHS ? &t->epochs : which == T_PATIENCE ? &t->patience : &t->batch) = (uint32_t)v;
		return 0;
	case T_LR:
	case T_FP:
	case T_DECAY:
	case T_ACCEPT: {
		static const char *const names[] = {"--lr", "--fp-cost", "--rank-decay", "--accept-weight"};
		if (hb_parse_double(arg, &d) || !(d >= 0) || d > 1e6 || (which == T_LR && d == 0))
			return bad(names[which - T_LR], which == T_LR ? "a positive number" : "a number in [0, 1e6]", arg);
		*(which == T_LR ? &t->lr : which == T_FP ? &t->fp_cost : which == T_DECAY ? &t->rank_decay
										   : &t->accept_weight) = d;
		return 0;
	}
	case T_DEADLINE:
		if (parse_weights(arg, c))
			return bad("--deadline-weight", "comma-separated non-negative weights, one a layer", arg);
		return 0;
	case T_PREDICTOR:
		c->predictor = arg;
		return 0;
	case T_FEATURES:
		c->features = arg;
		return 0;
	case T_FWIDTH:
		if (hb_parse_u64_range(arg, 1, 4096, &c->feature_width))
			return bad("--feature-width", "1..4096", arg);
		return 0;
	case T_FSEED:
		if (hb_parse_u64(arg, &c->feature_seed))
			return bad("--feature-seed", "an unsigned integer", arg);
		return 0;
	case T_SPLIT_FILE:
		c->split_file = arg;
		return 0;
	case T_SPLIT_NAME:
		if (!hb_taps_split_name_ok(arg))
			return bad("--split-name", "1 to 23 of [a-z0-9_-]", arg);
		c->split_name = arg;
		return 0;
	case T_AHEAD:
		c->router_ahead = arg;
		return 0;
	}
	return -1;
}

int replay_check_train_args(struct cli *c)
{
	if (!strcmp(c->sub, "plant")) {
		if (!c->out || c->n_args)
			return hb_cli_usage_error(prog, "plant needs -o DIR and no operand"), -1;
		c->plant.seed = c->seed;
	} else if (!strcmp(c->sub, "train")) {
		if (!c->out || c->n_args != 4)
			return hb_cli_usage_error(prog, "train needs -o CHECKPOINT and LABELS FEATURES VALIDATION_LABELS "
							"VALIDATION_FEATURES"), -1;
		c->train_cfg.seed = c->seed;
		c->train_cfg.threads = (unsigned)c->threads;
	} else if (!c->predictor || !c->out || c->n_args != 1) {
		return hb_cli_usage_error(prog, "predict needs --predictor CHECKPOINT, -o DIR and one FEATURES"), -1;
	}
	return 0;
}

static int finish(int rc, struct hb_error *err, char *json)
{
	if (!rc)
		fputs(json, stdout);
	free(json);
	if (rc) {
		hb_cli_error(prog, err);
		return hb_cli_exit_for(rc);
	}
	return HB_EXIT_OK;
}

int replay_plant(const struct cli *c)
{
	struct hb_error err;
	char *json = NULL;
	int rc;
	hb_error_clear(&err);
	rc = hb_plant_run(c->out, &c->plant, &json, &err);
	return finish(rc, &err, json);
}

int replay_train(const struct cli *c)
{
	struct hb_error err;
	char *json = NULL;
	int rc;
	hb_error_clear(&err);
	rc = hb_train_run(c->args[0], c->args[1], c->args[2], c->args[3], &c->train_cfg, c->out, &json, &err);
	return finish(rc, &err, json);
}

int replay_predict(const struct cli *c)
{
	struct hb_error err;
	char *json = NULL;
	int rc;
	hb_error_clear(&err);
	rc = hb_predict_run(c->predictor, c->args[0], c->out, &json, &err);
	return finish(rc, &err, json);
}
