/* pg.c — the PostgreSQL driver (libpq).
 *
 * Statements are written once with `?` placeholders; prepare rewrites them to $1..$n (leaving
 * `?` alone inside string literals, quoted identifiers and comments) and prepares them on the
 * server under a name unique to the connection. Parameters travel as text and the server infers
 * their types from the statement, so `?` must stand where PostgreSQL can infer a type (write
 * `CAST(? AS TEXT) IS NULL`, not `? IS NULL`). Results are buffered: the first step executes,
 * later steps walk the rows.
 *
 * Write transactions are READ COMMITTED (every contested change is a conditional UPDATE, whose
 * row count is exact at that level); read transactions are REPEATABLE READ READ ONLY so the
 * callback sees one consistent snapshot, as store.h promises. A lost connection (server restart,
 * pg_terminate_backend, network) fails the statement in flight with MV_STORE_UNAVAILABLE and
 * marks the connection broken; the pool then reconnects on the next checkout. So does a server
 * that turned read-only under the connection (SQLSTATE 25006: a switchover demoted it): with a
 * multi-host URL and target_session_attrs=read-write, libpq's next connect tries the hosts in
 * order and keeps the one that takes writes, so a failover heals without a restart.
 *
 * Round trips: every statement goes out in libpq's pipeline mode. BEGIN is not sent when the
 * transaction begins but queued in front of its first statement; statements whose result nobody
 * reads (send, db.h's mv_db_execf_later) are only queued; a statement that needs its result, or
 * COMMIT / ROLLBACK, joins the queue and is followed by a Sync, which flushes everything and
 * waits for every answer in order. A transaction of deferred writes therefore costs one round
 * trip. The first error in a flush is the one reported (the server skips the rest of the flush:
 * PGRES_PIPELINE_ABORTED); the transaction is then failed on the server, so the COMMIT that
 * follows answers ROLLBACK and is reported with that first error's code. A statement is
 * prepared on the server in the same flush as its first execution. A read transaction's COMMIT
 * is sent without waiting for its answer (read with the next flush); statements asked for after
 * the commit (a NOTIFY) follow the COMMIT in its flush, outside the transaction. */
#include <ctype.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/driver.h"

typedef struct pg_stmt {
    char name[24];
    char *sql; /* rewritten to $n placeholders */
    int nparams;
    bool prepared; /* on the server (or queued to be) */
    PGresult *res; /* the buffered result of the last execution */
    int row, nrows;
} pg_stmt;

/* One result the server owes for what is queued in the pipeline, in order. */
typedef struct owed {
    pg_stmt *prepare; /* a Parse of this statement (its failure un-prepares it) */
    bool keep;        /* the result the caller waits for */
    bool after;       /* sent after the COMMIT: its failure does not undo the commit */
    mv_code on_unique;
} owed;

/* The most results queued before a flush is forced: bounds memory and keeps a blocking
 * connection from filling both socket buffers. */
#define PIPELINE_MAX 256

typedef struct pg_conn {
    PGconn *pg;
    bool broken;
    unsigned next_stmt;       /* for prepared statement names */
    const char *begin_sql;    /* BEGIN not sent yet: goes out with the first statement */
    owed q[PIPELINE_MAX + 8]; /* + BEGIN, a Parse, the statement; COMMIT and what follows it */
    int nq;
    mv_err tx_err; /* the first error of the open transaction (its code is reported at COMMIT) */
    uint64_t round_trips;
    bool read_tx;         /* the open transaction is a read transaction */
    bool unread_commit;   /* a read COMMIT or a ROLLBACK went out; its answer is read later */
    const char *after[4]; /* statements to send right after this transaction's COMMIT */
    int nafter;
} pg_conn;

