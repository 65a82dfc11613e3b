/* changes_test.c — the change log's ordering guarantees under real concurrency, on both stores
 * (message/changes.c): writers in threads and in another process commit after random delays,
 * some roll back, while readers in two processes poll mv_changes_read from their last id; every
 * reader must end with every committed change exactly once, ids strictly increasing, the same id
 * for the same change in every process, and each message's changes in the order they were made.
 * Also: a reader never passes a change whose transaction is still open in a way that would skip it
 * once it commits (nor does that transaction hold back the others on PostgreSQL); migration 9
 * keeps the event ids clients already hold; retention takes changes no reader has seen yet; a
 * backlog larger than one sequencer batch comes out whole and in order. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "message/inbox_internal.h"
#include "missive/inbox.h"
#include "store/driver.h"

/* ---- writers ---------------------------------------------------------------------------- */

#define WRITERS 6      /* threads of the main process */
#define MESSAGES 4     /* per writer */
#define STEPS 5        /* changes per message, each its own transaction, in order */
#define CHILD_WRITER 9 /* the writer number of the other process */
#define CREATORS 2     /* threads creating and marking real messages */
#define CREATES 8      /* per creator */
#define TOTAL ((WRITERS + 1) * MESSAGES * STEPS + CREATORS * CREATES * 2)

typedef struct {
    const char *message_id, *token;
    int delay_us;
    bool fail;
} change_arg;

/* One change as its own transaction: the row, then a pause before the commit (or a rollback). */
static mv_code change_tx(mv_db *db, void *ctx, mv_err *err) {
    change_arg *a = ctx;
    mv_code rc =
        mv__change_add_tx(db, "default", a->message_id, MV_CHANGE_VIEWER, a->token, 1, err);
    if (a->delay_us) usleep((useconds_t)a->delay_us);
    if (rc == MV_OK && a->fail) return mv_err_set(err, MV_ACTION_CONFLICT, "rolled back");
    return rc;
}

typedef struct {
    mv_store *store;
    int index, failures;
} writer;

/* Message "w<index>m<m>" gets steps "0".."4" in order; about one attempt in six is rolled back
 * first (token "x<step>", which no reader may ever see). */
static void *write_changes(void *arg) {
    writer *w = arg;
    unsigned seed = (unsigned)w->index * 7919u + 17u;
    for (int m = 0; m < MESSAGES; m++) {
        char id[25];
        snprintf(id, sizeof id, "w%dm%d", w->index, m);
        for (int s = 0; s < STEPS; s++) {
            char token[16];
            bool fail = rand_r(&seed) % 6 == 0;
            snprintf(token, sizeof token, "%s%d", fail ? "x" : "", s);
            change_arg a = {id, token, (int)(rand_r(&seed) % 3000), fail};
            mv_code rc = mv_store_write(w->store, change_tx, &a, NULL);
            if (rc != (fail ? MV_ACTION_CONFLICT : MV_OK)) w->failures++;
            if (fail) s--; /* the step again, committed this time */
        }
    }
    return NULL;
}

typedef struct {
    fixture *f;
    int index, failures;
    char ids[CREATES][25];
} creator;

/* Real service calls: create a message to bob, then bob reads it (created, then viewer). */
static void *create_and_mark(void *arg) {
    creator *c = arg;
    mv_user ana = {.id = "ana"}, bob = {.id = "bob"};
    for (int i = 0; i < CREATES; i++) {
        json_t *payload = json_pack("{s:s,s:s}", "name", "W", "toUser", "bob");
        mv_create_request req = {.template_cd = "svc-test", .user = &ana, .payload = payload};
        json_t *m = NULL, *marked = NULL;
        if (mv_message_create(c->f->svc, &req, &m, NULL, NULL) != MV_OK) c->failures++;
        json_decref(payload);
        const char *id = mv_json_str(json_array_get(m, 0), "id");
        mv_strlcpy(c->ids[i], id ? id : "", sizeof c->ids[i]);
        if (!id || mv_message_mark(c->f->svc, id, &bob, MV_MARK_READ, &marked, NULL) != MV_OK)
            c->failures++;
        json_decref(marked);
        json_decref(m);
    }
    return NULL;
}

