/* base_test.c — ids, crypto vectors (RFC 4231, RFC 4648), JSON helpers and validators. */
#include <stdint.h>

#include "base/strbuf.h"
#include "missive/base.h"
#include "test.h"

TEST(hmac_sha256_matches_rfc4231_cases_1_and_2) {
    unsigned char key[20], mac[32];
    char hex[65];
    memset(key, 0x0b, sizeof key);
    mv_hmac_sha256(key, 20, "Hi There", 8, mac);
    mv_hex(mac, 32, hex);
    CHECK_STR(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    mv_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, mac);
    mv_hex(mac, 32, hex);
    CHECK_STR(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(sha256_of_abc_is_the_fips_vector) {
    char hex[65];
    mv_sha256_hex("abc", 3, hex);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(base64url_matches_rfc4648_vectors_without_padding) {
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *out[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char enc[16];
        mv_b64url_encode(in[i], strlen(in[i]), enc);
        CHECK_STR(enc, out[i]);
        CHECK_INT(mv_b64url_len(strlen(in[i])), strlen(out[i]));
        unsigned char dec[16];
        size_t n = 99;
        CHECK(mv_b64url_decode(enc, strlen(enc), dec, &n));
        CHECK_INT(n, strlen(in[i]));
        CHECK(memcmp(dec, in[i], n) == 0);
    }
    unsigned char bytes[] = {0xfb, 0xff};
    char enc[8];
    mv_b64url_encode(bytes, 2, enc);
    CHECK_STR(enc, "-_8");
    unsigned char dec[8];
    size_t n;
    CHECK(!mv_b64url_decode("Zm9v=", 5, dec, &n));
    CHECK(!mv_b64url_decode("Z", 1, dec, &n));
    CHECK(!mv_b64url_decode("Zh", 2, dec, &n)); /* non-zero trailing bits */
    CHECK(!mv_b64url_decode("a+b/", 4, dec, &n));
}

TEST(constant_time_equal_compares_length_and_content) {
    CHECK(mv_ct_equal("abc", 3, "abc", 3));
    CHECK(!mv_ct_equal("abc", 3, "abd", 3));
    CHECK(!mv_ct_equal("abc", 3, "abcd", 4));
    CHECK(mv_ct_equal("", 0, "", 0));
}

TEST(message_ids_are_24_hex_unique_and_time_ordered) {
    char a[25], b[25];
    mv_id_message(a);
    mv_id_message(b);
    CHECK_INT(strlen(a), 24);
    CHECK(mv_valid_message_id(a));
    CHECK(strcmp(a, b) != 0);
    CHECK(memcmp(a, b, 8) <= 0);
    CHECK(memcmp(a + 8, b + 8, 10) == 0); /* same process bytes */
}

TEST(uuids_are_version_4) {
    char u[37], v[37];
    CHECK_CODE(mv_id_uuid(u, NULL), MV_OK, (mv_err *)NULL);
    mv_id_uuid(v, NULL);
    CHECK(mv_valid_uuid(u));
    CHECK(u[14] == '4');
    CHECK(strchr("89ab", u[19]) != NULL);
    CHECK(strcmp(u, v) != 0);
}

static int cmp_uuid(const void *a, const void *b) { return strcmp(a, b); }

TEST(uuids_drawn_from_the_per_thread_buffer_stay_distinct_across_refills) {
    static char ids[1000][37];
    for (int i = 0; i < 1000; i++) {
        REQUIRE(mv_id_uuid(ids[i], NULL) == MV_OK);
        CHECK(mv_valid_uuid(ids[i]) && ids[i][14] == '4' && strchr("89ab", ids[i][19]));
    }
    qsort(ids, 1000, sizeof ids[0], cmp_uuid);
    int dup = 0;
    for (int i = 1; i < 1000; i++)
        dup += strcmp(ids[i - 1], ids[i]) == 0;
    CHECK_INT(dup, 0);
}

/* A random JSON value: strings with every kind of character jansson escapes or passes through,
 * integers and reals at the edges of their formats, nested and empty containers. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static json_t *random_string(void) {
    static const char *const parts[] = {"a",
                                        "Z",
                                        " ",
                                        "\"",
                                        "\\",
                                        "/",
                                        "\b",
                                        "\f",
                                        "\n",
                                        "\r",
                                        "\t",
                                        "\x01",
                                        "\x1f",
                                        "\x7f",
                                        "\xc3\xa9",
                                        "\xe2\x82\xac",
                                        "\xf0\x9f\x98\x80",
                                        "\xef\xbf\xbf",
                                        "{}",
                                        "u00"};
    char buf[256];
    size_t n = 0, k = rnd() % 12;
    for (size_t i = 0; i < k; i++) {
        const char *p = parts[rnd() % (sizeof parts / sizeof *parts)];
        size_t l = strlen(p);
        memcpy(buf + n, p, l);
        n += l;
    }
    if (rnd() % 8 == 0) buf[n++] = '\0'; /* an embedded NUL */
    return json_stringn(buf, n);
}

static json_t *random_value(int depth) {
    static const double reals[] = {0.0,
                                   -0.0,
                                   0.1,
                                   1.5,
                                   123.0,
                                   1e21,
                                   1e-7,
                                   5e-324,
                                   1.7976931348623157e308,
                                   -2.5e-300,
                                   3.141592653589793,
                                   100.0,
                                   1e16,
                                   12345678901234567890.0};
    switch (rnd() % (depth > 4 ? 6 : 8)) {
    case 0: return json_null();
    case 1: return rnd() % 2 ? json_true() : json_false();
    case 2: {
        static const json_int_t ints[] = {0, -1, 42, INT64_MAX, INT64_MIN, 1000000000000LL};
        return json_integer(ints[rnd() % 6]);
    }
    case 3: return json_real(reals[rnd() % (sizeof reals / sizeof *reals)]);
    case 4:
    case 5: return random_string();
    case 6: {
        json_t *a = json_array();
        for (size_t i = 0, n = rnd() % 5; i < n; i++)
            json_array_append_new(a, random_value(depth + 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        size_t n = depth <= 1 && rnd() % 8 == 0 ? 24 : rnd() % 6; /* now and then > 16 keys */
        for (size_t i = 0; i < n; i++) {
            json_t *k = random_string();
            json_object_setn_new(o, json_string_value(k), json_string_length(k),
                                 random_value(depth + 1));
            json_decref(k);
        }
        return o;
    }
    }
}

TEST(the_compact_and_canonical_writers_write_the_bytes_jansson_writes) {
    for (int i = 0; i < 3000; i++) {
        json_t *v = random_value(0);
        char *ours = mv_json_compact(v);
        char *theirs = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        REQUIRE(ours && theirs);
        CHECK_STR(ours, theirs);
        mv_strbuf counted = {.count_only = true}; /* the length, and nothing stored */
        CHECK(mv_json_write(&counted, v));
        CHECK_INT((long long)counted.len, (long long)strlen(theirs));
        CHECK(counted.data == NULL);
        free(ours);
        free(theirs);
        ours = mv_json_canonical(v);
        theirs = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        REQUIRE(ours && theirs);
        CHECK_STR(ours, theirs);
        free(ours);
        free(theirs);
        json_decref(v);
    }
    /* a string that is not UTF-8 fails both, also inside a container */
    json_t *bad = json_pack("{s:[i,o]}", "k", 1, json_stringn_nocheck("a\xff", 2));
    CHECK(json_dumps(bad, JSON_COMPACT | JSON_ENCODE_ANY) == NULL);
    CHECK(mv_json_compact(bad) == NULL);
    json_decref(bad);
    json_t *trunc = json_stringn_nocheck("\xe2\x82", 2);
    CHECK(json_dumps(trunc, JSON_COMPACT | JSON_ENCODE_ANY) == NULL);
    CHECK(mv_json_compact(trunc) == NULL);
    json_decref(trunc);
}

TEST(json_parse_names_line_and_column) {
    json_t *v;
    mv_err err = {0};
    CHECK_CODE(mv_json_parse("{\n  \"a\": tru }", 14, &v, &err), MV_INVALID_JSON, &err);
    CHECK(strstr(err.message, "line 2") != NULL);
    CHECK(strstr(err.message, "column") != NULL);
    CHECK_CODE(mv_json_parse("{\"a\":1} x", 9, &v, &err), MV_INVALID_JSON, &err);
    CHECK_CODE(mv_json_parse("{\"a\":1,\"a\":2}", 13, &v, &err), MV_INVALID_JSON, &err);
    CHECK_CODE(mv_json_parse("\"\xff\"", 3, &v, &err), MV_INVALID_JSON, &err);
    CHECK_CODE(mv_json_parse("[1,2]", 5, &v, &err), MV_OK, &err);
    json_decref(v);
}

TEST(canonical_json_sorts_keys_so_fingerprints_ignore_order) {
    json_t *a = json_loads("{\"b\": 1, \"a\": {\"y\": \"x\", \"x\": [1, 2]}}", 0, NULL);
    json_t *b = json_loads("{\"a\": {\"x\": [1, 2], \"y\": \"x\"}, \"b\": 1}", 0, NULL);
    char *ca = mv_json_canonical(a);
    CHECK_STR(ca, "{\"a\":{\"x\":[1,2],\"y\":\"x\"},\"b\":1}");
    char fa[65], fb[65];
    mv_json_fingerprint(a, fa);
    mv_json_fingerprint(b, fb);
    CHECK_STR(fa, fb);
    free(ca);
    json_decref(a);
    json_decref(b);
}

TEST(json_path_walks_objects_and_arrays) {
    json_t *v = json_pack("{s:{s:[s,{s:i}]}}", "a", "b", "x", "c", 7);
    CHECK_INT(json_integer_value(mv_json_path(v, "a.b.1.c")), 7);
    CHECK_STR(json_string_value(mv_json_path(v, "a.b.0")), "x");
    CHECK(mv_json_path(v, "a.missing.c") == NULL);
    CHECK(mv_json_path(v, "a.b.9") == NULL);
    json_decref(v);
}

TEST(validators_accept_exactly_their_patterns) {
    CHECK(mv_valid_token("abc!~", 5));
    CHECK(!mv_valid_token("abc!~", 4));
    CHECK(!mv_valid_token("a b", 10));
    CHECK(!mv_valid_token("", 10));
    CHECK(!mv_valid_token("\n", 10));
    CHECK(mv_valid_template_cd("booking.request_v2-x"));
    CHECK(!mv_valid_template_cd("bad!"));
    char long129[130];
    memset(long129, 'a', 129);
    long129[129] = 0;
    CHECK(!mv_valid_template_cd(long129));
    long129[128] = 0;
    CHECK(mv_valid_template_cd(long129));
    CHECK(mv_valid_action_cd("accept_1-x"));
    CHECK(!mv_valid_action_cd("bad.action"));
    const char *caps_ok[] = {"payments.charge", "db.write", "a.1", "a-b.c", "orders.checkout"};
    const char *caps_bad[] = {"Payments", "9a", "a..b", "a_b", "a-", ".a", ""};
    for (int i = 0; i < 5; i++)
        CHECK(mv_valid_capability(caps_ok[i]));
    for (int i = 0; i < 7; i++)
        CHECK(!mv_valid_capability(caps_bad[i]));
    CHECK(mv_valid_error_code("execution_failed"));
    CHECK(!mv_valid_error_code("Execution"));
    CHECK(!mv_valid_error_code("9x"));
    char digest[65];
    memset(digest, 'a', 64);
    digest[64] = 0;
    CHECK(mv_valid_digest(digest));
    digest[0] = 'A';
    CHECK(!mv_valid_digest(digest));
    CHECK(mv_valid_message_id("507f1f77bcf86cd799439011"));
    CHECK(!mv_valid_message_id("not-an-object-id"));
    CHECK(mv_valid_uuid("123e4567-e89b-42d3-a456-426614174000"));
    CHECK(!mv_valid_uuid("123e4567e89b42d3a456426614174000"));
}

TEST(error_table_maps_codes_to_names_and_statuses) {
    CHECK_STR(mv_code_name(MV_ACTION_CONFLICT), "action_conflict");
    CHECK_INT(mv_code_http_status(MV_ACTION_CONFLICT), 409);
    CHECK_INT(mv_code_http_status(MV_MESSAGE_ARCHIVED), 410);
    CHECK_INT(mv_code_http_status(MV_PAYLOAD_TOO_LARGE), 413);
    CHECK_INT(mv_code_http_status(MV_CLIENT_REQUEST_MISMATCH), 422);
    CHECK_STR(mv_code_name(MV_NO_MEMORY), "internal");
    CHECK_INT(mv_code_http_status((mv_code)9999), 500);
    mv_err err = {0};
    CHECK_CODE(mv_err_set(&err, MV_NOT_FOUND, "x %d", 5), MV_NOT_FOUND, &err);
    CHECK_STR(err.message, "x 5");
    mv_err_prefix(&err, "file.json");
    CHECK_STR(err.message, "file.json: x 5");
}

TEST(manual_clock_moves_when_told) {
    int64_t t = 1000;
    mv_clock c = mv_manual_clock(&t);
    CHECK_INT(mv_clock_now(&c), 1000);
    t += 500;
    CHECK_INT(mv_clock_now(&c), 1500);
    CHECK(mv_clock_now(NULL) > 1700000000000LL);
}

int main(void) {
    return RUN_TESTS(hmac_sha256_matches_rfc4231_cases_1_and_2, sha256_of_abc_is_the_fips_vector,
                     base64url_matches_rfc4648_vectors_without_padding,
                     constant_time_equal_compares_length_and_content,
                     message_ids_are_24_hex_unique_and_time_ordered, uuids_are_version_4,
                     uuids_drawn_from_the_per_thread_buffer_stay_distinct_across_refills,
                     the_compact_and_canonical_writers_write_the_bytes_jansson_writes,
                     json_parse_names_line_and_column,
                     canonical_json_sorts_keys_so_fingerprints_ignore_order,
                     json_path_walks_objects_and_arrays, validators_accept_exactly_their_patterns,
                     error_table_maps_codes_to_names_and_statuses, manual_clock_moves_when_told);
}
