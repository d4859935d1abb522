/*
 * rule_failure.c: how the run ended: exceptions and signals (fatal when no
 * training progress followed them, "recovered" when a later launch trained
 * on), non-zero exits, a run that stops before its last epoch or step, and
 * restarts (the step counter going backwards, or resume messages).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "trainwatch/error.h"

/* True when no step of the event's rank was logged after the event. */
static bool after_progress(const tw_run *run, const tw_event_note *e)
{
    const tw_rank *rk = tw_run_rank(run, e->rank);
    if (!rk || !rk->used)
        return true;
    if (e->file == rk->last.file)
        return e->line > rk->last.line || tw_closing_record(run, e) != NULL;
    if (e->has_time && !isnan(rk->last.time))
        return e->time >= rk->last.time;
    return e->last_pos >= rk->last.pos;
}

/* How far the run meant to go, as its last record says (" of 10000
 * steps", ", in epoch 1 of 5"), "" when it does not say. */
static const char *planned_extent(const tw_rank *rk, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!rk || !rk->used)
        return buf;
    const tw_point *p = &rk->last;
    if (p->epoch >= 0 && p->epoch_total > 0)
        snprintf(buf, cap, ", in epoch %lld of %lld", (long long)p->epoch, (long long)p->epoch_total);
    else if (p->step < 0 && p->step_total > 0) /* with a step within the epoch, the total is the epoch's */
        snprintf(buf, cap, " of %lld", (long long)p->step_total);
    return buf;
}

static bool is_failure(const tw_event_note *e)
{
    return e->kind == TW_EV_EXCEPTION || e->kind == TW_EV_SIGNAL;
}

/* "last frame: ..." and, when the user's own code is deeper in the stack
 * than the last frame, "deepest frame in your code: ...". */
static void frames_evidence(tw_finding *f, const tw_event_note *e)
{
    if (!e->detail[0])
        return;
    const char *user = strstr(e->detail, TW_USER_FRAME);
    if (!user) {
        tw_finding_evidence(f, "last frame: %s", e->detail);
        return;
    }
    tw_finding_evidence(f, "last frame: %.*s", (int)(user - e->detail), e->detail);
    tw_finding_evidence(f, "deepest frame in your code: %s", user + strlen(TW_USER_FRAME));
}

/* What to do about an error, when its words say more than "fix it". */
/* Crashes whose message says what kind they are, not a bug at the last
 * frame: the rule, the title (with a %s for " before its first step") and
 * what to do. The first whose needle is in the message wins. */
typedef struct crash_kind {
    const char *const needles[8];
    const char *rule, *title, *advice;
} crash_kind;

static const crash_kind crash_kinds[] = {
    {{"NCCL timeout: "},
     "nccl_timeout",
     "A collective timed out in NCCL's watchdog%s",
     "A collective with SeqNum=1 (or \"last completed work: -1\") never completed any: the ranks never "
     "exchanged data, a transport or set-up hang (run with NCCL_DEBUG=INFO; try NCCL_P2P_DISABLE=1 or "
     "NCCL_IB_DISABLE=1; check the network between nodes and that every rank reached the same collective). A "
     "later SeqNum: one rank was late to it (stuck in data loading, a different code path, a slow node): the "
     "ranks that did not time out are the ones waited for. Raise the timeout only when a step legitimately "
     "takes that long (torch.distributed.init_process_group(timeout=...))."},
    {{"KeyboardInterrupt"},
     "killed",
     "The run was stopped by hand (KeyboardInterrupt: Ctrl-C or SIGINT)%s",
     "Someone (or a wrapper script) interrupted the run: nothing in it failed. If it was not meant, look for what "
     "sends SIGINT (a terminal closed without nohup/tmux, a notebook's stop button, a scheduler's signal)."},
    {{"Cannot load cudnn", "Cannot load cublas", "Cannot load cuda", "libcudnn.so", "libnccl.so", "libcublas.so",
      "libcudart.so", "CUDA driver version is insufficient"},
     "cuda_setup",
     "The CUDA set-up is broken%s: a library the framework needs does not load",
     "Install the CUDA, cuDNN and NCCL versions the framework build expects (paddle.utils.run_check(); python -c "
     "'import torch; print(torch.version.cuda, torch.backends.cudnn.version())'), or put their directory on "
     "LD_LIBRARY_PATH; check the driver with nvidia-smi."},
    {{"No space left on device", "[Errno 28]", "ENOSPC", "Disk quota exceeded", "[Errno 122]"},
     "disk_full",
     "The disk is full%s: a write failed with no space left",
     "Free space on the disk being written (df -h on the output and checkpoint directories): delete old "
     "checkpoints or point the output at a bigger disk, and keep fewer of them (a save limit, a longer save "
     "interval). A checkpoint being written when this happened is probably truncated: resume from the one before "
     "it."},
    {{"no kernel image is available", "no CUDA-capable device", "Found no NVIDIA driver",
      "CUDA driver initialization failed"},
     "cuda_setup",
     "The CUDA set-up is broken%s: the GPU or its driver does not fit the framework build",
     "Install a framework build for this GPU's compute capability and driver (nvidia-smi shows both), and check "
     "CUDA_VISIBLE_DEVICES names GPUs that exist."},
};

