/* inbox_test.c — per-viewer state, filters × cursor, counts after every kind of change, marks and
 * creates from 16 threads, and the change log (one row per committed change, none for a rolled
 * back one; retention and its watermark), on both stores. */
#include <pthread.h>

#include "fixture.h"
#include "message/inbox_internal.h"
#include "missive/inbox.h"
#include "store/driver.h"

static const char *OPS[] = {"ops"};

static json_t *send_to(fixture *f, const char *from, const char *to, const char *role) {
    mv_user u = {.id = from};
    json_t *payload = json_pack("{s:s}", "name", "W");
    if (to) json_object_set_new(payload, "toUser", json_string(to));
    if (role) json_object_set_new(payload, "toRoles", json_pack("[s]", role));
    mv_create_request req = {.template_cd = "svc-test", .user = &u, .payload = payload};
    json_t *m = NULL;
    mv_err err = {0};
    mv_message_create(f->svc, &req, &m, NULL, &err);
    json_decref(payload);
    json_t *one = json_incref(json_array_get(m, 0));
    json_decref(m);
    f->now++;
    return one;
}

static int64_t viewer_at(const json_t *msg, const char *key) {
    json_t *v = json_object_get(json_object_get(msg, "viewer"), key);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* Counts under flt; without a filter the maintained tallies answer, and they must agree with
 * counting the messages themselves (an explicit dismissed=false takes that path). */
static mv_inbox_counts counts(fixture *f, const mv_user *u, const mv_inbox_filter *flt) {
    mv_inbox_counts c = {-1, -1, -1}, q = {-2, -2, -2};
    mv_err err = {0};
    CHECK_CODE(mv_message_counts(f->svc, u, flt, false, &c, &err), MV_OK, &err);
    if (!flt) {
        mv_inbox_filter explicit_default = {.dismissed = MV_FLAG_FALSE};
        CHECK_CODE(mv_message_counts(f->svc, u, &explicit_default, false, &q, &err), MV_OK, &err);
        CHECK_INT(c.count, q.count);
        CHECK_INT(c.unseen, q.unseen);
        CHECK_INT(c.unread, q.unread);
    }
    return c;
}

#define CHECK_COUNTS(c, n_, unseen_, unread_)                                                      \
    do {                                                                                           \
        mv_inbox_counts c_ = (c);                                                                  \
        CHECK_INT(c_.count, n_);                                                                   \
        CHECK_INT(c_.unseen, unseen_);                                                             \
        CHECK_INT(c_.unread, unread_);                                                             \
    } while (0)

static mv_code mark(fixture *f, const char *id, const mv_user *u, mv_mark m, json_t **out) {
    mv_err err = {0};
    return mv_message_mark(f->svc, id, u, m, out, &err);
}

static int64_t latest_change(fixture *f) {
    int64_t latest = -1;
    mv_err err = {0};
    CHECK_CODE(mv_changes_latest(f->store, &latest, NULL, &err), MV_OK, &err);
    return latest;
}

static size_t list_size(fixture *f, const mv_user *u, const mv_inbox_filter *flt) {
    mv_list_request req = {.user = u, .filter = flt};
    json_t *page = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_message_list(f->svc, &req, &page, NULL, &err), MV_OK, &err);
    size_t n = json_array_size(page);
    json_decref(page);
    return n;
}