static void silence_notices(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

/* libpq's messages end in a newline and may span lines ("…failed: …\n\tIs the server
 * running…"): makes them one line. */
static const char *trimmed(const char *msg, char *buf, size_t size) {
    if (!msg || !*msg) msg = "unknown error";
    size_t n = 0;
    for (const char *p = msg; *p && n + 1 < size; p++) {
        if (*p == '\n' || *p == '\t' || *p == '\r') {
            if (n > 0 && buf[n - 1] != ' ') buf[n++] = ' ';
        } else {
            buf[n++] = *p;
        }
    }
    while (n > 0 && buf[n - 1] == ' ')
        n--;
    buf[n] = '\0';
    return buf;
}

/* SQLSTATEs that mean "the store is unavailable right now, try again": connection exceptions
 * (08…), server shutting down or starting (57P01-57P03), statement timeout (57014), resources
 * exhausted (53…), serialization failures and deadlocks (40001, 40P01), lock timeouts (55P03). */
static bool sqlstate_unavailable(const char *st) {
    if (!st) return false;
    return strncmp(st, "08", 2) == 0 || strncmp(st, "53", 2) == 0 || strcmp(st, "57P01") == 0 ||
           strcmp(st, "57P02") == 0 || strcmp(st, "57P03") == 0 || strcmp(st, "57014") == 0 ||
           strcmp(st, "40001") == 0 || strcmp(st, "40P01") == 0 || strcmp(st, "55P03") == 0;
}

/* Fills err from a failed result (res may be NULL) and says whether the connection is gone.
 * An error without a SQLSTATE was made by libpq itself, not by the server ("server closed the
 * connection unexpectedly", "no connection to the server", a failed send): the connection is
 * gone even when PQstatus has not noticed yet — store_unavailable, never internal. */
static mv_code pg_error(pg_conn *c, const PGresult *res, mv_err *err) {
    char buf[400];
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (!state || PQstatus(c->pg) != CONNECTION_OK || strncmp(state, "08", 2) == 0 ||
        strncmp(state, "57P0", 4) == 0) {
        c->broken = true;
        const char *msg = res ? PQresultErrorMessage(res) : "";
        if (!msg || !*msg) msg = PQerrorMessage(c->pg);
        return mv_err_set(err, MV_STORE_UNAVAILABLE, "postgres: connection lost: %s",
                          trimmed(msg, buf, sizeof buf));
    }
    const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    if (!primary) primary = res ? PQresultErrorMessage(res) : PQerrorMessage(c->pg);
    trimmed(primary, buf, sizeof buf);
    if (strcmp(state, "25006") == 0 && !c->read_tx) { /* (in a read transaction: a bug) */
        /* "cannot execute INSERT in a read-only transaction": the server this connection reached
         * is no longer the primary (a switchover in progress, a demoted or read-only server).
         * Dropped, so the next checkout connects again — with target_session_attrs=read-write,
         * to whichever host now takes writes. */
        c->broken = true;
        return mv_err_set(err, MV_STORE_UNAVAILABLE, "postgres: the server is read-only: %s", buf);
    }
    mv_code code = sqlstate_unavailable(state) ? MV_STORE_UNAVAILABLE : MV_INTERNAL;
    return mv_err_set(err, code, "postgres: %s (SQLSTATE %s)", buf, state);
}

static mv_code pg_connect(const char *url, const mv_store_options *o, void **out, mv_err *err) {
    char buf[400];
    char *perr = NULL;
    PQconninfoOption *parsed = PQconninfoParse(url, &perr);
    if (!parsed) {
        mv_err_set(err, MV_INVALID_ARGUMENT, "invalid PostgreSQL URL: %s",
                   trimmed(perr ? perr : "out of memory", buf, sizeof buf));
        PQfreemem(perr);
        return MV_INVALID_ARGUMENT;
    }
    PQconninfoFree(parsed);

    /* Later keywords override earlier ones, so the URL's own settings win over these defaults. */
    const char *keys[] = {"connect_timeout", "fallback_application_name", "dbname", NULL};
    const char *vals[] = {"10", "missive", url, NULL};
    pg_conn *c = calloc(1, sizeof *c);
    if (!c) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    c->pg = PQconnectdbParams(keys, vals, 1);
    if (!c->pg) {
        free(c);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    PQsetNoticeProcessor(c->pg, silence_notices, NULL);
    if (PQstatus(c->pg) != CONNECTION_OK) {
        mv_err_set(err, MV_STORE_UNAVAILABLE, "postgres: cannot connect: %s",
                   trimmed(PQerrorMessage(c->pg), buf, sizeof buf));
        PQfinish(c->pg);
        free(c);
        return MV_STORE_UNAVAILABLE;
    }
    char set[96];
    snprintf(set, sizeof set, "SET statement_timeout = %d", o->statement_timeout_ms);
    PGresult *res = PQexec(c->pg, set);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        mv_code rc = pg_error(c, res, err);
        PQclear(res);
        PQfinish(c->pg);
        free(c);
        return rc;
    }
    PQclear(res);
    *out = c;
    return MV_OK;
}

static void pg_disconnect(void *conn) {
    pg_conn *c = conn;
    if (!c) return;
    PQfinish(c->pg);
    free(c);
}

static mv_code lost(pg_conn *c, mv_err *err) {
    char buf[400];
    c->broken = true;
    return mv_err_set(err, MV_STORE_UNAVAILABLE, "postgres: connection lost: %s",
                      trimmed(PQerrorMessage(c->pg), buf, sizeof buf));
}

/* Remembers the transaction's first error (reported again if the caller carries on to COMMIT). */
static mv_code tx_failed(pg_conn *c, const mv_err *e, mv_err *err) {
    if (c->tx_err.code == MV_OK) mv_err_copy(&c->tx_err, e);
    if (err) mv_err_copy(err, e);
    return e->code;
}

static mv_code enter_pipeline(pg_conn *c, mv_err *err) {
    if (PQpipelineStatus(c->pg) == PQ_PIPELINE_OFF && !PQenterPipelineMode(c->pg))
        return lost(c, err);
    return MV_OK;
}

/* Queues the text of a statement without parameters (BEGIN, COMMIT, ROLLBACK). */
static mv_code queue_text(pg_conn *c, const char *sql, bool keep, mv_err *err) {
    mv_code rc = enter_pipeline(c, err);
    if (rc != MV_OK) return rc;
    if (!PQsendQueryParams(c->pg, sql, 0, NULL, NULL, NULL, NULL, 0)) return lost(c, err);
    c->q[c->nq++] = (owed){.keep = keep};
    return MV_OK;
}

static mv_code queue_begin(pg_conn *c, mv_err *err) {
    if (!c->begin_sql) return MV_OK;
    const char *sql = c->begin_sql;
    c->begin_sql = NULL;
    return queue_text(c, sql, false, err);
}

/* Reads the answer to a read transaction's COMMIT or a ROLLBACK sent without waiting (see
 * pg_exec): it arrives before anything sent after it. */
static mv_code drain_unread(pg_conn *c, mv_err *err) {
    if (!c->unread_commit) return MV_OK;
    c->unread_commit = false;
    PGresult *res = PQgetResult(c->pg);
    bool ok = res && PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
    if (ok && (res = PQgetResult(c->pg)) != NULL) { /* the end of the COMMIT's results */
        PQclear(res);
        ok = false;
    }
    res = ok ? PQgetResult(c->pg) : NULL;
    ok = ok && res && PQresultStatus(res) == PGRES_PIPELINE_SYNC;
    PQclear(res);
    return ok ? MV_OK : lost(c, err);
}

/* Sends a Sync (the flush) and reads every queued result in order. *kept (may be NULL) gets the
 * result of the entry queued with keep. Returns the first error of the flush. Leaves pipeline
 * mode unless the connection broke. */
static mv_code sync_pipeline(pg_conn *c, PGresult **kept, mv_err *err) {
    mv_err first = {0};
    int n = c->nq;
    c->nq = 0;
    c->round_trips++;
    if (!PQpipelineSync(c->pg) || drain_unread(c, &first) != MV_OK) {
        if (first.code == MV_OK) lost(c, &first);
        return tx_failed(c, &first, err);
    }
    for (int i = 0; i < n; i++) {
        PGresult *res = PQgetResult(c->pg);
        if (c->q[i].after && (!res || PQresultStatus(res) == PGRES_FATAL_ERROR ||
                              PQresultStatus(res) == PGRES_PIPELINE_ABORTED)) {
            /* the transaction's own answers are all in: a failure now only loses a wake-up */
            PQclear(res);
            if (!res || PQstatus(c->pg) != CONNECTION_OK) c->broken = true;
            if (c->broken) return first.code == MV_OK ? MV_OK : tx_failed(c, &first, err);
            if ((res = PQgetResult(c->pg)) != NULL) {
                PQclear(res);
                c->broken = true;
                return first.code == MV_OK ? MV_OK : tx_failed(c, &first, err);
            }
            continue;
        }
        if (!res) {
            if (first.code == MV_OK) lost(c, &first);
            c->broken = true;
            return tx_failed(c, &first, err);
        }
        ExecStatusType st = PQresultStatus(res);
        if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
            if (c->q[i].keep && kept)
                *kept = res;
            else
                PQclear(res);
        } else {
            if (c->q[i].prepare) c->q[i].prepare->prepared = false;
            if (st != PGRES_PIPELINE_ABORTED && first.code == MV_OK) {
                const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
                pg_error(c, res, &first);
                if (c->q[i].on_unique != MV_OK && state && strcmp(state, "23505") == 0)
                    first.code = c->q[i].on_unique;
            }
            PQclear(res);
            if (PQstatus(c->pg) != CONNECTION_OK) c->broken = true;
            if (c->broken) return tx_failed(c, &first, err);
        }
        if ((res = PQgetResult(c->pg)) != NULL) { /* each result ends with a NULL */
            PQclear(res);
            if (first.code == MV_OK)
                mv_err_set(&first, MV_STORE_UNAVAILABLE, "postgres: unexpected result");
            c->broken = true;
            return tx_failed(c, &first, err);
        }
    }
    PGresult *res = PQgetResult(c->pg);
    bool synced = res && PQresultStatus(res) == PGRES_PIPELINE_SYNC;
    PQclear(res);
    if (!synced || !PQexitPipelineMode(c->pg)) {
        if (first.code == MV_OK && !(n > 0 && c->q[n - 1].after)) lost(c, &first);
        c->broken = true;
    }
    return first.code == MV_OK ? MV_OK : tx_failed(c, &first, err);
}

