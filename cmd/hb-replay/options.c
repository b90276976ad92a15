/*
 * hb-replay/options.c: hb-replay's command line: usage, the options each
 * subcommand takes, and their parsing into struct cli.
 */
#include "hb_base.h"
#include "hb_replay_cli.h"
#include "hb_parse.h"
#include "hb_sha256.h"

#include <getopt.h>
#include <math.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: hb-replay label -m ARTIFACT -o OUTDIR [--shard I/N] [--chunk N] [--together N] [--max-shard-bytes B] [--text-digest HEX] [--capture-hidden LAYERS] [--threads N] [--backend B] [--weights W] [--no-prefault] [CACHE] TRANSCRIPTS.jsonl\n"
		"   or: hb-replay parity [--weight-tol X] [--json] LABELS TRACE...\n"
		"   or: hb-replay split [--seed S] [--validation F] [--temporal F] [--window N] [--stride N] -o DIR TRANSCRIPTS.jsonl\n"
		"   or: hb-replay merge [--transcripts F [-o DIR]] LABELDIR...\n"
		"   or: hb-replay eval --train LABELS [--k LIST] [PRED]... [--seed S] [GATE4] -o DIR HELDOUT\n"
		"   or: hb-replay plant [--seed S] [--sequences N] [--noise X] -o DIR\n"
		"   or: hb-replay train [--seed S] [--threads N] [--rank R] [--epochs N] [--fp-cost X] [--rank-decay X] [--accept-weight X] [--deadline-weight LIST] -o CKPT LABELS FEATURES VLABELS VFEATURES\n"
		"   or: hb-replay predict --predictor CHECKPOINT -o DIR FEATURES\n"
		"   or: hb-replay parity --features DECODE [--feature-tol X] [--json] REPLAY\n"
		"   or: hb-replay shadow --expert-cache SIZE [PRED]... [--hints N] -o DIR LABELS\n"
		"\n"
		"  CACHE is --expert-cache SIZE [--expert-predict P] [--expert-evict E] [--prefill-extent M]\n"
		"  -m, --model ARTIFACT   label: the artifact (admitted first)\n"
		"  -o, --output DIR       label: shard directory; split, eval: output directory;\n"
		"                         merge: the merged labels, as one unsharded run writes them\n"
		"  --shard I/N            label: transcripts whose index modulo N is I (default 0/1)\n"
		"  --chunk N              label: positions per prefill forward (default 256)\n"
		"  --together N           label: run N transcripts' chunks as one batch (1..64, default 1;\n"
		"                         routes only: no captures, no CACHE)\n"
		"  --max-shard-bytes B    label: bound on one shard file (default 67108864)\n"
		"  --text-digest HEX      label: tokenizer+template SHA-256 recorded in shards\n"
		"  --capture-hidden LAYERS   label: also keep these layers' outputs (comma-separated indices)\n"
		"  --capture-positions N  label: sampled positions per sequence (default 8)\n"
		"  --threads N            label: worker threads (default: all CPUs)\n"
		"  --backend B            label: cpu (the reference, default) or cuda (an NVIDIA GPU)\n"
		"  --weights W            label: read (into this process's memory at start; the default on\n"
		"                         the cpu backend with the experts resident) or map (the page cache)\n"
		"  --no-prefault          label: leave the weights' pages to be touched as first needed (by\n"
		"                         default a CPU label touches them once before its clock)\n"
		"  --expert-cache SIZE    label: routed experts streamed into a cache of SIZE: bytes (K, M, G),\n"
		"                         N%% of the expert store, or all (resident, the default)\n"
		"  --expert-predict P     label: none, previous, router-ahead (default), router-ahead:W\n"
		"  --expert-evict E       label: lru, score (default)\n"
		"  --prefill-extent M     label: prefill layers read as sequential extents: off (default), auto, always\n"
		"  --weight-tol X         parity: largest |weight difference| accepted (default 1e-4)\n"
		"  --feature-tol X        parity --features: largest |feature difference| accepted (default 0: bit for bit)\n"
		"  --seed S               split: the owner hash seed; eval: the random baseline's (default 0)\n"
		"  --validation F         split: fraction of remaining owners for validation (default 0.1)\n"
		"  --temporal F           split: newest fraction of owners held out (default 0.1)\n"
		"  --window N             split: cut windows of N tokens (default: whole transcripts)\n"
		"  --stride N             split: window stride (default: the window)\n"
		"  --transcripts F        merge: also prove every transcript is covered\n"
		"  --train LABELS         eval: train-split labels (the frequency baseline)\n"
		"  --k LIST               eval: candidate budgets, comma-separated (default 10,16,20,32)\n"
		"  --predictions [NAME=]F eval: a predictor's candidates as a trace shard (repeatable)\n"
		"  PRED is --predictions [NAME=]F [--available A]\n"
		"  GATE4 is any of --deadlines F (repeatable), --read-ns NS, --validation-eval F\n"
		"  --hints N              shadow: candidates hinted per token and layer (default top-k)\n"
		"  --available A          eval: when the last --predictions' candidates exist: pre-attention\n"
		"                         (default), router-ahead, previous-token, static\n"
		"  --deadlines F          eval: hb-run --deadlines of a decode capture: timely recall\n"
		"  --read-ns NS           eval: the read latency instead of the captures' measured p50\n"
		"  --validation-eval F    eval: the replay validation split's eval.json: the Gate 4 table\n"
		"  --sequences N          plant: train sequences (validation, heldout: a quarter; default 48)\n"
		"  --noise X              plant: Gumbel scale on the planted scores (default 1)\n"
		"  --rank R               train: trunk rank (default 16, at most 256)\n"
		"  --epochs N             train: most epochs (default 40)\n"
		"  --patience N           train: epochs without a better validation loss before stopping (default 4)\n"
		"  --batch N              train: examples a step (default 256)\n"
		"  --lr X                 train: Adam step size (default 0.01)\n"
		"  --fp-cost X            train: weight of the false-positive mass (default 0)\n"
		"  --rank-decay X         train: weight of native rank j is X^j (default 1)\n"
		"  --accept-weight X      train: weight of a rejected-suffix row (default 0.25)\n"
		"  --deadline-weight LIST train: per-layer weights, comma-separated (default all 1)\n"
		"  --predictor F          predict: the checkpoint\n"
		"  --features DIR         label: also write the projected pre-attention mix of every position and layer\n"
		"  --feature-width N      label: the projection's width (default 128)\n"
		"  --feature-seed S       label: the projection's seed (default 0)\n"
		"  --split-file F         label: the split.json the transcripts were cut by (the features' split id)\n"
		"  --split-name NAME      label: the split the transcripts are (default unsplit)\n"
		"  --router-ahead DIR     label: also write router-ahead predictions (layer l+1's router on layer l)\n"
		"  --json                 print a JSON record instead of the summary line\n"
		"  -q, --quiet            label: no progress on stderr\n"
		"  -h, --help             this help\n"
		"      --version          versions of the tool and its libraries\n");
}

