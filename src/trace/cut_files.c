/*
 * cut_files.c: a file cut shorter while it is read through mappings.
 * Plain files are read through mappings (tw_trace_options.map_files,
 * filesrc.c): a file cut shorter while it is read faults there, with
 * SIGBUS. tw_trace_catch_cut_files installs a handler that says so in one
 * line, as any unreadable input is said, and ends the process with the
 * caller's exit status, rather than leaving the signal to kill it;
 * tw_trace_reading tells the handler which input that is. A fault that is
 * not a page past a file's end dies of its signal as without the handler.
 * Process-wide, so it is the command's to install (cmd_trace.c), never the
 * library's own doing.
 */
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "trainwatch/trace.h"

static const char *volatile reading; /* the input being read, for the handler */
static int cut_status;               /* what the process exits with after saying so */

static void say(const char *text)
{
    ssize_t n = write(STDERR_FILENO, text, strlen(text));
    (void)n;
}

static void cut_while_mapped(int sig, siginfo_t *info, void *context)
{
    (void)context;
    if (info->si_code != BUS_ADRERR) { /* not a page past the file's end: die of it as without the handler */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    static atomic_flag said = ATOMIC_FLAG_INIT; /* several threads may fault at once: one speaks */
    if (atomic_flag_test_and_set(&said)) {
        for (;;)
            pause(); /* until the one that speaks ends the process */
    }
    const char *path = reading;
    say("trainwatch: ");
    say(path ? path : "an input");
    say(": the file became shorter while it was read\n");
    _exit(cut_status);
}

void tw_trace_catch_cut_files(int exit_status)
{
    cut_status = exit_status;
    struct sigaction sa = {.sa_sigaction = cut_while_mapped, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

void tw_trace_reading(const char *path)
{
    reading = path;
}
