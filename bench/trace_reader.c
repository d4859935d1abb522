/*
 * trace_reader.c: the streaming JSON reader of `trainwatch trace` against
 * yajl (Debian libyajl-dev), on the same trace, doing the same small job:
 * the total duration of the events whose cat is "kernel". Not linked into
 * trainwatch; bench/trace.py runs it under /usr/bin/time for the time and
 * the peak RSS of each.
 *
 *   bench-trace-reader yajl FILE     yajl's callback parser, 1 MiB reads
 *   bench-trace-reader tokens FILE   trainwatch's tokenizer, token by token
 *   bench-trace-reader events FILE   trainwatch's event reader (tw_trace_read:
 *                                    every event's fields, classified)
 *
 * Prints the kernel total, the events seen and the CPU seconds.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_parse.h>

#include "trace/events.h"
#include "trace/jstream.h"

#define CHUNK (1u << 20)

typedef struct job {
    int depth;     /* 1: the document, 2: traceEvents, 3: an event */
    int key;       /* at depth 3: 1 cat, 2 dur, 0 another */
    int is_kernel; /* the event's cat is "kernel" */
    double dur, total;
    unsigned long events;
} job;

static void event_end(job *j)
{
    if (j->is_kernel)
        j->total += j->dur;
    j->events++;
    j->is_kernel = 0;
    j->dur = 0;
}

/* ---- yajl ------------------------------------------------------------- */

static int y_start(void *ctx)
{
    ((job *)ctx)->depth++;
    return 1;
}

static int y_end_map(void *ctx)
{
    job *j = ctx;
    if (j->depth == 3)
        event_end(j);
    j->depth--;
    return 1;
}

static int y_end_array(void *ctx)
{
    ((job *)ctx)->depth--;
    return 1;
}

static int y_key(void *ctx, const unsigned char *k, size_t n)
{
    job *j = ctx;
    if (j->depth == 3)
        j->key = n == 3 && memcmp(k, "cat", 3) == 0 ? 1 : n == 3 && memcmp(k, "dur", 3) == 0 ? 2 : 0;
    return 1;
}

static int y_string(void *ctx, const unsigned char *v, size_t n)
{
    job *j = ctx;
    if (j->depth == 3 && j->key == 1)
        j->is_kernel = n == 6 && memcmp(v, "kernel", 6) == 0;
    return 1;
}

static int y_double(void *ctx, double v)
{
    job *j = ctx;
    if (j->depth == 3 && j->key == 2)
        j->dur = v;
    return 1;
}

static int y_integer(void *ctx, long long v)
{
    return y_double(ctx, (double)v);
}

static int y_scalar(void *ctx)
{
    (void)ctx;
    return 1;
}

static int y_bool(void *ctx, int v)
{
    (void)v;
    return y_scalar(ctx);
}

static int run_yajl(int fd, job *j)
{
    static const yajl_callbacks cb = {y_scalar, y_bool, y_integer, y_double, NULL,       y_string,
                                      y_start,  y_key,  y_end_map, y_start,  y_end_array};
    yajl_handle h = yajl_alloc(&cb, NULL, j);
    char *buf = malloc(CHUNK);
    if (!h || !buf)
        return 1;
    ssize_t n;
    yajl_status st = yajl_status_ok;
    while (st == yajl_status_ok && (n = read(fd, buf, CHUNK)) > 0)
        st = yajl_parse(h, (const unsigned char *)buf, (size_t)n);
    if (st == yajl_status_ok)
        st = yajl_complete_parse(h);
    if (st != yajl_status_ok) {
        unsigned char *e = yajl_get_error(h, 0, NULL, 0);
        fprintf(stderr, "yajl: %s\n", (const char *)e);
        yajl_free_error(h, e);
    }
    yajl_free(h);
    free(buf);
    return st == yajl_status_ok ? 0 : 1;
}

/* ---- trainwatch's tokenizer ------------------------------------------- */

static long fd_read(void *src, char *buf, size_t cap)
{
    return (long)read(*(int *)src, buf, cap);
}

static int run_tokens(int fd, job *j)
{
    tw_jstream s;
    if (tw_jstream_init(&s, fd_read, &fd) != 0)
        return 1;
    int expect_key = 0; /* the next string at depth 3 is a key */
    for (;;) {
        tw_jtok t = tw_jstream_next(&s);
        switch (t) {
        case TW_JT_EOF:
            tw_jstream_free(&s);
            return 0;
        case TW_JT_ERROR:
            fprintf(stderr, "tokens: %s\n", s.error);
            tw_jstream_free(&s);
            return 1;
        case TW_JT_OBJECT:
        case TW_JT_ARRAY:
            j->depth++;
            expect_key = t == TW_JT_OBJECT;
            break;
        case TW_JT_OBJECT_END:
            if (j->depth == 3)
                event_end(j);
            j->depth--;
            break;
        case TW_JT_ARRAY_END:
            j->depth--;
            break;
        case TW_JT_COMMA:
            expect_key = 1;
            break;
        case TW_JT_STRING:
            if (j->depth == 3 && expect_key)
                j->key = strcmp(s.str, "cat") == 0 ? 1 : strcmp(s.str, "dur") == 0 ? 2 : 0;
            else if (j->depth == 3 && j->key == 1)
                j->is_kernel = strcmp(s.str, "kernel") == 0;
            expect_key = 0;
            break;
        case TW_JT_NUMBER:
            if (j->depth == 3 && j->key == 2)
                j->dur = s.num;
            break;
        default:
            break;
        }
    }
}

/* ---- trainwatch's event reader ---------------------------------------- */

static void on_event(void *arg, const tw_trace_event *e)
{
    job *j = arg;
    j->is_kernel = strcmp(e->cat, "kernel") == 0;
    j->dur = e->has_dur ? e->dur : 0;
    event_end(j);
}

static int run_events(int fd, job *j)
{
    tw_jstream s;
    if (tw_jstream_init(&s, fd_read, &fd) != 0)
        return 1;
    tw_trace_reader_stats st;
    const char *error = NULL;
    int rc = tw_trace_read(&s, on_event, j, &st, &error);
    if (rc != 0)
        fprintf(stderr, "events: %s\n", error ? error : "failed");
    tw_jstream_free(&s);
    return rc != 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bench-trace-reader yajl|tokens|events FILE\n");
        return 2;
    }
    int fd = open(argv[2], O_RDONLY);
    if (fd < 0) {
        perror(argv[2]);
        return 2;
    }
    job j = {0};
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    int rc = strcmp(argv[1], "yajl") == 0     ? run_yajl(fd, &j)
             : strcmp(argv[1], "tokens") == 0 ? run_tokens(fd, &j)
             : strcmp(argv[1], "events") == 0 ? run_events(fd, &j)
                                              : 2;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    close(fd);
    printf("%s kernel_us=%.3f events=%lu cpu_s=%.3f\n", argv[1], j.total, j.events,
           (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
    return rc;
}
