/*
 * nvml_abi.h: the few NVML types trainwatch uses, declared here because no
 * nvml.h is installed where trainwatch builds. They are NVML's stable ABI
 * (nvmlUtilization_t, nvmlMemory_t, nvmlProcessInfo_t v3); gpu.c calls the
 * real library with them, and the stand-in library of the tests
 * (tests/fake-nvml) implements the same entry points with them.
 */
#ifndef TW_SUPERVISE_NVML_ABI_H
#define TW_SUPERVISE_NVML_ABI_H

typedef int nvml_return;
typedef void *nvml_device;

typedef struct {
    unsigned gpu, memory;            /* percent */
} nvml_utilization;

typedef struct {
    unsigned long long total, free, used;  /* bytes */
} nvml_memory;

typedef struct {
    unsigned pid;
    unsigned long long used_memory;  /* bytes; ~0 when not available */
    unsigned gpu_instance, compute_instance;
} nvml_process_v3;

#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_TEMPERATURE_GPU 0
#define NVML_CLOCK_SM 1

#endif
