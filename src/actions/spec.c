/*
 * spec.c: reads an action as configured, 'SELECTOR=ACTION' (see
 * trainwatch/actions.h), into a tw_action. The selector is PromQL's (the
 * rules' own parser reads it); an exec: command is split into words the way
 * a shell splits quoted words, with nothing expanded and no shell run.
 */
#include "actions_internal.h"

#include <ctype.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "trainwatch/error.h"

#define WORDS_MAX 64

static const struct {
    const char *name;
    int number;
} signals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ABRT", SIGABRT}, {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP},
    {"TSTP", SIGTSTP}, {"WINCH", SIGWINCH},
};

int tw_signal_from_name(const char *name)
{
    if (!strncasecmp(name, "SIG", 3))
        name += 3;
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        if (!strcasecmp(name, signals[i].name))
            return signals[i].number;
    char *end;
    long n = strtol(name, &end, 10);
    return *name && !*end && n > 0 && n < 65 ? (int)n : 0;
}

const char *tw_signal_name(int sig)
{
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        if (signals[i].number == sig)
            return signals[i].name;
    return "?";
}

const char *tw_action_kind_name(tw_action_kind kind)
{
    static const char *const names[] = {"signal", "exec", "checkpoint", "stop", "lr", "dump-stacks"};
    return names[kind];
}

static int fail(char *err, size_t cap, const char *where, const char *spec, const char *why)
{
    snprintf(err, cap, "%s '%s': %s", where, spec, why);
    return TW_EUSAGE;
}

/* The '=' between selector and action: the first one after the matchers'
 * closing brace (label values may hold '='), else the first one. */
static const char *split_point(const char *spec)
{
    const char *brace = strchr(spec, '{');
    const char *eq = strchr(spec, '=');
    if (!brace || (eq && eq < brace))
        return eq;
    bool quoted = false;
    for (const char *p = brace; *p; p++) {
        if (*p == '\\' && quoted && p[1])
            p++;
        else if (*p == '"' || *p == '\'')
            quoted = !quoted;
        else if (*p == '}' && !quoted)
            return strchr(p, '=');
    }
    return NULL;
}

/* Words of a command line: blanks separate, '...' is literal, "..." keeps
 * backslash escapes of " and \, a backslash outside quotes escapes the next
 * character. Nothing else is special. Returns the count, -1 when a quote is
 * not closed or there are more than WORDS_MAX words. */
static int split_words(const char *s, char ***out)
{
    char **words = calloc(WORDS_MAX + 1, sizeof *words);
    char *buf = malloc(strlen(s) + 1);
    int count = 0;
    if (!words || !buf)
        goto bad;
    while (*s) {
        while (isspace((unsigned char)*s))
            s++;
        if (!*s)
            break;
        size_t n = 0;
        while (*s && !isspace((unsigned char)*s)) {
            if (*s == '\'') {
                const char *end = strchr(s + 1, '\'');
                if (!end)
                    goto bad;
                memcpy(buf + n, s + 1, (size_t)(end - s - 1));
                n += (size_t)(end - s - 1);
                s = end + 1;
            } else if (*s == '"') {
                for (s++; *s && *s != '"'; s++) {
                    if (*s == '\\' && (s[1] == '"' || s[1] == '\\'))
                        s++;
                    buf[n++] = *s;
                }
                if (*s != '"')
                    goto bad;
                s++;
            } else {
                if (*s == '\\' && s[1])
                    s++;
                buf[n++] = *s++;
            }
        }
        if (count == WORDS_MAX || !(words[count] = strndup(buf, n)))
            goto bad;
        count++;
    }
    free(buf);
    *out = words;
    return count;
bad:
    for (int i = 0; words && i < count; i++)
        free(words[i]);
    free(words);
    free(buf);
    return -1;
}

/* signal:SIG[:rank=N|all] */
static int parse_signal(tw_action *act, const char *arg, char *err, size_t cap)
{
    char name[32];
    const char *colon = strchr(arg, ':');
    size_t n = colon ? (size_t)(colon - arg) : strlen(arg);
    if (n == 0 || n >= sizeof name)
        return fail(err, cap, act->where, act->text, "signal: needs a signal name (signal:USR1)");
    memcpy(name, arg, n);
    name[n] = '\0';
    if (!(act->signal = tw_signal_from_name(name)))
        return fail(err, cap, act->where, act->text, "unknown signal (HUP, INT, QUIT, USR1, USR2, TERM, ... or a number)");
    act->rank = TW_RANK_ALL;
    if (!colon)
        return TW_OK;
    const char *target = colon + 1;
    if (!strcmp(target, "rank=all") || !strcmp(target, "all"))
        return TW_OK;
    char *end;
    long rank = strncmp(target, "rank=", 5) ? -1 : strtol(target + 5, &end, 10);
    if (rank < 0 || rank > 1 << 20 || end == target + 5 || *end)
        return fail(err, cap, act->where, act->text, "the target is rank=N or rank=all");
    act->rank = (int)rank;
    return TW_OK;
}

