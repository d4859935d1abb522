/*
 * state.c: the state file, for exactly-once reading across restarts.
 *
 * The file holds, per followed name, its generation (device, inode, head
 * hash), the offset and line to resume at and a hash of the bytes before it
 * (a "from" line when the resume point lies in the generation before), and
 * the generations already consumed. It is written whole to a temporary file
 * and renamed over; a records sink's size is saved with it, so the sink and
 * the positions go back together. Loading, resuming a file from its saved
 * point, and saving live here. Part of the follower (follow.c); shared state
 * in follower.h.
 */
#include "follower.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/say.h"

#define STATE_MAGIC      "trainwatch-follow-state 2"
#define STATE_MAGIC_V1   "trainwatch-follow-state 1"
#define SAVE_BACKOFF_MAX 5.0 /* seconds between attempts while saving fails */

saved *tw_follow_saved_for(tw_follower *f, const followed *fl)
{
    for (size_t i = 0; i < f->saved_count; i++) {
        if (!f->saved[i].used && strcmp(f->saved[i].path, fl->path) == 0)
            return &f->saved[i];
    }
    /* the same file saved under another of its names */
    for (size_t i = 0; i < f->saved_count; i++) {
        if (!f->saved[i].used && f->saved[i].g.dev == fl->dev && f->saved[i].g.ino == fl->ino)
            return &f->saved[i];
    }
    return NULL;
}

typedef struct find_ctx {
    const generation *g;
    uint64_t offset;
} find_ctx;

static bool read_saved_one(tw_follower *f, followed *fl, int fd, const struct stat *st, void *arg)
{
    find_ctx *c = arg;
    uint64_t h;
    if (st->st_dev != c->g->dev || st->st_ino != c->g->ino || !tw_follow_head_of(fd, c->g->head_len, &h) ||
        h != c->g->head_hash)
        return true;
    if ((uint64_t)st->st_size > c->offset)
        tw_follow_read_range(f, fl, fd, c->g, c->offset);
    generation g = tw_follow_generation_of(fd, st);
    tw_follow_mark_consumed(f, fl, &g);
    return false; /* found: the rest is the catch-up's */
}

/* Resumes a file from its saved position, whatever happened while we were away. */
void tw_follow_resume(tw_follower *f, followed *fl, saved *s)
{
    s->used = true;
    tw_parser_set_line(fl->parser, s->line);
    if (s->skip_line)
        tw_parser_skip_line(fl->parser);
    if (s->has_from) {
        /* the resume point lies in the generation before: it goes on here */
        find_ctx c = {&s->from, s->from_offset};
        tw_follow_each_sibling(f, fl, read_saved_one, &c);
        tw_parser_set_line(fl->parser, 0); /* the file at the name counts its lines from its start */
    }
    if (fl->dev == s->g.dev && fl->ino == s->g.ino) {
        struct stat st;
        uint64_t h, check;
        bool intact = fstat(fl->fd, &st) == 0 && (uint64_t)st.st_size >= s->offset &&
                      tw_follow_head_of(fl->fd, s->g.head_len, &h) && h == s->g.head_hash &&
                      tw_follow_hash_at(fl->fd, s->offset - s->check_len, s->check_len, &check) &&
                      check == s->check_hash;
        if (intact) {
            fl->head_len = s->g.head_len;
            fl->head_hash = s->g.head_hash;
            /* the bytes are not in memory: the head stays as saved */
            fl->head_known =
                s->offset <= s->g.head_len && pread(fl->fd, fl->head, s->g.head_len, 0) == (ssize_t)s->g.head_len;
            /* nothing of it was read: a copy-truncate meanwhile leaves no
             * trace in it, the copies beside it are news */
            if (s->offset == 0 && s->g.head_len == 0)
                tw_follow_catch_up(f, fl, 0, 0, 0, fl->ino, fl->ino);
            tw_follow_start_at(fl, s->offset);
            return;
        }
    }
    /* rotated, truncated or rewritten while we were away: the rest of what
     * we were reading, and any generation since, are beside it */
    fl->have_prev = true;
    fl->prev = s->g;
    fl->prev_start = tw_follow_stream_end(fl) - (int64_t)s->offset;
    fl->prev_read_from = tw_follow_stream_end(fl); /* nothing of it read in this run */
    tw_follow_catch_up(f, fl, s->offset, s->g.head_len, s->g.head_hash, fl->ino, fl->ino);
    /* a line left open goes on in the file at the name: the last generation
     * read may be a copy the writer went on from */
    tw_parser_set_line(fl->parser, 0);
    tw_follow_start_at(fl, 0);
}

