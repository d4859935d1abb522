/*
 * generations.c: listing a followed file's rotated generations beside it.
 *
 * The generations are the names that extend the followed name after '.', '-'
 * or '_' (train.log.1, train.log-20240309), oldest first. each_sibling()
 * opens them in that order and hands each to a callback, listing the
 * directory again while a writer renames them under us, so that no
 * generation is handed over out of order. The trade-off: two readdirs per
 * rotation, but no help needed from the writer. Part of the follower
 * (follow.c); shared state in follower.h.
 */
#include "follower.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CONSUMED_MISSES 3  /* listings a read generation may be absent from before it is forgotten */
#define LISTINGS_MAX    16 /* listings of the generations per catch-up while a writer renames them */

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
    return !tw_follow_find(f, path);
}

/* `prefix`: the followed path up to its last '/', with it (the names built
 * are then spelled as globs spell them, for tw_follow_find()). */
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

/* The files one tw_follow_each_sibling() call has handed over, by inode: a listing
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
void tw_follow_each_sibling(tw_follower *f, followed *fl, sibling_fn fn, void *ctx)
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
