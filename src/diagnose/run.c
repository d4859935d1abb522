/*
 * run.c: accumulating records into per-rank facts (see run.h): the run's
 * life, its inputs and their files (interned, rotated generations), its
 * ranks. run_records.c's tw_run_add hands each record to the launch its
 * rank is in and to the file that accounts for its kind:
 *
 *   run_steps.c     a step record: position, loss, gaps, step times, series
 *   run_metrics.c   named metrics and evaluations
 *   run_events.c    events and environment facts
 *   run_launches.c  which launch a record belongs to (cursors, start lines)
 *   run_series.c    the histograms and the downsampled series they fill
 *   run_precision.c a step's mixed-precision counters
 *
 * Shared between them: run_internal.h. The rules read the result (run.h).
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/grow.h"
#include "run_internal.h"
#include "trainwatch/error.h"

int tw_run_new_with(tw_run **out, const tw_thresholds *t, const tw_run_hooks *hooks)
{
    tw_run *run = calloc(1, sizeof *run);
    if (!run)
        return TW_ENOMEM;
    run->rank_limit = TW_RANKS_MAX;
    if (t)
        run->th = *t;
    else
        tw_thresholds_default(&run->th);
    run->launch.first_time = run->launch.last_time = NAN;
    run->hooks = hooks;
    *out = run;
    return TW_OK;
}

static void rotation_free(tw_rotation *r)
{
    if (r) {
        free(r->gen_files);
        free(r->offsets);
        free(r);
    }
}

void tw_run_free(tw_run *run)
{
    if (!run)
        return;
    for (int i = 0; i < run->launch_count; i++)
        tw_run_free(run->launches[i]);
    free(run->launches);
    free(run->cursors);
    for (int i = 0; i < run->rank_count; i++) {
        free(run->ranks[i]->series.points);
        free(run->ranks[i]->series.metric);
        free(run->ranks[i]);
    }
    free(run->ranks);
    free(run->eval_series.points);
    for (uint32_t i = 0; i < run->file_count; i++)
        free(run->files[i]);
    free(run->files);
    rotation_free(run->rotation);
    free(run->file_slots);
    for (int i = 0; i < run->input_count; i++) {
        free(run->inputs[i].path);
        free(run->inputs[i].format);
        free(run->inputs[i].error);
    }
    free(run->inputs);
    if (run->hooks && run->hooks->free)
        run->hooks->free(run);
    free(run);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

void tw_run_note_input(tw_run *run, const char *path, const char *format, uint64_t lines, uint64_t records,
                       const char *error)
{
    if (TW_GROW(run->inputs, run->input_count, run->input_cap, 16) != TW_OK)
        return; /* out of memory: the input is missing from the report's list, nothing else */
    tw_input_note *in = &run->inputs[run->input_count++];
    in->path = dup_or_null(path);
    in->format = dup_or_null(format);
    in->error = dup_or_null(error);
    in->lines = lines;
    in->records = records;
    in->cut = false;
}

int tw_run_note_rotation(tw_run *run, const char *path, const int64_t *offsets, unsigned count)
{
    rotation_free(run->rotation);
    run->rotation = NULL;
    tw_rotation *r = calloc(1, sizeof *r);
    size_t n = strlen(path) + 24;
    char *name = malloc(n);
    if (!r || !name || !(r->gen_files = calloc(count ? count : 1, sizeof *r->gen_files)) ||
        !(r->offsets = calloc(count ? count : 1, sizeof *r->offsets))) {
        free(name);
        rotation_free(r);
        return TW_ENOMEM;
    }
    r->file = tw_run_intern_file(run, path);
    for (unsigned k = 0; k < count; k++) {
        if (k == 0)
            snprintf(name, n, "%s", path);
        else
            snprintf(name, n, "%s.%u", path, k);
        r->gen_files[k] = tw_run_intern_file(run, name);
        r->offsets[k] = offsets[k];
    }
    r->count = count;
    free(name);
    run->rotation = r;
    return TW_OK;
}

tw_source tw_run_source(const tw_run *run, uint32_t file, uint64_t line)
{
    const tw_rotation *r = run->rotation;
    if (r && file == r->file) {
        for (unsigned k = 0; k < r->count; k++) {
            if ((int64_t)line > r->offsets[k])
                return (tw_source){run->files[r->gen_files[k]], (uint64_t)((int64_t)line - r->offsets[k])};
        }
        return (tw_source){NULL, line}; /* rotated away */
    }
    return (tw_source){file < run->file_count ? run->files[file] : NULL, line};
}

