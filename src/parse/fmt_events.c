/*
 * fmt_events.c: the things that happen to a run, in any framework's words.
 *
 * Python tracebacks (the last frame and the "Type: message" line), Paddle's
 * "C++ Traceback" / "Error Message Summary" blocks and FatalError signal
 * reports, out-of-memory errors (Paddle ResourceExhaustedError, CUDA OOM,
 * std::bad_alloc), FLAGS_check_nan_inf output, checkpoints saved, resumes,
 * warnings, process exits, "training finished" markers and the lines that
 * start a launch (an environment banner, the launcher's arguments), the
 * launchers' reports of ranks (events_launchers.c) and faulthandler's
 * all-threads stack dumps (stacks.h).
 *
 * Multi-line blocks are tracked in a small state machine; everything else is
 * a keyword search. This format sees every line no step format claimed, so
 * the common case (no keyword) must stay a handful of memmem calls.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "events.h"
#include "keywords.h"

static bool contains_any(const char *s, size_t len, const char *const *needles, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (tw_find(s, len, needles[i]))
            return true;
    }
    return false;
}

static bool is_oom_text(const char *s, size_t len)
{
    static const char *const oom[] = {
        "Out of memory",  "out of memory",      "ResourceExhaustedError",    "OutOfMemoryError",
        "std::bad_alloc", "RESOURCE_EXHAUSTED", "CUBLAS_STATUS_ALLOC_FAILED"};
    return contains_any(s, len, oom, sizeof oom / sizeof oom[0]);
}

/* "Name: message" or "Name" where Name is a dotted identifier, the shape of
 * the last line of a Python traceback. */
static bool is_exception_line(const char *s, size_t len)
{
    size_t i = 0;
    if (len == 0 || !(tw_is_alpha(s[0]) || s[0] == '_'))
        return false;
    while (i < len && (tw_is_alpha(s[i]) || tw_is_digit(s[i]) || s[i] == '_' || s[i] == '.'))
        i++;
    return i == len || s[i] == ':';
}

static int parse_signal_number(const char *s, size_t len)
{
    static const struct {
        const char *name;
        int number;
    } names[] = {{"SIGTERM", 15}, {"SIGKILL", 9}, {"SIGSEGV", 11}, {"SIGABRT", 6},
                 {"SIGINT", 2},   {"SIGBUS", 7},  {"SIGFPE", 8},   {"SIGHUP", 1}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (tw_find(s, len, names[i].name))
            return names[i].number;
    }
    const char *g = tw_find(s, len, "got signal: ");
    long long v;
    if (g && tw_scan_uint(g + 12, s + len, &v))
        return (int)v;
    return 0;
}

/* "Name:" with nothing after it: Paddle's error blocks put the message on
 * the next line that is not blank ("ResourceExhaustedError: \n\nOut of
 * memory error on GPU 0. Cannot allocate ..."). */
static bool message_follows(const char *s, size_t len)
{
    const char *colon = memchr(s, ':', len);
    if (!colon)
        return false;
    for (const char *c = colon + 1; c < s + len; c++) {
        if (!tw_is_blank(*c))
            return false;
    }
    return (size_t)(colon - s) < TW_NAME_MAX;
}

/* A CUDA error that only reports an earlier device-side assertion. */
static bool reports_assertion(const char *s, size_t len)
{
    static const char *const words[] = {
        "device-side assert",         "CUDA error(710)",      "CUDA error(719)", "CUDA error(700)",
        "unspecified launch failure", "illegal memory access"};
    return contains_any(s, len, words, sizeof words / sizeof words[0]);
}

/* "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1141: indexSelectLargeIndex:
 * block: [0,0,0], thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize`
 * failed." kept as "Indexing.cu:1141: indexSelectLargeIndex: Assertion
 * `srcIndex < srcSelectDimSize` failed." */
static void note_assertion(events_state *st, const tw_line *line)
{
    const char *s = line->text;
    size_t len = line->len;
    const char *assertion = tw_find(s, len, "Assertion `");
    if (!assertion || !tw_find(assertion, (size_t)(s + len - assertion), "failed"))
        return;
    size_t head = (size_t)(assertion - s); /* the kernel's file comes before the assertion */
    const char *cu = tw_find(s, head, ".cu:");
    if (!cu)
        cu = tw_find(s, head, ".cuh:");
    if (!cu)
        cu = tw_find(s, head, ".cu.h:");
    if (!cu)
        return;
    const char *file = cu;
    while (file > s && file[-1] != '/' && file[-1] != ' ')
        file--;
    const char *block = tw_find(file, (size_t)(assertion - file), "block: [");
    const char *head_end = block ? block : assertion;
    while (head_end > file && tw_is_blank(head_end[-1]))
        head_end--;
    char text[TW_MESSAGE_MAX];
    snprintf(text, sizeof text, "%.*s %.*s", (int)(head_end - file), file, (int)(s + len - assertion), assertion);
    tw_record_set_text(st->assertion, text, strlen(text));
    st->assertion_line = line->source.line;
}

/* A frame of the user's own code: not in an installed package, the
 * standard library or the interpreter's frozen modules. */