/* ---- readers ---------------------------------------------------------------------------- */

typedef struct {
    int64_t id;
    char key[300]; /* message id, kind and viewer: what the change was */
} seen_change;

typedef struct {
    mv_store *store;
    int64_t cursor;
    seen_change *got;
    int n, errors, out_of_order;
    atomic_bool stop; /* set once every writer is done: drain, then end */
} reader;

static const char *const KINDS[] = {"created", "updated", "viewer"};

/* Polls mv_changes_read from its last id, as a stream does, until stopped and caught up (or it
 * holds more than every change there is: a duplicate). */
static void *read_changes(void *arg) {
    reader *r = arg;
    mv_change page[16]; /* small pages: many reads while the writers run */
    int64_t deadline = mv_now_ms() + 60000;
    while (r->n <= TOTAL && mv_now_ms() < deadline) {
        bool stopping = atomic_load(&r->stop);
        int n = 0;
        mv_err err = {0};
        if (mv_changes_read(r->store, r->cursor, page, 16, &n, &err) != MV_OK) {
            r->errors++;
            n = 0;
        }
        for (int i = 0; i < n && r->n <= TOTAL; i++) {
            if (page[i].id <= r->cursor) r->out_of_order++;
            r->cursor = page[i].id;
            seen_change *s = &r->got[r->n++];
            s->id = page[i].id;
            snprintf(s->key, sizeof s->key, "%s/%s/%s", page[i].message_id, KINDS[page[i].kind],
                     page[i].viewer_id);
        }
        if (n == 0 && stopping && r->n >= TOTAL) break;
        if (n == 0) mv_sleep_ms(1);
    }
    return NULL;
}

/* The other process: one writer and one reader on a store of its own; the reader's list goes to
 * path as "id key" lines. Exit status 0 when all went through. */
static int child_main(const char *url, const char *path) {
    mv_store *store = NULL;
    mv_err err = {0};
    if (mv_store_open(url, NULL, &store, &err) != MV_OK) return 2;
    writer w = {.store = store, .index = CHILD_WRITER};
    reader r = {.store = store, .got = calloc(TOTAL + 1, sizeof(seen_change))};
    pthread_t rt;
    pthread_create(&rt, NULL, read_changes, &r);
    write_changes(&w);
    atomic_store(&r.stop, true);
    pthread_join(rt, NULL);
    FILE *out = fopen(path, "w");
    for (int i = 0; out && i < r.n; i++)
        fprintf(out, "%lld %s\n", (long long)r.got[i].id, r.got[i].key);
    int ok = out && fclose(out) == 0 && w.failures == 0 && r.errors == 0;
    free(r.got);
    mv_store_close(store);
    return ok ? 0 : 1;
}

static int find_key(const reader *r, const char *key) {
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->got[i].key, key) == 0) return i;
    return -1;
}

/* Every change exactly once, none rolled back, each message's steps in order. */
static void check_complete(const reader *r) {
    CHECK_INT(r->n, TOTAL);
    CHECK_INT(r->errors, 0);
    CHECK_INT(r->out_of_order, 0);
    for (int i = 0; i < r->n; i++) {
        CHECK(strstr(r->got[i].key, "/viewer/x") == NULL); /* a rolled-back change */
        for (int k = i + 1; k < r->n; k++)
            if (strcmp(r->got[i].key, r->got[k].key) == 0)
                test_failf_(__FILE__, __LINE__, "twice: %s", r->got[i].key);
    }
    for (int w = 0; w <= WRITERS; w++)
        for (int m = 0; m < MESSAGES; m++) {
            int prev = -1;
            for (int s = 0; s < STEPS; s++) {
                char key[64];
                snprintf(key, sizeof key, "w%dm%d/viewer/%d", w == WRITERS ? CHILD_WRITER : w, m,
                         s);
                int at = find_key(r, key);
                if (at < 0 || at < prev) test_failf_(__FILE__, __LINE__, "%s at %d", key, at);
                prev = at;
            }
        }
}

