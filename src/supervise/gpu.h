/*
 * gpu.h: GPU readings through NVML, loaded with dlopen at run time so that
 * trainwatch has no build or run dependency on NVIDIA's driver: where
 * libnvidia-ml.so.1 is missing (or TW_NVML_LIBRARY names another file that
 * is), tw_gpu_open fails with a reason and the GPU metrics are simply absent.
 */
#ifndef TW_SUPERVISE_GPU_H
#define TW_SUPERVISE_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct tw_gpu tw_gpu;

typedef struct tw_gpu_reading {
    char name[96], uuid[96];
    bool has_util, has_memory, has_power, has_temp, has_clock, has_throttle;
    unsigned util_gpu, util_memory;        /* percent */
    uint64_t memory_used, memory_total;    /* bytes */
    double power_watts;
    unsigned temp_c, sm_clock_mhz;
    uint64_t throttle_reasons;             /* NVML clock event reason bits */
} tw_gpu_reading;

/* library: NULL for $TW_NVML_LIBRARY or libnvidia-ml.so.1. */
int tw_gpu_open(const char *library, tw_gpu **out, char *why, size_t len);
unsigned tw_gpu_count(const tw_gpu *g);
int tw_gpu_read(tw_gpu *g, unsigned index, tw_gpu_reading *out);
/* GPU memory used on device index by the given processes (bytes). */
uint64_t tw_gpu_memory_of(tw_gpu *g, unsigned index, const pid_t *pids, size_t count);
void tw_gpu_close(tw_gpu *g);

#endif