/* Every rank's NCCL watchdog timeout ("[Rank N] Watchdog caught ..."), with
 * the first line of each: which ranks waited, so which did not. */
static void nccl_ranks_evidence(const tw_run *run, tw_finding *f)
{
    char ranks[256] = "", where[600] = "";
    size_t used = 0;
    int count = 0, seen[64];
    const tw_event_note *first = NULL;
    for (int i = 0; i < run->events_kept_count && count < 64; i++) {
        const tw_event_note *e = &run->events_kept[i];
        const char *r = e->kind == TW_EV_EXCEPTION && strncmp(e->message, "NCCL timeout: [Rank ", 20) == 0
                            ? e->message + 20
                            : NULL;
        if (!r)
            continue;
        int rank = atoi(r);
        bool dup = false;
        for (int k = 0; k < count; k++)
            dup |= seen[k] == rank;
        if (dup)
            continue;
        seen[count++] = rank;
        if (!first)
            first = e;
        used += (size_t)snprintf(ranks + used, used < sizeof ranks ? sizeof ranks - used : 0, "%s%d",
                                 used ? ", " : "", rank);
    }
    if (!first)
        return;
    tw_finding_evidence(f, "timed out on %s %s; the first report: %s", count == 1 ? "rank" : "ranks", ranks,
                        tw_where(run, first->file, first->line, where, sizeof where));
}

static const crash_kind *kind_of_crash(const tw_event_note *e)
{
    if (e->kind != TW_EV_EXCEPTION)
        return NULL;
    for (size_t k = 0; k < sizeof crash_kinds / sizeof crash_kinds[0]; k++) {
        for (const char *const *n = crash_kinds[k].needles; n < crash_kinds[k].needles + 8 && *n; n++) {
            if (strstr(e->message, *n))
                return &crash_kinds[k];
        }
    }
    return NULL;
}

static void recommend_for(tw_finding *f, const tw_event_note *e)
{
    const crash_kind *kind = kind_of_crash(e);
    if (kind) {
        tw_finding_recommend(f, "%s", kind->advice);
        return;
    }
    if (strncmp(e->message, "CUDA device-side assertion", 26) == 0)
        tw_finding_recommend(f, "The CUDA error only reports the assertion above. An index out of range in a gather, "
                                "index_select or embedding means a label or token id outside the valid range: check "
                                "labels < num_classes and ids < vocab size; rerun with CUDA_LAUNCH_BLOCKING=1 to "
                                "stop at the failing op.");
    else
        tw_finding_recommend(f, "Fix the error above at its last frame; rerun with the same seed to check it "
                                "reproduces before resuming from the last checkpoint.");
}

/* A rank that failed of its own and was then terminated (the launcher's
 * SIGTERM, its DataLoader workers killed) is reported by its own error:
 * the last one after its last step and before its first such report (what
 * it prints after the signal, a chained _queue.Empty, is the signal's).
 * So is one whose process then died of a signal of its own in teardown
 * (Paddle's SIGSEGV releasing its NCCL communicators at exit, after a
 * KeyboardInterrupt or a DataLoader's exception: the evaluation set's
 * data-error-iann-ritm-cvtcolor-empty-sigsegv). A report on the signal's
 * own line (torchrun's SignalException) is the signal's. */