static bool is_user_frame(const char *s, size_t len)
{
    static const char *const outside[] = {"site-packages", "dist-packages", "/lib/python", "<frozen",
                                          "\"<string>\"",  "/usr/lib/",     "\\lib\\"};
    return !contains_any(s, len, outside, sizeof outside / sizeof outside[0]);
}

/* The detail of an exception: its last frame, and the deepest frame of the
 * user's code after TW_USER_FRAME when that is another one. */
static void frames(const events_state *st, char *out, size_t cap)
{
    if (st->user_frame[0] && strcmp(st->user_frame, st->frame) != 0)
        snprintf(out, cap, "%s%s%s", st->frame, TW_USER_FRAME, st->user_frame);
    else
        snprintf(out, cap, "%s", st->frame);
}

static int emit_exception(tw_parser *p, events_state *st, const tw_line *line, const char *s, size_t len)
{
    char detail[2 * TW_MESSAGE_MAX + 32]; /* cut to TW_MESSAGE_MAX by emit_event */
    frames(st, detail, sizeof detail);
    char caused[2 * TW_MESSAGE_MAX + 64]; /* cut to TW_MESSAGE_MAX by emit_event */
    tw_line at_assertion;
    st->name_held = NAME_NOT_HELD; /* this is the error a held name was waiting for */
    if (st->assertion[0] && reports_assertion(s, len)) {
        /* the assertion is the error, at its line; the CUDA error only reports it */
        snprintf(caused, sizeof caused, "CUDA device-side assertion: %s (reported as: %.*s)", st->assertion, (int)len,
                 s);
        s = caused;
        len = strnlen(caused, sizeof caused - 1);
        st->assertion[0] = '\0';
        if (line && st->assertion_line <= line->source.line && line->source.line - st->assertion_line < 1000) {
            at_assertion = *line; /* (a parser renumbered in between keeps the error's line) */
            at_assertion.source.line = st->assertion_line;
            line = &at_assertion;
        }
    }
    int n = tw_events_emit(p, line, TW_EV_EXCEPTION, s, len, detail, 0);
    if (is_oom_text(s, len))
        n += tw_events_emit(p, line, TW_EV_OOM, s, len, detail, 0);
    return n;
}

static bool blank_line(const tw_line *line)
{
    for (size_t i = 0; i < line->len; i++) {
        if (!tw_is_blank(line->text[i]) && line->text[i] != '\r')
            return false;
    }
    return true;
}

/* The line after "Name:" that carries its message: emitted together, citing
 * the message's line. A line that starts another block instead (or the end
 * of the log, line NULL) leaves the name alone, and the line is read as
 * usual (returns 0). */
static int awaited_message(tw_parser *p, events_state *st, const tw_line *line)
{
    if (line && blank_line(line))
        return -1;
    st->await_message = false;
    bool message = line && !tw_starts_with(line->text, line->len, "---") &&
                   !tw_starts_with(line->text, line->len, "C++ Traceback") &&
                   !tw_starts_with(line->text, line->len, "Error Message Summary") &&
                   !tw_starts_with(line->text, line->len, "Traceback (most recent call last)");
    if (!message && line && !tw_starts_with(line->text, line->len, "Traceback (most recent call last)")) {
        /* Paddle's "MemoryError: " then its C++ block: the message is the
         * summary's error ("ResourceExhaustedError: ..."), which takes these
         * frames; the name alone is said only if that error never comes */
        st->name_held = tw_starts_with(line->text, line->len, "---") ? NAME_HELD_TENTATIVE : NAME_HELD;
        return 0;
    }
    char text[TW_MESSAGE_MAX];
    if (message) {
        size_t skip = 0;
        while (skip < line->len && tw_is_blank(line->text[skip]))
            skip++;
        snprintf(text, sizeof text, "%s %.*s", st->pending_name, (int)(line->len - skip), line->text + skip);
    } else {
        snprintf(text, sizeof text, "%s", st->pending_name);
    }
    int n = emit_exception(p, st, line, text, strnlen(text, sizeof text - 1));
    st->frame[0] = '\0';
    st->user_frame[0] = '\0';
    return message ? n : 0;
}

/* A held name whose error never came (the block ended without one, another
 * traceback began, the log ended): said as it was, with its frames, at its
 * own line and time (unless a parser renumbered lines in between). */
static int release_held(tw_parser *p, events_state *st, const tw_line *line)
{
    if (!st->name_held)
        return 0;
    tw_line at = {.text = st->pending_name,
                  .len = strlen(st->pending_name),
                  .source = st->name_source,
                  .has_time = st->name_has_time,
                  .time = st->name_time,
                  .rank = line ? line->rank : -1};
    at.body = at.text, at.body_len = at.len;
    bool own = !line || (line->source.file == st->name_source.file && st->name_source.line <= line->source.line);
    int n = emit_exception(p, st, own ? &at : line, st->pending_name, strlen(st->pending_name));
    st->frame[0] = '\0';
    st->user_frame[0] = '\0';
    return n;
}

/* The lines after an NCCL error: "ncclSystemError: ...", "Last error:",
 * then the cause ("socket: Address family not supported by protocol"),
 * which is put first in the message. Another line ends the wait: the error
 * is emitted as it was and the line read as usual (returns 0). */
