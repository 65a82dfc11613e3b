/* fixture.h — what every durable test needs: a fresh migrated SQLite file store and a manual
 * clock. Header-only so each test binary stays self-contained. */
#ifndef MISSIVE_TESTS_DURABLE_FIXTURE_H
#define MISSIVE_TESTS_DURABLE_FIXTURE_H

#include "missive/base.h"
#include "missive/durable.h"
#include "missive/store.h"
#include "test.h"

static inline mv_store *fixture_store(const char *name, char *url_out, size_t url_size) {
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", test_tmp_path(name));
    if (url_out) snprintf(url_out, url_size, "%s", url);
    mv_store *s = NULL;
    mv_err err = {0};
    if (mv_store_open(url, NULL, &s, &err) != MV_OK || mv_store_migrate(s, NULL, &err) != MV_OK) {
        fprintf(stderr, "fixture store: %s\n", err.message);
        mv_store_close(s);
        return NULL;
    }
    return s;
}

#endif