/* Flushes what is queued, if anything (BEGIN included): before a synchronous command. */
static mv_code flush_queue(pg_conn *c, mv_err *err) {
    mv_code rc = MV_OK;
    if (c->begin_sql) rc = queue_begin(c, err);
    if (rc == MV_OK && c->nq > 0) rc = sync_pipeline(c, NULL, err);
    return rc;
}

/* PostgreSQL answers COMMIT of a transaction that hit an error with a silent ROLLBACK: that is
 * reported with the code of the statement that failed it, when this connection saw it. */
static mv_code rolled_back(pg_conn *c, mv_err *err) {
    bool known = c->tx_err.code != MV_OK;
    return mv_err_set(err, known ? c->tx_err.code : MV_INTERNAL,
                      "postgres: the transaction was rolled back because a statement in it "
                      "failed%s%.400s",
                      known ? ": " : "", known ? c->tx_err.message : "");
}

static mv_code pg_exec(void *conn, const char *sql, mv_err *err) {
    pg_conn *c = conn;
    if (c->broken) {
        char buf[400];
        return mv_err_set(err, MV_STORE_UNAVAILABLE, "postgres: connection lost: %s",
                          trimmed(PQerrorMessage(c->pg), buf, sizeof buf));
    }
    bool commit = strcmp(sql, "COMMIT") == 0, rollback = strcmp(sql, "ROLLBACK") == 0;
    mv_code rc;
    int nafter = c->nafter;
    if (commit || rollback) c->nafter = 0;
    if ((commit || rollback) && c->begin_sql && c->nq == 0) {
        c->begin_sql = NULL; /* nothing was sent: there is no transaction to end */
        return MV_OK;
    }
    if (c->nq == 0 && ((commit && c->read_tx && nafter == 0 && c->tx_err.code == MV_OK) ||
                       (rollback && !c->unread_commit))) {
        /* Nothing to lose in a read transaction that saw no error, nor in a rollback: the COMMIT
         * or ROLLBACK goes out now and ends the transaction on the server at once, and its
         * answer is read with the connection's next flush. */
        if ((rc = queue_text(c, sql, false, err)) != MV_OK) return rc;
        c->nq = 0;
        if (!PQpipelineSync(c->pg)) return lost(c, err);
        c->unread_commit = true;
        return MV_OK;
    }
    if ((commit && (c->nq > 0 || nafter > 0)) || (rollback && c->nq > 0)) {
        /* the queued statements and the end of the transaction in one flush (and after a
         * COMMIT, what waits for it) */
        PGresult *res = NULL;
        rc = queue_text(c, sql, true, err);
        for (int i = 0; commit && rc == MV_OK && i < nafter; i++)
            if ((rc = queue_text(c, c->after[i], false, err)) == MV_OK)
                c->q[c->nq - 1].after = true;
        if (rc == MV_OK) rc = sync_pipeline(c, &res, err);
        if (rc == MV_OK && commit && strcmp(PQcmdStatus(res), "ROLLBACK") == 0)
            rc = rolled_back(c, err);
        PQclear(res);
        if (rollback && !c->broken && PQtransactionStatus(c->pg) != PQTRANS_IDLE)
            return pg_exec(conn, sql, NULL); /* the ROLLBACK itself was skipped by an error */
        return rollback ? MV_OK : rc;
    }
    if ((rc = flush_queue(c, err)) != MV_OK) return rc;
    if (c->unread_commit) {
        if ((rc = drain_unread(c, err)) != MV_OK) return rc;
        if (!PQexitPipelineMode(c->pg)) return lost(c, err);
    }
    c->round_trips++;
    PGresult *res = PQexec(c->pg, sql);
    ExecStatusType st = PQresultStatus(res);
    rc = MV_OK;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY) {
        rc = pg_error(c, res, err);
    } else if (commit && strcmp(PQcmdStatus(res), "ROLLBACK") == 0) {
        rc = rolled_back(c, err);
    }
    PQclear(res);
    return rc;
}

