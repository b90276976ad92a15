/*
 * stream_fix.c: synthetic stores for the streaming tests (stream_fix.h).
 */
#include "hb_base.h"
#include "hb_io.h"
#include "hb_sha256.h"
#include "harness.h"
#include "stream_fix.h"

#include <fcntl.h>
#include <unistd.h>

void sfix_geometry_aligned(struct hb_em_geometry *g, uint32_t layers, uint32_t experts)
{
	/* 3 x 64 x 32 bf16 weights = 12,288 bytes = 3 blocks */
	g->layers = layers, g->experts = experts, g->experts_used = 2;
	g->hidden = 64, g->intermediate = 32;
}

void sfix_geometry_unaligned(struct hb_em_geometry *g, uint32_t layers, uint32_t experts)
{
	/* 3 x 48 x 8 bf16 weights = 2,304 bytes */
	g->layers = layers, g->experts = experts, g->experts_used = 2;
	g->hidden = 48, g->intermediate = 8;
}

static float weight(uint32_t l, uint32_t e, unsigned r, size_t i)
{
	uint32_t h = (l * 2654435761u) ^ (e * 40503u) ^ (r * 977u) ^ (uint32_t)(i * 2246822519u);
	h ^= h >> 15;
	h *= 2246822519u;
	h ^= h >> 13;
	return ((float)(h % 2001u) - 1000.0f) / 1024.0f;
}

int sfix_build(const char *path, uint64_t base, const struct hb_em_geometry *g,
	       enum hb_em_codec_id codec, struct hb_xs_source *src)
{
	struct hb_em_layout plan;
	struct hb_em_writer w;
	uint8_t digest[32] = {7};
	float *m[3] = {NULL, NULL, NULL};
	size_t max = 0;
	uint8_t *rec = NULL;
	int fd, rc;

	memset(src, 0, sizeof(*src));
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return HB_ERR_IO;
	if ((rc = hb_em_layout_plan(&plan, g, codec, NULL))) {
		close(fd);
		return rc;
	}
	rc = hb_em_writer_begin(&w, &plan, fd, base, 1, digest, 1, NULL);
	for (unsigned r = 0; r < 3; r++) {
		size_t n = (size_t)(plan.layers[0].comp[r].dim[0] * plan.layers[0].comp[r].dim[1]);
		max = n > max ? n : max;
	}
	for (unsigned r = 0; r < 3; r++)
		if (!(m[r] = malloc(max * sizeof(float))))
			rc = rc ? rc : HB_ERR_NOMEM;
	for (uint32_t l = 0; l < plan.layer_count && !rc; l++)
		for (uint32_t e = 0; e < plan.expert_count && !rc; e++) {
			for (unsigned r = 0; r < 3; r++)
				for (size_t i = 0; i < max; i++)
					m[r][i] = weight(l, e, r, i);
			rc = hb_em_writer_put_f32(&w, l, e, m[0], m[1], m[2], NULL);
		}
	if (!rc)
		rc = hb_em_writer_finish(&w, &src->layout, NULL);
	hb_em_writer_release(&w);
	hb_em_layout_release(&plan);
	for (unsigned r = 0; r < 3; r++)
		free(m[r]);
	if (!rc) {
		uint64_t n = (uint64_t)g->layers * g->experts;
		src->record_sha = malloc((size_t)n * 32);
		src->path = strdup(path);
		src->base = base;
		rec = malloc((size_t)src->layout.record_bytes);
		if (!src->record_sha || !src->path || !rec)
			rc = HB_ERR_NOMEM;
		for (uint32_t l = 0; l < g->layers && !rc; l++)
			for (uint32_t e = 0; e < g->experts && !rc; e++) {
				rc = hb_em_record_read(fd, base, &src->layout, l, e, HB_EM_RECORD, rec,
						       (size_t)src->layout.record_bytes, NULL, NULL);
				if (!rc)
					hb_sha256_buf(rec, (size_t)src->layout.record_bytes,
						      src->record_sha + ((size_t)l * g->experts + e) * 32);
			}
	}
	free(rec);
	close(fd);
	if (rc)
		hb_xs_source_release(src);
	return rc;
}

uint8_t *sfix_record(const struct hb_xs_source *src, uint32_t layer, uint32_t expert)
{
	uint8_t *rec = malloc((size_t)src->layout.record_bytes);
	int fd = open(src->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || !rec ||
	    hb_em_record_read(fd, src->base, &src->layout, layer, expert, HB_EM_RECORD, rec,
			      (size_t)src->layout.record_bytes, NULL, NULL)) {
		free(rec);
		rec = NULL;
	}
	if (fd >= 0)
		close(fd);
	return rec;
}

void sfix_config(struct hb_xs_config *c, const struct hb_xs_source *src, uint32_t slots)
{
	hb_xs_config_default(c);
	c->threads = 0;
	c->budget_bytes = (uint64_t)slots * hb_xs_slot_bytes(src);
}

struct hb_xs *sfix_open(const struct hb_xs_source *src, const struct hb_xs_config *c)
{
	struct hb_xs *s = NULL;
	struct hb_error err;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_xs_open(src, c, &s, &err), HB_OK);
	CHECK_STR(err.msg, "");
	return s;
}
