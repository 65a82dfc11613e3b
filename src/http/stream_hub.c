/* stream_hub.c — fans the change log out to open event streams (DESIGN part two, "Live updates").
 *
 * One thread per daemon. Each turn it asks the store for the newest change id (one index lookup;
 * on PostgreSQL that first gives committed changes their event ids when some have none — the
 * sequencer of message/changes.c — so the hub's wake-ups and timer drive it), reads the log from
 * the lowest position any stream still needs, in pages, and for every change finds the streams it
 * is for through an index kept across turns (stream_index.c: by tenant and user, tenant and role):
 * a viewer change only for that viewer; a message change only when the stream's user can see the
 * message (loaded once per change, not once per stream). A turn never walks every open stream:
 * the streams at the head move with it untouched, closes are reported by the stream, heartbeats
 * come off a timer wheel. The message is then sent as
 * that user sees it (with their "viewer"), and after each page a `counts` event goes to every
 * stream whose counts moved. Because each stream remembers its own position, a resumed stream
 * replays from the log exactly what it missed, in order, and a slow reader only ever delays itself:
 * past a low-water mark it is not written to and stays behind in the log (replayed like a resumed
 * one when it reads again), so the log, not memory, holds what it has not read.
 *
 * Nothing committed is skipped — a stream's position only ever moves past a change that was
 * offered to it. The window this closes: when the store fails while the hub decides who may see a
 * change (on PostgreSQL after a restart or a dropped connection, the hub's own log connection
 * reconnects at once but the first message load goes through a pooled connection that is still
 * broken), the change used to be taken for one nobody may see and passed over; later changes then
 * went out, so a client resuming with Last-Event-ID never got it. Now the turn stops at that
 * change and offers it again on the next one (message/changes.c's sequencer itself only ever makes
 * a prefix of ids visible, across restarts too: its commit is synchronous). Retention is the
 * other way a position could jump a change: a page whose snapshot shows retention removed rows it
 * should hold gives the streams concerned a `reset` instead.
 *
 * Tickets (stream_ticket.c) let a browser's EventSource, which cannot send headers, authenticate
 * this one route; no other route accepts them. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mono.h"
#include "http/auth.h"
#include "http/request.h"
#include "http/routes_messages.h"
#include "http/routes_reach.h"
#include "http/sse.h"
#include "http/stream_hub.h"
#include "http/stream_index.h"
#include "http/stream_ticket.h"
#include "message/inbox_internal.h"
#include "message/service.h"
#include "store/changes_sql.h"
#include "store/listen.h"

/* Replay (a stream whose position is behind the live head: it resumed, or its client read
 * slowly) must never hold up live delivery to the others: each turn first takes the new changes
 * for the streams at the head, then spends at most REPLAY_BUDGET_MS on the ones behind, a page at
 * a time, taking turns; streams at the same position share a page and its message loads. */
#define PAGE 256
#define LIVE_PAGES_PER_TURN 16
#define REPLAY_PAGE 64
#define REPLAY_BUDGET_MS 10
/* A stream takes events while fewer than LOW_WATER bytes wait for its client; past it, it stays
 * where it is in the log and catches up (a replay) once its client has read. So a stream that
 * never reads costs at most LOW_WATER plus one event. An event whose data would exceed
 * MAX_EVENT_DATA goes out as a small `message.updated` ({"id", "truncated": true}) that the
 * client refetches: a message as large as `limits.messageBytes` allows never closes a stream,
 * and a thousand streams that do not read stay within a few tens of MiB. */
#define LOW_WATER (16 * 1024)
#define MAX_EVENT_DATA (16 * 1024)
#define HANGUP_EVERY_MS 100 /* how often parked streams are checked for a client that hung up */
#define TRIM_EVERY_MS 1000  /* at most this often: freed streams' memory back to the system */
#define WARN_EVERY_MS 5000

typedef struct sub {
    mv_sse_stream *s;
    char *user_id, *tenant;
    char *locale;  /* the reader's language (routes_reach.c), NULL: the default content */
    char uid[512]; /* user_id trimmed, as the visibility rules compare it ("" when it cannot be) */
    char **roles;
    size_t nroles;
    json_t *permissions;
    int64_t cursor;       /* every change <= cursor has been considered for this stream */
    int64_t last_sent_id; /* the id of the last event sent (counts reuse it) */
    int64_t expires_at;   /* wall-clock ms the credential it was opened with expires; 0: never */
    bool counts_dirty, counts_known;
    bool held; /* in this page: offered nothing more (its queue is full, or its read failed) */
    uint64_t full_turn; /* the turn replay last found it without room (not asked again in it) */
    mv_inbox_counts counts;
    mv_stream_hub *hub;
    struct sub *prev, *next; /* hub->subs (under hub->mu) */
    struct sub *in_next;     /* hub->incoming (under hub->mu) */
    struct sub *closed_next; /* hub->closed (under hub->closed_mu) */
    /* the hub thread's, kept across turns (stream_index.h): */
    mv__sx_node place;  /* in hub->at_head, hub->behind or hub->fresh */
    mv__sx_node parked; /* in hub->parked until the loop took its socket */
    mv__sx_node timer;  /* in hub->wheel: its next heartbeat or expiry check */
    mv__sx_node *keys;  /* 1 + nroles, in hub->ix under its user id and each of its roles */
    uint64_t mark;      /* the change (hub->marks) it was last picked for */
    uint64_t page;      /* the page (hub->pages) it was last offered a change in, or part of */
} sub;

