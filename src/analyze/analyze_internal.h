/*
 * analyze_internal.h: what the files of src/analyze/ share: the kind of an
 * input and its rank (inputs.c), for the reading (read.c).
 */
#ifndef TW_ANALYZE_INTERNAL_H
#define TW_ANALYZE_INTERNAL_H

#include <stdint.h>

#include "trainwatch/analyze.h"

/* A GPU telemetry log given beside the training logs (nvidia-smi CSV, dmon,
 * pmon, -q; detected from its first lines, a headerless CSV by the number
 * of its columns with --gpu-columns): a plain file only. A headerless CSV
 * without --gpu-columns is said and counted as an input not read. */
typedef enum tw_input_kind { INPUT_LOG, INPUT_GPU, INPUT_GPU_UNREAD } tw_input_kind;

/* The kind of the input at path (said on stderr when it is a GPU log that
 * cannot be read without --gpu-columns). */
tw_input_kind tw_analyze_input_kind(const char *path, const tw_analyze_input_options *o);

/* The rank of each of the count inputs into ranks[] (-1: the parser's
 * hints decide); logs: how many of them are training logs. TW_ENOMEM. */
int tw_analyze_input_ranks(char *const *paths, int count, const tw_input_kind *kind, int logs, int *ranks);

/* The size of a plain file (0 for stdin or anything else), for the progress line. */
uint64_t tw_analyze_input_size(const char *path);

#endif
