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

typedef struct tw_gpu_notes {
    tw_gpu_note *items; /* in the order read */
    size_t count, cap;
    uint64_t dropped; /* past TW_GPU_SAMPLES_MAX */
    char **files;
    uint32_t file_count;
} tw_gpu_notes;

void tw_gpu_notes_free(tw_gpu_notes *notes);

/* Sums up the samples that belong to launch `view` of `root` (the launch
 * diagnose is looking at). out is fully written; samples 0 when none. */
void tw_gpu_summarize(const tw_run *root, const tw_run *view, tw_gpu_summary *out);

/* The summary's "GPU log" line (text) and its "gpu" member (JSON: null
 * without a GPU log; docs/analysis-json.md). */
void tw_gpu_summary_text(const tw_gpu_summary *g, char *buf, size_t cap);
void tw_gpu_summary_json(FILE *out, const tw_gpu_summary *g);

#endif
