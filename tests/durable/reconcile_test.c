/* reconcile_test.c — reconciliation (SEMANTICS §5 durable scenarios 5–9): findings for effects
 * left in doubt, keyset paging, the 1000-record guard, the lost-commit case, saga findings, and
 * the query plans: scans must walk the (state, updated_at) index, never the whole table. */
#include "durable/durable_internal.h"
#include "durable/fixture.h"
#include "store/db.h"

static mv_journal *journal_at(mv_store *s, const mv_clock *clock) {
    mv_journal_options o = {.clock = clock};
    mv_journal *j = NULL;
    mv_err err = {0};
    if (mv_journal_new(s, &o, &j, &err)) fprintf(stderr, "journal: %s\n", err.message);
    return j;
}

static mv_code intent(mv_journal *j, const char *id, const char *cap) {
    mv_effect_intent in = {.effect_id = id, .capability = cap};
    return mv_journal_intent(j, &in, NULL);
}

static int events_seen;
static void count_event(const mv_effect_event *ev, void *ctx) {
    (void)ctx;
    if (ev->stage == MV_STAGE_RECONCILIATION) events_seen++;
}

STORE_TEST(incomplete_and_ambiguous_effects_are_reported_exactly) {
    mv_store *s = fixture_store(kind, "r5.db", NULL, 0);
    REQUIRE(s);
    int64_t now = 10;
    mv_clock clock = mv_manual_clock(&now);
    mv_journal *j = journal_at(s, &clock);
    REQUIRE(j);
    mv_err err = {0};
    REQUIRE(intent(j, "effect_incomplete", "db.write") == MV_OK);
    REQUIRE(intent(j, "effect_ambiguous", "payments.charge") == MV_OK);
    REQUIRE(mv_journal_executing(j, "effect_ambiguous", &err) == MV_OK);
    json_t *findings = NULL;
    events_seen = 0;
    CHECK_CODE(
        mv_reconcile_effects(s, 10, (mv_effect_observer){count_event, NULL}, &findings, &err),
        MV_OK, &err);
    json_t *want = json_pack("[{s:s, s:s, s:s, s:i}, {s:s, s:s, s:s, s:i}]", "effectId",
                             "effect_incomplete", "capability", "db.write", "state", "incomplete",
                             "updatedAt", 10, "effectId", "effect_ambiguous", "capability",
                             "payments.charge", "state", "ambiguous", "updatedAt", 10);
    CHECK(json_equal(findings, want));
    CHECK_INT(events_seen, 2);
    json_decref(want);
    json_decref(findings);
    /* records updated after staleBefore are not yet in doubt */
    CHECK_CODE(mv_reconcile_effects(s, 9, (mv_effect_observer){0}, &findings, &err), MV_OK, &err);
    CHECK_INT(json_array_size(findings), 0);
    json_decref(findings);
    mv_journal_free(j);
    mv_store_close(s);
}

STORE_TEST(pages_of_one_carry_an_opaque_cursor_until_the_last) {
    mv_store *s = fixture_store(kind, "r6.db", NULL, 0);
    REQUIRE(s);
    int64_t now = 10;
    mv_clock clock = mv_manual_clock(&now);
    mv_journal *j = journal_at(s, &clock);
    REQUIRE(j);
    mv_err err = {0};
    REQUIRE(intent(j, "effect_1", "db.write") == MV_OK);
    REQUIRE(intent(j, "effect_2", "db.write") == MV_OK);
    mv_reconcile_options o = {.stale_before = 10, .limit = 1};
    mv_reconcile_page page;
    CHECK_CODE(mv_reconcile_effects_page(s, &o, &page, &err), MV_OK, &err);
    CHECK_INT(json_array_size(page.findings), 1);
    CHECK_STR(mv_json_str(json_array_get(page.findings, 0), "effectId"), "effect_1");
    REQUIRE(page.cursor[0] != '\0');
    char cursor[256];
    snprintf(cursor, sizeof cursor, "%s", page.cursor);
    mv_reconcile_page_clear(&page);
    o.cursor = cursor;
    CHECK_CODE(mv_reconcile_effects_page(s, &o, &page, &err), MV_OK, &err);
    CHECK_INT(json_array_size(page.findings), 1);
    CHECK_STR(mv_json_str(json_array_get(page.findings, 0), "effectId"), "effect_2");
    CHECK_STR(page.cursor, "");
    mv_reconcile_page_clear(&page);
    mv_journal_free(j);
    mv_store_close(s);
}

