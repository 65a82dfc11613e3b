/* saga_delay_test.c — saga delays (mv_saga_delay) on both stores with a clock the test moves: the
 * saga is saved waiting with its wakeAt and a `saga_wake` timer in one transaction, holds no
 * runner lease while it waits, is not resumed before its wakeAt, and is resumed by the timer
 * engine at wakeAt, each step called once; a second process claiming the same due timer while
 * the first one was killed -9 mid-fire still resumes it exactly once. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "durable/durable_internal.h"
#include "durable/fixture.h"
#include "durable/timer.h"
#include "store/db.h"

typedef struct {
    int calls[2]; /* reserve, ship */
    int64_t delay_ms;
} world;

static mv_code exec_step(mv_saga_step_call *call, void *ctx, json_t **result, mv_err *err) {
    (void)err;
    world *w = ctx;
    w->calls[strcmp(call->step, "reserve") == 0 ? 0 : 1]++;
    *result = json_string(call->step);
    return MV_OK;
}

static mv_code comp_step(const json_t *args, const mv_saga_compensation_call *call, void *ctx,
                         mv_err *err) {
    (void)args;
    (void)call;
    (void)ctx;
    (void)err;
    return MV_OK;
}

/* reserve, then ship delay_ms later */
static mv_code run(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input;
    world *w = def_ctx;
    mv_code rc = mv_saga_step(ctx, "reserve", NULL, exec_step, w, NULL, err);
    if (rc == MV_OK) rc = mv_saga_delay(ctx, "ship", w->delay_ms, err);
    if (rc == MV_OK) rc = mv_saga_step(ctx, "ship", NULL, exec_step, w, NULL, err);
    return rc;
}

static mv_saga_compensator comps[2];

static mv_saga_definition def_for(world *w) {
    comps[0] = (mv_saga_compensator){"reserve", comp_step, w};
    comps[1] = (mv_saga_compensator){"ship", comp_step, w};
    return (mv_saga_definition){
        .name = "delayed", .run = run, .compensators = comps, .ncompensators = 2, .ctx = w};
}

static mv_saga_definition the_def;
static const mv_saga_definition *find(void *ctx, const char *name) {
    (void)ctx;
    return strcmp(name, "delayed") == 0 ? &the_def : NULL;
}

typedef struct {
    mv_store *store;
    mv_saga_engine *engine;
    mv__timer_engine *timers;
    int64_t now;
    mv_clock clock;
} rig;

static bool rig_open(rig *r, mv_store *store, int64_t lease_ms) {
    r->store = store;
    r->clock = mv_manual_clock(&r->now);
    mv_saga_engine_options o = {.clock = &r->clock, .runner_lease_ms = lease_ms};
    mv__timer_engine_options to = {.clock = &r->clock, .lease_ms = lease_ms};
    mv_err err = {0};
    return store && mv_saga_engine_new(store, &o, &r->engine, &err) == MV_OK &&
           mv__timer_engine_new(store, &to, &r->timers, &err) == MV_OK &&
           mv__saga_wake_register(r->timers, r->engine, find, NULL, NULL, &err) == MV_OK;
}

static void rig_close(rig *r) {
    mv__timer_engine_free(r->timers);
    mv_saga_engine_free(r->engine);
    mv_store_close(r->store);
}

static mv__timer_pass pass(rig *r) {
    mv__timer_pass p = {0};
    mv_err err = {0};
    if (mv__timer_engine_run(r->timers, &p, &err) != MV_OK) fprintf(stderr, "%s\n", err.message);
    return p;
}