static void check_created_before_read(const reader *r, const creator *c) {
    for (int i = 0; i < CREATES; i++) {
        char created[300], viewed[300];
        snprintf(created, sizeof created, "%s/created/", c->ids[i]);
        snprintf(viewed, sizeof viewed, "%s/viewer/bob", c->ids[i]);
        int a = find_key(r, created), b = find_key(r, viewed);
        CHECK(a >= 0 && b > a);
    }
}

STORE_TEST(writers_in_threads_and_another_process_reach_every_reader_once_in_order) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "changes_race"));
    int64_t start = 0;
    mv_err err = {0};
    CHECK_CODE(mv_changes_latest(f.store, &start, NULL, &err), MV_OK, &err);
    const char *path = test_tmp_path(strcmp(kind, "postgres") == 0 ? "child-pg.txt" : "child.txt");
    pid_t pid = fork(); /* before any thread of this process starts */
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(child_main(f.url, path));

    reader r = {.store = f.store, .cursor = start, .got = calloc(TOTAL + 1, sizeof(seen_change))};
    pthread_t rt, wt[WRITERS], ct[CREATORS];
    writer w[WRITERS];
    creator c[CREATORS];
    pthread_create(&rt, NULL, read_changes, &r);
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer){.store = f.store, .index = i};
        pthread_create(&wt[i], NULL, write_changes, &w[i]);
    }
    for (int i = 0; i < CREATORS; i++) {
        c[i] = (creator){.f = &f, .index = i};
        pthread_create(&ct[i], NULL, create_and_mark, &c[i]);
    }
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(wt[i], NULL);
        CHECK_INT(w[i].failures, 0);
    }
    for (int i = 0; i < CREATORS; i++) {
        pthread_join(ct[i], NULL);
        CHECK_INT(c[i].failures, 0);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    atomic_store(&r.stop, true);
    pthread_join(rt, NULL);

    check_complete(&r);
    for (int i = 0; i < CREATORS; i++)
        check_created_before_read(&r, &c[i]);
    /* The other process's reader got the same changes under the same ids, in the same order. */
    FILE *in = fopen(path, "r");
    CHECK(in != NULL);
    int lines = 0;
    char line[400], want[400];
    while (in && fgets(line, sizeof line, in)) {
        if (lines < r.n) {
            snprintf(want, sizeof want, "%lld %s\n", (long long)r.got[lines].id, r.got[lines].key);
            if (strcmp(line, want) != 0)
                test_failf_(__FILE__, __LINE__, "line %d: %s, here %s", lines, line, want);
        }
        lines++;
    }
    if (in) fclose(in);
    unlink(path);
    CHECK_INT(lines, r.n);
    free(r.got);
    fixture_close(&f);
}

/* ---- a transaction held open --------------------------------------------------------------- */

typedef struct {
    mv_store *store;
    const char *message_id;
    bool fail;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool inserted, release, done;
    mv_code rc;
} held;

static mv_code held_tx(mv_db *db, void *ctx, mv_err *err) {
    held *h = ctx;
    mv_code rc = mv__change_add_tx(db, "default", h->message_id, MV_CHANGE_UPDATED, NULL, 1, err);
    pthread_mutex_lock(&h->mu);
    h->inserted = true;
    pthread_cond_broadcast(&h->cv);
    while (!h->release)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    if (rc == MV_OK && h->fail) return mv_err_set(err, MV_ACTION_CONFLICT, "rolled back");
    return rc;
}