static int nccl_lines(tw_parser *p, events_state *st, const tw_line *line)
{
    if (line && (blank_line(line) || tw_starts_with(line->text, line->len, "nccl")))
        return -1;
    if (line && st->nccl == 1 && tw_starts_with(line->text, line->len, "Last error:")) {
        st->nccl = 2;
        return -1;
    }
    char text[2 * TW_MESSAGE_MAX + 32];
    bool cause = line && st->nccl == 2;
    if (cause)
        snprintf(text, sizeof text, "NCCL error: %.*s (reported as: %s)", (int)line->len, line->text, st->held);
    else
        snprintf(text, sizeof text, "%s", st->held);
    st->nccl = 0;
    int n = emit_exception(p, st, line, text, strnlen(text, sizeof text - 1));
    st->frame[0] = '\0';
    st->user_frame[0] = '\0';
    return cause ? n : 0;
}

static int exception_line(tw_parser *p, events_state *st, const tw_line *line)
{
    const char *s = line->text;
    size_t len = line->len;
    if (tw_find(s, len, "NCCL error")) {
        tw_record_set_text(st->held, s, len);
        st->nccl = 1;
        st->block = BLOCK_NONE;
        return -1;
    }
    if (message_follows(s, len)) {
        size_t name = (size_t)((const char *)memchr(s, ':', len) - s) + 1;
        memcpy(st->pending_name, s, name);
        st->pending_name[name] = '\0';
        st->await_message = true;
        st->name_source = line->source;
        st->name_has_time = line->has_time;
        st->name_time = line->time;
        st->block = BLOCK_NONE;
        return -1;
    }
    int n = emit_exception(p, st, line, s, len);
    if (tw_find(s, len, "SignalException") || tw_find(s, len, "got signal")) {
        int sig = parse_signal_number(s, len);
        n += tw_events_emit(p, line, TW_EV_SIGNAL, s, len, st->frame, sig);
    }
    st->block = BLOCK_NONE;
    st->frame[0] = '\0';
    st->user_frame[0] = '\0';
    return n;
}

/* The signal's message, with who sent it and when where Paddle says so:
 * "... operating system. [SIGTERM from PID 1136560 at 2023-08-04 12:53:56 UTC]"
 * (the victims of another rank's failure get the launcher's SIGTERM, all
 * from the same PID within a second or two). */
static int flush_signal(tw_parser *p, events_state *st, const tw_line *line, int sig)
{
    if (!st->signal_pending)
        return 0;
    st->signal_pending = false;
    char msg[TW_MESSAGE_MAX];
    size_t n = (size_t)snprintf(msg, sizeof msg, "%s", st->signal_message);
    long long pid = 0;
    const char *from = line ? tw_find(line->text, line->len, "from PID ") : NULL;
    if (from)
        tw_scan_uint(from + 9, line->text + line->len, &pid);
    if ((pid > 0 || st->aborted_at > 0) && n < sizeof msg) {
        n += (size_t)snprintf(msg + n, sizeof msg - n, " [%s", sig == 15 ? "SIGTERM" : sig == 9 ? "SIGKILL" : "signal");
        if (pid > 0 && n < sizeof msg)
            n += (size_t)snprintf(msg + n, sizeof msg - n, " from PID %lld", pid);
        if (st->aborted_at > 0 && n < sizeof msg) {
            time_t at = (time_t)st->aborted_at;
            struct tm tm;
            char when[32] = "?";
            if (gmtime_r(&at, &tm))
                strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
            n += (size_t)snprintf(msg + n, sizeof msg - n, " at %s UTC", when);
        }
        if (n < sizeof msg)
            snprintf(msg + n, sizeof msg - n, "]");
    }
    st->aborted_at = 0;
    return tw_events_emit(p, line, TW_EV_SIGNAL, msg, strnlen(msg, sizeof msg - 1), st->frame, sig);
}

/* A frame of IPython's traceback: "<ipython-input-84-50b0> in <module>()",
 * "/usr/lib/python3/x.py in f(a, b)" (IPython 7), "File /x.py:12, in f(a)"
 * or "Cell In[5], line 3" (IPython 8). */
static bool ipython_frame(const char *s, size_t len)
{
    if (tw_starts_with(s, len, "File ") || tw_starts_with(s, len, "Cell In["))
        return true;
    return (s[0] == '<' || s[0] == '/' || s[0] == '~' || (len > 2 && s[1] == ':')) && tw_find(s, len, " in ");
}

/* "4 frames": Colab's fold of the frames between two it shows. */
static bool folded_frames(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len && tw_is_digit(s[i]))
        i++;
    return i > 0 && len - i == 7 && memcmp(s + i, " frames", 7) == 0;
}

/* A line of IPython's traceback after its header: source lines (indented
 * or "----> 1 f()"), frames, "[... skipping hidden 1 frame]", then the
 * exception. */
static int ipython_line(tw_parser *p, events_state *st, const tw_line *line)
{
    const char *s = line->text;
    size_t len = line->len;
    if (tw_is_blank(s[0]) || s[0] == '-' || s[0] == '[' || folded_frames(s, len))
        return -1;
    if (ipython_frame(s, len)) {
        tw_record_set_text(st->frame, s, len);
        if (is_user_frame(s, len))
            tw_record_set_text(st->user_frame, s, len);
        return -1;
    }
    if (is_exception_line(s, len))
        return exception_line(p, st, line);
    st->block = BLOCK_NONE; /* cut short */
    return 0;
}