static mv_code pg_begin(void *conn, bool write, mv_err *err) {
    pg_conn *c = conn;
    (void)err;
    mv_err_clear(&c->tx_err);
    c->read_tx = !write;
    c->nafter = 0;
    c->begin_sql = write ? "BEGIN" : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
    return MV_OK;
}

static bool is_word_char(char ch) { return isalnum((unsigned char)ch) || ch == '_'; }

/* Rewrites `?` to $1..$n outside literals, quoted identifiers and comments. Returns the new
 * string (malloc'd) and the placeholder count, or NULL when out of memory. */
static char *rewrite_placeholders(const char *sql, int *count) {
    size_t len = strlen(sql);
    _Static_assert(MV_STMT_MAX_PARAMS < 1000, "a placeholder grows to more than \"$NNN\"");
    char *out = malloc(len * 4 + 1); /* "?" → at most "$NNN" */
    if (!out) return NULL;
    char *o = out;
    int n = 0;
    for (size_t i = 0; i < len;) {
        char ch = sql[i];
        if (ch == '\'' || ch == '"') {
            /* E'…' strings escape with backslashes; '' and "" are doubled quotes, which this
             * loop handles as a close immediately followed by an open. */
            bool backslash = ch == '\'' && i > 0 && (sql[i - 1] == 'E' || sql[i - 1] == 'e') &&
                             (i < 2 || !is_word_char(sql[i - 2]));
            *o++ = sql[i++];
            while (i < len && sql[i] != ch) {
                if (backslash && sql[i] == '\\' && i + 1 < len) *o++ = sql[i++];
                *o++ = sql[i++];
            }
            if (i < len) *o++ = sql[i++];
        } else if (ch == '-' && sql[i + 1] == '-') {
            while (i < len && sql[i] != '\n')
                *o++ = sql[i++];
        } else if (ch == '/' && sql[i + 1] == '*') {
            *o++ = sql[i++];
            *o++ = sql[i++];
            while (i < len && !(sql[i] == '*' && sql[i + 1] == '/'))
                *o++ = sql[i++];
            if (i < len) {
                *o++ = sql[i++];
                *o++ = sql[i++];
            }
        } else if (ch == '?') {
            n++;
            o += sprintf(o, "$%d", n);
            i++;
        } else {
            *o++ = sql[i++];
        }
    }
    *o = '\0';
    *count = n;
    return out;
}

