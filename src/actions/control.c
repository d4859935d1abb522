/*
 * control.c: the supervisor's side of the control channel (protocol in
 * docs/actions.md). A private directory holds the request file we append
 * one JSON line to per request, and the file PATH.ack the package appends
 * its replies to: a hello per process (its pid, rank and the signal its
 * stack dumps are registered on), then one line per request it acted on.
 */
#include "actions_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/cut.h"
#include "../core/json.h"
#include "trainwatch/error.h"

int tw_control_open(tw_control *c, char *err, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(c->dir, sizeof c->dir, "%s/trainwatch-control-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(c->dir)) {
        snprintf(err, cap, "the control channel: %s: %s", c->dir, strerror(errno));
        c->dir[0] = '\0';
        return TW_EIO;
    }
    snprintf(c->path, sizeof c->path, "%s/requests", c->dir);
    snprintf(c->ack_path, sizeof c->ack_path, "%s.ack", c->path);
    c->fd = open(c->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
    if (c->fd < 0) {
        snprintf(err, cap, "the control channel: %s: %s", c->path, strerror(errno));
        rmdir(c->dir);
        c->dir[0] = '\0';
        return TW_EIO;
    }
    c->ack_fd = -1;
    c->stack_signal = SIGUSR2;
    char sig[16];
    snprintf(sig, sizeof sig, "%d", c->stack_signal);
    if (setenv("TRAINWATCH_CONTROL", c->path, 1) != 0 || setenv("TRAINWATCH_STACK_SIGNAL", sig, 1) != 0) {
        snprintf(err, cap, "the control channel: setenv: %s", strerror(errno));
        tw_control_close(c);
        return TW_ENOMEM;
    }
    return TW_OK;
}

void tw_control_close(tw_control *c)
{
    if (c->fd >= 0)
        close(c->fd);
    if (c->ack_fd >= 0)
        close(c->ack_fd);
    c->fd = c->ack_fd = -1;
    if (c->dir[0]) {
        unlink(c->path);
        unlink(c->ack_path);
        rmdir(c->dir);
        c->dir[0] = '\0';
    }
}

int tw_control_request(tw_control *c, const char *action, double factor, const char *alert, double at_step,
                       unsigned long *id)
{
    if (c->fd < 0)
        return TW_EINVAL;
    char *line = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&line, &len);
    if (!f)
        return TW_ENOMEM;
    *id = ++c->next_id;
    fprintf(f, "{\"id\":%lu,\"action\":", *id);
    tw_json_cstring(f, action);
    if (!strcmp(action, "lr")) {
        fputs(",\"factor\":", f);
        tw_json_number(f, factor);
    }
    fputs(",\"alert\":", f);
    tw_json_cstring(f, alert);
    fputs(",\"time\":", f);
    tw_json_number(f, tw_wall_clock());
    if (isfinite(at_step))
        fprintf(f, ",\"at_step\":%.0f", at_step);
    fputs("}\n", f);
    int rc = fclose(f) == 0 ? TW_OK : TW_ENOMEM;
    if (rc == TW_OK) {
        ssize_t n = write(c->fd, line, len); /* one write: whole or nothing */
        rc = n == (ssize_t)len ? TW_OK : tw_status_from_errno(n < 0 ? errno : EIO);
    }
    free(line);
    return rc;
}

static void add_proc(tw_control *c, pid_t pid, int rank, int stack_signal)
{
    for (size_t i = 0; i < c->proc_count; i++) {
        if (c->procs[i].pid == pid) {
            c->procs[i].rank = rank;
            c->procs[i].stack_signal = stack_signal;
            return;
        }
    }
    if (c->proc_count < TW_PACKAGE_PROCS_MAX)
        c->procs[c->proc_count++] = (tw_package_proc){pid, rank, stack_signal};
}

/* src cut to fit dst (cap bytes, terminated). */
static void read_reply(tw_control *c, const char *line, size_t len, tw_control_reply_fn fn, void *arg)
{
    tw_json_reader r;
    tw_json_member m;
    if (!tw_json_begin(&r, line, len))
        return;
    bool hello = false;
    double pid = -1, rank = -1, step = NAN, id = 0, sig = 0;
    char action[32] = "", result[32] = "", detail[512] = "";
    while (tw_json_next(&r, &m) != TW_JSON_END && !r.error) {
        if (m.type == TW_JSON_NUMBER || m.type == TW_JSON_BOOL) {
            if (!strcmp(m.key, "hello"))
                hello = m.number != 0;
            else if (!strcmp(m.key, "pid"))
                pid = m.number;
            else if (!strcmp(m.key, "rank"))
                rank = m.number;
            else if (!strcmp(m.key, "step"))
                step = m.number;
            else if (!strcmp(m.key, "id"))
                id = m.number;
            else if (!strcmp(m.key, "stack_signal"))
                sig = m.number;
        } else if (m.type == TW_JSON_STRING) {
            if (!strcmp(m.key, "action"))
                tw_copy_str(action, sizeof action, m.string);
            else if (!strcmp(m.key, "result"))
                tw_copy_str(result, sizeof result, m.string);
            else if (!strcmp(m.key, "detail"))
                tw_copy_str(detail, sizeof detail, m.string);
        }
    }
    if (r.error || pid <= 0 || pid > 1 << 30)
        return;
    if (hello) /* a process that names no signal takes no dumps: one would kill it */
        add_proc(c, (pid_t)pid, rank >= 0 ? (int)rank : -1, sig > 0 && sig < 65 ? (int)sig : 0);
    else if (*action && *result && fn) {
        fn(arg, action, result, rank >= 0 ? (int)rank : -1, step, (unsigned long)id, detail);
    }
}

void tw_control_read_replies(tw_control *c, tw_control_reply_fn fn, void *arg)
{
    if (c->fd < 0)
        return;
    if (c->ack_fd < 0 && (c->ack_fd = open(c->ack_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
        return; /* no process has written yet */
    for (;;) {
        ssize_t n = read(c->ack_fd, c->ack_buf + c->ack_len, sizeof c->ack_buf - c->ack_len);
        if (n <= 0)
            return;
        c->ack_len += (size_t)n;
        char *start = c->ack_buf, *nl;
        while ((nl = memchr(start, '\n', c->ack_len - (size_t)(start - c->ack_buf)))) {
            read_reply(c, start, (size_t)(nl - start), fn, arg);
            start = nl + 1;
        }
        c->ack_len -= (size_t)(start - c->ack_buf);
        memmove(c->ack_buf, start, c->ack_len);
        if (c->ack_len == sizeof c->ack_buf)
            c->ack_len = 0; /* a line longer than the buffer is not a reply */
    }
}
