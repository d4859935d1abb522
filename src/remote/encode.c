/*
 * encode.c: the remote-write body (see encode.h), protobuf written by hand.
 *
 * Why by hand: the body is four small messages that are only ever written,
 * never read; the wire format needs varints, length prefixes and one
 * little-endian double, about forty lines, where libprotobuf-c would add
 * a code generator (protoc-c) to the build and a library to every link for
 * the same bytes. Snappy is libsnappy's C API (snappy-c.h): compressing
 * well is not forty lines.
 */
#include "encode.h"

#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/error.h"

/* Wire types: 0 varint, 1 64-bit, 2 length-delimited. */
static void put_varint(tw_buffer *b, uint64_t v)
{
    char bytes[10];
    size_t n = 0;
    do {
        bytes[n++] = (char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    tw_buffer_append(b, bytes, n);
}

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v > 0x7f) {
        v >>= 7;
        n++;
    }
    return n;
}

static void put_key(tw_buffer *b, unsigned field, unsigned wire)
{
    put_varint(b, (uint64_t)(field << 3 | wire));
}

static void put_bytes(tw_buffer *b, unsigned field, const char *s, size_t n)
{
    put_key(b, field, 2);
    put_varint(b, n);
    tw_buffer_append(b, s, n);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const tw_rw_label *)a)->name, ((const tw_rw_label *)b)->name);
}

int tw_rw_encode_labels(const char *metric, const tw_rw_label *labels, size_t count, tw_buffer *out)
{
    tw_rw_label all[TW_RW_LABELS_MAX];
    size_t n = 0;
    all[n++] = (tw_rw_label){"__name__", metric};
    for (size_t i = 0; i < count; i++) {
        if (n == TW_RW_LABELS_MAX)
            return TW_ELIMIT;
        if (labels[i].value && labels[i].value[0])
            all[n++] = labels[i];
    }
    qsort(all, n, sizeof all[0], by_name);
    for (size_t i = 0; i < n; i++) {
        if (i && strcmp(all[i - 1].name, all[i].name) == 0)
            return TW_EINVAL;
        size_t name = strlen(all[i].name), value = strlen(all[i].value);
        size_t len = 1 + varint_size(name) + name + 1 + varint_size(value) + value;
        put_key(out, 1, 2); /* TimeSeries.labels */
        put_varint(out, len);
        put_bytes(out, 1, all[i].name, name);
        put_bytes(out, 2, all[i].value, value);
    }
    return out->failed ? TW_ENOMEM : TW_OK;
}

/* Sample { double value = 1; int64 timestamp = 2; } */
static void put_sample(tw_buffer *b, double value, int64_t ms)
{
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (char)(bits >> (8 * i));
    size_t len = 1 + 8 + 1 + varint_size((uint64_t)ms);
    put_key(b, 2, 2); /* TimeSeries.samples */
    put_varint(b, len);
    put_key(b, 1, 1);
    tw_buffer_append(b, le, 8);
    put_key(b, 2, 0);
    put_varint(b, (uint64_t)ms); /* int64: two's complement as a varint */
}

void tw_rw_encode_request(const tw_rw_sample *samples, size_t count, tw_buffer *out)
{
    for (size_t i = 0; i < count; i++) {
        const tw_rw_sample *s = &samples[i];
        size_t sample = 1 + 8 + 1 + varint_size((uint64_t)s->timestamp_ms);
        size_t len = s->labels_len + 1 + varint_size(sample) + sample;
        put_key(out, 1, 2); /* WriteRequest.timeseries */
        put_varint(out, len);
        tw_buffer_append(out, s->labels, s->labels_len);
        put_sample(out, s->value, s->timestamp_ms);
    }
}

int tw_rw_compress(const tw_buffer *in, tw_buffer *out)
{
    size_t cap = snappy_max_compressed_length(in->len);
    tw_buffer_reset(out);
    if (!tw_buffer_reserve(out, cap))
        return TW_ENOMEM;
    size_t len = cap;
    if (snappy_compress(in->data ? in->data : "", in->len, out->data, &len) != SNAPPY_OK)
        return TW_ENOMEM;
    out->len = len;
    return TW_OK;
}
