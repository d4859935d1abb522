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
 */
#include "trainwatch/follow.h"
#include "../core/clock.h"
#include "../parse/user_formats.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <inttypes.h>
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

#include "../core/say.h"
#include "trainwatch/error.h"

#define HEAD_MAX         256
#define CHECK_MAX        256 /* bytes before a saved offset whose hash is saved too */
#define READ_SIZE        (256 * 1024)
#define CONSUMED_MISSES  3          /* listings a read generation may be absent from before it is forgotten */
#define CONSUMED_LIMIT   (1u << 20) /* a last bound, far above any directory's generations */
#define LISTINGS_MAX     16         /* listings of the generations per catch-up while a writer renames them */
#define STATE_MAGIC      "trainwatch-follow-state 2"
#define STATE_MAGIC_V1   "trainwatch-follow-state 1"
#define SAVE_BACKOFF_MAX 5.0  /* seconds between attempts while saving fails */
#define NOT_REGULAR      (-1) /* open_name(): a FIFO, a device, a directory */

/* A file generation: enough to find it again and tell it from a reused inode. */
typedef struct generation {
    dev_t dev;
    ino_t ino;
    uint32_t head_len;
    uint64_t head_hash;
} generation;

typedef enum file_status {
    FILE_WAITING, /* not there (yet), or not readable: tried again each poll */
    FILE_OPEN,
    FILE_IDLE,    /* closed to stay within the descriptor budget */
    FILE_ALIAS,   /* the same file as another followed name: not read */
    FILE_REFUSED, /* not a regular file (a FIFO, a device): not followed */
} file_status;

typedef struct followed {
    char *path;
    file_status status;
    int fd;
    dev_t dev;
    ino_t ino;
    uint64_t offset; /* bytes read from fd */
    uint32_t head_len;
    uint64_t head_hash;
    bool head_known; /* head[] holds the file's first head_len bytes as we read them */
    unsigned char head[HEAD_MAX];
    unsigned char tail[CHECK_MAX]; /* the last tail_len bytes read, ending at offset */
    uint32_t tail_len;
    struct timespec mtime; /* as last seen: a change with nothing to read is a rewrite */
    uint64_t size;         /* as last seen (idle files: at closing) */
    double last_data;      /* when it last gave bytes: the least recent is closed first */
    bool said;             /* its status was said on warnings */
    bool opened;           /* was open once (counted in stats.files) */
    int64_t gen_start;     /* stream position of byte 0 of this generation */
    int64_t gen_read_from; /* stream position of the first byte read of it */
    bool gen_mid_line;     /* the generation began inside a line of the one before */
    bool fresh;            /* nothing of this generation read yet (see look_beside) */
    bool have_prev;        /* the generation read before it, where a resume point may lie */
    generation prev;
    int64_t prev_start, prev_read_from;
    uint64_t check_at, check_hash; /* hash of the bytes before a committed offset, for idle files */
    uint32_t check_len;
    tw_parser *parser;
} followed;

/* A file whose content is fully read (an old generation, a copy), remembered
 * for the followed file it belongs to while it is there. */
typedef struct consumed {
    generation g;
    uint64_t owner;  /* hash of the followed path */
    unsigned missed; /* consecutive listings it was not in */
} consumed;

/* A position saved in the state file. */
typedef struct saved {
    char *path;
    generation g;
    uint64_t offset, line, check_hash;
    uint32_t check_len;
    bool skip_line;
    bool has_from; /* the resume point lies in an earlier generation */
    generation from;
    uint64_t from_offset;
    bool used;
} saved;

struct tw_follower {
    tw_follow_options o;
    followed **files;
    size_t count, cap;
    size_t *index; /* open addressing by path hash: file number + 1, 0 empty */
    size_t index_cap;
    size_t open_count, open_budget;
    char *buf;   /* reads of followed files */
    char *aside; /* reads of the generations beside them, while buf holds a read */
    int inotify;
    double last_glob, next_save;
    bool started; /* first scan done: later files are read from the start */
    bool had_state;
    saved *saved;
    size_t saved_count;
    tw_follow_stats stats;
    tw_record_sink sink;
    consumed *done; /* oldest first */
    size_t done_count, done_cap;
    unsigned save_failures; /* consecutive */
    bool finished;          /* tw_follower_finish() was called */
};

