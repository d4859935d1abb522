/*
 * trace.c: tw_trace, the inputs of one `trainwatch trace` run. Each file is
 * opened through zlib when it is gzip (or stdin), read with pread when it
 * is a plain file, its start looked at once: a
 * Paddle summary text is read whole (it is a few KB of tables; at most
 * TW_SUMMARY_MAX bytes), anything else streams through the tokenizer into
 * a rank accumulator, which is finished and freed before the next file, so
 * only the small rank summaries stay. A large plain file's events array is
 * read by several threads (parallel.c), as tw_trace_options.threads says.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../core/grow.h"
#include "filesrc.h"
#include "internal.h"
#include "trainwatch/error.h"
#include "trainwatch/parse.h"

#define HEAD           4096
#define TW_SUMMARY_MAX (16u << 20)
#define PROGRESS_EVERY (16u << 20)
#define CHUNK_DEFAULT  (4u << 20)
#define THREADS_MAX    16
#define PIECES_MEMORY  (40u << 20) /* what the pieces in flight may hold, about */

struct tw_trace {
    tw_trace_options o;
    tw_trace_rank *ranks;
    int n, cap;
    tw_finding_list findings;
};

void tw_trace_options_default(tw_trace_options *o)
{
    *o = (tw_trace_options){.short_kernel_us = 10,
                            .gap_us = 10,
                            .data_share = 0.10,
                            .reader_ratio = 0.30,
                            .straggler = 1.2,
                            .idle_share = 0.30};
}

int tw_trace_new(tw_trace **out, const tw_trace_options *o)
{
    tw_trace *t = calloc(1, sizeof *t);
    if (!t)
        return TW_ENOMEM;
    if (o)
        t->o = *o;
    else
        tw_trace_options_default(&t->o);
    *out = t;
    return TW_OK;
}

void tw_trace_free(tw_trace *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n; i++) {
        free(t->ranks[i].steps);
        free((char *)t->ranks[i].path);
    }
    free(t->ranks);
    free(t->findings.v);
    free(t);
}

static tw_trace_rank *new_rank(tw_trace *t, const char *path)
{
    if (TW_GROW(t->ranks, t->n, t->cap, 8) != TW_OK)
        return NULL;
    tw_trace_rank *r = &t->ranks[t->n];
    memset(r, 0, sizeof *r);
    r->path = strdup(path);
    if (!r->path)
        return NULL;
    r->rank = -1;
    r->peak_allocated = r->peak_reserved = NAN;
    r->reader_ratio = r->dataloader_ratio = r->ips = NAN;
    t->n++;
    return r;
}

/* ---- sources ------------------------------------------------------------ */

typedef struct source {
    gzFile gz; /* or NULL: a plain file (fd >= 0) or memory */
    int fd;
    uint64_t off; /* a plain file's next byte, read with pread */
    bool mapped;  /* or the plain file read through fv */
    tw_file_view fv;
    const char *mem;
    size_t mem_len, mem_pos;
    const char *head; /* bytes already read, handed out first */
    size_t head_len, head_pos;
    uint64_t total, next_report;
    uint64_t *events;
    tw_trace_progress_fn progress;
    void *arg;
    bool gz_error;
} source;

static void source_progress(source *s, uint64_t done)
{
    if (s->progress && done >= s->next_report) {
        s->progress(s->arg, done, s->total, *s->events);
        s->next_report = done + PROGRESS_EVERY;
    }
}

/* A plain file read as it was when its size was taken (as its mapped
 * windows and the threads' pieces read it). */
static long plain_read(source *s, char *buf, size_t cap)
{
    if (s->off >= s->total)
        return 0;
    if (cap > s->total - s->off)
        cap = (size_t)(s->total - s->off);
    long n = tw_file_pread(s->fd, buf, cap, s->off);
    if (n < 0)
        return -1;
    s->off += (uint64_t)n;
    source_progress(s, s->off);
    return n;
}

/* tw_trace_par's seek: a plain file's next byte at off (the head read). */
static void source_seek(void *arg, uint64_t off)
{
    source *s = arg;
    s->head_pos = s->head_len;
    s->off = s->fv.off = off;
}

/* The tokenizer's view of a mapped plain file. */
static long source_view(void *arg, const char **bytes)
{
    source *s = arg;
    long n = tw_file_view_next(&s->fv, bytes);
    source_progress(s, s->fv.off);
    return n;
}

static void par_progress(void *arg, uint64_t done)
{
    source_progress(arg, done);
}

