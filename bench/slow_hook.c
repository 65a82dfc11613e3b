/* slow_hook.c — a webhook receiver that takes its time, for the hostile-load benchmark (`make
 * bench`): every request is answered 200 `null` (or --body JSON: a prepare hook's item) after
 * --delay-ms (default 3000), one thread per connection, keep-alive. Prints {"port": N} on stdout
 * once listening, then serves until killed.
 *
 * Usage: slow_hook [--delay-ms MS] [--body JSON] */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static int delay_ms = 3000;
static char reply[1024] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          "Content-Length: 4\r\n\r\nnull";

static void *serve(void *arg) {
    int fd = (int)(intptr_t)arg;
    char buf[65536];
    size_t len = 0;
    for (;;) {
        char *end;
        while (len < 4 || !(buf[len] = '\0', end = strstr(buf, "\r\n\r\n"))) {
            if (len + 1 >= sizeof buf) goto done;
            ssize_t r = recv(fd, buf + len, sizeof buf - 1 - len, 0);
            if (r <= 0) goto done;
            len += (size_t)r;
        }
        size_t head = (size_t)(end - buf) + 4, body = 0;
        const char *cl = strcasestr(buf, "\r\nContent-Length:");
        if (cl && cl < end) body = strtoul(cl + 17, NULL, 10);
        while (len < head + body) {
            if (len + 1 >= sizeof buf) goto done;
            ssize_t r = recv(fd, buf + len, sizeof buf - 1 - len, 0);
            if (r <= 0) goto done;
            len += (size_t)r;
        }
        memmove(buf, buf + head + body, len - head - body);
        len -= head + body;
        usleep((useconds_t)delay_ms * 1000);
        if (send(fd, reply, strlen(reply), MSG_NOSIGNAL) < 0) goto done;
    }
done:
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--delay-ms"))
            delay_ms = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--body"))
            snprintf(reply, sizeof reply,
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(argv[i + 1]), argv[i + 1]);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    socklen_t sl = sizeof sa;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 512) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0) {
        perror("slow_hook");
        return 1;
    }
    printf("{\"port\": %d}\n", ntohs(sa.sin_port));
    fflush(stdout);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) continue;
        pthread_t t;
        if (pthread_create(&t, NULL, serve, (void *)(intptr_t)fd) != 0) {
            close(fd);
            continue;
        }
        pthread_detach(t);
    }
}
