/* routes_links.c — the pages behind action links (missive/reach.h): GET /a/{token} shows what the
 * link would do and a form, and never acts (mail scanners and chat previews follow every link);
 * POST /a/{token} runs the action once, as the recipient the link is bound to, through the normal
 * claim with the link's use recorded in the claim's transaction. Every answer is a small HTML
 * page in the recipient's stored locale (English or German), with a CSP that allows no script,
 * and says nothing internal: a link that does not verify, or whose message its recipient cannot
 * see, is the same 400 link_invalid page. */
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "http/request.h"
#include "http/routes_reach.h"
#include "message/action_async.h"

static const char LINK_CSP[] = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'";

enum {
    S_CONFIRM,
    S_NOTE,
    S_DONE,
    S_DONE_BODY,
    S_USED,
    S_ARCHIVED,
    S_INVALID,
    S_BUSY,
    S_FAILED,
    S_GONE,
    S_TITLE_PROBLEM,
    S_COUNT
};

/* {a} is the action's name, {t} the message's title (both escaped when put in). */
static const char *const EN[S_COUNT] = {
    "You are about to <b>{a}</b> for “{t}”.",
    "Note",
    "Done",
    "“{a}” for “{t}” was carried out.",
    "This link was already used.",
    "This message was already handled.",
    "This link is not valid. It may have expired or been changed.",
    "This action is in progress. Please try again in a moment.",
    "The action could not be completed. Please try again from the app.",
    "This action is no longer available.",
    "Link",
};
static const char *const DE[S_COUNT] = {
    "Sie sind dabei, <b>{a}</b> für „{t}“ auszuführen.",
    "Notiz",
    "Erledigt",
    "„{a}“ für „{t}“ wurde ausgeführt.",
    "Dieser Link wurde bereits verwendet.",
    "Diese Nachricht wurde bereits erledigt.",
    "Dieser Link ist ungültig. Er ist abgelaufen oder wurde verändert.",
    "Diese Aktion läuft gerade. Bitte versuchen Sie es gleich noch einmal.",
    "Die Aktion konnte nicht ausgeführt werden. Bitte versuchen Sie es in der App.",
    "Diese Aktion ist nicht mehr verfügbar.",
    "Link",
};

static void add_escaped(mv_strbuf *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&': mv_strbuf_adds(b, "&amp;"); break;
        case '<': mv_strbuf_adds(b, "&lt;"); break;
        case '>': mv_strbuf_adds(b, "&gt;"); break;
        case '"': mv_strbuf_adds(b, "&quot;"); break;
        case '\'': mv_strbuf_adds(b, "&#39;"); break;
        default: mv_strbuf_add(b, s, 1);
        }
    }
}

/* text with {a} and {t} replaced by the escaped action name and title. */
static void add_filled(mv_strbuf *b, const char *text, const char *action, const char *title) {
    for (const char *p = text; *p; p++) {
        if (p[0] == '{' && (p[1] == 'a' || p[1] == 't') && p[2] == '}') {
            add_escaped(b, p[1] == 'a' ? action : title);
            p += 2;
        } else {
            mv_strbuf_add(b, p, 1);
        }
    }
}

typedef struct page {
    const char *const *s; /* the catalogue */
    const char *lang;
    const char *action, *title; /* may be NULL */
} page;

/* Answers an HTML page: heading, one paragraph, and (form) the confirmation form. code (may be
 * NULL) is the error code a client can read from the page. */
static void answer(mv_http_response *res, int status, const page *pg, const char *heading, int text,
                   const char *code, bool form, bool notes) {
    mv_strbuf b = {0};
    mv_strbuf_adds(&b, "<!doctype html><html lang=\"");
    mv_strbuf_adds(&b, pg->lang);
    mv_strbuf_adds(&b, "\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
                       "content=\"width=device-width,initial-scale=1\"><meta name=\"robots\" "
                       "content=\"noindex\">");
    if (code) {
        mv_strbuf_adds(&b, "<meta name=\"missive-code\" content=\"");
        mv_strbuf_adds(&b, code);
        mv_strbuf_adds(&b, "\">");
    }
    mv_strbuf_adds(&b, "<title>");
    add_escaped(&b, heading);
    mv_strbuf_adds(&b, "</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;"
                       "margin:3rem auto;padding:0 1rem}button{font:inherit;padding:.5rem 1.25rem}"
                       "textarea{width:100%}.code{color:#666;font-size:.8rem}</style></head>"
                       "<body><main><h1>");
    add_escaped(&b, heading);
    mv_strbuf_adds(&b, "</h1><p>");
    add_filled(&b, pg->s[text], pg->action, pg->title);
    mv_strbuf_adds(&b, "</p>");
    if (form) {
        mv_strbuf_adds(&b, "<form method=\"post\">");
        if (notes) {
            mv_strbuf_adds(&b, "<p><label>");
            add_escaped(&b, pg->s[S_NOTE]);
            mv_strbuf_adds(&b, "<br><textarea name=\"input\" rows=\"3\"></textarea></label></p>");
        }
        mv_strbuf_adds(&b, "<button type=\"submit\">");
        add_escaped(&b, pg->action);
        mv_strbuf_adds(&b, "</button></form>");
    }
    if (code) {
        mv_strbuf_adds(&b, "<p class=\"code\">");
        mv_strbuf_adds(&b, code);
        mv_strbuf_adds(&b, "</p>");
    }
    mv_strbuf_adds(&b, "</main></body></html>\n");
    size_t len = 0;
    char *body = mv_strbuf_take(&b, &len);
    mv_http_set_header(res, "Content-Security-Policy", LINK_CSP);
    mv_http_set_header(res, "Cache-Control", "no-store");
    mv_http_set_header(res, "Referrer-Policy", "no-referrer");
    mv_http_set_header(res, "X-Content-Type-Options", "nosniff");
    if (body)
        mv_http_adopt(res, status, "text/html; charset=utf-8", body, len);
    else
        mv_http_text(res, 500, "text/plain", "internal error", 14);
}