STORE_TEST(role_members_each_have_their_own_viewer_state) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "inbox-iso.db"));
    json_t *m = send_to(&f, "ana", NULL, "ops");
    const char *id = mv_json_str(m, "id");
    mv_user bob = {.id = "bob", .roles = OPS, .nroles = 1};
    mv_user carol = {.id = "carol", .roles = OPS, .nroles = 1};
    json_t *out = NULL;
    CHECK_INT(mark(&f, id, &bob, MV_MARK_READ, &out), MV_OK);
    CHECK_INT(viewer_at(out, "readAt"), f.now);
    CHECK_INT(viewer_at(out, "seenAt"), f.now); /* read implies seen */
    json_decref(out);
    CHECK_INT(mark(&f, id, &bob, MV_MARK_DISMISS, NULL), MV_OK);
    CHECK_INT(list_size(&f, &bob, NULL), 0); /* dismissed leaves Bob's inbox only */
    CHECK_INT(list_size(&f, &carol, NULL), 1);
    mv_err err = {0};
    CHECK_CODE(mv_message_get(f.svc, id, &carol, &out, &err), MV_OK, &err);
    CHECK_INT(viewer_at(out, "readAt"), -1);
    CHECK_INT(viewer_at(out, "dismissedAt"), -1);
    json_decref(out);
    CHECK_COUNTS(counts(&f, &carol, NULL), 1, 1, 1);
    CHECK_COUNTS(counts(&f, &bob, NULL), 0, 0, 0);
    mv_inbox_filter dismissed = {.dismissed = MV_FLAG_TRUE};
    CHECK_INT(list_size(&f, &bob, &dismissed), 1);
    CHECK_COUNTS(counts(&f, &bob, &dismissed), 1, 0, 0);
    mv_user ana = {.id = "ana"}; /* the sender's own view starts all null */
    CHECK_CODE(mv_message_get(f.svc, id, &ana, &out, &err), MV_OK, &err);
    CHECK_INT(viewer_at(out, "seenAt"), -1);
    json_decref(out);
    json_decref(m);
    fixture_close(&f);
}

STORE_TEST(marking_again_keeps_the_first_timestamp_and_logs_only_real_changes) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "inbox-idem.db"));
    json_t *m = send_to(&f, "ana", "bob", NULL);
    const char *id = mv_json_str(m, "id");
    mv_user bob = {.id = "bob"};
    int64_t first = f.now, before = latest_change(&f);
    json_t *out = NULL;
    CHECK_INT(mark(&f, id, &bob, MV_MARK_SEEN, NULL), MV_OK);
    f.now += 1000;
    CHECK_INT(mark(&f, id, &bob, MV_MARK_SEEN, &out), MV_OK);
    CHECK_INT(viewer_at(out, "seenAt"), first);
    json_decref(out);
    CHECK_INT(latest_change(&f), before + 1); /* the second mark changed nothing */
    CHECK_INT(mark(&f, id, &bob, MV_MARK_READ, &out), MV_OK);
    CHECK_INT(viewer_at(out, "seenAt"), first);
    CHECK_INT(viewer_at(out, "readAt"), f.now);
    json_decref(out);
    CHECK_INT(mark(&f, id, &bob, MV_MARK_UNREAD, &out), MV_OK);
    CHECK_INT(viewer_at(out, "readAt"), -1);
    CHECK_INT(viewer_at(out, "seenAt"), first); /* unread clears readAt only */
    CHECK_STR(mv_json_str(out, "actionState"), "active");
    json_decref(out);
    CHECK_INT(mark(&f, id, &bob, MV_MARK_UNREAD, NULL), MV_OK);
    CHECK_INT(mark(&f, id, &bob, MV_MARK_UNDISMISS, NULL), MV_OK);
    CHECK_INT(latest_change(&f), before + 3);
    mv_change ch[8];
    int n = 0;
    mv_err err = {0};
    CHECK_CODE(mv_changes_read(f.store, before, ch, 8, &n, &err), MV_OK, &err);
    CHECK_INT(n, 3);
    CHECK_INT(ch[0].kind, MV_CHANGE_VIEWER);
    CHECK_STR(ch[0].viewer_id, "bob");
    CHECK_STR(ch[0].message_id, id);
    CHECK(ch[0].id < ch[1].id && ch[1].id < ch[2].id);
    json_decref(m);
    fixture_close(&f);
}