/* Errors that only pass on an earlier one of the same process: Paddle's
 * main loop reporting that its DataLoader reader thread raised. */
static bool echoes_earlier(const tw_event_note *e)
{
    return strstr(e->message, "Blocking queue is killed because the data reader raises") != NULL;
}

static const tw_event_note *own_failure_before(const tw_run *run, const tw_event_note *fatal)
{
    const tw_event_note *own = fatal;
    for (int i = 0; i < run->events_kept_count && &run->events_kept[i] != fatal; i++) {
        const tw_event_note *e = &run->events_kept[i];
        if (e->rank != fatal->rank || !is_failure(e) || !after_progress(run, e) ||
            (e->line == fatal->line && e->file == fatal->file) || (echoes_earlier(e) && own != fatal))
            continue;
        if (tw_event_is_victim(e))
            break;
        own = e;
    }
    return own;
}

/* torchrun's ChildFailedError is the launcher's report of a child that
 * failed, raised in a traceback of its own after the child's: the crash is
 * the child's error, the last failure before it of whichever rank (the
 * launcher's lines name none), when the log has one. */
static const tw_event_note *child_failure_before(const tw_run *run, const tw_event_note *fatal)
{
    if (fatal->kind != TW_EV_EXCEPTION || !strstr(fatal->message, "ChildFailedError"))
        return fatal;
    const tw_event_note *child = fatal;
    for (int i = 0; i < run->events_kept_count && &run->events_kept[i] != fatal; i++) {
        const tw_event_note *e = &run->events_kept[i];
        if (is_failure(e) && after_progress(run, e) && !strstr(e->message, "ChildFailedError"))
            child = e;
    }
    return child;
}

/* The PID a signal came from ("[SIGTERM from PID 1136560 ...]"), 0 unknown. */
static long long sender_of(const tw_event_note *e)
{
    const char *from = e->kind == TW_EV_SIGNAL ? strstr(e->message, " from PID ") : NULL;
    return from ? strtoll(from + 10, NULL, 10) : 0;
}

/* Every rank that failed was stopped from outside: the same sender for all? */
static long long common_sender(const tw_root_cause *rc)
{
    long long pid = 0;
    for (int i = 0; i < rc->count; i++) {
        if (!rc->ranks[i].first)
            continue;
        long long p = sender_of(rc->ranks[i].first);
        if (!p || (pid && p != pid))
            return 0;
        pid = p;
    }
    return pid;
}

static void report_cause(const tw_run *run, const tw_root_cause *rc, tw_findings *out)
{
    const tw_event_note *e = rc->cause;
    char victims[256], where[600], when[64];
    int n = tw_root_cause_victims(rc, victims, sizeof victims);
    bool signal = e->kind == TW_EV_SIGNAL;
    tw_finding *f = tw_finding_add(out, signal ? "killed" : "crash", TW_SEV_ERROR,
                                   "Rank %d failed first%s; rank%s %s went down with it", rc->cause_rank,
                                   e->last_pos >= 0 ? "" : " (before any training step)", n == 1 ? "" : "s", victims);
    if (!f)
        return;
    tw_finding_at_event(f, run, e);
    tw_finding_evidence(f, "%s (%s)", e->message, tw_where(run, e->file, e->line, where, sizeof where));
    if (e->has_time)
        tw_finding_evidence(f, "rank %d failed at %s", rc->cause_rank, tw_fmt_time(e->time, when, sizeof when));
    frames_evidence(f, e);
    if (rc->own_failures > 1 && rc->launcher_decided)
        tw_finding_evidence(f, "%d ranks failed of their own; the launcher's report names rank %d", rc->own_failures,
                            rc->cause_rank);
    else if (rc->own_failures > 1)
        tw_finding_evidence(f,
                            rc->ordered_by_time ? "%d ranks failed of their own; rank %d's error is the earliest"
                                                : "%d ranks failed of their own and the lines carry no time: "
                                                  "rank %d is the lowest, not known to be the first",
                            rc->own_failures, rc->cause_rank);
    tw_root_cause_launcher_evidence(run, rc, f);
    tw_root_cause_evidence(run, rc, f);
    tw_finding_recommend(f,
                         "Fix rank %d's error; the other ranks stopped because it did (the launcher terminates "
                         "them, or their next collective loses its peer), so their errors are not causes.",
                         rc->cause_rank);
}

