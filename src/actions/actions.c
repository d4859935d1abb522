/*
 * actions.c: the alert sink that acts (see trainwatch/actions.h): picks
 * the actions an alert that starts firing matches, keeps their cooldowns,
 * does or (dry run) describes each, and says and counts what came of it.
 * The files beside it hold the parts: spec.c the configuration, ranks.c
 * the processes, control.c the trainer's channel, exec.c commands.
 */
#include "actions_internal.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/json.h"
#include "../core/say.h"
#include "trainwatch/error.h"

#define DEFAULT_COOLDOWN 300.0
#define DEFAULT_EXEC_TIMEOUT 60.0
#define RANK_PROCS_MAX 256
/* Requests to several ranks are due this far ahead (seconds of steps), so
 * each rank has read the request before the step all of them act at. */
#define REQUEST_LEAD_SECONDS 2.0

extern char **environ;

int tw_actions_new(const tw_actions_options *o, tw_actions **out)
{
    tw_actions *a = calloc(1, sizeof *a);
    if (!a)
        return TW_ENOMEM;
    a->o = *o;
    if (a->o.cooldown <= 0)
        a->o.cooldown = DEFAULT_COOLDOWN;
    if (a->o.exec_timeout <= 0)
        a->o.exec_timeout = DEFAULT_EXEC_TIMEOUT;
    a->name = strdup(o->name ? o->name : "trainwatch");
    a->run = strdup(o->run ? o->run : "");
    a->control.fd = a->control.ack_fd = -1;
    a->step = a->seconds_per_step = NAN;
    pthread_mutex_init(&a->lock, NULL);
    int rc = a->name && a->run ? TW_OK : TW_ENOMEM;
    if (rc == TW_OK && o->registry) {
        const char *total[] = {"alert", "action", "result"}, *replies[] = {"action", "result"};
        tw_family_options t = {.name = "trainwatch_actions_total",
                               .help = "Actions taken on alerts, by alert, action and result (done, failed, killed, "
                                       "timeout, requested, dry_run, skipped, dropped).",
                               .type = TW_METRIC_COUNTER,
                               .label_count = 3,
                               .label_names = total};
        tw_family_options r = {.name = "trainwatch_action_replies_total",
                               .help = "Replies of the training processes to control requests, by action and "
                                       "result (done, failed, ignored).",
                               .type = TW_METRIC_COUNTER,
                               .label_count = 2,
                               .label_names = replies};
        rc = tw_family_register(o->registry, &t, &a->f_total);
        if (rc == TW_OK)
            rc = tw_family_register(o->registry, &r, &a->f_replies);
    }
    if (rc != TW_OK) {
        tw_actions_free(a);
        return rc;
    }
    *out = a;
    return TW_OK;
}

void tw_actions_free(tw_actions *a)
{
    if (!a)
        return;
    tw_exec_reap(a, true);
    tw_control_close(&a->control);
    for (size_t i = 0; i < a->count; i++)
        tw_action_free(a->actions[i]);
    pthread_mutex_destroy(&a->lock);
    free(a->name);
    free(a->run);
    free(a);
}

static int add(tw_actions *a, tw_action *act)
{
    if (a->count == TW_ACTIONS_MAX) {
        tw_action_free(act);
        return TW_ELIMIT;
    }
    pthread_mutex_lock(&a->lock);
    a->actions[a->count++] = act;
    pthread_mutex_unlock(&a->lock);
    return TW_OK;
}

int tw_actions_add(tw_actions *a, const char *spec, const char *where, double cooldown, char *err, size_t cap)
{
    tw_action *act;
    int rc = tw_action_parse(spec, where, cooldown >= 0 ? cooldown : a->o.cooldown, &act, err, cap);
    if (rc != TW_OK)
        return rc;
    if (a->o.exec_only && act->kind != TW_ACT_EXEC) {
        snprintf(err, cap, "%s '%s': %s acts on the training processes, which only `trainwatch run` has "
                 "(watch takes exec: actions)", where, spec, tw_action_kind_name(act->kind));
        tw_action_free(act);
        return TW_EUSAGE;
    }
    if ((rc = add(a, act)) == TW_ELIMIT)
        snprintf(err, cap, "%s '%s': more than %d actions", where, spec, TW_ACTIONS_MAX);
    return rc;
}