STORE_TEST(only_a_user_who_sees_the_message_can_mark_it_archived_and_notifications_included) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "inbox-vis.db"));
    json_t *m = send_to(&f, "ana", "bob", NULL);
    const char *id = mv_json_str(m, "id");
    mv_user eve = {.id = "eve", .roles = OPS, .nroles = 1}, bob = {.id = "bob"};
    int64_t before = latest_change(&f);
    CHECK_INT(mark(&f, id, &eve, MV_MARK_READ, NULL), MV_MESSAGE_NOT_FOUND);
    CHECK_INT(mark(&f, "0123456789abcdef01234567", &bob, MV_MARK_READ, NULL), MV_MESSAGE_NOT_FOUND);
    CHECK_INT(mark(&f, "nope", &bob, MV_MARK_READ, NULL), MV_MESSAGE_NOT_FOUND);
    CHECK_INT(latest_change(&f), before); /* nothing changed */
    /* archive it through an action, then mark: still allowed, state untouched */
    mv_action_request ar = {.message_id = id, .action_cd = "reject", .user = &bob};
    json_t *r = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_action_handle(f.svc, &ar, &r, &err), MV_OK, &err);
    json_decref(r);
    json_t *out = NULL;
    CHECK_INT(mark(&f, id, &bob, MV_MARK_READ, &out), MV_OK);
    CHECK_STR(mv_json_str(out, "actionState"), "archived");
    CHECK_INT(viewer_at(out, "readAt"), f.now);
    json_decref(out);
    json_t *params = json_pack("{s:s,s:{s:s,s:s}}", "toUser", "bob", "receiverContent", "title",
                               "Hi", "long", "there");
    json_t *n = NULL;
    CHECK_CODE(mv_notification_create(f.svc, params, &n, &err), MV_OK, &err);
    CHECK_INT(mark(&f, mv_json_str(n, "id"), &bob, MV_MARK_DISMISS, &out), MV_OK);
    CHECK(viewer_at(out, "dismissedAt") > 0);
    json_decref(out);
    json_decref(n);
    json_decref(params);
    json_decref(m);
    fixture_close(&f);
}

STORE_TEST(filters_combine_with_the_cursor_without_duplicates_or_gaps_while_messages_arrive) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "inbox-page.db"));
    mv_user bob = {.id = "bob", .roles = OPS, .nroles = 1};
    char ids[30][25];
    for (int i = 0; i < 30; i++) {
        json_t *m = send_to(&f, "ana", i % 3 ? "bob" : NULL, i % 3 ? NULL : "ops");
        mv_strlcpy(ids[i], mv_json_str(m, "id"), 25);
        json_decref(m);
        if (i % 2) CHECK_INT(mark(&f, ids[i], &bob, MV_MARK_READ, NULL), MV_OK);
    }
    mv_inbox_filter unread = {.read = MV_FLAG_FALSE, .template_cd = "svc-test", .type = "request"};
    char *cursor = NULL;
    int seen[30] = {0}, pages = 0, total = 0;
    do {
        json_t *limit = json_integer(4);
        mv_list_request req = {.user = &bob, .limit = limit, .cursor = cursor, .filter = &unread};
        json_t *page = NULL;
        char *next = NULL;
        mv_err err = {0};
        CHECK_CODE(mv_message_list(f.svc, &req, &page, &next, &err), MV_OK, &err);
        json_decref(limit);
        free(cursor);
        cursor = next;
        size_t i;
        json_t *m;
        json_array_foreach(page, i, m) {
            for (int k = 0; k < 30; k++)
                if (strcmp(ids[k], mv_json_str(m, "id")) == 0) seen[k]++;
            CHECK_INT(viewer_at(m, "readAt"), -1);
            total++;
        }
        json_decref(page);
        json_decref(send_to(&f, "ana", "bob", NULL)); /* newer than every cursor: never on a page */
        pages++;
    } while (cursor && pages < 20);
    CHECK_INT(total, 15);
    for (int k = 0; k < 30; k++)
        CHECK_INT(seen[k], k % 2 ? 0 : 1);
    mv_inbox_filter other = {.template_cd = "other"};
    CHECK_INT(list_size(&f, &bob, &other), 0);
    mv_inbox_filter read = {.read = MV_FLAG_TRUE, .seen = MV_FLAG_TRUE};
    CHECK_INT(list_size(&f, &bob, &read), 15);
    fixture_close(&f);
}

