/* cli_admin_test.c — the operator's commands as a user runs them (the built `missive` binary):
 * `backup` taken while 16 threads create messages restores to a store that passes SQLite's
 * integrity check and holds every message acknowledged before the backup began, each one whole;
 * `restore` refuses a store that holds data without --force and a file that is not a store;
 * both point to PostgreSQL's tools on PostgreSQL. The listings (`messages list|get`, `sagas
 * list`, `approvals list`, `outbox list`) filter and page like the HTTP lists on both stores,
 * in columns and with --json. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "missive/deliver.h"
#include "missive/durable.h"
#include "missive/message.h"
#include "store/db.h"
#include "support/stores.h"

/* ---- running the binary ---------------------------------------------------------------------- */

typedef struct run_out {
    int status;      /* exit status, -1 when it did not exit */
    char out[65536]; /* stdout */
    char err[4096];  /* stderr */
} run_out;

/* Runs `missive ARGS` (args is shell text); stdout and stderr captured. */
static run_out *missive(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static run_out *missive(const char *fmt, ...) {
    static run_out r;
    memset(&r, 0, sizeof r);
    char args[4096], cmd[8192], errfile[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    mv_strlcpy(errfile, test_tmp_path("missive.stderr"), sizeof errfile);
    snprintf(cmd, sizeof cmd, "%s/missive %s 2>%s", build, args, errfile);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(r.out, 1, sizeof r.out - 1, p) : 0;
    r.out[n] = '\0';
    int st = p ? pclose(p) : -1;
    r.status = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    FILE *e = fopen(errfile, "r");
    n = e ? fread(r.err, 1, sizeof r.err - 1, e) : 0;
    r.err[n] = '\0';
    if (e) fclose(e);
    return &r;
}

/* The ids (member id_key) of the array key of a --json answer, comma-joined; "" when the output
 * is not JSON. *next gets whether nextCursor is a string (its value copied to cursor). */
static const char *ids_of(const char *json, const char *key, const char *id_key, char *cursor,
                          size_t cursor_size) {
    static char out[4096];
    out[0] = '\0';
    json_t *page = json_loads(json, 0, NULL);
    if (cursor) cursor[0] = '\0';
    if (!page) return "(not JSON)";
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(page, key), i, v) {
        if (i) strcat(out, ",");
        strncat(out, mv_json_str(v, id_key) ? mv_json_str(v, id_key) : "?",
                sizeof out - strlen(out) - 1);
    }
    const char *next = mv_json_str(page, "nextCursor");
    if (cursor) mv_strlcpy(cursor, next ? next : "", cursor_size);
    json_decref(page);
    return out;
}

static int lines_of(const char *text) {
    int n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

/* ---- a store with data ------------------------------------------------------------------------
 */

static const char TEMPLATE[] =
    "{\"templateCd\": \"%s\", \"type\": \"%s\", \"senderContent\": {\"title\": \"to {{x}}\"},"
    " \"receiverContent\": {\"title\": \"from {{x}}\"},"
    " \"prepare\": {\"toUser\": \"bob\", \"toRoles\": []},"
    " \"actions\": [{\"actionCd\": \"ok\", \"name\": \"OK\", \"variant\": \"primary\","
    " \"receiver\": true}]}";

typedef struct fixture {
    const char *url;
    mv_store *store;
    mv_registry *reg;
    mv_service *svc;
} fixture;

static bool register_template(mv_registry *reg, const char *code, const char *type) {
    char text[1024];
    snprintf(text, sizeof text, TEMPLATE, code, type);
    json_t *j = json_loads(text, 0, NULL);
    mv_code rc = mv_registry_register(reg, j, "<test>", NULL);
    json_decref(j);
    return rc == MV_OK;
}

static bool fixture_open(fixture *f, const char *url) {
    memset(f, 0, sizeof *f);
    f->url = url;
    mv_service_options o = {0};
    if (!url || mv_store_open(url, NULL, &f->store, NULL) != MV_OK ||
        mv_store_migrate(f->store, NULL, NULL) != MV_OK || !(f->reg = mv_registry_new()) ||
        !register_template(f->reg, "t1", "request") || !register_template(f->reg, "t2", "info"))
        return false;
    o.store = f->store;
    o.registry = f->reg;
    return mv_service_new(&o, &f->svc, NULL) == MV_OK;
}

static void fixture_close(fixture *f) {
    mv_service_free(f->svc);
    mv_registry_free(f->reg);
    mv_store_close(f->store);
}

/* Creates one message of template code from ana to bob; its id into id (may be NULL). */
static mv_code create(fixture *f, const char *code, const char *x, char id[64]) {
    mv_user ana = {.id = "ana"};
    json_t *payload = json_pack("{s:s}", "x", x), *msgs = NULL;
    mv_create_request req = {.template_cd = code, .user = &ana, .payload = payload};
    mv_code rc = mv_message_create(f->svc, &req, &msgs, NULL, NULL);
    if (rc == MV_OK && id) mv_strlcpy(id, mv_json_str(json_array_get(msgs, 0), "id"), 64);
    json_decref(msgs);
    json_decref(payload);
    return rc;
}

static const char SQL_ADD_SAGA[] =
    "INSERT INTO sagas (saga_id, definition, state, input, input_fingerprint, steps, max_attempts, "
    "created_at, updated_at, version, tenant_id) "
    "VALUES (?, ?, ?, 'null', 'fp', '[]', 3, ?, ?, 1, ?)";

/* s0..s4: s0 running checkout, s1 manual-review checkout, s2 completed refund, s3 manual-review
 * checkout (t1), s4 manual-review checkout (t2); two outbox rows (an email and a webhook). */
static mv_code rows_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    const char *states[] = {"running", "manual-review", "completed", "manual-review",
                            "manual-review"};
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "s%d", i);
        mv_code rc =
            mv_db_execf(db, SQL_ADD_SAGA, NULL, err, "sssiis", id, i == 2 ? "refund" : "checkout",
                        states[i], (int64_t)(100 + i), (int64_t)(100 + i), i < 4 ? "t1" : "t2");
        if (rc) return rc;
    }
    json_t *email = json_pack("{s:s,s:s,s:s,s:s}", "messageId", "m1", "toUser", "bob", "title",
                              "Hello", "body", "Hi Bob");
    json_t *hook = json_pack("{s:s,s:{s:i}}", "url", "http://127.0.0.1:9/x", "body", "n", 1);
    mv_code rc = mv_outbox_add_tx(db, MV_OUTBOX_EMAIL, email, mv_now_ms(), err);
    if (rc == MV_OK) rc = mv_outbox_add_tx(db, MV_OUTBOX_WEBHOOK, hook, mv_now_ms() + 1, err);
    json_decref(email);
    json_decref(hook);
    return rc;
}