/* A name that was not there is: from its start, or from the position saved
 * for it when the previous run saw it last (a restart while the writer was
 * between renaming the file away and creating it again). */
void tw_follow_start_appeared(tw_follower *f, followed *fl)
{
    saved *s = tw_follow_saved_for(f, fl);
    if (s)
        tw_follow_resume(f, fl, s);
    else
        tw_follow_start_at(fl, 0);
}

/* ---- state file ------------------------------------------------------ */

static int add_saved(tw_follower *f, const saved *s, const char *path)
{
    saved *grown = realloc(f->saved, sizeof *grown * (f->saved_count + 1));
    if (!grown)
        return TW_ENOMEM;
    f->saved = grown;
    f->saved[f->saved_count] = *s;
    if (!(f->saved[f->saved_count].path = strdup(path)))
        return TW_ENOMEM;
    f->saved_count++;
    return TW_OK;
}

/* One line of the state file (format 1 or 2); `from` carries a "from" line
 * over to the "file" line after it. */
static int load_state_line(tw_follower *f, char *line, int version, saved *from, uint64_t *sink_size, bool *have_sink)
{
    unsigned long long dev, ino, offset, lno, head_hash, check_hash, owner = 0;
    unsigned head_len, check_len;
    int skip, at = 0;
    if (sscanf(line, "sink %" SCNu64, sink_size) == 1) {
        *have_sink = true;
        return TW_OK;
    }
    if (sscanf(line, "done %llu %llu %u %llx %llx", &dev, &ino, &head_len, &head_hash, &owner) >= 4 &&
        head_len <= HEAD_MAX) {
        generation g = {(dev_t)dev, (ino_t)ino, head_len, head_hash};
        followed nobody = {.path = ""};
        consumed *c = tw_follow_mark_consumed(f, &nobody, &g);
        if (c)
            c->owner = owner;
        return TW_OK;
    }
    if (version == 2 && sscanf(line, "from %llu %llu %u %llx %llu", &dev, &ino, &head_len, &head_hash, &offset) == 5 &&
        head_len <= HEAD_MAX) {
        from->has_from = true;
        from->from = (generation){(dev_t)dev, (ino_t)ino, head_len, head_hash};
        from->from_offset = offset;
        return TW_OK;
    }
    saved s = {0};
    if (version == 1 &&
        sscanf(line, "file %llu %llu %llu %llu %u %llx %n", &dev, &ino, &offset, &lno, &head_len, &head_hash, &at) ==
            6 &&
        at > 0 && head_len <= HEAD_MAX) {
        check_len = 0, check_hash = fnv(NULL, 0), skip = 0;
    } else if (version == 2 &&
               sscanf(line, "file %llu %llu %llu %llu %u %llx %u %llx %d %n", &dev, &ino, &offset, &lno, &head_len,
                      &head_hash, &check_len, &check_hash, &skip, &at) == 9 &&
               at > 0 && head_len <= HEAD_MAX && check_len <= CHECK_MAX && check_len <= offset) {
    } else {
        return TW_ECONFIG;
    }
    s = *from;
    *from = (saved){0};
    s.g = (generation){(dev_t)dev, (ino_t)ino, head_len, head_hash};
    s.offset = offset;
    s.line = lno;
    s.check_len = check_len;
    s.check_hash = check_hash;
    s.skip_line = skip != 0;
    return add_saved(f, &s, line + at);
}

