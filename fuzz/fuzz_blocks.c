/*
 * fuzz_blocks.c: differential libFuzzer target for reading one file in
 * blocks on threads (src/parse/parallel.c).
 *
 * The input is written to a memory file, repeated until it makes at least
 * four blocks, and parsed twice: in order, and on three threads in blocks
 * of 256 to 1,024 bytes (the first byte chooses).
 * Every record, as JSON, and every count must be the same; a difference
 * aborts. Small blocks put block starts inside tracebacks, JSON documents,
 * tables and cut lines with inputs of a few kilobytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trainwatch/parse.h"
#include "trainwatch/record_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void write_json_line(void *arg, const tw_record *r) { tw_record_write_json(arg, r); }

/* Parses path into *text (JSON lines); returns the parser's status. */
static int parse_path(const char *path, int jobs, size_t block, char **text, tw_parse_stats *st)
{
    size_t len;
    FILE *out = open_memstream(text, &len);
    if (!out)
        abort();
    tw_parser *p;
    int rc = tw_parser_open(&p, path, NULL, -1);
    if (rc == 0) {
        tw_parser_set_jobs(p, jobs, block);
        tw_parser_set_unparsed(p, true); /* the template miner's lines come in order too */
        rc = tw_parser_run(p, write_json_line, out);
        *st = *tw_parser_stats(p);
        tw_parser_close(p);
    }
    fclose(out);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    if (fd < 0 && (fd = memfd_create("fuzz_blocks", 0)) < 0)
        abort();
    if (size == 0)
        return 0;
    size_t block = TW_PARSE_BLOCK_MIN * (1 + data[0] % 4);
    if (ftruncate(fd, 0) != 0)
        abort();
    size_t written = 0;
    do {
        if (pwrite(fd, data, size, (off_t)written) != (ssize_t)size)
            abort();
        written += size;
    } while (written < 4 * block);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    char *one = NULL, *many = NULL;
    tw_parse_stats a = {0}, b = {0};
    int rc1 = parse_path(path, 1, 0, &one, &a);
    int rc3 = parse_path(path, 3, block, &many, &b);
    if (rc1 != rc3 || strcmp(one, many) != 0 || a.lines != b.lines || a.bytes != b.bytes || a.steps != b.steps ||
        a.evals != b.evals || a.events != b.events || a.lines_cut != b.lines_cut ||
        a.binary_lines != b.binary_lines || a.format != b.format || (rc1 == 0 && b.blocks == 0)) {
        fprintf(stderr, "DBG rc %d %d lines %lu %lu bytes %lu %lu steps %lu %lu ev %lu %lu evals %lu %lu fmt %s %s blocks %lu cut %lu %lu bin %lu %lu cmp %d\n", rc1, rc3, a.lines, b.lines, a.bytes, b.bytes, a.steps, b.steps, a.events, b.events, a.evals, b.evals, a.format, b.format, b.blocks, a.lines_cut, b.lines_cut, a.binary_lines, b.binary_lines, strcmp(one, many));
        abort();
    }
    free(one);
    free(many);
    return 0;
}
