/*
 * control.c: the native half of the control channel `trainwatch run` opens
 * to a training process (docs/python.md, "Control channel"; protocol v1):
 *
 * - requests: control_poll() is called at every step boundary, so its common
 *   case (nothing new) is one fstat() and a compare of st_size with the
 *   offset read so far. New bytes are read with pread(); complete lines go
 *   back as str for Python to json.loads, a partial line waits for the rest.
 * - replies: control_reply(line) appends one JSON line to PATH.ack with one
 *   write() (O_APPEND: lines of several ranks never interleave); a failed
 *   write drops the line and counts it.
 * - stack dumps: faulthandler writes into a pipe whose write end is
 *   O_NONBLOCK (a signal handler must never block); a native pthread, not a
 *   Python thread, reads it, so a rank stuck in C code that holds the GIL
 *   still gets its dump out. It collects one dump until the pipe has been
 *   quiet for 50 ms and writes it as ONE record to the loggers Python named
 *   (control_log_to), else to stderr with a header line.
 *
 * The state is the process's (one request file, one signal), so it lives in
 * C statics, none of them Python objects. After fork() the child drops all
 * of it (pthread_atfork): it has no reader thread, must not answer for its
 * parent, and the fd faulthandler writes to becomes stderr there.
 *
 * The trade-off: a record holds at most 16 KiB (libtrainwatch's line limit),
 * so a dump larger than that keeps the signalled thread and the oldest
 * threads (the main one is last in faulthandler's text) and says how many it
 * left out, rather than being cut mid-frame.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "native.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trainwatch/log.h"

#define READ_MAX     (1 << 20) /* bytes read per poll at most; the rest next time */
#define LINE_KEEP    4096      /* a request line longer than this is kept cut (and is then malformed) */
#define DUMP_MAX     (1 << 20) /* bytes of one dump collected; the rest is counted */
#define DUMP_QUIET   50        /* ms of silence that end a dump */
#define RECORD_BUDGET 12000    /* stack text per record (the record line is capped at 16 KiB, JSON escapes \n) */
#define TARGETS_MAX  8

/* ---- requests ------------------------------------------------------------------- */

static int request_fd = -1;
static off_t request_offset;
static char partial[LINE_KEEP];
static size_t partial_len;
static int partial_overlong; /* the line under way passed LINE_KEEP: drop until its newline */
static char ack_path[4096];
static int ack_fd = -1;
static atomic_uint_fast64_t read_errors, replies_dropped, dumps_written, dump_bytes_dropped;
static atomic_int forked_child;
static atomic_int dump_busy; /* the reader holds a dump not yet written */

static void after_fork_child(void);

static void atfork_once(void)
{
    static int done;
    if (!done) {
        done = 1;
        pthread_atfork(NULL, NULL, after_fork_child);
    }
}

static PyObject *py_control_open(PyObject *m, PyObject *args)
{
    (void)m;
    const char *path;
    if (!PyArg_ParseTuple(args, "s:control_open", &path))
        return NULL;
    if (strlen(path) + 5 > sizeof ack_path)
        return PyErr_Format(PyExc_ValueError, "%s: path too long", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
    if (request_fd >= 0)
        close(request_fd);
    request_fd = fd;
    request_offset = 0;
    partial_len = 0;
    partial_overlong = 0;
    snprintf(ack_path, sizeof ack_path, "%s.ack", path);
    atomic_store(&forked_child, 0);
    atfork_once();
    Py_RETURN_NONE;
}

/* Appends len bytes to the line being put together in `partial`; past its
 * size the rest of the line is dropped (the record is cut, never the
 * neighbour). */
static void hold(const char *data, size_t len)
{
    size_t room = sizeof partial - partial_len;
    if (partial_overlong)
        return;
    if (len > room) {
        len = room;
        partial_overlong = 1;
    }
    memcpy(partial + partial_len, data, len);
    partial_len += len;
}

/* Adds the complete lines of buf to out; the tail without a newline waits
 * in `partial`. */
static int split_lines(const char *buf, size_t n, PyObject *out)
{
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n')
            continue;
        hold(buf + start, i - start);
        PyObject *s = PyUnicode_DecodeUTF8(partial, (Py_ssize_t)partial_len, "replace");
        partial_len = 0;
        partial_overlong = 0;
        if (!s || PyList_Append(out, s) < 0) {
            Py_XDECREF(s);
            return -1;
        }
        Py_DECREF(s);
        start = i + 1;
    }
    hold(buf + start, n - start);
    return 0;
}