enum { OPT_SHARD = 256, OPT_CHUNK, OPT_MAXB, OPT_TEXT, OPT_THREADS, OPT_TOL, OPT_SEED, OPT_VAL, OPT_TEMPORAL,
       OPT_WINDOW, OPT_STRIDE, OPT_TRANSCRIPTS, OPT_TRAIN, OPT_K, OPT_PRED, OPT_JSON, OPT_VERSION,
       OPT_CAPTURE, OPT_CAPTURE_POS, OPT_SEQUENCES, OPT_NOISE, OPT_RANK, OPT_EPOCHS, OPT_PATIENCE, OPT_BATCH,
       OPT_LR, OPT_FP, OPT_DECAY, OPT_ACCEPT, OPT_DEADLINE, OPT_PREDICTOR, OPT_FEATURES, OPT_FWIDTH, OPT_FSEED,
       OPT_SPLIT_FILE, OPT_SPLIT_NAME, OPT_AHEAD, OPT_BACKEND, OPT_XS_CACHE, OPT_XS_PREDICT, OPT_XS_EVICT,
       OPT_XS_EXTENT,
       OPT_AVAIL, OPT_DEADLINES, OPT_READ_NS, OPT_VEVAL, OPT_FTOL, OPT_HINTS, OPT_TOGETHER, OPT_NO_PREFAULT,
       OPT_WEIGHTS };