static mv_code pg_prepare(void *conn, const char *sql, void **out, mv_err *err) {
    pg_conn *c = conn;
    pg_stmt *st = calloc(1, sizeof *st);
    if (!st) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    st->sql = rewrite_placeholders(sql, &st->nparams);
    if (!st->sql) {
        free(st);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    if (st->nparams > MV_STMT_MAX_PARAMS) {
        mv_code rc = mv_err_set(err, MV_INTERNAL, "statement has %d placeholders, more than %d",
                                st->nparams, MV_STMT_MAX_PARAMS);
        free(st->sql);
        free(st);
        return rc;
    }
    /* prepared on the server in the flush of its first execution */
    snprintf(st->name, sizeof st->name, "mv_%u", ++c->next_stmt);
    *out = st;
    return MV_OK;
}

/* The server-side prepared statement lives until the connection closes (the generic layer
 * finalizes statements only right before disconnecting). */
static void pg_finalize(void *stmt) {
    pg_stmt *st = stmt;
    if (!st) return;
    PQclear(st->res);
    free(st->sql);
    free(st);
}

/* Queues one execution of st (BEGIN and the statement's Parse first when still owed). */
static mv_code queue_stmt(pg_conn *c, pg_stmt *st, const mv_param *params, int n, bool keep,
                          mv_code on_unique, mv_err *err) {
    mv_code rc;
    if (c->nq >= PIPELINE_MAX && (rc = sync_pipeline(c, NULL, err)) != MV_OK) return rc;
    if ((rc = enter_pipeline(c, err)) != MV_OK || (rc = queue_begin(c, err)) != MV_OK) return rc;
    if (!st->prepared) {
        if (!PQsendPrepare(c->pg, st->name, st->sql, 0, NULL)) return lost(c, err);
        st->prepared = true;
        c->q[c->nq++] = (owed){.prepare = st};
    }
    /* Like SQLite: unbound placeholders are NULL, bindings beyond the last are ignored. */
    char ints[MV_STMT_MAX_PARAMS][24];
    const char *values[MV_STMT_MAX_PARAMS];
    for (int i = 0; i < st->nparams; i++) {
        values[i] = NULL;
        if (i >= n) continue;
        if (params[i].type == MV_PARAM_TEXT) {
            values[i] = params[i].s;
        } else if (params[i].type == MV_PARAM_INT) {
            snprintf(ints[i], sizeof ints[i], "%lld", (long long)params[i].i);
            values[i] = ints[i];
        }
    }
    if (!PQsendQueryPrepared(c->pg, st->name, st->nparams, values, NULL, NULL, 0))
        return lost(c, err);
    c->q[c->nq++] = (owed){.keep = keep, .on_unique = on_unique};
    return MV_OK;
}

static mv_code pg_after_commit(void *conn, const char *sql, mv_err *err) {
    pg_conn *c = conn;
    for (int i = 0; i < c->nafter; i++)
        if (c->after[i] == sql) return MV_OK; /* once per transaction is enough */
    if (c->nafter == (int)(sizeof c->after / sizeof c->after[0]))
        return mv_err_set(err, MV_INTERNAL, "too many statements after the commit");
    c->after[c->nafter++] = sql;
    return MV_OK;
}

static mv_code pg_send(void *conn, void *stmt, const mv_param *params, int n, mv_code on_unique,
                       mv_err *err) {
    pg_conn *c = conn;
    if (c->broken) return lost(c, err);
    mv_code rc = queue_stmt(c, stmt, params, n, false, on_unique, err);
    if (rc != MV_OK && c->nq > 0) sync_pipeline(c, NULL, NULL); /* leave no half-queued flush */
    return rc;
}

static int pg_step(void *conn, void *stmt, bool first, const mv_param *params, int n,
                   int64_t *changes, mv_err *err) {
    pg_conn *c = conn;
    pg_stmt *st = stmt;
    if (first) {
        PQclear(st->res);
        st->res = NULL;
        if (c->broken) {
            lost(c, err);
            return -1;
        }
        PGresult *res = NULL;
        mv_code rc = queue_stmt(c, st, params, n, true, MV_OK, err);
        if (rc != MV_OK) {
            if (c->nq > 0) sync_pipeline(c, NULL, NULL);
            return -1;
        }
        if (sync_pipeline(c, &res, err) != MV_OK) {
            PQclear(res);
            return -1;
        }
        ExecStatusType status = PQresultStatus(res);
        st->res = res;
        st->row = -1;
        st->nrows = status == PGRES_TUPLES_OK ? PQntuples(res) : 0;
        const char *tuples = PQcmdTuples(res);
        *changes = tuples && *tuples ? strtoll(tuples, NULL, 10) : 0;
    }
    if (!st->res) return 0;
    if (st->row + 1 < st->nrows) {
        st->row++;
        return 1;
    }
    st->row = st->nrows;
    return 0;
}

static bool has_cell(const pg_stmt *st, int col) {
    return st->res && st->row >= 0 && st->row < st->nrows && col >= 0 && col < PQnfields(st->res);
}

static const char *pg_text(void *stmt, int col) {
    pg_stmt *st = stmt;
    if (!has_cell(st, col) || PQgetisnull(st->res, st->row, col)) return NULL;
    return PQgetvalue(st->res, st->row, col);
}

static int64_t pg_integer(void *stmt, int col) {
    const char *v = pg_text(stmt, col);
    if (!v) return 0;
    if (strcmp(v, "t") == 0) return 1; /* a boolean expression, read as 0/1 like SQLite */
    if (strcmp(v, "f") == 0) return 0;
    return strtoll(v, NULL, 10);
}

static bool pg_is_null(void *stmt, int col) {
    pg_stmt *st = stmt;
    return !has_cell(st, col) || PQgetisnull(st->res, st->row, col);
}

static int pg_column_count(void *stmt) {
    pg_stmt *st = stmt;
    return st->res ? PQnfields(st->res) : 0;
}

static void pg_reset(void *stmt) {
    pg_stmt *st = stmt;
    PQclear(st->res);
    st->res = NULL;
    st->row = st->nrows = 0;
}

static bool pg_is_broken(void *conn) {
    pg_conn *c = conn;
    if (c->unread_commit) /* in pipeline mode, the COMMIT's answer still to read */
        return c->broken || c->nq > 0 || PQstatus(c->pg) != CONNECTION_OK;
    return c->broken || c->nq > 0 || PQstatus(c->pg) != CONNECTION_OK ||
           PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF || PQtransactionStatus(c->pg) != PQTRANS_IDLE;
}

static uint64_t pg_round_trips(void *conn) { return ((pg_conn *)conn)->round_trips; }

const mv_driver mv_pg_driver = {
    .name = "postgres",
    .connect = pg_connect,
    .disconnect = pg_disconnect,
    .exec = pg_exec,
    .begin = pg_begin,
    .prepare = pg_prepare,
    .finalize = pg_finalize,
    .step = pg_step,
    .text = pg_text,
    .int64 = pg_integer,
    .is_null = pg_is_null,
    .column_count = pg_column_count,
    .reset = pg_reset,
    .is_broken = pg_is_broken,
    .send = pg_send,
    .after_commit = pg_after_commit,
    .round_trips = pg_round_trips,
};