static long source_read(void *arg, char *buf, size_t cap)
{
    source *s = arg;
    if (s->head_pos < s->head_len) {
        size_t n = s->head_len - s->head_pos < cap ? s->head_len - s->head_pos : cap;
        memcpy(buf, s->head + s->head_pos, n);
        s->head_pos += n;
        return (long)n;
    }
    if (!s->gz && s->fd >= 0)
        return plain_read(s, buf, cap);
    if (!s->gz) {
        size_t n = s->mem_len - s->mem_pos < cap ? s->mem_len - s->mem_pos : cap;
        memcpy(buf, s->mem + s->mem_pos, n);
        s->mem_pos += n;
        return (long)n;
    }
    int n = gzread(s->gz, buf, (unsigned)cap);
    if (n < 0) {
        s->gz_error = true;
        return -1;
    }
    if (n == 0) {
        int err;
        gzerror(s->gz, &err);
        /* a gzip stream cut short ends with Z_BUF_ERROR */
        if (err != Z_OK)
            s->gz_error = true;
    }
    source_progress(s, (uint64_t)gzoffset(s->gz));
    return n;
}

static const char *source_name(const tw_trace_rank *r, bool legacy, bool paddle, bool kineto)
{
    (void)r;
    return paddle ? "paddle" : legacy ? "kineto-legacy" : kineto ? "kineto" : "chrome";
}

/* How many threads read a large plain file. */
static int reader_threads(const tw_trace_options *o)
{
    long n = o->threads > 0 ? o->threads : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > THREADS_MAX ? THREADS_MAX : (int)n;
}

/* The bytes of a piece for n threads: each thread maps a piece and n + 2
 * pieces' events wait, each in at most twice a piece's bytes, so 3n + 4
 * pieces' bytes share PIECES_MEMORY; 4 MiB at most, 512 KiB at least. */
static uint64_t piece_bytes(int n)
{
    uint64_t bytes = PIECES_MEMORY / (3 * (uint64_t)n + 4);
    return bytes > CHUNK_DEFAULT ? CHUNK_DEFAULT : bytes < (512u << 10) ? 512u << 10 : bytes;
}

/* Streams the JSON of src into rank r. */
static int read_json(tw_trace *t, tw_trace_rank *r, source *src, int rank)
{
    tw_rank_acc *acc;
    int rc = tw_rank_acc_new(&acc, r, &t->o);
    if (rc != TW_OK)
        return rc;
    tw_jstream js;
    if (tw_jstream_init(&js, source_read, src) != TW_OK) {
        tw_rank_acc_free(acc);
        return TW_ENOMEM;
    }
    if (src->mapped)
        js.view = source_view;
    src->events = &r->events;
    tw_trace_reader_stats st;
    const char *error = NULL;
    tw_trace_par par = {.fd = src->fd,
                        .size = src->total,
                        .threads = reader_threads(&t->o),
                        .chunk = t->o.chunk_bytes ? t->o.chunk_bytes : piece_bytes(reader_threads(&t->o)),
                        .map = src->mapped,
                        .seek = source_seek,
                        .src = src,
                        .progress = par_progress,
                        .progress_arg = src};
    bool shared = !src->gz && src->fd >= 0 && par.threads > 1;
    rc = tw_trace_read_par(&js, shared ? &par : NULL, tw_rank_acc_event, acc, &st, &error);
    r->bytes = tw_jstream_offset(&js);
    r->names_cut = js.strings_cut;
    r->skipped += st.unpaired;
    r->source = source_name(r, st.legacy, st.paddle, st.kineto);
    if (rc == TW_EFORMAT) {
        char *m = r->error;
        if (src->gz_error)
            snprintf(m, sizeof r->error, "corrupt or truncated gzip data after %llu bytes",
                     (unsigned long long)r->bytes);
        else
            snprintf(m, sizeof r->error, "%s at byte %llu", error, (unsigned long long)r->bytes);
    }
    int frc = tw_rank_acc_finish(acc);
    tw_rank_acc_free(acc);
    tw_jstream_free(&js);
    if (frc != TW_OK)
        return frc;
    r->rank = rank >= 0 ? rank : st.rank >= 0 ? st.rank : tw_rank_from_path(r->path);
    if (r->rank < 0)
        r->rank = t->n - 1;
    if (rc == TW_EFORMAT && r->events == 0)
        return TW_EFORMAT;
    return rc == TW_EFORMAT ? TW_OK : rc;
}

static int read_summary(tw_trace_rank *r, source *src, int rank, int order)
{
    char *text = malloc(TW_SUMMARY_MAX);
    if (!text)
        return TW_ENOMEM;
    size_t len = 0;
    long n;
    while (len < TW_SUMMARY_MAX && (n = source_read(src, text + len, TW_SUMMARY_MAX - len)) > 0)
        len += (size_t)n;
    r->bytes = len;
    r->source = "paddle-summary";
    bool ok = tw_trace_summary_read(r, text, len);
    free(text);
    r->rank = rank >= 0 ? rank : tw_rank_from_path(r->path);
    if (r->rank < 0)
        r->rank = order;
    if (!ok) {
        snprintf(r->error, sizeof r->error, "%s", "no Perf Summary, Model Summary or Overview Summary found");
        return TW_EFORMAT;
    }
    return TW_OK;
}