STORE_TEST(counts_follow_every_kind_of_change) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "inbox-count.db"));
    mv_user bob = {.id = "bob", .roles = OPS, .nroles = 1};
    CHECK_COUNTS(counts(&f, &bob, NULL), 0, 0, 0);
    json_t *a = send_to(&f, "ana", "bob", NULL), *b = send_to(&f, "ana", NULL, "ops");
    json_t *c = send_to(&f, "ana", "bob", "ops");
    CHECK_COUNTS(counts(&f, &bob, NULL), 3, 3, 3);
    CHECK_INT(mark(&f, mv_json_str(a, "id"), &bob, MV_MARK_SEEN, NULL), MV_OK);
    CHECK_COUNTS(counts(&f, &bob, NULL), 3, 2, 3);
    CHECK_INT(mark(&f, mv_json_str(b, "id"), &bob, MV_MARK_READ, NULL), MV_OK);
    CHECK_COUNTS(counts(&f, &bob, NULL), 3, 1, 2);
    CHECK_INT(mark(&f, mv_json_str(b, "id"), &bob, MV_MARK_UNREAD, NULL), MV_OK);
    CHECK_COUNTS(counts(&f, &bob, NULL), 3, 1, 3);
    CHECK_INT(mark(&f, mv_json_str(c, "id"), &bob, MV_MARK_DISMISS, NULL), MV_OK);
    CHECK_COUNTS(counts(&f, &bob, NULL), 2, 0, 2);
    CHECK_INT(mark(&f, mv_json_str(c, "id"), &bob, MV_MARK_UNDISMISS, NULL), MV_OK);
    CHECK_COUNTS(counts(&f, &bob, NULL), 3, 1, 3);
    mv_action_request ar = {
        .message_id = mv_json_str(a, "id"), .action_cd = "reject", .user = &bob};
    json_t *r = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_action_handle(f.svc, &ar, &r, &err), MV_OK, &err); /* archived: leaves */
    json_decref(r);
    CHECK_COUNTS(counts(&f, &bob, NULL), 2, 1, 2);
    mv_inbox_counts arch;
    CHECK_CODE(mv_message_counts(f.svc, &bob, NULL, true, &arch, &err), MV_OK, &err);
    CHECK_INT(arch.count, 1);
    int64_t updated = -1;
    mv_inbox_filter by_type = {.type = "request"};
    CHECK_CODE(mv_message_mark_all(f.svc, &bob, MV_MARK_SEEN, &by_type, -1, &updated, &err), MV_OK,
               &err);
    CHECK_INT(updated, 1);
    CHECK_COUNTS(counts(&f, &bob, NULL), 2, 0, 2);
    CHECK_CODE(mv_message_mark_all(f.svc, &bob, MV_MARK_READ, NULL,
                                   json_integer_value(json_object_get(c, "createdAt")), &updated,
                                   &err),
               MV_OK, &err);
    CHECK_INT(updated, 1); /* only b was created before c */
    CHECK_COUNTS(counts(&f, &bob, NULL), 2, 0, 1);
    CHECK_CODE(mv_message_mark_all(f.svc, &bob, MV_MARK_READ, NULL, -1, &updated, &err), MV_OK,
               &err);
    CHECK_INT(updated, 1);
    CHECK_CODE(mv_message_mark_all(f.svc, &bob, MV_MARK_READ, NULL, -1, &updated, &err), MV_OK,
               &err);
    CHECK_INT(updated, 0);
    CHECK_COUNTS(counts(&f, &bob, NULL), 2, 0, 0);
    CHECK_CODE(mv_message_mark_all(f.svc, &bob, MV_MARK_DISMISS, NULL, -1, &updated, &err),
               MV_INVALID_ARGUMENT, &err);
    mv_user carol = {.id = "carol", .roles = OPS, .nroles = 1}; /* Bob's marks are not Carol's */
    CHECK_COUNTS(counts(&f, &carol, NULL), 2, 2, 2);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    fixture_close(&f);
}

STORE_TEST(another_tenants_user_cannot_mark_or_count_and_gets_no_change_of_it) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "inbox-tenant.db"));
    json_t *m = send_to(&f, "ana", "bob", "ops");
    const char *id = mv_json_str(m, "id");
    mv_user bob2 = {.id = "bob", .roles = OPS, .nroles = 1, .tenant = "t2"};
    int64_t before = latest_change(&f);
    CHECK_INT(mark(&f, id, &bob2, MV_MARK_READ, NULL), MV_MESSAGE_NOT_FOUND);
    CHECK_INT(latest_change(&f), before);
    CHECK_COUNTS(counts(&f, &bob2, NULL), 0, 0, 0);
    CHECK_INT(list_size(&f, &bob2, NULL), 0);
    int64_t updated = -1;
    mv_err err = {0};
    CHECK_CODE(mv_message_mark_all(f.svc, &bob2, MV_MARK_READ, NULL, -1, &updated, &err), MV_OK,
               &err);
    CHECK_INT(updated, 0);
    mv_change ch[4];
    int n = 0;
    CHECK_CODE(mv_changes_read(f.store, 0, ch, 4, &n, &err), MV_OK, &err);
    CHECK_INT(n, 1);
    CHECK_STR(ch[0].tenant, "default"); /* the hub matches this against each stream's tenant */
    mv_user bob = {.id = "bob", .roles = OPS, .nroles = 1};
    CHECK_COUNTS(counts(&f, &bob, NULL), 1, 1, 1);
    json_decref(m);
    fixture_close(&f);
}