static int parse_action(tw_action *act, const char *text, char *err, size_t cap)
{
    if (!strncmp(text, "signal:", 7)) {
        act->kind = TW_ACT_SIGNAL;
        return parse_signal(act, text + 7, err, cap);
    }
    if (!strncmp(text, "exec:", 5)) {
        act->kind = TW_ACT_EXEC;
        int n = split_words(text + 5, &act->argv);
        if (n < 0)
            return fail(err, cap, act->where, act->text, "exec: has an unclosed quote or too many words");
        if (n == 0)
            return fail(err, cap, act->where, act->text, "exec: needs a command");
        return TW_OK;
    }
    if (!strncmp(text, "lr:", 3)) {
        char *end;
        act->kind = TW_ACT_LR;
        act->factor = strtod(text + 3, &end);
        if (end == text + 3 || *end || !isfinite(act->factor) || act->factor <= 0 || act->factor > 100)
            return fail(err, cap, act->where, act->text, "lr: takes a factor above 0 (lr:0.5 halves the learning rate)");
        return TW_OK;
    }
    static const struct {
        const char *name;
        tw_action_kind kind;
    } plain[] = {{"checkpoint", TW_ACT_CHECKPOINT}, {"stop", TW_ACT_STOP}, {"dump-stacks", TW_ACT_DUMP_STACKS}};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        if (!strcmp(text, plain[i].name)) {
            act->kind = plain[i].kind;
            return TW_OK;
        }
    }
    return fail(err, cap, act->where, act->text,
                "unknown action (signal:SIG[:rank=N|all], exec:COMMAND, checkpoint, stop, lr:FACTOR, dump-stacks)");
}

static int parse_selector(tw_action *act, const char *text, size_t len, char *err, size_t cap)
{
    char *sel = strndup(text, len);
    if (!sel)
        return TW_ENOMEM;
    char why[256];
    int rc = tw_pq_parse(sel, &act->selector, why, sizeof why);
    free(sel);
    if (rc != TW_OK) {
        char msg[300];
        snprintf(msg, sizeof msg, "the alert selector: %s", why);
        return fail(err, cap, act->where, act->text, msg);
    }
    if (act->selector->kind != TW_PQ_SELECTOR || !act->selector->u.sel.metric || act->selector->u.sel.range_ms ||
        act->selector->u.sel.offset_ms)
        return fail(err, cap, act->where, act->text,
                    "the alert selector is an alert name with optional label matchers (TrainingStalled{rank=\"0\"})");
    act->alert = strdup(act->selector->u.sel.metric);
    return act->alert ? TW_OK : TW_ENOMEM;
}

int tw_action_parse(const char *spec, const char *where, double cooldown, tw_action **out, char *err, size_t cap)
{
    *out = NULL;
    tw_action *act = calloc(1, sizeof *act);
    if (!act || !(act->text = strdup(spec)) || !(act->where = strdup(where))) {
        tw_action_free(act);
        return TW_ENOMEM;
    }
    act->cooldown = cooldown;
    const char *eq = split_point(spec);
    int rc;
    if (!eq || eq == spec || !eq[1])
        rc = fail(err, cap, where, spec, "expected ALERTNAME[{matchers}]=ACTION");
    else if ((rc = parse_selector(act, spec, (size_t)(eq - spec), err, cap)) == TW_OK &&
             !(act->action_text = strdup(eq + 1)))
        rc = TW_ENOMEM;
    if (rc == TW_OK)
        rc = parse_action(act, eq + 1, err, cap);
    if (rc != TW_OK) {
        tw_action_free(act);
        return rc;
    }
    *out = act;
    return TW_OK;
}

void tw_action_free(tw_action *act)
{
    if (!act)
        return;
    for (size_t i = 0; act->argv && act->argv[i]; i++)
        free(act->argv[i]);
    free(act->argv);
    tw_pq_free(act->selector);
    free(act->alert);
    free(act->action_text);
    free(act->where);
    free(act->text);
    free(act->fired);
    free(act);
}
