/*
 * fuzz_trace_threads.c: libFuzzer target for trace's threaded reading
 * (src/trace/parallel.c), differential: any input, written to a memory
 * file, is read by one thread and by three threads in pieces of a few
 * hundred bytes (mapped, as trainwatch trace reads), and the two JSON
 * reports (events, errors and their byte offsets included) must be the
 * same; a difference aborts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trainwatch/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The JSON report of path read with threads threads (malloc'd; NULL if
 * it could not be made). */
static char *report_of(const char *path, int threads, uint64_t chunk)
{
    tw_trace_options o;
    tw_trace_options_default(&o);
    o.threads = threads;
    o.chunk_bytes = chunk;
    o.map_files = true;
    tw_trace *t;
    if (tw_trace_new(&t, &o) != 0)
        return NULL;
    int rc = tw_trace_add_file(t, path, -1, NULL, NULL);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f && tw_trace_finish(t) == 0) {
        fprintf(f, "rc %d\n", rc);
        tw_trace_write_json(f, t);
    }
    if (f)
        fclose(f);
    tw_trace_free(t);
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("trace", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    char *one = report_of(path, 1, 0);
    uint64_t chunk = size > 8 ? 64 + (size_t)data[size - 1] * 4 : 64;
    char *many = report_of(path, 3, chunk);
    if (one && many && strcmp(one, many) != 0) {
        fprintf(stderr, "threads differ (pieces of %llu bytes):\n%s\n---\n%s\n", (unsigned long long)chunk, one, many);
        abort();
    }
    free(one);
    free(many);
    close(fd);
    return 0;
}
