/*
 * hb_convert.h: one Qwen4Exp checkpoint directory -> one GGUF artifact.
 *
 * The converter reads config.json with upstream semantics, opens every
 * safetensors shard, classifies every tensor exactly once (hb_inventory),
 * recomputes the PLE hash identity and requires the stored buffers to agree,
 * lays out a GGUF file holding the dense tensors in their source precision,
 * one ExpertMajor v2 store and one PLE v1 store, and streams the bytes in
 * bounded chunks into a sibling temporary file published atomically
 * (hb_publish): fsync, reopen and verify the stores' digests, rename.  Any
 * failure leaves no target change and no temporary file.
 *
 * The result's report (JSON) lists every source tensor with its class and
 * destination, the exclusions, the codecs and every owner of every byte of
 * the artifact.
 */
#ifndef HB_CONVERT_H
#define HB_CONVERT_H

#include "hb_base.h"
#include "hb_err.h"
#include "gguf/hb_gguf.h"
#include "hb_progress.h"
#include "model/hb_qwen_config.h"
#include <cJSON.h>

enum hb_expert_codec_opt { HB_CONV_EXPERTS_BF16 = 1, HB_CONV_EXPERTS_AFFINE4_G64 };
enum hb_ple_codec_opt { HB_CONV_PLE_BF16 = 1, HB_CONV_PLE_AFFINE4_G32 };

#define HB_CONV_DEFAULT_ROWS_PER_PAGE 256u

enum hb_conv_io { HB_CONV_IO_AUTO = 0, HB_CONV_IO_BUFFERED = 1, HB_CONV_IO_DIRECT = 2 };

/* Bytes of the expert payload synced, read back and dropped from the page
 * cache at a time when it is written through the page cache. */
#define HB_CONV_IO_WINDOW (32u << 20)

struct hb_convert_opts {
	const char *src_dir;
	const char *out_path;
	enum hb_expert_codec_opt expert_codec;
	enum hb_ple_codec_opt ple_codec;
	const char *profile;          /* "auto", "qwen4exp-flash-next", "dev" */
	const char *source_revision;  /* NULL unless the caller knows it */
	uint32_t ple_rows_per_page;   /* 0: HB_CONV_DEFAULT_ROWS_PER_PAGE */
	unsigned threads;             /* 0: all CPUs */
	/* how the expert payload is written and read back: HB_CONV_IO_DIRECT
	 * (O_DIRECT where the records and the file system allow it, else
	 * buffered), HB_CONV_IO_BUFFERED (through the page cache in windows,
	 * each synced, read back and dropped from the cache), HB_CONV_IO_AUTO
	 * (0: the default, buffered) */
	int io;
	/* Test seam: the window's bytes (0: HB_CONV_IO_WINDOW); the ring of
	 * records in flight may make it smaller. */
	uint64_t io_window;
	bool force;                   /* replace an existing target */
	struct hb_progress *progress; /* may be NULL */
	/* Test seam: called after each conversion stage with its name; a
	 * non-zero return aborts the conversion there (AFN-013: not a flag of
	 * the binary). */
	int (*stage_hook)(void *ctx, const char *stage);
	void *stage_ctx;
	/* Test seam: sees every expert record as it was read back from the
	 * file (record index, bytes, length) before it is compared; a test may
	 * change the bytes to stand for a write the device lost. */
	void (*readback_hook)(void *ctx, uint64_t record, uint8_t *bytes, size_t len);
	void *readback_ctx;
};

/*
 * Convert.  On success *report (if not NULL) receives the conversion report
 * (free with cJSON_Delete).  On failure nothing is published, *report is
 * NULL and err says why (err->id is a stable diagnostic id where one
 * applies).
 */
int hb_convert(const struct hb_convert_opts *opts, cJSON **report,
	       struct hb_error *err);

/*
 * The model constants of config.json as artifact metadata (hb_artifact.h
 * keys, the exact types admission demands), from the block count through
 * qwen4exp.tie_word_embeddings, in that order.  Shared with tests that
 * write artifacts of their own.
 */
int hb_artifact_write_model_constants(struct hb_gguf_writer *w, const struct hb_qwen_config *q,
				      struct hb_error *err);

#endif
