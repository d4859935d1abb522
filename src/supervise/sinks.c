/*
 * sinks.c: the record fan-out of `run` and `watch` (see sinks.h).
 */
#include "sinks.h"

#include <sys/stat.h>
#include <unistd.h>

#include "trainwatch/record_json.h"

void tw_sinks_record(void *arg, const tw_record *r)
{
    tw_sinks *s = arg;
    tw_run_add(s->run, r);
    tw_live_record(s->live, r);
    if (s->records)
        tw_record_write_json(s->records, r);
}

uint64_t tw_sinks_commit(void *arg)
{
    tw_sinks *s = arg;
    if (!s->records)
        return 0;
    fflush(s->records);
    fsync(fileno(s->records));
    long pos = ftell(s->records);
    return pos < 0 ? 0 : (uint64_t)pos;
}

int tw_sinks_restore(void *arg, uint64_t size)
{
    tw_sinks *s = arg;
    if (!s->records)
        return 0;
    fflush(s->records);
    struct stat st;
    if (fstat(fileno(s->records), &st) != 0)
        return -1;
    if ((uint64_t)st.st_size > size && ftruncate(fileno(s->records), (off_t)size) != 0)
        return -1;
    return fseek(s->records, 0, SEEK_END);
}
