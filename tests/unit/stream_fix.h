/*
 * stream_fix.h: synthetic ExpertMajor stores for the streaming engine's
 * tests (tests/unit/test_stream_*.c), written by the real store writer.
 *
 * A store is written at a 4096-aligned offset `base` of a file (the bytes
 * before it are a zero prefix, as a GGUF header would be), every weight a
 * deterministic function of (layer, expert, role, index) so that no two
 * records are equal, and each record's SHA-256 is computed from the bytes
 * read back from the file, as hb-convert computes the artifact's table.
 */
#ifndef HB_TEST_STREAM_FIX_H
#define HB_TEST_STREAM_FIX_H

#include "hb_base.h"
#include "stream/hb_stream.h"

/* Write the store to path and fill src (release with hb_xs_source_release). */
int sfix_build(const char *path, uint64_t base, const struct hb_em_geometry *g,
	       enum hb_em_codec_id codec, struct hb_xs_source *src);
/* The small geometries the tests use: records of 12,288 bytes (three 4096
 * blocks, every record aligned), and of 2,304 bytes (records share and
 * straddle blocks). */
void sfix_geometry_aligned(struct hb_em_geometry *g, uint32_t layers, uint32_t experts);
void sfix_geometry_unaligned(struct hb_em_geometry *g, uint32_t layers, uint32_t experts);
/* The record's bytes as the file holds them (malloc'd; free it). */
uint8_t *sfix_record(const struct hb_xs_source *src, uint32_t layer, uint32_t expert);
/* A caller-driven configuration of `slots` slots. */
void sfix_config(struct hb_xs_config *c, const struct hb_xs_source *src, uint32_t slots);
/* hb_xs_open that must succeed without a message (a failed check otherwise). */
struct hb_xs *sfix_open(const struct hb_xs_source *src, const struct hb_xs_config *c);

#endif
