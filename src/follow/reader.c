/*
 * reader.c: reading a followed file's bytes into its parser, and holding them.
 *
 * One parser stream per followed name: each generation's bytes are pushed in
 * order, and the stream positions where a generation began are kept so that
 * state.c can map a resume point back to a file and an offset. The first
 * HEAD_MAX bytes and the last CHECK_MAX bytes read are held from the reads
 * themselves, never read again separately (a rewrite between two reads must
 * not lend us its new bytes). Part of the follower (follow.c); shared state
 * in follower.h.
 */
#include "follower.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/say.h"

void tw_follow_say(tw_follower *f, tw_say_level level, const char *fmt, const char *path, const char *detail)
{
    char what[PATH_MAX + 512];
    snprintf(what, sizeof what, fmt, path, detail);
    tw_say_to(f->o.warnings, level, "follow", "%s", what);
}

void tw_follow_count_record(void *arg, const tw_record *r)
{
    tw_follower *f = arg;
    f->stats.records++;
    f->sink.record(f->sink.arg, r);
}

int64_t tw_follow_stream_end(const followed *fl)
{
    return (int64_t)tw_parser_stats(fl->parser)->bytes;
}

static void push(tw_follower *f, followed *fl, const char *data, size_t n)
{
    uint64_t before = tw_parser_line(fl->parser);
    tw_parser_push(fl->parser, data, n, tw_follow_count_record, f);
    f->stats.lines += tw_parser_line(fl->parser) - before;
    f->stats.bytes += n;
}

/* A file that ends for good (renamed away, or we stop without a state file):
 * its partial last line is a line. */
void tw_follow_close_line(tw_follower *f, followed *fl)
{
    if (tw_parser_pending(fl->parser) > 0)
        push(f, fl, "\n", 1);
}

/* The head is taken from the bytes we read, never read again separately: a
 * file rewritten between two reads must not lend us its new first bytes. */
static void note_read(followed *fl, const char *data, size_t n)
{
    if (fl->head_known && fl->offset < HEAD_MAX) {
        size_t take = HEAD_MAX - fl->offset;
        if (take > n)
            take = n;
        memcpy(fl->head + fl->offset, data, take);
        fl->head_len = (uint32_t)(fl->offset + take);
        fl->head_hash = fnv(fl->head, fl->head_len);
    }
    if (n >= CHECK_MAX) {
        memcpy(fl->tail, data + n - CHECK_MAX, CHECK_MAX);
        fl->tail_len = CHECK_MAX;
        return;
    }
    size_t keep = fl->tail_len + n > CHECK_MAX ? CHECK_MAX - n : fl->tail_len;
    memmove(fl->tail, fl->tail + fl->tail_len - keep, keep);
    memcpy(fl->tail + keep, data, n);
    fl->tail_len = (uint32_t)(keep + n);
}

/* The current generation's byte `offset` is the next byte of the stream. */
void tw_follow_place_in_stream(followed *fl, uint64_t offset)
{
    fl->gen_start = tw_follow_stream_end(fl) - (int64_t)offset;
    fl->gen_read_from = tw_follow_stream_end(fl);
    fl->gen_mid_line = offset == 0 && tw_parser_pending(fl->parser) > 0;
}

/* Starts reading fl's descriptor at offset (a new generation, or a resume):
 * its byte 0 is where the stream would have had it. */
void tw_follow_start_at(followed *fl, uint64_t offset)
{
    fl->offset = offset;
    fl->fresh = offset == 0;
    tw_follow_place_in_stream(fl, offset);
    fl->tail_len = 0;
    if (offset > 0) {
        uint32_t len = offset < CHECK_MAX ? (uint32_t)offset : CHECK_MAX;
        if (pread(fl->fd, fl->tail, len, (off_t)(offset - len)) == (ssize_t)len)
            fl->tail_len = len;
    }
    lseek(fl->fd, (off_t)offset, SEEK_SET);
}

/* n bytes just read from fl's descriptor at its offset: into the stream,
 * into the head and tail kept, and counted. */
void tw_follow_take(tw_follower *f, followed *fl, const char *data, size_t n)
{
    push(f, fl, data, n);
    note_read(fl, data, n);
    fl->offset += (uint64_t)n;
    fl->last_data = tw_monotonic_clock();
}

/* Reads [from, end) of another generation into fl's parser; it becomes the
 * generation before the current one. */
uint64_t tw_follow_read_range(tw_follower *f, followed *fl, int fd, const generation *g, uint64_t from)
{
    fl->have_prev = true;
    fl->prev = *g;
    fl->prev_start = tw_follow_stream_end(fl) - (int64_t)from;
    fl->prev_read_from = tw_follow_stream_end(fl);
    uint64_t got = 0;
    for (;;) {
        ssize_t n = pread(fd, f->aside, READ_SIZE, (off_t)(from + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        push(f, fl, f->aside, (size_t)n);
        got += (uint64_t)n;
    }
    f->stats.recovered_bytes += got;
    return got;
}