static void report_same_error(const tw_run *run, const tw_root_cause *rc, tw_findings *out)
{
    const tw_event_note *e = rc->cause;
    char where[600];
    tw_finding *f = tw_finding_add(out, e->kind == TW_EV_SIGNAL ? "killed" : "crash", TW_SEV_ERROR,
                                   "%d ranks failed with the same error%s", rc->own_failures,
                                   e->last_pos >= 0 ? "" : " before their first step");
    if (!f)
        return;
    tw_finding_at_event(f, run, e);
    tw_finding_evidence(f, "%s (%s)", e->message, tw_where(run, e->file, e->line, where, sizeof where));
    frames_evidence(f, e);
    tw_root_cause_launcher_evidence(run, rc, f);
    tw_root_cause_evidence(run, rc, f);
    tw_finding_recommend(f, "The error is the program's, not one rank's: fix it at its frame (every rank runs the "
                            "same code on its own shard).");
}

static void report_all_stopped(const tw_run *run, const tw_root_cause *rc, tw_findings *out)
{
    const tw_event_note *first = NULL;
    for (int i = 0; i < rc->count && !first; i++)
        first = rc->ranks[i].first;
    char where[600];
    const crash_kind *kind = kind_of_crash(first);
    if (kind && strcmp(kind->rule, "nccl_timeout") == 0) {
        /* every rank waited in a collective that never completed */
        tw_finding *f = tw_finding_add(out, kind->rule, TW_SEV_ERROR, kind->title,
                                       first->last_pos >= 0 ? "" : " before its first step");
        if (!f)
            return;
        tw_finding_at_event(f, run, first);
        tw_finding_evidence(f, "%s (%s)", first->message,
                            tw_where(run, first->file, first->line, where, sizeof where));
        nccl_ranks_evidence(run, f);
        if (first->last_pos >= 0)
            tw_finding_evidence(f, "last step logged before it: %.0f", first->last_pos);
        tw_root_cause_launcher_evidence(run, rc, f);
        tw_finding_recommend(f, "%s", kind->advice);
        return;
    }
    tw_finding *f = tw_finding_add(out, "killed", TW_SEV_ERROR,
                                   "Every rank was stopped from outside: %d rank%s terminated, none failed first",
                                   rc->failed_ranks, rc->failed_ranks == 1 ? "" : "s");
    if (!f)
        return;
    tw_finding_at_event(f, run, first);
    tw_finding_evidence(f, "%s (%s)", first->message, tw_where(run, first->file, first->line, where, sizeof where));
    long long pid = common_sender(rc);
    if (pid && rc->failed_ranks > 1)
        tw_finding_evidence(f, "every signal came from the same process, PID %lld (the launcher)", pid);
    tw_root_cause_launcher_evidence(run, rc, f);
    tw_root_cause_evidence(run, rc, f);
    tw_finding_recommend(f,
                         "No rank logged an error of its own before the signals: the launcher stopped the job "
                         "(Ctrl-C, the scheduler's time limit or preemption, or a process that died without a "
                         "word, such as one taken by the kernel's OOM killer: read the launcher's output and dmesg).");
}

/* The rank the launcher's report names whose log is not among the inputs,
 * or that logged no failure of its own; -1 none. */
static int silent_named_rank(const tw_run *run, const tw_root_cause *rc, bool *absent)
{
    if (!rc->launcher)
        return -1;
    (void)run;
    const char *p = rc->launcher->detail;
    for (int v; tw_launcher_next_rank(&p, &v);) {
        *absent = !tw_root_cause_has_rank(rc, v);
        bool failed = false;
        for (int i = 0; i < rc->count; i++)
            failed |= rc->ranks[i].rank == v && rc->ranks[i].first;
        if (*absent || !failed)
            return v;
    }
    return -1;
}