static uint64_t fnv_more(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static uint64_t fnv(const unsigned char *p, size_t n)
{
    return fnv_more(1469598103934665603ull, p, n);
}

static uint64_t path_hash(const char *path)
{
    return fnv((const unsigned char *)path, strlen(path));
}

/* Hash of the len bytes of fd at from; false if the file is shorter. */
static bool hash_at(int fd, uint64_t from, uint32_t len, uint64_t *hash)
{
    unsigned char bytes[HEAD_MAX > CHECK_MAX ? HEAD_MAX : CHECK_MAX];
    if (len == 0) {
        *hash = fnv(NULL, 0);
        return true;
    }
    ssize_t n = pread(fd, bytes, len, (off_t)from);
    if (n != (ssize_t)len)
        return false;
    *hash = fnv(bytes, len);
    return true;
}

static bool head_of(int fd, uint32_t len, uint64_t *hash)
{
    return hash_at(fd, 0, len, hash);
}

static void say(tw_follower *f, tw_say_level level, const char *fmt, const char *path, const char *detail)
{
    char what[PATH_MAX + 512];
    snprintf(what, sizeof what, fmt, path, detail);
    tw_say_to(f->o.warnings, level, "follow", "%s", what);
}

static void count_record(void *arg, const tw_record *r)
{
    tw_follower *f = arg;
    f->stats.records++;
    f->sink.record(f->sink.arg, r);
}

static int64_t stream_end(const followed *fl)
{
    return (int64_t)tw_parser_stats(fl->parser)->bytes;
}

static void push(tw_follower *f, followed *fl, const char *data, size_t n)
{
    uint64_t before = tw_parser_line(fl->parser);
    tw_parser_push(fl->parser, data, n, count_record, f);
    f->stats.lines += tw_parser_line(fl->parser) - before;
    f->stats.bytes += n;
}

/* A file that ends for good (renamed away, or we stop without a state file):
 * its partial last line is a line. */
static void close_line(tw_follower *f, followed *fl)
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
static void place_in_stream(followed *fl, uint64_t offset)
{
    fl->gen_start = stream_end(fl) - (int64_t)offset;
    fl->gen_read_from = stream_end(fl);
    fl->gen_mid_line = offset == 0 && tw_parser_pending(fl->parser) > 0;
}

/* Starts reading fl's descriptor at offset (a new generation, or a resume):
 * its byte 0 is where the stream would have had it. */
static void start_at(followed *fl, uint64_t offset)
{
    fl->offset = offset;
    fl->fresh = offset == 0;
    place_in_stream(fl, offset);
    fl->tail_len = 0;
    if (offset > 0) {
        uint32_t len = offset < CHECK_MAX ? (uint32_t)offset : CHECK_MAX;
        if (pread(fl->fd, fl->tail, len, (off_t)(offset - len)) == (ssize_t)len)
            fl->tail_len = len;
    }
    lseek(fl->fd, (off_t)offset, SEEK_SET);
}

static bool look_beside(tw_follower *f, followed *fl, const char *held, size_t held_len, struct timespec before);
static void truncated(tw_follower *f, followed *fl);

/* The file still begins with the bytes we read first. */
static bool head_unchanged(const followed *fl)
{
    uint64_t h;
    return head_of(fl->fd, fl->head_len, &h) && h == fl->head_hash;
}

static void read_all(tw_follower *f, followed *fl)
{
    if (fl->fd < 0)
        return;
    struct stat before = {0}; /* a fresh generation's time of change before its first read */
    if (fl->fresh && fstat(fl->fd, &before) != 0)
        before.st_mtim = (struct timespec){0, 0};
    for (;;) {
        ssize_t n = read(fl->fd, f->buf, READ_SIZE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        /* copied and truncated since it was checked, and written past our
         * offset again: these bytes are the new content's, the copy holds
         * ours (a writer that rotates every few milliseconds, a loaded
         * machine); nothing of them is pushed */
        if (fl->head_len > 0 && !head_unchanged(fl)) {
            truncated(f, fl);
            return;
        }
        if (fl->fresh) {
            fl->fresh = false;
            if (look_beside(f, fl, f->buf, (size_t)n, before.st_mtim)) {
                tw_parser_set_line(fl->parser, 0);
                place_in_stream(fl, 0);
            }
        }
        push(f, fl, f->buf, (size_t)n);
        note_read(fl, f->buf, (size_t)n);
        fl->offset += (uint64_t)n;
        fl->last_data = tw_monotonic_clock();
    }
}

/* Reads [from, end) of another generation into fl's parser; it becomes the
 * generation before the current one. */
static uint64_t read_range(tw_follower *f, followed *fl, int fd, const generation *g, uint64_t from)
{
    fl->have_prev = true;
    fl->prev = *g;
    fl->prev_start = stream_end(fl) - (int64_t)from;
    fl->prev_read_from = stream_end(fl);
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

/* ---- generations already read ----------------------------------------- */

static generation generation_of(int fd, const struct stat *st)
{
    generation g = {st->st_dev, st->st_ino, 0, 0};
    g.head_len = st->st_size < HEAD_MAX ? (uint32_t)st->st_size : HEAD_MAX;
    if (!head_of(fd, g.head_len, &g.head_hash))
        g.head_len = 0, g.head_hash = fnv(NULL, 0);
    return g;
}

/* Remembers g as read for fl (not an empty file: an empty file is anything
 * it becomes, a copy about to be written, say). Returns the entry, or NULL. */
static consumed *mark_consumed(tw_follower *f, const followed *fl, const generation *g)
{
    uint64_t owner = path_hash(fl->path);
    if (g->head_len == 0)
        return NULL;
    for (size_t i = 0; i < f->done_count; i++) {
        consumed *c = &f->done[i];
        if (c->g.dev == g->dev && c->g.ino == g->ino) {
            *c = (consumed){*g, owner, 0};
            return c;
        }
    }
    if (f->done_count == CONSUMED_LIMIT) {
        memmove(f->done, f->done + 1, sizeof *f->done * (f->done_count - 1));
        f->done_count--;
    }
    if (f->done_count == f->done_cap) {
        size_t cap = f->done_cap ? f->done_cap * 2 : 64;
        consumed *grown = realloc(f->done, sizeof *grown * cap);
        if (!grown)
            return NULL; /* read again later rather than not at all */
        f->done = grown;
        f->done_cap = cap;
    }
    f->done[f->done_count] = (consumed){*g, owner, 0};
    return &f->done[f->done_count++];
}

static void mark_consumed_fd(tw_follower *f, const followed *fl, int fd)
{
    struct stat st;
    if (fstat(fd, &st) == 0) {
        generation g = generation_of(fd, &st);
        mark_consumed(f, fl, &g);
    }
}

static bool is_consumed(const tw_follower *f, const struct stat *st, int fd)
{
    for (size_t i = 0; i < f->done_count; i++) {
        const consumed *c = &f->done[i];
        uint64_t h;
        if (c->g.dev == st->st_dev && c->g.ino == st->st_ino && head_of(fd, c->g.head_len, &h) && h == c->g.head_hash)
            return true;
    }
    return false;
}

/* ---- rotated generations beside a followed file ------------------------ */

typedef struct sibling {
    char *path;
    struct timespec mtime;
    long long number; /* x.log.N: N (higher is older); -1 */
    dev_t dev;
    ino_t ino; /* as the directory entry named it */
} sibling;

typedef struct sibling_list {
    sibling *items;
    size_t count, cap;
    bool moved; /* a name held another file by the time it was looked at */
} sibling_list;

static void siblings_free(sibling_list *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->items[i].path);
    free(l->items);
    *l = (sibling_list){0};
}

/* Oldest first: by modification time, then by generation number (x.log.3
 * before x.log.2), then by name. */
static int sibling_order(const void *a, const void *b)
{
    const sibling *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    if (x->number != y->number)
        return x->number > y->number ? -1 : 1;
    return strcmp(x->path, y->path);
}

static long long generation_number(const char *suffix)
{
    if (*suffix != '.' && *suffix != '-')
        return -1;
    char *end;
    long long n = strtoll(suffix + 1, &end, 10);
    return end != suffix + 1 && (*end == '\0' || *end == '.') ? n : -1;
}

static followed *find(tw_follower *f, const char *path);

/* A name that extends a followed name as a rotation names a generation:
 * after a '.', '-' or '_' (train.log.1, train.log-20240309, train.log_1),
 * not compressed (train.log.2.gz is the bytes of train.log.2, in another
 * form) and not followed itself (workerlog.1 and workerlog.10). */
static bool names_generation(tw_follower *f, const char *path, const char *suffix)
{
    static const char *const compressed[] = {".gz", ".bz2", ".xz", ".zst", ".lz4", ".lzma", ".Z", ".zip", ".br"};
    if (*suffix != '.' && *suffix != '-' && *suffix != '_')
        return false;
    size_t len = strlen(suffix);
    for (size_t i = 0; i < sizeof compressed / sizeof *compressed; i++) {
        size_t n = strlen(compressed[i]);
        if (len >= n && strcmp(suffix + len - n, compressed[i]) == 0)
            return false;
    }
    return !find(f, path);
}

/* `prefix`: the followed path up to its last '/', with it (the names built
 * are then spelled as globs spell them, for find()). */
static int siblings_add(tw_follower *f, sibling_list *l, const char *prefix, const struct dirent *e,
                        const char *suffix)
{
    size_t len = strlen(prefix) + strlen(e->d_name) + 1;
    char *path = malloc(len);
    if (!path)
        return TW_ENOMEM;
    snprintf(path, len, "%s%s", prefix, e->d_name);
    if (!names_generation(f, path, suffix)) {
        free(path);
        return TW_OK;
    }
    struct stat st; /* the entry itself: a symlink beside the log is no generation */
    bool there = lstat(path, &st) == 0;
    if (!there || st.st_ino != e->d_ino) /* renamed over or away since the listing */
        l->moved = true;
    if (!there || !S_ISREG(st.st_mode)) {
        free(path);
        return TW_OK;
    }
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        sibling *grown = realloc(l->items, sizeof *grown * cap);
        if (!grown) {
            free(path);
            return TW_ENOMEM;
        }
        l->items = grown;
        l->cap = cap;
    }
    l->items[l->count++] = (sibling){path, st.st_mtim, generation_number(suffix), st.st_dev, st.st_ino};
    return TW_OK;
}

/* Lists every file beside fl whose name names a generation of it
 * (train.log.1, train.log-2024...), oldest first. Memory grows with the generations
 * there are, not with a fixed maximum; a listing cut short by a lack of
 * memory is still used (a generation missed is read when next listed).
 * The directory is read in one getdents(2) call up to its buffer's size
 * (32 KiB in glibc: some 800 names), which a rename cannot cut in two; a
 * rename between that and the stat of a name sets `moved`. */
static void siblings(tw_follower *f, const followed *fl, sibling_list *out)
{
    char *prefix = strdup(fl->path);
    if (!prefix)
        return;
    char *slash = strrchr(prefix, '/');
    char *base = strdup(slash ? slash + 1 : prefix);
    if (!base) {
        free(prefix);
        return;
    }
    if (slash)
        slash[1] = '\0';
    else
        prefix[0] = '\0';
    size_t base_len = strlen(base);
    DIR *d = opendir(*prefix ? prefix : ".");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strncmp(e->d_name, base, base_len) != 0 || e->d_name[base_len] == '\0' ||
                siblings_add(f, out, prefix, e, e->d_name + base_len) != TW_OK)
                continue;
        }
        closedir(d);
    }
    free(base);
    free(prefix);
    if (out->count > 1)
        qsort(out->items, out->count, sizeof *out->items, sibling_order);
}

