/*
 * follow.c: the file follower (see follow.h).
 *
 * Per file we keep the open descriptor, its device and inode, the bytes read,
 * a hash of its first HEAD_MAX bytes and a copy of the last CHECK_MAX bytes
 * read. Each poll reads to the end of every descriptor, then compares the
 * name with the descriptor: another inode under the name is a rotation by
 * rename (switch to the new file from its start); a file shorter than what
 * we read, or whose first bytes or bytes before our offset changed, was
 * truncated or rewritten (copy-truncate: read the missing tail from the copy
 * whose first bytes hash the same, then start again at 0).
 *
 * The parser sees one stream per followed name: the generations are read in
 * order into one parser, so a line or a block cut by a copy-truncate goes on
 * in the next file. Positions are kept in the parser's stream (bytes pushed)
 * and mapped back to a file and offset when the state is saved: the current
 * generation, or the one before it when the resume point lies there.
 *
 * Order is the hard part: a writer may rotate again while we catch up. The
 * listing names each generation by inode and is taken again when a name
 * holds another file by the time we open it; a copy of the file at the name
 * (taken, not yet truncated) is left to it; and the first bytes of every
 * generation are held until one more look beside it, so that a copy made
 * between a catch-up and that first read goes first.
 *
 * The trade-off: rotated generations are found by listing the directory
 * (names that extend the followed name after '.', '-' or '_'), which costs
 * two readdirs per rotation but needs no help from the writer; the
 * generations already read are remembered by inode and first-bytes hash as
 * long as they are there.
 *
 * This file holds the followed names (globs, the inotify watch, the index by
 * path) and the lifecycle (open, poll, finish, close); the other concerns
 * each have a file, listed in follower.h.
 */
#include "follower.h"
#include "../core/clock.h"
#include "../parse/user_formats.h"

#include <glob.h>
#include <libgen.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the followed names ---------------------------------------------- */

static int index_grow(tw_follower *f)
{
    size_t cap = f->index_cap ? f->index_cap * 2 : 64;
    size_t *index = calloc(cap, sizeof *index);
    if (!index)
        return TW_ENOMEM;
    free(f->index);
    f->index = index;
    f->index_cap = cap;
    for (size_t k = 0; k < f->count; k++)
        f->index[tw_follow_index_slot(f, f->files[k]->path)] = k + 1;
    return TW_OK;
}

/* A rotated generation of a followed file (x.log.1, x.log-2024...) is not a
 * new log, even when the glob matches it. */
static bool is_rotation_of_followed(tw_follower *f, const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return false;
    const char *slash = strrchr(copy, '/');
    bool found = false;
    for (char *c = copy + strlen(copy); !found && c > (slash ? slash + 1 : copy); c--) {
        if (*c != '.' && *c != '-' && *c != '_')
            continue;
        char was = *c;
        *c = '\0';
        found = tw_follow_find(f, copy) != NULL;
        *c = was;
    }
    free(copy);
    return found;
}

