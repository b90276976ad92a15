/* Unit tests: SHA-256 against the FIPS 180-2 example vectors. */
#include "hb_base.h"
#include "harness.h"
#include "hb_err.h"
#include "hb_sha256.h"

static void hex_of(const void *data, size_t len, char out[HB_SHA256_HEX])
{
	uint8_t d[HB_SHA256_BYTES];
	hb_sha256_buf(data, len, d);
	hb_hex_encode(d, sizeof(d), out);
}

static void known_vectors(void)
{
	char hex[HB_SHA256_HEX];

	CHECK_EQ_INT(hb_crypto_init(), HB_OK);
	hex_of("", 0, hex);
	CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	hex_of("abc", 3, hex);
	CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
	CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

/* One million 'a' fed in uneven pieces: streaming must equal one shot. */
static void streaming_million_a(void)
{
	static char block[997];
	struct hb_sha256 h;
	uint8_t d[HB_SHA256_BYTES];
	char hex[HB_SHA256_HEX];
	size_t left = 1000000;

	memset(block, 'a', sizeof(block));
	hb_sha256_init(&h);
	while (left) {
		size_t n = left < sizeof(block) ? left : sizeof(block);
		hb_sha256_update(&h, block, n);
		left -= n;
	}
	hb_sha256_final(&h, d);
	hb_hex_encode(d, sizeof(d), hex);
	CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void hex_round_trip(void)
{
	uint8_t in[4] = {0x00, 0xab, 0x7f, 0xff}, out[4] = {0};
	char hex[9];

	hb_hex_encode(in, 4, hex);
	CHECK_STR(hex, "00ab7fff");
	CHECK_EQ_INT(hb_hex_decode("00AB7fff", out, 4), HB_OK);
	CHECK(memcmp(in, out, 4) == 0);
	CHECK_EQ_INT(hb_hex_decode("00ab7ff", out, 4), HB_ERR_FORMAT);
	CHECK_EQ_INT(hb_hex_decode("00ab7ffg", out, 4), HB_ERR_FORMAT);
	CHECK_EQ_INT(hb_hex_decode("00ab7fff00", out, 4), HB_ERR_FORMAT);
}

HB_TEST_MAIN(T(known_vectors), T(streaming_million_a), T(hex_round_trip))