static int read_source(tw_trace *t, tw_trace_rank *r, source *src, int rank)
{
    char head[HEAD];
    long n;
    if (src->mapped) { /* looked at where it lies: the view starts at 0 */
        ssize_t got = pread(src->fd, head, sizeof head, 0);
        n = got < 0 ? 0 : got;
    } else {
        n = source_read(src, head, sizeof head);
        if (n < 0) {
            snprintf(r->error, sizeof r->error, "%s", "corrupt gzip data");
            return TW_EGZIP;
        }
        src->head = head;
        src->head_len = (size_t)n;
        src->head_pos = 0;
    }
    if (tw_trace_summary_detect(head, (size_t)n))
        return read_summary(r, src, rank, t->n - 1);
    return read_json(t, r, src, rank);
}

/* Whether the file at fd starts as gzip does (1f 8b). */
static bool gzip_file(int fd)
{
    unsigned char magic[2];
    return pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

int tw_trace_add_file(tw_trace *t, const char *path, int rank, tw_trace_progress_fn progress, void *arg)
{
    tw_trace_rank *r = new_rank(t, path);
    if (!r)
        return TW_ENOMEM;
    bool is_stdin = strcmp(path, "-") == 0;
    struct stat sb;
    if (!is_stdin) {
        if (stat(path, &sb) != 0) {
            snprintf(r->error, sizeof r->error, "%s", tw_strerror(tw_status_from_errno(errno)));
            return tw_status_from_errno(errno);
        }
        if (S_ISDIR(sb.st_mode)) {
            snprintf(r->error, sizeof r->error, "%s", tw_strerror(TW_EISDIR));
            return TW_EISDIR;
        }
    }
    int fd = is_stdin ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int rc = tw_status_from_errno(errno);
        snprintf(r->error, sizeof r->error, "%s", tw_strerror(rc));
        return rc;
    }
    source src = {.fd = -1, .progress = progress, .arg = arg, .total = is_stdin ? 0 : (uint64_t)sb.st_size};
    if (!is_stdin && S_ISREG(sb.st_mode) && sb.st_size > 0 && !gzip_file(fd)) {
        src.fd = fd;
        src.mapped = t->o.map_files;
        src.fv = tw_file_view_of(fd, (uint64_t)sb.st_size);
    } else if (!(src.gz = gzdopen(fd, "rb"))) {
        close(fd);
        snprintf(r->error, sizeof r->error, "%s", tw_strerror(TW_ENOMEM));
        return TW_ENOMEM;
    } else {
        gzbuffer(src.gz, 1u << 18);
    }
    src.next_report = PROGRESS_EVERY;
    uint64_t none = 0;
    src.events = &none;
    int rc = read_source(t, r, &src, rank);
    tw_file_view_close(&src.fv);
    if (src.gz)
        gzclose(src.gz);
    else
        close(fd);
    if (rc == TW_OK && src.gz_error && !r->error[0])
        snprintf(r->error, sizeof r->error, "%s", "corrupt or truncated gzip data");
    return rc;
}

int tw_trace_add_buffer(tw_trace *t, const char *path, const char *data, size_t len, int rank)
{
    tw_trace_rank *r = new_rank(t, path);
    if (!r)
        return TW_ENOMEM;
    uint64_t none = 0;
    source src = {.fd = -1, .mem = data, .mem_len = len, .events = &none};
    return read_source(t, r, &src, rank);
}

int tw_trace_finish(tw_trace *t)
{
    return tw_trace_rules(t->ranks, t->n, &t->o, &t->findings);
}

int tw_trace_rank_count(const tw_trace *t)
{
    return t->n;
}

const tw_trace_rank *tw_trace_rank_at(const tw_trace *t, int i)
{
    return i >= 0 && i < t->n ? &t->ranks[i] : NULL;
}

int tw_trace_finding_count(const tw_trace *t)
{
    return t->findings.n;
}

const tw_finding *tw_trace_finding_at(const tw_trace *t, int i)
{
    return i >= 0 && i < t->findings.n ? &t->findings.v[i] : NULL;
}

bool tw_trace_healthy(const tw_trace *t)
{
    for (int i = 0; i < t->findings.n; i++) {
        if (t->findings.v[i].severity >= TW_SEV_WARNING)
            return false;
    }
    return true;
}

const char *tw_copy_dir_name(tw_copy_dir d)
{
    static const char *const names[] = {"HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "other", "memset"};
    return d < TW_COPY_COUNT ? names[d] : "?";
}