STORE_TEST(keyset_paging_walks_every_state_once_across_equal_timestamps) {
    mv_store *s = fixture_store(kind, "r6b.db", NULL, 0);
    REQUIRE(s);
    int64_t now = 10;
    mv_clock clock = mv_manual_clock(&now);
    mv_journal *j = journal_at(s, &clock);
    REQUIRE(j);
    mv_err err = {0};
    char id[32];
    for (int i = 0; i < 25; i++) {
        now = 10 + i % 3; /* many equal timestamps */
        snprintf(id, sizeof id, "e%02d", i);
        REQUIRE(intent(j, id, "db.write") == MV_OK);
        if (i % 2) REQUIRE(mv_journal_executing(j, id, &err) == MV_OK);
        if (i % 5 == 0) REQUIRE(mv_journal_failed(j, id, i % 2, "boom", &err) == MV_OK);
    }
    /* expected: i%5 != 0 in admission/executing, i%5 == 0 odd → unknown; even → failed (skipped) */
    int expected = 0;
    for (int i = 0; i < 25; i++)
        expected += i % 5 != 0 || i % 2 == 1;
    mv_reconcile_options o = {.stale_before = 100, .limit = 4};
    char cursor[256] = "";
    int seen = 0, pages = 0;
    char seen_ids[32][8];
    do {
        o.cursor = cursor[0] ? cursor : NULL;
        mv_reconcile_page page;
        REQUIRE(mv_reconcile_effects_page(s, &o, &page, &err) == MV_OK);
        size_t k;
        json_t *f;
        json_array_foreach(page.findings, k, f) {
            const char *eid = mv_json_str(f, "effectId");
            for (int x = 0; x < seen; x++)
                CHECK(strcmp(seen_ids[x], eid) != 0);
            if (seen < 32) snprintf(seen_ids[seen], 8, "%s", eid);
            seen++;
        }
        snprintf(cursor, sizeof cursor, "%s", page.cursor);
        mv_reconcile_page_clear(&page);
        pages++;
    } while (cursor[0] && pages < 50);
    CHECK_INT(seen, expected);
    CHECK_INT(pages, (expected + 3) / 4);
    mv_journal_free(j);
    mv_store_close(s);
}

STORE_TEST(finished_effects_leave_only_the_pending_one) {
    mv_store *s = fixture_store(kind, "r7.db", NULL, 0);
    REQUIRE(s);
    mv_journal *j = journal_at(s, NULL);
    REQUIRE(j);
    mv_err err = {0};
    REQUIRE(intent(j, "effect_committed", "db.write") == MV_OK);
    REQUIRE(mv_journal_executing(j, "effect_committed", &err) == MV_OK);
    REQUIRE(mv_journal_committed(j, "effect_committed", &err) == MV_OK);
    REQUIRE(intent(j, "effect_failed", "db.write") == MV_OK);
    REQUIRE(mv_journal_failed(j, "effect_failed", false, "admission_failed", &err) == MV_OK);
    REQUIRE(intent(j, "effect_pending", "db.write") == MV_OK);
    json_t *findings;
    CHECK_CODE(
        mv_reconcile_effects(s, mv_now_ms() + 1000, (mv_effect_observer){0}, &findings, &err),
        MV_OK, &err);
    CHECK_INT(json_array_size(findings), 1);
    CHECK_STR(mv_json_str(json_array_get(findings, 0), "effectId"), "effect_pending");
    json_decref(findings);
    mv_journal_free(j);
    mv_store_close(s);
}

static const char SQL_BULK_EFFECT[] =
    "INSERT INTO effects (effect_id, capability, state, created_at, updated_at, version) "
    "VALUES (?, 'db.write', 'admission', 1, 1, 1)";

static mv_code bulk_fn(mv_db *db, void *ctx, mv_err *err) {
    int n = *(int *)ctx;
    char id[32];
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "bulk_%04d", i);
        mv_code rc = mv_db_execf(db, SQL_BULK_EFFECT, NULL, err, "s", id);
        if (rc) return rc;
    }
    return MV_OK;
}

