/*
 * follow.c: the file follower (see follow.h).
 *
 * Per file we keep the open descriptor, its device and inode, the bytes read,
 * and a hash of its first HEAD_MAX bytes. Each poll reads to the end of every
 * descriptor, then compares the name with the descriptor: another inode under
 * the name is a rotation by rename (switch to the new file from its start); a
 * file shorter than what we read, or whose first bytes changed, was truncated
 * or rewritten (copy-truncate: read the missing tail from the copy whose
 * first bytes hash the same, then start again at 0).
 */
#include "../core/clock.h"
#include "trainwatch/follow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <libgen.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "trainwatch/error.h"

#define HEAD_MAX 256
#define READ_SIZE (256 * 1024)
#define FILES_MAX 4096
#define STATE_MAGIC "trainwatch-follow-state 1"

typedef struct followed {
    char *path;
    int fd;
    dev_t dev;
    ino_t ino;
    uint64_t offset;           /* bytes read from fd */
    uint32_t head_len;
    uint64_t head_hash;
    bool head_known;           /* head[] holds the file's first head_len bytes as we read them */
    unsigned char head[HEAD_MAX];
    struct timespec mtime;     /* as last seen: a change with nothing to read is a rewrite */
    tw_parser *parser;
} followed;

/* A file whose content is fully read (an old generation, a copy): by inode
 * and the hash of its first bytes, so a reused inode is not mistaken for it. */
typedef struct consumed {
    dev_t dev;
    ino_t ino;
    uint32_t head_len;
    uint64_t head_hash;
} consumed;

#define CONSUMED_MAX 256

typedef struct saved {
    char *path;
    dev_t dev;
    ino_t ino;
    uint64_t offset, line, head_hash;
    uint32_t head_len;
    bool used;
} saved;

struct tw_follower {
    tw_follow_options o;
    followed files[FILES_MAX];
    size_t count;
    char *buf;
    int inotify;
    double last_save, last_glob;
    bool started;               /* first scan done: later files are read from the start */
    bool had_state;
    saved *saved;
    size_t saved_count;
    tw_follow_stats stats;
    tw_record_sink sink;
    consumed done[CONSUMED_MAX];   /* ring */
    size_t done_count, done_head;
};