STORE_TEST(a_delayed_step_waits_durably_and_its_timer_resumes_the_saga_at_wake_at) {
    world w = {.delay_ms = 60000};
    the_def = def_for(&w);
    rig r = {.now = 1000};
    REQUIRE(rig_open(&r, fixture_store(kind, "delay1.db", NULL, 0), 0));
    mv_err err = {0};
    json_t *rec = NULL, *input = json_object();
    CHECK_CODE(mv_saga_execute(r.engine, &the_def, "saga_d1", input, NULL, &rec, &err), MV_OK,
               &err);
    REQUIRE(rec);
    CHECK_STR(mv_json_str(rec, "state"), "waiting");
    CHECK_INT(json_integer_value(json_object_get(rec, "wakeAt")), 61000);
    CHECK_INT((int)json_array_size(json_object_get(rec, "steps")), 1);
    CHECK(w.calls[0] == 1 && w.calls[1] == 0);
    json_decref(rec);
    /* as stored: waiting with its wakeAt */
    CHECK_CODE(mv_saga_get(r.engine, "saga_d1", &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "waiting");
    CHECK_INT(json_integer_value(json_object_get(rec, "wakeAt")), 61000);
    json_decref(rec);
    /* a resume before wakeAt (an operator, recovery) leaves it waiting and runs nothing */
    r.now = 30000;
    CHECK_CODE(mv_saga_resume(r.engine, &the_def, "saga_d1", NULL, &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "waiting");
    json_decref(rec);
    /* the timer is not due yet */
    mv__timer_pass p = pass(&r);
    CHECK_INT(p.claimed, 0);
    CHECK(w.calls[1] == 0);
    /* at wakeAt the timer fires and the saga completes */
    r.now = 61000;
    p = pass(&r);
    CHECK_INT(p.claimed, 1);
    CHECK_INT(p.fired, 1);
    CHECK(w.calls[0] == 1 && w.calls[1] == 1);
    CHECK_CODE(mv_saga_get(r.engine, "saga_d1", &rec, &err), MV_OK, &err);
    CHECK_STR(mv_json_str(rec, "state"), "completed");
    CHECK(json_object_get(rec, "wakeAt") == NULL);
    json_decref(rec);
    /* fired once: nothing more to claim, nothing runs again */
    r.now = 200000;
    p = pass(&r);
    CHECK_INT(p.claimed, 0);
    CHECK(w.calls[0] == 1 && w.calls[1] == 1);
    json_decref(input);
    rig_close(&r);
}

TEST(a_delay_out_of_range_is_invalid) {
    world w = {.delay_ms = -1};
    the_def = def_for(&w);
    rig r = {.now = 1000};
    REQUIRE(rig_open(&r, fixture_store("sqlite", "delay2.db", NULL, 0), 0));
    mv_err err = {0};
    json_t *rec = NULL, *input = json_object();
    CHECK(mv_saga_execute(r.engine, &the_def, "saga_d2", input, NULL, &rec, &err) != MV_OK);
    CHECK(strstr(err.message, "delayMs must be an integer from 0 to 31536000000") != NULL);
    json_decref(rec);
    w.delay_ms = MV_SAGA_MAX_DELAY_MS + 1;
    err = (mv_err){0};
    CHECK(mv_saga_execute(r.engine, &the_def, "saga_d3", input, NULL, &rec, &err) != MV_OK);
    CHECK(strstr(err.message, "delayMs") != NULL);
    json_decref(rec);
    json_decref(input);
    rig_close(&r);
}

/* The other daemon: reserve and the wait as usual; once the wait is over it hangs (killed -9
 * there, after it saved the saga running and before ship started). */
static mv_code run_hanging(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    (void)input;
    world *w = def_ctx;
    mv_code rc = mv_saga_step(ctx, "reserve", NULL, exec_step, w, NULL, err);
    if (rc == MV_OK) rc = mv_saga_delay(ctx, "ship", w->delay_ms, err);
    while (rc == MV_OK)
        pause();
    return rc;
}

/* Forks a process with its own store handle at clock `now`: it runs fn (1: create the saga, 2:
 * fire due timers with run_hanging), writes one byte to the pipe, then waits to be killed. */
static pid_t child(const char *url, int64_t now, int what, int *fd) {
    int p[2];
    if (pipe(p) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) {
        close(p[1]);
        *fd = p[0];
        return pid;
    }
    close(p[0]);
    rig c = {.now = now};
    mv_store *s = NULL;
    if (mv_store_open(url, NULL, &s, NULL) != MV_OK) _exit(2);
    static world cw = {.delay_ms = 5000};
    the_def = def_for(&cw);
    if (!rig_open(&c, s, 10000)) _exit(3);
    if (what == 1) {
        json_t *input = json_object();
        if (mv_saga_execute(c.engine, &the_def, "saga_d4", input, NULL, NULL, NULL) != MV_OK)
            _exit(4);
        if (write(p[1], "x", 1) != 1) _exit(5);
    } else {
        the_def.run = run_hanging;
        if (write(p[1], "x", 1) != 1) _exit(5);
        pass(&c); /* claims the timer and resumes the saga into run_hanging */
    }
    for (;;)
        pause();
}

static void kill9(pid_t pid) {
    int status;
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status));
}

static const char *state_of(rig *r, const char *id, char *buf) {
    json_t *g = NULL;
    buf[0] = '\0';
    if (mv_saga_get(r->engine, id, &g, NULL) == MV_OK)
        snprintf(buf, 32, "%s", mv_json_str(g, "state"));
    json_decref(g);
    return buf;
}

STORE_TEST(daemons_killed_while_a_saga_waits_and_while_it_wakes_leave_it_to_another_once) {
    world w = {.delay_ms = 5000};
    char url[600], buf[32];
    rig r = {.now = 1000};
    REQUIRE(rig_open(&r, fixture_store(kind, "delay3.db", url, sizeof url), 10000));
    /* daemon 1 starts the saga (reserve runs there) and is killed -9 while it waits */
    int fd;
    pid_t pid = child(url, 1000, 1, &fd);
    REQUIRE(pid > 0);
    char b;
    REQUIRE(read(fd, &b, 1) == 1);
    close(fd);
    kill9(pid);
    CHECK_STR(state_of(&r, "saga_d4", buf), "waiting");
    /* daemon 2 claims the due timer, wakes the saga and is killed -9 before ship starts */
    pid = child(url, 6000, 2, &fd);
    REQUIRE(pid > 0);
    REQUIRE(read(fd, &b, 1) == 1);
    close(fd);
    for (int i = 0; i < 500 && strcmp(state_of(&r, "saga_d4", buf), "running") != 0; i++)
        usleep(10000);
    CHECK_STR(buf, "running");
    kill9(pid);
    /* this daemon: while daemon 2's timer claim and runner lease last, nothing is due */
    the_def = def_for(&w);
    r.now = 6000;
    mv__timer_pass p = pass(&r);
    CHECK_INT(p.claimed, 0);
    /* both leases over: the timer is claimed here and the saga resumes, ship called once */
    r.now = 6000 + 10001;
    p = pass(&r);
    CHECK_INT(p.claimed, 1);
    CHECK_INT(p.fired, 1);
    CHECK_STR(state_of(&r, "saga_d4", buf), "completed");
    CHECK_INT(w.calls[0], 0); /* reserve ran in daemon 1 only, and was not run again */
    CHECK_INT(w.calls[1], 1);
    r.now = 100000;
    p = pass(&r);
    CHECK_INT(p.claimed, 0);
    CHECK_INT(w.calls[1], 1);
    rig_close(&r);
}

int main(void) {
    return RUN_TESTS(a_delayed_step_waits_durably_and_its_timer_resumes_the_saga_at_wake_at,
                     a_delay_out_of_range_is_invalid,
                     daemons_killed_while_a_saga_waits_and_while_it_wakes_leave_it_to_another_once);
}
