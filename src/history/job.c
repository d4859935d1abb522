/*
 * job.c: the job a command is, the name under which `run` records it in
 * the history, so that runs of one training script are compared with each
 * other whatever their arguments (see tw_history_job_of), and how it ended.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "trainwatch/history.h"

/* An argument that names the script a program runs: a .py or .sh file, or
 * a file that exists. */
static bool is_script(const char *arg)
{
    size_t n = strlen(arg);
    struct stat st;
    return arg[0] != '-' && ((n > 3 && (strcmp(arg + n - 3, ".py") == 0 || strcmp(arg + n - 3, ".sh") == 0)) ||
                             (stat(arg, &st) == 0 && S_ISREG(st.st_mode)));
}

const char *tw_history_job_of(char *const *argv, char *buf, size_t cap)
{
    const char *slash = strrchr(argv[0], '/');
    const char *program = slash ? slash + 1 : argv[0];
    for (int i = 1; argv[i]; i++) {
        if (strcmp(argv[i], "-m") == 0 && argv[i + 1]) {
            snprintf(buf, cap, "%s -m %s", program, argv[i + 1]);
            return buf;
        }
        if (is_script(argv[i])) {
            slash = strrchr(argv[i], '/');
            snprintf(buf, cap, "%s %s", program, slash ? slash + 1 : argv[i]);
            return buf;
        }
    }
    snprintf(buf, cap, "%s", program);
    return buf;
}

const char *tw_history_outcome_of(int status, char *buf, size_t cap)
{
    if (status > 128)
        snprintf(buf, cap, "signal %d", status - 128);
    else
        snprintf(buf, cap, "exit %d", status);
    return buf;
}
