/*
 * follower.h: what the files of the follower share (see follow.c).
 *
 * The follower's state (tw_follower), one followed name (followed), a file
 * generation (generation), a fully read one (consumed) and a saved position
 * (saved), and the functions one file of src/follow/ calls in another:
 *   follow.c       the followed names (globs, inotify) and the lifecycle
 *   rotation.c     a name's descriptor: reading it to its end, rename,
 *                  copy-truncate, idle reopen
 *   reader.c       bytes into the parser, holding head and tail
 *   identity.c     which file a descriptor holds, what was read already
 *   generations.c  listing the rotated generations beside a name
 *   catchup.c      reading what was rotated away, in order
 *   state.c        the state file: loading, resuming, saving
 * Internal to src/follow/; the API is include/trainwatch/follow.h.
 */
#ifndef TW_FOLLOW_FOLLOWER_H
#define TW_FOLLOW_FOLLOWER_H

#include "trainwatch/follow.h"
#include "../core/say.h"
#include "trainwatch/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#define HEAD_MAX         256
#define CHECK_MAX        256 /* bytes before a saved offset whose hash is saved too */
#define READ_SIZE        (256 * 1024)

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

static inline uint64_t fnv_more(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static inline uint64_t fnv(const unsigned char *p, size_t n)
{
    return fnv_more(1469598103934665603ull, p, n);
}

static inline uint64_t path_hash(const char *path)
{
    return fnv((const unsigned char *)path, strlen(path));
}

/* Given each generation beside fl in turn; returns false to stop there. */
typedef bool (*sibling_fn)(tw_follower *f, followed *fl, int fd, const struct stat *st, void *ctx);

/* identity.c */
bool tw_follow_hash_at(int fd, uint64_t from, uint32_t len, uint64_t *hash);
bool tw_follow_head_of(int fd, uint32_t len, uint64_t *hash);
bool tw_follow_head_unchanged(const followed *fl);
generation tw_follow_generation_of(int fd, const struct stat *st);
consumed *tw_follow_mark_consumed(tw_follower *f, const followed *fl, const generation *g);
void tw_follow_mark_consumed_fd(tw_follower *f, const followed *fl, int fd);
bool tw_follow_is_consumed(const tw_follower *f, const struct stat *st, int fd);
followed *tw_follow_other_with_inode(tw_follower *f, const followed *fl, dev_t dev, ino_t ino);
bool tw_follow_same_time(struct timespec a, struct timespec b);
bool tw_follow_rewritten(const followed *fl, const struct stat *by_fd);

/* reader.c */
void tw_follow_say(tw_follower *f, tw_say_level level, const char *fmt, const char *path, const char *detail);
void tw_follow_count_record(void *arg, const tw_record *r);
int64_t tw_follow_stream_end(const followed *fl);
void tw_follow_close_line(tw_follower *f, followed *fl);
void tw_follow_start_at(followed *fl, uint64_t offset);
void tw_follow_place_in_stream(followed *fl, uint64_t offset);
void tw_follow_take(tw_follower *f, followed *fl, const char *data, size_t n);
uint64_t tw_follow_read_range(tw_follower *f, followed *fl, int fd, const generation *g, uint64_t from);

/* generations.c */
void tw_follow_each_sibling(tw_follower *f, followed *fl, sibling_fn fn, void *ctx);

/* catchup.c */
bool tw_follow_catch_up(tw_follower *f, followed *fl, uint64_t offset, uint32_t head_len, uint64_t head_hash,
                        ino_t skip_a, ino_t skip_b);
bool tw_follow_look_beside(tw_follower *f, followed *fl, const char *held, size_t held_len, struct timespec before);
void tw_follow_consume_existing_siblings(tw_follower *f, followed *fl);

/* rotation.c */
int tw_follow_open_file(tw_follower *f, followed *fl);
void tw_follow_truncated(tw_follower *f, followed *fl);
void tw_follow_read_all(tw_follower *f, followed *fl);
void tw_follow_check_file(tw_follower *f, followed *fl);

/* state.c */
saved *tw_follow_saved_for(tw_follower *f, const followed *fl);
void tw_follow_resume(tw_follower *f, followed *fl, saved *s);
void tw_follow_start_appeared(tw_follower *f, followed *fl);
int tw_follow_load_state(tw_follower *f, char *err, size_t errlen);
void tw_follow_commit_point(followed *fl, saved *s);
int tw_follow_write_state(tw_follower *f, int *reason);

/* The index of the followed names by path (open addressing, filled by
 * follow.c): the slot of path, where it is or where it would go. */
static inline size_t tw_follow_index_slot(const tw_follower *f, const char *path)
{
    size_t mask = f->index_cap - 1, i = (size_t)path_hash(path) & mask;
    while (f->index[i] && strcmp(f->files[f->index[i] - 1]->path, path) != 0)
        i = (i + 1) & mask;
    return i;
}

/* The followed file of that name, or NULL. */
static inline followed *tw_follow_find(tw_follower *f, const char *path)
{
    if (!f->index_cap)
        return NULL;
    size_t n = f->index[tw_follow_index_slot(f, path)];
    return n ? f->files[n - 1] : NULL;
}

static inline bool tw_follow_has_glob(const char *s)
{
    return strpbrk(s, "*?[") != NULL;
}

#endif