int tw_actions_check(const char *spec, const char *where, char *err, size_t cap)
{
    tw_action *act;
    int rc = tw_action_parse(spec, where, 1, &act, err, cap);
    tw_action_free(act);
    return rc;
}

size_t tw_actions_count(const tw_actions *a)
{
    return a->count;
}

int tw_actions_open_control(tw_actions *a, char *err, size_t cap)
{
    int rc = tw_control_open(&a->control, err, cap);
    if (rc != TW_OK || !a->o.stack_dumps_on_stall)
        return rc;
    /* not an alert: tw_actions_stalled fires it */
    tw_action *act;
    if ((rc = tw_action_parse("stall=dump-stacks", "the default", a->o.cooldown, &act, err, cap)) != TW_OK)
        return rc;
    act->implicit = true;
    return add(a, act);
}

void tw_actions_set_root(tw_actions *a, pid_t root)
{
    a->root = root;
}

void tw_actions_set_progress(tw_actions *a, double step, double seconds_per_step)
{
    a->step = step;
    a->seconds_per_step = seconds_per_step;
}

/* ---- acting ------------------------------------------------------------ */

/* What an alert is, for messages and exec: commands. */
typedef struct alert_view {
    const tw_alert_notice *n;
    const char *name;
    char text[512]; /* NAME{a="x",...} */
} alert_view;

static void describe(alert_view *v, const tw_alert_notice *n)
{
    v->n = n;
    v->name = "";
    size_t len = 0;
    for (size_t i = 0; i < n->label_count; i++)
        if (!strcmp(n->labels[i].name, "alertname"))
            v->name = n->labels[i].value;
    len += (size_t)snprintf(v->text, sizeof v->text, "%s{", v->name);
    bool first = true;
    for (size_t i = 0; i < n->label_count && len < sizeof v->text; i++) {
        if (!strcmp(n->labels[i].name, "alertname"))
            continue;
        len += (size_t)snprintf(v->text + len, sizeof v->text - len, "%s%s=\"%s\"", first ? "" : ",",
                                n->labels[i].name, n->labels[i].value);
        first = false;
    }
    if (len < sizeof v->text - 1)
        strcat(v->text, "}");
}

static bool matches(const tw_action *act, const tw_alert_notice *n, const char *name)
{
    if (strcmp(act->alert, name) != 0)
        return false;
    tw_lset set = {0};
    bool ok = tw_lset_set(&set, TW_NAME_LABEL, name) == TW_OK;
    for (size_t i = 0; ok && i < n->label_count; i++)
        if (strcmp(n->labels[i].name, "alertname") != 0)
            ok = tw_lset_set(&set, n->labels[i].name, n->labels[i].value) == TW_OK;
    ok = ok && tw_matchers_match(act->selector, &set);
    tw_lset_free(&set);
    return ok;
}

/* True (and the time noted) when act may fire for this alert now. */
static bool past_cooldown(tw_action *act, uint64_t fingerprint, double now)
{
    for (size_t i = 0; i < act->fired_count; i++) {
        if (act->fired[i].fingerprint == fingerprint) {
            if (now - act->fired[i].at < act->cooldown)
                return false;
            act->fired[i].at = now;
            return true;
        }
    }
    if (act->fired_count == act->fired_cap) {
        size_t cap = act->fired_cap ? act->fired_cap * 2 : 8;
        tw_action_fired *grown = realloc(act->fired, cap * sizeof *grown);
        if (!grown)
            return true; /* acting matters more than remembering */
        act->fired = grown;
        act->fired_cap = cap;
    }
    act->fired[act->fired_count++] = (tw_action_fired){fingerprint, now};
    return true;
}