/* How much of s is the block's prefix: its bytes, a digit for a digit (a
 * timestamp, a pid); 0 none; SIZE_MAX: s is the prefix alone (a blank line
 * of the block, its trailing blanks cut). */
static size_t block_prefix(const events_state *st, const char *s, size_t len)
{
    size_t n = st->prefix_len;
    for (size_t i = 0; i < n; i++) {
        if (i == len) {
            while (i < n && tw_is_blank(st->prefix[i]))
                i++;
            return i == n ? SIZE_MAX : 0;
        }
        if (s[i] != st->prefix[i] && !(tw_is_digit(s[i]) && tw_is_digit(st->prefix[i])))
            return 0;
    }
    return n;
}

/* A line of a block whose lines carry a prefix: read without it; the block
 * ends at the first line without one of its shape. */
static int in_block(tw_parser *p, events_state *st, const tw_line *line);
static int prefixed_block_line(tw_parser *p, events_state *st, const tw_line *line)
{
    size_t n = block_prefix(st, line->text, line->len);
    if (n == SIZE_MAX)
        return -1;
    if (n == 0 || n == line->len) {
        st->block = BLOCK_NONE;
        st->prefix_len = 0;
        return 0;
    }
    tw_line bare = *line;
    bare.text += n;
    bare.len -= n;
    bare.body = bare.text;
    bare.body_len = bare.len;
    int r = in_block(p, st, &bare);
    if (st->block != BLOCK_PYTHON)
        st->prefix_len = 0;
    return r;
}

static int in_block(tw_parser *p, events_state *st, const tw_line *line)
{
    const char *s = line->text;
    size_t len = line->len;
    bool indented = tw_is_blank(s[0]);
    if (st->block == BLOCK_PYTHON) {
        if (tw_starts_with(s, len, "  File ")) {
            tw_record_set_text(st->frame, s + 2, len - 2);
            if (is_user_frame(s, len))
                tw_record_set_text(st->user_frame, s + 2, len - 2);
            return -1;
        }
        if (indented || tw_starts_with(s, len, "During handling") || tw_starts_with(s, len, "The above exception") ||
            s[0] == '^' || s[0] == '~')
            return -1;
        if (is_exception_line(s, len))
            return exception_line(p, st, line);
        st->block = BLOCK_NONE; /* a traceback cut short: give up on it */
        return 0;
    }
    if (st->block == BLOCK_IPYTHON)
        return ipython_line(p, st, line);
    if (st->block == BLOCK_CPP) {
        if (tw_starts_with(s, len, "Error Message Summary")) {
            st->block = BLOCK_SUMMARY;
            return -1;
        }
        if (s[0] == '-' || indented)
            return -1;
        long long frame;
        size_t n = tw_scan_uint(s, s + len, &frame);
        if (n) {
            if (!st->name_held && (frame == 0 || st->frame[0] == '\0')) { /* held: the Python frames stay */
                const char *t = s + n;
                while (t < s + len && *t == ' ')
                    t++;
                tw_record_set_text(st->frame, t, (size_t)(s + len - t));
            }
            return -1;
        }
        st->block = BLOCK_NONE;
        release_held(p, st, line);
        return 0;
    }
    /* BLOCK_SUMMARY: "----" then "XError: message", hints, signal info */
    if (s[0] == '-')
        return -1;
    if (tw_starts_with(s, len, "FatalError: `Termination signal`") ||
        tw_starts_with(s, len, "FatalError: `Segmentation fault`") ||
        tw_starts_with(s, len, "FatalError: `Process abort signal`")) {
        st->signal_pending = true;
        st->aborted_at = 0;
        tw_record_set_text(st->signal_message, s, len);
        return -1;
    }
    if (indented && st->signal_pending) {
        const char *aborted = tw_find(s, len, "*** Aborted at ");
        if (aborted)
            tw_scan_uint(aborted + 15, s + len, &st->aborted_at);
        const char *info = tw_find(s, len, "[SignalInfo: *** ");
        if (info) { /* the summary's last line: what follows is not its error */
            int n = flush_signal(p, st, line, parse_signal_number(s, len));
            st->block = BLOCK_NONE;
            return n;
        }
        return -1;
    }
    if (indented)
        return -1;
    int n = flush_signal(p, st, line, 0);
    if (is_exception_line(s, len))
        return n + exception_line(p, st, line);
    st->block = BLOCK_NONE;
    release_held(p, st, line);
    return n;
}

/* PyTorch's out-of-memory message outgrows an event's message: what falls
 * past the cut goes in the event's detail, shortened to what the rules read
 * (rule_oom.c): how many "Process N has X memory in use" entries the
 * message lists ("Processes listed: 7. ") and what it says of the allocator
 * ("Of the allocated memory 18.70 GiB is allocated by PyTorch, and 353.02
 * MiB is reserved by PyTorch but unallocated."). NULL: nothing past it. */
