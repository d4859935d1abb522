/*
 * log_writer.c: records for the rotation tests. log_writer PATH MAX_BYTES
 * BACKUPS THREADS COUNT [sync|async] [text|json] writes COUNT records from
 * each of THREADS threads, message "t<thread> r<index> " plus 0..49 'x'
 * (text: the message only, pattern "%(message)s"), to a rotating file.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/log.h"

static int count;
static tw_logger *logger;

static void *work(void *arg)
{
    int t = (int)(size_t)arg;
    char msg[128];
    for (int i = 0; i < count; i++) {
        int pad = (i * 7 + t * 13) % 50;
        int n = snprintf(msg, sizeof msg, "t%d r%d ", t, i);
        memset(msg + n, 'x', (size_t)pad);
        msg[n + pad] = '\0';
        tw_log_write(logger, TW_LEVEL_INFO, NULL, NULL, 0, msg, NULL, 0);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: log_writer PATH MAX_BYTES BACKUPS THREADS COUNT [sync|async] [text|json]\n");
        return 2;
    }
    int threads = atoi(argv[4]);
    count = atoi(argv[5]);
    tw_log_sink_options o = tw_log_sink_options_default();
    o.pattern = "%(message)s";
    o.max_bytes = strtoull(argv[2], NULL, 10);
    o.backups = (unsigned)atoi(argv[3]);
    o.json = argc > 7 && strcmp(argv[7], "json") == 0;
    logger = tw_logger_get("writer");
    if (tw_log_add_file(logger, argv[1], &o, NULL) != 0)
        return 3;
    if (argc > 6 && strcmp(argv[6], "async") == 0 && tw_log_async_start(1u << 20) != 0)
        return 3;
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++)
        pthread_create(&t[i], NULL, work, (void *)(size_t)i);
    for (int i = 0; i < threads && i < 64; i++)
        pthread_join(t[i], NULL);
    tw_log_shutdown();
    return 0;
}
