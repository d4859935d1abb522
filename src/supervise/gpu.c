/*
 * gpu.c: the NVML calls of gpu.h. We declare the few ABI-stable NVML types
 * and entry points ourselves (no nvml.h), look them up with dlsym, prefer the
 * versioned names (_v2, _v3) and fall back to older ones, and treat any
 * field a device does not support as absent rather than as an error.
 */
#include "gpu.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_abi.h"
#include "trainwatch/error.h"


#define DEVICES_MAX 64

struct tw_gpu {
    void *lib;
    unsigned count;
    nvml_device devices[DEVICES_MAX];
    nvml_return (*shutdown)(void);
    nvml_return (*name)(nvml_device, char *, unsigned);
    nvml_return (*uuid)(nvml_device, char *, unsigned);
    nvml_return (*util)(nvml_device, nvml_utilization *);
    nvml_return (*memory)(nvml_device, nvml_memory *);
    nvml_return (*power)(nvml_device, unsigned *);
    nvml_return (*temperature)(nvml_device, int, unsigned *);
    nvml_return (*clock)(nvml_device, int, unsigned *);
    nvml_return (*throttle)(nvml_device, unsigned long long *);
    nvml_return (*processes)(nvml_device, unsigned *, nvml_process_v3 *);
};

static void *symbol(void *lib, const char *a, const char *b)
{
    void *p = dlsym(lib, a);
    return p || !b ? p : dlsym(lib, b);
}

int tw_gpu_open(const char *library, tw_gpu **out, char *why, size_t len)
{
    if (!library)
        library = getenv("TW_NVML_LIBRARY");
    if (!library || !*library)
        library = "libnvidia-ml.so.1";
    void *lib = dlopen(library, RTLD_LAZY | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, len, "%s", dlerror());
        return TW_ENOENT;
    }
    tw_gpu *g = calloc(1, sizeof *g);
    if (!g) {
        dlclose(lib);
        return TW_ENOMEM;
    }
    g->lib = lib;
    nvml_return (*init)(void) = (nvml_return(*)(void))symbol(lib, "nvmlInit_v2", "nvmlInit");
    nvml_return (*count)(unsigned *) = (nvml_return(*)(unsigned *))symbol(lib, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    nvml_return (*handle)(unsigned, nvml_device *) =
        (nvml_return(*)(unsigned, nvml_device *))symbol(lib, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    g->shutdown = (nvml_return(*)(void))symbol(lib, "nvmlShutdown", NULL);
    *(void **)&g->name = symbol(lib, "nvmlDeviceGetName", NULL);
    *(void **)&g->uuid = symbol(lib, "nvmlDeviceGetUUID", NULL);
    *(void **)&g->util = symbol(lib, "nvmlDeviceGetUtilizationRates", NULL);
    *(void **)&g->memory = symbol(lib, "nvmlDeviceGetMemoryInfo", NULL);
    *(void **)&g->power = symbol(lib, "nvmlDeviceGetPowerUsage", NULL);
    *(void **)&g->temperature = symbol(lib, "nvmlDeviceGetTemperature", NULL);
    *(void **)&g->clock = symbol(lib, "nvmlDeviceGetClockInfo", NULL);
    *(void **)&g->throttle = symbol(lib, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
    *(void **)&g->processes = symbol(lib, "nvmlDeviceGetComputeRunningProcesses_v3", NULL);
    int rc;
    if (!init || !count || !handle) {
        snprintf(why, len, "%s: not an NVML library (no nvmlInit)", library);
        rc = TW_ENOENT;
    } else if ((rc = init()) != 0) {
        snprintf(why, len, "%s: nvmlInit failed (error %d): no usable NVIDIA driver", library, rc);
        rc = TW_ENOENT;
    } else if (count(&g->count) != 0 || g->count == 0) {
        snprintf(why, len, "%s: no GPU found", library);
        rc = TW_ENOENT;
        if (g->shutdown)
            g->shutdown();
    } else {
        if (g->count > DEVICES_MAX)
            g->count = DEVICES_MAX;
        rc = TW_OK;
        for (unsigned i = 0; i < g->count && rc == TW_OK; i++) {
            if (handle(i, &g->devices[i]) != 0) {
                snprintf(why, len, "%s: cannot open GPU %u", library, i);
                rc = TW_ENOENT;
            }
        }
    }
    if (rc != TW_OK) {
        dlclose(lib);
        free(g);
        return rc;
    }
    *out = g;
    return TW_OK;
}

unsigned tw_gpu_count(const tw_gpu *g) { return g->count; }

int tw_gpu_read(tw_gpu *g, unsigned i, tw_gpu_reading *r)
{
    memset(r, 0, sizeof *r);
    if (i >= g->count)
        return TW_EINVAL;
    nvml_device d = g->devices[i];
    if (!g->name || g->name(d, r->name, sizeof r->name) != 0)
        snprintf(r->name, sizeof r->name, "GPU %u", i);
    if (!g->uuid || g->uuid(d, r->uuid, sizeof r->uuid) != 0)
        r->uuid[0] = '\0';
    nvml_utilization u;
    if (g->util && g->util(d, &u) == 0)
        r->has_util = true, r->util_gpu = u.gpu, r->util_memory = u.memory;
    nvml_memory m;
    if (g->memory && g->memory(d, &m) == 0)
        r->has_memory = true, r->memory_used = m.used, r->memory_total = m.total;
    unsigned mw;
    if (g->power && g->power(d, &mw) == 0)
        r->has_power = true, r->power_watts = mw / 1000.0;
    if (g->temperature && g->temperature(d, NVML_TEMPERATURE_GPU, &r->temp_c) == 0)
        r->has_temp = true;
    if (g->clock && g->clock(d, NVML_CLOCK_SM, &r->sm_clock_mhz) == 0)
        r->has_clock = true;
    unsigned long long reasons;
    if (g->throttle && g->throttle(d, &reasons) == 0)
        r->has_throttle = true, r->throttle_reasons = reasons;
    return TW_OK;
}

uint64_t tw_gpu_memory_of(tw_gpu *g, unsigned i, const pid_t *pids, size_t count)
{
    if (i >= g->count || !g->processes)
        return 0;
    unsigned n = 64;
    nvml_process_v3 *procs = NULL;
    int rc = NVML_ERROR_INSUFFICIENT_SIZE;
    for (int attempt = 0; attempt < 4 && rc == NVML_ERROR_INSUFFICIENT_SIZE; attempt++) {
        free(procs);
        procs = calloc(n, sizeof *procs);
        if (!procs)
            return 0;
        unsigned got = n;
        rc = g->processes(g->devices[i], &got, procs);
        if (rc == NVML_ERROR_INSUFFICIENT_SIZE)
            n = got > n ? got + 8 : n * 2;
        else
            n = got;
    }
    uint64_t sum = 0;
    for (unsigned k = 0; rc == 0 && k < n; k++) {
        for (size_t j = 0; j < count; j++) {
            if ((pid_t)procs[k].pid == pids[j] && procs[k].used_memory != ~0ull)
                sum += procs[k].used_memory;
        }
    }
    free(procs);
    return sum;
}

void tw_gpu_close(tw_gpu *g)
{
    if (!g)
        return;
    if (g->shutdown)
        g->shutdown();
    dlclose(g->lib);
    free(g);
}
