/* far_side.h — the services a create calls out to, scripted for tests behind an http_sink: a
 * prepare hook (any path starting /prepare) that answers the request payload's "items" — or one
 * item to `to` — after delay_ms, and the webhook payment provider (any other path) that opens
 * sessions s-1, s-2, … in arrival order, refuses a create whose priceArgs has "fail": true (400)
 * and fails every expire (500) while fail_expire is set.
 *
 *   far_side fs = {.to = "host", .delay_ms = 300};
 *   http_sink_set_handler(sink, far_side_answer, &fs); */
#ifndef MISSIVE_TEST_FAR_SIDE_H
#define MISSIVE_TEST_FAR_SIDE_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "missive/base.h"
#include "support/http_sink.h"

typedef struct far_side {
    const char *to;
    int delay_ms;
    atomic_int sessions;
    atomic_int fail_expire;
} far_side;

static inline void far_side_answer(void *ctx, const http_sink_request *req,
                                   http_sink_response *res) {
    far_side *fs = ctx;
    static _Thread_local char body[4096];
    json_t *in = json_loads(req->body, 0, NULL);
    const char *op = mv_json_str(in, "op");
    *res = (http_sink_response){.body = "{}"};
    if (strncmp(req->path, "/prepare", 8) == 0) {
        json_t *items = json_object_get(json_object_get(in, "payload"), "items");
        char *text = items ? json_dumps(items, JSON_COMPACT) : NULL;
        snprintf(body, sizeof body, text ? "%s" : "{\"toUser\": \"%s\"}", text ? text : fs->to);
        free(text);
        res->body = body;
        res->delay_ms = fs->delay_ms;
    } else if (op && strcmp(op, "create") == 0) {
        if (json_is_true(json_object_get(json_object_get(in, "priceArgs"), "fail"))) {
            res->status = 400;
        } else {
            snprintf(body, sizeof body, "{\"sessionId\": \"s-%d\"}",
                     atomic_fetch_add(&fs->sessions, 1) + 1);
            res->body = body;
        }
    } else if (op && strcmp(op, "expire") == 0 && atomic_load(&fs->fail_expire)) {
        res->status = 500;
    }
    json_decref(in);
}

#endif