static void count(tw_actions *a, const char *alert, const tw_action *act, const char *result)
{
    if (!a->f_total)
        return;
    const char *v[] = {alert, tw_action_kind_name(act->kind), result};
    tw_cell *c;
    if (tw_family_series(a->f_total, v, &c) == TW_OK)
        tw_counter_inc(c);
}

/* Says, counts and notes for the page what came of an action. */
static void report(tw_actions *a, tw_action *act, const char *alert, const char *alert_text, const char *result,
                   const char *detail)
{
    count(a, alert, act, result);
    pthread_mutex_lock(&a->lock);
    act->times++;
    act->last_at = tw_wall_clock();
    snprintf(act->last, sizeof act->last, "%s: %s%s%s", alert_text, result, *detail ? ": " : "", detail);
    pthread_mutex_unlock(&a->lock);
    bool bad = !strcmp(result, "failed") || !strcmp(result, "timeout") || !strcmp(result, "dropped");
    tw_say(bad ? TW_SAY_WARN : TW_SAY_INFO, a->name, "action %s on %s: %s%s%s%s", act->text,
           alert_text, result, *detail ? " (" : "", detail, *detail ? ")" : "");
}

static void do_signal(tw_actions *a, tw_action *act, char *detail, size_t cap, const char **result)
{
    tw_rank_proc procs[RANK_PROCS_MAX];
    size_t n = a->root > 0 ? tw_rank_processes(a->root, procs, RANK_PROCS_MAX) : 0;
    size_t len = (size_t)snprintf(detail, cap, "SIG%s to", tw_signal_name(act->signal));
    int sent = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        if (act->rank != TW_RANK_ALL && procs[i].rank != act->rank)
            continue;
        bool ok = kill(procs[i].pid, act->signal) == 0;
        sent += ok;
        failed += !ok;
        if (len < cap)
            len += (size_t)(procs[i].rank >= 0
                                ? snprintf(detail + len, cap - len, " rank %d (pid %d)%s", procs[i].rank,
                                           (int)procs[i].pid, ok ? "" : " gone")
                                : snprintf(detail + len, cap - len, " pid %d%s", (int)procs[i].pid, ok ? "" : " gone"));
    }
    if (!sent && !failed)
        snprintf(detail, cap, act->rank == TW_RANK_ALL ? "no training process is running"
                                                       : "no process of rank %d is running", act->rank);
    *result = sent ? "done" : "failed";
}

static void do_dump_stacks(tw_actions *a, char *detail, size_t cap, const char **result)
{
    tw_control *c = &a->control;
    size_t len = (size_t)snprintf(detail, cap, "SIG%s to", tw_signal_name(c->stack_signal));
    int sent = 0;
    for (size_t i = 0; i < c->proc_count; i++) {
        if (!c->procs[i].stack_signal || kill(c->procs[i].pid, c->procs[i].stack_signal) != 0)
            continue; /* takes no dumps, or ended */
        sent++;
        if (len < cap)
            len += (size_t)snprintf(detail + len, cap - len, " rank %d (pid %d)", c->procs[i].rank,
                                    (int)c->procs[i].pid);
    }
    if (sent) {
        *result = "done";
        return;
    }
    *result = "failed";
    snprintf(detail, cap, "no process of the run has the trainwatch package to dump its stacks (py-spy dump "
             "--pid PID does it from outside)");
}

/* The step every rank acts at: a little ahead of the last one seen, when
 * several processes read the requests; none for one. */