/* Forgets the generations of fl that were in none of the last few listings
 * (deleted by the rotation): what is remembered is what is there. */
static void prune_consumed(tw_follower *f, const followed *fl, const sibling_list *l)
{
    uint64_t owner = path_hash(fl->path);
    size_t kept = 0;
    for (size_t i = 0; i < f->done_count; i++) {
        consumed *c = &f->done[i];
        bool there = c->owner != owner || (c->g.dev == fl->dev && c->g.ino == fl->ino);
        for (size_t k = 0; !there && k < l->count; k++)
            there = l->items[k].dev == c->g.dev && l->items[k].ino == c->g.ino;
        if (there && c->owner == owner)
            c->missed = 0;
        else if (!there)
            c->missed++;
        if (c->missed < CONSUMED_MISSES)
            f->done[kept++] = *c;
    }
    f->done_count = kept;
}

/* Given each generation beside fl in turn; returns false to stop there. */
typedef bool (*sibling_fn)(tw_follower *f, followed *fl, int fd, const struct stat *st, void *ctx);

/* The files one each_sibling() call has handed over, by inode: a listing
 * taken again goes on after them. */
typedef struct handed {
    struct handed_file {
        dev_t dev;
        ino_t ino;
    } *items;
    size_t count, cap;
} handed;

static bool was_handed(const handed *h, dev_t dev, ino_t ino)
{
    for (size_t i = 0; i < h->count; i++) {
        if (h->items[i].dev == dev && h->items[i].ino == ino)
            return true;
    }
    return false;
}