static PyObject *read_errno(void)
{
    atomic_fetch_add(&read_errors, 1);
    return PyErr_SetFromErrnoWithFilename(PyExc_OSError, ack_path[0] ? "the control request file" : NULL);
}

/* None when nothing new (the step-boundary case: one fstat), else the new
 * complete lines as a list of str. OSError on a failed read (counted). */
static PyObject *py_control_poll(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    if (request_fd < 0)
        Py_RETURN_NONE;
    struct stat sb;
    if (fstat(request_fd, &sb) != 0)
        return read_errno();
    if (sb.st_size == request_offset)
        Py_RETURN_NONE;
    if (sb.st_size < request_offset) { /* truncated: the supervisor only appends; start over (ids are acted on once) */
        request_offset = 0;
        partial_len = 0;
        partial_overlong = 0;
    }
    size_t want = (size_t)(sb.st_size - request_offset);
    if (want > READ_MAX)
        want = READ_MAX;
    char *buf = PyMem_Malloc(want);
    if (!buf)
        return PyErr_NoMemory();
    size_t got = 0;
    while (got < want) {
        ssize_t r = pread(request_fd, buf + got, want - got, request_offset + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            PyMem_Free(buf);
            return read_errno();
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    request_offset += (off_t)got;
    PyObject *out = PyList_New(0);
    if (out && split_lines(buf, got, out) < 0)
        Py_CLEAR(out);
    PyMem_Free(buf);
    return out;
}

/* ---- replies -------------------------------------------------------------------- */

static int reply_write(const char *line, size_t n)
{
    if (atomic_load(&forked_child) || !ack_path[0])
        return -1;
    if (ack_fd < 0)
        ack_fd = open(ack_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (ack_fd < 0)
        return -1;
    ssize_t w;
    do
        w = write(ack_fd, line, n);
    while (w < 0 && errno == EINTR);
    return w == (ssize_t)n ? 0 : -1;
}

/* control_reply(json_line) -> bool: one write() of the line (a newline is
 * added); False when it was dropped (counted). */
static PyObject *py_control_reply(PyObject *m, PyObject *arg)
{
    (void)m;
    Py_ssize_t n;
    const char *text = PyUnicode_AsUTF8AndSize(arg, &n);
    if (!text)
        return NULL;
    char stack_buf[1024];
    char *line = (size_t)n + 1 <= sizeof stack_buf ? stack_buf : PyMem_Malloc((size_t)n + 1);
    if (!line)
        return PyErr_NoMemory();
    memcpy(line, text, (size_t)n);
    line[n] = '\n';
    int rc = reply_write(line, (size_t)n + 1);
    if (line != stack_buf)
        PyMem_Free(line);
    if (rc < 0) {
        atomic_fetch_add(&replies_dropped, 1);
        Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* ---- stack dumps ---------------------------------------------------------------- */

typedef struct dump_target {
    tw_logger *text, *json;
    char name[64];
} dump_target;

static pthread_mutex_t targets_lock = PTHREAD_MUTEX_INITIALIZER;
static dump_target targets[TARGETS_MAX];
static size_t target_count;
static int pipe_read = -1, pipe_write = -1;
static char signal_name[32];
static int dump_rank;

/* The dump's thread sections, as faulthandler starts them. */
static int section_start(const char *p)
{
    return strncmp(p, "Thread 0x", 9) == 0 || strncmp(p, "Current thread 0x", 17) == 0;
}

/* Fits text into RECORD_BUDGET bytes by whole thread sections: the
 * signalled thread ("Current thread") first, then from the last section
 * (the oldest thread, usually the main one) back. Writes to out (of
 * RECORD_BUDGET + 128 bytes); returns its length. */
static size_t dump_fit(const char *text, size_t n, char *out)
{
    enum { SECTIONS_MAX = 128 };
    size_t start[SECTIONS_MAX + 1], count = 0;
    for (size_t i = 0; i < n && count < SECTIONS_MAX; i++)
        if ((i == 0 || text[i - 1] == '\n') && section_start(text + i))
            start[count++] = i;
    if (count == 0 || start[0] != 0) { /* not faulthandler's shape: the head, cut at a line */
        size_t k = RECORD_BUDGET;
        while (k > 0 && text[k - 1] != '\n')
            k--;
        if (k == 0)
            k = RECORD_BUDGET;
        memcpy(out, text, k);
        return k + (size_t)snprintf(out + k, 128, "... (%zu more bytes left out)", n - k);
    }
    start[count] = n;
    unsigned char keep[SECTIONS_MAX] = {0};
    size_t used = 0, left_out = 0;
    for (size_t s = 0; s < count; s++)
        if (strncmp(text + start[s], "Current", 7) == 0 && start[s + 1] - start[s] <= RECORD_BUDGET) {
            keep[s] = 1;
            used += start[s + 1] - start[s];
        }
    for (size_t s = count; s-- > 0;) {
        size_t len = start[s + 1] - start[s];
        if (!keep[s] && used + len <= RECORD_BUDGET) {
            keep[s] = 1;
            used += len;
        }
    }
    size_t o = 0;
    for (size_t s = 0; s < count; s++) {
        if (keep[s]) {
            memcpy(out + o, text + start[s], start[s + 1] - start[s]);
            o += start[s + 1] - start[s];
        } else {
            left_out++;
        }
    }
    if (o > 0 && out[o - 1] != '\n')
        out[o++] = '\n';
    return o + (size_t)snprintf(out + o, 128, "(%zu threads left out: one record holds 16 KiB)", left_out);
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void dump_emit(char *text, size_t n)
{
    while (n > 0 && text[n - 1] == '\n')
        n--;
    char message[64];
    snprintf(message, sizeof message, "stack dump (signal %s)", signal_name);
    pthread_mutex_lock(&targets_lock);
    size_t count = target_count;
    dump_target local[TARGETS_MAX];
    memcpy(local, targets, sizeof local);
    pthread_mutex_unlock(&targets_lock);
    if (count == 0) {
        char header[128];
        int h = snprintf(header, sizeof header, "trainwatch: stack dump rank=%d pid=%ld (signal %s)\n", dump_rank,
                         (long)getpid(), signal_name);
        write_all(2, header, (size_t)h);
        write_all(2, text, n);
        write_all(2, "\n", 1);
        atomic_fetch_add(&dumps_written, 1);
        return;
    }
    static char fitted[RECORD_BUDGET + 128];
    static char joined[RECORD_BUDGET + 256];
    const char *stacks = text;
    if (n > RECORD_BUDGET) {
        n = dump_fit(text, n, fitted);
        stacks = fitted;
    } else {
        text[n] = '\0';
    }
    snprintf(joined, sizeof joined, "%s\n%.*s", message, (int)n, stacks);
    tw_log_field field = tw_field_str("stacks", stacks);
    for (size_t i = 0; i < count; i++) {
        tw_log_write_as(local[i].text, local[i].name, TW_LEVEL_WARNING, "trainwatch/control.c", "dump_stacks", 0,
                        joined, NULL, 0);
        tw_log_write_as(local[i].json, local[i].name, TW_LEVEL_WARNING, "trainwatch/control.c", "dump_stacks", 0,
                        message, &field, 1);
    }
    tw_log_flush();
    atomic_fetch_add(&dumps_written, 1);
}

/* The reader: one dump is what arrives until the pipe is quiet DUMP_QUIET ms. */
static void *dump_main(void *arg)
{
    (void)arg;
    char *buf = malloc(DUMP_MAX + 1);
    char drop[4096];
    if (!buf)
        return NULL;
    for (;;) {
        size_t n = 0;
        ssize_t r = read(pipe_read, buf, DUMP_MAX);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n = (size_t)r;
        atomic_store(&dump_busy, 1);
        struct pollfd p = {pipe_read, POLLIN, 0};
        for (;;) {
            int ready = poll(&p, 1, DUMP_QUIET);
            if (ready < 0 && errno == EINTR)
                continue;
            if (ready <= 0)
                break;
            r = n < DUMP_MAX ? read(pipe_read, buf + n, DUMP_MAX - n) : read(pipe_read, drop, sizeof drop);
            if (r <= 0)
                break;
            if (n < DUMP_MAX)
                n += (size_t)r;
            else
                atomic_fetch_add(&dump_bytes_dropped, (uint_fast64_t)r);
        }
        dump_emit(buf, n);
        atomic_store(&dump_busy, 0);
    }
    free(buf);
    return NULL;
}

/* control_stacks_start(signum, name, rank) -> the fd for faulthandler.register. */
static PyObject *py_control_stacks_start(PyObject *m, PyObject *args)
{
    (void)m;
    int signum, rank;
    const char *name;
    if (!PyArg_ParseTuple(args, "isi:control_stacks_start", &signum, &name, &rank))
        return NULL;
    if (pipe_write >= 0 && !atomic_load(&forked_child))
        return PyLong_FromLong(pipe_write);
    snprintf(signal_name, sizeof signal_name, "%s", name);
    dump_rank = rank;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
    (void)fcntl(fds[1], F_SETPIPE_SZ, DUMP_MAX); /* best effort: a full pipe cuts the dump, never blocks */
    pipe_read = fds[0];
    pipe_write = fds[1];
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the reader never takes a signal: faulthandler runs elsewhere */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int rc = pthread_create(&t, &attr, dump_main, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        close(fds[0]);
        close(fds[1]);
        pipe_read = pipe_write = -1;
        errno = rc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    atfork_once();
    return PyLong_FromLong(pipe_write);
}

/* control_log_to(router, name): dumps go to this router's sinks as records
 * of logger `name` (again with the same router: the name is updated). */
static PyObject *py_control_log_to(PyObject *m, PyObject *args)
{
    PyObject *router;
    const char *name;
    if (!PyArg_ParseTuple(args, "Os:control_log_to", &router, &name))
        return NULL;
    tw_logger *text, *json;
    if (tw_py_router_loggers(tw_py_state_of_module(m), router, &text, &json) < 0)
        return NULL;
    pthread_mutex_lock(&targets_lock);
    size_t i = 0;
    while (i < target_count && targets[i].text != text)
        i++;
    if (i < TARGETS_MAX) {
        targets[i].text = text;
        targets[i].json = json;
        snprintf(targets[i].name, sizeof targets[i].name, "%s", name);
        if (i == target_count)
            target_count++;
    }
    pthread_mutex_unlock(&targets_lock);
    return PyBool_FromLong(i < TARGETS_MAX);
}

/* control_drain(): at exit, waits (up to 500 ms, the GIL released) for a
 * dump under way, so a process that ends right after the signal still gets
 * its dump out. */
static PyObject *py_control_drain(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    if (pipe_read < 0 || atomic_load(&forked_child))
        Py_RETURN_NONE;
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < 100; i++) {
        struct pollfd p = {pipe_read, POLLIN, 0};
        if (!atomic_load(&dump_busy) && poll(&p, 1, 0) == 0)
            break;
        usleep(5000);
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_control_stats(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return Py_BuildValue("{sKsKsKsK}", "read_errors", (unsigned long long)atomic_load(&read_errors), "replies_dropped",
                         (unsigned long long)atomic_load(&replies_dropped), "dumps",
                         (unsigned long long)atomic_load(&dumps_written), "dump_bytes_dropped",
                         (unsigned long long)atomic_load(&dump_bytes_dropped));
}

/* In a forked child: no requests, no replies, no reader thread. The fd
 * faulthandler holds stays valid (a closed one could be reused by a file
 * the child opens and receive a dump): it becomes stderr. Only
 * async-signal-safe calls here. */
static void after_fork_child(void)
{
    atomic_store(&forked_child, 1);
    if (request_fd >= 0)
        close(request_fd);
    request_fd = -1;
    if (ack_fd >= 0)
        close(ack_fd);
    ack_fd = -1;
    if (pipe_read >= 0)
        close(pipe_read);
    pipe_read = -1;
    if (pipe_write >= 0)
        dup3(2, pipe_write, O_CLOEXEC);
}

static PyObject *py_control_forked(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return PyBool_FromLong(atomic_load(&forked_child));
}

static PyMethodDef control_functions[] = {
    {"control_open", py_control_open, METH_VARARGS, "control_open(path): opens the request file (read only)"},
    {"control_poll", py_control_poll, METH_NOARGS,
     "control_poll() -> None (nothing new: one fstat) or the new complete request lines"},
    {"control_reply", py_control_reply, METH_O, "control_reply(json_line) -> bool: one write() to PATH.ack"},
    {"control_stacks_start", py_control_stacks_start, METH_VARARGS,
     "control_stacks_start(signum, name, rank) -> fd: the pipe faulthandler writes dumps to"},
    {"control_log_to", py_control_log_to, METH_VARARGS, "control_log_to(router, name): where dumps are logged"},
    {"control_drain", py_control_drain, METH_NOARGS, "at exit: waits for a dump under way (500 ms at most)"},
    {"control_stats", py_control_stats, METH_NOARGS, "counters of the control channel"},
    {"control_forked", py_control_forked, METH_NOARGS, "True in a child forked after the channel opened"},
    {NULL, NULL, 0, NULL},
};

int tw_py_control_init(PyObject *m, tw_py_state *st)
{
    (void)st;
    return PyModule_AddFunctions(m, control_functions);
}
