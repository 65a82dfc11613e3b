/* seed.c — fills a store with visible messages for one user, fast, for the list-depth benchmark.
 *
 * Messages are built and inserted by the library's own document code (doc_new/doc_insert), so the
 * rows and index entries are exactly what POST /messages/new writes, but many per transaction
 * with synchronous=OFF. Message i (FROM ≤ i < TO) goes from "bench-seeder" to USER with
 * createdAt = 1700000000000 + i, so seeding in several calls with growing ranges appends newer
 * messages and the whole set stays strictly ordered.
 *
 * usage: seed STORE_URL USER FROM TO      (prints one JSON line: rows and seconds) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "message/service.h"

#define BATCH 50000
#define T0 INT64_C(1700000000000)

typedef struct {
    const char *user;
    long from, to;
} seed_range;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static mv_code seed_tx(mv_db *db, void *ctx, mv_err *err) {
    seed_range *r = ctx;
    for (long i = r->from; i < r->to; i++) {
        json_t *doc = doc_new("request", "bench-note", T0 + i);
        if (!doc) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        json_object_set_new(doc, "fromUser", json_string("bench-seeder"));
        json_object_set_new(doc, "toUser", json_string(r->user));
        json_object_set_new(doc, "senderContent",
                            json_pack("{s:s,s:s,s:s}", "title", "Note sent", "short", "",
                                      "long", "You sent a benchmark note."));
        json_object_set_new(doc, "receiverContent",
                            json_pack("{s:s,s:s,s:s}", "title", "Note from bench-seeder", "short",
                                      "", "long", "A benchmark note of realistic size."));
        json_object_set_new(doc, "payload",
                            json_pack("{s:s,s:s,s:I}", "to", r->user, "from", "bench-seeder", "n",
                                      (json_int_t)i));
        mv_code rc = doc_insert(db, doc, NULL, NULL, -1, err);
        json_decref(doc);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fputs("usage: seed STORE_URL USER FROM TO\n", stderr);
        return 2;
    }
    long from = atol(argv[3]), to = atol(argv[4]);
    mv_store_options so = {.synchronous = "OFF", .pool_size = 1};
    mv_store *store = NULL;
    mv_err err = {0};
    double t0 = now_s();
    mv_code rc = mv_store_open(argv[1], &so, &store, &err);
    if (rc == MV_OK) rc = mv_store_migrate(store, NULL, &err);
    for (long at = from; rc == MV_OK && at < to; at += BATCH) {
        seed_range r = {argv[2], at, at + BATCH < to ? at + BATCH : to};
        rc = mv_store_write(store, seed_tx, &r, &err);
    }
    mv_store_close(store);
    if (rc != MV_OK) {
        fprintf(stderr, "seed: %s\n", err.message);
        return 1;
    }
    printf("{\"bench\": \"seed\", \"rows\": %ld, \"seconds\": %.2f}\n", to - from, now_s() - t0);
    return 0;
}