struct mv_stream_hub {
    mv_stream_hub_options o;
    unsigned char secret[64];
    size_t secret_len;
    mv_change_waiter *waiter;
    pthread_t thread;
    pthread_mutex_t mu; /* guards subs, incoming, nsubs, held, stopping, draining */
    sub *subs;
    int nsubs;
    sub *incoming;             /* attached, not yet filed by the hub thread */
    pthread_mutex_t closed_mu; /* guards closed (taken under a stream's lock: see stream_closed) */
    sub *closed;               /* closed, not yet dropped by the hub thread */
    /* streams held per tenant and user (closed ones until dropped), so that opening one of
     * 20,000 does not compare it with all the others: open addressing, keys "tenant\0user" */
    struct held {
        char *key;
        size_t len;
        int n;
    } * held;
    size_t held_cap, held_used;
    bool stopping, draining;
    atomic_bool stop_now; /* mv_stream_hub_free: end the turn at the next page */
    /* the hub thread's own: */
    int64_t head;    /* every change <= head has been considered for the streams at the head */
    bool head_known; /* false while no stream is open */
    uint64_t turns, marks, pages;
    int64_t last_hangup_ms, last_trim_ms, last_warn_ms;
    int freed; /* streams freed since the last trim */
    /* Kept across turns, so a turn costs the changes it offers and the streams they are for,
     * never a walk of every open stream: the streams by tenant and user id or role, which of them
     * are at the head (their position is `head`, or their own when ahead of it) and which behind,
     * the ones whose hang-up the loop does not watch, and every stream's next heartbeat. */
    mv__stream_index *ix;
    mv__sx_list at_head, behind, fresh, parked;
    mv__sx_wheel wheel;
    struct subv {
        sub **v;
        size_t n, cap;
    } cand, touched, part; /* a change's streams; a live page's; a replay page's */
    bool short_of_memory;  /* a page could not list its streams: it stops, and is read again */
    atomic_size_t index_entries; /* mv__stream_index_nodes(ix), for other threads */
    mv_change *page;             /* PAGE changes: the page being read */
    uint64_t idle_written;       /* mv__changes_written() at the last idle_sequence */
    /* The store the hub reads and numbers the change log through: the service's (on PostgreSQL
     * a private one-connection store, mv__service_change_log). */
    mv_store *log;
    /* Where the streams' sockets go once the server lets them take them (sse.h): its own thread
     * and epoll set, so an idle stream holds no libmicrohttpd connection. */
    mv_sse_loop *loop;
};

static mv_user sub_user(const sub *s) {
    return (mv_user){.id = s->user_id,
                     .roles = (const char *const *)s->roles,
                     .nroles = s->nroles,
                     .permissions = s->permissions,
                     .tenant = s->tenant};
}

static void sub_free(sub *s) {
    if (!s) return;
    if (s->s) mv_sse_on_close(s->s, NULL, NULL); /* not told of its close after this */
    if (s->s) mv_sse_set_loop(s->s, NULL);       /* not taken after this: the loop may go first */
    mv_sse_close(s->s);
    mv_sse_release(s->s);
    free(s->user_id);
    free(s->tenant);
    free(s->locale);
    for (size_t i = 0; s->roles && i < s->nroles; i++)
        free(s->roles[i]);
    free(s->roles);
    free(s->keys);
    json_decref(s->permissions);
    free(s);
}

static void warn(mv_stream_hub *hub, const char *what, const mv_err *err) {
    int64_t now = mv__mono_ms();
    if (hub->last_warn_ms && now - hub->last_warn_ms < WARN_EVERY_MS) return;
    hub->last_warn_ms = now;
    mv_log("warn", what, json_pack("{s:s}", "error", err->message));
}

/* ---- streams per user ----------------------------------------------------------------------- */

static uint64_t key_hash(const char *k, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    return h;
}

/* hub->mu held: the slot of (tenant, user), a new one when absent; NULL when out of memory. */
static struct held *held_slot(mv_stream_hub *hub, const sub *s) {
    size_t tl = strlen(s->tenant), ul = strlen(s->user_id), n = tl + 1 + ul;
    if ((hub->held_used + 1) * 2 > hub->held_cap) { /* rebuild, dropping users with none held */
        size_t live = 0, ncap = 64;
        for (size_t i = 0; i < hub->held_cap; i++)
            live += hub->held[i].key && hub->held[i].n > 0;
        while (ncap < 4 * (live + 1))
            ncap *= 2;
        struct held *nt = calloc(ncap, sizeof *nt);
        if (!nt) return NULL;
        size_t used = 0;
        for (size_t i = 0; i < hub->held_cap; i++) {
            struct held *o = &hub->held[i];
            if (!o->key) continue;
            if (o->n == 0) {
                free(o->key);
                continue;
            }
            size_t j = key_hash(o->key, o->len) & (ncap - 1);
            while (nt[j].key)
                j = (j + 1) & (ncap - 1);
            nt[j] = *o;
            used++;
        }
        free(hub->held);
        hub->held = nt;
        hub->held_cap = ncap;
        hub->held_used = used;
    }
    char *key = malloc(n);
    if (!key) return NULL;
    memcpy(key, s->tenant, tl + 1);
    memcpy(key + tl + 1, s->user_id, ul);
    size_t j = key_hash(key, n) & (hub->held_cap - 1);
    for (; hub->held[j].key; j = (j + 1) & (hub->held_cap - 1))
        if (hub->held[j].len == n && memcmp(hub->held[j].key, key, n) == 0) {
            free(key);
            return &hub->held[j];
        }
    hub->held[j] = (struct held){.key = key, .len = n, .n = 0};
    hub->held_used++;
    return &hub->held[j];
}

static void held_free(mv_stream_hub *hub) {
    for (size_t i = 0; i < hub->held_cap; i++)
        free(hub->held[i].key);
    free(hub->held);
}

/* ---- sending ------------------------------------------------------------------------------ */

static void send_json(sub *s, int64_t id, const char *event, json_t *data) {
    char *text = json_dumps(data, JSON_COMPACT);
    if (text) mv_sse_event(s->s, id, event, text);
    free(text);
    s->last_sent_id = id;
}

static void send_counts(mv_stream_hub *hub, sub *s, int64_t id, bool always) {
    mv_user u = sub_user(s);
    mv_inbox_counts c;
    if (mv_message_counts(hub->o.service, &u, NULL, false, &c, NULL) != MV_OK) return;
    s->counts_dirty = false;
    if (!always && s->counts_known && memcmp(&c, &s->counts, sizeof c) == 0) return;
    s->counts = c;
    s->counts_known = true;
    json_t *d = json_pack("{s:I,s:I,s:I}", "count", (json_int_t)c.count, "unseen",
                          (json_int_t)c.unseen, "unread", (json_int_t)c.unread);
    send_json(s, id, "counts", d);
    json_decref(d);
}

/* The client's reads made room in a stream's queue: look at it now. */
static void room_made(void *ctx) { mv_change_waiter_wake(((mv_stream_hub *)ctx)->waiter); }

/* The message as s's user sees it in their language, as its compact JSON text. */
static mv_code localized_text(mv_stream_hub *hub, const sub *s, const char *id, char **out,
                              size_t *len, mv_err *err) {
    mv_user u = sub_user(s);
    json_t *msg = NULL;
    mv_code rc = mv_message_get(hub->o.service, id, &u, &msg, err);
    if (rc == MV_OK) rc = mv_message_localize(hub->o.service, msg, s->locale, err);
    *out = rc == MV_OK ? json_dumps(msg, JSON_COMPACT) : NULL;
    if (rc == MV_OK && !*out) rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    *len = *out ? strlen(*out) : 0;
    json_decref(msg);
    return rc;
}

