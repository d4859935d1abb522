/*
 * child.c: start, feed and reap the supervised command (see child.h).
 */
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "trainwatch/error.h"

struct tw_child {
    pid_t pid;
    int fd[2];
    bool pty, exited;
    int wait_status, forwarded;
};

/* On a terminal the command gets one too, sized like ours, with output
 * post-processing off so its bytes reach us unchanged. Returns the master
 * side, or -1 when stdout is not a terminal. */
static int open_pty(int *slave)
{
    if (!isatty(STDOUT_FILENO))
        return -1;
    struct winsize ws;
    bool sized = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0;
    int master;
    if (openpty(&master, slave, NULL, NULL, sized ? &ws : NULL) != 0)
        return -1;
    struct termios t;
    if (tcgetattr(*slave, &t) == 0) {
        t.c_oflag &= ~(tcflag_t)OPOST;
        tcsetattr(*slave, TCSANOW, &t);
    }
    fcntl(master, F_SETFD, FD_CLOEXEC);
    fcntl(*slave, F_SETFD, FD_CLOEXEC);
    return master;
}

/* Our ends in c->fd, the command's in write_fd (the same descriptor twice
 * for one stream). */
static int open_output(tw_child *c, bool separate_stderr, int write_fd[2])
{
    int slave = -1, master = open_pty(&slave);
    if (master >= 0) {
        c->pty = true;
        c->fd[0] = master, write_fd[0] = write_fd[1] = slave;
        return TW_OK;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return tw_status_from_errno(errno);
    c->fd[0] = p[0], write_fd[0] = write_fd[1] = p[1];
    if (!separate_stderr)
        return TW_OK;
    if (pipe2(p, O_CLOEXEC) != 0) {
        int rc = tw_status_from_errno(errno);
        close(p[1]);
        return rc;
    }
    c->fd[1] = p[0], write_fd[1] = p[1];
    return TW_OK;
}

/* With a terminal on stdin, the command's group becomes the foreground group
 * so it can read the terminal and Ctrl-C reaches it directly. */
static void foreground(pid_t pgid)
{
    if (!isatty(STDIN_FILENO))
        return;
    void (*old)(int) = signal(SIGTTOU, SIG_IGN);
    tcsetpgrp(STDIN_FILENO, pgid);
    signal(SIGTTOU, old);
}

void tw_child_release_terminal(void)
{
    foreground(getpgrp());
}

/* fork and exec; exec's errno comes back through a close-on-exec pipe. */
static pid_t spawn(char **argv, const int write_fd[2], int *start_errno)
{
    int status_pipe[2];
    if (pipe2(status_pipe, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        *start_errno = errno;
        close(status_pipe[0]);
        close(status_pipe[1]);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        foreground(getpid());
        signal(SIGPIPE, SIG_DFL);
        dup2(write_fd[0], STDOUT_FILENO);
        dup2(write_fd[1], STDERR_FILENO);
        execvp(argv[0], argv);
        int e = errno;
        if (write(status_pipe[1], &e, sizeof e) < 0) {
        }
        _exit(127);
    }
    setpgid(pid, pid);
    close(status_pipe[1]);
    int e = 0;
    ssize_t got = read(status_pipe[0], &e, sizeof e);
    close(status_pipe[0]);
    if (got == (ssize_t)sizeof e) {
        waitpid(pid, NULL, 0);
        *start_errno = e;
        return -1;
    }
    return pid;
}

int tw_child_start(char **argv, bool separate_stderr, tw_child **out, int *start_errno)
{
    *start_errno = 0;
    tw_child *c = calloc(1, sizeof *c);
    if (!c)
        return TW_ENOMEM;
    c->fd[0] = c->fd[1] = -1;
    int write_fd[2] = {-1, -1};
    int rc = open_output(c, separate_stderr, write_fd);
    if (rc == TW_OK) {
        signal(SIGTTOU, SIG_IGN); /* writing to the terminal from the background group */
        c->pid = spawn(argv, write_fd, start_errno);
        if (c->pid < 0)
            rc = tw_status_from_errno(*start_errno ? *start_errno : errno);
    } else {
        *start_errno = errno;
    }
    if (write_fd[0] >= 0)
        close(write_fd[0]);
    if (write_fd[1] >= 0 && write_fd[1] != write_fd[0])
        close(write_fd[1]);
    if (rc != TW_OK) {
        tw_child_free(c);
        return rc;
    }
    *out = c;
    return TW_OK;
}

void tw_child_free(tw_child *c)
{
    if (!c)
        return;
    for (int i = 0; i < 2; i++)
        tw_child_close_fd(c, i);
    free(c);
}

pid_t tw_child_pid(const tw_child *c)
{
    return c->pid;
}
int tw_child_fd(const tw_child *c, int i)
{
    return c->fd[i];
}

void tw_child_close_fd(tw_child *c, int i)
{
    if (c->fd[i] >= 0)
        close(c->fd[i]);
    c->fd[i] = -1;
}

void tw_child_forward(tw_child *c, int sig)
{
    if (c->exited)
        return;
    kill(-c->pid, sig);
    c->forwarded = sig;
}

void tw_child_resize(tw_child *c)
{
    struct winsize ws;
    if (c->pty && c->fd[0] >= 0 && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0)
        ioctl(c->fd[0], TIOCSWINSZ, &ws); /* the kernel tells the command */
}

bool tw_child_reap(tw_child *c)
{
    if (!c->exited && waitpid(c->pid, &c->wait_status, WNOHANG) == c->pid)
        c->exited = true;
    return c->exited;
}

int tw_child_wait_status(const tw_child *c)
{
    return c->wait_status;
}
int tw_child_forwarded(const tw_child *c)
{
    return c->forwarded;
}