static void *run_held(void *arg) {
    held *h = arg;
    mv_code rc = mv_store_write(h->store, held_tx, h, NULL);
    pthread_mutex_lock(&h->mu);
    h->rc = rc;
    h->done = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void held_init(held *h, mv_store *store, const char *id, bool fail) {
    *h = (held){.store = store, .message_id = id, .fail = fail};
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
}

/* Waits up to ms for *flag (under h->mu); returns it. */
static bool held_wait(held *h, bool *flag, int ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&h->mu);
    while (!*flag && pthread_cond_timedwait(&h->cv, &h->mu, &until) == 0) {
    }
    bool v = *flag;
    pthread_mutex_unlock(&h->mu);
    return v;
}

static void held_release(held *h) {
    pthread_mutex_lock(&h->mu);
    h->release = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* Reads everything after *cursor (a few polls: the sequencer may be busy in another caller). */
static int read_after(mv_store *store, int64_t *cursor, mv_change *out, int max) {
    int total = 0;
    for (int poll = 0; poll < 20 && total < max; poll++) {
        int n = 0;
        mv_err err = {0};
        CHECK_CODE(mv_changes_read(store, *cursor, out + total, max - total, &n, &err), MV_OK,
                   &err);
        for (int i = 0; i < n; i++) {
            CHECK(out[total + i].id > *cursor);
            *cursor = out[total + i].id;
        }
        total += n;
        if (n == 0) mv_sleep_ms(5);
    }
    return total;
}

STORE_TEST(a_reader_never_passes_a_change_whose_transaction_is_still_open) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "changes_held"));
    bool pg = strcmp(kind, "postgres") == 0;
    int64_t cursor = 0;
    mv_err err = {0};
    CHECK_CODE(mv_changes_latest(f.store, &cursor, NULL, &err), MV_OK, &err);
    /* A inserts its change and keeps its transaction open; so does C, which will roll back. */
    held a, b, c;
    held_init(&a, f.store, "a", false);
    held_init(&c, f.store, "c", true);
    held_init(&b, f.store, "b", false);
    b.release = true; /* B commits as soon as it can */
    pthread_t ta, tb, tc;
    pthread_create(&ta, NULL, run_held, &a);
    CHECK(held_wait(&a, &a.inserted, 5000));
    if (pg) {
        pthread_create(&tc, NULL, run_held, &c);
        CHECK(held_wait(&c, &c.inserted, 5000));
    }
    pthread_create(&tb, NULL, run_held, &b);
    mv_change got[8];
    int n;
    if (pg) {
        /* B commits after A and C drew their ids: the reader gets B and moves past it. */
        CHECK(held_wait(&b, &b.done, 5000));
        CHECK_INT(b.rc, MV_OK);
        n = read_after(f.store, &cursor, got, 8);
        CHECK_INT(n, 1);
        CHECK_STR(got[0].message_id, "b");
        int64_t latest = 0;
        CHECK_CODE(mv_changes_latest(f.store, &latest, NULL, &err), MV_OK, &err);
        CHECK_INT(latest, cursor);
    } else {
        /* One writer at a time: B waits for A, and the reader sees neither yet. */
        CHECK(!held_wait(&b, &b.done, 100));
        n = read_after(f.store, &cursor, got, 8);
        CHECK_INT(n, 0);
    }
    held_release(&a);
    pthread_join(ta, NULL);
    CHECK_INT(a.rc, MV_OK);
    /* A commits now: a reader resuming from where it stopped still gets it, exactly once. */
    int more = read_after(f.store, &cursor, got + n, 8 - n);
    if (pg) {
        CHECK_INT(more, 1);
        CHECK_STR(got[1].message_id, "a");
        held_release(&c);
        pthread_join(tc, NULL);
        CHECK_INT(c.rc, MV_ACTION_CONFLICT);
        CHECK_INT(read_after(f.store, &cursor, got + 2, 6), 0); /* C never appears */
    } else {
        pthread_join(tb, NULL);
        CHECK_INT(more, 2);
        CHECK_STR(got[0].message_id, "a");
        CHECK_STR(got[1].message_id, "b");
    }
    if (pg) pthread_join(tb, NULL);
    fixture_close(&f);
}

