/*
 * log_crash.c: a process that logs and then dies, for the crash-safety
 * tests: log_crash MODE COUNT PATH [async|sync] logs COUNT records to the
 * JSON file PATH (and its text twin PATH.txt), then, by MODE: abort, segv,
 * fpe, bus (raise), or exit normally ("exit").
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/log.h"

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: log_crash abort|segv|fpe|bus|exit COUNT PATH [async|sync]\n");
        return 2;
    }
    int count = atoi(argv[2]);
    char text_path[4096];
    snprintf(text_path, sizeof text_path, "%s.txt", argv[3]);
    tw_log_options o = tw_log_options_default();
    o.console = false;
    o.json_path = argv[3];
    o.file_path = text_path;
    o.async = argc > 4 && strcmp(argv[4], "async") == 0;
    tw_log_setup(&o); /* a file that cannot be opened: said once, its records counted, the run goes on */
    tw_logger *log = tw_logger_get("crash.test");
    for (int i = 0; i < count; i++)
        TW_LOG_INFO(log, "Step", tw_field_int("step", i), tw_field_double("loss", 1.0 / (i + 1)));
    if (strcmp(argv[1], "abort") == 0)
        abort();
    if (strcmp(argv[1], "segv") == 0) {
        volatile uintptr_t address = 8; /* a real fault (not NULL: UBSan would stop first) */
        return *(volatile int *)address;
    }
    if (strcmp(argv[1], "fpe") == 0)
        raise(SIGFPE);
    if (strcmp(argv[1], "bus") == 0)
        raise(SIGBUS);
    tw_log_flush();
    printf("dropped %llu\n", (unsigned long long)tw_log_dropped_total());
    return 0;
}