/* The message as s's user sees it, as event `name` (nothing when they cannot see it); false when
 * the stream has to stop here for now (its queue is full, or the store failed: the change is
 * offered again later, never skipped). */
static bool send_message(mv_stream_hub *hub, sub *s, const mv_change *c, const char *name) {
    if (!mv_sse_has_room(s->s, LOW_WATER, room_made, hub)) {
        s->held = true;
        return false;
    }
    mv_user u = sub_user(s);
    char *m = NULL; /* written from the stored row: json_dumps' bytes for the document */
    size_t len = 0;
    mv_err err = {0};
    mv_code rc = s->locale ? localized_text(hub, s, c->message_id, &m, &len, &err)
                           : mv_message_get_text(hub->o.service, c->message_id, &u, &m, &len, &err);
    if (rc == MV_MESSAGE_NOT_FOUND) return true; /* not this user's to see */
    if (rc != MV_OK) {
        warn(hub, "stream: cannot read a message", &err);
        s->held = true;
        return false;
    }
    if (len > MAX_EVENT_DATA) {
        json_t *d = json_pack("{s:s,s:b}", "id", c->message_id, "truncated", 1);
        send_json(s, c->id, "message.updated", d);
        json_decref(d);
    } else {
        mv_sse_event(s->s, c->id, name, m);
    }
    s->last_sent_id = c->id;
    free(m);
    s->counts_dirty = true;
    return true;
}

/* Who can see a message, as plain strings, so checking a thousand streams is a thousand string
 * comparisons rather than a thousand JSON walks. Every role counts: a member of the last of 256
 * roles gets the message as a member of the first does (lists check all of them too). */
typedef struct audience {
    char from[512], to[512]; /* the stored ids trimmed, "" when absent */
    const char **roles;
    size_t nroles;
    bool roles_known; /* false only when the role list could not be copied (out of memory) */
} audience;

static void audience_of(const json_t *doc, audience *a) {
    memset(a, 0, sizeof *a);
    json_t *from = json_object_get(doc, "fromUser"), *to = json_object_get(doc, "toUser");
    if ((from && !json_is_string(from) && !json_is_null(from)) ||
        (to && !json_is_string(to) && !json_is_null(to)))
        return; /* a stored number: only the exact rule knows; everyone may */
    mv_user f = {.id = json_string_value(from)}, t = {.id = json_string_value(to)};
    if (!f.id || !mv_user_id(&f, a->from, sizeof a->from)) a->from[0] = '\0';
    if (!t.id || !mv_user_id(&t, a->to, sizeof a->to)) a->to[0] = '\0';
    json_t *roles = json_object_get(doc, "toRoles");
    size_t i, n = json_array_size(roles);
    json_t *r;
    a->roles = n ? malloc(n * sizeof *a->roles) : NULL;
    if (n && !a->roles) return;
    a->roles_known = true;
    if (!a->roles) return; /* no roles: nothing to keep */
    json_array_foreach(roles, i, r) {
        if (json_is_string(r)) a->roles[a->nroles++] = json_string_value(r);
    }
}

/* A quick "maybe": the exact rule (mv_user_is_sender / _receiver, trimming included) runs only
 * for the streams this lets through: the trimmed ids equal, or a role in common. Without the role
 * list (out of memory), or with an id stored as a number, everyone may. */
static bool may_see(const audience *a, const sub *s) {
    if (!a->roles_known) return true;
    if (s->uid[0] && (strcmp(a->from, s->uid) == 0 || strcmp(a->to, s->uid) == 0)) return true;
    for (size_t i = 0; i < a->nroles; i++)
        for (size_t k = 0; k < s->nroles; k++)
            if (strcmp(a->roles[i], s->roles[k]) == 0) return true;
    return false;
}

/* ---- which streams a change is for --------------------------------------------------------- */

enum { KEY_USER, KEY_ROLE };

static bool subv_push(struct subv *a, sub *s) {
    if (a->n == a->cap) {
        size_t ncap = a->cap ? 2 * a->cap : 64;
        sub **nv = realloc(a->v, ncap * sizeof *nv);
        if (!nv) return false;
        a->v = nv;
        a->cap = ncap;
    }
    a->v[a->n++] = s;
    return true;
}

/* Whether s takes part in the page being read: a live page is for the streams at the head, a
 * replay page for the ones page_pass listed. A live page's streams join it when first picked
 * (hub->touched): a position below the head is the head's (every stream at the head has had
 * every change up to it). */
static bool in_page(mv_stream_hub *hub, sub *s, bool live, int64_t from) {
    if (!live) return s->page == hub->pages;
    if (s->place.list != &hub->at_head || !mv_sse_is_open(s->s)) return false;
    if (s->page == hub->pages) return true;
    if (!subv_push(&hub->touched, s)) {
        hub->short_of_memory = true;
        return false;
    }
    s->page = hub->pages;
    s->held = false;
    if (s->cursor < from) s->cursor = from;
    return true;
}

static void pick_one(mv_stream_hub *hub, sub *s, bool live, int64_t from) {
    if (s->mark == hub->marks || !in_page(hub, s, live, from)) return;
    s->mark = hub->marks;
    if (!subv_push(&hub->cand, s)) hub->short_of_memory = true;
}

/* Adds the page's streams filed under (tenant, kind, key) to hub->cand, each once per change. */
static void pick(mv_stream_hub *hub, const char *tenant, int kind, const char *key, bool live,
                 int64_t from) {
    const mv__sx_list *l = mv__stream_index_find(hub->ix, tenant, kind, key);
    for (mv__sx_node *n = l ? l->first : NULL; n; n = n->next)
        pick_one(hub, n->owner, live, from);
}

/* Every stream of the page (who may see the change is not known without the exact rule). */
static void pick_all(mv_stream_hub *hub, bool live, int64_t from) {
    if (!live) {
        for (size_t i = 0; i < hub->part.n; i++)
            pick_one(hub, hub->part.v[i], live, from);
        return;
    }
    for (mv__sx_node *n = hub->at_head.first; n; n = n->next)
        pick_one(hub, n->owner, live, from);
}

/* Offers change c to the streams of subs not yet past it and not held (doc: its message, loaded
 * once for the visibility check of every stream, released here). False, with no stream moved
 * past c, when the store could not say who may see it (it is offered again on a later turn): a
 * change a stream's user may see is never passed over without being sent. */
