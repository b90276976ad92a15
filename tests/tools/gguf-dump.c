/*
 * gguf-dump: print our GGUF reader's view of a file as canonical JSON, the
 * same text tests/tools/gguf-dump.mjs prints from @huggingface/gguf, so the
 * interop test can compare the two byte for byte.  A test tool, not a
 * product binary.
 *
 * Canonical form: objects with keys sorted by their UTF-8 bytes, two-space
 * indentation, strings escaped as JSON.stringify does; 64-bit integers and
 * offsets as decimal strings; f32/f64 as the hex of their IEEE bits (no
 * decimal rounding to disagree about); kv keyed by name, tensors in file
 * order with dims in stored (GGML) order and absolute offsets.
 *
 * usage: gguf-dump [--layout] FILE
 *   --layout  print our extra view instead: regions, byte ranges and their
 *             owners, tensor sizes and the bytes the reader read
 * exit: 0 printed, 1 the reader refused the file (one line on stderr:
 * "gguf-dump: FILE: ID: FIELD: MESSAGE at byte N"), 2 usage.
 */
#include "hb_base.h"
#include "hb_err.h"
#include "gguf/hb_gguf.h"
#include "hb_io.h"

#include <unistd.h>

static void put_str(const char *s, uint64_t len)
{
	putchar('"');
	for (uint64_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		switch (c) {
		case '"': fputs("\\\"", stdout); break;
		case '\\': fputs("\\\\", stdout); break;
		case '\b': fputs("\\b", stdout); break;
		case '\f': fputs("\\f", stdout); break;
		case '\n': fputs("\\n", stdout); break;
		case '\r': fputs("\\r", stdout); break;
		case '\t': fputs("\\t", stdout); break;
		default:
			if (c < 0x20)
				printf("\\u%04x", c);
			else
				putchar(c);
		}
	}
	putchar('"');
}

static void indent(int n)
{
	for (int i = 0; i < n; i++)
		fputs("  ", stdout);
}

/* One element of a native array (or a scalar) as canonical JSON. */
static void put_scalar(uint32_t type, const void *p)
{
	switch (type) {
	case HB_GGUF_U8: printf("%u", *(const uint8_t *)p); break;
	case HB_GGUF_I8: printf("%d", *(const int8_t *)p); break;
	case HB_GGUF_U16: printf("%u", *(const uint16_t *)p); break;
	case HB_GGUF_I16: printf("%d", *(const int16_t *)p); break;
	case HB_GGUF_U32: printf("%" PRIu32, *(const uint32_t *)p); break;
	case HB_GGUF_I32: printf("%" PRId32, *(const int32_t *)p); break;
	case HB_GGUF_BOOL: fputs(*(const uint8_t *)p ? "true" : "false", stdout); break;
	case HB_GGUF_U64: printf("\"%" PRIu64 "\"", *(const uint64_t *)p); break;
	case HB_GGUF_I64: printf("\"%" PRId64 "\"", *(const int64_t *)p); break;
	case HB_GGUF_F32: {
		uint32_t bits;
		memcpy(&bits, p, 4);
		printf("\"0x%08" PRIx32 "\"", bits);
		break;
	}
	case HB_GGUF_F64: {
		uint64_t bits;
		memcpy(&bits, p, 8);
		printf("\"0x%016" PRIx64 "\"", bits);
		break;
	}
	case HB_GGUF_STRING: {
		const struct hb_gguf_str *s = p;
		put_str(s->ptr, s->len);
		break;
	}
	}
}

static void put_value(const struct hb_gguf_value *v, int depth)
{
	if (v->type != HB_GGUF_ARRAY) {
		printf("{\n");
		indent(depth + 1);
		printf("\"type\": \"%s\",\n", hb_gguf_type_name(v->type));
		indent(depth + 1);
		printf("\"value\": ");
		if (v->type == HB_GGUF_STRING)
			put_str(v->str.ptr, v->str.len);
		else if (v->type == HB_GGUF_BOOL)
			fputs(v->v.u8 ? "true" : "false", stdout);
		else
			put_scalar(v->type, &v->v);
		printf("\n");
		indent(depth);
		printf("}");
		return;
	}
	size_t es = v->elem_type == HB_GGUF_STRING ? sizeof(struct hb_gguf_str)
						   : hb_gguf_type_size(v->elem_type);
	printf("{\n");
	indent(depth + 1);
	printf("\"elem_type\": \"%s\",\n", hb_gguf_type_name(v->elem_type));
	indent(depth + 1);
	printf("\"type\": \"array\",\n");
	indent(depth + 1);
	printf("\"value\": ");
	if (v->count == 0) {
		printf("[]");
	} else {
		printf("[\n");
		for (uint64_t i = 0; i < v->count; i++) {
			indent(depth + 2);
			put_scalar(v->elem_type, (const unsigned char *)v->elems + i * es);
			printf(i + 1 < v->count ? ",\n" : "\n");
		}
		indent(depth + 1);
		printf("]");
	}
	printf("\n");
	indent(depth);
	printf("}");
}