static bool approval(mv_approvals *a, const char *tenant, const char *principal) {
    char effect[37];
    mv_id_uuid(effect, NULL);
    mv_approval_request r = {.effect_id = effect,
                             .capability = "refunds.large",
                             .target = "m1",
                             .tenant_id = tenant,
                             .principal_id = principal};
    mv_err err = {0};
    return mv_approval_authorize(a, &r, &err) == MV_APPROVAL_REQUIRED;
}

STORE_TEST(the_admin_listings_filter_and_page_like_the_http_lists) {
    fixture f;
    REQUIRE(fixture_open(&f, test_store_url(kind, "lists")));
    char m1[64], m2[64], m3[64];
    REQUIRE(create(&f, "t1", "one", m1) == MV_OK);
    REQUIRE(create(&f, "t2", "two", m2) == MV_OK);
    REQUIRE(create(&f, "t1", "three", m3) == MV_OK);
    REQUIRE(mv_store_write(f.store, rows_tx, NULL, NULL) == MV_OK);
    mv_approvals *a = NULL;
    mv_approvals_options ao = {.secret = (const unsigned char *)"0123456789abcdef0123456789abcdef",
                               .secret_len = 32};
    REQUIRE(mv_approvals_new(f.store, &ao, &a, NULL) == MV_OK);
    REQUIRE(approval(a, "t1", "ana") && approval(a, "t1", "ana") && approval(a, "t1", "cy"));
    REQUIRE(approval(a, "t2", "eve"));
    const char *url = f.url;
    char cursor[256], expect[256];

    /* messages: bob's inbox, filtered by template; one page at a time */
    run_out *r = missive("messages list --store '%s' --user bob --template-cd t1 --json", url);
    CHECK_INT(r->status, 0);
    snprintf(expect, sizeof expect, "%s,%s", m3, m1);
    CHECK_STR(ids_of(r->out, "messages", "id", cursor, sizeof cursor), expect);
    r = missive("messages list --store '%s' --user bob --limit 2 --json", url);
    snprintf(expect, sizeof expect, "%s,%s", m3, m2);
    CHECK_STR(ids_of(r->out, "messages", "id", cursor, sizeof cursor), expect);
    CHECK(cursor[0]);
    r = missive("messages list --store '%s' --user bob --limit 2 --cursor '%s' --json", url,
                cursor);
    CHECK_STR(ids_of(r->out, "messages", "id", cursor, sizeof cursor), m1);
    CHECK_STR(cursor, "");
    r = missive("messages list --store '%s' --user bob --type info --read false --json", url);
    CHECK_STR(ids_of(r->out, "messages", "id", NULL, 0), m2);
    r = missive("messages list --store '%s' --user eve --json", url); /* sees nothing */
    CHECK_STR(ids_of(r->out, "messages", "id", NULL, 0), "");
    r = missive("messages list --store '%s' --user bob --tenant t9 --json", url);
    CHECK_STR(ids_of(r->out, "messages", "id", NULL, 0), ""); /* another tenant's inbox */
    r = missive("messages list --store '%s' --user bob", url);
    CHECK_INT(r->status, 0);
    CHECK_INT(lines_of(r->out), 3); /* one line per message */
    CHECK(strstr(r->out, m2) != NULL);
    r = missive("messages list --store '%s' --user bob --read maybe", url);
    CHECK_INT(r->status, 1);
    CHECK(strstr(r->err, "--read must be true or false") != NULL);
    r = missive("messages list --store '%s' --user bob --cursor nonsense", url);
    CHECK_INT(r->status, 1);
    CHECK(strstr(r->err, "cursor") != NULL);
    r = missive("messages get --store '%s' %s --json", url, m2);
    CHECK_INT(r->status, 0);
    json_t *msg = json_loads(r->out, 0, NULL);
    CHECK_STR(mv_json_str(msg, "id"), m2);
    CHECK_STR(mv_json_str(msg, "templateCd"), "t2");
    json_decref(msg);
    r = missive("messages get --store '%s' no-such-id", url);
    CHECK_INT(r->status, 1);
    CHECK(strstr(r->err, "not found") != NULL);

    /* sagas: the tenant's, by state and definition, newest first */
    r = missive("sagas list --store '%s' --tenant t1 --state manual-review --json", url);
    CHECK_INT(r->status, 0);
    CHECK_STR(ids_of(r->out, "sagas", "sagaId", NULL, 0), "s3,s1");
    r = missive("sagas list --store '%s' --tenant t1 --definition checkout --limit 2 --json", url);
    CHECK_STR(ids_of(r->out, "sagas", "sagaId", cursor, sizeof cursor), "s3,s1");
    r = missive("sagas list --store '%s' --tenant t1 --definition checkout --limit 2 --cursor %s "
                "--json",
                url, cursor);
    CHECK_STR(ids_of(r->out, "sagas", "sagaId", cursor, sizeof cursor), "s0");
    r = missive("sagas list --store '%s' --tenant t2", url);
    CHECK_INT(lines_of(r->out), 1);
    CHECK(strstr(r->out, "s4\tcheckout\tmanual-review") != NULL);
    r = missive("sagas list --store '%s' --state stuck", url);
    CHECK_INT(r->status, 1);
    CHECK(strstr(r->err, "state must be") != NULL);

    /* approvals: pending by default, the tenant's or one principal's */
    r = missive("approvals list --store '%s' --tenant t1 --json", url);
    CHECK_INT(r->status, 0);
    json_t *page = json_loads(r->out, 0, NULL);
    CHECK_INT(json_array_size(json_object_get(page, "approvals")), 3);
    json_decref(page);
    r = missive("approvals list --store '%s' --tenant t1 --principal cy --json", url);
    page = json_loads(r->out, 0, NULL);
    CHECK_INT(json_array_size(json_object_get(page, "approvals")), 1);
    CHECK_STR(mv_json_str(json_array_get(json_object_get(page, "approvals"), 0), "principalId"),
              "cy");
    json_decref(page);
    r = missive("approvals list --store '%s' --tenant t1 --state approved --json", url);
    CHECK_STR(ids_of(r->out, "approvals", "approvalId", NULL, 0), "");

    /* outbox: by state and kind, every column */
    r = missive("outbox list --store '%s' --state pending --json", url);
    CHECK_INT(r->status, 0);
    page = json_loads(r->out, 0, NULL);
    json_t *rows = json_object_get(page, "outbox");
    CHECK_INT(json_array_size(rows), 2);
    CHECK_STR(mv_json_str(json_array_get(rows, 0), "kind"), "webhook"); /* the newer */
    CHECK_STR(mv_json_str(json_array_get(rows, 1), "kind"), "email");
    CHECK_STR(mv_json_str(json_object_get(json_array_get(rows, 1), "payload"), "toUser"), "bob");
    json_decref(page);
    r = missive("outbox list --store '%s' --kind email --limit 1 --json", url);
    page = json_loads(r->out, 0, NULL);
    CHECK_INT(json_array_size(json_object_get(page, "outbox")), 1);
    CHECK(json_is_null(json_object_get(page, "nextCursor")));
    json_decref(page);
    r = missive("outbox list --store '%s' --state sent --json", url);
    CHECK_STR(ids_of(r->out, "outbox", "id", NULL, 0), "");
    r = missive("outbox list --store '%s' --limit 1", url);
    CHECK_INT(lines_of(r->out), 2); /* the row and the next page's cursor */
    CHECK(strstr(r->out, "next cursor: ") != NULL);
    r = missive("outbox list --store '%s' --kind fax", url);
    CHECK_INT(r->status, 1);
    CHECK(strstr(r->err, "kind must be email or webhook") != NULL);
    r = missive("outbox list --store '%s' --colour red", url);
    CHECK_INT(r->status, 2);

    mv_approvals_free(a);
    fixture_close(&f);
}