static bool note_handed(handed *h, dev_t dev, ino_t ino)
{
    if (h->count == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        struct handed_file *grown = realloc(h->items, sizeof *grown * cap);
        if (!grown)
            return false;
        h->items = grown;
        h->cap = cap;
    }
    h->items[h->count++] = (struct handed_file){dev, ino};
    return true;
}

/* Hands the listed files to fn in the listing's order, each opened and seen
 * to be the file listed. Returns false when a name held another file by
 * then (a writer shifting x.log.1 to x.log.2 behind the listing): opening
 * on would hand over a newer generation before an older one, out of order,
 * so the caller lists again (unless `last`: the file is left for the next
 * catch-up). */
static bool hand_over(tw_follower *f, followed *fl, const sibling_list *l, handed *done, bool last, sibling_fn fn,
                      void *ctx)
{
    for (size_t i = 0; i < l->count; i++) {
        const sibling *s = &l->items[i];
        if (was_handed(done, s->dev, s->ino))
            continue;
        int fd = open(s->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0 && errno == ENOENT && !last)
            return false; /* renamed, or deleted: the next listing tells */
        if (fd < 0)
            continue;
        struct stat st;
        bool same = fstat(fd, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino;
        if (!same && !last) {
            close(fd);
            return false;
        }
        bool go_on = !(same && S_ISREG(st.st_mode) && note_handed(done, s->dev, s->ino)) || fn(f, fl, fd, &st, ctx);
        close(fd);
        if (!go_on)
            return true;
    }
    return true;
}

/* Opens each file beside fl, oldest first, and hands it to fn: listed
 * again (up to LISTINGS_MAX times) while a writer renames them under us. */
static void each_sibling(tw_follower *f, followed *fl, sibling_fn fn, void *ctx)
{
    handed done = {0};
    bool pruned = false;
    for (int listing = 1; listing <= LISTINGS_MAX; listing++) {
        sibling_list list = {0};
        siblings(f, fl, &list);
        bool last = listing == LISTINGS_MAX;
        if (list.moved && !last) {
            siblings_free(&list);
            continue;
        }
        if (!pruned)
            prune_consumed(f, fl, &list);
        pruned = true;
        bool finished = hand_over(f, fl, &list, &done, last, fn, ctx);
        siblings_free(&list);
        if (finished)
            break;
    }
    free(done.items);
}

typedef struct catch_up_ctx {
    uint64_t offset, head_hash;
    uint32_t head_len;
    ino_t skip_a, skip_b;
    const char *held; /* the first bytes read of the file at the name, not pushed yet */
    size_t held_len;
    struct timespec held_mtime; /* its time of change before that read */
    bool found_ours; /* a copy of what we were reading was there */
    bool read_some;  /* bytes of another generation went into the stream */
} catch_up_ctx;

/* The n bytes of fd at offset are `bytes`; false if it is shorter. Uses the
 * first half of f->aside. */
static bool holds_at(tw_follower *f, int fd, uint64_t offset, const char *bytes, size_t n)
{
    for (size_t at = 0; at < n;) {
        size_t want = n - at < READ_SIZE / 2 ? n - at : READ_SIZE / 2;
        if (pread(fd, f->aside, want, (off_t)(offset + at)) != (ssize_t)want || memcmp(f->aside, bytes + at, want) != 0)
            return false;
        at += want;
    }
    return true;
}

/* The first n bytes of a are those of b; false if either is shorter. */
static bool same_bytes(tw_follower *f, int a, int b, uint64_t n)
{
    char *chunk = f->aside + READ_SIZE / 2;
    for (uint64_t at = 0; at < n;) {
        size_t want = n - at < READ_SIZE / 2 ? (size_t)(n - at) : READ_SIZE / 2;
        if (pread(a, chunk, want, (off_t)at) != (ssize_t)want || !holds_at(f, b, at, chunk, want))
            return false;
        at += want;
    }
    return true;
}

static bool not_before(struct timespec a, struct timespec b)
{
    return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec >= b.tv_nsec;
}

/* A copy of the file now at the name, or of its first part: one being
 * taken, or taken and not truncated yet (the writer's next rotation, seen
 * by a catch-up that is late). Its lines are read at the name; taken for a
 * generation of its own it would be read twice, or, read while the copy is
 * written, only in part. It holds the same bytes as the file at the name.
 * With bytes in hand (the first read of the file, not pushed yet) it may
 * also begin as they do and go on past them, if it was written after that
 * read (the file grew, was copied and truncated since): an older generation
 * that merely begins the same (a banner line) was written before. */
static bool copy_of_current(tw_follower *f, const followed *fl, const catch_up_ctx *c, int fd, const struct stat *st)
{
    struct stat at_name;
    bool same_file = fl->fd >= 0 && fstat(fl->fd, &at_name) == 0;
    if (same_file && at_name.st_dev == st->st_dev && at_name.st_ino == st->st_ino)
        return false;
    if (c->held) {
        size_t n = (uint64_t)st->st_size < c->held_len ? (size_t)st->st_size : c->held_len;
        if (!holds_at(f, fd, 0, c->held, n))
            return false;
        if ((uint64_t)st->st_size <= c->held_len || not_before(st->st_mtim, c->held_mtime))
            return true;
    }
    return same_file && at_name.st_size >= st->st_size && same_bytes(f, fd, fl->fd, (uint64_t)st->st_size);
}

static bool catch_up_one(tw_follower *f, followed *fl, int fd, const struct stat *st, void *arg)
{
    catch_up_ctx *c = arg;
    uint64_t h;
    /* the file we read next, renamed away since we opened it: what comes
     * after it is newer than its lines, read when its rename is seen */
    if (fl->fd >= 0 && st->st_dev == fl->dev && st->st_ino == fl->ino)
        return false;
    bool ours = c->head_len > 0 && head_of(fd, c->head_len, &h) && h == c->head_hash;
    if (st->st_ino != c->skip_a && st->st_ino != c->skip_b)
        c->found_ours |= ours;
    /* an empty file is left for later: it may be a copy about to be written */
    if (st->st_size == 0 || st->st_ino == c->skip_a || st->st_ino == c->skip_b || is_consumed(f, st, fd))
        return true;
    if (!ours && copy_of_current(f, fl, c, fd, st))
        return true; /* found again, as ours, when the file at the name is truncated */
    generation g = generation_of(fd, st);
    uint64_t from = ours ? c->offset : 0;
    /* a copy ends where the writer was when it was taken, possibly inside
     * a line: the next generation goes on with it, so it stays pending */
    if ((uint64_t)st->st_size > from)
        c->read_some |= read_range(f, fl, fd, &g, from) > 0;
    else if (ours && (uint64_t)st->st_size == from && fl->have_prev && fl->prev.head_len == c->head_len &&
             fl->prev.head_hash == c->head_hash)
        /* nothing in it we had not read, but it holds the bytes of the
         * generation left (truncated under its inode) at the same offsets:
         * a resume point among them is found in it after a restart, as it
         * would be after read_range */
        fl->prev = g;
    mark_consumed(f, fl, &g);
    return true;
}

/* Everything that happened beside a followed name since we last looked,
 * oldest first: the copy of content we had read part of (it starts like
 * `head` did: read it from `offset`), and whole generations we never saw
 * (renamed away, copied and truncated between two polls). Files we consumed
 * before, the ones `skip_a`/`skip_b` (the name's old and new inodes), and
 * copies of the file open at the name (fl->fd) are left alone. */
static bool catch_up(tw_follower *f, followed *fl, uint64_t offset, uint32_t head_len, uint64_t head_hash, ino_t skip_a,
                     ino_t skip_b)
{
    catch_up_ctx c = {.offset = offset, .head_hash = head_hash, .head_len = head_len, .skip_a = skip_a, .skip_b = skip_b};
    each_sibling(f, fl, catch_up_one, &c);
    return c.found_ours;
}

/* The first bytes of a generation are in hand, not pushed yet: whatever was
 * rotated away beside it since the last look goes before them. A catch-up
 * lists the generations before the file at the name is read; a
 * copy-truncate in between moves the bytes we were about to read into a
 * copy, and the file's new bytes would come first, out of order. Returns
 * whether any bytes went into the stream. */
static bool look_beside(tw_follower *f, followed *fl, const char *held, size_t held_len, struct timespec before)
{
    catch_up_ctx c = {
        .skip_a = fl->ino, .skip_b = fl->ino, .held = held, .held_len = held_len, .held_mtime = before};
    each_sibling(f, fl, catch_up_one, &c);
    return c.read_some;
}

static bool consume_one(tw_follower *f, followed *fl, int fd, const struct stat *st, void *ctx)
{
    (void)ctx;
    generation g = generation_of(fd, st);
    mark_consumed(f, fl, &g);
    return true;
}

/* At the start: rotated generations already there are history, not news. */
static void consume_existing_siblings(tw_follower *f, followed *fl)
{
    each_sibling(f, fl, consume_one, NULL);
}

/* ---- descriptors -------------------------------------------------------- */

static void commit_point(followed *fl, saved *s);

static followed *other_with_inode(tw_follower *f, const followed *fl, dev_t dev, ino_t ino)
{
    for (size_t i = 0; i < f->count; i++) {
        followed *o = f->files[i];
        if (o != fl && (o->status == FILE_OPEN || o->status == FILE_IDLE) && o->dev == dev && o->ino == ino)
            return o;
    }
    return NULL;
}

/* Closes the open file idle longest (not `keep`) to make room for another. */
static bool close_idlest(tw_follower *f, const followed *keep)
{
    followed *idlest = NULL;
    for (size_t i = 0; i < f->count; i++) {
        followed *o = f->files[i];
        if (o != keep && o->status == FILE_OPEN && (!idlest || o->last_data < idlest->last_data))
            idlest = o;
    }
    if (!idlest)
        return false;
    read_all(f, idlest);
    saved point;
    commit_point(idlest, &point); /* keeps the hash a save needs while it is closed */
    struct stat st;
    if (fstat(idlest->fd, &st) == 0) {
        idlest->mtime = st.st_mtim;
        idlest->size = (uint64_t)st.st_size;
    }
    close(idlest->fd);
    idlest->fd = -1;
    idlest->status = FILE_IDLE;
    f->open_count--;
    return true;
}

/* Opens fl's name. Returns 0, or an errno value. Non-blocking, so that a
 * FIFO or a device under the name cannot hold the follower up. */
static int open_name(tw_follower *f, followed *fl, struct stat *st)
{
    if (f->open_count >= f->open_budget)
        close_idlest(f, fl);
    int fd = open(fl->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && close_idlest(f, fl))
        fd = open(fl->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno;
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        return e;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return NOT_REGULAR;
    }
    fl->fd = fd;
    f->open_count++;
    return 0;
}

/* Opens fl's name for reading from its start (the caller sets where: see
 * start_at). Says once why a name cannot be followed, and when it can. */
static int open_file(tw_follower *f, followed *fl)
{
    struct stat st;
    int e = open_name(f, fl, &st);
    if (e != 0) {
        if (!fl->said && e == ENOENT)
            say(f, TW_SAY_INFO, "%s: does not exist yet%s", fl->path, ": waiting for it");
        else if (!fl->said && e == NOT_REGULAR)
            say(f, TW_SAY_WARN, "%s: not a regular file%s", fl->path, ": not followed");
        else if (!fl->said)
            say(f, TW_SAY_WARN, "%s: %s: not followed until it can be read", fl->path, strerror(e));
        fl->said = true;
        fl->status = e == NOT_REGULAR ? FILE_REFUSED : FILE_WAITING;
        return -1;
    }
    followed *same = other_with_inode(f, fl, st.st_dev, st.st_ino);
    if (same) {
        close(fl->fd);
        fl->fd = -1;
        f->open_count--;
        if (fl->status != FILE_ALIAS)
            say(f, TW_SAY_INFO, "%s: the same file as %s: read once", fl->path, same->path);
        fl->status = FILE_ALIAS;
        return -1;
    }
    if (fl->said)
        say(f, TW_SAY_INFO, "%s: %s", fl->path, "appeared: following it");
    fl->said = false;
    if (!fl->opened)
        f->stats.files++;
    fl->opened = true;
    fl->status = FILE_OPEN;
    fl->dev = st.st_dev;
    fl->ino = st.st_ino;
    fl->offset = 0;
    fl->head_len = 0;
    fl->head_hash = fnv(NULL, 0);
    fl->head_known = true;
    fl->tail_len = 0;
    fl->mtime = st.st_mtim;
    fl->size = (uint64_t)st.st_size;
    fl->last_data = tw_monotonic_clock();
    return 0;
}

static void close_file(tw_follower *f, followed *fl)
{
    if (fl->fd >= 0) {
        close(fl->fd);
        f->open_count--;
    }
    fl->fd = -1;
    fl->status = FILE_WAITING;
}

/* The generation being left becomes the one before the next: a resume
 * point still inside it is saved as an offset in it (a copy read next
 * replaces it: it holds the same bytes at the same offsets). */
static void leave_generation(followed *fl)
{
    fl->have_prev = true;
    fl->prev = (generation){fl->dev, fl->ino, fl->head_len, fl->head_hash};
    fl->prev_start = fl->gen_start;
    fl->prev_read_from = fl->gen_read_from;
}

/* The bytes before our offset are no longer those we read (rewritten in
 * place, even with the same first bytes). */
static bool tail_changed(const followed *fl)
{
    uint64_t h;
    return fl->tail_len > 0 && fl->offset >= fl->tail_len &&
           (!hash_at(fl->fd, fl->offset - fl->tail_len, fl->tail_len, &h) || h != fnv(fl->tail, fl->tail_len));
}

static bool same_time(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* fl's file is not what we read any more: shorter than our offset, other
 * first bytes, or (changed since we last looked) other bytes before our
 * offset. by_fd: its fstat. */
static bool rewritten(const followed *fl, const struct stat *by_fd)
{
    return (uint64_t)by_fd->st_size < fl->offset || (fl->head_len > 0 && !head_unchanged(fl)) ||
           (!same_time(by_fd->st_mtim, fl->mtime) && tail_changed(fl));
}

/* The name now holds another file (inode `next`): finish the old one, read
 * any generation in between, start the new one. */
static void switch_file(tw_follower *f, followed *fl, ino_t next)
{
    struct stat by_fd;
    /* copied and truncated too before it was renamed, and written to our
     * offset again (a read there finds nothing and tells nothing) */
    if (fl->fd >= 0 && fstat(fl->fd, &by_fd) == 0 && rewritten(fl, &by_fd))
        truncated(f, fl);
    read_all(f, fl);
    close_line(f, fl); /* renamed away: its last line ends with it */
    ino_t old = fl->ino;
    uint64_t offset = fl->offset, head_hash = fl->head_hash;
    uint32_t head_len = fl->head_len;
    leave_generation(fl);
    if (fl->fd >= 0)
        mark_consumed_fd(f, fl, fl->fd);
    close_file(f, fl);
    /* opened first, so that a copy of it is known for one; if the name moved
     * on again since our stat, the file we meant to start (`next`) is a
     * rotated generation now, read whole with the others */
    bool opened = open_file(f, fl) == 0;
    /* copies of the old file hold only what we read; other files are news */
    catch_up(f, fl, offset, head_len, head_hash, old, opened ? fl->ino : next);
    tw_parser_set_line(fl->parser, 0);
    if (opened) {
        f->stats.rotations++;
        start_at(fl, 0);
        read_all(f, fl);
    }
}

/* Our file was truncated (or rewritten) under us: the part we had not read
 * is in a copy, possibly after other copies; then read it again from 0. */
static void truncated(tw_follower *f, followed *fl)
{
    f->stats.truncations++;
    leave_generation(fl);
    /* a partial last line and an open block stay pending: the copy goes on
     * with them, and the truncated file after it (a writer that writes in
     * blocks of bytes leaves the copy inside a line). A listing taken while
     * the writer renames the generations can miss the copy (readdir does not
     * promise entries renamed during it): look again a few times before
     * deciding there is none, or the copy would be taken for news later and
     * read a second time. */
    bool copied = catch_up(f, fl, fl->offset, fl->head_len, fl->head_hash, fl->ino, fl->ino);
    for (int tries = 0; !copied && fl->offset > 0 && fl->head_len > 0 && tries < 3; tries++) {
        struct timespec pause = {0, 2 * 1000 * 1000};
        nanosleep(&pause, NULL);
        copied = catch_up(f, fl, fl->offset, fl->head_len, fl->head_hash, fl->ino, fl->ino);
    }
    if (!copied && fl->offset > 0)
        close_line(f, fl); /* rewritten, not copied: what follows is new */
    tw_parser_set_line(fl->parser, 0);
    fl->head_len = 0;
    fl->head_hash = fnv(NULL, 0);
    fl->head_known = true;
    start_at(fl, 0);
    read_all(f, fl);
}

/* An idle file changed: open it again; under the same device and inode it
 * goes on where it was, else it was rotated meanwhile and the rest of what
 * we were reading is beside it. */
static int reopen_idle(tw_follower *f, followed *fl)
{
    dev_t dev = fl->dev;
    ino_t ino = fl->ino;
    uint64_t offset = fl->offset, head_hash = fl->head_hash;
    uint32_t head_len = fl->head_len;
    struct stat st;
    if (open_name(f, fl, &st) != 0) {
        fl->status = FILE_IDLE;
        return -1;
    }
    f->stats.reopened++;
    fl->status = FILE_OPEN;
    if (st.st_dev == dev && st.st_ino == ino) {
        lseek(fl->fd, (off_t)offset, SEEK_SET);
        return 0;
    }
    close_file(f, fl);
    leave_generation(fl);
    bool opened = open_file(f, fl) == 0; /* first: a copy of it is known for one */
    catch_up(f, fl, offset, head_len, head_hash, opened ? fl->ino : st.st_ino, opened ? fl->ino : st.st_ino);
    tw_parser_set_line(fl->parser, 0);
    if (!opened)
        return -1;
    f->stats.rotations++;
    start_at(fl, 0);
    return 0;
}

static bool is_followed_inode(tw_follower *f, const followed *fl, const struct stat *st)
{
    return other_with_inode(f, fl, st->st_dev, st->st_ino) != NULL;
}

static void check_open_file(tw_follower *f, followed *fl)
{
    /* truncation first: reading on at our offset into rewritten content
     * would take the wrong lines */
    struct stat by_name, by_fd;
    bool have_fd_stat = fstat(fl->fd, &by_fd) == 0;
    bool touched = have_fd_stat && !same_time(by_fd.st_mtim, fl->mtime);
    if (have_fd_stat && rewritten(fl, &by_fd))
        truncated(f, fl);
    else if (have_fd_stat && fl->offset == 0 && by_fd.st_size == 0 && touched) {
        /* written and copy-truncated between two looks, before we read a
         * byte of it: neither size nor head tells, the copy is news */
        catch_up(f, fl, 0, 0, 0, fl->ino, fl->ino);
        start_at(fl, 0); /* after the copy in the stream */
    }
    if (have_fd_stat)
        fl->mtime = by_fd.st_mtim;
    read_all(f, fl);
    if (stat(fl->path, &by_name) != 0)
        return; /* gone for now: the open descriptor still reads its last lines */
    if (by_name.st_ino != fl->ino || by_name.st_dev != fl->dev)
        switch_file(f, fl, by_name.st_ino);
}

static void start_appeared(tw_follower *f, followed *fl);

static void check_file(tw_follower *f, followed *fl)
{
    struct stat st;
    switch (fl->status) {
    case FILE_WAITING:
    case FILE_REFUSED:
        if (open_file(f, fl) == 0) {
            start_appeared(f, fl);
            read_all(f, fl); /* appeared (again) since the last poll */
        }
        return;
    case FILE_ALIAS:
        /* still the same file as another name? (a symlink may be pointed elsewhere) */
        if (stat(fl->path, &st) != 0 || is_followed_inode(f, fl, &st))
            return;
        if (open_file(f, fl) == 0) {
            start_at(fl, 0);
            read_all(f, fl);
        }
        return;
    case FILE_IDLE:
        if (stat(fl->path, &st) == 0 && st.st_dev == fl->dev && st.st_ino == fl->ino &&
            (uint64_t)st.st_size == fl->size && same_time(st.st_mtim, fl->mtime))
            return;
        if (reopen_idle(f, fl) != 0)
            return;
        break;
    case FILE_OPEN:
        break;
    }
    check_open_file(f, fl);
}

/* ---- the followed names ---------------------------------------------- */

static size_t index_slot(const tw_follower *f, const char *path)
{
    size_t mask = f->index_cap - 1, i = (size_t)path_hash(path) & mask;
    while (f->index[i] && strcmp(f->files[f->index[i] - 1]->path, path) != 0)
        i = (i + 1) & mask;
    return i;
}

static followed *find(tw_follower *f, const char *path)
{
    if (!f->index_cap)
        return NULL;
    size_t n = f->index[index_slot(f, path)];
    return n ? f->files[n - 1] : NULL;
}

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
        f->index[index_slot(f, f->files[k]->path)] = k + 1;
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
        found = find(f, copy) != NULL;
        *c = was;
    }
    free(copy);
    return found;
}

