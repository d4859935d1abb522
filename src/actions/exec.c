/*
 * exec.c: an exec: action's command, on a thread of its own so a slow or
 * hanging command never holds up the evaluation. The command runs without
 * a shell (the words as configured), in its own process group, stdin from
 * /dev/null, its output read into the supervisor's log a line at a time
 * (the first lines only), and killed with its group at the time limit.
 */
#include "actions_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/say.h"
#include "trainwatch/error.h"

#define OUTPUT_LINES_MAX 40
#define LINE_MAX_BYTES 1024

struct tw_exec_job {
    tw_actions *owner;
    pthread_t thread;
    char **argv, **env;
    double timeout;
    tw_exec_done_fn done;
    void *arg;
    pid_t pid;
    bool finished, kill;
    tw_exec_job *next;
};

static void free_strings(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

static char **copy_strings(char *const *v)
{
    size_t n = 0;
    while (v[n])
        n++;
    char **out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++) {
        if (!(out[i] = strdup(v[i]))) {
            free_strings(out);
            return NULL;
        }
    }
    return out;
}

static int spawn(tw_exec_job *j, int *out_fd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return errno;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, p[1], STDERR_FILENO);
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE); /* ignored here; the command gets the default */
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    int rc = posix_spawnp(&j->pid, j->argv[0], &fa, &attr, j->argv, j->env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(p[1]);
    if (rc != 0) {
        close(p[0]);
        return rc;
    }
    *out_fd = p[0];
    return 0;
}

/* Reads the command's output into the log until it closes it or the time
 * is up; true when the time ran out. */
static bool read_output(tw_exec_job *j, int fd, double deadline)
{
    const char *name = j->owner->name;
    char line[LINE_MAX_BYTES];
    size_t len = 0;
    int lines = 0;
    for (;;) {
        double left = deadline - tw_monotonic_clock();
        if (left <= 0 || __atomic_load_n(&j->kill, __ATOMIC_ACQUIRE))
            return true;
        struct pollfd p = {fd, POLLIN, 0};
        int ready = poll(&p, 1, (int)(left > 0.2 ? 200 : left * 1000 + 1));
        if (ready < 0 && errno != EINTR)
            return false;
        if (ready <= 0)
            continue;
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            bool end = buf[i] == '\n';
            if (!end && len < sizeof line - 1)
                line[len++] = buf[i];
            if ((end || len == sizeof line - 1) && lines++ < OUTPUT_LINES_MAX) {
                line[len] = '\0';
                tw_say(TW_SAY_INFO, name, "action exec %s: %s", j->argv[0], line);
            }
            if (end || len == sizeof line - 1)
                len = 0;
        }
    }
    if (len && lines++ < OUTPUT_LINES_MAX) {
        line[len] = '\0';
        tw_say(TW_SAY_INFO, name, "action exec %s: %s", j->argv[0], line);
    }
    if (lines > OUTPUT_LINES_MAX)
        tw_say(TW_SAY_INFO, name, "action exec %s: %d more lines not shown", j->argv[0], lines - OUTPUT_LINES_MAX);
    return false;
}

static void *run_job(void *arg)
{
    tw_exec_job *j = arg;
    int fd = -1;
    int err = spawn(j, &fd);
    char detail[256];
    const char *result = "failed";
    if (err) {
        snprintf(detail, sizeof detail, "%s: %s", j->argv[0], strerror(err));
    } else {
        double deadline = tw_monotonic_clock() + j->timeout;
        bool late = read_output(j, fd, deadline);
        close(fd);
        int status = 0;
        /* its output closed; it may still run (a daemon): to the deadline */
        while (!late && waitpid(j->pid, &status, WNOHANG) == 0) {
            late = tw_monotonic_clock() >= deadline || __atomic_load_n(&j->kill, __ATOMIC_ACQUIRE);
            if (!late)
                usleep(20000);
        }
        if (late) {
            kill(-j->pid, SIGKILL);
            while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR)
                ;
        }
        if (late && __atomic_load_n(&j->kill, __ATOMIC_ACQUIRE)) {
            result = "killed";
            snprintf(detail, sizeof detail, "still running at the end of the run");
        } else if (late) {
            result = "timeout";
            snprintf(detail, sizeof detail, "killed after %.0f s", j->timeout);
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            result = "done";
            snprintf(detail, sizeof detail, "exit status 0");
        } else if (WIFEXITED(status)) {
            snprintf(detail, sizeof detail, "exit status %d", WEXITSTATUS(status));
        } else {
            snprintf(detail, sizeof detail, "killed by signal %d", WTERMSIG(status));
        }
    }
    j->done(j->arg, result, detail);
    __atomic_store_n(&j->finished, true, __ATOMIC_RELEASE);
    return NULL;
}

int tw_exec_start(tw_actions *a, char *const *argv, char **env, double timeout, tw_exec_done_fn done, void *arg)
{
    pthread_mutex_lock(&a->lock);
    int running = 0;
    for (tw_exec_job *j = a->jobs; j; j = j->next)
        running += !__atomic_load_n(&j->finished, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&a->lock);
    if (running >= TW_EXEC_RUNNING_MAX) {
        free_strings(env);
        return TW_ELIMIT;
    }
    tw_exec_job *j = calloc(1, sizeof *j);
    char **words = j ? copy_strings(argv) : NULL;
    if (!words) {
        free(j);
        free_strings(env);
        return TW_ENOMEM;
    }
    j->owner = a;
    j->argv = words;
    j->env = env;
    j->timeout = timeout;
    j->done = done;
    j->arg = arg;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the supervisor's signals stay with the main thread */
    int rc = pthread_create(&j->thread, NULL, run_job, j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        free_strings(j->argv);
        free_strings(j->env);
        free(j);
        return TW_ENOMEM;
    }
    pthread_mutex_lock(&a->lock);
    j->next = a->jobs;
    a->jobs = j;
    pthread_mutex_unlock(&a->lock);
    return TW_OK;
}

void tw_exec_reap(tw_actions *a, bool kill)
{
    pthread_mutex_lock(&a->lock);
    tw_exec_job **link = &a->jobs;
    while (*link) {
        tw_exec_job *j = *link;
        if (kill)
            __atomic_store_n(&j->kill, true, __ATOMIC_RELEASE);
        if (!kill && !__atomic_load_n(&j->finished, __ATOMIC_ACQUIRE)) {
            link = &j->next;
            continue;
        }
        *link = j->next;
        pthread_mutex_unlock(&a->lock); /* the job's done() takes the lock */
        pthread_join(j->thread, NULL);
        free_strings(j->argv);
        free_strings(j->env);
        free(j);
        pthread_mutex_lock(&a->lock);
        link = &a->jobs;
    }
    pthread_mutex_unlock(&a->lock);
}