/* ---- 16 threads ------------------------------------------------------------------------- */

typedef struct {
    fixture *f;
    int index;
    char ids[20][25];
} worker;

static void *work(void *arg) {
    worker *w = arg;
    mv_user bob = {.id = "bob", .roles = OPS, .nroles = 1};
    for (int i = 0; i < 10; i++) {
        json_t *m = send_to(w->f, "ana", w->index % 2 ? "bob" : NULL, w->index % 2 ? NULL : "ops");
        mv_strlcpy(w->ids[i], mv_json_str(m, "id"), 25);
        json_decref(m);
        if (i % 2 == 0) mark(w->f, w->ids[i], &bob, MV_MARK_READ, NULL);
        if (i % 5 == 0) mark(w->f, w->ids[i], &bob, MV_MARK_DISMISS, NULL);
        mark(w->f, w->ids[i], &bob, MV_MARK_SEEN, NULL);
    }
    return NULL;
}

STORE_TEST(sixteen_threads_marking_and_creating_leave_exact_counts) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "inbox-threads.db"));
    worker w[16];
    pthread_t t[16];
    int64_t before = latest_change(&f);
    for (int i = 0; i < 16; i++) {
        w[i] = (worker){.f = &f, .index = i};
        pthread_create(&t[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < 16; i++)
        pthread_join(t[i], NULL);
    mv_user bob = {.id = "bob", .roles = OPS, .nroles = 1};
    /* per thread: 10 messages, 2 dismissed, 5 read (1 of them dismissed), all seen */
    CHECK_COUNTS(counts(&f, &bob, NULL), 16 * 8, 0, 16 * 4);
    mv_inbox_filter all = {.dismissed = MV_FLAG_ANY};
    CHECK_COUNTS(counts(&f, &bob, &all), 160, 0, 80);
    /* the log: 160 creates + 160 reads... each real change exactly once */
    CHECK_INT(latest_change(&f) - before >= 160 + 80 + 32 + 80, 1);
    mv_change *ch = calloc(1000, sizeof *ch);
    int n = 0;
    mv_err err = {0};
    CHECK_CODE(mv_changes_read(f.store, before, ch, 1000, &n, &err), MV_OK, &err);
    CHECK_INT(n, 160 + 80 + 32 + 80);
    for (int i = 1; i < n; i++)
        CHECK(ch[i].id > ch[i - 1].id);
    free(ch);
    fixture_close(&f);
}

/* ---- change log ------------------------------------------------------------------------- */

typedef struct {
    const char *id;
    bool fail;
} log_arg;

static mv_code log_tx(mv_db *db, void *ctx, mv_err *err) {
    log_arg *a = ctx;
    mv_code rc = mv__change_add_tx(db, "default", a->id, MV_CHANGE_UPDATED, NULL, 1, err);
    if (rc == MV_OK && a->fail) return mv_err_set(err, MV_ACTION_CONFLICT, "rolled back");
    return rc;
}

typedef struct {
    fixture *f;
    int index;
} log_worker;

static void *log_work(void *arg) {
    log_worker *w = arg;
    char id[25];
    snprintf(id, sizeof id, "%024d", w->index);
    log_arg a = {id, w->index % 2 == 1};
    mv_store_write(w->f->store, log_tx, &a, NULL);
    return NULL;
}

STORE_TEST(the_change_log_holds_every_committed_change_and_no_rolled_back_one) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "inbox-log.db"));
    int64_t before = latest_change(&f);
    pthread_t t[16];
    log_worker w[16];
    for (int i = 0; i < 16; i++) {
        w[i] = (log_worker){&f, i};
        pthread_create(&t[i], NULL, log_work, &w[i]);
    }
    for (int i = 0; i < 16; i++)
        pthread_join(t[i], NULL);
    mv_change ch[32];
    int n = 0;
    mv_err err = {0};
    CHECK_CODE(mv_changes_read(f.store, before, ch, 32, &n, &err), MV_OK, &err);
    CHECK_INT(n, 8);
    for (int i = 0; i < n; i++)
        CHECK_INT(atoi(ch[i].message_id) % 2, 0);
    fixture_close(&f);
}

