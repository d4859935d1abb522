/*
 * read.c: the inputs of an analysis into a run (tw_analyze_read, see
 * trainwatch/analyze.h): each training log through a parser (its rank from
 * inputs.c, with --explain's account and the progress line), each GPU
 * telemetry log through the GPU log reader. What goes wrong with an input is
 * said in one line naming it and noted in the run as an input not read; the
 * others are read all the same.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../parse/gpu_log.h"
#include "../parse/user_formats.h"
#include "analyze_internal.h"
#include "explain.h"
#include "progress.h"
#include "trainwatch/error.h"

/* A plain file whose last byte is not a newline (not stdin, not gzip). */
static bool ends_without_newline(const char *path)
{
    size_t n = strlen(path);
    if (strcmp(path, "-") == 0 || (n > 3 && strcmp(path + n - 3, ".gz") == 0))
        return false;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    struct stat sb;
    char last = '\n';
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 && pread(fd, &last, 1, sb.st_size - 1) != 1)
        last = '\n';
    close(fd);
    return last != '\n' && last != '\r';
}

typedef struct explained {
    tw_explain *explain;
    tw_record_fn fn;
    void *arg;
} explained;

static void explain_record(void *arg, const tw_record *r)
{
    explained *x = arg;
    if (r->kind != TW_REC_LINE)
        tw_explain_record(x->explain, r);
    x->fn(x->arg, r);
}

/* The progress line's view of the inputs: bytes and files finished. */
typedef struct progress_state {
    tw_progress *line; /* NULL: no line */
    uint64_t bytes;
    int files;
} progress_state;

uint64_t tw_analyze_input_size(const char *path)
{
    struct stat st;
    return strcmp(path, "-") != 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
}

/* Parses one input into the run (or into o->records). Returns 0, or -1
 * when the input could not be read at all. */
static int read_log(const char *path, int rank, const tw_analyze_input_options *o, tw_run *run, progress_state *ps)
{
    tw_parser *p;
    int rc = tw_parser_open(&p, path, o->format, rank);
    if (rc == TW_OK)
        tw_progress_reading(ps->line, p, ps->bytes, ps->files);
    if (rc != TW_OK) {
        fprintf(stderr, "trainwatch: %s: %s\n", path, tw_strerror(rc));
        tw_run_note_input(run, path, NULL, 0, 0, tw_strerror(rc));
        return -1;
    }
    tw_parser_set_jobs(p, o->jobs, o->block_size);
    tw_parser_set_user_formats(p, o->user);
    tw_parser_set_unparsed(p, !o->records); /* the template miner's input */
    explained x = {o->explain ? tw_explain_new() : NULL, o->records ? o->records : tw_run_add,
                   o->records ? o->records_arg : (void *)run};
    rc = x.explain ? tw_parser_run(p, explain_record, &x) : tw_parser_run(p, x.fn, x.arg);
    const tw_parse_stats *st = tw_parser_stats(p);
    if (x.explain)
        tw_explain_write(stderr, x.explain, tw_parser_path(p), st->format);
    tw_explain_free(x.explain);
    uint64_t records = st->steps + st->evals + st->events;
    int result = 0;
    if (rc != TW_OK) {
        if (st->lines > 0)
            fprintf(stderr, "trainwatch: %s: %s (after %llu lines)\n", tw_parser_path(p), tw_strerror(rc),
                    (unsigned long long)st->lines);
        else
            fprintf(stderr, "trainwatch: %s: %s\n", tw_parser_path(p), tw_strerror(rc));
        result = -1;
    } else if (records == 0) {
        fprintf(stderr, "trainwatch: %s: no training records recognised in %llu lines%s\n", tw_parser_path(p),
                (unsigned long long)st->lines, o->format ? "" : " (try --format; see trainwatch formats)");
    }
    if (st->lines_cut)
        fprintf(stderr, "trainwatch: %s: %llu lines longer than %u bytes were cut\n", tw_parser_path(p),
                (unsigned long long)st->lines_cut, TW_LINE_MAX);
    if (st->binary_lines)
        fprintf(stderr, "trainwatch: %s: skipped %llu lines with NUL bytes\n", tw_parser_path(p),
                (unsigned long long)st->binary_lines);
    tw_run_note_input(run, tw_parser_path(p), st->format, st->lines, records, rc == TW_OK ? NULL : tw_strerror(rc));
    if (rc == TW_OK && !o->records && ends_without_newline(path))
        tw_run_note_cut(run);
    tw_progress_reading(ps->line, NULL, ps->bytes += tw_analyze_input_size(path), ++ps->files);
    tw_parser_close(p);
    return result;
}

