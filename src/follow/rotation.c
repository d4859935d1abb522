/*
 * rotation.c: one followed name's descriptor through rotation.
 *
 * Opening a name within the descriptor budget (closing the idlest file when
 * it is spent), saying once why a name cannot be followed, and each poll's
 * look at a name: another inode under it is a rotation by rename
 * (switch_file), a file that no longer holds what we read is a copy-truncate
 * or a rewrite (truncated), an idle file that changed is opened again.
 * Part of the follower (follow.c); shared state in follower.h.
 */
#include "follower.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../core/clock.h"

#define NOT_REGULAR (-1) /* open_name(): a FIFO, a device, a directory */

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
    tw_follow_read_all(f, idlest);
    saved point;
    tw_follow_commit_point(idlest, &point); /* keeps the hash a save needs while it is closed */
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
int tw_follow_open_file(tw_follower *f, followed *fl)
{
    struct stat st;
    int e = open_name(f, fl, &st);
    if (e != 0) {
        if (!fl->said && e == ENOENT)
            tw_follow_say(f, TW_SAY_INFO, "%s: does not exist yet%s", fl->path, ": waiting for it");
        else if (!fl->said && e == NOT_REGULAR)
            tw_follow_say(f, TW_SAY_WARN, "%s: not a regular file%s", fl->path, ": not followed");
        else if (!fl->said)
            tw_follow_say(f, TW_SAY_WARN, "%s: %s: not followed until it can be read", fl->path, strerror(e));
        fl->said = true;
        fl->status = e == NOT_REGULAR ? FILE_REFUSED : FILE_WAITING;
        return -1;
    }
    followed *same = tw_follow_other_with_inode(f, fl, st.st_dev, st.st_ino);
    if (same) {
        close(fl->fd);
        fl->fd = -1;
        f->open_count--;
        if (fl->status != FILE_ALIAS)
            tw_follow_say(f, TW_SAY_INFO, "%s: the same file as %s: read once", fl->path, same->path);
        fl->status = FILE_ALIAS;
        return -1;
    }
    if (fl->said)
        tw_follow_say(f, TW_SAY_INFO, "%s: %s", fl->path, "appeared: following it");
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

/* The name now holds another file (inode `next`): finish the old one, read
 * any generation in between, start the new one. */
static void switch_file(tw_follower *f, followed *fl, ino_t next)
{
    struct stat by_fd;
    /* copied and truncated too before it was renamed, and written to our
     * offset again (a read there finds nothing and tells nothing) */
    if (fl->fd >= 0 && fstat(fl->fd, &by_fd) == 0 && tw_follow_rewritten(fl, &by_fd))
        tw_follow_truncated(f, fl);
    tw_follow_read_all(f, fl);
    tw_follow_close_line(f, fl); /* renamed away: its last line ends with it */
    ino_t old = fl->ino;
    uint64_t offset = fl->offset, head_hash = fl->head_hash;
    uint32_t head_len = fl->head_len;
    leave_generation(fl);
    if (fl->fd >= 0)
        tw_follow_mark_consumed_fd(f, fl, fl->fd);
    close_file(f, fl);
    /* opened first, so that a copy of it is known for one; if the name moved
     * on again since our stat, the file we meant to start (`next`) is a
     * rotated generation now, read whole with the others */
    bool opened = tw_follow_open_file(f, fl) == 0;
    /* copies of the old file hold only what we read; other files are news */
    tw_follow_catch_up(f, fl, offset, head_len, head_hash, old, opened ? fl->ino : next);
    tw_parser_set_line(fl->parser, 0);
    if (opened) {
        f->stats.rotations++;
        tw_follow_start_at(fl, 0);
        tw_follow_read_all(f, fl);
    }
}

/* Our file was truncated (or rewritten) under us: the part we had not read
 * is in a copy, possibly after other copies; then read it again from 0. */
void tw_follow_truncated(tw_follower *f, followed *fl)
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
    bool copied = tw_follow_catch_up(f, fl, fl->offset, fl->head_len, fl->head_hash, fl->ino, fl->ino);
    for (int tries = 0; !copied && fl->offset > 0 && fl->head_len > 0 && tries < 3; tries++) {
        struct timespec pause = {0, 2 * 1000 * 1000};
        nanosleep(&pause, NULL);
        copied = tw_follow_catch_up(f, fl, fl->offset, fl->head_len, fl->head_hash, fl->ino, fl->ino);
    }
    if (!copied && fl->offset > 0)
        tw_follow_close_line(f, fl); /* rewritten, not copied: what follows is new */
    tw_parser_set_line(fl->parser, 0);
    fl->head_len = 0;
    fl->head_hash = fnv(NULL, 0);
    fl->head_known = true;
    tw_follow_start_at(fl, 0);
    tw_follow_read_all(f, fl);
}

