/*
 * test_actions.c: actions as configured (spec.c: where the selector ends,
 * how a command splits into words, signal names, what is refused) and the
 * sink's rules (actions.c: once per firing, the cooldown per alert, the
 * matchers, dry run), counted in trainwatch_actions_total. The actions
 * themselves, on real processes, are tests/e2e/test_actions.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actions/actions_internal.h"
#include "core/cut.h"
#include "core/rank_env.h"
#include "trainwatch/control.h"
#include "trainwatch/error.h"
#include "trainwatch/metrics.h"

static tw_action *parse_ok(const char *spec)
{
    char err[512] = "";
    tw_action *act = NULL;
    int rc = tw_action_parse(spec, "--on-alert", 300, &act, err, sizeof err);
    if (rc != TW_OK)
        fail_msg("%s: %s", spec, err);
    return act;
}

static void parse_bad(const char *spec, const char *words)
{
    char err[512] = "";
    tw_action *act = NULL;
    assert_int_equal(tw_action_parse(spec, "--on-alert", 300, &act, err, sizeof err), TW_EUSAGE);
    assert_null(act);
    if (!strstr(err, words) || !strstr(err, spec))
        fail_msg("%s: '%s' lacks '%s'", spec, err, words);
}

static void test_selector_ends_after_its_matchers(void **state)
{
    (void)state;
    tw_action *act = parse_ok("Hung{note=\"a=b}c\",rank=~\"0|1\"}=signal:USR1:rank=1");
    assert_string_equal(act->alert, "Hung");
    assert_int_equal(act->kind, TW_ACT_SIGNAL);
    assert_int_equal(act->signal, SIGUSR1);
    assert_int_equal(act->rank, 1);
    assert_int_equal(act->selector->u.sel.matcher_count, 2);
    assert_string_equal(act->selector->u.sel.matchers[0].value, "a=b}c");
    tw_action_free(act);
    act = parse_ok("TrainingLossNaN=lr:0.5");
    assert_int_equal(act->kind, TW_ACT_LR);
    assert_true(act->factor == 0.5);
    tw_action_free(act);
    act = parse_ok("X=signal:SIGTERM:all");
    assert_int_equal(act->signal, SIGTERM);
    assert_int_equal(act->rank, TW_RANK_ALL);
    tw_action_free(act);
    act = parse_ok("X=signal:10");
    assert_int_equal(act->signal, 10);
    tw_action_free(act);
}

static void test_commands_split_into_words_without_a_shell(void **state)
{
    (void)state;
    tw_action *act = parse_ok("X=exec:sh -c 'echo \"$TW_ALERT_NAME\"; $(id)' \"two words\" \"q\\\"uote\" back\\ slash ''");
    const char *want[] = {"sh", "-c", "echo \"$TW_ALERT_NAME\"; $(id)", "two words", "q\"uote", "back slash", "", NULL};
    for (size_t i = 0; want[i]; i++)
        assert_string_equal(act->argv[i], want[i]);
    assert_null(act->argv[7]);
    tw_action_free(act);
}

static void test_bad_actions_are_refused_with_the_reason(void **state)
{
    (void)state;
    parse_bad("Hung", "expected ALERTNAME[{matchers}]=ACTION");
    parse_bad("=stop", "expected ALERTNAME");
    parse_bad("Hung=", "expected ALERTNAME");
    parse_bad("Hung=reboot", "unknown action");
    parse_bad("Hung=signal:", "needs a signal name");
    parse_bad("Hung=signal:NOPE", "unknown signal");
    parse_bad("Hung=signal:USR1:rank=x", "rank=N or rank=all");
    parse_bad("Hung=signal:USR1:rank=-1", "rank=N or rank=all");
    parse_bad("Hung=lr:0", "above 0");
    parse_bad("Hung=lr:nan", "above 0");
    parse_bad("Hung=lr:2x", "above 0");
    parse_bad("Hung=exec:", "needs a command");
    parse_bad("Hung=exec:sh -c 'open", "unclosed quote");
    parse_bad("Hung[5m]=stop", "the alert selector");
    parse_bad("rate(x[5m])=stop", "the alert selector");
    parse_bad("{a=\"b\"}=stop", "the alert selector");
    parse_bad("Hung{a=}=stop", "the alert selector");
}

static void test_signal_names(void **state)
{
    (void)state;
    assert_int_equal(tw_signal_from_name("USR2"), SIGUSR2);
    assert_int_equal(tw_signal_from_name("sigusr2"), SIGUSR2);
    assert_int_equal(tw_signal_from_name("SIGKILL"), SIGKILL);
    assert_int_equal(tw_signal_from_name("0"), 0);
    assert_int_equal(tw_signal_from_name("65"), 0);
    assert_int_equal(tw_signal_from_name(""), 0);
    assert_string_equal(tw_signal_name(SIGHUP), "HUP");
}

/* trainwatch_actions_total{alert=ALERT,action=ACTION,result=RESULT}, 0 when absent. */
static double counted(tw_registry *r, const char *alert, const char *action, const char *result)
{
    char *text;
    size_t len;
    assert_int_equal(tw_registry_expose(r, TW_EXPOSE_TEXT, &text, &len), TW_OK);
    char want[256];
    snprintf(want, sizeof want, "trainwatch_actions_total{alert=\"%s\",action=\"%s\",result=\"%s\"} ", alert,
             action, result);
    const char *at = strstr(text, want);
    double v = at ? strtod(at + strlen(want), NULL) : 0;
    free(text);
    return v;
}