static const char *oom_tail(tw_event_kind kind, const char *s, size_t len, char *buf, size_t cap)
{
    if (kind != TW_EV_OOM || len < TW_MESSAGE_MAX)
        return NULL;
    int processes = 0;
    for (const char *p = tw_find(s, len, "Process "); p; p = tw_find(p + 8, (size_t)(s + len - p - 8), "Process "))
        processes += p + 8 < s + len && tw_is_digit(p[8]);
    const char *tail = tw_find(s, len, "Of the allocated memory ");
    if (tail && tail - s <= TW_MESSAGE_MAX / 2)
        tail = NULL;
    if (!tail && processes == 0)
        return NULL;
    int used = processes ? snprintf(buf, cap, "Processes listed: %d. ", processes) : 0;
    if (used < 0 || (size_t)used >= cap)
        used = 0;
    snprintf(buf + used, cap - (size_t)used, "%.*s", tail ? (int)(s + len - tail) : 0, tail ? tail : "");
    return buf;
}

/* argparse refusing the command line ("train.py: error: unrecognized
 * arguments: --local-rank=1", torchrun's newer flag meeting an old script):
 * a crash before anything ran, PROG at the start of the line. */
static int usage_error(tw_parser *p, events_state *st, const tw_line *line, const char *at)
{
    (void)st;
    for (const char *c = line->text; c < at; c++)
        if (tw_is_blank(*c) || *c == ':')
            return 0;
    return tw_events_emit(p, line, TW_EV_EXCEPTION, line->text, line->len, NULL, 0);
}

/* A Python traceback starts: kind is BLOCK_PYTHON or BLOCK_IPYTHON, its
 * lines carrying the prefix's n bytes (0: none). */
static int start_traceback(tw_parser *p, events_state *st, const tw_line *line, enum block kind, const char *prefix,
                           size_t n)
{
    release_held(p, st, line);
    st->block = kind;
    st->prefix_len = n;
    memcpy(st->prefix, prefix, n);
    st->frame[0] = '\0';
    st->user_frame[0] = '\0';
    return -1;
}

/* The n bytes at s end in torch's "[rank3]: " (or "[rank3]:"). */
static bool ends_in_rank_prefix(const char *s, size_t n)
{
    while (n > 0 && tw_is_blank(s[n - 1]))
        n--;
    if (n < 8 || s[n - 1] != ':' || s[n - 2] != ']')
        return false;
    size_t d = n - 2;
    while (d > 0 && tw_is_digit(s[d - 1]))
        d--;
    return d < n - 2 && d >= 5 && memcmp(s + d - 5, "[rank", 5) == 0;
}

/* The n bytes at s are a progress bar (tqdm's "%|") glued before torch's
 * rank prefix: the block's next lines carry the rank prefix alone. A label
 * before it ("[default0]:[rank0]: ", torchrun --tee's) is carried by every
 * line: a prefix like any other. */
static bool bar_before_rank_prefix(const char *s, size_t n)
{
    return ends_in_rank_prefix(s, n) && tw_find(s, n, "%|") != NULL;
}

/* "Traceback (most recent call last):" after something on its line: a
 * prefix no format strips, carried by each line of the block (a job
 * runner's task label and a second timestamp, a worker's "(pid=123) "),
 * read off them (prefixed_block_line); or IPython's header, the exception's
 * name padded before it (BLOCK_IPYTHON). */
static int prefixed_traceback(tw_parser *p, events_state *st, const tw_line *line, const char *at)
{
    const char *s = line->text;
    size_t n = (size_t)(at - s);
    size_t rest = line->len - n - strlen("Traceback (most recent call last)");
    if (n == 0 || rest > 1 || (n >= 4 && memcmp(at - 4, "C++ ", 4) == 0))
        return 0;
    /* glued to the end of a progress line printed without its newline
     * ("{| Epoch: 55/167 (996/1926) | Loss: 0.2907 | }Traceback ...", or
     * "...5189.64 examples/s][rank0]: Traceback ...", torch's rank prefix
     * that the parser strips off the block's next lines): the block's lines
     * that follow carry no prefix of their own */
    if (!tw_is_blank(at[-1]) || bar_before_rank_prefix(s, n))
        return start_traceback(p, st, line, BLOCK_PYTHON, s, 0);
    size_t name = 0;
    while (name < n && !tw_is_blank(s[name]))
        name++;
    bool ipython = name > 0 && n - name >= 2 && is_exception_line(s, name);
    for (size_t i = name; ipython && i < n; i++)
        ipython = tw_is_blank(s[i]);
    if (!ipython && n >= sizeof st->prefix)
        return 0;
    return start_traceback(p, st, line, ipython ? BLOCK_IPYTHON : BLOCK_PYTHON, s, ipython ? 0 : n);
}

typedef struct keyword_rule {
    const char *needle;
    tw_event_kind kind;
    /* reads a line whose event needs more than the line itself (NULL: the
     * line is the event's message); 0: not this event after all */
    int (*read)(tw_parser *p, events_state *st, const tw_line *line, const char *at);
} keyword_rule;

/* Single-line events, checked in order; the first match wins. They are
 * found in one pass over the line (keywords.h), not one search each. */