STORE_TEST(more_than_a_thousand_findings_need_the_paged_call) {
    mv_store *s = fixture_store(kind, "r8.db", NULL, 0);
    REQUIRE(s);
    mv_err err = {0};
    int n = 1001;
    REQUIRE(mv_store_write(s, bulk_fn, &n, &err) == MV_OK);
    json_t *findings = NULL;
    CHECK_CODE(mv_reconcile_effects(s, 10, (mv_effect_observer){0}, &findings, &err),
               MV_INVALID_ARGUMENT, &err);
    CHECK(strstr(err.message, "use mv_reconcile_effects_page()") != NULL);
    CHECK(findings == NULL);
    mv_reconcile_options o = {.stale_before = 10, .limit = 1001};
    mv_reconcile_page page;
    CHECK_CODE(mv_reconcile_effects_page(s, &o, &page, &err), MV_INVALID_ARGUMENT, &err);
    CHECK_STR(err.message, "reconciliation limit must be between 1 and 1000");
    o.limit = -1;
    CHECK_CODE(mv_reconcile_effects_page(s, &o, &page, &err), MV_INVALID_ARGUMENT, &err);
    o.limit = 0;
    const char *bad[] = {"0", "not a cursor", "MS4xLg", "OS4xLmE", "MC4tMS5h"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.cursor = bad[i];
        CHECK_CODE(mv_reconcile_effects_page(s, &o, &page, &err), MV_INVALID_ARGUMENT, &err);
        CHECK_STR(err.message, "invalid reconciliation cursor");
    }
    o.cursor = NULL;
    CHECK_CODE(mv_reconcile_effects_page(s, &o, &page, &err), MV_OK, &err);
    CHECK_INT(json_array_size(page.findings), 100); /* the default limit */
    mv_reconcile_page_clear(&page);
    mv_store_close(s);
}

static mv_code refuse_commit(const mv_effect_context *c, const json_t *r, void *ctx, mv_err *err) {
    (void)r;
    (void)ctx;
    /* another server moved the record between our read and our compare-and-set */
    return mv_err_set(err, MV_EFFECT_TRANSITION,
                      "durable effect %s: executing->committed transition was rejected",
                      c->effect_id);
}

static mv_code count_exec(const mv_effect_context *c, void *ctx, json_t **result, mv_err *err) {
    (void)c;
    (void)result;
    (void)err;
    (*(int *)ctx)++;
    return MV_OK;
}

STORE_TEST(lost_commit_leaves_the_effect_unknown_and_reconciliation_reports_it) {
    mv_store *s = fixture_store(kind, "r9.db", NULL, 0);
    REQUIRE(s);
    mv_journal *j = journal_at(s, NULL);
    REQUIRE(j);
    mv_effect_scope scope = {0};
    mv_effect_transitions t = mv_journal_transitions(j);
    t.committed = refuse_commit;
    mv_effect_input in = {
        .effect_id = "effect_lost", .capability = "payments.charge", .transitions = t};
    int runs = 0;
    mv_err err = {0};
    CHECK_CODE(mv_effect_run(&scope, &in, count_exec, &runs, NULL, &err), MV_EFFECT_TRANSITION,
               &err);
    CHECK_INT(runs, 1);
    mv_effect_record rec;
    CHECK_CODE(mv_journal_get(j, "effect_lost", &rec, &err), MV_OK, &err);
    CHECK_STR(mv_effect_state_name(rec.state), "unknown");
    CHECK(mv_evidence_ambiguous(&scope.evidence));
    json_t *findings;
    CHECK_CODE(
        mv_reconcile_effects(s, mv_now_ms() + 1000, (mv_effect_observer){0}, &findings, &err),
        MV_OK, &err);
    CHECK_INT(json_array_size(findings), 1);
    CHECK_STR(mv_json_str(json_array_get(findings, 0), "state"), "ambiguous");
    json_decref(findings);
    mv_journal_free(j);
    mv_store_close(s);
}

static const char SQL_PUT_SAGA[] =
    "INSERT INTO sagas (saga_id, definition, state, input, input_fingerprint, steps, max_attempts, "
    "created_at, updated_at, version) VALUES (?, 'd', ?, '{}', '', ?, 3, ?, ?, 1)";

static mv_code put_sagas(mv_db *db, void *ctx, mv_err *err) {
    (void)ctx;
    struct {
        const char *id, *state, *steps;
        int64_t at;
    } rows[] = {
        {"s_running_fresh", "running", "[]", 50},
        {"s_running_stale", "running", "[]", 5},
        {"s_comp", "compensating",
         "[{\"name\":\"a\",\"effectId\":\"e1\",\"compensationEffectId\":\"c1\","
         "\"state\":\"compensating\",\"attempts\":1}]",
         50},
        {"s_review", "manual-review", "[]", 50},
        {"s_done", "completed", "[]", 1},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        mv_code rc = mv_db_execf(db, SQL_PUT_SAGA, NULL, err, "sssii", rows[i].id, rows[i].state,
                                 rows[i].steps, rows[i].at, rows[i].at);
        if (rc) return rc;
    }
    return MV_OK;
}