static uint64_t fnv(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Hash of the first len bytes of fd; false if the file is shorter. */
static bool head_of(int fd, uint32_t len, uint64_t *hash)
{
    unsigned char head[HEAD_MAX];
    if (len == 0) {
        *hash = fnv(NULL, 0);
        return true;
    }
    ssize_t n = pread(fd, head, len, 0);
    if (n != (ssize_t)len)
        return false;
    *hash = fnv(head, len);
    return true;
}

static void count_record(void *arg, const tw_record *r)
{
    tw_follower *f = arg;
    f->stats.records++;
    f->sink.record(f->sink.arg, r);
}

static void push(tw_follower *f, followed *fl, const char *data, size_t n)
{
    uint64_t before = tw_parser_line(fl->parser);
    tw_parser_push(fl->parser, data, n, count_record, f);
    f->stats.lines += tw_parser_line(fl->parser) - before;
    f->stats.bytes += n;
}

/* A file that will not grow any more: its partial last line is a line. */
static void end_of_file(tw_follower *f, followed *fl)
{
    if (tw_parser_pending(fl->parser) > 0)
        push(f, fl, "\n", 1);
}

/* The head is taken from the bytes we read, never read again separately: a
 * file rewritten between two reads must not lend us its new first bytes. */
static void note_head(followed *fl, const char *data, size_t n)
{
    if (!fl->head_known || fl->offset >= HEAD_MAX)
        return;
    size_t take = HEAD_MAX - fl->offset;
    if (take > n)
        take = n;
    memcpy(fl->head + fl->offset, data, take);
    fl->head_len = (uint32_t)(fl->offset + take);
    fl->head_hash = fnv(fl->head, fl->head_len);
}

static void read_all(tw_follower *f, followed *fl)
{
    if (fl->fd < 0)
        return;
    for (;;) {
        ssize_t n = read(fl->fd, f->buf, READ_SIZE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        push(f, fl, f->buf, (size_t)n);
        note_head(fl, f->buf, (size_t)n);
        fl->offset += (uint64_t)n;
    }
}

/* Reads [from, end) of another file into fl's parser (a rotated copy). */
static uint64_t read_range(tw_follower *f, followed *fl, int fd, uint64_t from)
{
    uint64_t got = 0;
    for (;;) {
        ssize_t n = pread(fd, f->buf, READ_SIZE, (off_t)(from + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        push(f, fl, f->buf, (size_t)n);
        got += (uint64_t)n;
    }
    f->stats.recovered_bytes += got;
    return got;
}

static void mark_consumed(tw_follower *f, dev_t dev, ino_t ino, int fd)
{
    consumed c = {dev, ino, 0, 0};
    struct stat st;
    if (fstat(fd, &st) == 0) {
        c.head_len = st.st_size < HEAD_MAX ? (uint32_t)st.st_size : HEAD_MAX;
        head_of(fd, c.head_len, &c.head_hash);
    }
    f->done[f->done_head] = c;
    f->done_head = (f->done_head + 1) % CONSUMED_MAX;
    if (f->done_count < CONSUMED_MAX)
        f->done_count++;
}

static bool is_consumed(const tw_follower *f, const struct stat *st, int fd)
{
    for (size_t i = 0; i < f->done_count; i++) {
        const consumed *c = &f->done[i];
        uint64_t h;
        if (c->dev == st->st_dev && c->ino == st->st_ino && head_of(fd, c->head_len, &h) && h == c->head_hash)
            return true;
    }
    return false;
}

typedef struct sibling {
    char path[4096 + 256 + 2];  /* a directory and a name */
    double mtime;
} sibling;

static int by_mtime(const void *a, const void *b)
{
    double x = ((const sibling *)a)->mtime, y = ((const sibling *)b)->mtime;
    return (x > y) - (x < y);
}

/* Lists the files beside fl whose names extend its name (train.log.1,
 * train.log-2024...), oldest first. */
static size_t siblings(const followed *fl, sibling *out, size_t max)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", fl->path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : fl->path;
    size_t base_len = strlen(base);
    if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        if (strncmp(e->d_name, base, base_len) != 0 || (e->d_name[base_len] != '.' && e->d_name[base_len] != '-'))
            continue;
        snprintf(out[n].path, sizeof out[n].path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(out[n].path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        out[n].mtime = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
        n++;
    }
    closedir(d);
    qsort(out, n, sizeof *out, by_mtime);
    return n;
}

#define SIBLINGS_MAX 64

typedef void (*sibling_fn)(tw_follower *f, followed *fl, int fd, const struct stat *st, void *ctx);

/* Opens each file beside fl, oldest first, and hands it to fn. */
static void each_sibling(tw_follower *f, followed *fl, sibling_fn fn, void *ctx)
{
    sibling *list = malloc(sizeof *list * SIBLINGS_MAX);
    if (!list)
        return;
    size_t n = siblings(fl, list, SIBLINGS_MAX);
    for (size_t i = 0; i < n; i++) {
        int fd = open(list[i].path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat(fd, &st) == 0)
            fn(f, fl, fd, &st, ctx);
        close(fd);
    }
    free(list);
}

typedef struct catch_up_ctx {
    uint64_t offset, head_hash;
    uint32_t head_len;
    ino_t skip_a, skip_b;
    bool found_ours;    /* a copy of what we were reading was there */
} catch_up_ctx;

static void catch_up_one(tw_follower *f, followed *fl, int fd, const struct stat *st, void *arg)
{
    catch_up_ctx *c = arg;
    uint64_t h;
    bool ours = c->head_len > 0 && head_of(fd, c->head_len, &h) && h == c->head_hash;
    if (st->st_ino != c->skip_a && st->st_ino != c->skip_b)
        c->found_ours |= ours;
    if (st->st_ino == c->skip_a || st->st_ino == c->skip_b || is_consumed(f, st, fd))
        return;
    uint64_t from = ours ? c->offset : 0;
    if ((uint64_t)st->st_size > from)
        read_range(f, fl, fd, from);
    end_of_file(f, fl);
    mark_consumed(f, st->st_dev, st->st_ino, fd);
}

/* Everything that happened beside a followed name since we last looked,
 * oldest first: the copy of content we had read part of (it starts like
 * `head` did: read it from `offset`), and whole generations we never saw
 * (renamed away, copied and truncated between two polls). Files we consumed
 * before, and the ones `skip_a`/`skip_b` (the name's old and new inodes),
 * are left alone. */
static bool catch_up(tw_follower *f, followed *fl, uint64_t offset, uint32_t head_len, uint64_t head_hash,
                     ino_t skip_a, ino_t skip_b)
{
    catch_up_ctx c = {offset, head_hash, head_len, skip_a, skip_b, false};
    each_sibling(f, fl, catch_up_one, &c);
    return c.found_ours;
}

static void consume_one(tw_follower *f, followed *fl, int fd, const struct stat *st, void *ctx)
{
    (void)fl;
    (void)ctx;
    mark_consumed(f, st->st_dev, st->st_ino, fd);
}

/* At the start: rotated generations already there are history, not news. */
static void consume_existing_siblings(tw_follower *f, followed *fl) { each_sibling(f, fl, consume_one, NULL); }

static int open_file(followed *fl)
{
    int fd = open(fl->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    fl->fd = fd;
    fl->dev = st.st_dev;
    fl->ino = st.st_ino;
    fl->offset = 0;
    fl->head_len = 0;
    fl->head_known = true;
    fl->mtime = st.st_mtim;
    return 0;
}

/* The name now holds another file (inode `next`): finish the old one, read
 * any generation in between, start the new one. */
static void switch_file(tw_follower *f, followed *fl, ino_t next)
{
    read_all(f, fl);
    end_of_file(f, fl);
    ino_t old = fl->ino;
    uint64_t offset = fl->offset, head_hash = fl->head_hash;
    uint32_t head_len = fl->head_len;
    if (fl->fd >= 0) {
        mark_consumed(f, fl->dev, fl->ino, fl->fd);
        close(fl->fd);
    }
    fl->fd = -1;
    /* copies of the old file hold only what we read; other files are news */
    catch_up(f, fl, offset, head_len, head_hash, old, next);
    tw_parser_set_line(fl->parser, 0);
    if (open_file(fl) == 0) {
        f->stats.rotations++;
        /* the name moved on again between our stat and our open: the file we
         * meant to start (`next`) is a rotated generation now, read it whole */
        if (fl->ino != next)
            catch_up(f, fl, 0, 0, 0, old, fl->ino);
        read_all(f, fl);
    }
}

/* Our file was truncated (or rewritten) under us: the part we had not read
 * is in a copy, possibly after other copies; then read it again from 0. */
static void truncated(tw_follower *f, followed *fl)
{
    f->stats.truncations++;
    /* a partial last line stays pending: the copy continues it. A listing
     * taken while the writer renames the generations can miss the copy
     * (readdir does not promise entries renamed during it): look again a
     * few times before deciding there is none, or the copy would be taken
     * for news later and read a second time. */
    for (int tries = 0; !catch_up(f, fl, fl->offset, fl->head_len, fl->head_hash, fl->ino, fl->ino) &&
                        fl->offset > 0 && fl->head_len > 0 && tries < 3;
         tries++) {
        struct timespec pause = {0, 2 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    end_of_file(f, fl);
    tw_parser_set_line(fl->parser, 0);
    fl->offset = 0;
    fl->head_len = 0;
    fl->head_known = true;
    lseek(fl->fd, 0, SEEK_SET);
    read_all(f, fl);
}

static void check_file(tw_follower *f, followed *fl)
{
    if (fl->fd < 0) {
        if (open_file(fl) == 0)
            read_all(f, fl); /* appeared (again) since the last poll */
        return;
    }
    /* truncation first: reading on at our offset into rewritten content
     * would take the wrong lines */
    struct stat by_name, by_fd;
    uint64_t h;
    bool have_fd_stat = fstat(fl->fd, &by_fd) == 0;
    if (have_fd_stat &&
        ((uint64_t)by_fd.st_size < fl->offset ||
         (fl->head_len > 0 && (!head_of(fl->fd, fl->head_len, &h) || h != fl->head_hash))))
        truncated(f, fl);
    else if (have_fd_stat && fl->offset == 0 && by_fd.st_size == 0 &&
             (by_fd.st_mtim.tv_sec != fl->mtime.tv_sec || by_fd.st_mtim.tv_nsec != fl->mtime.tv_nsec))
        /* written and copy-truncated between two looks, before we read a
         * byte of it: neither size nor head tells, the copy is news */
        catch_up(f, fl, 0, 0, 0, fl->ino, fl->ino);
    if (have_fd_stat)
        fl->mtime = by_fd.st_mtim;
    read_all(f, fl);
    if (stat(fl->path, &by_name) != 0)
        return; /* gone for now: the open descriptor still reads its last lines */
    if (by_name.st_ino != fl->ino || by_name.st_dev != fl->dev)
        switch_file(f, fl, by_name.st_ino);
}

static followed *find(tw_follower *f, const char *path)
{
    for (size_t i = 0; i < f->count; i++) {
        if (strcmp(f->files[i].path, path) == 0)
            return &f->files[i];
    }
    return NULL;
}

/* A rotated generation of a followed file (x.log.1, x.log-2024...) is not a
 * new log, even when the glob matches it. */
static bool is_rotation_of_followed(tw_follower *f, const char *path)
{
    for (size_t i = 0; i < f->count; i++) {
        size_t n = strlen(f->files[i].path);
        if (strncmp(path, f->files[i].path, n) == 0 && (path[n] == '.' || path[n] == '-'))
            return true;
    }
    return false;
}

static saved *saved_for(tw_follower *f, const char *path)
{
    for (size_t i = 0; i < f->saved_count; i++) {
        if (!f->saved[i].used && strcmp(f->saved[i].path, path) == 0)
            return &f->saved[i];
    }
    return NULL;
}

/* Resumes a file from its saved position, whatever happened while we were away. */
static void resume(tw_follower *f, followed *fl, saved *s)
{
    s->used = true;
    tw_parser_set_line(fl->parser, s->line);
    if (fl->dev == s->dev && fl->ino == s->ino) {
        struct stat st;
        uint64_t h;
        bool intact = fstat(fl->fd, &st) == 0 && (uint64_t)st.st_size >= s->offset &&
                      head_of(fl->fd, s->head_len, &h) && h == s->head_hash;
        if (intact) {
            fl->offset = s->offset;
            fl->head_len = s->head_len;
            fl->head_hash = s->head_hash;
            /* the bytes are not in memory: the head stays as saved */
            fl->head_known = s->offset <= s->head_len && head_of(fl->fd, s->head_len, &h) &&
                             pread(fl->fd, fl->head, s->head_len, 0) == (ssize_t)s->head_len;
            lseek(fl->fd, (off_t)s->offset, SEEK_SET);
            return;
        }
    }
    /* rotated or truncated while we were away: the rest of what we were
     * reading, and any generation since, are beside it */
    catch_up(f, fl, s->offset, s->head_len, s->head_hash, fl->ino, fl->ino);
    end_of_file(f, fl);
    tw_parser_set_line(fl->parser, 0);
}

static int add_file(tw_follower *f, const char *path, bool from_start)
{
    if (f->count >= FILES_MAX)
        return TW_ELIMIT;
    followed *fl = &f->files[f->count];
    memset(fl, 0, sizeof *fl);
    fl->fd = -1;
    fl->path = strdup(path);
    if (!fl->path)
        return TW_ENOMEM;
    int rc = tw_parser_new(&fl->parser, fl->path, f->o.format, -1);
    if (rc != TW_OK) {
        free(fl->path);
        return rc;
    }
    f->count++;
    f->stats.files++;
    if (!f->had_state && !f->started)
        consume_existing_siblings(f, fl); /* rotated history, not news */
    if (open_file(fl) != 0)
        return TW_OK; /* not there yet: opened when it appears */
    saved *s = saved_for(f, path);
    if (s) {
        resume(f, fl, s);
    } else if (!from_start) {
        struct stat st;
        if (fstat(fl->fd, &st) == 0) {
            /* from the end: the head is what is there now */
            fl->head_len = st.st_size < HEAD_MAX ? (uint32_t)st.st_size : HEAD_MAX;
            fl->head_known = pread(fl->fd, fl->head, fl->head_len, 0) == (ssize_t)fl->head_len;
            if (!fl->head_known)
                fl->head_len = 0;
            fl->head_hash = fnv(fl->head, fl->head_len);
            fl->offset = (uint64_t)st.st_size;
            lseek(fl->fd, (off_t)fl->offset, SEEK_SET);
        }
    }
    return TW_OK; /* the next poll reads it */
}

static bool has_glob(const char *s) { return strpbrk(s, "*?[") != NULL; }

static void scan_patterns(tw_follower *f)
{
    /* files already there at the first scan follow --from-start (or the
     * state); files that appear later are new logs, read from their start */
    bool from_start = f->started || f->o.from_start || f->had_state;
    for (size_t i = 0; i < f->o.pattern_count; i++) {
        const char *pattern = f->o.patterns[i];
        if (!has_glob(pattern)) {
            if (!find(f, pattern))
                add_file(f, pattern, from_start);
            continue;
        }
        glob_t g;
        if (glob(pattern, GLOB_NOSORT, NULL, &g) != 0)
            continue;
        for (size_t k = 0; k < g.gl_pathc; k++) {
            const char *path = g.gl_pathv[k];
            struct stat st;
            if (find(f, path) || is_rotation_of_followed(f, path) || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
                continue;
            add_file(f, path, from_start);
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
        if (inotify_add_watch(f->inotify, dir, IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE |
                                                   IN_CLOSE_WRITE | IN_ATTRIB) < 0) {
            close(f->inotify);
            f->inotify = -1; /* a directory we cannot watch: poll everything */
            return;
        }
    }
    f->stats.inotify = true;
}

/* ---- state file ------------------------------------------------------ */

static int load_state(tw_follower *f, char *err, size_t errlen)
{
    FILE *in = fopen(f->o.state_file, "r");
    if (!in) {
        if (errno == ENOENT)
            return TW_OK;
        snprintf(err, errlen, "%s: %s", f->o.state_file, strerror(errno));
        return TW_EIO;
    }
    char line[8400];
    int rc = TW_OK;
    uint64_t sink_size = 0;
    bool have_sink = false;
    if (!fgets(line, sizeof line, in) || strncmp(line, STATE_MAGIC, strlen(STATE_MAGIC)) != 0)
        rc = TW_ECONFIG;
    while (rc == TW_OK && fgets(line, sizeof line, in)) {
        line[strcspn(line, "\n")] = '\0';
        unsigned long long dev, ino, offset, lno, head_hash;
        unsigned head_len;
        int at = 0;
        if (sscanf(line, "sink %" SCNu64, &sink_size) == 1) {
            have_sink = true;
        } else if (sscanf(line, "done %llu %llu %u %llx", &dev, &ino, &head_len, &head_hash) == 4 &&
                   head_len <= HEAD_MAX) {
            f->done[f->done_head] = (consumed){(dev_t)dev, (ino_t)ino, head_len, head_hash};
            f->done_head = (f->done_head + 1) % CONSUMED_MAX;
            if (f->done_count < CONSUMED_MAX)
                f->done_count++;
        } else if (sscanf(line, "file %llu %llu %llu %llu %u %llx %n", &dev, &ino, &offset, &lno, &head_len,
                          &head_hash, &at) == 6 && at > 0 && head_len <= HEAD_MAX) {
            saved *grown = realloc(f->saved, sizeof *grown * (f->saved_count + 1));
            if (!grown) {
                rc = TW_ENOMEM;
                break;
            }
            f->saved = grown;
            f->saved[f->saved_count++] = (saved){strdup(line + at), (dev_t)dev, (ino_t)ino, offset, lno, head_hash,
                                                 head_len, false};
        } else {
            rc = TW_ECONFIG;
        }
    }
    fclose(in);
    if (rc != TW_OK) {
        snprintf(err, errlen, "%s: not a trainwatch state file (remove it to start over)", f->o.state_file);
        return rc;
    }
    f->had_state = true;
    if (have_sink && f->sink.restore && f->sink.restore(f->sink.arg, sink_size) != 0) {
        snprintf(err, errlen, "%s: could not restore the records output to %" PRIu64 " bytes", f->o.state_file, sink_size);
        return TW_EIO;
    }
    return TW_OK;
}

int tw_follower_save(tw_follower *f)
{
    if (!f->o.state_file)
        return TW_OK;
    uint64_t sink_size = f->sink.commit ? f->sink.commit(f->sink.arg) : 0;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", f->o.state_file);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return tw_status_from_errno(errno);
    FILE *out = fdopen(fd, "w");
    if (!out) {
        close(fd);
        return TW_ENOMEM;
    }
    fprintf(out, "%s\nsink %" PRIu64 "\n", STATE_MAGIC, sink_size);
    /* oldest first, so a restarted follower's ring continues in the same
     * order and evicts the oldest entries, not the newest */
    for (size_t i = 0; i < f->done_count; i++) {
        const consumed *c = &f->done[(f->done_head + CONSUMED_MAX - f->done_count + i) % CONSUMED_MAX];
        fprintf(out, "done %llu %llu %u %llx\n", (unsigned long long)c->dev, (unsigned long long)c->ino, c->head_len,
                (unsigned long long)c->head_hash);
    }
    for (size_t i = 0; i < f->count; i++) {
        followed *fl = &f->files[i];
        if (fl->fd < 0)
            continue;
        /* the offset of the last complete line: a partial one is read again */
        uint64_t commit = fl->offset - tw_parser_pending(fl->parser);
        fprintf(out, "file %llu %llu %llu %llu %u %llx %s\n", (unsigned long long)fl->dev, (unsigned long long)fl->ino,
                (unsigned long long)commit, (unsigned long long)tw_parser_line(fl->parser), fl->head_len,
                (unsigned long long)fl->head_hash, fl->path);
    }
    int rc = TW_OK;
    if (fflush(out) != 0 || fsync(fd) != 0)
        rc = TW_EIO;
    if (fclose(out) != 0)
        rc = TW_EIO;
    if (rc == TW_OK && rename(tmp, f->o.state_file) != 0)
        rc = tw_status_from_errno(errno);
    return rc;
}

/* ---- lifecycle ------------------------------------------------------- */

int tw_follower_open(const tw_follow_options *o, tw_follower **out, char *err, size_t errlen)
{
    tw_follower *f = calloc(1, sizeof *f);
    if (!f || !(f->buf = malloc(READ_SIZE))) {
        free(f);
        snprintf(err, errlen, "out of memory");
        return TW_ENOMEM;
    }
    f->o = *o;
    f->sink = o->sink;
    f->inotify = -1;
    if (o->save_interval <= 0)
        f->o.save_interval = 0.1;
    int rc = o->state_file ? load_state(f, err, errlen) : TW_OK;
    if (rc != TW_OK) {
        tw_follower_close(f);
        return rc;
    }
    watch_directories(f);
    scan_patterns(f);
    /* Save the starting positions before anything is read: a kill before the
     * first periodic save then restarts from here, and the sink is cut back
     * to its size now. */
    if (o->state_file && (rc = tw_follower_save(f)) != TW_OK) {
        snprintf(err, errlen, "%s: %s", o->state_file, tw_strerror(rc));
        tw_follower_close(f);
        return rc;
    }
    f->last_glob = f->last_save = tw_monotonic_clock();
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
        check_file(f, &f->files[i]);
    uint64_t cut = 0;
    for (size_t i = 0; i < f->count; i++)
        cut += tw_parser_stats(f->files[i].parser)->lines_cut;
    f->stats.lines_cut = cut;
    if (f->o.state_file && now - f->last_save >= f->o.save_interval) {
        f->last_save = now;
        return tw_follower_save(f);
    }
    return TW_OK;
}

const tw_follow_stats *tw_follower_stats(const tw_follower *f) { return &f->stats; }

void tw_follower_close(tw_follower *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->count; i++)
        read_all(f, &f->files[i]);
    if (f->started)
        tw_follower_save(f);
    for (size_t i = 0; i < f->count; i++) {
        if (f->files[i].fd >= 0)
            close(f->files[i].fd);
        tw_parser_close(f->files[i].parser);
        free(f->files[i].path);
    }
    for (size_t i = 0; i < f->saved_count; i++)
        free(f->saved[i].path);
    free(f->saved);
    if (f->inotify >= 0)
        close(f->inotify);
    free(f->buf);
    free(f);
}