/* ---- migration 9 and retention ------------------------------------------------------------- */

static const char SQL_PG_UNDO_9[] = "ALTER TABLE stream_events DROP COLUMN seq";
static const char SQL_IDS[] = "SELECT id FROM stream_events ORDER BY id";
static const char SQL_PRUNE_FIRST[] =
    "DELETE FROM stream_events WHERE id = (SELECT MIN(id) FROM stream_events)";
static const char SQL_MARK_PRUNED[] = "UPDATE stream_events_pruned SET upto = ? WHERE one = 1";

typedef struct {
    int64_t ids[8];
    int n;
} ids_arg;

/* The change log as version 8 left it: no seq column (PostgreSQL), and four changes written the
 * old way, the first already removed by retention. */
static mv_code back_to_8_tx(mv_db *db, void *ctx, mv_err *err) {
    ids_arg *a = ctx;
    mv_code rc = MV_OK;
    if (mv_db_kind(db) == MV_STORE_POSTGRES) rc = mv_db_execf(db, SQL_PG_UNDO_9, NULL, err, "");
    for (int i = 0; i < 4 && rc == MV_OK; i++)
        rc = mv__change_add_tx(db, "default", "old", MV_CHANGE_UPDATED, NULL, 1, err);
    mv_stmt *st;
    if (rc == MV_OK && (rc = mv_db_prepare(db, SQL_IDS, &st, err)) == MV_OK) {
        while (a->n < 8 && mv_stmt_step(st, err) == 1)
            a->ids[a->n++] = mv_stmt_int64(st, 0);
        mv_stmt_done(st);
    }
    if (rc == MV_OK) rc = mv_db_execf(db, SQL_PRUNE_FIRST, NULL, err, "");
    if (rc == MV_OK) rc = mv_db_execf(db, SQL_MARK_PRUNED, NULL, err, "i", a->ids[0]);
    return rc;
}

extern const mv_migration mv_migration_changes;

/* Later migrations stay applied, so migration 9 is replayed by itself, as it runs on a store
 * that already holds changes. */
static mv_code replay_migration_9_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    return mv_db_exec(db,
                      mv_db_kind(db) == MV_STORE_POSTGRES ? mv_migration_changes.postgres_sql
                                                          : mv_migration_changes.sqlite_sql,
                      err);
}

static mv_code add_change_tx(mv_db *db, void *ctx, mv_err *err) {
    return mv__change_add_tx(db, "default", ctx, MV_CHANGE_UPDATED, NULL, 1, err);
}

STORE_TEST(migration_9_keeps_the_event_ids_clients_hold_and_numbers_new_changes_above_them) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "changes_migrate"));
    ids_arg old = {0};
    mv_err err = {0};
    CHECK_CODE(mv_store_write(f.store, back_to_8_tx, &old, &err), MV_OK, &err);
    CHECK_INT(old.n, 4);
    CHECK_CODE(mv_store_write(f.store, replay_migration_9_tx, NULL, &err), MV_OK, &err);
    int64_t latest = 0, pruned = 0;
    CHECK_CODE(mv_changes_latest(f.store, &latest, &pruned, &err), MV_OK, &err);
    CHECK_INT(latest, old.ids[3]);
    CHECK_INT(pruned, old.ids[0]);
    /* A client that had the second change resumes with the third and fourth, same ids. */
    mv_change ch[8];
    int n = 0;
    CHECK_CODE(mv_changes_read(f.store, old.ids[1], ch, 8, &n, &err), MV_OK, &err);
    CHECK_INT(n, 2);
    CHECK_INT(ch[0].id, old.ids[2]);
    CHECK_INT(ch[1].id, old.ids[3]);
    CHECK_CODE(mv_store_write(f.store, add_change_tx, "new", &err), MV_OK, &err);
    CHECK_CODE(mv_changes_read(f.store, old.ids[3], ch, 8, &n, &err), MV_OK, &err);
    CHECK_INT(n, 1);
    CHECK_STR(ch[0].message_id, "new");
    CHECK(ch[0].id > old.ids[3]);
    fixture_close(&f);
}

