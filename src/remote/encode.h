/*
 * encode.h: the Prometheus remote-write 1.0 body: a protobuf WriteRequest,
 * snappy-compressed (block format).
 *
 *   WriteRequest { repeated TimeSeries timeseries = 1; }
 *   TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
 *   Label        { string name = 1; string value = 2; }
 *   Sample       { double value = 1; int64 timestamp = 2; (milliseconds) }
 *
 * A series' labels are encoded once, when its sample is taken (the
 * repeated Label fields, sorted by name, __name__ first as the byte order
 * puts it), and kept as bytes in the queue; a request is then those bytes
 * with the sample appended, one TimeSeries per queued sample.
 */
#ifndef TW_REMOTE_ENCODE_H
#define TW_REMOTE_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "../core/buffer.h"

typedef struct tw_rw_label {
    const char *name, *value;
} tw_rw_label;

/* One queued sample: its encoded labels (owned by the queue) and value. */
typedef struct tw_rw_sample {
    char *labels;
    size_t labels_len;
    double value;
    int64_t timestamp_ms;
} tw_rw_sample;

#define TW_RW_LABELS_MAX 32

/* Encodes a series' labels: __name__ = metric, then the given labels (count
 * of them, at most TW_RW_LABELS_MAX in all; empty values are left out, as
 * Prometheus does), sorted by name. Appends to out; a duplicate name is
 * TW_EINVAL. */
int tw_rw_encode_labels(const char *metric, const tw_rw_label *labels, size_t count, tw_buffer *out);

/* Appends the WriteRequest of these samples to out (uncompressed). */
void tw_rw_encode_request(const tw_rw_sample *samples, size_t count, tw_buffer *out);

/* Snappy-compresses in into out (replacing its contents). TW_OK or TW_ENOMEM. */
int tw_rw_compress(const tw_buffer *in, tw_buffer *out);

#endif