static bool deliver(mv_stream_hub *hub, const mv_change *c, sub **subs, size_t n, json_t *doc) {
    audience aud = {0};
    if (doc) audience_of(doc, &aud);
    for (size_t i = 0; i < n; i++) {
        sub *s = subs[i];
        if (s->held || s->cursor >= c->id) continue;
        if (strcmp(s->tenant, c->tenant) != 0) {
            s->cursor = c->id;
            continue;
        }
        if (c->kind == MV_CHANGE_VIEWER || c->kind == MV_CHANGE_REMINDED) {
            if (strcmp(s->user_id, c->viewer_id) == 0) {
                const char *event =
                    c->kind == MV_CHANGE_REMINDED ? "message.reminded" : "message.updated";
                if (c->message_id[0] && !send_message(hub, s, c, event)) continue;
                s->counts_dirty = true; /* seen-all / read-all: the counts say it */
                s->last_sent_id = c->id;
            }
            s->cursor = c->id;
            continue;
        }
        if (doc && may_see(&aud, s)) {
            mv_user u = sub_user(s);
            if ((mv_user_is_sender(&u, doc) || mv_user_is_receiver(&u, doc)) &&
                !send_message(hub, s, c,
                              c->kind == MV_CHANGE_CREATED ? "message.created" : "message.updated"))
                continue; /* held: c is offered to it again */
        }
        s->cursor = c->id;
    }
    free(aud.roles);
    json_decref(doc);
    return true;
}

/* Retention removed changes s had not been given: it cannot be complete. One `reset` (the client
 * refetches), then on from latest. */
static void reset_sub(sub *s, int64_t latest) {
    mv_sse_event(s->s, latest, "reset", "{}");
    s->cursor = s->last_sent_id = latest;
}

/* Loads change c's message (or only who may see it): false when the store is unavailable (the
 * change is offered again later); other errors pass it over with a warning (*out NULL). */
static bool load(mv_stream_hub *hub, const mv_change *c, bool audience_only, json_t **out) {
    mv_err err = {0};
    mv_code rc = audience_only ? mv__message_audience(hub->o.service, c->message_id, out, &err)
                               : mv_message_get(hub->o.service, c->message_id, NULL, out, &err);
    if (rc == MV_STORE_UNAVAILABLE) {
        warn(hub, "stream: cannot read a message", &err);
        return false;
    }
    if (rc != MV_OK && rc != MV_MESSAGE_NOT_FOUND)
        warn(hub, "stream: a change's message cannot be read; passed over", &err);
    return true;
}

/* Offers change c to the page's streams that may see it, found through the index: the streams of
 * its viewer, or of its message's sender, receiver and roles (the message is loaded first), in
 * its tenant. The others are not visited: their position moves past c with the page's (a held
 * one's stays before it, and c is looked at again for it later). Store errors other than
 * "unavailable" are not retried forever (they would wedge every stream): the change is then
 * passed over, with a warning. */
static bool offer(mv_stream_hub *hub, const mv_change *c, bool live, int64_t from) {
    hub->marks++;
    hub->cand.n = 0;
    json_t *doc = NULL;
    if (c->kind == MV_CHANGE_VIEWER || c->kind == MV_CHANGE_REMINDED) {
        mv_user v = {.id = c->viewer_id};
        char vid[512];
        if (mv_user_id(&v, vid, sizeof vid)) pick(hub, c->tenant, KEY_USER, vid, live, from);
    } else {
        /* who may see it first (a few columns); the message itself only when a stream here is
         * for it: most changes of a busy daemon are for users with no stream open */
        json_t *who = NULL;
        if (!load(hub, c, true, &who)) return false;
        if (!who) return true; /* nobody can see it */
        audience a = {0};
        audience_of(who, &a);
        if (!a.roles_known) {
            pick_all(hub, live, from);
        } else {
            pick(hub, c->tenant, KEY_USER, a.from, live, from);
            pick(hub, c->tenant, KEY_USER, a.to, live, from);
            for (size_t i = 0; a.roles && i < a.nroles; i++)
                pick(hub, c->tenant, KEY_ROLE, a.roles[i], live, from);
        }
        free(a.roles);
        json_decref(who);
        if (hub->cand.n == 0 && !hub->short_of_memory) return true;
        if (!hub->short_of_memory && !load(hub, c, false, &doc)) return false;
        if (!doc && !hub->short_of_memory) return true; /* removed meanwhile */
    }
    if (hub->short_of_memory) {
        json_decref(doc);
        return false;
    }
    return deliver(hub, c, hub->cand.v, hub->cand.n, doc);
}

/* ---- the hub's turn ------------------------------------------------------------------------ */

/* A stream closed (on any thread, under its lock): the hub drops it on its next turn. */
static void stream_closed(void *ctx) {
    sub *s = ctx;
    mv_stream_hub *hub = s->hub;
    pthread_mutex_lock(&hub->closed_mu);
    s->closed_next = hub->closed;
    hub->closed = s;
    pthread_mutex_unlock(&hub->closed_mu);
    mv_change_waiter_wake(hub->waiter);
}

/* When s is next looked at: its heartbeat is due, or (at least every second) its credential may
 * have expired (the hub's clock may be a test's, which jumps). */
static int64_t next_check(mv_stream_hub *hub, sub *s, int64_t now) {
    int64_t due = mv_sse_last_write_ms(s->s) + hub->o.heartbeat_ms;
    if (due <= now) due = now + hub->o.heartbeat_ms;
    if (s->expires_at && due > now + 1000) due = now + 1000;
    return due;
}

/* A stream opened: into the index, the wheel and the hang-up watch; its place (at the head or
 * behind) once the head is known. Out of memory it is closed (the client reconnects). */
static void file_sub(mv_stream_hub *hub, sub *s, int64_t now) {
    bool ok = mv__stream_index_add(hub->ix, &s->keys[0], s, s->tenant, KEY_USER, s->uid);
    for (size_t k = 0; ok && k < s->nroles; k++)
        ok = mv__stream_index_add(hub->ix, &s->keys[k + 1], s, s->tenant, KEY_ROLE, s->roles[k]);
    mv__sx_list_push(&hub->fresh, &s->place, s);
    mv__sx_list_push(&hub->parked, &s->parked, s);
    mv__sx_wheel_add(&hub->wheel, &s->timer, s, next_check(hub, s, now));
    if (!ok) mv_sse_close(s->s);
}

static void drop(mv_stream_hub *hub, sub *s) {
    pthread_mutex_lock(&hub->mu);
    if (s->prev)
        s->prev->next = s->next;
    else
        hub->subs = s->next;
    if (s->next) s->next->prev = s->prev;
    hub->nsubs--;
    struct held *h = held_slot(hub, s);
    if (h && h->n > 0) h->n--;
    pthread_mutex_unlock(&hub->mu);
    for (size_t k = 0; k <= s->nroles; k++)
        mv__stream_index_remove(hub->ix, &s->keys[k]);
    mv__sx_list_remove(&s->place);
    mv__sx_list_remove(&s->parked);
    mv__sx_wheel_remove(&hub->wheel, &s->timer);
    sub_free(s);
    hub->freed++;
}