STORE_TEST(retention_removes_changes_no_reader_has_seen_yet_and_ids_stay_above_them) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "changes_gc"));
    mv_err err = {0};
    for (int i = 0; i < 3; i++)
        CHECK_CODE(mv_store_write(f.store, add_change_tx, "unread", &err), MV_OK, &err);
    int64_t removed = 0, latest = 0, pruned = 0;
    CHECK_CODE(mv_changes_gc(f.store, 10, &removed, &err), MV_OK, &err); /* all are at time 1 */
    CHECK_INT(removed, 3);
    CHECK_CODE(mv_changes_latest(f.store, &latest, &pruned, &err), MV_OK, &err);
    CHECK(pruned > 0);
    CHECK_INT(latest, pruned); /* nothing left, and nothing lost silently */
    CHECK_CODE(mv_store_write(f.store, add_change_tx, "after", &err), MV_OK, &err);
    mv_change ch[4];
    int n = 0;
    CHECK_CODE(mv_changes_read(f.store, 0, ch, 4, &n, &err), MV_OK, &err);
    CHECK_INT(n, 1);
    CHECK_STR(ch[0].message_id, "after");
    CHECK(ch[0].id > pruned);
    fixture_close(&f);
}

/* ---- a backlog larger than one sequencer batch (5,000 rows) ---------------------------------- */

#define BACKLOG 5100

static mv_code backlog_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    mv_code rc = MV_OK;
    char id[25];
    for (int i = 0; i < BACKLOG && rc == MV_OK; i++) {
        snprintf(id, sizeof id, "b%d", i);
        rc = mv__change_add_tx(db, "default", id, MV_CHANGE_UPDATED, NULL, 1, err);
    }
    return rc;
}

STORE_TEST(a_backlog_larger_than_one_sequencer_batch_is_read_whole_and_in_order) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "changes_backlog"));
    mv_err err = {0};
    CHECK_CODE(mv_store_write(f.store, backlog_tx, NULL, &err), MV_OK, &err);
    mv_change *ch = calloc(1000, sizeof *ch);
    REQUIRE(ch);
    int64_t cursor = 0;
    int total = 0, out_of_order = 0;
    for (int page = 0; page < 20; page++) {
        int n = 0;
        CHECK_CODE(mv_changes_read(f.store, cursor, ch, 1000, &n, &err), MV_OK, &err);
        for (int i = 0; i < n; i++) {
            char want[25];
            snprintf(want, sizeof want, "b%d", total + i);
            out_of_order += ch[i].id <= cursor || strcmp(ch[i].message_id, want) != 0;
            cursor = ch[i].id;
        }
        total += n;
        if (n == 0) break;
    }
    CHECK_INT(total, BACKLOG);
    CHECK_INT(out_of_order, 0);
    int64_t latest = 0;
    CHECK_CODE(mv_changes_latest(f.store, &latest, NULL, &err), MV_OK, &err);
    CHECK_INT(latest, cursor);
    free(ch);
    fixture_close(&f);
}

int main(void) {
    return RUN_TESTS(
        writers_in_threads_and_another_process_reach_every_reader_once_in_order,
        a_reader_never_passes_a_change_whose_transaction_is_still_open,
        migration_9_keeps_the_event_ids_clients_hold_and_numbers_new_changes_above_them,
        retention_removes_changes_no_reader_has_seen_yet_and_ids_stay_above_them,
        a_backlog_larger_than_one_sequencer_batch_is_read_whole_and_in_order);
}