int tw_follow_load_state(tw_follower *f, char *err, size_t errlen)
{
    int fd = open(f->o.state_file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && errno == ENOENT)
        return TW_OK;
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        snprintf(err, errlen, "%s: not a regular file", f->o.state_file);
        return TW_ECONFIG;
    }
    FILE *in = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!in) {
        snprintf(err, errlen, "%s: %s", f->o.state_file, strerror(errno));
        if (fd >= 0)
            close(fd);
        return TW_EIO;
    }
    char line[8400];
    int rc = TW_OK, version = 0;
    uint64_t sink_size = 0;
    bool have_sink = false;
    saved from = {0};
    if (fgets(line, sizeof line, in))
        version = strncmp(line, STATE_MAGIC, strlen(STATE_MAGIC)) == 0         ? 2
                  : strncmp(line, STATE_MAGIC_V1, strlen(STATE_MAGIC_V1)) == 0 ? 1
                                                                               : 0;
    if (version == 0)
        rc = TW_ECONFIG;
    while (rc == TW_OK && fgets(line, sizeof line, in)) {
        line[strcspn(line, "\n")] = '\0';
        rc = load_state_line(f, line, version, &from, &sink_size, &have_sink);
    }
    if (rc == TW_OK && ferror(in))
        rc = TW_EIO;
    fclose(in);
    if (rc == TW_ENOMEM) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    if (rc != TW_OK) {
        snprintf(err, errlen, "%s: not a trainwatch state file (remove it to start over)", f->o.state_file);
        return rc;
    }
    f->had_state = true;
    if (have_sink && f->sink.restore && f->sink.restore(f->sink.arg, sink_size) != 0) {
        snprintf(err, errlen, "%s: could not restore the records output to %" PRIu64 " bytes", f->o.state_file,
                 sink_size);
        return TW_EIO;
    }
    return TW_OK;
}

/* Where a restart resumes fl: in its current generation, or (when an open
 * block or line began there) in the one before. */
void tw_follow_commit_point(followed *fl, saved *s)
{
    tw_parser_resume r;
    tw_parser_resume_point(fl->parser, &r);
    int64_t at = tw_follow_stream_end(fl) - (int64_t)r.back;
    *s = (saved){.g = {fl->dev, fl->ino, fl->head_len, fl->head_hash}, .line = r.line, .skip_line = r.skip_line};
    /* only where this run read the bytes does a stream position name an
     * offset: a generation read from its middle says nothing before that */
    if (at >= fl->gen_read_from) {
        s->offset = (uint64_t)(at - fl->gen_start);
    } else if (fl->have_prev && at >= fl->prev_read_from) {
        s->has_from = true;
        s->from = fl->prev;
        s->from_offset = (uint64_t)(at - fl->prev_start);
    } else {
        /* further back than we can name: go on from this generation's start,
         * past the end of a line begun before it */
        s->line = 0;
        s->skip_line = fl->gen_mid_line;
    }
    s->check_len = s->offset < CHECK_MAX ? (uint32_t)s->offset : CHECK_MAX;
    if (s->offset == fl->offset && fl->tail_len == s->check_len) {
        s->check_hash = fnv(fl->tail, fl->tail_len);
    } else if (fl->check_at == s->offset && fl->check_len == s->check_len) {
        s->check_hash = fl->check_hash;
    } else if (fl->fd < 0 || !tw_follow_hash_at(fl->fd, s->offset - s->check_len, s->check_len, &s->check_hash)) {
        s->check_len = 0;
        s->check_hash = fnv(NULL, 0);
    }
    fl->check_at = s->offset;
    fl->check_len = s->check_len;
    fl->check_hash = s->check_hash;
}

static bool matches_pattern(const tw_follower *f, const char *path)
{
    for (size_t i = 0; i < f->o.pattern_count; i++) {
        const char *pattern = f->o.patterns[i];
        if (tw_follow_has_glob(pattern) ? fnmatch(pattern, path, FNM_PATHNAME | FNM_PERIOD) == 0
                                        : strcmp(pattern, path) == 0)
            return true;
    }
    return false;
}

static void write_point(FILE *out, const saved *s, const char *path)
{
    if (s->has_from)
        fprintf(out, "from %llu %llu %u %llx %llu\n", (unsigned long long)s->from.dev, (unsigned long long)s->from.ino,
                s->from.head_len, (unsigned long long)s->from.head_hash, (unsigned long long)s->from_offset);
    fprintf(out, "file %llu %llu %llu %llu %u %llx %u %llx %d %s\n", (unsigned long long)s->g.dev,
            (unsigned long long)s->g.ino, (unsigned long long)s->offset, (unsigned long long)s->line, s->g.head_len,
            (unsigned long long)s->g.head_hash, s->check_len, (unsigned long long)s->check_hash, s->skip_line ? 1 : 0,
            path);
}

