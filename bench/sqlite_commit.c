/* sqlite_commit.c — the baseline of the write benchmarks: how many durable single-row INSERT
 * transactions per second SQLite itself commits on this filesystem (WAL, synchronous=FULL, one
 * connection, one row per BEGIN IMMEDIATE … COMMIT), i.e. the fsync rate. Anything missived
 * does per write beyond this is measured against it; group commit is how it can exceed it.
 *
 * usage: sqlite_commit PATH [SECONDS]   (PATH is recreated; prints one JSON line) */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int fail(sqlite3 *db, const char *what) {
    fprintf(stderr, "sqlite_commit: %s: %s\n", what, db ? sqlite3_errmsg(db) : "cannot open");
    sqlite3_close(db);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs("usage: sqlite_commit PATH [SECONDS]\n", stderr);
        return 2;
    }
    const char *path = argv[1];
    double seconds = argc > 2 ? atof(argv[2]) : 5;
    char side[1024];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);

    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) return fail(db, "open");
    if (sqlite3_exec(db,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; "
                     "CREATE TABLE t (id INTEGER PRIMARY KEY, at BIGINT NOT NULL, body TEXT NOT NULL)",
                     NULL, NULL, NULL) != SQLITE_OK)
        return fail(db, "setup");
    sqlite3_stmt *ins = NULL, *begin = NULL, *commit = NULL;
    if (sqlite3_prepare_v2(db, "INSERT INTO t (at, body) VALUES (?, ?)", -1, &ins, NULL) ||
        sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, NULL) ||
        sqlite3_prepare_v2(db, "COMMIT", -1, &commit, NULL))
        return fail(db, "prepare");

    size_t cap = 1 << 16, n = 0;
    double *lat = malloc(cap * sizeof *lat);
    static const char BODY[] = "{\"title\": \"a benchmark row of about the size of a message\"}";
    double t0 = now_s(), end = t0 + seconds, t;
    while ((t = now_s()) < end) {
        sqlite3_bind_int64(ins, 1, (sqlite3_int64)n);
        sqlite3_bind_text(ins, 2, BODY, -1, SQLITE_STATIC);
        if (sqlite3_step(begin) != SQLITE_DONE || sqlite3_step(ins) != SQLITE_DONE ||
            sqlite3_step(commit) != SQLITE_DONE)
            return fail(db, "insert");
        sqlite3_reset(begin);
        sqlite3_reset(ins);
        sqlite3_reset(commit);
        if (n == cap) lat = realloc(lat, (cap *= 2) * sizeof *lat);
        lat[n++] = now_s() - t;
    }
    double elapsed = now_s() - t0;
    qsort(lat, n, sizeof *lat, cmp_double);
    printf("{\"bench\": \"sqlite-commit\", \"seconds\": %.2f, \"ops\": %zu, \"errors\": 0, "
           "\"rate\": %.1f, \"p50_ms\": %.3f, \"p99_ms\": %.3f}\n",
           elapsed, n, (double)n / elapsed, n ? lat[n / 2] * 1e3 : 0,
           n ? lat[(size_t)(0.99 * (double)(n - 1))] * 1e3 : 0);
    free(lat);
    sqlite3_finalize(ins);
    sqlite3_finalize(begin);
    sqlite3_finalize(commit);
    sqlite3_close(db);
    return n ? 0 : 1;
}
