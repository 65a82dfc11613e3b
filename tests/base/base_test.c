/* base_test.c — ids, crypto vectors (RFC 4231, RFC 4648), JSON helpers and validators. */
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
                     json_parse_names_line_and_column,
                     canonical_json_sorts_keys_so_fingerprints_ignore_order,
                     json_path_walks_objects_and_arrays, validators_accept_exactly_their_patterns,
                     error_table_maps_codes_to_names_and_statuses, manual_clock_moves_when_told);
}