static double due_step(const tw_actions *a)
{
    if (a->control.proc_count < 2 || !isfinite(a->step))
        return NAN;
    double lead = isfinite(a->seconds_per_step) && a->seconds_per_step > 0
                      ? ceil(REQUEST_LEAD_SECONDS / a->seconds_per_step) : 2;
    return a->step + (lead < 2 ? 2 : lead > 1000 ? 1000 : lead);
}

static void do_request(tw_actions *a, tw_action *act, const char *alert, char *detail, size_t cap,
                       const char **result)
{
    *result = "failed";
    if (a->control.fd < 0) {
        snprintf(detail, cap, "no control channel: only `trainwatch run` can reach the trainer");
        return;
    }
    static const char *const names[] = {[TW_ACT_CHECKPOINT] = "checkpoint", [TW_ACT_STOP] = "stop", [TW_ACT_LR] = "lr"};
    double at = due_step(a);
    unsigned long id;
    int rc = tw_control_request(&a->control, names[act->kind], act->factor, alert, at, &id);
    if (rc != TW_OK) {
        snprintf(detail, cap, "writing %.300s: %s", a->control.path, tw_strerror(rc));
        return;
    }
    *result = "requested";
    size_t len = (size_t)snprintf(detail, cap, "request %lu", id);
    if (isfinite(at))
        len += (size_t)snprintf(detail + len, cap - len, ", due at step %.0f", at);
    if (!a->control.proc_count && len < cap)
        snprintf(detail + len, cap - len, "; no process has said it reads requests yet");
}

/* exec: a command's environment: ours and the alert's. */
static int put_env(char **env, size_t *n, const char *name, const char *value)
{
    size_t len = strlen(name) + strlen(value) + 2;
    if (!(env[*n] = malloc(len)))
        return TW_ENOMEM;
    snprintf(env[(*n)++], len, "%s=%s", name, value);
    return TW_OK;
}

