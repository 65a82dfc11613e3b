/* webhooks.c — the message service's outgoing calls: prepare hooks, action handlers and the
 * payment provider, all as signed JSON POSTs (deliver/webhook.c) with an Idempotency-Key that is
 * stable across retries of the same logical operation. None runs inside a transaction. */
#include <stdlib.h>
#include <string.h>

#include "base/callctx.h"
#include "message/service.h"

static json_t *user_json(const mv_user *u) {
    json_t *roles = json_array();
    for (size_t i = 0; i < u->nroles; i++)
        json_array_append_new(roles, json_string(u->roles[i]));
    return json_pack("{s:s,s:o}", "id", u->id ? u->id : "", "roles", roles);
}

static json_t *prepare_request(const mv_prepare_input *in) {
    const mv_user *u = in->user;
    return json_pack("{s:s,s:o,s:o,s:o,s:O}", "templateCd", in->template_cd, "user", user_json(u),
                     "identity", u->identity ? json_deep_copy(u->identity) : json_object(),
                     "permissions", u->permissions ? json_deep_copy(u->permissions) : json_object(),
                     "payload", in->payload);
}

mv_code mv__webhook_prepare_outcome(const char *url, mv_code rc, mv_webhook_response *res,
                                    const mv_err *e, json_t **items, mv_err *err) {
    mv_err bad = {0};
    *items = NULL;
    if (rc == MV_OK && res->json_invalid) {
        rc = mv_err_set(&bad, MV_PREPARE_FAILED, "prepare hook %s answered with invalid JSON", url);
        e = &bad;
    } else if (rc == MV_OK) {
        *items = res->json ? json_incref(res->json) : NULL;
    }
    /* Only an answer is a refusal (4xx, or 2xx with something that is not JSON): a timeout, a
     * dropped connection, no connection or a 5xx says nothing definitive about the request; a
     * call abandoned by a loop shutting down neither (the client is told to go elsewhere). */
    mv_code code = rc == MV_PREPARE_FAILED || res->outcome == MV_WEBHOOK_REJECTED
                       ? MV_PREPARE_FAILED
                   : rc == MV_DRAINING ? MV_DRAINING
                                       : MV_PREPARE_UNAVAILABLE;
    mv_webhook_response_free(res);
    if (rc == MV_OK) return MV_OK;
    if (code == MV_DRAINING) {
        mv_err_set(err, code, "the server is shutting down; retry elsewhere");
        if (err) mv_strlcpy(err->cause, e->message, sizeof err->cause);
        return code;
    }
    return mv_err_set(err, code, "prepare failed: %s", e->message);
}

mv_code mv__webhook_prepare(mv_service *svc, const char *url, const mv_prepare_input *in,
                            json_t **items, mv_err *err) {
    json_t *body = prepare_request(in);
    mv_webhook_response res = {0};
    mv_err e = {0};
    mv__callctx_call("prepare", NULL, NULL, NULL);
    mv_code rc = mv_webhook_post(svc->o.webhook, url, body, in->idempotency_key, &res, &e);
    json_decref(body);
    return mv__webhook_prepare_outcome(url, rc, &res, &e, items, err);
}

mv_code mv__webhook_prepare_start(mv_service *svc, const char *url, const mv_prepare_input *in,
                                  mv_webhook_done done, void *ctx, mv_err *err) {
    json_t *body = prepare_request(in);
    if (!body) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv__callctx_call("prepare", NULL, NULL, NULL);
    mv_code rc = mv_webhook_post_async(svc->o.loop, svc->o.webhook, url, body, in->idempotency_key,
                                       done, ctx, err);
    json_decref(body);
    return rc;
}

json_t *mv__handler_request(const mv_action_input *in) {
    return json_pack("{s:O,s:{s:s,s:s},s:o,s:O,s:s,s:s}", "message", in->message, "action",
                     "actionCd", in->action->action_cd, "name", in->action_name, "user",
                     user_json(in->user), "input", in->input, "attemptId", in->attempt_id,
                     "trigger", in->trigger ? in->trigger : "user");
}

/* What a finished handler call means for the action: its JSON (or null) is the result; a failure
 * carries the handler's own words for the client (lastFailure) and keeps the URL for the log.
 * Frees res's members. */
mv_code mv__webhook_handler_outcome(mv_code rc, mv_webhook_response *res, const mv_err *e,
                                    json_t **result, mv_err *err) {
    if (rc == MV_OK) *result = res->json ? json_incref(res->json) : json_null();
    if (rc == MV_UPSTREAM_FAILED) {
        char code[65], words[256];
        mv_webhook_failure_words(res, code, words);
        mv_err_set(err, rc, "%s", words);
        if (err) {
            mv_strlcpy(err->failure_code, code, sizeof err->failure_code);
            mv_strlcpy(err->cause, e->message, sizeof err->cause);
        }
    } else if (rc == MV_DRAINING) { /* abandoned by a loop shutting down: e names the URL */
        mv_err_set(err, rc, "the server is shutting down; retry elsewhere");
        if (err) mv_strlcpy(err->cause, e->message, sizeof err->cause);
    } else if (rc != MV_OK) {
        mv_err_copy(err, e);
    }
    mv_webhook_response_free(res);
    return rc;
}