STORE_TEST(retention_removes_old_changes_and_records_how_far) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "inbox-gc.db"));
    json_decref(send_to(&f, "ana", "bob", NULL));
    json_decref(send_to(&f, "ana", "bob", NULL));
    int64_t cut = f.now;
    f.now += 10;
    json_decref(send_to(&f, "ana", "bob", NULL));
    int64_t latest = 0, pruned = -1, removed = -1;
    mv_err err = {0};
    CHECK_CODE(mv_changes_latest(f.store, &latest, &pruned, &err), MV_OK, &err);
    CHECK_INT(pruned, 0);
    CHECK_CODE(mv_changes_gc(f.store, cut, &removed, &err), MV_OK, &err);
    CHECK_INT(removed, 2);
    int64_t latest2 = 0;
    CHECK_CODE(mv_changes_latest(f.store, &latest2, &pruned, &err), MV_OK, &err);
    CHECK_INT(latest2, latest);
    CHECK_INT(pruned, latest - 1);
    mv_change ch[4];
    int n = 0;
    CHECK_CODE(mv_changes_read(f.store, 0, ch, 4, &n, &err), MV_OK, &err);
    CHECK_INT(n, 1);
    CHECK_INT(ch[0].id, latest);
    CHECK_CODE(mv_changes_gc(f.store, f.now + 100, &removed, &err), MV_OK, &err);
    json_decref(send_to(&f, "ana", "bob", NULL)); /* ids are never reused */
    CHECK_CODE(mv_changes_latest(f.store, &latest2, &pruned, &err), MV_OK, &err);
    CHECK_INT(latest2, latest + 1);
    CHECK_INT(pruned, latest);
    fixture_close(&f);
}

/* ---- a reader following the log while writers commit out of step ------------------------- */

typedef struct {
    fixture *f;
    int index;
} slow_writer;

static mv_code slow_log_tx(mv_db *db, void *ctx, mv_err *err) {
    slow_writer *w = ctx;
    char id[25];
    snprintf(id, sizeof id, "%024d", w->index);
    mv_code rc = mv__change_add_tx(db, "default", id, MV_CHANGE_UPDATED, NULL, 1, err);
    mv_sleep_ms(w->index % 3); /* commit a little later than the id was drawn */
    return rc;
}

static void *slow_write(void *arg) {
    slow_writer *w = arg;
    for (int i = 0; i < 25; i++) {
        slow_writer one = {w->f, w->index * 100 + i};
        mv_store_write(w->f->store, slow_log_tx, &one, NULL);
    }
    return NULL;
}

STORE_TEST(a_reader_following_the_log_by_id_never_skips_a_change_that_commits_late) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "inbox-follow.db"));
    int64_t cursor = latest_change(&f);
    pthread_t t[8];
    slow_writer w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (slow_writer){&f, i};
        pthread_create(&t[i], NULL, slow_write, &w[i]);
    }
    /* follow the log as a stream does, while the writers run: read after the cursor, move on */
    int seen = 0;
    char *got = calloc(800, 1);
    mv_change ch[64];
    for (int round = 0; round < 100000 && seen < 200; round++) {
        int n = 0;
        mv_err err = {0};
        if (mv_changes_read(f.store, cursor, ch, 64, &n, &err) != MV_OK) break;
        for (int i = 0; i < n; i++) {
            int k = atoi(ch[i].message_id);
            if (k >= 0 && k < 800 && !got[k]) got[k] = 1, seen++;
            cursor = ch[i].id;
        }
        if (n == 0) mv_sleep_ms(1);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    CHECK_INT(seen, 200);
    free(got);
    fixture_close(&f);
}

/* ---- migration 5 on a store that already has messages --------------------------------------- */