static char *labels_json(const tw_alert_label *l, size_t count)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fputc('{', f);
    for (size_t i = 0; i < count; i++) {
        fputs(i ? "," : "", f);
        tw_json_cstring(f, l[i].name);
        fputc(':', f);
        tw_json_cstring(f, l[i].value);
    }
    fputc('}', f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static bool ours(const char *entry)
{
    return !strncmp(entry, "TW_ALERT_", 9) || !strncmp(entry, "TW_RUN=", 7) || !strncmp(entry, "TW_ACTION=", 10);
}

static char **exec_env(const tw_actions *a, const tw_action *act, const alert_view *v)
{
    size_t n = 0, total = 0;
    while (environ[total])
        total++;
    char **env = calloc(total + 8, sizeof *env);
    if (!env)
        return NULL;
    int rc = TW_OK;
    for (size_t i = 0; i < total && rc == TW_OK; i++)
        if (!ours(environ[i]))
            rc = (env[n] = strdup(environ[i])) ? (n++, TW_OK) : TW_ENOMEM;
    char *labels = labels_json(v->n->labels, v->n->label_count);
    char *annotations = labels_json(v->n->annotations, v->n->annotation_count);
    char value[64], starts[64];
    snprintf(value, sizeof value, "%.17g", v->n->value);
    snprintf(starts, sizeof starts, "%.3f", v->n->starts_at);
    if (rc == TW_OK && labels && annotations) {
        rc = put_env(env, &n, "TW_ALERT_NAME", v->name);
        rc = rc ? rc : put_env(env, &n, "TW_ALERT_LABELS", labels);
        rc = rc ? rc : put_env(env, &n, "TW_ALERT_ANNOTATIONS", annotations);
        rc = rc ? rc : put_env(env, &n, "TW_ALERT_VALUE", value);
        rc = rc ? rc : put_env(env, &n, "TW_ALERT_STARTS_AT", starts);
        rc = rc ? rc : put_env(env, &n, "TW_RUN", a->run);
        rc = rc ? rc : put_env(env, &n, "TW_ACTION", act->text);
    } else {
        rc = TW_ENOMEM;
    }
    free(labels);
    free(annotations);
    if (rc != TW_OK) {
        for (size_t i = 0; i < n; i++)
            free(env[i]);
        free(env);
        return NULL;
    }
    return env;
}

/* What an exec job reports when it ends (on its thread). */
typedef struct exec_done {
    tw_actions *a;
    tw_action *act;
    char alert[128];
    char alert_text[512];
} exec_done;

static void on_exec_done(void *arg, const char *result, const char *detail)
{
    exec_done *d = arg;
    report(d->a, d->act, d->alert, d->alert_text, result, detail);
    free(d);
}

static void do_exec(tw_actions *a, tw_action *act, const alert_view *v)
{
    exec_done *d = calloc(1, sizeof *d);
    char **env = exec_env(a, act, v);
    if (!d || !env) {
        free(d);
        if (env) {
            for (size_t i = 0; env[i]; i++)
                free(env[i]);
            free(env);
        }
        report(a, act, v->name, v->text, "failed", "out of memory");
        return;
    }
    *d = (exec_done){.a = a, .act = act};
    snprintf(d->alert, sizeof d->alert, "%s", v->name);
    snprintf(d->alert_text, sizeof d->alert_text, "%s", v->text);
    int rc = tw_exec_start(a, act->argv, env, a->o.exec_timeout, on_exec_done, d);
    if (rc != TW_OK) {
        free(d);
        report(a, act, v->name, v->text, rc == TW_ELIMIT ? "dropped" : "failed",
               rc == TW_ELIMIT ? "commands of earlier actions are still running" : "cannot start a thread");
    }
}

static void dry_run(tw_actions *a, tw_action *act, const alert_view *v)
{
    char detail[512];
    switch (act->kind) {
    case TW_ACT_SIGNAL:
        snprintf(detail, sizeof detail, "would send SIG%s to %s", tw_signal_name(act->signal),
                 act->rank == TW_RANK_ALL ? "every rank" : "one rank");
        if (act->rank != TW_RANK_ALL)
            snprintf(detail, sizeof detail, "would send SIG%s to rank %d", tw_signal_name(act->signal), act->rank);
        break;
    case TW_ACT_EXEC:
        snprintf(detail, sizeof detail, "would run %s", act->action_text + 5);
        break;
    case TW_ACT_DUMP_STACKS:
        snprintf(detail, sizeof detail, "would signal %zu process%s to dump their stacks", a->control.proc_count,
                 a->control.proc_count == 1 ? "" : "es");
        break;
    default:
        snprintf(detail, sizeof detail, "would request %s from the trainer", act->action_text);
        break;
    }
    report(a, act, v->name, v->text, "dry_run", detail);
}

/* Some process of the run said it takes stack dumps. */
static bool dumps_taken(const tw_control *c)
{
    for (size_t i = 0; i < c->proc_count; i++)
        if (c->procs[i].stack_signal)
            return true;
    return false;
}

static void act_on(tw_actions *a, tw_action *act, const alert_view *v)
{
    if (act->implicit && !dumps_taken(&a->control)) {
        /* the default dump, and no process can take it: said once */
        count(a, v->name, act, "skipped");
        if (!a->said_no_package)
            tw_say(TW_SAY_INFO, a->name, "a stall, and no process of the run has the trainwatch package to dump "
                   "its stacks (py-spy dump --pid PID does it from outside)");
        a->said_no_package = true;
        return;
    }
    if (a->o.dry_run) {
        dry_run(a, act, v);
        return;
    }
    char detail[512] = "";
    const char *result = "failed";
    switch (act->kind) {
    case TW_ACT_EXEC:
        do_exec(a, act, v);
        return;
    case TW_ACT_SIGNAL:
        do_signal(a, act, detail, sizeof detail, &result);
        break;
    case TW_ACT_DUMP_STACKS:
        do_dump_stacks(a, detail, sizeof detail, &result);
        break;
    default:
        do_request(a, act, v->name, detail, sizeof detail, &result);
        break;
    }
    report(a, act, v->name, v->text, result, detail);
}

void tw_actions_sink(void *actions, const tw_alert_notice *alerts, size_t n)
{
    tw_actions *a = actions;
    double now = tw_monotonic_clock();
    tw_actions_tick(a); /* the newest hellos before acting */
    for (size_t i = 0; i < n; i++) {
        if (alerts[i].resolved || !alerts[i].changed)
            continue; /* once per firing */
        alert_view v;
        describe(&v, &alerts[i]);
        for (size_t k = 0; k < a->count; k++) {
            tw_action *act = a->actions[k];
            if (!act->implicit && matches(act, &alerts[i], v.name) && past_cooldown(act, alerts[i].fingerprint, now))
                act_on(a, act, &v);
        }
    }
}

void tw_actions_stalled(tw_actions *a)
{
    static const tw_alert_label label = {"alertname", "stall"};
    tw_alert_notice stall = {.labels = &label, .label_count = 1, .changed = true, .starts_at = tw_wall_clock()};
    alert_view v;
    describe(&v, &stall);
    snprintf(v.text, sizeof v.text, "a stall (no step for the stall time)");
    tw_actions_tick(a);
    for (size_t k = 0; k < a->count; k++)
        if (a->actions[k]->implicit && past_cooldown(a->actions[k], 0, tw_monotonic_clock()))
            act_on(a, a->actions[k], &v);
}

/* ---- replies and the page ------------------------------------------ */

static void on_reply(void *arg, const char *action, const char *result, int rank, double step, unsigned long id,
                     const char *detail)
{
    tw_actions *a = arg;
    if (a->f_replies) {
        const char *v[] = {action, result};
        tw_cell *c;
        if (tw_family_series(a->f_replies, v, &c) == TW_OK)
            tw_counter_inc(c);
    }
    char at[48] = "";
    if (isfinite(step))
        snprintf(at, sizeof at, " at step %.0f", step);
    tw_say(strcmp(result, "failed") ? TW_SAY_INFO : TW_SAY_WARN, a->name, "trainer rank %d: %s (request %lu): %s%s%s%s",
           rank, action, id, result, at, *detail ? ": " : "", detail);
}

void tw_actions_tick(tw_actions *a)
{
    tw_control_read_replies(&a->control, on_reply, a);
    if (a->jobs)
        tw_exec_reap(a, false);
}

static void html(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f); break;
        }
    }
}

