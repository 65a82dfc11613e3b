/* jwt_fixtures.h — keys, JWKS files and tokens made by Node's crypto (tests/http/jwt_fixtures.mjs),
 * never by the code under test, for the tests of JWT verification.
 *
 *   if (!jwt_fixtures_make(test_tmp_path("jwt"))) ...       // once per process; later calls: true
 *   jwt_fixture_token("rs256");                             // a token by name ("" if unknown)
 *   jwt_fixture_path("jwks-a.json");                        // a file's path
 *   char *text = jwt_fixture_text("jwks-b.json"); free(text);  // a file's contents
 *   jwt_fixtures_free();                                    // at the end of main */
#ifndef MISSIVE_TEST_JWT_FIXTURES_H
#define MISSIVE_TEST_JWT_FIXTURES_H

#include <stdbool.h>

/* Runs the generator into dir (created), with the current time; false when node fails. */
bool jwt_fixtures_make(const char *dir);
const char *jwt_fixture_token(const char *name);
/* Path of a generated file (a static buffer, four in rotation). */
const char *jwt_fixture_path(const char *name);
/* The file's contents (malloc'd, NUL-terminated), or NULL. */
char *jwt_fixture_text(const char *name);
void jwt_fixtures_free(void);

#endif