static const keyword_rule rules[] = {
    {"Traceback (most recent call last)", TW_EV_EXCEPTION, prefixed_traceback},
    {"[PRECISION] [ERROR]", TW_EV_NAN, NULL},
    {"There are NAN or INF", TW_EV_NAN, NULL},
    {"There are `nan` or `inf`", TW_EV_NAN, NULL},
    {"NaN or Inf found", TW_EV_NAN, NULL},
    {"oss is nan", TW_EV_NAN, NULL}, /* Loss is nan, loss is nan */
    {"Loss is NaN", TW_EV_NAN, NULL},
    {"Out of memory error", TW_EV_OOM, NULL},
    {"ResourceExhaustedError", TW_EV_OOM, NULL},
    {"CUDA out of memory", TW_EV_OOM, NULL},
    {"OutOfMemoryError", TW_EV_OOM, NULL},
    {"std::bad_alloc", TW_EV_OOM, NULL},
    {"save checkpoint at", TW_EV_CHECKPOINT, NULL},
    {"Checkpoint saved", TW_EV_CHECKPOINT, NULL},
    {"Saving checkpoint", TW_EV_CHECKPOINT, NULL},
    {"Saving model checkpoint", TW_EV_CHECKPOINT, NULL},
    {"Already save the best model", TW_EV_CHECKPOINT, NULL},
    {"save best model", TW_EV_CHECKPOINT, NULL},
    {"ave model to", TW_EV_CHECKPOINT, NULL}, /* Save model to, save model to */
    {"save model in", TW_EV_CHECKPOINT, NULL},
    {"Saving trained model", TW_EV_CHECKPOINT, NULL},
    {"Save checkpoint", TW_EV_CHECKPOINT, NULL},
    {"Resuming from", TW_EV_RESUME, NULL},
    {"esume from", TW_EV_RESUME, NULL},     /* Resume from, resume from */
    {"esumed from", TW_EV_RESUME, NULL},    /* Resumed from, resumed from */
    {"esume training", TW_EV_RESUME, NULL}, /* Resume training, resume training */
    {"Finish resuming model weights", TW_EV_RESUME, NULL}, /* PaddleDetection */
    {"Environment Information---", TW_EV_LAUNCH, NULL},
    {"Configuration Arguments ---", TW_EV_LAUNCH, NULL},
    {"Setting OMP_NUM_THREADS environment variable for each process", TW_EV_LAUNCH, NULL},
    {"INFO: Architecture :", TW_EV_LAUNCH, NULL}, /* PaddleOCR's config dump (print_dict), first key */
    /* environment and configuration, at the start of a line (PaddleSeg's
     * Environment Information block, a config dump, a git note) */
    {"PaddlePaddle: ", TW_EV_ENVIRONMENT, NULL},
    {"GPUs used: ", TW_EV_ENVIRONMENT, NULL},
    {"CUDA_VISIBLE_DEVICES: ", TW_EV_ENVIRONMENT, NULL},
    {"cudnn: ", TW_EV_ENVIRONMENT, NULL},
    {"batch_size: ", TW_EV_ENVIRONMENT, NULL},
    {"batch_size_per_gpu: ", TW_EV_ENVIRONMENT, NULL},
    {"num_workers: ", TW_EV_ENVIRONMENT, NULL},
    {"sha: ", TW_EV_ENVIRONMENT, NULL},
    {"train with paddle ", TW_EV_ENVIRONMENT, NULL}, /* PaddleOCR, anywhere in the line */
    /* the launcher's report of which rank failed (launcher_*) */
    {"ABORT!!! Out of all ", TW_EV_LAUNCHER, tw_events_launcher_paddle_abort},
    {"Container rank ", TW_EV_LAUNCHER, tw_events_launcher_paddle_container},
    {"failed (exitcode: ", TW_EV_LAUNCHER, tw_events_launcher_elastic_failed},
    {"Root Cause (first observed failure)", TW_EV_LAUNCHER, tw_events_launcher_torchrun_root_cause},
    {"Rendezvous complete for workers", TW_EV_RANKS, tw_events_launcher_rendezvous},
    {"Warning: ", TW_EV_WARNING, NULL},
    {"WARNING", TW_EV_WARNING, NULL},
    {"exited with code", TW_EV_EXIT, NULL},
    {"exit code", TW_EV_EXIT, NULL},
    {"exitcode", TW_EV_EXIT, NULL},
    /* Training, training (and pretraining) finished/completed/done */
    {"raining finished", TW_EV_FINISHED, NULL},
    {"raining completed", TW_EV_FINISHED, NULL},
    {"raining done", TW_EV_FINISHED, NULL},
    {"inished training", TW_EV_FINISHED, NULL}, /* Finished training, finished training */
    /* an evaluation that found nothing (rule_eval.c's eval_empty) */
    {"results of the whole dataset is empty", TW_EV_WARNING, NULL}, /* mmdet */
    {"No predictions from the model", TW_EV_WARNING, NULL},         /* detectron2 */
    /* torch's NCCL watchdog: a collective that never completed */
    {"Watchdog caught collective operation timeout", TW_EV_EXCEPTION, tw_events_nccl_watchdog},
    /* the batch scheduler stopped the job: Slurm's step daemon */
    {" CANCELLED AT ", TW_EV_SIGNAL, tw_events_slurm_cancelled},
    {"kipping step", TW_EV_OVERFLOW, tw_events_scaler_overflow}, /* Skipping step: a loss scaler's overflow */
    {".py: error: ", TW_EV_EXCEPTION, usage_error},
};