/* Files the streams opened since the last turn and drops the ones closed (both lists taken under
 * hub->mu, so a stream closed is always one already filed or filed here first). */
static void absorb(mv_stream_hub *hub, int64_t now) {
    pthread_mutex_lock(&hub->mu);
    sub *in = hub->incoming;
    hub->incoming = NULL;
    pthread_mutex_lock(&hub->closed_mu);
    sub *gone = hub->closed;
    hub->closed = NULL;
    pthread_mutex_unlock(&hub->closed_mu);
    pthread_mutex_unlock(&hub->mu);
    for (sub *s = in, *next; s; s = next) {
        next = s->in_next;
        file_sub(hub, s, now);
    }
    for (sub *s = gone, *next; s; s = next) {
        next = s->closed_next;
        drop(hub, s);
    }
    atomic_store(&hub->index_entries, mv__stream_index_nodes(hub->ix));
}

/* The head is known: each stream opened since goes to the head or behind it. */
static void place_fresh(mv_stream_hub *hub) {
    while (hub->fresh.first) {
        sub *s = hub->fresh.first->owner;
        mv__sx_list_remove(&s->place);
        mv__sx_list_push(s->cursor >= hub->head ? &hub->at_head : &hub->behind, &s->place, s);
    }
}

/* With no stream open nobody here reads the log, but on PostgreSQL its new rows still need their
 * event ids (message/changes.c), and the sequencer's NOTIFY is what wakes the other daemons'
 * streams for changes written in this process: when this process has written changes since the
 * last look, asking for the newest id numbers them. Otherwise an idle hub leaves the store alone
 * (it wakes on every commit of the process, most of which write no change), and retention numbers
 * whatever is left. True when it looked. */
static bool idle_sequence(mv_stream_hub *hub) {
    uint64_t written = mv__changes_written();
    if (!mv__changes_numbered_after_commit(hub->o.store) || written == hub->idle_written)
        return false;
    hub->idle_written = written;
    mv_err err = {0};
    if (mv_changes_latest(hub->log, NULL, NULL, &err) != MV_OK)
        warn(hub, "stream: cannot read the change log", &err);
    return true;
}

/* A replay page: the streams behind whose position is in [from, until). */
static bool list_part(mv_stream_hub *hub, int64_t from, int64_t until) {
    hub->part.n = 0;
    for (mv__sx_node *n = hub->behind.first; n; n = n->next) {
        sub *s = n->owner;
        if (s->cursor < from || s->cursor >= until || !mv_sse_is_open(s->s)) continue;
        if (!subv_push(&hub->part, s)) return false;
        s->page = hub->pages;
        s->held = false;
    }
    return true;
}

/* After a page that reached upto: its streams not held are there (their counts follow); a live
 * page's held ones fall behind, a replay page's that caught up join the head. */
static void page_done(mv_stream_hub *hub, bool live, int64_t upto) {
    struct subv *a = live ? &hub->touched : &hub->part;
    for (size_t i = 0; i < a->n; i++) {
        sub *s = a->v[i];
        if (!s->held && s->cursor < upto) s->cursor = upto;
        if (s->counts_dirty) send_counts(hub, s, s->last_sent_id, false);
        mv__sx_list *to = live && s->held                               ? &hub->behind
                          : !live && !s->held && s->cursor >= hub->head ? &hub->at_head
                                                                        : NULL;
        if (to) {
            mv__sx_list_remove(&s->place);
            mv__sx_list_push(to, &s->place, s);
        }
    }
}

/* Retention removed some of what the page from `from` should hold: the page's streams below
 * pruned get a `reset`. */
static void page_pruned(mv_stream_hub *hub, bool live, int64_t from, int64_t pruned,
                        int64_t latest) {
    int64_t to = latest > pruned ? latest : pruned;
    mv__sx_node *n = live ? hub->at_head.first : NULL;
    for (size_t i = 0; live ? n != NULL : i < hub->part.n; i++) {
        sub *s = live ? n->owner : hub->part.v[i];
        if (live) n = n->next;
        int64_t at = s->cursor > from ? s->cursor : from;
        if (at < pruned) {
            reset_sub(s, to);
            send_counts(hub, s, to, false);
        }
    }
}

/* One page of the log after `from` (changes above `until` are left for later), offered to the
 * streams at the head (live) or to the streams behind whose position is in [from, until): each
 * of them has had every change up to its own position, so this page is exactly what it lacks
 * next. Returns the position every such stream that was not held has now reached, or -1 when the
 * log could not be read. */
static int64_t page_pass(mv_stream_hub *hub, int64_t from, int64_t until, int64_t latest, bool live,
                         mv_change *page, int max) {
    int got = 0;
    int64_t pruned = 0;
    mv_err err = {0};
    if (mv__changes_read_page(hub->log, from, page, max, &got, &pruned, &err) != MV_OK) {
        warn(hub, "stream: cannot read the change log", &err);
        return -1;
    }
    hub->pages++;
    hub->touched.n = 0;
    hub->short_of_memory = false;
    if (!live && !list_part(hub, from, until)) return -1;
    if (pruned > from) {
        page_pruned(hub, live, from, pruned, latest);
        return pruned;
    }
    int64_t upto = from;
    bool whole = true;
    for (int k = 0; k < got && page[k].id <= until; k++) {
        if (!offer(hub, &page[k], live, from)) {
            whole = false;
            break;
        }
        upto = page[k].id;
    }
    /* A short page holds every change up to `until` that exists (ids become visible in order,
     * and until was read before the page): the ids between were rolled back. */
    if (whole && (got < max || page[got - 1].id >= until)) upto = until;
    page_done(hub, live, upto);
    return upto;
}

/* The streams behind the head, a page at a time in turns, for at most REPLAY_BUDGET_MS. True
 * when some stream behind could take more right now. */