static saved *saved_for(tw_follower *f, const followed *fl)
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
    if (st->st_dev != c->g->dev || st->st_ino != c->g->ino || !head_of(fd, c->g->head_len, &h) ||
        h != c->g->head_hash)
        return true;
    if ((uint64_t)st->st_size > c->offset)
        read_range(f, fl, fd, c->g, c->offset);
    generation g = generation_of(fd, st);
    mark_consumed(f, fl, &g);
    return false; /* found: the rest is the catch-up's */
}

/* Resumes a file from its saved position, whatever happened while we were away. */
static void resume(tw_follower *f, followed *fl, saved *s)
{
    s->used = true;
    tw_parser_set_line(fl->parser, s->line);
    if (s->skip_line)
        tw_parser_skip_line(fl->parser);
    if (s->has_from) {
        /* the resume point lies in the generation before: it goes on here */
        find_ctx c = {&s->from, s->from_offset};
        each_sibling(f, fl, read_saved_one, &c);
        tw_parser_set_line(fl->parser, 0); /* the file at the name counts its lines from its start */
    }
    if (fl->dev == s->g.dev && fl->ino == s->g.ino) {
        struct stat st;
        uint64_t h, check;
        bool intact = fstat(fl->fd, &st) == 0 && (uint64_t)st.st_size >= s->offset &&
                      head_of(fl->fd, s->g.head_len, &h) && h == s->g.head_hash &&
                      hash_at(fl->fd, s->offset - s->check_len, s->check_len, &check) && check == s->check_hash;
        if (intact) {
            fl->head_len = s->g.head_len;
            fl->head_hash = s->g.head_hash;
            /* the bytes are not in memory: the head stays as saved */
            fl->head_known =
                s->offset <= s->g.head_len && pread(fl->fd, fl->head, s->g.head_len, 0) == (ssize_t)s->g.head_len;
            /* nothing of it was read: a copy-truncate meanwhile leaves no
             * trace in it, the copies beside it are news */
            if (s->offset == 0 && s->g.head_len == 0)
                catch_up(f, fl, 0, 0, 0, fl->ino, fl->ino);
            start_at(fl, s->offset);
            return;
        }
    }
    /* rotated, truncated or rewritten while we were away: the rest of what
     * we were reading, and any generation since, are beside it */
    fl->have_prev = true;
    fl->prev = s->g;
    fl->prev_start = stream_end(fl) - (int64_t)s->offset;
    fl->prev_read_from = stream_end(fl); /* nothing of it read in this run */
    catch_up(f, fl, s->offset, s->g.head_len, s->g.head_hash, fl->ino, fl->ino);
    /* a line left open goes on in the file at the name: the last generation
     * read may be a copy the writer went on from */
    tw_parser_set_line(fl->parser, 0);
    start_at(fl, 0);
}

