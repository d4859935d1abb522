/*
 * sinks.c: the record fan-out of `run` and `watch` (see sinks.h).
 *
 * Every write to the records file is checked: after the first failure (a
 * full disk) no more records are written and commit fails, so a follower's
 * state never moves past records that are not in the file.
 */
#include "sinks.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/say.h"
#include "../core/clock.h"
#include "trainwatch/record_json.h"

static void records_failed(tw_sinks *s, int err)
{
    if (s->records_failed)
        return;
    s->records_failed = true;
    tw_say(TW_SAY_ERROR, NULL,
           "%s: %s: no more records are written; the state file stays at the last record "
            "written (restart to go on from there)",
            s->records_path ? s->records_path : "records", strerror(err ? err : EIO));
}

void tw_sinks_record(void *arg, const tw_record *r)
{
    tw_sinks *s = arg;
    tw_run_add(s->run, r);
    tw_live_record(s->live, r);
    if (s->records && !s->records_failed) {
        errno = 0;
        tw_record_write_ecs(s->records, r, &s->writer, tw_wall_clock());
        if (ferror(s->records))
            records_failed(s, errno);
    }
}

int tw_sinks_flush(tw_sinks *s)
{
    if (!s->records)
        return 0;
    if (s->records_failed)
        return -1;
    if (fflush(s->records) != 0) {
        records_failed(s, errno);
        return -1;
    }
    return 0;
}

int tw_sinks_commit(void *arg, uint64_t *size)
{
    tw_sinks *s = arg;
    *size = 0;
    if (!s->records)
        return 0;
    if (tw_sinks_flush(s) != 0)
        return -1;
    if (fsync(fileno(s->records)) != 0) {
        records_failed(s, errno);
        return -1;
    }
    long pos = ftell(s->records);
    if (pos < 0) {
        records_failed(s, errno);
        return -1;
    }
    *size = (uint64_t)pos;
    return 0;
}

int tw_sinks_restore(void *arg, uint64_t size)
{
    tw_sinks *s = arg;
    if (!s->records)
        return 0;
    if (fflush(s->records) != 0)
        return -1;
    struct stat st;
    if (fstat(fileno(s->records), &st) != 0)
        return -1;
    if ((uint64_t)st.st_size > size && ftruncate(fileno(s->records), (off_t)size) != 0)
        return -1;
    return fseek(s->records, 0, SEEK_END);
}