/* The exit code in the launcher's words ("exitcode -9", "(exitcode: -9)",
 * "code 1"): a negative one is the signal that killed the rank. */
static void exit_code_evidence(tw_finding *f, const tw_event_note *l)
{
    const char *at = strstr(l->message, "exitcode");
    if (!at)
        return;
    at += 8;
    while (*at == ':' || *at == ' ')
        at++;
    char *end;
    long code = strtol(at, &end, 10);
    if (end == at || code >= 0)
        return;
    tw_finding_evidence(f, "exit code %ld: killed by signal %ld%s", code, -code,
                        code == -9    ? " (SIGKILL: without a word in the log, most often the kernel's OOM killer)"
                        : code == -11 ? " (SIGSEGV: a crash in native code)"
                        : code == -6  ? " (SIGABRT: an abort in native code, such as NCCL's watchdog)"
                                      : "");
}

/* No rank among the inputs failed of its own, and the launcher names one
 * whose log was not given or says nothing: that rank is the cause, the
 * inputs its victims. */
static void report_launcher_named(const tw_run *run, tw_root_cause *rc, int rank, bool absent, tw_findings *out)
{
    const tw_event_note *l = rc->launcher;
    bool several = strchr(l->detail, ',') != NULL;
    tw_finding *f = absent
                        ? tw_finding_add(out, "crash", TW_SEV_ERROR,
                                         "Rank%s %s failed, by the launcher's report; %s not among the inputs",
                                         several ? "s" : "", l->detail, several ? "their logs are" : "its log is")
                        : tw_finding_add(out, "crash", TW_SEV_ERROR,
                                         "Rank %d failed without an error in its log, by the launcher's report", rank);
    if (!f)
        return;
    tw_finding_at_event(f, run, l);
    rc->cause_rank = several ? -1 : rank; /* the ranks given are the ones that went down with it */
    tw_root_cause_launcher_evidence(run, rc, f);
    exit_code_evidence(f, l);
    tw_root_cause_evidence(run, rc, f);
    if (absent)
        tw_finding_recommend(f, "Read the named rank's own log (log/workerlog.N, or where its launcher wrote it): "
                                "its error is the cause. The ranks given here stopped because it did.");
    else
        tw_finding_recommend(f, "The process died without writing its error: a signal from outside (the kernel's "
                                "OOM killer: check dmesg and the host's memory; the scheduler) or a crash in native "
                                "code. Read the launcher's exit code and the system log of that node.");
}

/* No rank among the inputs failed of its own, and the elastic agent names a
 * local rank the logs cannot make a global one: said as the rank within
 * the agent's node, and where its own log would be. */
static void report_local_named(const tw_run *run, tw_root_cause *rc, tw_findings *out)
{
    const tw_event_note *l = rc->launcher;
    tw_finding *f = tw_finding_add(out, "crash", TW_SEV_ERROR,
                                   "Local rank %d on this node failed, by the launcher's report; the log does not "
                                   "say which global rank that is",
                                   rc->launcher_local);
    if (!f)
        return;
    tw_finding_at_event(f, run, l);
    rc->cause_rank = -1;
    tw_root_cause_launcher_evidence(run, rc, f);
    exit_code_evidence(f, l);
    tw_root_cause_evidence(run, rc, f);
    tw_finding_recommend(f,
                         "Read the log of the process with LOCAL_RANK=%d on the node whose agent wrote this report "
                         "(torchrun --log-dir keeps it in LOGDIR/<run_id>_*/attempt_N/%d/stderr.log): its error is "
                         "the cause. The agent's rank assignment (logged at INFO, LOGLEVEL=INFO) says which global "
                         "rank it is.",
                         rc->launcher_local, rc->launcher_local);
}

/* A launch of several ranks ends in one failure and its consequences: the
 * finding names the rank that failed first and its victims. False when the
 * launch has one rank or nothing to say across ranks. */