typedef struct gpu_input {
    tw_run *run;
    const char *path;
    int rc;
} gpu_input;

static void add_gpu_sample(void *arg, const tw_gpu_sample *s)
{
    gpu_input *in = arg;
    if (in->rc == TW_OK)
        in->rc = tw_run_add_gpu(in->run, in->path, s);
}

/* Reads a GPU log into the run. Returns 0, or -1 when it could not be read. */
static int read_gpu_log(const char *path, const tw_analyze_input_options *o, tw_run *run, bool alone)
{
    gpu_input in = {.run = run, .path = path};
    uint64_t lines = 0, samples = 0;
    int rc = o->records ? TW_OK : tw_gpu_log_read(path, o->gpu_columns, add_gpu_sample, &in, &lines, &samples);
    if (rc == TW_OK)
        rc = in.rc;
    if (rc != TW_OK)
        fprintf(stderr, "trainwatch: %s: %s\n", path, tw_strerror(rc));
    else if (!o->records && samples == 0)
        fprintf(stderr, "trainwatch: %s: a GPU log with no samples in %llu lines\n", path, (unsigned long long)lines);
    else if (alone)
        fprintf(stderr,
                "trainwatch: %s: GPU telemetry (%llu samples), no training records recognised: give the training "
                "logs beside it\n",
                path, (unsigned long long)samples);
    tw_run_note_input(run, path, "gpu-telemetry", lines, samples, rc == TW_OK ? NULL : tw_strerror(rc));
    return rc == TW_OK ? 0 : -1;
}

int tw_analyze_read(tw_run *run, char *const *paths, int count, const tw_analyze_input_options *o,
                    tw_analyze_tally *out)
{
    *out = (tw_analyze_tally){.inputs = count};
    tw_input_kind *kind = calloc((size_t)count + 1, sizeof *kind);
    int *ranks = malloc(sizeof *ranks * ((size_t)count + 1));
    uint64_t total = 0;
    for (int i = 0; kind && i < count; i++) {
        out->logs += (kind[i] = tw_analyze_input_kind(paths[i], o)) == INPUT_LOG;
        total += kind[i] ? 0 : tw_analyze_input_size(paths[i]);
    }
    if (!kind || !ranks || tw_analyze_input_ranks(paths, count, kind, out->logs, ranks) != TW_OK) {
        free(kind);
        free(ranks);
        return TW_ENOMEM;
    }
    progress_state ps = {tw_progress_wanted(o->quiet, total, out->logs) ? tw_progress_start(total, out->logs) : NULL, 0,
                         0};
    for (int i = 0; i < count; i++) {
        if (kind[i] == INPUT_GPU_UNREAD) {
            out->failed++;
            tw_run_note_input(run, paths[i], "gpu-telemetry", 0, 0, "a headerless GPU log: --gpu-columns needed");
            continue;
        }
        if (kind[i]) {
            out->failed += read_gpu_log(paths[i], o, run, out->logs == 0) != 0;
            continue;
        }
        if (read_log(paths[i], ranks[i], o, run, &ps) != 0)
            out->failed++;
    }
    tw_progress_stop(ps.line);
    free(ranks);
    free(kind);
    return TW_OK;
}