/* A name that was not there is: from its start, or from the position saved
 * for it when the previous run saw it last (a restart while the writer was
 * between renaming the file away and creating it again). */
static void start_appeared(tw_follower *f, followed *fl)
{
    saved *s = saved_for(f, fl);
    if (s)
        resume(f, fl, s);
    else
        start_at(fl, 0);
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
    f->index[index_slot(f, fl->path)] = f->count;
    bool opened = open_file(f, fl) == 0;
    saved *s = saved_for(f, fl); /* by name, or by device and inode when opened */
    /* at the start, the rotated generations of a name the state does not
     * know are history, not news (those of a name it knows may hold lines
     * written since it was saved) */
    if (!f->started && !s)
        consume_existing_siblings(f, fl);
    if (!opened)
        return TW_OK; /* not there yet: opened when it appears */
    struct stat st;
    if (s) {
        resume(f, fl, s);
    } else if (!from_start && fstat(fl->fd, &st) == 0) {
        /* from the end: the head is what is there now */
        fl->head_len = st.st_size < HEAD_MAX ? (uint32_t)st.st_size : HEAD_MAX;
        fl->head_known = pread(fl->fd, fl->head, fl->head_len, 0) == (ssize_t)fl->head_len;
        if (!fl->head_known)
            fl->head_len = 0;
        fl->head_hash = fnv(fl->head, fl->head_len);
        start_at(fl, (uint64_t)st.st_size);
    } else {
        start_at(fl, 0);
    }
    return TW_OK; /* the next poll reads it */
}