/* at begins the line, after indentation only. */
static bool starts_line(const char *s, const char *at)
{
    while (s < at && tw_is_blank(*s))
        s++;
    return s == at;
}

static int exit_code_after(const char *s, size_t len, const char *at)
{
    const char *end = s + len;
    const char *p = at;
    while (p < end && !tw_is_digit(*p) && *p != '-')
        p++;
    double v;
    if (p < end && tw_scan_number(p, end, &v) && v >= -1e6 && v <= 1e6)
        return (int)v; /* beyond: not an exit status (and not convertible) */
    return -1;
}

#define RULE_COUNT (sizeof rules / sizeof rules[0])
_Static_assert(RULE_COUNT + 4 <= TW_KEYWORDS_MAX, "too many event keywords for one index");

static tw_keywords rule_index;
static pthread_once_t rule_index_once = PTHREAD_ONCE_INIT;

static void build_rule_index(void)
{
    static const char *needles[RULE_COUNT + 4];
    for (size_t i = 0; i < RULE_COUNT; i++)
        needles[i] = rules[i].needle;
    needles[RULE_COUNT] = "Killed";
    needles[RULE_COUNT + 1] = "got signal: ";
    needles[RULE_COUNT + 2] = "Assertion `";
    needles[RULE_COUNT + 3] = "NCCL error";
    tw_keywords_init(&rule_index, needles, RULE_COUNT + 4);
}

static int single_line(tw_parser *p, events_state *st, const tw_line *line)
{
    const char *s = line->text;
    size_t len = line->len;
    /* "training AGCN finished", "train finished": a verb at the end. */
    if (len > 8 && memcmp(s + len - 8, "finished", 8) == 0 && tw_find_ci(s, len, "train"))
        return tw_events_emit(p, line, TW_EV_FINISHED, s, len, NULL, 0);
    pthread_once(&rule_index_once, build_rule_index);
    uint64_t found = tw_keywords_scan(&rule_index, s, len);
    if (!found)
        return 0;
    for (size_t i = 0; i < RULE_COUNT; i++) {
        if (!(found & (1ull << i)))
            continue;
        const char *at = tw_find(s, len, rules[i].needle);
        int code = 0;
        if (rules[i].kind == TW_EV_EXIT) {
            code = exit_code_after(s, len, at + strlen(rules[i].needle));
            if (code < 0)
                continue;
        }
        if (rules[i].kind == TW_EV_WARNING && tw_find(s, len, "WARNING") == at && at != s && tw_is_alpha(at[-1]))
            continue;
        if (rules[i].kind == TW_EV_ENVIRONMENT && !starts_line(s, at) && rules[i].needle[0] != 't')
            continue;
        if (rules[i].read) {
            int n = rules[i].read(p, st, line, at);
            if (n == 0)
                continue;
            return n;
        }
        char tail[TW_MESSAGE_MAX];
        return tw_events_emit(p, line, rules[i].kind, s, len, oom_tail(rules[i].kind, s, len, tail, sizeof tail), code);
    }
    /* "torch.distributed.DistBackendError: NCCL error in: ..." where no
     * traceback header came first (ranks printing at once, a pasted excerpt):
     * the error, held for its "Last error:" cause as in a traceback */
    if ((found & (1ull << (RULE_COUNT + 3))) && is_exception_line(s, len))
        return exception_line(p, st, line);
    if (found & (1ull << (RULE_COUNT + 2))) {
        note_assertion(st, line); /* reported with the CUDA error that follows */
        return 0;
    }
    if ((len == 6 && memcmp(s, "Killed", 6) == 0) || tw_find(s, len, "got signal: "))
        return tw_events_emit(p, line, TW_EV_SIGNAL, s, len, NULL, len == 6 ? 9 : parse_signal_number(s, len));
    return 0;
}

/* A dump read: one event at its first line, naming the main thread's frame. */
static void emit_stacks(tw_parser *p, events_state *st, const tw_line *line)
{
    char where[TW_MESSAGE_MAX], threads[TW_MESSAGE_MAX];
    tw_stacks_take(&st->stacks, where, threads, sizeof where);
    tw_line at = {.text = where, .len = strlen(where), .source = st->stacks_source, .rank = line ? line->rank : -1};
    tw_events_emit(p, &at, TW_EV_STACKS, where, at.len, threads, 0);
}

static bool detect(const tw_line *line)
{
    (void)line;
    return true;
}