static const struct option long_opts[] = {
	{"model", required_argument, NULL, 'm'},
	{"output", required_argument, NULL, 'o'},
	{"shard", required_argument, NULL, OPT_SHARD},
	{"chunk", required_argument, NULL, OPT_CHUNK},
	{"together", required_argument, NULL, OPT_TOGETHER},
	{"max-shard-bytes", required_argument, NULL, OPT_MAXB},
	{"text-digest", required_argument, NULL, OPT_TEXT},
	{"capture-hidden", required_argument, NULL, OPT_CAPTURE},
	{"capture-positions", required_argument, NULL, OPT_CAPTURE_POS},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"backend", required_argument, NULL, OPT_BACKEND},
	{"no-prefault", no_argument, NULL, OPT_NO_PREFAULT},
	{"weights", required_argument, NULL, OPT_WEIGHTS},
	{"expert-cache", required_argument, NULL, OPT_XS_CACHE},
	{"expert-predict", required_argument, NULL, OPT_XS_PREDICT},
	{"expert-evict", required_argument, NULL, OPT_XS_EVICT},
	{"prefill-extent", required_argument, NULL, OPT_XS_EXTENT},
	{"weight-tol", required_argument, NULL, OPT_TOL},
	{"feature-tol", required_argument, NULL, OPT_FTOL},
	{"hints", required_argument, NULL, OPT_HINTS},
	{"seed", required_argument, NULL, OPT_SEED},
	{"validation", required_argument, NULL, OPT_VAL},
	{"temporal", required_argument, NULL, OPT_TEMPORAL},
	{"window", required_argument, NULL, OPT_WINDOW},
	{"stride", required_argument, NULL, OPT_STRIDE},
	{"transcripts", required_argument, NULL, OPT_TRANSCRIPTS},
	{"train", required_argument, NULL, OPT_TRAIN},
	{"k", required_argument, NULL, OPT_K},
	{"predictions", required_argument, NULL, OPT_PRED},
	{"available", required_argument, NULL, OPT_AVAIL},
	{"deadlines", required_argument, NULL, OPT_DEADLINES},
	{"read-ns", required_argument, NULL, OPT_READ_NS},
	{"validation-eval", required_argument, NULL, OPT_VEVAL},
	{"sequences", required_argument, NULL, OPT_SEQUENCES},
	{"noise", required_argument, NULL, OPT_NOISE},
	{"rank", required_argument, NULL, OPT_RANK},
	{"epochs", required_argument, NULL, OPT_EPOCHS},
	{"patience", required_argument, NULL, OPT_PATIENCE},
	{"batch", required_argument, NULL, OPT_BATCH},
	{"lr", required_argument, NULL, OPT_LR},
	{"fp-cost", required_argument, NULL, OPT_FP},
	{"rank-decay", required_argument, NULL, OPT_DECAY},
	{"accept-weight", required_argument, NULL, OPT_ACCEPT},
	{"deadline-weight", required_argument, NULL, OPT_DEADLINE},
	{"predictor", required_argument, NULL, OPT_PREDICTOR},
	{"features", required_argument, NULL, OPT_FEATURES},
	{"feature-width", required_argument, NULL, OPT_FWIDTH},
	{"feature-seed", required_argument, NULL, OPT_FSEED},
	{"split-file", required_argument, NULL, OPT_SPLIT_FILE},
	{"split-name", required_argument, NULL, OPT_SPLIT_NAME},
	{"router-ahead", required_argument, NULL, OPT_AHEAD},
	{"json", no_argument, NULL, OPT_JSON},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, OPT_VERSION},
	{NULL, 0, NULL, 0},
};

static int parse_fraction(const char *s, double *v)
{
	return hb_parse_double(s, v) || !(*v >= 0) || *v > 1;
}

static int parse_budgets(const char *s, struct cli *c)
{
	c->n_budgets = 0;
	while (*s) {
		char buf[24];
		size_t n = strcspn(s, ",");
		uint64_t v;
		if (!n || n >= sizeof(buf) || c->n_budgets == HB_ARRAY_LEN(c->budgets))
			return -1;
		memcpy(buf, s, n);
		buf[n] = '\0';
		if (hb_parse_u64_range(buf, 1, 1u << 20, &v) || (c->n_budgets && v <= c->budgets[c->n_budgets - 1]))
			return -1;
		c->budgets[c->n_budgets++] = v;
		s += n;
		if (*s == ',' && !*++s)
			return -1;
	}
	return c->n_budgets ? 0 : -1;
}

/* LAYERS: comma-separated layer indices.  Only the syntax is checked here;
 * the labeller refuses a duplicate or a layer the model lacks
 * (replay-capture), since only it knows the model. */