/* ---- backup and restore ------------------------------------------------------------------------
 */

#define WRITERS 16

typedef struct writers {
    fixture *f;
    atomic_bool stop;
    pthread_mutex_t mu;
    char (*ids)[64]; /* acknowledged creates, in order */
    int n, cap, failures;
} writers;

static void *write_loop(void *arg) {
    writers *w = arg;
    for (int i = 0; !atomic_load(&w->stop); i++) {
        char id[64], x[32];
        snprintf(x, sizeof x, "n%d", i);
        mv_code rc = create(w->f, "t1", x, id);
        pthread_mutex_lock(&w->mu);
        if (rc != MV_OK)
            w->failures++;
        else if (w->n < w->cap)
            mv_strlcpy(w->ids[w->n++], id, 64);
        pthread_mutex_unlock(&w->mu);
    }
    return NULL;
}

static int acked(writers *w) {
    pthread_mutex_lock(&w->mu);
    int n = w->n;
    pthread_mutex_unlock(&w->mu);
    return n;
}

static const char SQL_ALL_IDS[] = "SELECT id FROM messages";

/* Checks the SQLite file at path: integrity_check says ok; returns its message ids. */
static json_t *check_file(const char *path) {
    sqlite3 *db = NULL;
    json_t *ids = json_array();
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        json_decref(ids);
        return NULL;
    }
    sqlite3_stmt *st = NULL;
    bool ok = sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
              sqlite3_step(st) == SQLITE_ROW &&
              strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;
    sqlite3_finalize(st);
    ok = ok && sqlite3_prepare_v2(db, SQL_ALL_IDS, -1, &st, NULL) == SQLITE_OK;
    while (ok && sqlite3_step(st) == SQLITE_ROW)
        json_array_append_new(ids, json_string((const char *)sqlite3_column_text(st, 0)));
    sqlite3_finalize(st);
    sqlite3_close(db);
    if (!ok) {
        json_decref(ids);
        return NULL;
    }
    return ids;
}

