/*
 * hb_trace_probe.h: measure a file's read latency and bandwidth (hb-trace
 * probe), the default storage model of prefetch-sim.
 *
 * Owns: random 4 KiB reads (median latency) and random record-sized reads
 * at queue depths 1, 2, 4, 8, 16 (threads issuing pread), with O_DIRECT
 * when the file system allows it (otherwise buffered, and `direct` says
 * so: the figures then describe the page cache).  Without a file it
 * measures a 64 MiB temporary file under $TMPDIR.  Timings, not asserted
 * by any test.  It does not own the model that uses them.
 */
#ifndef HB_TRACE_PROBE_H
#define HB_TRACE_PROBE_H

#include "hb_base.h"
#include "hb_err.h"

#define HB_TPROBE_DEPTHS 5

struct hb_tprobe_result {
	uint64_t file_bytes, read_bytes;
	bool direct;
	double latency_s;                         /* median of 4 KiB random reads */
	uint32_t depths[HB_TPROBE_DEPTHS];        /* 1, 2, 4, 8, 16 */
	double bandwidth[HB_TPROBE_DEPTHS];       /* bytes per second at each depth */
	double best_bandwidth;
	uint32_t depth;                           /* smallest depth within 90% of the best */
};

/* path may be NULL (temporary file); read_bytes is the record size
 * (rounded up to 4096; 0 = 1 MiB). */
int hb_tprobe_run(const char *path, uint64_t read_bytes, struct hb_tprobe_result *out,
		  struct hb_error *err);

#endif