static bool has_glob(const char *s)
{
    return strpbrk(s, "*?[") != NULL;
}

static void add_or_say(tw_follower *f, const char *path, bool from_start)
{
    int rc = add_file(f, path, from_start);
    if (rc != TW_OK)
        say(f, TW_SAY_WARN, "%s: %s: not followed", path, tw_strerror(rc));
}

static void scan_patterns(tw_follower *f)
{
    /* files already there at the first scan follow --from-start (or the
     * state); files that appear later are new logs, read from their start */
    bool from_start = f->started || f->o.from_start || f->had_state;
    for (size_t i = 0; i < f->o.pattern_count; i++) {
        const char *pattern = f->o.patterns[i];
        if (!has_glob(pattern)) {
            if (!find(f, pattern))
                add_or_say(f, pattern, from_start);
            continue;
        }
        glob_t g;
        if (glob(pattern, 0, NULL, &g) != 0) {
            if (!f->started) /* said once: what is watched, and that it is (tests wait for this) */
                say(f, TW_SAY_INFO, "%s: %s", pattern, "no file matches yet: files that appear are read from their start");
            continue;
        }
        for (size_t k = 0; k < g.gl_pathc; k++) {
            const char *path = g.gl_pathv[k];
            struct stat st;
            if (find(f, path) || is_rotation_of_followed(f, path) || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
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
        consumed *c = mark_consumed(f, &nobody, &g);
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

static int load_state(tw_follower *f, char *err, size_t errlen)
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
static void commit_point(followed *fl, saved *s)
{
    tw_parser_resume r;
    tw_parser_resume_point(fl->parser, &r);
    int64_t at = stream_end(fl) - (int64_t)r.back;
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
    } else if (fl->fd < 0 || !hash_at(fl->fd, s->offset - s->check_len, s->check_len, &s->check_hash)) {
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
        if (has_glob(pattern) ? fnmatch(pattern, path, FNM_PATHNAME | FNM_PERIOD) == 0 : strcmp(pattern, path) == 0)
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
        commit_point(fl, &s);
        write_point(out, &s, fl->path);
    }
    /* a name not there since we started (followed, or a glob's to be)
     * keeps what was saved for it: it goes on from there when it appears */
    for (size_t i = 0; i < f->saved_count; i++) {
        const saved *s = &f->saved[i];
        followed *fl = s->used ? NULL : find(f, s->path);
        if (!s->used && (fl ? !fl->opened : matches_pattern(f, s->path)))
            write_point(out, s, s->path);
    }
}

/* Writes the state file; on failure sets reason (an errno value, or 0: the
 * records output) and leaves no temporary file behind. */
static int write_state(tw_follower *f, int *reason)
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
    int rc = write_state(f, &reason);
    double now = tw_monotonic_clock();
    if (rc != TW_OK) {
        f->stats.state_failures++;
        if (f->save_failures++ == 0)
            say(f, TW_SAY_WARN, "%s: cannot be saved (%s): positions are kept where they were, trying again", f->o.state_file,
                reason ? strerror(reason) : "the records output could not be written");
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
    int reason;
    if (o->state_file && (rc = write_state(f, &reason)) != TW_OK) {
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
        check_file(f, f->files[i]);
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
            check_file(f, fl);
        read_all(f, fl);
        /* the end of this run: blocks still open are delivered (the last
         * step); a partial line too unless a state lets the next run read it */
        if (!f->o.state_file)
            close_line(f, fl);
        tw_parser_end_blocks(fl->parser, count_record, f);
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