static int key_cmp(const void *a, const void *b)
{
	const struct hb_gguf_kv *x = *(const struct hb_gguf_kv *const *)a;
	const struct hb_gguf_kv *y = *(const struct hb_gguf_kv *const *)b;
	uint64_t n = x->key.len < y->key.len ? x->key.len : y->key.len;
	int c = memcmp(x->key.ptr, y->key.ptr, (size_t)n);

	if (c)
		return c;
	return x->key.len < y->key.len ? -1 : (x->key.len > y->key.len);
}

static int dump(const struct hb_gguf *g)
{
	const struct hb_gguf_kv **sorted = malloc((size_t)(g->n_kv ? g->n_kv : 1) * sizeof(*sorted));

	if (!sorted)
		return 1;
	for (uint64_t i = 0; i < g->n_kv; i++)
		sorted[i] = &g->kv[i];
	qsort(sorted, (size_t)g->n_kv, sizeof(*sorted), key_cmp);
	printf("{\n  \"alignment\": %" PRIu32 ",\n", g->layout.alignment);
	printf("  \"data_offset\": \"%" PRIu64 "\",\n", g->layout.data_start);
	printf("  \"kv\": ");
	if (g->n_kv == 0)
		printf("{}");
	else {
		printf("{\n");
		for (uint64_t i = 0; i < g->n_kv; i++) {
			indent(2);
			put_str(sorted[i]->key.ptr, sorted[i]->key.len);
			printf(": ");
			put_value(&sorted[i]->value, 2);
			printf(i + 1 < g->n_kv ? ",\n" : "\n");
		}
		printf("  }");
	}
	printf(",\n  \"kv_count\": \"%" PRIu64 "\",\n", g->n_kv);
	printf("  \"tensor_count\": \"%" PRIu64 "\",\n", g->n_tensors);
	printf("  \"tensors\": ");
	if (g->n_tensors == 0)
		printf("[]");
	else {
		printf("[\n");
		for (uint64_t i = 0; i < g->n_tensors; i++) {
			const struct hb_gguf_tensor *t = &g->tensors[i];
			printf("    {\n      \"dims\": [\n");
			for (uint32_t d = 0; d < t->n_dims; d++)
				printf("        \"%" PRIu64 "\"%s\n", t->dims[d],
				       d + 1 < t->n_dims ? "," : "");
			printf("      ],\n      \"name\": ");
			put_str(t->name.ptr, t->name.len);
			printf(",\n      \"offset\": \"%" PRIu64 "\",\n", t->offset);
			printf("      \"rel_offset\": \"%" PRIu64 "\",\n", t->rel_offset);
			printf("      \"type\": %" PRIu32 "\n    }%s\n", t->ggml_type,
			       i + 1 < g->n_tensors ? "," : "");
		}
		printf("  ]");
	}
	printf(",\n  \"version\": %" PRIu32 "\n}\n", g->version);
	free(sorted);
	return 0;
}

static void dump_layout(const struct hb_gguf *g)
{
	const struct hb_gguf_layout *L = &g->layout;

	printf("alignment %" PRIu32 "\n", L->alignment);
	printf("kv_start %" PRIu64 "\ntensor_info_start %" PRIu64 "\ntensor_info_end %" PRIu64
	       "\ndata_start %" PRIu64 "\nfile_size %" PRIu64 "\nbytes_read %" PRIu64 "\n",
	       L->kv_start, L->tensor_info_start, L->tensor_info_end, L->data_start,
	       L->file_size, g->bytes_read);
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct hb_gguf_tensor *t = &g->tensors[i];
		printf("tensor %s %s offset %" PRIu64 " nbytes %" PRIu64 "\n", t->name.ptr,
		       hb_ggml_type_name(t->ggml_type), t->offset, t->nbytes);
	}
	for (size_t i = 0; i < L->n_ranges; i++) {
		const struct hb_gguf_range *r = &L->ranges[i];
		printf("range %" PRIu64 " %" PRIu64 " %s", r->offset, r->length,
		       hb_gguf_owner_name(r->owner));
		if (r->owner == HB_GGUF_OWN_TENSOR)
			printf(" %s", g->tensors[r->tensor].name.ptr);
		printf("\n");
	}
}

int main(int argc, char **argv)
{
	struct hb_gguf g;
	struct hb_error err;
	char msg[600];
	bool layout = false;
	const char *path;
	int fd, rc;

	if (argc == 3 && strcmp(argv[1], "--layout") == 0)
		layout = true;
	else if (argc != 2) {
		fprintf(stderr, "usage: gguf-dump [--layout] FILE\n");
		return 2;
	}
	path = argv[argc - 1];
	hb_error_clear(&err);
	rc = hb_open_read(path, &fd, &err);
	if (!rc) {
		rc = hb_gguf_read_fd(&g, fd, NULL, &err);
		close(fd);
	}
	if (rc) {
		fprintf(stderr, "gguf-dump: %s: %s: %s\n", path, err.id ? err.id : hb_err_name(rc),
			hb_error_format(&err, msg, sizeof(msg)));
		return 1;
	}
	if (layout)
		dump_layout(&g);
	else
		rc = dump(&g);
	hb_gguf_release(&g);
	return rc;
}