static bool report_across_ranks(const tw_run *run, tw_findings *out)
{
    tw_root_cause rc;
    if (tw_root_cause_find(run, &rc) != TW_OK) {
        tw_root_cause_free(&rc);
        return false;
    }
    bool absent = false;
    int silent = rc.own_failures == 0 ? silent_named_rank(run, &rc, &absent) : -1;
    if (silent >= 0) {
        report_launcher_named(run, &rc, silent, absent, out);
        tw_root_cause_free(&rc);
        return true;
    }
    if (rc.own_failures == 0 && tw_root_cause_local_only(&rc)) {
        report_local_named(run, &rc, out);
        tw_root_cause_free(&rc);
        return true;
    }
    if (rc.count < 2 || rc.failed_ranks == 0) {
        tw_root_cause_free(&rc);
        return false;
    }
    bool done = true;
    if (rc.cause && rc.same_error)
        report_same_error(run, &rc, out);
    else if (rc.cause && after_progress(run, rc.cause))
        report_cause(run, &rc, out);
    else if (!rc.cause)
        report_all_stopped(run, &rc, out);
    else
        done = false;
    tw_root_cause_free(&rc);
    return done;
}

/* One rank's crash: the launcher's report beside it, when the log has one. */
static void launcher_quote(const tw_run *run, tw_finding *f)
{
    tw_root_cause rc;
    if (tw_root_cause_find(run, &rc) == TW_OK && rc.launcher) {
        rc.cause_rank = -1; /* nothing to agree with: quoted as it is */
        tw_root_cause_launcher_evidence(run, &rc, f);
    }
    tw_root_cause_free(&rc);
}

static void check_exceptions(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    const tw_event_note *fatal = NULL, *first_recovered = NULL, *last_recovered = NULL;
    int fatal_count = 0, recovered = 0;
    for (int i = 0; i < run->events_kept_count; i++) {
        const tw_event_note *e = &run->events_kept[i];
        if (!is_failure(e))
            continue;
        /* one report per line: an exception line that also names a signal counts once */
        if (i > 0 && is_failure(&run->events_kept[i - 1]) && run->events_kept[i - 1].line == e->line &&
            run->events_kept[i - 1].file == e->file) {
            if (after_progress(run, e) && e->kind == TW_EV_SIGNAL)
                fatal = e;
            continue;
        }
        if (after_progress(run, e)) {
            fatal_count++;
            /* the last failure explains the end; a signal reported on the same
             * line as an exception (SignalException) is the better name for it */
            if (!fatal || e->line != fatal->line || e->kind == TW_EV_SIGNAL)
                fatal = e;
        } else {
            recovered++;
            if (!first_recovered)
                first_recovered = e;
            last_recovered = e;
        }
    }
    if (run->have_last_exception && !fatal && after_progress(run, &run->last_exception)) {
        fatal = &run->last_exception; /* past the events kept in memory */
        fatal_count++;
    }
    if (fatal)
        fatal = child_failure_before(run, fatal);
    if (fatal && (tw_event_is_victim(fatal) || fatal->kind == TW_EV_SIGNAL))
        fatal = own_failure_before(run, fatal);
    char where[600], extent[128];
    if ((fatal || run->event_counts[TW_EV_LAUNCHER]) && report_across_ranks(run, out))
        fatal = NULL;
    if (fatal) {
        bool signal = fatal->kind == TW_EV_SIGNAL;
        const crash_kind *kind = kind_of_crash(fatal);
        const char *before = fatal->last_pos >= 0 ? "" : " before its first step";
        tw_finding *f = kind     ? tw_finding_add(out, kind->rule, TW_SEV_ERROR, kind->title, before)
                        : signal ? tw_finding_add(out, "killed", TW_SEV_ERROR, "The run was killed by a signal%s", before)
                                 : tw_finding_add(out, "crash", TW_SEV_ERROR, "The run crashed%s", before);
        if (!f)
            return;
        tw_finding_at_event(f, run, fatal);
        tw_finding_evidence(f, "%s (%s)", fatal->message, tw_where(run, fatal->file, fatal->line, where, sizeof where));
        frames_evidence(f, fatal);
        if (kind && strcmp(kind->rule, "nccl_timeout") == 0)
            nccl_ranks_evidence(run, f);
        launcher_quote(run, f);
        if (fatal->last_pos >= 0)
            tw_finding_evidence(f, "last step logged before it: %.0f%s", fatal->last_pos,
                                planned_extent(tw_run_rank(run, fatal->rank), extent, sizeof extent));
        if (fatal_count > 1)
            tw_finding_evidence(f, "%s%d failure reports after the last step", run->events_not_kept ? "at least " : "",
                                fatal_count);
        if (signal)
            tw_finding_recommend(f, "A SIGTERM usually comes from the launcher or scheduler: another rank failed first "
                                    "(read every workerlog), the job hit its time limit, or the node was preempted. "
                                    "SIGKILL without a message is often the kernel's OOM killer (dmesg).");
        else
            recommend_for(f, fatal);
    }
    if (recovered > 0) {
        tw_finding *f = tw_finding_add(out, "failed_launches", TW_SEV_WARNING,
                                       "%s%d failure%s before training went on (earlier launches crashed)",
                                       run->events_not_kept ? "At least " : "", recovered, recovered == 1 ? "" : "s");
        if (!f)
            return;
        tw_finding_at_event(f, run, first_recovered);
        tw_finding_first_last(f, run, first_recovered, last_recovered);
        tw_finding_recommend(f, "These launches died and were started again; if the log mixes several runs, analyse "
                                "the last one alone (split the log at the last start).");
    }
}