static int add_file(tw_follower *f, const char *path, bool from_start)
{
    if (f->count == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        followed **grown = realloc(f->files, sizeof *grown * cap);
        if (!grown)
            return TW_ENOMEM;
        f->files = grown;
        f->cap = cap;
    }
    if ((f->count + 1) * 2 > f->index_cap && index_grow(f) != TW_OK)
        return TW_ENOMEM;
    followed *fl = calloc(1, sizeof *fl);
    if (!fl || !(fl->path = strdup(path))) {
        free(fl);
        return TW_ENOMEM;
    }
    fl->fd = -1;
    fl->status = FILE_WAITING;
    int rc = tw_parser_new(&fl->parser, fl->path, f->o.format, -1);
    if (rc != TW_OK) {
        free(fl->path);
        free(fl);
        return rc;
    }
    tw_parser_set_user_formats(fl->parser, f->o.user_formats);
    f->files[f->count++] = fl;
    f->index[tw_follow_index_slot(f, fl->path)] = f->count;
    bool opened = tw_follow_open_file(f, fl) == 0;
    saved *s = tw_follow_saved_for(f, fl); /* by name, or by device and inode when opened */
    /* at the start, the rotated generations of a name the state does not
     * know are history, not news (those of a name it knows may hold lines
     * written since it was saved) */
    if (!f->started && !s)
        tw_follow_consume_existing_siblings(f, fl);
    if (!opened)
        return TW_OK; /* not there yet: opened when it appears */
    struct stat st;
    if (s) {
        tw_follow_resume(f, fl, s);
    } else if (!from_start && fstat(fl->fd, &st) == 0) {
        /* from the end: the head is what is there now */
        fl->head_len = st.st_size < HEAD_MAX ? (uint32_t)st.st_size : HEAD_MAX;
        fl->head_known = pread(fl->fd, fl->head, fl->head_len, 0) == (ssize_t)fl->head_len;
        if (!fl->head_known)
            fl->head_len = 0;
        fl->head_hash = fnv(fl->head, fl->head_len);
        tw_follow_start_at(fl, (uint64_t)st.st_size);
    } else {
        tw_follow_start_at(fl, 0);
    }
    return TW_OK; /* the next poll reads it */
}

static void add_or_say(tw_follower *f, const char *path, bool from_start)
{
    int rc = add_file(f, path, from_start);
    if (rc != TW_OK)
        tw_follow_say(f, TW_SAY_WARN, "%s: %s: not followed", path, tw_strerror(rc));
}

static void scan_patterns(tw_follower *f)
{
    /* files already there at the first scan follow --from-start (or the
     * state); files that appear later are new logs, read from their start */
    bool from_start = f->started || f->o.from_start || f->had_state;
    for (size_t i = 0; i < f->o.pattern_count; i++) {
        const char *pattern = f->o.patterns[i];
        if (!tw_follow_has_glob(pattern)) {
            if (!tw_follow_find(f, pattern))
                add_or_say(f, pattern, from_start);
            continue;
        }
        glob_t g;
        if (glob(pattern, 0, NULL, &g) != 0) {
            if (!f->started) /* said once: what is watched, and that it is (tests wait for this) */
                tw_follow_say(f, TW_SAY_INFO, "%s: %s", pattern,
                              "no file matches yet: files that appear are read from their start");
            continue;
        }
        for (size_t k = 0; k < g.gl_pathc; k++) {
            const char *path = g.gl_pathv[k];
            struct stat st;
            if (tw_follow_find(f, path) || is_rotation_of_followed(f, path) || stat(path, &st) != 0 ||
                !S_ISREG(st.st_mode))
                continue;
            add_or_say(f, path, from_start);
        }
        globfree(&g);
    }
    f->started = true;
}

static void watch_directories(tw_follower *f)
{
    const char *poll_only = getenv("TW_FOLLOW_POLL");
    if (poll_only && *poll_only && strcmp(poll_only, "0") != 0)
        return; /* asked to poll (filesystems where inotify says nothing: NFS, some FUSE) */
    f->inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (f->inotify < 0)
        return;
    for (size_t i = 0; i < f->o.pattern_count; i++) {
        char copy[4096];
        snprintf(copy, sizeof copy, "%s", f->o.patterns[i]);
        const char *dir = dirname(copy);
        if (inotify_add_watch(f->inotify, dir,
                              IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CLOSE_WRITE |
                                  IN_ATTRIB) < 0) {
            close(f->inotify);
            f->inotify = -1; /* a directory we cannot watch: poll everything */
            return;
        }
    }
    f->stats.inotify = true;
}

/* Descriptors for followed files: what the soft limit leaves after a reserve
 * for the rest (the metrics server's connections, the state and records
 * files, the listing of rotated generations). */
static size_t descriptor_budget(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 20))
        return 1u << 20;
    size_t limit = (size_t)rl.rlim_cur, reserve = 32 + limit / 8;
    if (reserve > 256)
        reserve = 256;
    return limit > reserve + 8 ? limit - reserve : 8;
}

/* ---- lifecycle ------------------------------------------------------- */