/* Reads fl's descriptor to its end. A copy-truncate caught between two
 * reads goes to tw_follow_truncated; the first bytes of a fresh generation
 * wait for one more look beside it (catchup.c), so a copy made meanwhile
 * goes first. */
void tw_follow_read_all(tw_follower *f, followed *fl)
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
        if (fl->head_len > 0 && !tw_follow_head_unchanged(fl)) {
            tw_follow_truncated(f, fl);
            return;
        }
        if (fl->fresh) {
            fl->fresh = false;
            if (tw_follow_look_beside(f, fl, f->buf, (size_t)n, before.st_mtim)) {
                tw_parser_set_line(fl->parser, 0);
                tw_follow_place_in_stream(fl, 0);
            }
        }
        tw_follow_take(f, fl, f->buf, (size_t)n);
    }
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
    bool opened = tw_follow_open_file(f, fl) == 0; /* first: a copy of it is known for one */
    tw_follow_catch_up(f, fl, offset, head_len, head_hash, opened ? fl->ino : st.st_ino, opened ? fl->ino : st.st_ino);
    tw_parser_set_line(fl->parser, 0);
    if (!opened)
        return -1;
    f->stats.rotations++;
    tw_follow_start_at(fl, 0);
    return 0;
}

static bool is_followed_inode(tw_follower *f, const followed *fl, const struct stat *st)
{
    return tw_follow_other_with_inode(f, fl, st->st_dev, st->st_ino) != NULL;
}

static void check_open_file(tw_follower *f, followed *fl)
{
    /* truncation first: reading on at our offset into rewritten content
     * would take the wrong lines */
    struct stat by_name, by_fd;
    bool have_fd_stat = fstat(fl->fd, &by_fd) == 0;
    bool touched = have_fd_stat && !tw_follow_same_time(by_fd.st_mtim, fl->mtime);
    if (have_fd_stat && tw_follow_rewritten(fl, &by_fd))
        tw_follow_truncated(f, fl);
    else if (have_fd_stat && fl->offset == 0 && by_fd.st_size == 0 && touched) {
        /* written and copy-truncated between two looks, before we read a
         * byte of it: neither size nor head tells, the copy is news */
        tw_follow_catch_up(f, fl, 0, 0, 0, fl->ino, fl->ino);
        tw_follow_start_at(fl, 0); /* after the copy in the stream */
    }
    if (have_fd_stat)
        fl->mtime = by_fd.st_mtim;
    tw_follow_read_all(f, fl);
    if (stat(fl->path, &by_name) != 0)
        return; /* gone for now: the open descriptor still reads its last lines */
    if (by_name.st_ino != fl->ino || by_name.st_dev != fl->dev)
        switch_file(f, fl, by_name.st_ino);
}

void tw_follow_check_file(tw_follower *f, followed *fl)
{
    struct stat st;
    switch (fl->status) {
    case FILE_WAITING:
    case FILE_REFUSED:
        if (tw_follow_open_file(f, fl) == 0) {
            tw_follow_start_appeared(f, fl);
            tw_follow_read_all(f, fl); /* appeared (again) since the last poll */
        }
        return;
    case FILE_ALIAS:
        /* still the same file as another name? (a symlink may be pointed elsewhere) */
        if (stat(fl->path, &st) != 0 || is_followed_inode(f, fl, &st))
            return;
        if (tw_follow_open_file(f, fl) == 0) {
            tw_follow_start_at(fl, 0);
            tw_follow_read_all(f, fl);
        }
        return;
    case FILE_IDLE:
        if (stat(fl->path, &st) == 0 && st.st_dev == fl->dev && st.st_ino == fl->ino &&
            (uint64_t)st.st_size == fl->size && tw_follow_same_time(st.st_mtim, fl->mtime))
            return;
        if (reopen_idle(f, fl) != 0)
            return;
        break;
    case FILE_OPEN:
        break;
    }
    check_open_file(f, fl);
}
