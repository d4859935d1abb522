/*
 * process.c: the facts every record carries and the process-wide counts:
 * level names, the rank, local rank and world size from the launcher's
 * variables (first found wins, in the documented order), pid and host, and
 * the number of records dropped. Below every other file of src/log/.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "../core/rank_env.h"
#include "internal.h"
#include "trainwatch/error.h"

static _Atomic uint64_t dropped_total;

/* ---- levels --------------------------------------------------------------- */

static const struct {
    const char *name;
    int level;
} level_names[] = {{"DEBUG", TW_LEVEL_DEBUG},    {"INFO", TW_LEVEL_INFO},         {"WARNING", TW_LEVEL_WARNING},
                   {"ERROR", TW_LEVEL_ERROR},    {"CRITICAL", TW_LEVEL_CRITICAL}, {"WARN", TW_LEVEL_WARNING},
                   {"FATAL", TW_LEVEL_CRITICAL}, {"NOTSET", TW_LEVEL_NOTSET},     {"OFF", TW_LEVEL_OFF}};

const char *tw_log_level_name(int level)
{
    for (size_t i = 0; i < 5; i++) {
        if (level_names[i].level == level)
            return level_names[i].name;
    }
    return NULL;
}

int tw_log_level_parse(const char *text, int *level)
{
    if (!text || !*text)
        return TW_EINVAL;
    for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++) {
        if (strcasecmp(text, level_names[i].name) == 0) {
            *level = level_names[i].level;
            return TW_OK;
        }
    }
    char *end;
    long v = strtol(text, &end, 10);
    if (*end || v < 0 || v > TW_LEVEL_OFF)
        return TW_EINVAL;
    *level = (int)v;
    return TW_OK;
}

/* ---- ranks ---------------------------------------------------------------- */

static tw_log_process process;
static pthread_once_t process_once = PTHREAD_ONCE_INIT;

static void process_init(void)
{
    process.rank = 0;
    process.world_size = 1;
    process.rank_source = tw_rank_env_get(tw_rank_env_vars, 1L << 30, &process.rank);
    tw_rank_env_get(tw_world_size_env_vars, 1L << 30, &process.world_size);
    if (!tw_rank_env_get(tw_local_rank_env_vars, 1L << 30, &process.local_rank))
        process.local_rank = process.rank;
    if (process.world_size <= process.rank)
        process.world_size = process.rank + 1;
    process.pid = (int)getpid();
    if (gethostname(process.host, sizeof process.host - 1) != 0)
        strcpy(process.host, "localhost");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tw_log_clock_refresh((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
}

static _Atomic(const tw_log_process *) process_ready; /* set once initialised: no pthread_once per record */

const tw_log_process *tw_log_process_info(void)
{
    const tw_log_process *p = atomic_load_explicit(&process_ready, memory_order_acquire);
    if (p)
        return p;
    pthread_once(&process_once, process_init);
    atomic_store_explicit(&process_ready, &process, memory_order_release);
    return &process;
}

tw_log_rank_info tw_log_rank(void)
{
    const tw_log_process *p = tw_log_process_info();
    return (tw_log_rank_info){p->rank, p->local_rank, p->world_size, p->rank_source};
}

void tw_log_process_set(int rank, int local_rank, int world_size)
{
    tw_log_process_info();
    process.rank = rank;
    process.local_rank = local_rank;
    process.world_size = world_size;
    process.rank_source = "tw_log_set_rank";
}

void tw_log_count_drop(uint64_t n)
{
    atomic_fetch_add_explicit(&dropped_total, n, memory_order_relaxed);
}

uint64_t tw_log_dropped_total(void)
{
    return atomic_load(&dropped_total);
}
