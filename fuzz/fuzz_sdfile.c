/*
 * fuzz_sdfile.c: libFuzzer target for the reader of --sd-file files
 * (supervise/sdfile.c): the input is the file as another writer (or
 * anyone) left it; one entry is added and removed again, as a run does.
 * The file lives in a directory of this process's own under /tmp.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "supervise/sdfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/tw-fuzz-sd-XXXXXX";
static char path[64], lock[80];

/* The file, its lock and the directory go when the process ends. */
static void clean_up(void)
{
    unlink(path);
    unlink(lock);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        if (!mkdtemp(dir))
            abort();
        snprintf(path, sizeof path, "%s/node.json", dir);
        snprintf(lock, sizeof lock, "%s.lock", path);
        atexit(clean_up);
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
    const tw_alert_label labels[] = {{"run", "fuzz"}, {"rank", "0"}};
    char err[600];
    if (tw_sdfile_add(path, "127.0.0.1:1", labels, 2, getpid(), err, sizeof err) == 0)
        tw_sdfile_remove(path, getpid(), err, sizeof err);
    return 0;
}