const tw_rule tw_rule_exceptions = {"crash", "exceptions and fatal signals, with their last frame", check_exceptions};

static void check_exits(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    for (int i = 0; i < run->events_kept_count; i++) {
        const tw_event_note *e = &run->events_kept[i];
        if (e->kind != TW_EV_EXIT || e->code == 0)
            continue;
        char where[600];
        tw_finding *f = tw_finding_add(out, "exit_status", TW_SEV_ERROR, "A process exited with status %d", e->code);
        if (!f)
            return;
        tw_finding_at_event(f, run, e);
        tw_finding_evidence(f, "%s (%s)", e->message, tw_where(run, e->file, e->line, where, sizeof where));
        tw_finding_recommend(f, "Read the log of the process that failed first; the launcher's exit report names its "
                                "rank and local log file.");
        return;
    }
}

const tw_rule tw_rule_exits = {"exit_status", "processes that exited non-zero", check_exits};

static const tw_rank *lead_rank(const tw_run *run)
{
    const tw_rank *lead = NULL;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (rk && rk->used && (!lead || rk->steps > lead->steps))
            lead = rk;
    }
    return lead;
}

/* True when a rank's log has an error or a signal after its last step: the
 * crash (or kill) finding says why the run ended. */
static bool ended_by_failure(const tw_run *run)
{
    if (run->have_last_exception && after_progress(run, &run->last_exception))
        return true;
    for (int i = 0; i < run->events_kept_count; i++) {
        if (is_failure(&run->events_kept[i]) && after_progress(run, &run->events_kept[i]))
            return true;
    }
    return false;
}

/* The log's own ETA at its last step beyond which it ended mid-run: well
 * past the few seconds or minutes a finished run's last record shows. */
#define INCOMPLETE_ETA_SECONDS 600.0

/* A log that stops before its last epoch or step with no error after its
 * last step (one that has one is a crash, told by check_exceptions). */