static void problem(mv_http_response *res, int status, const page *pg, int text, const char *code) {
    answer(res, status, pg, pg->title ? pg->title : pg->s[S_TITLE_PROBLEM], text, code, false,
           false);
}

/* What one link request knows: the verified link, its recipient, the page's language, and (once
 * loaded) the message's title and the action's name and notes. */
typedef struct link_ctx {
    mv_reach_routes *r;
    mv_link link;
    mv_user user;
    page pg;
    json_t *message, *action;
} link_ctx;

static void ctx_free(link_ctx *c) {
    json_decref(c->message);
    json_decref(c->action);
}

/* The recipient's stored locale picks the catalogue (German for de and de-*). */
static void pick_language(link_ctx *c) {
    c->pg = (page){.s = EN, .lang = "en"};
    json_t *prefs = NULL;
    mv_err ignore = {0};
    if (mv_preferences_get(c->r->store, &c->user, &prefs, &ignore) != MV_OK) return;
    const char *loc = mv_json_str(prefs, "locale");
    if (loc && (loc[0] | 32) == 'd' && (loc[1] | 32) == 'e' && (!loc[2] || loc[2] == '-'))
        c->pg = (page){.s = DE, .lang = "de"};
    json_decref(prefs);
}

/* Verifies the token and loads what the page names. False when the answer was written. */
static bool load(mv_http_request *req, mv_http_response *res, link_ctx *c) {
    memset(c, 0, sizeof *c);
    c->r = req->route_ctx;
    c->pg = (page){.s = EN, .lang = "en"};
    mv_err err = {0};
    int64_t now = mv_now_ms();
    if (mv_link_verify(mv_service_reach(c->r->service), mv_http_param(req, "token"), now, &c->link,
                       &err) != MV_OK) {
        problem(res, 400, &c->pg, S_INVALID, "link_invalid");
        return false;
    }
    c->user = (mv_user){.id = c->link.user_id, .tenant = c->link.tenant};
    pick_language(c);
    if (mv_message_get(c->r->service, c->link.message_id, &c->user, &c->message, &err) != MV_OK) {
        if (err.code == MV_STORE_UNAVAILABLE || err.code == MV_NO_MEMORY || err.code == MV_INTERNAL)
            problem(res, 503, &c->pg, S_FAILED, NULL);
        else
            problem(res, 400, &c->pg, S_INVALID, "link_invalid");
        return false;
    }
    c->pg.title = mv_json_str(json_object_get(c->message, "receiverContent"), "title");
    bool used = false;
    if (mv_link_used(c->r->store, &c->link, &used, &err) != MV_OK) {
        problem(res, 503, &c->pg, S_FAILED, NULL);
        return false;
    }
    if (used || !strcmp(mv_json_str(c->message, "actionState") ?: "", "archived")) {
        problem(res, 410, &c->pg, used ? S_USED : S_ARCHIVED, "message_archived");
        return false;
    }
    json_t *view = NULL;
    if (mv_message_actions(c->r->service, c->link.message_id, MV_RECEIVER, &c->user, false, &view,
                           &err) == MV_OK) {
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(view, "actions"), i, a) {
            if (!strcmp(mv_json_str(a, "actionCd") ?: "", c->link.action_cd))
                c->action = json_incref(a);
        }
    }
    json_decref(view);
    if (!c->action) {
        problem(res, 410, &c->pg, S_GONE, "message_archived");
        return false;
    }
    c->pg.action = mv_json_str(c->action, "name");
    return true;
}

static bool wants_notes(const link_ctx *c) {
    return mv_json_str(json_object_get(c->action, "confirmation"), "notesLabel") != NULL;
}