static void write_positions(tw_follower *f, FILE *out)
{
    /* oldest first, so a restarted follower forgets in the same order */
    for (size_t i = 0; i < f->done_count; i++) {
        const consumed *c = &f->done[i];
        fprintf(out, "done %llu %llu %u %llx %llx\n", (unsigned long long)c->g.dev, (unsigned long long)c->g.ino,
                c->g.head_len, (unsigned long long)c->g.head_hash, (unsigned long long)c->owner);
    }
    for (size_t i = 0; i < f->count; i++) {
        followed *fl = f->files[i];
        /* a name gone since a rotation (not there when we opened the new
         * file) keeps the point in the generation it left: a restart goes
         * on from it and catches up */
        if (fl->status != FILE_OPEN && fl->status != FILE_IDLE && !(fl->status == FILE_WAITING && fl->opened))
            continue;
        saved s;
        tw_follow_commit_point(fl, &s);
        write_point(out, &s, fl->path);
    }
    /* a name not there since we started (followed, or a glob's to be)
     * keeps what was saved for it: it goes on from there when it appears */
    for (size_t i = 0; i < f->saved_count; i++) {
        const saved *s = &f->saved[i];
        followed *fl = s->used ? NULL : tw_follow_find(f, s->path);
        if (!s->used && (fl ? !fl->opened : matches_pattern(f, s->path)))
            write_point(out, s, s->path);
    }
}

/* Writes the state file; on failure sets reason (an errno value, or 0: the
 * records output) and leaves no temporary file behind. */
int tw_follow_write_state(tw_follower *f, int *reason)
{
    uint64_t sink_size = 0;
    *reason = 0;
    if (f->sink.commit && f->sink.commit(f->sink.arg, &sink_size) != 0)
        return TW_EIO; /* records not written: the state stays before them */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", f->o.state_file);
    errno = 0; /* a failed write leaves its reason here for ferror() below */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        *reason = errno;
        return tw_status_from_errno(errno);
    }
    FILE *out = fdopen(fd, "w");
    if (!out) {
        *reason = errno;
        close(fd);
        unlink(tmp);
        return TW_ENOMEM;
    }
    fprintf(out, "%s\nsink %" PRIu64 "\n", STATE_MAGIC, sink_size);
    write_positions(f, out);
    int rc = TW_OK;
    if (ferror(out) || fflush(out) != 0 || fsync(fd) != 0)
        rc = TW_EIO, *reason = errno ? errno : EIO;
    if (fclose(out) != 0 && rc == TW_OK)
        rc = TW_EIO, *reason = errno;
    if (rc == TW_OK && rename(tmp, f->o.state_file) != 0)
        rc = tw_status_from_errno(errno), *reason = errno;
    if (rc != TW_OK)
        unlink(tmp);
    return rc;
}

int tw_follower_save(tw_follower *f)
{
    if (!f->o.state_file)
        return TW_OK;
    int reason;
    int rc = tw_follow_write_state(f, &reason);
    double now = tw_monotonic_clock();
    if (rc != TW_OK) {
        f->stats.state_failures++;
        if (f->save_failures++ == 0)
            tw_follow_say(f, TW_SAY_WARN, "%s: cannot be saved (%s): positions are kept where they were, trying again",
                          f->o.state_file, reason ? strerror(reason) : "the records output could not be written");
        double wait = f->o.save_interval * (double)(1u << (f->save_failures < 10 ? f->save_failures : 10));
        f->next_save = now + (wait < SAVE_BACKOFF_MAX ? wait : SAVE_BACKOFF_MAX);
        return rc;
    }
    if (f->save_failures > 0 && f->o.warnings)
        tw_say_to(f->o.warnings, TW_SAY_INFO, "follow", "%s: saved again, after %u failed attempts", f->o.state_file,
                f->save_failures);
    f->save_failures = 0;
    f->next_save = now + f->o.save_interval;
    return TW_OK;
}
