/*
 * trainer.c: the trainer's side of the control channel for C and C++
 * training loops (see trainwatch/control.h; the supervisor's side is
 * src/actions/control.c, the Python package's python/_native/control.c).
 * Requests are read from the file in whole lines past what was read
 * before; replies are one write() each to PATH.ack.
 */
#include "trainwatch/control.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/json.h"
#include "trainwatch/error.h"
#include "trainwatch/log.h"

#define LINE_MAX_BYTES 4096
#define SEEN_MAX 256

struct tw_trainer_control {
    int fd, ack_fd;
    char path[4096];
    off_t offset;
    double opened_at;
    char buf[LINE_MAX_BYTES];
    size_t have;
    long long seen[SEEN_MAX]; /* ids acted on, a ring */
    size_t seen_count;
    unsigned long errors;
    tw_trainer_request pending[16]; /* read, not yet due */
    size_t pending_count;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void write_line(tw_trainer_control *c, const char *text, size_t len)
{
    if (c->ack_fd < 0 || write(c->ack_fd, text, len) != (ssize_t)len)
        c->errors++;
}

static void hello(tw_trainer_control *c)
{
    char line[256];
    int n = snprintf(line, sizeof line, "{\"hello\":1,\"pid\":%d,\"rank\":%d,\"stack_signal\":0,\"time\":%.3f}\n",
                     (int)getpid(), tw_log_rank().rank, now());
    write_line(c, line, (size_t)n);
}

int tw_trainer_control_open(tw_trainer_control **out)
{
    *out = NULL;
    const char *path = getenv("TRAINWATCH_CONTROL");
    if (!path || !*path)
        return TW_ENOENT;
    tw_trainer_control *c = calloc(1, sizeof *c);
    if (!c)
        return TW_ENOMEM;
    snprintf(c->path, sizeof c->path, "%s", path);
    c->opened_at = now();
    c->fd = open(path, O_RDONLY | O_CLOEXEC);
    char ack[4100];
    snprintf(ack, sizeof ack, "%s.ack", path);
    c->ack_fd = open(ack, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (c->fd < 0 || c->ack_fd < 0) {
        fprintf(stderr, "trainwatch: the control channel %s: %s (requests are not read)\n", path, strerror(errno));
        tw_trainer_control_close(c);
        return TW_EIO;
    }
    hello(c);
    *out = c;
    return TW_OK;
}

void tw_trainer_control_close(tw_trainer_control *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    if (c->ack_fd >= 0)
        close(c->ack_fd);
    free(c);
}

unsigned long tw_trainer_control_errors(const tw_trainer_control *c)
{
    return c ? c->errors : 0;
}

static bool seen(tw_trainer_control *c, long long id)
{
    size_t n = c->seen_count < SEEN_MAX ? c->seen_count : SEEN_MAX;
    for (size_t i = 0; i < n; i++)
        if (c->seen[i] == id)
            return true;
    c->seen[c->seen_count++ % SEEN_MAX] = id;
    return false;
}

void tw_trainer_control_reply(tw_trainer_control *c, const tw_trainer_request *req, const char *result,
                              int64_t step, const char *detail)
{
    if (!c)
        return;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        c->errors++;
        return;
    }
    fputs("{\"id\":", f);
    if (req && req->id >= 0)
        fprintf(f, "%lld", req->id);
    else
        fputs("null", f);
    fprintf(f, ",\"pid\":%d,\"rank\":%d,\"action\":", (int)getpid(), tw_log_rank().rank);
    if (req && req->action[0])
        tw_json_cstring(f, req->action);
    else
        fputs("null", f);
    fputs(",\"result\":", f);
    tw_json_cstring(f, result ? result : "done");
    fprintf(f, ",\"step\":%lld,\"detail\":", (long long)step);
    tw_json_cstring(f, detail ? detail : "");
    fputs("}\n", f);
    if (fclose(f) == 0 && len < LINE_MAX_BYTES)
        write_line(c, text, len);
    else
        c->errors++;
    free(text);
}

/* One request line; false when it is not one (replied "ignored"). */
static bool parse_request(tw_trainer_control *c, const char *line, size_t len, tw_trainer_request *r)
{
    *r = (tw_trainer_request){.id = -1, .factor = NAN, .at_step = -1};
    tw_json_reader rd;
    tw_json_member m;
    bool ok = tw_json_begin(&rd, line, len);
    while (ok && tw_json_next(&rd, &m) != TW_JSON_END && !rd.error) {
        if (m.type == TW_JSON_NUMBER && !strcmp(m.key, "id"))
            r->id = (long long)m.number;
        else if (m.type == TW_JSON_NUMBER && !strcmp(m.key, "factor"))
            r->factor = m.number;
        else if (m.type == TW_JSON_NUMBER && !strcmp(m.key, "time"))
            r->time = m.number;
        else if (m.type == TW_JSON_NUMBER && !strcmp(m.key, "at_step"))
            r->at_step = (int64_t)m.number;
        else if (m.type == TW_JSON_STRING && !strcmp(m.key, "action"))
            snprintf(r->action, sizeof r->action, "%.15s", m.string);
        else if (m.type == TW_JSON_STRING && !strcmp(m.key, "alert"))
            snprintf(r->alert, sizeof r->alert, "%.127s", m.string);
    }
    const char *why = !ok || rd.error || r->id < 0 ? "not a request line"
                      : strcmp(r->action, "checkpoint") && strcmp(r->action, "stop") && strcmp(r->action, "lr")
                          ? "unknown action"
                      : !strcmp(r->action, "lr") && !(r->factor > 0 && isfinite(r->factor)) ? "lr needs a factor above 0"
                                                                                             : NULL;
    if (why)
        tw_trainer_control_reply(c, r, "ignored", -1, why);
    return why == NULL;
}

/* Reads the lines written since the last read into pending. */
static void read_new(tw_trainer_control *c)
{
    struct stat st;
    if (fstat(c->fd, &st) != 0 || st.st_size <= c->offset)
        return;
    while (c->have < sizeof c->buf) {
        ssize_t n = pread(c->fd, c->buf + c->have, sizeof c->buf - c->have, c->offset);
        if (n <= 0)
            break;
        c->offset += n;
        c->have += (size_t)n;
        char *start = c->buf, *nl;
        while ((nl = memchr(start, '\n', c->have - (size_t)(start - c->buf)))) {
            tw_trainer_request r;
            if (parse_request(c, start, (size_t)(nl - start), &r)) {
                if (r.time < c->opened_at - 1)
                    tw_trainer_control_reply(c, &r, "ignored", -1, "written before this process started");
                else if (!seen(c, r.id) && c->pending_count < sizeof c->pending / sizeof c->pending[0])
                    c->pending[c->pending_count++] = r;
            }
            start = nl + 1;
        }
        c->have -= (size_t)(start - c->buf);
        memmove(c->buf, start, c->have);
    }
    if (c->have == sizeof c->buf) {
        c->have = 0; /* a line longer than any request */
        c->errors++;
    }
}

int tw_trainer_control_poll(tw_trainer_control *c, int64_t step, tw_trainer_request *req)
{
    if (!c)
        return 0;
    read_new(c);
    for (size_t i = 0; i < c->pending_count; i++) {
        if (c->pending[i].at_step < 0 || step >= c->pending[i].at_step) {
            *req = c->pending[i];
            memmove(&c->pending[i], &c->pending[i + 1], (c->pending_count - i - 1) * sizeof *c->pending);
            c->pending_count--;
            return 1;
        }
    }
    return 0;
}