static void show_link(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    link_ctx c;
    if (load(req, res, &c))
        answer(res, 200, &c.pg, c.pg.action, S_CONFIRM, NULL, true, wants_notes(&c));
    ctx_free(&c);
}

static int hex(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if ((ch | 32) >= 'a' && (ch | 32) <= 'f') return (ch | 32) - 'a' + 10;
    return -1;
}

/* The form field "input" of an application/x-www-form-urlencoded body, decoded (malloc'd), or
 * NULL when absent. */
static char *form_input(const char *body, size_t len) {
    for (size_t i = 0; body && i < len;) {
        size_t end = i;
        while (end < len && body[end] != '&')
            end++;
        if (end - i > 6 && !strncmp(body + i, "input=", 6)) {
            char *out = malloc(end - i), *o = out;
            for (size_t k = i + 6; out && k < end; k++) {
                if (body[k] == '+')
                    *o++ = ' ';
                else if (body[k] == '%' && k + 2 < end && hex(body[k + 1]) >= 0 &&
                         hex(body[k + 2]) >= 0) {
                    *o++ = (char)(hex(body[k + 1]) * 16 + hex(body[k + 2]));
                    k += 2;
                } else
                    *o++ = body[k];
            }
            if (out) *o = '\0';
            return out;
        }
        i = end + 1;
    }
    return NULL;
}

/* A link's press in flight (the action route's shape, routes_messages.c): in the arena. */
typedef struct link_call {
    mv_http_later_rounds rounds; /* the action's rounds; rounds.later the answer */
    link_ctx c;
    mv_action_request ar;
    mv_arena *arena;
    mv_code rc;
    mv_err *err;
} link_call;

static void link_render(mv_http_request *req, mv_http_response *res, void *ctx) {
    (void)req;
    link_call *l = ctx;
    page *pg = &l->c.pg;
    mv_code rc = l->rc;
    if (rc == MV_OK)
        answer(res, 200, pg, pg->s[S_DONE], S_DONE_BODY, NULL, false, false);
    else if (rc == MV_MESSAGE_ARCHIVED)
        problem(res, 410, pg, l->err && strstr(l->err->message, "link") ? S_USED : S_ARCHIVED,
                "message_archived");
    else if (rc == MV_ACTION_CONFLICT)
        problem(res, 409, pg, S_BUSY, "action_conflict");
    else
        problem(res, mv_code_http_status(rc) >= 500 ? 503 : mv_code_http_status(rc), pg, S_FAILED,
                mv_code_name(rc));
}

/* Wherever the action ended: keep the outcome, resume (the result itself is not shown). */
static void link_done(void *ctx, mv_code rc, json_t *result, const mv_err *err) {
    link_call *l = ctx;
    json_decref(result);
    l->rc = rc;
    if (rc != MV_OK && (l->err = mv_arena_alloc(l->arena, sizeof *l->err)))
        mv_err_copy(l->err, err);
    mv_http_later_done_io(l->rounds.later, link_render, l);
}

static void run_link(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    link_call *l = mv_arena_alloc(req->arena, sizeof *l);
    if (!l) {
        mv_http_errorf(res, MV_NO_MEMORY, "out of memory");
        return;
    }
    memset(l, 0, sizeof *l);
    l->arena = req->arena;
    link_ctx *c = &l->c;
    bool loaded = load(req, res, c);
    c->message = mv_arena_json(req->arena, c->message); /* the request's from here on */
    c->action = mv_arena_json(req->arena, c->action);
    if (!loaded) return;
    char *note = form_input(req->body, req->body_len);
    json_t *input = mv_arena_json(req->arena, note && *note ? json_pack("{s:s}", "notes", note)
                                                            : json_object());
    free(note);
    l->ar = (mv_action_request){.message_id = c->link.message_id,
                                .action_cd = c->link.action_cd,
                                .user = &c->user,
                                .input = input,
                                .link = &c->link};
    if (!(l->rounds.later = mv_http_answer_later(req))) { /* no server: answered now */
        json_t *result = NULL;
        mv_err err = {0};
        l->rc = mv_action_handle(c->r->service, &l->ar, &result, &err);
        json_decref(result);
        l->err = &err;
        link_render(req, res, l);
        return;
    }
    l->ar.submit = mv_http_later_submit;
    l->ar.submit_ctx = &l->rounds;
    mv__action_env env = {mv_http_later_submit, &l->rounds, link_done, l, false};
    mv__action_begin(c->r->service, &l->ar, &env);
}

mv_code mv_link_routes_add(mv_router *router, mv_reach_routes *routes, mv_err *err) {
    const mv_route table[] = {
        {"GET", "/a/{token}", show_link, true, false, NULL, routes},
        {"POST", "/a/{token}", run_link, true, false, NULL, routes},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        mv_code rc = mv_router_add(router, &table[i], err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}
