/* Unit tests: strict JSON getters over cJSON. */
#include "hb_base.h"
#include "harness.h"
#include "hb_json.h"

static cJSON *parse(const char *s)
{
	cJSON *root = NULL;
	if (hb_json_parse(s, strlen(s), "t", &root, NULL))
		return NULL;
	return root;
}

static void integers_are_exact(void)
{
	cJSON *root = parse("{\"a\": 5, \"b\": -3, \"c\": 1.5, \"d\": 9007199254740991,"
			    " \"e\": 9007199254740994, \"f\": \"7\", \"g\": 1e3,"
			    " \"h\": 9007199254740992, \"i\": 9007199254740993,"
			    " \"j\": -9007199254740993}");
	struct hb_error err;
	uint64_t u = 77;
	int64_t i = 0;

	CHECK(root != NULL);
	CHECK_EQ_INT(hb_json_u64(root, "a", "t.a", &u, NULL), HB_OK);
	CHECK_EQ_U64(u, 5);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_json_u64(root, "b", "t.b", &u, &err), HB_ERR_FORMAT);
	CHECK_STR(err.field, "t.b");
	CHECK_EQ_INT(hb_json_i64(root, "b", "t.b", &i, NULL), HB_OK);
	CHECK_EQ_INT(i, -3);
	CHECK_EQ_INT(hb_json_u64(root, "c", "t.c", &u, NULL), HB_ERR_FORMAT);
	CHECK_EQ_INT(hb_json_u64(root, "d", "t.d", &u, NULL), HB_OK);
	CHECK_EQ_U64(u, 9007199254740991ull);
	CHECK_EQ_INT(hb_json_u64(root, "e", "t.e", &u, NULL), HB_ERR_UNSUPPORTED);
	/* 2^53 + 1 parses to the double 2^53: both refused, neither read as 2^53 */
	u = 77;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_json_u64(root, "h", "t.h", &u, &err), HB_ERR_UNSUPPORTED);
	CHECK_STR(err.field, "t.h");
	CHECK_EQ_INT(hb_json_u64(root, "i", "t.i", &u, NULL), HB_ERR_UNSUPPORTED);
	CHECK_EQ_INT(hb_json_i64(root, "j", "t.j", &i, NULL), HB_ERR_UNSUPPORTED);
	CHECK_EQ_U64(u, 77);
	CHECK_EQ_INT(hb_json_u64(root, "f", "t.f", &u, NULL), HB_ERR_FORMAT);
	CHECK_EQ_INT(hb_json_u64(root, "g", "t.g", &u, NULL), HB_OK);
	CHECK_EQ_U64(u, 1000);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_json_u64(root, "zz", "t.zz", &u, &err), HB_ERR_NOTFOUND);
	CHECK_STR(err.field, "t.zz");
	cJSON_Delete(root);
}

static void other_types(void)
{
	cJSON *root = parse("{\"s\": \"x\", \"b\": true, \"n\": null, \"f\": 0.25}");
	const char *s = NULL;
	bool b = false;
	double d = 0;

	CHECK(root != NULL);
	CHECK_EQ_INT(hb_json_str(root, "s", "s", &s, NULL), HB_OK);
	CHECK_STR(s, "x");
	CHECK_EQ_INT(hb_json_str(root, "b", "b", &s, NULL), HB_ERR_FORMAT);
	CHECK_EQ_INT(hb_json_bool(root, "b", "b", &b, NULL), HB_OK);
	CHECK(b);
	CHECK_EQ_INT(hb_json_bool(root, "n", "n", &b, NULL), HB_ERR_FORMAT);
	CHECK_EQ_INT(hb_json_f64(root, "f", "f", &d, NULL), HB_OK);
	CHECK(d == 0.25);
	{
		uint64_t u = 0;
		/* A member lookup on a non-object is a format error, not a crash. */
		CHECK_EQ_INT(hb_json_u64(root->child, "x", "s.x", &u, NULL), HB_ERR_FORMAT);
	}
	cJSON_Delete(root);
}

static void malformed_documents(void)
{
	cJSON *root = NULL;
	struct hb_error err;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_json_parse("{\"a\":1} x", 9, "doc", &root, &err), HB_ERR_FORMAT);
	CHECK(err.has_offset);
	CHECK_EQ_U64(err.offset, 8);
	CHECK_STR(err.id ? err.id : "(none)", "json-trailing");
	CHECK(root == NULL);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_json_parse("{\"a\":", 5, "doc", &root, &err), HB_ERR_FORMAT);
	CHECK_STR(err.id ? err.id : "(none)", "json-syntax");
	CHECK_STR(err.field, "doc");
	/* NUL padding after the value is trailing garbage too */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_json_parse("{\"a\":1}\0\0", 9, "doc", &root, &err), HB_ERR_FORMAT);
	CHECK_EQ_U64(err.offset, 7);
	CHECK_STR(err.field, "doc");
	/* Length-bounded: bytes after len are not read. */
	CHECK_EQ_INT(hb_json_parse("{}garbage", 2, "doc", &root, NULL), HB_OK);
	cJSON_Delete(root);
}