static void firing(tw_actions *a, const char *name, const char *rank, uint64_t fp, bool changed, bool resolved)
{
    tw_alert_label labels[] = {{"alertname", name}, {"rank", rank}};
    tw_alert_notice n = {.labels = labels, .label_count = 2, .changed = changed, .resolved = resolved,
                         .fingerprint = fp, .starts_at = 1.7e9};
    tw_actions_sink(a, &n, 1);
}

static void test_once_per_firing_per_alert_within_the_cooldown(void **state)
{
    (void)state;
    tw_registry *r;
    assert_int_equal(tw_registry_new(&r), TW_OK);
    tw_actions *a;
    tw_actions_options o = {.registry = r, .name = "test", .dry_run = true};
    assert_int_equal(tw_actions_new(&o, &a), TW_OK);
    char err[512];
    assert_int_equal(tw_actions_add(a, "Hung{rank=\"0\"}=signal:USR1", "--on-alert", -1, err, sizeof err), TW_OK);
    assert_int_equal(tw_actions_add(a, "Hung=checkpoint", "--on-alert", 0.000001, err, sizeof err), TW_OK);
    firing(a, "Hung", "0", 1, true, false);
    firing(a, "Hung", "0", 1, false, false); /* a re-send of the same firing */
    firing(a, "Hung", "0", 1, true, true);   /* resolved */
    assert_true(counted(r, "Hung", "signal", "dry_run") == 1);
    assert_true(counted(r, "Hung", "checkpoint", "dry_run") == 1);
    firing(a, "Hung", "0", 1, true, false); /* fires again: the signal is in its 5m cooldown */
    assert_true(counted(r, "Hung", "signal", "dry_run") == 1);
    assert_true(counted(r, "Hung", "checkpoint", "dry_run") == 2);
    firing(a, "Hung", "1", 2, true, false); /* another rank: the matcher says no; its own cooldown */
    assert_true(counted(r, "Hung", "signal", "dry_run") == 1);
    assert_true(counted(r, "Hung", "checkpoint", "dry_run") == 3);
    firing(a, "Other", "0", 3, true, false);
    assert_true(counted(r, "Other", "signal", "dry_run") == 0);
    char *page = tw_actions_page(a, true);
    assert_non_null(strstr(page, "\"action\":\"Hung{rank=\\\"0\\\"}=signal:USR1\",\"from\":\"--on-alert\""));
    assert_non_null(strstr(page, "\"times\":1,\"dryRun\":true"));
    free(page);
    tw_actions_free(a);
    tw_registry_free(r);
}

