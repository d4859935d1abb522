/*
 * catchup.c: catch-up ordering, what happened beside a name since we looked.
 *
 * After a rotation or a truncation, and before the first bytes of a new
 * generation are pushed, the generations beside the name are read oldest
 * first: the copy of what we were reading (from our offset), whole
 * generations we never saw, and not a copy of the file now at the name
 * (read there). The files it reads are marked consumed (identity.c).
 * Part of the follower (follow.c); shared state in follower.h.
 */
#include "follower.h"

#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
    bool ours = c->head_len > 0 && tw_follow_head_of(fd, c->head_len, &h) && h == c->head_hash;
    if (st->st_ino != c->skip_a && st->st_ino != c->skip_b)
        c->found_ours |= ours;
    /* an empty file is left for later: it may be a copy about to be written */
    if (st->st_size == 0 || st->st_ino == c->skip_a || st->st_ino == c->skip_b || tw_follow_is_consumed(f, st, fd))
        return true;
    if (!ours && copy_of_current(f, fl, c, fd, st))
        return true; /* found again, as ours, when the file at the name is truncated */
    generation g = tw_follow_generation_of(fd, st);
    uint64_t from = ours ? c->offset : 0;
    /* a copy ends where the writer was when it was taken, possibly inside
     * a line: the next generation goes on with it, so it stays pending */
    if ((uint64_t)st->st_size > from)
        c->read_some |= tw_follow_read_range(f, fl, fd, &g, from) > 0;
    else if (ours && (uint64_t)st->st_size == from && fl->have_prev && fl->prev.head_len == c->head_len &&
             fl->prev.head_hash == c->head_hash)
        /* nothing in it we had not read, but it holds the bytes of the
         * generation left (truncated under its inode) at the same offsets:
         * a resume point among them is found in it after a restart, as it
         * would be after read_range */
        fl->prev = g;
    tw_follow_mark_consumed(f, fl, &g);
    return true;
}

/* Everything that happened beside a followed name since we last looked,
 * oldest first: the copy of content we had read part of (it starts like
 * `head` did: read it from `offset`), and whole generations we never saw
 * (renamed away, copied and truncated between two polls). Files we consumed
 * before, the ones `skip_a`/`skip_b` (the name's old and new inodes), and
 * copies of the file open at the name (fl->fd) are left alone. */
bool tw_follow_catch_up(tw_follower *f, followed *fl, uint64_t offset, uint32_t head_len, uint64_t head_hash,
                        ino_t skip_a, ino_t skip_b)
{
    catch_up_ctx c = {.offset = offset, .head_hash = head_hash, .head_len = head_len, .skip_a = skip_a, .skip_b = skip_b};
    tw_follow_each_sibling(f, fl, catch_up_one, &c);
    return c.found_ours;
}

/* The first bytes of a generation are in hand, not pushed yet: whatever was
 * rotated away beside it since the last look goes before them. A catch-up
 * lists the generations before the file at the name is read; a
 * copy-truncate in between moves the bytes we were about to read into a
 * copy, and the file's new bytes would come first, out of order. Returns
 * whether any bytes went into the stream. */
bool tw_follow_look_beside(tw_follower *f, followed *fl, const char *held, size_t held_len, struct timespec before)
{
    catch_up_ctx c = {
        .skip_a = fl->ino, .skip_b = fl->ino, .held = held, .held_len = held_len, .held_mtime = before};
    tw_follow_each_sibling(f, fl, catch_up_one, &c);
    return c.read_some;
}

static bool consume_one(tw_follower *f, followed *fl, int fd, const struct stat *st, void *ctx)
{
    (void)ctx;
    generation g = tw_follow_generation_of(fd, st);
    tw_follow_mark_consumed(f, fl, &g);
    return true;
}

/* At the start: rotated generations already there are history, not news. */
void tw_follow_consume_existing_siblings(tw_follower *f, followed *fl)
{
    tw_follow_each_sibling(f, fl, consume_one, NULL);
}