static void check_incomplete(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    const tw_rank *rk = lead_rank(run);
    if (!rk || run->event_counts[TW_EV_FINISHED] > 0 || ended_by_failure(run))
        return;
    const tw_point *p = &rk->last;
    char expected[128] = "";
    if (p->epoch >= 0 && p->epoch_total > 0) {
        int64_t final_epoch = rk->first.epoch == 0 ? p->epoch_total - 1 : p->epoch_total;
        if (p->epoch < final_epoch)
            snprintf(expected, sizeof expected, "epoch %lld of %lld", (long long)p->epoch, (long long)p->epoch_total);
    } else if (p->step < 0 && p->step_total > 0 && p->pos < 0.98 * (double)p->step_total) {
        snprintf(expected, sizeof expected, "step %.0f of %lld", p->pos, (long long)p->step_total);
    } else if (tw_has(&rk->last_step_record, TW_F_ETA) && rk->last_step_record.eta >= INCOMPLETE_ETA_SECONDS) {
        /* formats that print an epoch's iterations but not the epoch count
         * (mmdet's Epoch [1][750/29317], detectron2's iter: 1979) still say
         * how long training has to go */
        char d[32];
        snprintf(expected, sizeof expected, "step %.0f, with %s still to go by its own ETA", p->pos,
                 tw_fmt_duration(rk->last_step_record.eta, d, sizeof d));
    }
    if (!expected[0])
        return;
    char where[600];
    tw_finding *f = tw_finding_add(out, "incomplete", TW_SEV_WARNING, "The log ends mid-run, at %s", expected);
    if (!f)
        return;
    tw_finding_at(f, run, p, rk->rank);
    tw_finding_evidence(f, "last training record: step %.0f (%s)", p->pos,
                        tw_where(run, p->file, p->line, where, sizeof where));
    const tw_record *last = &rk->last_step_record;
    if (tw_has(last, TW_F_ETA)) {
        char d[32];
        tw_finding_evidence(f, "the log's own ETA at that point: %s more", tw_fmt_duration(last->eta, d, sizeof d));
    }
    if (run->have_last_exception)
        tw_finding_evidence(f, "last exception in the log (before the last step): %s", run->last_exception.message);
    tw_finding_recommend(
        f, "If the job is still running, this is expected; otherwise it stopped without an error in this log: check "
           "the launcher's log, other ranks, the scheduler (time limit, preemption) and the kernel log (OOM killer).");
}

const tw_rule tw_rule_incomplete = {"incomplete", "a log that stops before the last epoch or step", check_incomplete};

static void check_restarts(const tw_run *run, const tw_thresholds *t, tw_findings *out)
{
    (void)t;
    for (int i = 0; i < run->rank_count; i++) {
        const tw_rank *rk = run->ranks[i];
        if (!rk || rk->restarts == 0)
            continue;
        char w1[600], w2[600];
        const tw_restart *r = &rk->first_restart;
        tw_finding *f = tw_finding_add(out, "restarts", TW_SEV_WARNING, "Training restarted %d time%s on rank %d",
                                       rk->restarts, rk->restarts == 1 ? "" : "s", rk->rank);
        if (!f)
            return;
        tw_finding_at(f, run, &r->after, rk->rank);
        f->value = rk->restarts;
        tw_finding_evidence(f, "first: step %.0f (%s) was followed by step %.0f (%s)", r->before.pos,
                            tw_where(run, r->before.file, r->before.line, w1, sizeof w1), r->after.pos,
                            tw_where(run, r->after.file, r->after.line, w2, sizeof w2));
        if (rk->restarts > 1)
            tw_finding_evidence(f, "last: step %.0f was followed by step %.0f (%s)", rk->last_restart.before.pos,
                                rk->last_restart.after.pos,
                                tw_where(run, rk->last_restart.after.file, rk->last_restart.after.line, w2, sizeof w2));
        if (run->event_counts[TW_EV_RESUME])
            tw_finding_evidence(f, "%llu resume message(s) in the log",
                                (unsigned long long)run->event_counts[TW_EV_RESUME]);
        tw_finding_recommend(
            f, "Work after the last checkpoint before each restart was lost; find why the earlier launch stopped (the "
               "lines before the restart) and checkpoint more often if restarts are expected.");
        return;
    }
    const tw_event_note *e = tw_first_event(run, TW_EV_RESUME);
    if (e) {
        char where[600];
        tw_finding *f = tw_finding_add(out, "resumed", TW_SEV_INFO, "The run resumed from a checkpoint");
        if (!f)
            return;
        tw_finding_at_event(f, run, e);
        tw_finding_evidence(f, "%s (%s)", e->message, tw_where(run, e->file, e->line, where, sizeof where));
    }
}

const tw_rule tw_rule_restarts = {"restarts", "step counters going backwards, resumes", check_restarts};