int tw_follower_open(const tw_follow_options *o, tw_follower **out, char *err, size_t errlen)
{
    tw_follower *f = calloc(1, sizeof *f);
    if (!f || !(f->buf = malloc(READ_SIZE)) || !(f->aside = malloc(READ_SIZE))) {
        if (f)
            free(f->buf);
        free(f);
        snprintf(err, errlen, "out of memory");
        return TW_ENOMEM;
    }
    f->o = *o;
    f->sink = o->sink;
    f->inotify = -1;
    f->open_budget = descriptor_budget();
    if (o->save_interval <= 0)
        f->o.save_interval = 0.1;
    int rc = o->state_file ? tw_follow_load_state(f, err, errlen) : TW_OK;
    if (rc != TW_OK) {
        tw_follower_close(f);
        return rc;
    }
    watch_directories(f);
    scan_patterns(f);
    /* Save the starting positions before anything is read: a kill before the
     * first periodic save then restarts from here, and the sink is cut back
     * to its size now. */
    int reason;
    if (o->state_file && (rc = tw_follow_write_state(f, &reason)) != TW_OK) {
        snprintf(err, errlen, "%s: cannot be saved: %s", o->state_file,
                 reason ? strerror(reason) : "the records output could not be written");
        f->started = false; /* nothing to save at close */
        tw_follower_close(f);
        return rc;
    }
    f->last_glob = tw_monotonic_clock();
    *out = f;
    return TW_OK;
}

int tw_follower_poll(tw_follower *f, double timeout)
{
    if (f->inotify >= 0) {
        struct pollfd p = {.fd = f->inotify, .events = POLLIN};
        if (poll(&p, 1, (int)(timeout * 1000)) > 0) {
            char events[8192];
            while (read(f->inotify, events, sizeof events) > 0) {
            }
        }
    } else {
        struct timespec ts = {(time_t)timeout, (long)((timeout - (double)(time_t)timeout) * 1e9)};
        nanosleep(&ts, NULL);
    }
    double now = tw_monotonic_clock();
    if (now - f->last_glob >= 1 || f->inotify >= 0) {
        scan_patterns(f);
        f->last_glob = now;
    }
    for (size_t i = 0; i < f->count; i++)
        tw_follow_check_file(f, f->files[i]);
    uint64_t cut = 0;
    for (size_t i = 0; i < f->count; i++)
        cut += tw_parser_stats(f->files[i]->parser)->lines_cut;
    f->stats.lines_cut = cut;
    return f->o.state_file && tw_monotonic_clock() >= f->next_save ? tw_follower_save(f) : TW_OK;
}

const tw_follow_stats *tw_follower_stats(const tw_follower *f)
{
    return &f->stats;
}

int tw_follower_finish(tw_follower *f)
{
    if (f->finished || !f->started)
        return TW_OK;
    f->finished = true;
    for (size_t i = 0; i < f->count; i++) {
        followed *fl = f->files[i];
        if (fl->status == FILE_IDLE)
            tw_follow_check_file(f, fl);
        tw_follow_read_all(f, fl);
        /* the end of this run: blocks still open are delivered (the last
         * step); a partial line too unless a state lets the next run read it */
        if (!f->o.state_file)
            tw_follow_close_line(f, fl);
        tw_parser_end_blocks(fl->parser, tw_follow_count_record, f);
    }
    return f->o.state_file ? tw_follower_save(f) : TW_OK;
}

void tw_follower_close(tw_follower *f)
{
    if (!f)
        return;
    tw_follower_finish(f);
    for (size_t i = 0; i < f->count; i++) {
        followed *fl = f->files[i];
        if (fl->fd >= 0)
            close(fl->fd);
        tw_parser_close(fl->parser);
        free(fl->path);
        free(fl);
    }
    free(f->files);
    free(f->index);
    for (size_t i = 0; i < f->saved_count; i++)
        free(f->saved[i].path);
    free(f->saved);
    free(f->done);
    if (f->inotify >= 0)
        close(f->inotify);
    free(f->buf);
    free(f->aside);
    free(f);
}
