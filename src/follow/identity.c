/*
 * identity.c: which file a descriptor holds, and whether we read it already.
 *
 * A generation is named by device, inode and a hash of its first bytes, so a
 * reused inode is not taken for the file we read; the generations fully read
 * (old ones, copies) are remembered per followed name ("consumed") so that a
 * listing of the directory hands each of them over once. The checks here also
 * tell a file rewritten or truncated under our offset from one that grew.
 * Part of the follower (follow.c); shared state in follower.h.
 */
#include "follower.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CONSUMED_LIMIT (1u << 20) /* a last bound, far above any directory's generations */

/* Hash of the len bytes of fd at from; false if the file is shorter. */
bool tw_follow_hash_at(int fd, uint64_t from, uint32_t len, uint64_t *hash)
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

bool tw_follow_head_of(int fd, uint32_t len, uint64_t *hash)
{
    return tw_follow_hash_at(fd, 0, len, hash);
}

/* The file still begins with the bytes we read first. */
bool tw_follow_head_unchanged(const followed *fl)
{
    uint64_t h;
    return tw_follow_head_of(fl->fd, fl->head_len, &h) && h == fl->head_hash;
}

/* ---- generations already read ----------------------------------------- */

generation tw_follow_generation_of(int fd, const struct stat *st)
{
    generation g = {st->st_dev, st->st_ino, 0, 0};
    g.head_len = st->st_size < HEAD_MAX ? (uint32_t)st->st_size : HEAD_MAX;
    if (!tw_follow_head_of(fd, g.head_len, &g.head_hash))
        g.head_len = 0, g.head_hash = fnv(NULL, 0);
    return g;
}

/* Remembers g as read for fl (not an empty file: an empty file is anything
 * it becomes, a copy about to be written, tw_follow_say). Returns the entry, or NULL. */
consumed *tw_follow_mark_consumed(tw_follower *f, const followed *fl, const generation *g)
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

void tw_follow_mark_consumed_fd(tw_follower *f, const followed *fl, int fd)
{
    struct stat st;
    if (fstat(fd, &st) == 0) {
        generation g = tw_follow_generation_of(fd, &st);
        tw_follow_mark_consumed(f, fl, &g);
    }
}

bool tw_follow_is_consumed(const tw_follower *f, const struct stat *st, int fd)
{
    for (size_t i = 0; i < f->done_count; i++) {
        const consumed *c = &f->done[i];
        uint64_t h;
        if (c->g.dev == st->st_dev && c->g.ino == st->st_ino && tw_follow_head_of(fd, c->g.head_len, &h) &&
            h == c->g.head_hash)
            return true;
    }
    return false;
}

followed *tw_follow_other_with_inode(tw_follower *f, const followed *fl, dev_t dev, ino_t ino)
{
    for (size_t i = 0; i < f->count; i++) {
        followed *o = f->files[i];
        if (o != fl && (o->status == FILE_OPEN || o->status == FILE_IDLE) && o->dev == dev && o->ino == ino)
            return o;
    }
    return NULL;
}

/* The bytes before our offset are no longer those we read (rewritten in
 * place, even with the same first bytes). */
static bool tail_changed(const followed *fl)
{
    uint64_t h;
    return fl->tail_len > 0 && fl->offset >= fl->tail_len &&
           (!tw_follow_hash_at(fl->fd, fl->offset - fl->tail_len, fl->tail_len, &h) ||
            h != fnv(fl->tail, fl->tail_len));
}

bool tw_follow_same_time(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* fl's file is not what we read any more: shorter than our offset, other
 * first bytes, or (changed since we last looked) other bytes before our
 * offset. by_fd: its fstat. */
bool tw_follow_rewritten(const followed *fl, const struct stat *by_fd)
{
    return (uint64_t)by_fd->st_size < fl->offset || (fl->head_len > 0 && !tw_follow_head_unchanged(fl)) ||
           (!tw_follow_same_time(by_fd->st_mtim, fl->mtime) && tail_changed(fl));
}