static void test_requests_without_a_channel_fail_and_watch_takes_exec_only(void **state)
{
    (void)state;
    tw_registry *r;
    assert_int_equal(tw_registry_new(&r), TW_OK);
    tw_actions *a;
    tw_actions_options o = {.registry = r, .name = "test"};
    assert_int_equal(tw_actions_new(&o, &a), TW_OK);
    char err[512];
    assert_int_equal(tw_actions_add(a, "Hung=stop", "--on-alert", -1, err, sizeof err), TW_OK);
    assert_int_equal(tw_actions_add(a, "Hung=dump-stacks", "--on-alert", -1, err, sizeof err), TW_OK);
    firing(a, "Hung", "0", 1, true, false);
    assert_true(counted(r, "Hung", "stop", "failed") == 1);
    assert_true(counted(r, "Hung", "dump-stacks", "failed") == 1);
    tw_actions_free(a);
    o = (tw_actions_options){.name = "watch", .exec_only = true};
    assert_int_equal(tw_actions_new(&o, &a), TW_OK);
    assert_int_equal(tw_actions_add(a, "Hung=lr:0.5", "x.yml:3", -1, err, sizeof err), TW_EUSAGE);
    assert_non_null(strstr(err, "x.yml:3 'Hung=lr:0.5': lr acts on the training processes"));
    assert_int_equal(tw_actions_add(a, "Hung=exec:true", "x.yml:4", -1, err, sizeof err), TW_OK);
    assert_int_equal(tw_actions_count(a), 1);
    tw_actions_free(a);
    tw_registry_free(r);
}

/* The channel end to end: the supervisor's requests (control.c) read by a
 * C trainer (trainwatch/control.h), which acts when they are due and
 * replies; the supervisor reads the hello and the replies back. */
typedef struct replies {
    int count;
    char action[8][16], result[8][16], detail[8][64];
    double step[8];
} replies;

static void collect_reply(void *arg, const char *action, const char *result, int rank, double step, unsigned long id,
                          const char *detail)
{
    replies *r = arg;
    (void)rank, (void)id;
    if (r->count == 8)
        return;
    snprintf(r->action[r->count], sizeof r->action[0], "%s", action);
    snprintf(r->result[r->count], sizeof r->result[0], "%s", result);
    snprintf(r->detail[r->count], sizeof r->detail[0], "%s", detail);
    r->step[r->count++] = step;
}

static void test_a_round_trip_through_the_control_channel(void **state)
{
    (void)state;
    tw_trainer_control *none = NULL;
    unsetenv("TRAINWATCH_CONTROL");
    assert_int_equal(tw_trainer_control_open(&none), TW_ENOENT);
    tw_trainer_request req;
    assert_int_equal(tw_trainer_control_poll(NULL, 1, &req), 0); /* outside run: nothing, no test needed */
    tw_control sup = {.fd = -1, .ack_fd = -1};
    char err[256];
    assert_int_equal(tw_control_open(&sup, err, sizeof err), TW_OK);
    assert_string_equal(getenv("TRAINWATCH_CONTROL"), sup.path);
    tw_trainer_control *t;
    assert_int_equal(tw_trainer_control_open(&t), TW_OK);
    unsigned long id;
    assert_int_equal(tw_control_request(&sup, "lr", 0.5, "Hung", 12, &id), TW_OK);
    assert_int_equal(id, 1);
    assert_int_equal(tw_control_request(&sup, "checkpoint", 0, "Hung", NAN, &id), TW_OK);
    assert_int_equal(write(sup.fd, "not json\n{\"id\":7,\"action\":\"reboot\",\"time\":1e12}\n", 49), 49);
    assert_int_equal(tw_trainer_control_poll(t, 10, &req), 1); /* lr is due at 12 */
    assert_string_equal(req.action, "checkpoint");
    assert_string_equal(req.alert, "Hung");
    tw_trainer_control_reply(t, &req, "done", 10, "saved step10.ckpt");
    assert_int_equal(tw_trainer_control_poll(t, 11, &req), 0);
    assert_int_equal(tw_trainer_control_poll(t, 12, &req), 1);
    assert_string_equal(req.action, "lr");
    assert_true(req.factor == 0.5 && req.at_step == 12);
    tw_trainer_control_reply(t, &req, "done", 12, "lr 0.1 -> 0.05");
    assert_int_equal(tw_trainer_control_poll(t, 13, &req), 0);
    assert_int_equal(tw_trainer_control_errors(t), 0);
    replies r = {0};
    tw_control_read_replies(&sup, collect_reply, &r);
    assert_int_equal(sup.proc_count, 1);
    assert_int_equal(sup.procs[0].pid, getpid());
    assert_int_equal(sup.procs[0].stack_signal, 0); /* a C trainer: never sent the dump signal */
    assert_int_equal(r.count, 3); /* the malformed line's reply names no action: not counted */
    assert_string_equal(r.action[0], "reboot");
    assert_string_equal(r.result[0], "ignored");
    assert_string_equal(r.detail[0], "unknown action");
    assert_string_equal(r.action[1], "checkpoint");
    assert_string_equal(r.detail[1], "saved step10.ckpt");
    assert_true(r.step[1] == 10);
    assert_string_equal(r.action[2], "lr");
    assert_string_equal(r.detail[2], "lr 0.1 -> 0.05");
    tw_trainer_control_close(t);
    char ack[700];
    snprintf(ack, sizeof ack, "%s", sup.ack_path);
    tw_control_close(&sup);
    assert_int_equal(access(ack, F_OK), -1); /* the directory went with the run */
    unsetenv("TRAINWATCH_CONTROL");
    unsetenv("TRAINWATCH_STACK_SIGNAL");
}