static int parse_layers(const char *s, struct cli *c)
{
	c->n_capture = 0;
	while (*s) {
		char buf[24];
		size_t n = strcspn(s, ",");
		uint64_t v;
		if (!n || n >= sizeof(buf) || c->n_capture == HB_ARRAY_LEN(c->capture))
			return -1;
		memcpy(buf, s, n);
		buf[n] = '\0';
		if (hb_parse_u64_range(buf, 0, UINT32_MAX, &v))
			return -1;
		c->capture[c->n_capture++] = (uint32_t)v;
		s += n;
		if (*s == ',' && !*++s)
			return -1;
	}
	return c->n_capture ? 0 : -1;
}


/* What each subcommand needs of the options (after getopt): 0, or -1 after a
 * usage error. */
static int check_subcommand(struct cli *c)
{
	if (strcmp(c->sub, "eval") && (c->n_deadlines || c->read_ns > 0 || c->validation_eval ||
				       (c->avail_given && strcmp(c->sub, "shadow"))))
		return hb_cli_usage_error(prog, "--available, --deadlines, --read-ns and --validation-eval are for eval"), -1;
	if (strcmp(c->sub, "shadow") && c->hints)
		return hb_cli_usage_error(prog, "--hints is for shadow"), -1;
	if (strcmp(c->sub, "label") && c->together != 1)
		return hb_cli_usage_error(prog, "--together is for label"), -1;
	if (strcmp(c->sub, "label") && c->weights_set)
		return hb_cli_usage_error(prog, "--weights is for label"), -1;
	if (!strcmp(c->sub, "label")) {
		struct hb_error err;
		if (!c->model || !c->out)
			return hb_cli_usage_error(prog, "label needs -m ARTIFACT and -o OUTDIR"), -1;
		if (c->n_args != 1)
			return hb_cli_usage_error(prog, "label takes one TRANSCRIPTS.jsonl"), -1;
		if (c->capture_positions && !c->n_capture)
			return hb_cli_usage_error(prog, "--capture-positions needs --capture-hidden"), -1;
		if ((c->split_file || c->split_name || c->feature_seed || c->feature_width != 128) && !c->features)
			return hb_cli_usage_error(prog, "--feature-width, --feature-seed and --split-* need --features"), -1;
		if (hb_cli_xs_check(prog, &c->xs))
			return -1;
		if (c->xs.learned)
			return hb_cli_usage_error(prog, "--expert-predict learned: is hb-run's (label's features are the predictor's input)"), -1;
		if (c->together > 1 && (c->n_capture || c->features || c->router_ahead || c->xs_given))
			return hb_cli_usage_error(prog, "--together labels routes only: not with --capture-hidden, --features, "
							  "--router-ahead or --expert-cache"), -1;
		hb_error_clear(&err);
		if (hb_weights_resolve(c->backend, c->xs.cache, c->weights_set ? &c->weights_asked : NULL, &c->weights,
				       &err))
			return hb_cli_usage_error(prog, "%s: %s", err.field, err.msg), -1;
	} else if (!strcmp(c->sub, "shadow")) {
		if (!c->xs.cache || c->xs.pred_set || c->xs.evict_set || c->xs.extent_set || !c->out || c->n_args != 1)
			return hb_cli_usage_error(prog, "shadow needs --expert-cache SIZE (not all), -o DIR and one LABELS"), -1;
	} else if (c->xs_given) {
		return hb_cli_usage_error(prog, "--expert-cache, --expert-predict and --expert-evict are for label "
						  "(and --prefill-extent)"), -1;
	} else if (!strcmp(c->sub, "parity") && c->features) {
		if (c->n_args != 1)
			return hb_cli_usage_error(prog, "parity --features DECODE_FEATURES takes one REPLAY_FEATURES"), -1;
	} else if (c->has_ftol) {
		return hb_cli_usage_error(prog, "--feature-tol is for parity --features"), -1;
	} else if (!strcmp(c->sub, "parity")) {
		if (c->n_args < 2)
			return hb_cli_usage_error(prog, "parity takes LABELS and at least one TRACE"), -1;
	} else if (!strcmp(c->sub, "split")) {
		if (!c->out || c->n_args != 1)
			return hb_cli_usage_error(prog, "split needs -o DIR and one TRANSCRIPTS.jsonl"), -1;
		if (c->stride && !c->window)
			return hb_cli_usage_error(prog, "--stride needs --window"), -1;
	} else if (!strcmp(c->sub, "merge")) {
		if (c->n_args < 1)
			return hb_cli_usage_error(prog, "merge takes at least one LABELDIR"), -1;
		if (c->out && !c->transcripts)
			return hb_cli_usage_error(prog, "merge -o needs --transcripts"), -1;
	} else if (!strcmp(c->sub, "eval")) {
		if (!c->train || !c->out || c->n_args != 1)
			return hb_cli_usage_error(prog, "eval needs --train LABELS, -o DIR and one HELDOUT"), -1;

	} else if (!strcmp(c->sub, "plant") || !strcmp(c->sub, "train") || !strcmp(c->sub, "predict")) {
		return replay_check_train_args(c);
	} else {
		return hb_cli_usage_error(prog, "unknown subcommand '%s'", c->sub), -1;
	}
	return 0;
}
int replay_parse(int argc, char **argv, struct cli *c)
{
	int opt;

	memset(c, 0, sizeof(*c));
	replay_train_option_defaults(c);
	c->shard_n = 1;
	c->chunk = 256;
	c->together = 1;
	c->max_bytes = UINT64_C(64) << 20;
	c->tol = 1e-4;
	c->validation = 0.1;
	c->temporal = 0.1;
	c->budgets[0] = 10, c->budgets[1] = 16, c->budgets[2] = 20, c->budgets[3] = 32;
	c->n_budgets = 4;
	hb_cli_xs_init(&c->xs);
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":m:o:qh", long_opts, NULL)) != -1) {
		switch (opt) {
		case 'm': c->model = optarg; break;
		case 'o': c->out = optarg; break;
		case OPT_SHARD: {
			const char *slash = strchr(optarg, '/');
			char a[24];
			size_t n = slash ? (size_t)(slash - optarg) : 0;
			if (!slash || !n || n >= sizeof(a))
				goto bad_shard;
			memcpy(a, optarg, n);
			a[n] = '\0';
			if (hb_parse_u64_range(slash + 1, 1, HB_REPLAY_MAX_WORKERS, &c->shard_n) ||
			    hb_parse_u64_range(a, 0, c->shard_n - 1, &c->shard_i))
				goto bad_shard;
			break;
		bad_shard:
			return hb_cli_usage_error(prog, "--shard takes I/N with 0 <= I < N <= 9999, not '%s'", optarg), -1;
		}
		case OPT_CHUNK:
			if (hb_parse_u64_range(optarg, 1, 1u << 20, &c->chunk))
				return hb_cli_usage_error(prog, "--chunk takes 1..1048576, not '%s'", optarg), -1;
			break;
		case OPT_TOGETHER:
			if (hb_parse_u64_range(optarg, 1, 64, &c->together))
				return hb_cli_usage_error(prog, "--together takes 1..64, not '%s'", optarg), -1;
			break;
		case OPT_MAXB:
			if (hb_parse_u64_range(optarg, 1, UINT64_C(1) << 40, &c->max_bytes))
				return hb_cli_usage_error(prog, "--max-shard-bytes takes a positive size, not '%s'", optarg), -1;
			break;
		case OPT_TEXT:
			if (strlen(optarg) != 64 || hb_hex_decode(optarg, c->text, 32))
				return hb_cli_usage_error(prog, "--text-digest takes 64 hex digits, not '%s'", optarg), -1;
			break;
		case OPT_CAPTURE:
			if (parse_layers(optarg, c))
				return hb_cli_usage_error(prog, "--capture-hidden takes comma-separated layer indices, not '%s'",
							  optarg), -1;
			break;
		case OPT_CAPTURE_POS:
			if (hb_parse_u64_range(optarg, 1, 1u << 20, &c->capture_positions))
				return hb_cli_usage_error(prog, "--capture-positions takes 1..1048576, not '%s'", optarg), -1;
			break;
		case OPT_NO_PREFAULT:
			c->no_prefault = true;
			break;
		case OPT_BACKEND:
			if (hb_backend_parse(optarg, &c->backend))
				return hb_cli_usage_error(prog, "--backend takes cpu or cuda, not '%s'", optarg), -1;
			break;
		case OPT_WEIGHTS:
			if (hb_weights_parse(optarg, &c->weights_asked))
				return hb_cli_usage_error(prog, "--weights takes read or map, not '%s'", optarg), -1;
			c->weights_set = true;
			break;
		case OPT_THREADS:
			if (hb_parse_u64_range(optarg, 1, 1024, &c->threads))
				return hb_cli_usage_error(prog, "--threads takes 1..1024, not '%s'", optarg), -1;
			break;
		case OPT_HINTS:
			if (hb_parse_u64_range(optarg, 1, HB_TRACE_MAX_TOPK, &c->hints))
				return hb_cli_usage_error(prog, "--hints takes 1..%u, not '%s'", HB_TRACE_MAX_TOPK, optarg), -1;
			break;
		case OPT_FTOL:
			if (hb_parse_double(optarg, &c->ftol) || !(c->ftol >= 0) || !isfinite(c->ftol))
				return hb_cli_usage_error(prog, "--feature-tol takes a number >= 0, not '%s'", optarg), -1;
			c->has_ftol = true;
			break;
		case OPT_TOL:
			if (hb_parse_double(optarg, &c->tol) || !(c->tol >= 0))
				return hb_cli_usage_error(prog, "--weight-tol takes a non-negative number, not '%s'", optarg), -1;
			break;
		case OPT_SEED:
			if (hb_parse_u64(optarg, &c->seed))
				return hb_cli_usage_error(prog, "--seed takes an unsigned integer, not '%s'", optarg), -1;
			break;
		case OPT_VAL:
			if (parse_fraction(optarg, &c->validation))
				return hb_cli_usage_error(prog, "--validation takes a number in [0, 1], not '%s'", optarg), -1;
			break;
		case OPT_TEMPORAL:
			if (parse_fraction(optarg, &c->temporal))
				return hb_cli_usage_error(prog, "--temporal takes a number in [0, 1], not '%s'", optarg), -1;
			break;
		case OPT_WINDOW:
			if (hb_parse_u64_range(optarg, 1, UINT32_MAX, &c->window))
				return hb_cli_usage_error(prog, "--window takes a positive count, not '%s'", optarg), -1;
			break;
		case OPT_STRIDE:
			if (hb_parse_u64_range(optarg, 1, UINT32_MAX, &c->stride))
				return hb_cli_usage_error(prog, "--stride takes a positive count, not '%s'", optarg), -1;
			break;
		case OPT_XS_CACHE:
		case OPT_XS_PREDICT:
		case OPT_XS_EVICT:
		case OPT_XS_EXTENT:
			if (hb_cli_xs_option(prog, &c->xs, (enum hb_cli_xs_opt)(opt - OPT_XS_CACHE), optarg))
				return -1;
			c->xs_given = true;
			break;
		case OPT_TRANSCRIPTS: c->transcripts = optarg; break;
		case OPT_TRAIN: c->train = optarg; break;
		case OPT_PRED: case OPT_AVAIL: case OPT_DEADLINES: case OPT_READ_NS: case OPT_VEVAL:
			if (replay_parse_eval_option(opt - OPT_AVAIL + 1, opt == OPT_PRED, optarg, c))
				return -1;
			break;
		case OPT_K:
			if (parse_budgets(optarg, c))
				return hb_cli_usage_error(prog, "--k takes up to 16 ascending positive counts, not '%s'", optarg), -1;
			break;
		case OPT_SEQUENCES: case OPT_NOISE: case OPT_RANK: case OPT_EPOCHS: case OPT_PATIENCE: case OPT_BATCH:
		case OPT_LR: case OPT_FP: case OPT_DECAY: case OPT_ACCEPT: case OPT_DEADLINE: case OPT_PREDICTOR:
		case OPT_FEATURES: case OPT_FWIDTH: case OPT_FSEED: case OPT_SPLIT_FILE: case OPT_SPLIT_NAME: case OPT_AHEAD:
			if (replay_parse_train_option(opt - OPT_SEQUENCES, optarg, c))
				return -1;
			break;
		case OPT_JSON: c->json = true; break;
		case 'q': c->quiet = true; break;
		case 'h': usage(stdout); exit(HB_EXIT_OK);
		case OPT_VERSION: hb_cli_version(prog); exit(HB_EXIT_OK);
		case ':':
		default:
			return hb_cli_getopt_error(prog, opt, argv);
		}
	}
	if (optind >= argc)
		return hb_cli_usage_error(prog, "a subcommand is required (label, parity, split, merge, eval, plant, train, predict, shadow)"), -1;
	c->sub = argv[optind];
	c->args = argv + optind + 1;
	c->n_args = argc - optind - 1;
	return check_subcommand(c);
}
