/*
 * hb-trace/cat.c: hb-trace cat: every record as one line of JSON.
 */
#include "hb_base.h"
#include "hb_trace_cli.h"

#include <math.h>

static int cat_one(void *ctx, size_t shard, uint64_t index, const struct hb_trace_header *h,
		   const struct hb_route *r)
{
	const struct cli *c = ctx;

	printf("{\"shard\":");
	/* shard names are the user's arguments: escape them as JSON */
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)c->paths[shard]; *p; p++)
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	printf("\",\"record\":%" PRIu64 ",\"sequence\":%" PRIu64 ",\"token\":%" PRIu64 ",\"layer\":%u,\"experts\":[",
	       index, r->sequence, r->ordinal, r->layer);
	for (uint32_t i = 0; i < h->top_k; i++)
		printf("%s%u", i ? "," : "", r->ids[i]);
	printf("],\"weights\":[");
	for (uint32_t i = 0; i < h->top_k; i++)
		if (isfinite(r->weights[i]))
			printf("%s%.9g", i ? "," : "", (double)r->weights[i]);
		else
			printf("%snull", i ? "," : "");
	if (r->lineage)
		printf("],\"lineage\":{\"proposal\":%" PRIu64 ",\"candidate\":%d,\"accepted\":%d}}\n", r->proposal,
		       r->candidate, r->accepted);
	else
		printf("],\"lineage\":null}\n");
	return 0;
}

int trace_cat(const struct cli *c, struct hb_trace_set *s, struct hb_error *err)
{
	return hb_trace_set_scan(s, cat_one, (void *)c, NULL, err);
}