STORE_TEST(saga_findings_name_ambiguity_review_and_staleness) {
    mv_store *s = fixture_store(kind, "rs.db", NULL, 0);
    REQUIRE(s);
    mv_err err = {0};
    REQUIRE(mv_store_write(s, put_sagas, NULL, &err) == MV_OK);
    json_t *findings;
    CHECK_CODE(mv_reconcile_sagas(s, 10, &findings, &err), MV_OK, &err);
    json_t *want = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s, s:s, s:s}, {s:s, s:s, s:s}]",
                             "sagaId", "s_running_stale", "state", "running", "reason",
                             "stale-running", "sagaId", "s_comp", "state", "compensating", "step",
                             "a", "effectId", "c1", "reason", "ambiguous-compensation", "sagaId",
                             "s_review", "state", "manual-review", "reason", "manual-review");
    CHECK(json_equal(findings, want));
    json_decref(want);
    json_decref(findings);
    mv_store_close(s);
}

/* ---- query plans ------------------------------------------------------------------------- */

static char explain_effects[1024], explain_sagas[1024];

typedef struct {
    const char *sql, *index, *table;
    int uses_index, full_scans, temp_sorts;
} plan;

static mv_code plan_fn(mv_db *db, void *ctx, mv_err *err) {
    plan *p = ctx;
    mv_stmt *st;
    mv_code rc = mv_db_prepare(db, p->sql, &st, err);
    if (rc) return rc;
    char scan_table[64];
    snprintf(scan_table, sizeof scan_table, "SCAN %s", p->table);
    while (mv_stmt_step(st, err) == 1) {
        const char *detail = mv_stmt_text(st, 3);
        if (!detail) continue;
        if (strstr(detail, p->index)) p->uses_index++;
        if (strstr(detail, scan_table) && !strstr(detail, "INDEX")) p->full_scans++;
        if (strstr(detail, "TEMP B-TREE")) p->temp_sorts++;
    }
    mv_stmt_done(st);
    return MV_OK;
}

/* SQLite's EXPLAIN QUERY PLAN: SQLite only. */
TEST(reconciliation_scans_use_the_state_updated_index) {
    mv_store *s = fixture_store("sqlite", "plan.db", NULL, 0);
    REQUIRE(s);
    mv_err err = {0};
    int n = 200;
    REQUIRE(mv_store_write(s, bulk_fn, &n, &err) == MV_OK);
    snprintf(explain_effects, sizeof explain_effects, "EXPLAIN QUERY PLAN %s", mv_sql_scan_effects);
    snprintf(explain_sagas, sizeof explain_sagas, "EXPLAIN QUERY PLAN %s", mv_sql_scan_sagas);
    plan pe = {
        .sql = explain_effects, .index = "USING INDEX effects_state_updated", .table = "effects"};
    plan ps = {.sql = explain_sagas, .index = "USING INDEX sagas_state_created", .table = "sagas"};
    REQUIRE(mv_store_read(s, plan_fn, &pe, &err) == MV_OK);
    REQUIRE(mv_store_read(s, plan_fn, &ps, &err) == MV_OK);
    CHECK_INT(pe.uses_index, 1);
    CHECK_INT(pe.full_scans, 0);
    CHECK_INT(pe.temp_sorts, 0);
    CHECK_INT(ps.uses_index, 1);
    CHECK_INT(ps.full_scans, 0);
    CHECK_INT(ps.temp_sorts, 0);
    mv_store_close(s);
}

int main(void) {
    return RUN_TESTS(incomplete_and_ambiguous_effects_are_reported_exactly,
                     pages_of_one_carry_an_opaque_cursor_until_the_last,
                     keyset_paging_walks_every_state_once_across_equal_timestamps,
                     finished_effects_leave_only_the_pending_one,
                     more_than_a_thousand_findings_need_the_paged_call,
                     lost_commit_leaves_the_effect_unknown_and_reconciliation_reports_it,
                     saga_findings_name_ambiguity_review_and_staleness,
                     reconciliation_scans_use_the_state_updated_index);
}