static bool replay(mv_stream_hub *hub, int64_t latest, mv_change *page) {
    int64_t started = mv__mono_ms();
    for (;;) {
        sub *next = NULL;
        for (size_t k = 0, n = hub->behind.n; k < n && !next && hub->behind.first; k++) {
            sub *s = hub->behind.first->owner;
            mv__sx_list_remove(&s->place);
            if (s->cursor >= hub->head) { /* caught up (or opened ahead of it) */
                s->held = false;
                mv__sx_list_push(&hub->at_head, &s->place, s);
                continue;
            }
            mv__sx_list_push(&hub->behind, &s->place, s); /* to the end: round robin */
            if (s->full_turn == hub->turns || !mv_sse_is_open(s->s)) continue;
            if (!mv_sse_has_room(s->s, LOW_WATER, room_made, hub)) {
                s->full_turn = hub->turns; /* a client that does not read: not again this turn */
                continue;
            }
            next = s;
        }
        if (!next) return false;
        if (mv__mono_ms() - started >= REPLAY_BUDGET_MS) return true;
        int64_t from = next->cursor;
        if (page_pass(hub, from, hub->head, latest, false, page, REPLAY_PAGE) <= from)
            return false; /* no progress (the store failed): on the next turn */
    }
}

/* ---- heartbeats, expiry and hang-ups ------------------------------------------------------- */

typedef struct timer_ctx {
    mv_stream_hub *hub;
    int64_t now, wall;
} timer_ctx;

/* The wheel says s is due: its credential expired (the client authenticates again and resumes
 * from the last id it got), or it has been quiet for a heartbeat. */
static void timer_due(void *owner, void *ctx) {
    sub *s = owner;
    timer_ctx *t = ctx;
    if (!mv_sse_is_open(s->s)) return; /* dropped on the next turn */
    if (s->expires_at && t->wall >= s->expires_at) {
        mv_sse_event(s->s, s->last_sent_id, "reauth", "{}");
        mv_sse_close(s->s);
        return;
    }
    if (mv_sse_queued(s->s) == 0 && t->now - mv_sse_last_write_ms(s->s) >= t->hub->o.heartbeat_ms)
        mv_sse_write(s->s, ": ping\n\n", 8);
    mv__sx_wheel_add(&t->hub->wheel, &s->timer, s, next_check(t->hub, s, t->now));
}

/* Streams whose socket libmicrohttpd still serves (TLS): their hang-ups are looked for here, in
 * one poll; a stream the loop took leaves the watch (the loop notices its hang-up). */
static void hang_ups(mv_stream_hub *hub) {
    mv_sse_stream **streams = hub->parked.n ? malloc(hub->parked.n * sizeof *streams) : NULL;
    int n = 0;
    for (mv__sx_node *node = hub->parked.first, *next; node; node = next) {
        next = node->next;
        sub *s = node->owner;
        if (mv_sse_is_taken(s->s))
            mv__sx_list_remove(&s->parked);
        else if (streams)
            streams[n++] = s->s;
    }
    if (n) mv_sse_close_hung_up(streams, n);
    free(streams);
}

/* One pass over the log for the open streams: 0 nothing to do, 1 it read something new (or, with
 * none open, numbered), 2 streams behind have more to replay at once. */
static int turn(mv_stream_hub *hub) {
    int64_t now = mv__mono_ms();
    absorb(hub, now);
    hub->turns++;
    if (hub->freed && now - hub->last_trim_ms >= TRIM_EVERY_MS) {
        hub->freed = 0; /* their buffers were freed all over the heap: give the pages back */
        hub->last_trim_ms = now;
        malloc_trim(0);
    }
    timer_ctx t = {hub, now, mv_clock_now(hub->o.clock)};
    mv__sx_wheel_expire(&hub->wheel, now, timer_due, &t);
    if (hub->parked.n && now - hub->last_hangup_ms >= HANGUP_EVERY_MS) {
        hub->last_hangup_ms = now;
        hang_ups(hub);
    }
    if (hub->at_head.n + hub->behind.n + hub->fresh.n == 0) {
        hub->head_known = false;
        return idle_sequence(hub) ? 1 : 0;
    }
    int64_t latest = 0;
    mv_err err = {0};
    if (mv_changes_latest(hub->log, &latest, NULL, &err) != MV_OK) {
        warn(hub, "stream: cannot read the change log", &err);
        return 0;
    }
    if (!hub->head_known) {
        hub->head = latest;
        hub->head_known = true;
    }
    place_fresh(hub);
    if (!hub->page) hub->page = malloc(PAGE * sizeof *hub->page);
    mv_change *page = hub->page; /* kept: 110 KiB freed per turn made malloc consolidate its heap */
    int result = 0;
    bool stuck = !page; /* the store failed: wait for the next wake-up or timeout, not spin */
    /* live first: the streams at the head */
    for (int round = 0; !stuck && round < LIVE_PAGES_PER_TURN && hub->head < latest &&
                        !atomic_load(&hub->stop_now);
         round++) {
        int64_t before = hub->head;
        int64_t upto = page_pass(hub, hub->head, latest, latest, true, page, PAGE);
        result = 1;
        stuck = upto <= before;
        if (!stuck) hub->head = upto;
    }
    if (!stuck && hub->head < latest) result = 2; /* more live changes than one turn takes */
    if (!stuck && replay(hub, latest, page)) result = 2;
    return result;
}

/* Under a stream of commits the hub would wake for each; at most one turn per MIN_TURN_MS lets
 * one turn take many changes at once (a page read instead of one per commit). After a turn that
 * found nothing new the pause is shorter: on PostgreSQL the hub's own sequencer commit wakes it
 * once more for such a turn, and a change committed just after it began should not wait out the
 * whole pause again. With replay still to do it does not wait for a wake-up at all. A turn no
 * longer visits every open stream, so the pause does not grow with them. */
#define MIN_TURN_MS 5
#define MIN_EMPTY_TURN_MS 2