mv_code mv__webhook_handler(mv_service *svc, const char *url, const mv_action_input *in,
                            json_t **result, mv_err *err) {
    json_t *body = mv__handler_request(in);
    mv_webhook_response res = {0};
    mv_err e = {0};
    mv__callctx_call("handler", mv_json_str(in->message, "id"), in->attempt_id, NULL);
    mv_code rc = mv_webhook_post(svc->o.webhook, url, body, in->attempt_id, &res, &e);
    json_decref(body);
    return mv__webhook_handler_outcome(rc, &res, &e, result, err);
}

mv_code mv__webhook_handler_start(mv_service *svc, const char *url, const mv_action_input *in,
                                  mv_webhook_done done, void *ctx, mv_err *err) {
    json_t *body = mv__handler_request(in);
    if (!body) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv__callctx_call("handler", mv_json_str(in->message, "id"), in->attempt_id, NULL);
    mv_code rc = mv_webhook_post_async(svc->o.loop, svc->o.webhook, url, body, in->attempt_id, done,
                                       ctx, err);
    json_decref(body);
    return rc;
}

/* ---- the webhook payment provider --------------------------------------------------------- */

typedef struct {
    mv_payment_provider p;
    char *url;
    const mv_webhook_config *wh;
} payment_webhook;

/* A call's request: its body and Idempotency-Key (a session operation's key is derived from the
 * operation and the session, so a retry sends the same one; a create without a key gets a fresh
 * one). */
static mv_code pay_request(const mv__payment_call *c, json_t **body, char key[65], mv_err *err) {
    if (strcmp(c->op, "create") == 0) {
        *body = json_pack("{s:s,s:s,s:s,s:O}", "op", "create", "payerId", c->payer, "paymentCd",
                          c->payment_cd, "priceArgs", c->price_args ? c->price_args : json_null());
        if (c->key && *c->key) {
            mv_strlcpy(key, c->key, 65);
        } else {
            mv_code rc = mv_id_uuid(key, err);
            if (rc != MV_OK) {
                json_decref(*body);
                *body = NULL;
                return rc;
            }
        }
    } else {
        char material[256];
        snprintf(material, sizeof material, "%s\n%s", c->op, c->session);
        mv_sha256_hex(material, strlen(material), key);
        *body = json_pack("{s:s,s:s}", "op", c->op, "sessionId", c->session);
    }
    if (!*body) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv__callctx_call("payment", NULL, NULL, NULL);
    return MV_OK;
}

mv_code mv__payment_webhook_outcome(mv_code rc, mv_webhook_response *res, const mv_err *e,
                                    char **session, mv_err *err) {
    if (rc != MV_OK) { /* refused (4xx) is definitive; no answer, a timeout or a 5xx is not */
        mv_err_copy(err, e);
        rc = res->outcome == MV_WEBHOOK_REJECTED ? MV_PAYMENT_FAILED
             : rc == MV_DRAINING                 ? MV_DRAINING
                                                 : MV_PAYMENT_UNAVAILABLE;
        if (err) err->code = rc;
    } else if (session) {
        const char *sid = mv_json_str(res->json, "sessionId");
        *session = sid && *sid ? strdup(sid) : NULL;
    }
    mv_webhook_response_free(res);
    return rc;
}

static mv_code pay_call(payment_webhook *pw, const mv__payment_call *c, char **session,
                        mv_err *err) {
    json_t *body = NULL;
    char key[65];
    mv_code rc = pay_request(c, &body, key, err);
    if (rc != MV_OK) return rc;
    mv_webhook_response res = {0};
    mv_err e = {0};
    rc = mv_webhook_post(pw->wh, pw->url, body, key, &res, &e);
    json_decref(body);
    return mv__payment_webhook_outcome(rc, &res, &e, session, err);
}

static mv_code pay_create(void *ctx, const char *payer, const char *code, const json_t *args,
                          const char *key, char **session, mv_err *err) {
    mv__payment_call c = {
        .op = "create", .payer = payer, .payment_cd = code, .price_args = args, .key = key};
    return pay_call(ctx, &c, session, err);
}

static mv_code pay_expire(void *ctx, const char *session, mv_err *err) {
    return pay_call(ctx, &(mv__payment_call){.op = "expire", .session = session}, NULL, err);
}

static mv_code pay_refund(void *ctx, const char *session, mv_err *err) {
    return pay_call(ctx, &(mv__payment_call){.op = "refund", .session = session}, NULL, err);
}

bool mv__payment_is_webhook(const mv_payment_provider *p) {
    return p && p->create_session == pay_create;
}

mv_code mv__payment_webhook_start(const mv_payment_provider *p, mv_loop *loop,
                                  const mv__payment_call *c, mv_webhook_done done, void *ctx,
                                  mv_err *err) {
    payment_webhook *pw = p->ctx;
    json_t *body = NULL;
    char key[65];
    mv_code rc = pay_request(c, &body, key, err);
    if (rc != MV_OK) return rc;
    rc = mv_webhook_post_async(loop, pw->wh, pw->url, body, key, done, ctx, err);
    json_decref(body);
    return rc;
}

mv_payment_provider *mv_payment_webhook_new(const char *url, const mv_webhook_config *wh) {
    payment_webhook *pw = calloc(1, sizeof *pw);
    if (!pw) return NULL;
    pw->url = strdup(url);
    pw->wh = wh;
    pw->p = (mv_payment_provider){pay_create, pay_expire, pay_refund, pw};
    if (!pw->url) {
        free(pw);
        return NULL;
    }
    return &pw->p;
}

void mv_payment_webhook_free(mv_payment_provider *p) {
    if (!p) return;
    payment_webhook *pw = p->ctx;
    free(pw->url);
    free(pw);
}
