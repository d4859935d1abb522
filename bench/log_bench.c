/*
 * log_bench.c: ns per log call of libtrainwatch logging.
 *   bench-log MODE THREADS COUNT DIR
 * MODE: disabled, text, json (sync, to a rotating file), async-text,
 * async-json. Each record is "Step" with step (int) and loss (double),
 * the same record bench/log_spdlog.cpp and bench/log_compare.py write. The
 * file rotates at 10 MB x 5. Sync files buffer below ERROR (flush_level
 * ERROR, as spdlog's default flush_on is off); prints "ns_per_call N".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainwatch/log.h"

static tw_logger *logger;
static long count;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *work(void *arg)
{
    (void)arg;
    for (long i = 0; i < count; i++)
        TW_LOG_INFO(logger, "Step", tw_field_int("step", i), tw_field_double("loss", 2.134));
    return NULL;
}

static void *work_disabled(void *arg)
{
    (void)arg;
    for (long i = 0; i < count; i++)
        TW_LOG_DEBUG(logger, "Step", tw_field_int("step", i), tw_field_double("loss", 2.134));
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: bench-log disabled|text|json|async-text|async-json THREADS COUNT DIR\n");
        return 2;
    }
    const char *mode = argv[1];
    int threads = atoi(argv[2]);
    count = atol(argv[3]);
    char path[4096];
    snprintf(path, sizeof path, "%s/bench.log", argv[4]);
    logger = tw_logger_get("bench");
    tw_logger_set_level(logger, TW_LEVEL_INFO);
    tw_log_sink_options o = tw_log_sink_options_default();
    o.max_bytes = 10 * 1000 * 1000;
    o.backups = 5;
    o.json = strstr(mode, "json") != NULL;
    o.flush_level = TW_LEVEL_ERROR;
    if (tw_log_add_file(logger, path, &o, NULL) != 0)
        return 1;
    if (strncmp(mode, "async", 5) == 0 && tw_log_async_start(1u << 16) != 0)
        return 1;
    pthread_t t[64];
    double start = now();
    for (int i = 0; i < threads && i < 64; i++)
        pthread_create(&t[i], NULL, strcmp(mode, "disabled") == 0 ? work_disabled : work, NULL);
    for (int i = 0; i < threads && i < 64; i++)
        pthread_join(t[i], NULL);
    double elapsed = now() - start;
    tw_log_shutdown();
    printf("ns_per_call %.2f dropped %llu\n", elapsed * 1e9 / (double)count,
           (unsigned long long)tw_log_dropped_total());
    return 0;
}
