/*
 * hb_backend_cli.h: `--backend cpu|cuda`, shared by the two fronts that may
 * run the model on a GPU (hb-run, hb-replay label); linked into those two
 * binaries only, so that no other binary links a GPU symbol.  cpu, the
 * default, is the reference.  cuda is the backend in cuda/ (hb_cuda.h),
 * compiled in when the build found nvcc (HB_WITH_CUDA); a binary built
 * without it refuses cuda with a message saying so.
 */
#ifndef HB_BACKEND_CLI_H
#define HB_BACKEND_CLI_H

#include "hb_base.h"
#include "hb_err.h"
#include "graph/hb_model.h"

enum hb_backend_choice { HB_BACKEND_CPU = 0, HB_BACKEND_CUDA = 1 };

/* "cpu" or "cuda" into *out; -1 for anything else */
int hb_backend_parse(const char *arg, enum hb_backend_choice *out);
/* Start the chosen backend (cpu: nothing to do), before the model is
 * loaded, so that a refusal (no nvcc at build time, no device, a device
 * below the needed compute capability, in err) costs no load. */
int hb_backend_cli_start(enum hb_backend_choice b, struct hb_error *err);
/* Model m is loaded: its read-only mapping's weights are uploaded once. */
void hb_backend_cli_model(enum hb_backend_choice b, const struct hb_model *m);
/* After a failed chunk: when the device failed, its error replaces err's
 * (which then says only that a value was not finite). */
void hb_backend_cli_explain(enum hb_backend_choice b, struct hb_error *err);
void hb_backend_cli_stop(enum hb_backend_choice b);

/*
 * The mapped weights a CPU run reads, read once before its clock starts
 * (hb_model_prefault over the pool), unless skip (--no-prefault) or a
 * device runs the model: how long that took, and, when measure_pmd (a
 * --json report will print it), how many bytes of the mapping the kernel
 * then maps 2 MiB at a time (hb_map.h: a walk of the process's smaps,
 * whose cost grows with what is mapped, so not done for nothing); both 0
 * when it did not run.
 */
struct hb_prefault_report {
	double seconds;
	uint64_t pmd_bytes;
};
void hb_backend_cli_prefault(const struct hb_model *m, struct hb_pool *pool, bool skip, bool measure_pmd,
			     struct hb_prefault_report *out);

/*
 * --weights read|map (hb_weights_mode): "read" or "map" into *out, -1 for
 * anything else.  hb_weights_resolve gives the mode a run takes: *asked
 * where the option was given (asked NULL: not), else read for the cpu
 * backend with the experts resident and map otherwise.  read is refused
 * (an error naming --weights) with the cuda backend, which uploads the
 * mapped artifact, and with an --expert-cache other than all, which
 * streams the experts from the file instead of holding them.
 */
int hb_weights_parse(const char *arg, enum hb_weights_mode *out);
const char *hb_weights_name(enum hb_weights_mode mode);
int hb_weights_resolve(enum hb_backend_choice b, const char *expert_cache, const enum hb_weights_mode *asked,
		       enum hb_weights_mode *mode, struct hb_error *err);

#endif