static void *run(void *arg) {
    mv_stream_hub *hub = arg;
    pthread_setname_np(pthread_self(), "mv-stream-hub"); /* top -H, perf */
    for (;;) {
        pthread_mutex_lock(&hub->mu);
        bool stop = hub->stopping;
        pthread_mutex_unlock(&hub->mu);
        if (stop) break;
        int64_t started = mv__mono_ms();
        int r = turn(hub);
        int64_t since = mv__mono_ms() - started;
        if (r == 2) {
            mv_change_waiter_wait(hub->waiter, 0); /* consumes a pending wake-up */
            if (since < 1) mv_sleep_ms(1);
            continue;
        }
        /* open streams: every HANGUP_EVERY_MS at least, for heartbeats and hang-ups */
        int wait =
            hub->head_known && hub->o.poll_ms > HANGUP_EVERY_MS ? HANGUP_EVERY_MS : hub->o.poll_ms;
        mv_change_waiter_wait(hub->waiter, wait);
        since = mv__mono_ms() - started;
        int pause = r ? MIN_TURN_MS : MIN_EMPTY_TURN_MS;
        if (since < pause) mv_sleep_ms(pause - since);
    }
    return NULL;
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

mv_code mv_stream_hub_new(const mv_stream_hub_options *opts, mv_stream_hub **out, mv_err *err) {
    *out = NULL;
    if (!opts->service) return mv_err_set(err, MV_INVALID_ARGUMENT, "stream hub needs a service");
    mv_stream_hub *hub = calloc(1, sizeof *hub);
    if (!hub) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    hub->o = *opts;
    if (!hub->o.store) hub->o.store = opts->service->o.store;
    if (hub->o.max_connections <= 0) hub->o.max_connections = 20000;
    if (hub->o.max_per_user <= 0) hub->o.max_per_user = 16;
    if (hub->o.heartbeat_ms <= 0) hub->o.heartbeat_ms = 15000;
    if (hub->o.poll_ms <= 0) hub->o.poll_ms = mv__store_notifies(hub->o.store) ? 500 : 100;
    if (hub->o.ticket_ttl_ms <= 0) hub->o.ticket_ttl_ms = 60000;
    mv_code rc = MV_OK;
    if (opts->secret && opts->secret_len) {
        hub->secret_len =
            opts->secret_len < sizeof hub->secret ? opts->secret_len : sizeof hub->secret;
        memcpy(hub->secret, opts->secret, hub->secret_len);
    } else {
        hub->secret_len = 32;
        rc = mv_random_bytes(hub->secret, 32, err);
    }
    pthread_mutex_init(&hub->mu, NULL);
    pthread_mutex_init(&hub->closed_mu, NULL);
    mv__sx_wheel_init(&hub->wheel, mv__mono_ms());
    hub->log = mv__service_change_log(opts->service);
    if (rc == MV_OK && !(hub->ix = mv__stream_index_new()))
        rc = mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (rc == MV_OK && !(hub->loop = mv_sse_loop_new()))
        rc = mv_err_set(err, MV_NO_MEMORY, "cannot start the stream thread");
    if (rc == MV_OK) rc = mv_change_waiter_new(hub->o.store, &hub->waiter, err);
    if (rc == MV_OK && pthread_create(&hub->thread, NULL, run, hub) != 0)
        rc = mv_err_set(err, MV_INTERNAL, "cannot start the stream thread");
    if (rc != MV_OK) {
        mv_change_waiter_free(hub->waiter);
        mv_sse_loop_free(hub->loop);
        mv__stream_index_free(hub->ix);
        pthread_mutex_destroy(&hub->mu);
        pthread_mutex_destroy(&hub->closed_mu);
        free(hub);
        return rc;
    }
    mv_sse_reserve_descriptors(hub->o.max_connections);
    *out = hub;
    return MV_OK;
}

void mv_stream_hub_drain(mv_stream_hub *hub) {
    if (!hub) return;
    pthread_mutex_lock(&hub->mu);
    hub->draining = true;
    for (sub *s = hub->subs; s; s = s->next)
        mv_sse_close(s->s);
    pthread_mutex_unlock(&hub->mu);
}

void mv_stream_hub_free(mv_stream_hub *hub) {
    if (!hub) return;
    pthread_mutex_lock(&hub->mu);
    hub->stopping = true;
    pthread_mutex_unlock(&hub->mu);
    atomic_store(&hub->stop_now, true);
    mv_change_waiter_wake(hub->waiter);
    pthread_join(hub->thread, NULL);
    mv__stream_index_free(hub->ix); /* first: it lets go of the streams' nodes */
    for (sub *s = hub->subs, *next; s; s = next) {
        next = s->next;
        sub_free(s);
    }
    mv_change_waiter_free(hub->waiter);
    mv_sse_loop_free(hub->loop); /* the sockets of streams still sending what was queued */
    mv_sse_reserve_descriptors(-hub->o.max_connections);
    held_free(hub);
    pthread_mutex_destroy(&hub->mu);
    pthread_mutex_destroy(&hub->closed_mu);
    free(hub->cand.v);
    free(hub->touched.v);
    free(hub->part.v);
    free(hub->page);
    memset(hub->secret, 0, sizeof hub->secret);
    free(hub);
}

size_t mv_stream_hub_index_entries(mv_stream_hub *hub) { return atomic_load(&hub->index_entries); }

int mv_stream_hub_connections(mv_stream_hub *hub) {
    pthread_mutex_lock(&hub->mu);
    int n = hub->nsubs;
    pthread_mutex_unlock(&hub->mu);
    return n;
}

/* ---- tickets ------------------------------------------------------------------------------- */

static mv_code ticket_auth(void *ctx, mv_http_request *req, const char *ticket, mv_principal *p,
                           mv_err *err) {
    mv_stream_hub *hub = ctx;
    return mv__stream_ticket_check(hub->secret, hub->secret_len, mv_clock_now(hub->o.clock), req,
                                   ticket, p, err);
}

static void create_ticket(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_stream_hub *hub = req->route_ctx;
    int64_t expires = mv_clock_now(hub->o.clock) + hub->o.ticket_ttl_ms;
    char *t = mv__stream_ticket_new(hub->secret, hub->secret_len, req->principal,
                                    mv_http_reader_locale(req, hub->o.locale_claim), expires);
    if (!t) {
        mv_http_errorf(res, MV_NO_MEMORY, "out of memory");
        return;
    }
    mv_http_set_header(res, "Cache-Control", "no-store");
    mv_http_json(res, 201, json_pack("{s:s,s:I}", "ticket", t, "expiresAt", (json_int_t)expires));
    free(t);
}

/* ---- GET /messages/stream ------------------------------------------------------------------ */

/* Last-Event-ID (header, else lastEventId): -1 when absent; 400 unless a decimal id. */
static mv_code last_event_id(mv_http_request *req, int64_t *out, mv_err *err) {
    const char *v = mv_http_header_get(req, "Last-Event-ID");
    if (!v) v = mv_http_query_get(req, "lastEventId");
    *out = -1;
    if (!v) return MV_OK;
    size_t n = strlen(v);
    bool digits = n > 0 && n <= 18;
    for (size_t i = 0; digits && i < n; i++)
        digits = v[i] >= '0' && v[i] <= '9';
    if (!digits)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "Last-Event-ID must be an event id (a decimal number) from this stream");
    *out = strtoll(v, NULL, 10);
    return MV_OK;
}

static mv_code check_stream_query(const mv_http_request *req, mv_err *err) {
    for (size_t i = 0; i < req->nquery; i++)
        if (strcmp(req->query[i].name, "ticket") != 0 &&
            strcmp(req->query[i].name, "lastEventId") != 0)
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "unknown query parameter \"%.64s\" (allowed: ticket, lastEventId)",
                              req->query[i].name);
    return MV_OK;
}