static int parse(tw_parser *p, void *state, const tw_line *line)
{
    events_state *st = state;
    const char *s = line->text;
    size_t len = line->len;
    if (st->stacks.open || (tw_stacks_may_begin(s, len) && tw_stacks_begins(s, len))) {
        if (!st->stacks.open)
            st->stacks_source = line->source;
        if (tw_stacks_line(&st->stacks, s, len))
            return -1;
        emit_stacks(p, st, line); /* it ended before this line */
    }
    if (s[0] == '{' && len > 40) {
        int n = tw_stacks_emit_json(p, line);
        if (n)
            return n;
    }
    if (st->await_message) {
        int n = awaited_message(p, st, line);
        if (n != 0)
            return n;
    }
    if (st->name_held == NAME_HELD_TENTATIVE && !blank_line(line)) {
        if (tw_starts_with(s, len, "C++ Traceback") || tw_starts_with(s, len, "Error Message Summary"))
            st->name_held = NAME_HELD; /* Paddle's block: its error is the name's message */
        else if (!tw_starts_with(s, len, "---"))
            release_held(p, st, line); /* a dashed line of something else: the name was all there was */
    }
    if (st->nccl) {
        int n = nccl_lines(p, st, line);
        if (n != 0)
            return n;
    }
    if (st->root_cause) {
        int n = tw_events_root_cause_lines(p, st, line);
        if (n != 0)
            return n;
    }
    if (st->rendezvous.open) {
        int n = tw_events_rendezvous_lines(p, st, line);
        if (n != 0)
            return n;
    }
    if (st->block != BLOCK_NONE) {
        int n = st->prefix_len ? prefixed_block_line(p, st, line) : in_block(p, st, line);
        if (n != 0)
            return n;
    }
    /* torch's ExceptionWrapper ("Caught FileNotFoundError in DataLoader worker
     * process 0." / "in replica 0 on device 0."): the worker's own traceback
     * follows, and its exception, the cause, is the last failure */
    if (tw_starts_with(s, len, "Traceback (most recent call last)") ||
        tw_starts_with(s, len, "Original Traceback (most recent call last)"))
        return start_traceback(p, st, line, BLOCK_PYTHON, s, 0);
    if (tw_starts_with(s, len, "C++ Traceback (most recent call last)")) {
        st->block = BLOCK_CPP;
        if (!st->name_held) {
            st->frame[0] = '\0';
            st->user_frame[0] = '\0';
        }
        return -1;
    }
    if (tw_starts_with(s, len, "Error Message Summary")) {
        st->block = BLOCK_SUMMARY;
        return -1;
    }
    return single_line(p, st, line);
}

static void finish(tw_parser *p, void *state)
{
    events_state *st = state;
    if (st->await_message)
        awaited_message(p, st, NULL);
    if (st->nccl)
        nccl_lines(p, st, NULL);
    flush_signal(p, st, NULL, 0);
    release_held(p, st, NULL);
    if (st->stacks.open)
        emit_stacks(p, st, NULL);
    if (st->assertion[0]) { /* no CUDA error followed it in the log: the assertion is the error */
        char msg[TW_MESSAGE_MAX + 32];
        snprintf(msg, sizeof msg, "CUDA device-side assertion: %s", st->assertion);
        tw_events_emit(p, NULL, TW_EV_EXCEPTION, msg, strnlen(msg, TW_MESSAGE_MAX - 1), NULL, 0);
        st->assertion[0] = '\0';
    }
    st->block = BLOCK_NONE;
    st->prefix_len = 0;
    st->root_cause = 0;
    st->rendezvous.open = false;
}

/* The text buffers hold old bytes past their strings: compare what is used. */
static bool same_state(const void *a, const void *b)
{
    const events_state *x = a, *y = b;
    return x->block == y->block && x->signal_pending == y->signal_pending && x->prefix_len == y->prefix_len &&
           memcmp(x->prefix, y->prefix, x->prefix_len) == 0 &&
           (x->block == BLOCK_NONE || (strcmp(x->frame, y->frame) == 0 && strcmp(x->user_frame, y->user_frame) == 0)) &&
           (!x->signal_pending ||
            (strcmp(x->signal_message, y->signal_message) == 0 && x->aborted_at == y->aborted_at)) &&
           x->await_message == y->await_message && x->nccl == y->nccl && (!x->nccl || strcmp(x->held, y->held) == 0) &&
           x->name_held == y->name_held &&
           (!(x->await_message || x->name_held) || strcmp(x->pending_name, y->pending_name) == 0) &&
           (!x->name_held || (strcmp(x->frame, y->frame) == 0 && strcmp(x->user_frame, y->user_frame) == 0)) &&
           strcmp(x->assertion, y->assertion) == 0 && x->root_cause == y->root_cause &&
           (!x->root_cause || strcmp(x->launcher, y->launcher) == 0) && x->rendezvous.open == y->rendezvous.open &&
           (!x->rendezvous.open || (x->rendezvous.group_rank == y->rendezvous.group_rank &&
                                    x->rendezvous.group_world_size == y->rendezvous.group_world_size &&
                                    x->rendezvous.local_in_order == y->rendezvous.local_in_order)) &&
           ((!x->stacks.open && !y->stacks.open) || tw_stacks_same(&x->stacks, &y->stacks));
}

const tw_format tw_format_events = {
    .name = "events",
    .summary = "tracebacks, Paddle error blocks, OOM, NaN/Inf checks, checkpoints, exits",
    .state_size = sizeof(events_state),
    .detect = detect,
    .parse = parse,
    .finish = finish,
    .same_state = same_state,
};