static const char SQL_DROP_VIEWERS[] = "DROP TABLE message_viewers";
static const char SQL_DROP_EVENTS[] = "DROP TABLE stream_events";
static const char SQL_DROP_PRUNED[] = "DROP TABLE stream_events_pruned";
static const char SQL_DROP_TALLIES[] = "DROP TABLE inbox_tallies";

static mv_code back_to_4_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    const char *sql[] = {SQL_DROP_VIEWERS, SQL_DROP_EVENTS, SQL_DROP_PRUNED, SQL_DROP_TALLIES};
    for (int i = 0; i < 4; i++) {
        mv_code rc = mv_db_execf(db, sql[i], NULL, err, "");
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

extern const mv_migration mv_migration_inbox, mv_migration_tally_key, mv_migration_snooze;

/* Migration 5, then 15, which rebuilds the table 5 creates (the tallies' role key), and 18, which
 * adds a column to the viewers table 5 creates (snoozed_until). */
static mv_code replay_migration_5_tx(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    bool pg = mv_db_kind(db) == MV_STORE_POSTGRES;
    mv_code rc =
        mv_db_exec(db, pg ? mv_migration_inbox.postgres_sql : mv_migration_inbox.sqlite_sql, err);
    if (rc != MV_OK) return rc;
    rc = mv_db_exec(
        db, pg ? mv_migration_tally_key.postgres_sql : mv_migration_tally_key.sqlite_sql, err);
    if (rc != MV_OK) return rc;
    return mv_db_exec(db, pg ? mv_migration_snooze.postgres_sql : mv_migration_snooze.sqlite_sql,
                      err);
}

STORE_TEST(migrating_a_store_with_messages_fills_the_tallies_from_them) {
    fixture f;
    REQUIRE(fixture_open(&f, kind, "inbox-backfill.db"));
    json_t *a = send_to(&f, "ana", "bob", NULL), *b = send_to(&f, "ana", NULL, "ops");
    json_t *c = send_to(&f, "bob", "bob", "ops"), *d = send_to(&f, "ana", "carol", "hr");
    mv_user bob = {.id = "bob", .roles = OPS, .nroles = 1};
    mv_action_request ar = {.message_id = mv_json_str(d, "id"),
                            .action_cd = "reject",
                            .user = &(mv_user){.id = "carol"}};
    json_t *r = NULL;
    mv_err err = {0};
    CHECK_CODE(mv_action_handle(f.svc, &ar, &r, &err), MV_OK, &err); /* archived: not counted */
    json_decref(r);
    CHECK_CODE(mv_store_write(f.store, back_to_4_tx, NULL, &err), MV_OK, &err);
    /* Later migrations stay applied, so migration 5 is replayed by itself, as it ran on a store
     * that already held messages. */
    CHECK_CODE(mv_store_write(f.store, replay_migration_5_tx, NULL, &err), MV_OK, &err);
    CHECK_COUNTS(counts(&f, &bob, NULL), 3, 3, 3);
    mv_user ana = {.id = "ana"};
    CHECK_COUNTS(counts(&f, &ana, NULL), 2, 2, 2);
    mv_user hr = {.id = "zed", .roles = (const char *[]){"hr", "ops"}, .nroles = 2};
    CHECK_COUNTS(counts(&f, &hr, NULL), 2, 2, 2);
    /* the rebuilt counters go on counting */
    json_t *e = send_to(&f, "ana", NULL, "ops");
    CHECK_COUNTS(counts(&f, &bob, NULL), 4, 4, 4);
    json_decref(e);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(d);
    fixture_close(&f);
}

int main(void) {
    return RUN_TESTS(
        role_members_each_have_their_own_viewer_state,
        marking_again_keeps_the_first_timestamp_and_logs_only_real_changes,
        only_a_user_who_sees_the_message_can_mark_it_archived_and_notifications_included,
        filters_combine_with_the_cursor_without_duplicates_or_gaps_while_messages_arrive,
        counts_follow_every_kind_of_change,
        another_tenants_user_cannot_mark_or_count_and_gets_no_change_of_it,
        sixteen_threads_marking_and_creating_leave_exact_counts,
        the_change_log_holds_every_committed_change_and_no_rolled_back_one,
        retention_removes_old_changes_and_records_how_far,
        a_reader_following_the_log_by_id_never_skips_a_change_that_commits_late,
        migrating_a_store_with_messages_fills_the_tallies_from_them);
}