/* The launchers' rank variables (core/rank_env.h), read from an environ
 * entry as the signal action reads /proc/PID/environ, and from getenv. */
static void test_rank_variables_in_order_of_trust(void **state)
{
    (void)state;
    int value = -1, which = -1;
    assert_true(tw_rank_env_entry(tw_rank_env_vars, "RANK=3", 1 << 20, &value, &which));
    assert_int_equal(value, 3);
    assert_string_equal(tw_rank_env_vars[which], "RANK");
    int first = which;
    assert_true(tw_rank_env_entry(tw_rank_env_vars, "PADDLE_TRAINER_ID=5", 1 << 20, &value, &which));
    assert_true(which < first); /* Paddle's own variable wins over RANK */
    assert_false(tw_rank_env_entry(tw_rank_env_vars, "RANKS=3", 1 << 20, &value, &which));
    assert_false(tw_rank_env_entry(tw_rank_env_vars, "RANK=3x", 1 << 20, &value, &which));
    assert_false(tw_rank_env_entry(tw_rank_env_vars, "RANK=", 1 << 20, &value, &which));
    assert_false(tw_rank_env_entry(tw_rank_env_vars, "RANK=-1", 1 << 20, &value, &which));
    assert_false(tw_rank_env_entry(tw_rank_env_vars, "RANK=2000000", 1 << 20, &value, &which));
    assert_false(tw_rank_env_entry(tw_rank_env_vars, "LOCAL_RANK=1", 1 << 20, &value, &which));
    assert_true(tw_rank_env_entry(tw_local_rank_env_vars, "LOCAL_RANK=1", 1 << 20, &value, &which));

    for (int i = 0; tw_rank_env_vars[i]; i++)
        unsetenv(tw_rank_env_vars[i]);
    assert_null(tw_rank_env_get(tw_rank_env_vars, 1L << 30, &value));
    setenv("SLURM_PROCID", "7", 1);
    setenv("RANK", "junk", 1);
    assert_string_equal(tw_rank_env_get(tw_rank_env_vars, 1L << 30, &value), "SLURM_PROCID");
    assert_int_equal(value, 7);
    setenv("RANK", "2", 1);
    assert_string_equal(tw_rank_env_get(tw_rank_env_vars, 1L << 30, &value), "RANK");
    assert_int_equal(value, 2);
    unsetenv("RANK");
    unsetenv("SLURM_PROCID");
}

static void test_copies_are_cut_to_fit(void **state)
{
    (void)state;
    char small[4] = "xyz";
    tw_copy_str(small, sizeof small, "abcdef");
    assert_string_equal(small, "abc");
    tw_copy_cut(small, sizeof small, "hello", 2);
    assert_string_equal(small, "he");
    tw_copy_str(small, sizeof small, "");
    assert_string_equal(small, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_selector_ends_after_its_matchers),
        cmocka_unit_test(test_commands_split_into_words_without_a_shell),
        cmocka_unit_test(test_bad_actions_are_refused_with_the_reason),
        cmocka_unit_test(test_signal_names),
        cmocka_unit_test(test_once_per_firing_per_alert_within_the_cooldown),
        cmocka_unit_test(test_requests_without_a_channel_fail_and_watch_takes_exec_only),
        cmocka_unit_test(test_a_round_trip_through_the_control_channel),
        cmocka_unit_test(test_rank_variables_in_order_of_trust),
        cmocka_unit_test(test_copies_are_cut_to_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
