/*
 * replay.c: runs a fuzz target over files (the seed corpus, or crashes a
 * fuzzer found) without libFuzzer, so gcc and sanitizer builds replay them
 * in the ordinary test suite.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            perror(argv[i]);
            return 2;
        }
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc(size > 0 ? (size_t)size : 1);
        if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
            fprintf(stderr, "%s: read failed\n", argv[i]);
            return 2;
        }
        fclose(f);
        LLVMFuzzerTestOneInput(buf, (size_t)size);
        free(buf);
    }
    printf("replayed %d input(s)\n", argc - 1);
    return 0;
}