TEST(a_backup_taken_under_16_writers_restores_every_acknowledged_message_intact) {
    char src[600], bak[600], restored[600], url[700], restored_url[700];
    mv_strlcpy(src, test_tmp_path("backup-src.db"), sizeof src);
    mv_strlcpy(bak, test_tmp_path("backup.db"), sizeof bak);
    mv_strlcpy(restored, test_tmp_path("restored.db"), sizeof restored);
    snprintf(url, sizeof url, "sqlite:%s", src);
    snprintf(restored_url, sizeof restored_url, "sqlite:%s", restored);
    fixture f;
    REQUIRE(fixture_open(&f, url));
    writers w = {.f = &f, .cap = 1 << 20};
    w.ids = calloc((size_t)w.cap, sizeof *w.ids);
    pthread_mutex_init(&w.mu, NULL);
    pthread_t t[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        REQUIRE(pthread_create(&t[i], NULL, write_loop, &w) == 0);
    while (acked(&w) < 200) /* the writers are well under way */
        usleep(10000);
    int before = acked(&w);
    int64_t t0 = mv_now_ms();
    run_out *r = missive("backup --store %s --to %s", url, bak);
    int64_t took = mv_now_ms() - t0;
    int during = acked(&w) - before;
    atomic_store(&w.stop, true);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(t[i], NULL);
    CHECK_INT(r->status, 0);
    CHECK(strstr(r->out, "backed up ") != NULL);
    CHECK_INT(w.failures, 0);
    printf("backup: %d messages acknowledged before it began, %d during its %lld ms\n", before,
           during, (long long)took);

    /* the backup itself, then its restore into a new store */
    json_t *in_backup = check_file(bak);
    REQUIRE(in_backup);
    CHECK((int)json_array_size(in_backup) >= before);
    CHECK((int)json_array_size(in_backup) <= before + during + WRITERS);
    r = missive("restore --from %s --store %s", bak, restored_url);
    CHECK_INT(r->status, 0);
    CHECK(strstr(r->out, "restored ") != NULL);
    json_t *ids = check_file(restored);
    REQUIRE(ids);
    CHECK_INT(json_array_size(ids), json_array_size(in_backup));

    /* every acknowledged create before the backup is there, and every message is whole */
    fixture g;
    REQUIRE(fixture_open(&g, restored_url));
    int missing = 0, broken = 0;
    for (int i = 0; i < before; i++) {
        json_t *m = NULL;
        if (mv_message_get(g.svc, w.ids[i], NULL, &m, NULL) != MV_OK) missing++;
        json_decref(m);
    }
    size_t i;
    json_t *id;
    json_array_foreach(ids, i, id) {
        char *text = NULL;
        size_t len = 0;
        json_t *parsed = NULL;
        if (mv_message_get_text(g.svc, json_string_value(id), NULL, &text, &len, NULL) == MV_OK)
            parsed = json_loadb(text, len, 0, NULL);
        if (!parsed || !mv_json_str(json_object_get(parsed, "payload"), "x") ||
            strcmp(mv_json_str(parsed, "templateCd"), "t1") != 0)
            broken++;
        json_decref(parsed);
        free(text);
    }
    CHECK_INT(missing, 0);
    CHECK_INT(broken, 0);
    fixture_close(&g);

    /* a store that holds data is not overwritten without --force */
    r = missive("restore --from %s --store %s", bak, url);
    CHECK_INT(r->status, 1);
    CHECK(strstr(r->err, "is not empty") != NULL);
    CHECK(strstr(r->err, "--force") != NULL);
    fixture_close(&f);
    json_t *src_ids = check_file(src);
    CHECK(src_ids && (int)json_array_size(src_ids) >= before + during); /* untouched */
    r = missive("restore --from %s --store %s --force", bak, url);
    CHECK_INT(r->status, 0);
    json_t *forced = check_file(src);
    CHECK(forced && json_array_size(forced) == json_array_size(in_backup));

    /* what is refused */
    r = missive("backup --store %s --to %s", url, bak);
    CHECK_INT(r->status, 1);
    CHECK(strstr(r->err, "already exists") != NULL);
    char junk[600];
    mv_strlcpy(junk, test_tmp_path("junk.db"), sizeof junk);
    FILE *j = fopen(junk, "w");
    fputs("not a database at all, not even close to one: just some text in a file\n", j);
    fclose(j);
    r = missive("restore --from %s --store sqlite:%s --force", junk, restored);
    CHECK_INT(r->status, 1);
    CHECK(strstr(r->err, "is not a missive store") != NULL);
    json_t *still = check_file(restored);
    CHECK(still != NULL); /* unchanged: still a store that passes */
    json_decref(still);
    r = missive("backup --store sqlite:%s --to %s.2", test_tmp_path("nowhere.db"), bak);
    CHECK_INT(r->status, 1);
    CHECK(strstr(r->err, "there is no store") != NULL);

    json_decref(in_backup);
    json_decref(ids);
    json_decref(src_ids);
    json_decref(forced);
    pthread_mutex_destroy(&w.mu);
    free(w.ids);
}

/* The page size of the SQLite file at path (0 when it cannot be read). */
static int page_size_of(const char *path) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int size = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        size = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return size;
}

