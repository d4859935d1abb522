/*
 * gpu_log.h: reading the GPU telemetry logs people already keep beside the
 * training logs, as samples of utilisation and memory per GPU:
 * `paddle.distributed.launch`'s default.gpu.log and any `nvidia-smi
 * --query-gpu=... --format=csv[,nounits]` output (a CSV with its header),
 * `nvidia-smi dmon` and `pmon` (a `# gpu ...` header, whitespace columns,
 * `-o DT` dates), and `nvidia-smi -q` snapshots.
 *
 * One dialect per kind of output behind a small vtable (gpu_log.c); the
 * reader goes line by line, any header switches the dialect, so a file that
 * concatenates several outputs is read whole. A headerless CSV
 * (`--format=csv,noheader`) says nothing about which column is what: it is
 * read only with its columns given (--gpu-columns, tw_gpu_reader_set_columns).
 *
 * Ownership: tw_gpu_reader_new/tw_gpu_reader_free. Samples handed to the
 * callback are borrowed for the call.
 */
#ifndef TW_PARSE_GPU_LOG_H
#define TW_PARSE_GPU_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trainwatch/record.h"

typedef void (*tw_gpu_sample_fn)(void *arg, const tw_gpu_sample *sample);

typedef struct tw_gpu_reader tw_gpu_reader;

int tw_gpu_reader_new(tw_gpu_reader **out);
void tw_gpu_reader_free(tw_gpu_reader *r);

/* One line, without its newline (a CR is dropped). Calls fn for each sample. */
void tw_gpu_reader_line(tw_gpu_reader *r, const char *text, size_t len, tw_gpu_sample_fn fn, void *arg);

/* The columns of a headerless CSV, as the --query-gpu list that made it
 * ("timestamp,index,utilization.gpu,memory.used"). TW_EINVAL when the list
 * is not one of names or names no column read (utilization.gpu, memory.used). */
int tw_gpu_reader_set_columns(tw_gpu_reader *r, const char *list);

/* Lines read, samples delivered, and the dialect of the last header seen
 * ("csv", "dmon", "pmon", "query"; NULL before one). */
uint64_t tw_gpu_reader_lines(const tw_gpu_reader *r);
uint64_t tw_gpu_reader_samples(const tw_gpu_reader *r);
const char *tw_gpu_reader_dialect(const tw_gpu_reader *r);

/* Does this start of a file (its first bytes) look like a GPU log? True when
 * one of its first lines is a header the reader knows. */
bool tw_gpu_log_detect(const char *head, size_t len);

/* Does this start of a file look like nvidia-smi's headerless CSV (rows of
 * ", "-separated fields with units or timestamps)? Then it needs --gpu-columns. */
bool tw_gpu_log_headerless(const char *head, size_t len);
/* ... or, with or without units, rows with as many fields as `list` names. */
bool tw_gpu_log_headerless_fits(const char *head, size_t len, const char *list);

/* Reads a plain file (not .gz, not stdin) whole; columns: NULL, or the
 * --gpu-columns list of a headerless CSV. Returns 0 or a negative
 * TW_E* status (TW_EIO, TW_ENOENT ...); samples before an error were delivered. */
int tw_gpu_log_read(const char *path, const char *columns, tw_gpu_sample_fn fn, void *arg, uint64_t *lines,
                    uint64_t *samples);

#endif
