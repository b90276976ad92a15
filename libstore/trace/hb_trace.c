/*
 * hb_trace.c: route trace shards (see hb_trace.h for the byte layout).
 * Sequential read()/write() loops so that shards stream through pipes.
 */
#include "hb_base.h"
#include "hb_trace.h"

#include <unistd.h>
#include <zlib.h>

static const struct { const char *id; } diags[] = {
#define HB_TRACE_ROW_(sym, id, meaning) {id},
	HB_TRACE_DIAGS(HB_TRACE_ROW_)
#undef HB_TRACE_ROW_
};

const char *hb_trace_diag_id(enum hb_trace_diag d)
{
	return (unsigned)d < HB_TRD_COUNT ? diags[d].id : NULL;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static uint32_t crc(const uint8_t *p, size_t n)
{
	uLong c = crc32(0L, Z_NULL, 0);
	while (n) {
		uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
		c = crc32(c, p, k);
		p += k;
		n -= k;
	}
	return (uint32_t)c;
}

uint32_t hb_trace_record_bytes(uint32_t top_k)
{
	return 40 + 8 * top_k;
}

/* ------------------------------------------------------------ owner and thread ids */

static uint64_t sha_name(const char *text, size_t len)
{
	struct hb_sha256 h;
	uint8_t d[HB_SHA256_BYTES];

	hb_sha256_init(&h);
	/* the domain and its NUL first: these ids are never some other
	 * SHA-256-derived value of the same text */
	hb_sha256_update(&h, HB_TRACE_NAME_DOMAIN, sizeof(HB_TRACE_NAME_DOMAIN));
	hb_sha256_update(&h, text, len);
	hb_sha256_final(&h, d);
	return get64(d);
}

static hb_trace_name_hash_fn name_hash = sha_name;

void hb_trace_name_hash_seam(hb_trace_name_hash_fn fn)
{
	name_hash = fn ? fn : sha_name;
}

bool hb_trace_name_is_integer(const char *text, size_t len)
{
	uint64_t v = 0;

	/* canonical: digits only, no leading zero but in "0" itself; below
	 * 2^63 (19 digits at most), so that no integer id has bit 63 set */
	if (!len || len > 19 || (text[0] == '0' && len > 1))
		return false;
	for (size_t i = 0; i < len; i++) {
		if (text[i] < '0' || text[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(text[i] - '0');
	}
	return v < HB_TRACE_NAME_BIT;
}

int hb_trace_name_id(const char *text, size_t len, uint64_t *id)
{
	if (!len || len > HB_TRACE_NAME_MAX)
		return HB_ERR_INVALID;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f)
			return HB_ERR_INVALID;
	if (hb_trace_name_is_integer(text, len)) {
		uint64_t v = 0;
		for (size_t i = 0; i < len; i++)
			v = v * 10 + (uint64_t)(text[i] - '0');
		*id = v;
		return HB_OK;
	}
	*id = name_hash(text, len) | HB_TRACE_NAME_BIT;
	return HB_OK;
}

static int write_all(int fd, const void *buf, size_t n, const char *what, struct hb_error *err)
{
	const uint8_t *p = buf;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return hb_error_diag(err, diags[HB_TRD_IO].id, HB_ERR_IO, what, false, 0,
					     "write failed: %s", strerror(w < 0 ? errno : EIO));
		p += w;
		n -= (size_t)w;
	}
	return HB_OK;
}

/* Read exactly n bytes; *got says how many arrived before EOF. */
static int read_all(int fd, void *buf, size_t n, size_t *got, const char *what, struct hb_error *err)
{
	uint8_t *p = buf;
	*got = 0;
	while (*got < n) {
		ssize_t r = read(fd, p + *got, n - *got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return hb_error_diag(err, diags[HB_TRD_IO].id, HB_ERR_IO, what, false, 0,
					     "read failed: %s", strerror(errno));
		if (r == 0)
			break;
		*got += (size_t)r;
	}
	return HB_OK;
}

/* ------------------------------------------------------------ writer */

struct hb_trace_writer {
	int fd;
	char what[256];
	struct hb_trace_header h;
	uint32_t chunk_records, pending;
	uint8_t *buf; /* chunk header + payload */
};

static void encode_header(const struct hb_trace_header *h, uint8_t out[HB_TRACE_HEADER_BYTES])
{
	memset(out, 0, HB_TRACE_HEADER_BYTES);
	memcpy(out, HB_TRACE_MAGIC, 8);
	put32(out + 8, h->version);
	put32(out + 12, HB_TRACE_HEADER_BYTES);
	put32(out + 16, h->top_k);
	put32(out + 20, h->layers);
	put32(out + 24, h->experts);
	put32(out + 28, hb_trace_record_bytes(h->top_k));
	memcpy(out + 32, h->artifact, 32);
	memcpy(out + 64, h->text, 32);
	put64(out + 96, h->owner);
	put32(out + 104, h->generation);
	if (h->has_thread) {
		put64(out + 108, h->thread);
		put32(out + 116, 1);
	}
	put32(out + 124, crc(out, 124));
}

int hb_trace_writer_open(struct hb_trace_writer **out, int fd, const char *what,
			 const struct hb_trace_header *h, uint32_t chunk_records, struct hb_error *err)
{
	struct hb_trace_writer *w;
	uint8_t hdr[HB_TRACE_HEADER_BYTES];
	int rc;

	/* the reader's header rules: a writer never writes what it would refuse */
	if (!h->top_k || h->top_k > HB_TRACE_MAX_TOPK || !chunk_records || chunk_records > HB_TRACE_MAX_CHUNK_RECORDS ||
	    !h->layers || !h->experts)
		return hb_error_diag(err, diags[HB_TRD_HEADER].id, HB_ERR_INVALID, what, false, 0,
				     "top_k %u, layers %u, experts %u or chunk size %u out of range", h->top_k,
				     h->layers, h->experts, chunk_records);
	w = calloc(1, sizeof(*w));
	if (!w)
		return hb_error_set(err, HB_ERR_NOMEM, what, "out of memory");
	w->buf = malloc(HB_TRACE_CHUNK_HEADER_BYTES + (size_t)chunk_records * hb_trace_record_bytes(h->top_k));
	if (!w->buf) {
		free(w);
		return hb_error_set(err, HB_ERR_NOMEM, what, "out of memory");
	}
	w->fd = fd;
	snprintf(w->what, sizeof(w->what), "%s", what);
	w->h = *h;
	/* the lowest version that holds the header: readers that know only
	 * version 1 keep reading every shard without a thread */
	w->h.version = h->has_thread ? 2 : 1;
	if (!h->has_thread)
		w->h.thread = 0;
	w->h.record_bytes = hb_trace_record_bytes(h->top_k);
	w->chunk_records = chunk_records;
	encode_header(&w->h, hdr);
	rc = write_all(fd, hdr, sizeof(hdr), what, err);
	if (rc) {
		free(w->buf);
		free(w);
		return rc;
	}
	*out = w;
	return HB_OK;
}

int hb_trace_write(struct hb_trace_writer *w, const struct hb_route *r, struct hb_error *err)
{
	uint8_t *p = w->buf + HB_TRACE_CHUNK_HEADER_BYTES + (size_t)w->pending * w->h.record_bytes;

	if (r->layer >= w->h.layers)
		return hb_error_diag(err, diags[HB_TRD_RECORD].id, HB_ERR_INVALID, w->what, false, 0,
				     "layer %u of %u", r->layer, w->h.layers);
	put64(p, r->sequence);
	put64(p + 8, r->ordinal);
	put32(p + 16, r->layer);
	put32(p + 20, r->lineage ? 1u : 0u);
	put64(p + 24, r->lineage ? r->proposal : 0);
	put32(p + 32, (uint32_t)(r->lineage ? r->candidate : -1));
	put32(p + 36, (uint32_t)(r->lineage ? r->accepted : -1));
	for (uint32_t i = 0; i < w->h.top_k; i++) {
		uint32_t bits;
		if (r->ids[i] >= w->h.experts)
			return hb_error_diag(err, diags[HB_TRD_RECORD].id, HB_ERR_INVALID, w->what, false, 0,
					     "expert %u of %u", r->ids[i], w->h.experts);
		put32(p + 40 + 4 * i, r->ids[i]);
		memcpy(&bits, &r->weights[i], 4);
		put32(p + 40 + 4 * w->h.top_k + 4 * i, bits);
	}
	if (++w->pending == w->chunk_records)
		return hb_trace_flush(w, err);
	return HB_OK;
}

int hb_trace_flush(struct hb_trace_writer *w, struct hb_error *err)
{
	size_t payload = (size_t)w->pending * w->h.record_bytes;
	int rc;

	if (!w->pending)
		return HB_OK;
	memcpy(w->buf, HB_TRACE_CHUNK_MAGIC, 8);
	put32(w->buf + 8, w->pending);
	put32(w->buf + 12, crc(w->buf + HB_TRACE_CHUNK_HEADER_BYTES, payload));
	put64(w->buf + 16, payload);
	rc = write_all(w->fd, w->buf, HB_TRACE_CHUNK_HEADER_BYTES + payload, w->what, err);
	w->pending = 0;
	return rc;
}

int hb_trace_writer_close(struct hb_trace_writer *w, struct hb_error *err)
{
	int rc;

	if (!w)
		return HB_OK;
	rc = hb_trace_flush(w, err);
	free(w->buf);
	free(w);
	return rc;
}

/* ------------------------------------------------------------ reader */

static int decode_header(const uint8_t *b, struct hb_trace_header *h, const char *what,
			 struct hb_error *err)
{
	if (memcmp(b, HB_TRACE_MAGIC, 8))
		return hb_error_diag(err, diags[HB_TRD_MAGIC].id, HB_ERR_FORMAT, what, true, 0,
				     "not a trace shard (magic)");
	if (get32(b + 8) != 1 && get32(b + 8) != 2)
		return hb_error_diag(err, diags[HB_TRD_VERSION].id, HB_ERR_UNSUPPORTED, what, true, 8,
				     "version %u; this reader knows versions 1 and 2", get32(b + 8));
	if (crc(b, 124) != get32(b + 124))
		return hb_error_diag(err, diags[HB_TRD_HEADER].id, HB_ERR_FORMAT, what, true, 124,
				     "header CRC-32 does not match");
	memset(h, 0, sizeof(*h));
	h->version = get32(b + 8);
	h->top_k = get32(b + 16);
	h->layers = get32(b + 20);
	h->experts = get32(b + 24);
	h->record_bytes = get32(b + 28);
	memcpy(h->artifact, b + 32, 32);
	memcpy(h->text, b + 64, 32);
	h->owner = get64(b + 96);
	h->generation = get32(b + 104);
	if (get32(b + 12) != HB_TRACE_HEADER_BYTES || !h->top_k || h->top_k > HB_TRACE_MAX_TOPK ||
	    h->record_bytes != hb_trace_record_bytes(h->top_k) || !h->layers || !h->experts)
		return hb_error_diag(err, diags[HB_TRD_HEADER].id, HB_ERR_FORMAT, what, true, 12,
				     "inconsistent header fields");
	if (h->version == 2) {
		uint32_t flags = get32(b + 116);
		/* a flag this reader does not know could change what the records
		 * mean: refused, not ignored */
		if (flags & ~1u)
			return hb_error_diag(err, diags[HB_TRD_HEADER].id, HB_ERR_FORMAT, what, true, 116,
					     "unknown header flags 0x%x", flags);
		h->has_thread = flags & 1u;
		h->thread = get64(b + 108);
		if (!h->has_thread && h->thread)
			return hb_error_diag(err, diags[HB_TRD_HEADER].id, HB_ERR_FORMAT, what, true, 108,
					     "a thread without the thread flag");
	}
	for (int i = h->version == 2 ? 120 : 108; i < 124; i++)
		if (b[i])
			return hb_error_diag(err, diags[HB_TRD_HEADER].id, HB_ERR_FORMAT, what, true, (uint64_t)i,
					     "reserved header byte is not zero");
	return HB_OK;
}

static int decode_record(const uint8_t *p, const struct hb_trace_header *h, struct hb_route *r)
{
	uint32_t flags = get32(p + 20);

	r->sequence = get64(p);
	r->ordinal = get64(p + 8);
	r->layer = get32(p + 16);
	r->lineage = flags & 1;
	r->proposal = get64(p + 24);
	r->candidate = (int32_t)get32(p + 32);
	r->accepted = (int32_t)get32(p + 36);
	if (flags & ~1u || r->layer >= h->layers)
		return -1;
	/* without lineage the fields hold the writer's fixed values, nothing else */
	if (!r->lineage && (r->proposal != 0 || r->candidate != -1 || r->accepted != -1))
		return -1;
	for (uint32_t i = 0; i < h->top_k; i++) {
		uint32_t bits = get32(p + 40 + 4 * h->top_k + 4 * i);
		r->ids[i] = get32(p + 40 + 4 * i);
		memcpy(&r->weights[i], &bits, 4);
		if (r->ids[i] >= h->experts)
			return -1;
	}
	return 0;
}

/* "last good record N", or "no good record" before the first one */
static const char *last_good(char *buf, size_t len, uint64_t delivered)
{
	if (!delivered)
		snprintf(buf, len, "no good record");
	else
		snprintf(buf, len, "last good record %" PRIu64, delivered - 1);
	return buf;
}

int hb_trace_read(int fd, const char *what, hb_trace_record_fn fn, void *ctx,
		  struct hb_trace_header *h, uint64_t *records, struct hb_error *err)
{
	uint8_t hdr[HB_TRACE_HEADER_BYTES], ch[HB_TRACE_CHUNK_HEADER_BYTES], *payload = NULL;
	uint64_t pos = HB_TRACE_HEADER_BYTES, n = 0, chunk = 0;
	size_t got;
	struct hb_route r;
	char good[48];
	int rc;

	*records = 0;
	if ((rc = read_all(fd, hdr, sizeof(hdr), &got, what, err)))
		return rc;
	if (got < sizeof(hdr))
		return hb_error_diag(err, diags[HB_TRD_TRUNCATED].id, HB_ERR_SHORT, what, true, got,
				     "the shard ends inside its header");
	if ((rc = decode_header(hdr, h, what, err)))
		return rc;
	payload = malloc((size_t)HB_TRACE_MAX_CHUNK_RECORDS * h->record_bytes);
	if (!payload)
		return hb_error_set(err, HB_ERR_NOMEM, what, "out of memory");
	for (;; chunk++) {
		uint32_t count;
		uint64_t bytes;
		if ((rc = read_all(fd, ch, sizeof(ch), &got, what, err)))
			break;
		if (got == 0)
			break; /* a clean end at a chunk boundary */
		if (got < sizeof(ch)) {
			rc = hb_error_diag(err, diags[HB_TRD_TRUNCATED].id, HB_ERR_SHORT, what, true, pos + got,
					   "the shard ends inside chunk %" PRIu64 "'s header; %s",
					   chunk, last_good(good, sizeof(good), n));
			break;
		}
		count = get32(ch + 8);
		bytes = get64(ch + 16);
		if (memcmp(ch, HB_TRACE_CHUNK_MAGIC, 8) || !count || count > HB_TRACE_MAX_CHUNK_RECORDS ||
		    bytes != (uint64_t)count * h->record_bytes) {
			rc = hb_error_diag(err, diags[HB_TRD_CHUNK].id, HB_ERR_FORMAT, what, true, pos,
					   "chunk %" PRIu64 " has a malformed header; %s",
					   chunk, last_good(good, sizeof(good), n));
			break;
		}
		if ((rc = read_all(fd, payload, (size_t)bytes, &got, what, err)))
			break;
		if (got < bytes) {
			rc = hb_error_diag(err, diags[HB_TRD_TRUNCATED].id, HB_ERR_SHORT, what, true,
					   pos + sizeof(ch) + got,
					   "the shard ends inside chunk %" PRIu64 " (%zu of %" PRIu64 " bytes); "
					   "%s", chunk, got, bytes, last_good(good, sizeof(good), n));
			break;
		}
		if (crc(payload, (size_t)bytes) != get32(ch + 12)) {
			rc = hb_error_diag(err, diags[HB_TRD_CRC].id, HB_ERR_DIGEST, what, true, pos,
					   "chunk %" PRIu64 " fails its CRC-32; %s",
					   chunk, last_good(good, sizeof(good), n));
			break;
		}
		for (uint32_t i = 0; i < count; i++) {
			if (decode_record(payload + (size_t)i * h->record_bytes, h, &r)) {
				rc = hb_error_diag(err, diags[HB_TRD_RECORD].id, HB_ERR_FORMAT, what, true,
						   pos + sizeof(ch) + (uint64_t)i * h->record_bytes,
						   "record %" PRIu64 " has fields out of range; %s", n,
						   last_good(good, sizeof(good), n));
				goto out;
			}
			if (fn && (rc = fn(ctx, h, &r)))
				goto out;
			n++;
		}
		pos += sizeof(ch) + bytes;
	}
out:
	*records = n;
	free(payload);
	return rc;
}
