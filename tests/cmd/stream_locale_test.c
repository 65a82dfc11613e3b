/* stream_locale_test.c — live streams in the reader's language, against a real missived: a stream
 * opened with Accept-Language (or X-User-Locale in headers mode) gets each message.created in the
 * template's matching locale with "locale" set, a stream opened with a ticket made in a language
 * keeps it (an EventSource cannot set headers), and a stream naming none gets the default. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "missive/base.h"
#include "support/daemon_proc.h"
#include "support/sse_client.h"
#include "support/stores.h"

static const char OFFER[] =
    "{\"templateCd\": \"offer\", \"type\": \"info\", \"actions\": [],"
    " \"receiverContent\": {\"title\": \"Flat {{flat}} for you\"},"
    " \"prepare\": {\"toUser\": \"{{to}}\"},"
    " \"locales\": {\"de\": {\"receiverContent\": {\"title\": \"Wohnung {{flat}}\"}},"
    "  \"fr\": {\"receiverContent\": {\"title\": \"Appartement {{flat}}\"}}}}";

/* The receiver title and locale of the next message.created on c ("" when none came). */
static void next_created(sse *c, char title[64], char locale[16]) {
    sse_event ev;
    title[0] = locale[0] = '\0';
    if (!sse_wait(c, "message.created", 3000, &ev)) return;
    json_t *d = json_loads(ev.data, 0, NULL);
    const char *t = mv_json_str(json_object_get(d, "receiverContent"), "title");
    const char *l = mv_json_str(d, "locale");
    snprintf(title, 64, "%s", t ? t : "");
    snprintf(locale, 16, "%s", l ? l : "(none)");
    json_decref(d);
}

STORE_TEST(a_stream_carries_each_message_in_the_language_its_reader_named) {
    sse_env e;
    REQUIRE(sse_env_init(&e, kind, "stream_locale", NULL, NULL));
    char path[1024];
    snprintf(path, sizeof path, "%s/templates/offer.json", e.dir);
    REQUIRE(test_write_file(path, "%s", OFFER));
    int port;
    pid_t pid = sse_env_start(&e, &port);
    REQUIRE(pid > 0);
    sse *de = sse_open(port, "/messages/stream", "X-User-Id: bob\r\nAccept-Language: de-AT\r\n");
    sse *fr = sse_open(port, "/messages/stream", "X-User-Id: bob\r\nX-User-Locale: fr\r\n");
    sse *plain = sse_open(port, "/messages/stream", "X-User-Id: bob\r\n");
    test_reply t =
        test_http(port, "POST", "/stream-tickets", "X-User-Id: bob\nAccept-Language: de\n", NULL);
    CHECK_INT(t.status, 201);
    snprintf(path, sizeof path, "/messages/stream?ticket=%s", mv_json_str(t.json, "ticket"));
    test_reply_free(&t);
    sse *ticket = sse_open(port, path, NULL);
    REQUIRE(de->status == 200 && fr->status == 200 && plain->status == 200 &&
            ticket->status == 200);
    sse_event ev;
    CHECK(sse_wait(ticket, "counts", 2000, &ev));
    test_reply r = test_http(port, "POST", "/messages/new/offer", "X-User-Id: ana\n",
                             "{\"to\": \"bob\", \"flat\": \"4C\"}");
    CHECK_INT(r.status, 201);
    test_reply_free(&r);
    char title[64], locale[16];
    next_created(de, title, locale);
    CHECK_STR(title, "Wohnung 4C");
    CHECK_STR(locale, "de");
    next_created(fr, title, locale);
    CHECK_STR(title, "Appartement 4C");
    CHECK_STR(locale, "fr");
    next_created(ticket, title, locale);
    CHECK_STR(title, "Wohnung 4C");
    next_created(plain, title, locale);
    CHECK_STR(title, "Flat 4C for you");
    sse_close(de);
    sse_close(fr);
    sse_close(plain);
    sse_close(ticket);
    CHECK_INT(test_daemon_stop(pid), 0);
}

int main(void) { return RUN_TESTS(a_stream_carries_each_message_in_the_language_its_reader_named); }
