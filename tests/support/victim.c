/* victim.c — see victim.h. */
#include "support/victim.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MAX_LINES = 8, JOB_BYTES = 8192 };

static void run_victim(int in, victim_fn fn, void *arg) {
    static char buf[JOB_BYTES];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(in, buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
    char *lines[MAX_LINES], *save = NULL;
    int count = 0;
    for (char *l = strtok_r(buf, "\n", &save); l && count < MAX_LINES;
         l = strtok_r(NULL, "\n", &save))
        lines[count++] = l;
    if (count == 0) _exit(2); /* the test ended before sending a job */
    fn(lines, count, arg);
    _exit(0);
}

bool victim_fork(victim *v, victim_fn fn, void *arg) {
    int fds[2];
    if (pipe(fds) != 0) return false;
    v->pid = fork();
    if (v->pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return false;
    }
    if (v->pid == 0) {
        close(fds[1]);
        run_victim(fds[0], fn, arg);
    }
    close(fds[0]);
    v->job_fd = fds[1];
    return true;
}

bool victim_send(victim *v, const char *const *lines, int n) {
    char job[JOB_BYTES];
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        int w = snprintf(job + len, sizeof job - len, "%s\n", lines[i]);
        if (w < 0 || (size_t)w >= sizeof job - len) return false;
        len += (size_t)w;
    }
    bool ok = write(v->job_fd, job, len) == (ssize_t)len;
    close(v->job_fd);
    v->job_fd = -1;
    return ok;
}

bool victim_reached(const victim *v, http_sink *sink, int timeout_ms) {
    for (int waited = 0; waited < timeout_ms; waited += 50) {
        if (http_sink_wait(sink, 1, 50)) return true;
        int status;
        if (waitpid(v->pid, &status, WNOHANG) == v->pid) {
            fprintf(stderr, "the victim exited before the handler ran (status %d)\n",
                    WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
            return false;
        }
    }
    return false;
}

bool victim_kill(victim *v) {
    kill(v->pid, SIGKILL);
    int status = 0;
    waitpid(v->pid, &status, 0);
    return WIFSIGNALED(status);
}