static sub *sub_new(mv_stream_hub *hub, const mv_principal *p) {
    sub *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->user_id = strdup(p->user_id);
    s->tenant = strdup(p->tenant ? p->tenant : "default");
    s->roles = calloc(p->nroles + 1, sizeof *s->roles);
    s->keys = calloc(p->nroles + 1, sizeof *s->keys);
    s->hub = hub;
    mv_user u = {.id = p->user_id};
    if (!mv_user_id(&u, s->uid, sizeof s->uid)) s->uid[0] = '\0';
    s->permissions = json_deep_copy(p->permissions ? p->permissions : json_object());
    bool ok = s->user_id && s->tenant && s->roles && s->keys && s->permissions;
    for (size_t i = 0; ok && i < p->nroles; i++)
        ok = (s->roles[s->nroles++] = strdup(p->roles[i]));
    s->s = ok ? mv_sse_stream_new(0) : NULL;
    if (!s->s) {
        sub_free(s);
        return NULL;
    }
    mv_sse_set_loop(s->s, hub->loop);
    return s;
}

/* Adds s unless a limit says no. Streams closed but not yet dropped by the hub do not count.
 * With 20,000 streams open this runs once per stream opened: a walk of plain string comparisons,
 * and a stream's own lock only taken where it may decide (its user's, or every one when the
 * streams held, closed ones included, reach the limit). */
static mv_code attach(mv_stream_hub *hub, sub *s, mv_err *err) {
    pthread_mutex_lock(&hub->mu);
    struct held *h = held_slot(hub, s);
    bool full = hub->nsubs >= hub->o.max_connections;
    bool user_full = !h || h->n >= hub->o.max_per_user;
    int open = full ? 0 : hub->nsubs, mine = user_full ? 0 : h->n;
    for (sub *o = full || user_full ? hub->subs : NULL; o; o = o->next) {
        bool same = strcmp(o->user_id, s->user_id) == 0 && strcmp(o->tenant, s->tenant) == 0;
        if (!same && !full) continue;
        bool live = mv_sse_is_open(o->s);
        open += full && live;
        mine += user_full && same && live;
    }
    mv_code rc = h ? MV_OK : mv_err_set(err, MV_NO_MEMORY, "out of memory");
    if (hub->draining)
        rc =
            mv_err_set(err, MV_STREAM_CAPACITY, "the server is shutting down; reconnect elsewhere");
    else if (open >= hub->o.max_connections)
        rc = mv_err_set(err, MV_STREAM_CAPACITY, "too many open streams on this server");
    else if (mine >= hub->o.max_per_user)
        rc = mv_err_set(err, MV_STREAM_CAPACITY, "too many open streams for this user (at most %d)",
                        hub->o.max_per_user);
    if (rc == MV_OK) {
        s->prev = NULL;
        s->next = hub->subs;
        if (hub->subs) hub->subs->prev = s;
        hub->subs = s;
        hub->nsubs++;
        h->n++;
        s->in_next = hub->incoming;
        hub->incoming = s;
        /* under hub->mu: the hub thread files the stream before it hears of its close */
        mv_sse_on_close(s->s, stream_closed, s);
    }
    pthread_mutex_unlock(&hub->mu);
    return rc;
}

/* When the credential the stream is opened with expires (wall-clock ms; 0: never): a ticket's
 * `exp` is in milliseconds, a JWT's in seconds; headers mode has no expiry. */
static int64_t credential_expiry(const mv_http_request *req) {
    const json_t *identity = req->principal ? req->principal->identity : NULL;
    json_t *exp = json_object_get(identity, "exp");
    if (!json_is_number(exp)) return 0;
    double v = json_number_value(exp);
    return mv_http_query_get(req, "ticket") ? (int64_t)v : (int64_t)(v * 1000);
}

static void open_stream(mv_http_request *req, mv_http_response *res, void *app) {
    (void)app;
    mv_stream_hub *hub = req->route_ctx;
    mv_err err = {0};
    int64_t resume, latest = 0, pruned = 0;
    if (last_event_id(req, &resume, &err) != MV_OK ||
        mv_changes_latest(hub->o.store, &latest, &pruned, &err) != MV_OK) {
        mv_http_error(res, &err);
        return;
    }
    sub *s = sub_new(hub, req->principal);
    if (!s) {
        mv_http_errorf(res, MV_NO_MEMORY, "out of memory");
        return;
    }
    /* Resuming below what retention removed (or from an id this log never had) cannot be
     * complete: say so, and go on live from now. */
    bool reset = resume >= 0 && (resume < pruned || resume > latest);
    s->cursor = resume >= 0 && !reset ? resume : latest;
    s->last_sent_id = s->cursor;
    s->expires_at = credential_expiry(req);
    /* EventSource sends Accept-Language itself; a ticket carries the language it was made in */
    const char *locale = mv_http_query_get(req, "ticket")
                             ? mv_http_header_get(req, "Accept-Language")
                             : mv_http_reader_locale(req, hub->o.locale_claim);
    if (!locale && mv_http_query_get(req, "ticket"))
        locale = mv_json_str(req->principal->identity, "locale");
    if (locale && *locale && !(s->locale = strndup(locale, 256))) {
        sub_free(s);
        mv_http_errorf(res, MV_NO_MEMORY, "out of memory");
        return;
    }
    mv_sse_write(s->s, "retry: 1000\n\n", 13);
    if (reset) mv_sse_event(s->s, latest, "reset", "{}");
    send_counts(hub, s, s->cursor, true);
    mv_sse_stream *stream = s->s;
    mv_sse_retain(stream); /* the response's reference: from here the hub may free s */
    if (attach(hub, s, &err) != MV_OK) {
        sub_free(s);
        mv_sse_release(stream);
        mv_http_error(res, &err);
        return;
    }
    res->status = 200;
    mv_http_set_header(res, "Content-Type", "text/event-stream");
    mv_http_set_header(res, "Cache-Control", "no-store");
    mv_http_set_header(res, "X-Accel-Buffering", "no");
    res->stream = stream;
}

mv_code mv_stream_routes_add(mv_router *router, mv_stream_hub *hub, mv_err *err) {
    mv_route stream = {"GET", "/messages/stream", open_stream, false,
                       false, check_stream_query, hub};
    stream.accepts_ticket = true;
    mv_route ticket = {"POST", "/stream-tickets", create_ticket, false, true, NULL, hub};
    mv_router_set_ticket_auth(router, ticket_auth, hub);
    mv_code rc = mv_router_add(router, &stream, err);
    return rc == MV_OK ? mv_router_add(router, &ticket, err) : rc;
}