static void render_round_trip(void)
{
	cJSON *root = cJSON_CreateObject();
	char *text = NULL;
	size_t len = 0;
	cJSON *back = NULL;
	uint64_t u = 0;
	const char *big = NULL;

	CHECK_EQ_INT(hb_json_add_u64(root, "n", 42), HB_OK);
	CHECK_EQ_INT(hb_json_add_u64(root, "big", UINT64_MAX), HB_OK);
	CHECK_EQ_INT(hb_json_add_str(root, "s", "a\"b"), HB_OK);
	CHECK_EQ_INT(hb_json_add_bool(root, "runtime_supported", false), HB_OK);
	CHECK_EQ_INT(hb_json_render(root, false, &text, &len, NULL), HB_OK);
	CHECK_STR(text, "{\"n\":42,\"big\":\"18446744073709551615\",\"s\":\"a\\\"b\",\"runtime_supported\":false}\n");
	CHECK_EQ_U64(len, strlen(text));
	CHECK_EQ_INT(hb_json_parse(text, len, "r", &back, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_u64(back, "n", "n", &u, NULL), HB_OK);
	CHECK_EQ_U64(u, 42);
	CHECK_EQ_INT(hb_json_str(back, "big", "big", &big, NULL), HB_OK);
	CHECK_STR(big, "18446744073709551615");
	cJSON_Delete(back);
	cJSON_Delete(root);
	free(text);
}

/* Every u64 hb_json_add_u64 writes reads back as itself: numbers digit for
 * digit up to 2^53 (cJSON's own printing rounded 16-digit ones), decimal
 * strings past it. */
static void u64_writes_round_trip(void)
{
	static const uint64_t v[] = {
		0, 1, UINT64_C(999999999999999), UINT64_C(1000000000000000), UINT64_C(1234567890123456),
		UINT64_C(9007199254740991), UINT64_C(9007199254740992), UINT64_C(9007199254740993),
		UINT64_C(18446744073709551615),
	};
	for (size_t i = 0; i < HB_ARRAY_LEN(v); i++) {
		cJSON *o = cJSON_CreateObject(), *back = NULL, *a;
		char *text = NULL;
		size_t len = 0;
		uint64_t got = 0;

		CHECK(o != NULL);
		if (!o)
			return;
		CHECK_EQ_INT(hb_json_add_u64(o, "v", v[i]), HB_OK);
		a = cJSON_AddArrayToObject(o, "a");
		CHECK(a && cJSON_AddItemToArray(a, hb_json_u64_item(v[i])));
		CHECK_EQ_INT(hb_json_render(o, false, &text, &len, NULL), HB_OK);
		CHECK_EQ_INT(hb_json_parse(text, len, "t", &back, NULL), HB_OK);
		if (back) {
			const cJSON *x = cJSON_GetObjectItemCaseSensitive(back, "v");
			const cJSON *y = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(back, "a"), 0);
			if (v[i] > HB_JSON_MAX_EXACT_U64) {
				char want[32];
				snprintf(want, sizeof(want), "%" PRIu64, v[i]);
				CHECK(cJSON_IsString(x) && !strcmp(x->valuestring, want));
				CHECK(cJSON_IsString(y) && !strcmp(y->valuestring, want));
			} else {
				CHECK_EQ_INT(hb_json_item_u64(x, "v", &got, NULL), HB_OK);
				CHECK_EQ_U64(got, v[i]);
				CHECK_EQ_INT(hb_json_item_u64(y, "a", &got, NULL), HB_OK);
				CHECK_EQ_U64(got, v[i]);
			}
		}
		cJSON_Delete(back);
		cJSON_Delete(o);
		free(text);
	}
}

/* Doubles render bit for bit: cJSON alone prints 15 significant digits when
 * they read back within a relative epsilon (2^53 came out as
 * 9.00719925474099e+15, found by fuzz_config: regressions/config/crash-ccdb58a3...),
 * and the caller's tree is left as it was. */
static void doubles_render_exactly(void)
{
	static const double v[] = {
		9007199254740992.0, 0.1, 1.0 / 3.0, 2.0 / 3.0, 1e300 / 7.0, -0.0,
		123456789012345.67, 4.9406564584124654e-324, 1.7976931348623157e308, 0.5, 3.0,
	};
	cJSON *a = cJSON_CreateArray(), *back = NULL;
	char *text = NULL;
	size_t len = 0;

	CHECK(a != NULL);
	if (!a)
		return;
	for (size_t i = 0; i < HB_ARRAY_LEN(v); i++)
		CHECK(cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i])));
	CHECK_EQ_INT(hb_json_render(a, false, &text, &len, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_parse(text, len, "t", &back, NULL), HB_OK);
	CHECK_EQ_INT(cJSON_GetArraySize(back), (int)HB_ARRAY_LEN(v));
	for (size_t i = 0; back && i < HB_ARRAY_LEN(v); i++) {
		const cJSON *x = cJSON_GetArrayItem(back, (int)i), *o = cJSON_GetArrayItem(a, (int)i);
		CHECK(cJSON_IsNumber(x) && !memcmp(&x->valuedouble, &v[i], sizeof(double)));
		CHECK(cJSON_IsNumber(o) && !memcmp(&o->valuedouble, &v[i], sizeof(double)));
	}
	/* a number that prints exactly in 15 digits keeps cJSON's own text */
	CHECK(strstr(text, ",0.1,") != NULL && strstr(text, ",0.5,3]") != NULL);
	cJSON_Delete(back);
	cJSON_Delete(a);
	free(text);
	/* alone in its tree, -0 keeps its sign too */
	a = cJSON_CreateArray();
	CHECK(a && cJSON_AddItemToArray(a, cJSON_CreateNumber(-0.0)));
	CHECK_EQ_INT(hb_json_render(a, false, &text, &len, NULL), HB_OK);
	CHECK_STR(text, "[-0]\n");
	cJSON_Delete(a);
	free(text);
}

HB_TEST_MAIN(T(integers_are_exact), T(u64_writes_round_trip), T(other_types), T(malformed_documents),
	     T(render_round_trip), T(doubles_render_exactly))
