/*
 * gpu.h: the GPU telemetry a run holds beside its records (gpu.c), and how
 * one launch's share of it is summed up for the summary and the rules.
 *
 * Ownership: the first tw_run owns its tw_gpu_notes (freed by tw_run_free);
 * the launches' views borrow them.
 */
#ifndef TW_DIAGNOSE_GPU_H
#define TW_DIAGNOSE_GPU_H

#include <stdio.h>

#include "run.h"

typedef struct tw_gpu_note {
    tw_gpu_sample s;
    uint32_t file; /* index into tw_gpu_notes.files */
} tw_gpu_note;

/* What a training log said about the GPU a rank uses, in one launch. */
typedef struct tw_gpu_binding {
    int launch, rank;              /* launch 0-based */
    int gpu;                       /* -1: only a CUDA_VISIBLE_DEVICES list */
    int strength;                  /* a stronger statement replaces a weaker one */
    bool logical;                  /* an index among the visible devices (Place, cudaDev, gpu id) */
    int visible[8], visible_count; /* CUDA_VISIBLE_DEVICES as printed */
    char how[32];
    uint32_t file; /* index into the run's files */
    uint64_t line;
} tw_gpu_binding;

typedef struct tw_gpu_notes {
    tw_gpu_note *items; /* in the order read */
    size_t count, cap;
    uint64_t dropped; /* past TW_GPU_SAMPLES_MAX */
    char **files;
    uint32_t file_count;
    tw_gpu_binding *bindings; /* at most TW_GPU_BINDINGS_MAX */
    size_t binding_count, binding_cap;
} tw_gpu_notes;

#define TW_GPU_BINDINGS_MAX 4096

/* Cheap test of a line's text: may it say which GPU its rank uses? */
bool tw_gpu_hint_maybe(const char *text);
/* Reads what the text of a line or event says about its rank's GPU
 * (file: interned index in root; launch: 0-based, the rank's now). */
int tw_gpu_note_hint(tw_run *root, const tw_record *r, uint32_t file, int launch);

void tw_gpu_notes_free(tw_gpu_notes *notes);

/* Sums up the samples that belong to launch `view` of `root` (the launch
 * diagnose is looking at). out is fully written; samples 0 when none. */
void tw_gpu_summarize(const tw_run *root, const tw_run *view, tw_gpu_summary *out);

/* The GPU time in the samples of launch `view` (those tw_gpu_summarize
 * uses, with a time): each GPU's samples in time order, every interval
 * between two successive ones at the earlier one's utilisation (NAN when
 * the log gives none), so a GPU counts its sampled span. Returns how many
 * GPUs had an interval, or TW_ENOMEM. */
typedef void (*tw_gpu_interval_fn)(void *arg, int gpu, double util, double seconds);
int tw_gpu_each_interval(const tw_run *root, const tw_run *view, tw_gpu_interval_fn fn, void *arg);
/* Each timed utilisation sample of the GPU logs over view's span, in time
 * order (every GPU's), for the history's gpu_util series. TW_OK or TW_ENOMEM. */
typedef void (*tw_gpu_util_fn)(void *arg, double time, double util);
int tw_gpu_each_util(const tw_run *root, const tw_run *view, tw_gpu_util_fn fn, void *arg);

/* The summary's "GPU log" line (text) and its "gpu" member (JSON: null
 * without a GPU log; docs/analysis-json.md). */
void tw_gpu_summary_text(const tw_gpu_summary *g, char *buf, size_t cap);
void tw_gpu_summary_json(FILE *out, const tw_gpu_summary *g);
/* The summary's "GPU by rank" lines: how many, and line i (each rank's GPU
 * and its figures; then whether the mapping is unknown for some ranks). */
int tw_gpu_rank_lines(const tw_gpu_summary *g);
void tw_gpu_rank_line(const tw_gpu_summary *g, int i, char *buf, size_t cap);

#endif