const char *tw_where(const tw_run *run, uint32_t file, uint64_t line, char *buf, size_t cap)
{
    tw_source s = tw_run_source(run, file, line);
    if (s.file)
        snprintf(buf, cap, "%s:%llu", s.file, (unsigned long long)s.line);
    else if (file < run->file_count)
        snprintf(buf, cap, "output line %llu, rotated out of %s", (unsigned long long)line, run->files[file]);
    else
        snprintf(buf, cap, "?:%llu", (unsigned long long)line);
    return buf;
}

void tw_run_note_cut(tw_run *run)
{
    if (run->input_count > 0)
        run->inputs[run->input_count - 1].cut = true;
}

uint64_t tw_run_name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot of name in the hash table: where it is, or the empty one where
 * it would go. */
static uint32_t *file_slot(tw_run *run, const char *name)
{
    uint32_t mask = run->file_slot_count - 1;
    for (uint32_t i = (uint32_t)tw_run_name_hash(name) & mask;; i = (i + 1) & mask) {
        uint32_t *slot = &run->file_slots[i];
        if (!*slot || strcmp(run->files[*slot - 1], name) == 0)
            return slot;
    }
}

static bool grow_files(tw_run *run)
{
    uint32_t cap = run->file_cap ? run->file_cap * 2 : 16;
    char **files = realloc(run->files, sizeof *files * cap);
    uint32_t *slots = calloc((size_t)cap * 2, sizeof *slots);
    if (!files || !slots) {
        if (files)
            run->files = files;
        free(slots);
        return false;
    }
    run->files = files;
    run->file_cap = cap;
    free(run->file_slots);
    run->file_slots = slots;
    run->file_slot_count = cap * 2;
    for (uint32_t i = 0; i < run->file_count; i++)
        *file_slot(run, run->files[i]) = i + 1;
    return true;
}

/* File names are interned: records borrow them from their parser, which may
 * be gone by the time a report cites them. Any number of files (a glob of
 * thousands of rank logs) keeps each its own name. */
uint32_t tw_run_intern_file(tw_run *run, const char *name)
{
    if (!name)
        name = "<unknown>";
    /* by content, not address: a parser freed and another allocated may
     * put a different name at the same address */
    if (run->file_count && strcmp(name, run->files[run->last_file]) == 0)
        return run->last_file;
    if (run->file_count == run->file_cap && !grow_files(run))
        return 0; /* out of memory: cited as the first file */
    uint32_t *slot = file_slot(run, name);
    if (!*slot) {
        char *copy = strdup(name);
        if (!copy)
            return 0;
        run->files[run->file_count++] = copy;
        *slot = run->file_count;
    }
    run->last_file = *slot - 1;
    return run->last_file;
}

/* Index of the first rank numbered rank or above (binary search over the
 * sorted ranks, after a look at the last one found). */
static int rank_index(const tw_run *run, int rank)
{
    int last = run->rank_last;
    if (last < run->rank_count && run->ranks[last]->rank == rank)
        return last;
    int lo = 0, hi = run->rank_count;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (run->ranks[mid]->rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const tw_rank *tw_run_rank(const tw_run *run, int rank)
{
    if (rank < 0)
        rank = 0;
    int i = rank_index(run, rank);
    return i < run->rank_count && run->ranks[i]->rank == rank ? run->ranks[i] : NULL;
}

static tw_rank *rank_new(int rank)
{
    tw_rank *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->rank = rank;
    r->series.stride = 1;
    r->epoch_base = -1;
    r->last_epoch = -1;
    r->last_step_in_epoch = -1;
    r->loss_first = r->loss_best = r->mem_max = NAN;
    memset(r->metric_slot, -2, sizeof r->metric_slot);
    return r;
}

/* The rank's state, made at its first record; NULL when out of memory or
 * past the limit of distinct ranks. An unknown rank (-1) is rank 0. */
tw_rank *tw_run_rank_of(tw_run *run, int rank)
{
    if (rank < 0)
        rank = 0;
    int i = rank_index(run, rank);
    if (i < run->rank_count && run->ranks[i]->rank == rank) {
        run->rank_last = i;
        return run->ranks[i];
    }
    if (run->rank_count >= run->rank_limit)
        return NULL;
    if (TW_GROW(run->ranks, run->rank_count, run->rank_cap, 16) != TW_OK)
        return NULL;
    tw_rank *r = rank_new(rank);
    if (!r)
        return NULL;
    memmove(&run->ranks[i + 1], &run->ranks[i], sizeof *run->ranks * (size_t)(run->rank_count - i));
    run->ranks[i] = r;
    run->rank_count++;
    run->rank_last = i;
    return r;
}
