/*
 * fake_nvml.c: a stand-in libnvidia-ml.so.1 for machines without a GPU (the
 * one stand-in the project allows), implementing the NVML entry points
 * trainwatch calls with fixed, recognisable values: two devices, GPU 0 at
 * 37% utilisation, 10 of 80 GiB used, 250.5 W, 65 C, SM clock 1755 MHz,
 * throttled by the software power cap (0x4); GPU 1 at 81%. Each direct child
 * of the calling process is reported using 1 GiB on GPU 0. FAKE_NVML_UTIL=N
 * sets every GPU's utilization to N%, FAKE_NVML_USED_GIB=N its memory used.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervise/nvml_abi.h"

static long dev_index(void *d) { return (long)(size_t)d - 1; }

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlSystemGetDriverVersion(char *out, unsigned len) { snprintf(out, len, "550.54.15-fake"); return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) { *d = (void *)(size_t)(i + 1); return i < 2 ? 0 : 2; }
int nvmlDeviceGetName(void *d, char *out, unsigned len) { snprintf(out, len, "Fake H100 %ld", dev_index(d)); return 0; }
int nvmlDeviceGetUUID(void *d, char *out, unsigned len) { snprintf(out, len, "GPU-fake-%ld", dev_index(d)); return 0; }

int nvmlDeviceGetUtilizationRates(void *d, nvml_utilization *u)
{
    const char *forced = getenv("FAKE_NVML_UTIL"); /* an idle GPU, for the underuse finding */
    u->gpu = forced ? (unsigned)atoi(forced) : dev_index(d) == 0 ? 37 : 81;
    u->memory = 12;
    return 0;
}

int nvmlDeviceGetMemoryInfo(void *d, nvml_memory *m)
{
    (void)d;
    const char *used = getenv("FAKE_NVML_USED_GIB"); /* a nearly full GPU, for the memory alert */
    m->total = 80ull << 30;
    m->used = (used ? strtoull(used, NULL, 10) : 10ull) << 30;
    m->free = m->total - m->used;
    return 0;
}

int nvmlDeviceGetPowerUsage(void *d, unsigned *mw) { (void)d; *mw = 250500; return 0; }
int nvmlDeviceGetTemperature(void *d, int sensor, unsigned *t) { (void)d; *t = 65; return sensor == 0 ? 0 : 3; }
int nvmlDeviceGetClockInfo(void *d, int type, unsigned *mhz) { (void)d; *mhz = 1755; return type == 1 ? 0 : 3; }
int nvmlDeviceGetCurrentClocksEventReasons(void *d, unsigned long long *r) { (void)d; *r = 0x4; return 0; }

int nvmlDeviceGetComputeRunningProcesses_v3(void *d, unsigned *count, nvml_process_v3 *out)
{
    unsigned n = 0;
    if (dev_index(d) == 0) {
        DIR *dir = opendir("/proc");
        struct dirent *e;
        int me = (int)getpid();
        while (dir && (e = readdir(dir))) {
            char path[300], buf[512];
            snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
            FILE *f = fopen(path, "r");
            if (!f)
                continue;
            size_t got = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[got] = '\0';
            char *p = strrchr(buf, ')');
            int ppid;
            if (p && sscanf(p + 2, "%*c %d", &ppid) == 1 && ppid == me) {
                if (n < *count)
                    out[n] = (nvml_process_v3){(unsigned)atoi(e->d_name), 1ull << 30, ~0u, ~0u};
                n++;
            }
        }
        if (dir)
            closedir(dir);
    }
    if (n > *count) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *count = n;
    return 0;
}