/* A store made before new stores got 1 KiB pages: the file fixed at 4 KiB pages in WAL mode. */
static void make_old_file(const char *path) {
    sqlite3 *db = NULL;
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "PRAGMA page_size=4096; PRAGMA journal_mode=WAL", NULL, NULL, NULL) ==
            SQLITE_OK);
    sqlite3_close(db);
}

TEST(stores_of_either_page_size_back_up_and_restore_into_each_other) {
    char old_path[600], new_path[600], old_url[700], new_url[700], bak_old[600], bak_new[600];
    mv_strlcpy(old_path, test_tmp_path("pages-old.db"), sizeof old_path);
    mv_strlcpy(new_path, test_tmp_path("pages-new.db"), sizeof new_path);
    mv_strlcpy(bak_old, test_tmp_path("pages-old.bak"), sizeof bak_old);
    mv_strlcpy(bak_new, test_tmp_path("pages-new.bak"), sizeof bak_new);
    snprintf(old_url, sizeof old_url, "sqlite:%s", old_path);
    snprintf(new_url, sizeof new_url, "sqlite:%s", new_path);
    make_old_file(old_path);
    fixture f;
    char old_id[64], new_id[64];
    REQUIRE(fixture_open(&f, old_url));
    REQUIRE(create(&f, "t1", "old", old_id) == MV_OK);
    fixture_close(&f);
    CHECK_INT(page_size_of(old_path), 4096); /* an existing store keeps its pages */
    REQUIRE(fixture_open(&f, new_url));
    REQUIRE(create(&f, "t1", "new", new_id) == MV_OK);

    /* while the new store is open elsewhere its page size cannot change: refused, untouched */
    run_out *r = missive("backup --store %s --to %s", old_url, bak_old);
    REQUIRE(r->status == 0);
    r = missive("restore --from %s --store %s --force", bak_old, new_url);
    CHECK_INT(r->status, 1);
    CHECK(strstr(r->err, "another connection has the store open") != NULL);
    fixture_close(&f);
    json_t *ids = check_file(new_path);
    CHECK(ids && json_array_size(ids) == 1 &&
          strcmp(json_string_value(json_array_get(ids, 0)), new_id) == 0);
    json_decref(ids);
    CHECK_INT(page_size_of(new_path), 1024);

    /* with nobody else on it, the 4 KiB backup replaces the 1 KiB store, and the reverse */
    r = missive("backup --store %s --to %s", new_url, bak_new);
    REQUIRE(r->status == 0);
    r = missive("restore --from %s --store %s --force", bak_old, new_url);
    CHECK_INT(r->status, 0);
    CHECK_INT(page_size_of(new_path), 4096);
    ids = check_file(new_path);
    CHECK(ids && json_array_size(ids) == 1 &&
          strcmp(json_string_value(json_array_get(ids, 0)), old_id) == 0);
    json_decref(ids);
    r = missive("restore --from %s --store %s --force", bak_new, old_url);
    CHECK_INT(r->status, 0);
    CHECK_INT(page_size_of(old_path), 1024);
    ids = check_file(old_path);
    CHECK(ids && json_array_size(ids) == 1 &&
          strcmp(json_string_value(json_array_get(ids, 0)), new_id) == 0);
    json_decref(ids);
    /* both are still WAL stores a daemon opens and writes */
    REQUIRE(fixture_open(&f, old_url));
    CHECK(create(&f, "t1", "after", NULL) == MV_OK);
    fixture_close(&f);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    REQUIRE(sqlite3_open(old_path, &db) == SQLITE_OK);
    REQUIRE(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW &&
          strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

POSTGRES_TEST(backup_and_restore_of_a_postgresql_store_point_to_its_own_tools) {
    fixture f;
    REQUIRE(fixture_open(&f, test_store_url(kind, "pgbackup")));
    REQUIRE(create(&f, "t1", "one", NULL) == MV_OK);
    char bak[600];
    mv_strlcpy(bak, test_tmp_path("pg-backup.db"), sizeof bak);
    run_out *r = missive("backup --store '%s' --to %s", f.url, bak);
    CHECK_INT(r->status, 1);
    CHECK(strstr(r->err, "pg_dump") != NULL);
    CHECK(access(bak, F_OK) != 0);
    r = missive("restore --from /etc/hostname --store '%s' --force", f.url);
    CHECK_INT(r->status, 1);
    CHECK(strstr(r->err, "pg_restore") != NULL);
    fixture_close(&f);
}

int main(void) {
    return RUN_TESTS(the_admin_listings_filter_and_page_like_the_http_lists,
                     a_backup_taken_under_16_writers_restores_every_acknowledged_message_intact,
                     stores_of_either_page_size_back_up_and_restore_into_each_other,
                     backup_and_restore_of_a_postgresql_store_point_to_its_own_tools);
}