char *tw_actions_page(tw_actions *a, bool json)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    pthread_mutex_lock(&a->lock);
    if (json)
        fputc('[', f);
    else
        fputs("<h2>Actions</h2>\n<table>\n<tr><th>action</th><th>from</th><th>times</th><th>last</th></tr>\n", f);
    for (size_t i = 0; i < a->count; i++) {
        const tw_action *act = a->actions[i];
        if (json) {
            fputs(i ? ",{\"action\":" : "{\"action\":", f);
            tw_json_cstring(f, act->text);
            fputs(",\"from\":", f);
            tw_json_cstring(f, act->where);
            fprintf(f, ",\"cooldownSeconds\":%.0f,\"times\":%lu,\"dryRun\":%s,\"last\":", act->cooldown, act->times,
                    a->o.dry_run ? "true" : "false");
            tw_json_cstring(f, act->last);
            fputs(",\"lastAt\":", f);
            tw_json_number(f, act->last_at);
            fputc('}', f);
            continue;
        }
        fputs("<tr><td>", f);
        html(f, act->text);
        fputs("</td><td>", f);
        html(f, act->where);
        fprintf(f, "</td><td>%lu</td><td>", act->times);
        html(f, act->last);
        fputs("</td></tr>\n", f);
    }
    fputs(json ? "]" : "</table>\n", f);
    pthread_mutex_unlock(&a->lock);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
