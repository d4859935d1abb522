/*
 * test_rules.c: rule files, templates and the alert state machine.
 *
 * The evaluator's numbers are compared with Prometheus itself in
 * tests/e2e/test_promql.py; here are the parts promtool cannot judge for us:
 * what loading reports (and where), how templates render, and how alerts move
 * through pending, firing and resolved (with for and keep_firing_for) and
 * when they are handed to the sink, on a registry driven by the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"
#include "notify/payload.h"
#include "notify/sign.h"
#include "rules/regex.h"
#include "rules/ruleset.h"
#include "rules/template.h"
#include "trainwatch/error.h"
#include "trainwatch/metrics.h"
#include "trainwatch/rules.h"

/* ---- durations ---------------------------------------------------------- */

static void test_durations(void **state)
{
    (void)state;
    int64_t ms;
    assert_true(tw_parse_duration("1h30m", &ms));
    assert_int_equal(ms, 5400000);
    assert_true(tw_parse_duration("250ms", &ms));
    assert_int_equal(ms, 250);
    assert_true(tw_parse_duration("0", &ms));
    assert_int_equal(ms, 0);
    assert_true(tw_parse_duration("1w2d", &ms));
    assert_int_equal(ms, 9 * 86400000LL);
    assert_false(tw_parse_duration("30m1h", &ms)); /* units must decrease */
    assert_false(tw_parse_duration("5", &ms));
    assert_false(tw_parse_duration("5 m", &ms));
    assert_false(tw_parse_duration("", &ms));
    assert_false(tw_parse_duration("-5m", &ms));
    char text[32];
    tw_format_duration(5400000, text, sizeof text);
    assert_string_equal(text, "1h30m");
    tw_format_duration(0, text, sizeof text);
    assert_string_equal(text, "0s");
    tw_format_duration(61500, text, sizeof text);
    assert_string_equal(text, "1m1s500ms");
}

/* ---- templates ---------------------------------------------------------- */

static char *render(const char *text, double value)
{
    tw_template *t;
    char err[256];
    assert_int_equal(tw_template_compile(text, &t, err, sizeof err), TW_OK);
    tw_lset labels = {0};
    tw_lset_set(&labels, "job", "train");
    tw_lset_set(&labels, "rank", "3");
    tw_template_data d = {.labels = &labels, .value = value, .external_url = "http://prom:9090"};
    char *out = tw_template_render(t, &d);
    tw_template_free(t);
    tw_lset_free(&labels);
    return out;
}

static void expect_render(const char *text, double value, const char *want)
{
    char *got = render(text, value);
    assert_string_equal(got, want);
    free(got);
}

static void test_templates(void **state)
{
    (void)state;
    expect_render("rank {{ $labels.rank }} of {{$labels.job}}", 0, "rank 3 of train");
    expect_render("{{ .Labels.job }} {{ .Value }}", 2.5, "train 2.5");
    expect_render("missing: [{{ $labels.nope }}]", 0, "missing: []");
    expect_render("{{ $value }}", 1e6, "1e+06");
    expect_render("{{ $value }}", 123456, "123456");
    expect_render("{{ $value }}", 0.1, "0.1");
    expect_render("{{ $value }}", 0.00001, "1e-05");
    expect_render("{{ $value }}", NAN, "NaN");
    expect_render("{{ $value | humanize }}", 1234567, "1.235M");
    expect_render("{{ humanize $value }}", 0.0123, "12.3m");
    expect_render("{{ $value | humanize1024 }}", 2048, "2ki");
    expect_render("{{ $value | humanizeDuration }}", 3725, "1h 2m 5s");
    expect_render("{{ $value | humanizeDuration }}", 90061, "1d 1h 1m 1s");
    expect_render("{{ $value | humanizeDuration }}", 1.5, "1.5s");
    expect_render("{{ $value | humanizeDuration }}", 0.25, "250ms");
    expect_render("{{ $value | humanizePercentage }}", 0.5678, "56.78%");
    expect_render("{{ printf \"%.2f\" $value }} and {{ $value | printf \"%d\" }}", 3.14159, "3.14 and 3");
    expect_render("{{ $labels.job | toUpper }}", 0, "TRAIN");
    expect_render("a {{- \" b \" -}} c", 0, "a b c");
    expect_render("x {{/* a comment */}}y", 0, "x y");
    expect_render("{{ $externalURL }}/graph", 0, "http://prom:9090/graph");
    expect_render("no actions at all", 0, "no actions at all");
    /* results longer than a short buffer are whole: a long printf, a long label through toUpper */
    expect_render("{{ printf \"Job %s rank %s: the loss was NaN or Inf in the last %.0f step records in a row\" "
                  "$labels.job $labels.rank $value }}",
                  7, "Job train rank 3: the loss was NaN or Inf in the last 7 step records in a row");
    expect_render("{{ printf \"%s/%s/%s/%s/%s/%s/%s/%s/%s/%s\" \"aaaaaaaaaa\" \"bbbbbbbbbb\" \"cccccccccc\" \"dddddddddd\" "
                  "\"eeeeeeeeee\" \"ffffffffff\" \"gggggggggg\" \"hhhhhhhhhh\" \"iiiiiiiiii\" \"jjjjjjjjjj\" | toUpper }}",
                  0, "AAAAAAAAAA/BBBBBBBBBB/CCCCCCCCCC/DDDDDDDDDD/EEEEEEEEEE/FFFFFFFFFF/GGGGGGGGGG/HHHHHHHHHH/IIIIIIIIII/JJJJJJJJJJ");

    tw_template *t;
    char err[256];
    assert_int_equal(tw_template_compile("{{ if $value }}x{{ end }}", &t, err, sizeof err), TW_EUNSUPPORTED);
    assert_non_null(strstr(err, "'if'"));
    assert_int_equal(tw_template_compile("{{ $value ", &t, err, sizeof err), TW_ECONFIG);
    assert_int_equal(tw_template_compile("{{ $labels }}", &t, err, sizeof err), TW_EUNSUPPORTED);
    char many[512] = "{{ printf \"x\"";
    for (int i = 0; i < 32; i++)
        strcat(many, " 1");
    strcat(many, " }}");
    assert_int_equal(tw_template_compile(many, &t, err, sizeof err), TW_EUNSUPPORTED);
    assert_non_null(strstr(err, "more than 32 arguments"));
}

/* ---- regular expressions (RE2 on PCRE2) ----------------------------------- */

static bool re_matches(const char *pattern, const char *text)
{
    tw_regex *re;
    char err[256];
    assert_int_equal(tw_regex_compile(pattern, &re, err, sizeof err), TW_OK);
    bool hit = tw_regex_match(re, text);
    tw_regex_free(re);
    return hit;
}

static void test_regex_is_re2(void **state)
{
    (void)state;
    /* what POSIX ERE read otherwise; tests/e2e/test_promql.py asks Prometheus */
    assert_true(re_matches("\\d+", "123"));
    assert_false(re_matches("\\d+", "12a"));
    assert_true(re_matches("(?i)rank", "RANK"));
    assert_false(re_matches("a.b", "a\nb"));
    assert_true(re_matches("(?s)a.b", "a\nb"));
    assert_false(re_matches("\\s", "\v")); /* RE2's \s has no vertical tab, PCRE2's has */
    assert_true(re_matches("[^\\S]", " "));
    assert_true(re_matches("\\v", "\v"));  /* the character, not PCRE2's class */
    assert_true(re_matches("\\101", "A")); /* octal, not a backreference */
    assert_false(re_matches("a$", "a\n")); /* the end of the text only */
    assert_true(re_matches("(?m)a$\n", "a\n"));
    assert_true(re_matches("^*a", "a")); /* an assertion may repeat in RE2 */
    assert_true(re_matches("..", "\xc3\xa9x"));
    /* invalid UTF-8 reads as U+FFFD per byte, as in Go */
    assert_true(re_matches(".", "\xff"));
    assert_true(re_matches("..", "\xe2\x82"));
    assert_true(re_matches("a\\x{fffd}b", "a\xed"
                                          "b"));
    /* the anchoring cannot be escaped */
    char err[256];
    tw_regex *re;
    assert_int_equal(tw_regex_compile("a)|(b", &re, err, sizeof err), TW_ECONFIG);
    assert_string_equal(err, "unexpected )");
    assert_int_equal(tw_regex_compile("\\Qa)|(b", &re, err, sizeof err), TW_ECONFIG);
    assert_true(re_matches("\\Qa)|(b\\E", "a)|(b"));
    assert_false(re_matches("a|b", "ab"));

    /* what RE2 refuses is refused, naming the construct */
    static const struct {
        const char *pattern, *said;
    } refused[] = {
        {"(a)\\1", "backreference \\1"},
        {"(?=x)", "lookahead"},
        {"(?<!x)y", "negative lookbehind"},
        {"a++", "possessive quantifier"},
        {"(?>a)", "atomic group"},
        {"\\C", "\\C (one byte)"},
        {"(?R)", "recursion"},
        {"(?1)", "subroutine call"},
        {"a\\Z", "\\Z"},
        {"(?x)a b", "flag x"},
        {"a{1001}", "invalid repeat count"},
        {"a**", "nested repetition"},
        {"(?<n>a)", "(?P<name>...)"},
        {"(*UTF)a", "control verbs"},
        {"\\Qabc", "\\Q without \\E"},
        {"[\\b]", "in a character class"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        assert_int_equal(tw_regex_compile(refused[i].pattern, &re, err, sizeof err), TW_ECONFIG);
        if (!strstr(err, refused[i].said))
            fail_msg("%s: %s", refused[i].pattern, err);
    }
}

static void test_regex_never_backtracks(void **state)
{
    (void)state;
    /* exponential for a backtracking matcher; the DFA matcher reads the text once */
    char text[4097];
    memset(text, 'a', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    assert_false(re_matches("(a*)*b", text));
    assert_false(re_matches("(a|aa)+$b", text));
    assert_true(re_matches("(a|a?)+", text));
    /* many states at once: the workspace grows */
    assert_true(re_matches("(?:a?){1000}a{1000}", text + 3096));
}

/* ---- rule files --------------------------------------------------------- */

typedef struct problems {
    char text[16][512];
    bool unsupported[16];
    int count;
} problems;

static void collect(void *arg, const char *text, bool unsupported)
{
    problems *p = arg;
    if (p->count < 16) {
        snprintf(p->text[p->count], sizeof p->text[0], "%s", text);
        p->unsupported[p->count++] = unsupported;
    }
}

static int load(const char *yaml, problems *p, tw_ruleset **out)
{
    tw_ruleset *rs;
    assert_int_equal(tw_ruleset_new(&rs), TW_OK);
    memset(p, 0, sizeof *p);
    int rc = tw_ruleset_load_text(rs, "r.yml", yaml, strlen(yaml), collect, p);
    if (out)
        *out = rs;
    else
        tw_ruleset_free(rs);
    return rc;
}

static bool reported(const problems *p, const char *needle)
{
    for (int i = 0; i < p->count; i++) {
        if (strstr(p->text[i], needle))
            return true;
    }
    return false;
}

static void test_default_rules_load(void **state)
{
    (void)state;
    problems p;
    tw_ruleset *rs;
    assert_int_equal(load(tw_default_rules(), &p, &rs), TW_OK);
    assert_int_equal(p.count, 0);
    assert_int_equal(tw_ruleset_rule_count(rs), 11);
    /* export, and the export loads back to the same rules */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(tw_ruleset_export(rs, f), TW_OK);
    fclose(f);
    tw_ruleset *again;
    assert_int_equal(tw_ruleset_new(&again), TW_OK);
    assert_int_equal(tw_ruleset_load_text(again, "export", text, len, collect, &p), TW_OK);
    assert_int_equal(tw_ruleset_rule_count(again), 11);
    assert_string_equal(again->groups[0].rules[3].expr_text, rs->groups[0].rules[3].expr_text);
    assert_string_equal(again->groups[0].rules[0].annotations[0].text, rs->groups[0].rules[0].annotations[0].text);
    free(text);
    tw_ruleset_free(again);
    tw_ruleset_free(rs);
}

static void test_rule_file_problems(void **state)
{
    (void)state;
    problems p;
    const char *bad = "groups:\n"
                      "  - name: g\n"
                      "    interval: 10x\n"
                      "    rules:\n"
                      "      - alert: A\n"
                      "        expr: rate(x[5m] > 1\n"
                      "      - record: bad name\n"
                      "        expr: x\n"
                      "        for: 5m\n"
                      "      - alert: B\n"
                      "        record: b\n"
                      "        expr: x\n"
                      "      - alert: C\n"
                      "        expr: x\n"
                      "        unknown: 1\n"
                      "        labels:\n"
                      "          __name__: y\n"
                      "  - name: g\n"
                      "    rules: []\n";
    assert_int_equal(load(bad, &p, NULL), TW_ECONFIG);
    assert_true(reported(&p, "r.yml:3: interval: not a valid duration"));
    assert_true(reported(&p, "r.yml:6: alert A: expr: could not parse expression"));
    assert_true(reported(&p, "r.yml:9: invalid field 'for' in recording rule"));
    assert_true(reported(&p, "invalid recording rule name: bad name"));
    assert_true(reported(&p, "only one of 'record' and 'alert' must be set"));
    assert_true(reported(&p, "r.yml:15: field unknown not found"));
    assert_true(reported(&p, "invalid label name: __name__"));
    assert_true(reported(&p, "groupname: \"g\" is repeated"));

    /* valid Prometheus, outside the subset: reported as unsupported, not invalid */
    const char *unsupported = "groups:\n"
                              "  - name: g\n"
                              "    rules:\n"
                              "      - alert: A\n"
                              "        expr: predict_linear(x[1h], 3600) < 0\n"
                              "        annotations:\n"
                              "          summary: '{{ range $i := .Labels }}{{ end }}'\n";
    assert_int_equal(load(unsupported, &p, NULL), TW_EUNSUPPORTED);
    assert_int_equal(p.count, 2);
    assert_true(p.unsupported[0] && p.unsupported[1]);
    assert_true(reported(&p, "function 'predict_linear' is not supported"));

    assert_int_equal(load("groups: [", &p, NULL), TW_ECONFIG);
    assert_true(reported(&p, "r.yml:2:1: YAML: "));
    assert_int_equal(load("just a string", &p, NULL), TW_ECONFIG);
    assert_int_equal(load("", &p, NULL), TW_OK);
    assert_int_equal(load("groups:\n", &p, NULL), TW_OK);
}

/* ---- bounds on nesting and size ------------------------------------------ */

static void test_template_output_is_bounded(void **state)
{
    (void)state;
    tw_template *t;
    char err[256];
    /* a width or precision that would print gigabytes is refused when compiling */
    static const struct {
        const char *text, *said;
    } refused[] = {
        {"{{ printf \"%.999999999f\" 1.0 }}", "printf precision 999999999 is larger than trainwatch's bound of 1000"},
        {"{{ printf \"x %999999999d\" $value }}", "printf width 999999999 is larger"},
        {"{{ $value | printf \"%-5.1001e\" }}", "printf precision 1001 is larger"},
        {"{{ printf \"%% %s %08.99999999999999999999g\" \"a\" 1 }}", "printf precision 999999999999999 is larger"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        assert_int_equal(tw_template_compile(refused[i].text, &t, err, sizeof err), TW_EUNSUPPORTED);
        assert_non_null(strstr(err, refused[i].said));
    }
    assert_int_equal(tw_template_compile("{{ printf \"%.1000f %1000d\" 1.0 2 }}", &t, err, sizeof err), TW_OK);
    tw_template_free(t);
    expect_render("{{ printf \"%5.1f|%-4d|%%\" $value $value }}", 2.25, "  2.2|2   |%");
    /* integers out of long long's range are clamped (the cast is undefined) */
    expect_render("{{ printf \"%d\" $value }} {{ $value | humanizeDuration }}", 1e300,
                  "9223372036854775807 106751991167300d 15h 30m 7s");
    expect_render("{{ printf \"%d\" $value }}", -1e300, "-9223372036854775808");

    /* a format from a label is only known when rendering: Go's words instead */
    assert_int_equal(tw_template_compile("{{ printf $labels.fmt $value }}", &t, err, sizeof err), TW_OK);
    tw_lset labels = {0};
    tw_lset_set(&labels, "fmt", "a %.999999999f b");
    tw_template_data d = {.labels = &labels, .value = 1};
    char *out = tw_template_render(t, &d);
    assert_string_equal(out, "a %!(BADPREC) b");
    free(out);
    tw_lset_set(&labels, "fmt", "%999999999s");
    out = tw_template_render(t, &d);
    assert_string_equal(out, "%!(BADWIDTH)");
    free(out);
    tw_template_free(t);
    tw_lset_free(&labels);

    /* whatever the template, the rendering stops at 64 KiB */
    size_t n = 3 * TW_TEMPLATE_MAX_OUTPUT;
    char *text = malloc(n + 1);
    for (size_t i = 0; i < n; i += 16)
        memcpy(text + i, "{{$labels.job}}x", 16);
    text[n] = '\0';
    out = render(text, 0);
    assert_int_equal(strlen(out), TW_TEMPLATE_MAX_OUTPUT);
    free(out);
    free(text);

    /* in a rule file: FILE:LINE, refused as not evaluable by trainwatch */
    problems p;
    const char *file = "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up == 0\n"
                       "        annotations:\n          summary: '{{ printf \"%.999999999f\" 1.0 }}'\n";
    assert_int_equal(load(file, &p, NULL), TW_EUNSUPPORTED);
    assert_true(reported(&p, "r.yml:7: annotations summary: template: printf precision 999999999 is larger"));
}

/* prefix repeated n times, then middle, then suffix repeated n times */
static char *nested(const char *prefix, const char *middle, const char *suffix, size_t n)
{
    size_t lp = strlen(prefix), lm = strlen(middle), ls = strlen(suffix);
    char *s = malloc(n * (lp + ls) + lm + 1), *o = s;
    assert_non_null(s);
    for (size_t i = 0; i < n; i++, o += lp)
        memcpy(o, prefix, lp);
    memcpy(o, middle, lm);
    o += lm;
    for (size_t i = 0; i < n; i++, o += ls)
        memcpy(o, suffix, ls);
    *o = '\0';
    return s;
}

static int parse_status(const char *expr, char *err, size_t cap)
{
    tw_pq_node *n = NULL;
    int rc = tw_pq_parse(expr, &n, err, cap);
    tw_pq_free(n);
    return rc;
}

static void test_deep_expressions_are_refused(void **state)
{
    (void)state;
    static const struct {
        const char *prefix, *middle, *suffix;
    } shapes[] = {{"(", "up", ")"},    {"-", "up", ""},     {"abs(", "up", ")"}, {"-(", "1", ")"},
                  {"sum(", "up", ")"}, {"", "up", " + up"}, {"2 ^ ", "up", ""}};
    char err[256];
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        /* deep enough to overflow any stack if the parser recursed without bound */
        char *deep = nested(shapes[i].prefix, shapes[i].middle, shapes[i].suffix, 100000);
        assert_int_equal(parse_status(deep, err, sizeof err), TW_EUNSUPPORTED);
        assert_non_null(strstr(err, "nesting deeper than 256 levels"));
        free(deep);
        char *fine = nested(shapes[i].prefix, shapes[i].middle, shapes[i].suffix, 100);
        assert_int_equal(parse_status(fine, err, sizeof err), TW_OK);
        free(fine);
    }
    /* in a rule file: FILE:LINE, and the file is refused as not evaluable */
    char *deep = nested("(", "up", ")", 100000);
    const char *head = "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: ";
    char *file = malloc(strlen(head) + strlen(deep) + 2);
    sprintf(file, "%s%s\n", head, deep);
    problems p;
    assert_int_equal(load(file, &p, NULL), TW_EUNSUPPORTED);
    assert_true(reported(&p, "r.yml:5: alert A: expr: not evaluated by trainwatch: col 257: expression nesting deeper "
                             "than 256 levels"));
    free(file);
    free(deep);
}

static void test_yaml_documents_are_bounded(void **state)
{
    (void)state;
    problems p;
    /* 100,000 open flow sequences: refused at the 65th, before libyaml builds anything */
    char *deep = nested("[", "", "]", 100000);
    char *file = malloc(strlen(deep) + 16);
    sprintf(file, "groups: %s\n", deep);
    assert_int_equal(load(file, &p, NULL), TW_ECONFIG);
    assert_true(reported(&p, "r.yml:1:72: YAML: nesting deeper than 64 levels"));
    free(file);
    free(deep);
    /* block style nests the same way */
    char *block = malloc(100 * 64 + 16), *o = block;
    for (int i = 0; i < 100; i++)
        o += sprintf(o, "%*sk:\n", i, "");
    assert_int_equal(load(block, &p, NULL), TW_ECONFIG);
    assert_true(reported(&p, "YAML: nesting deeper than 64 levels"));
    free(block);
    /* larger than 16 MiB */
    size_t big = (16u << 20) + 1;
    char *text = malloc(big + 1);
    memset(text, '#', big);
    text[big] = '\0';
    assert_int_equal(load(text, &p, NULL), TW_ECONFIG);
    assert_true(reported(&p, "r.yml:1:1: YAML: larger than 16 MiB"));
    free(text);
}

/* ---- the alert state machine ------------------------------------------- */

typedef struct sent {
    char name[64];
    bool resolved, changed;
    double starts_at, ends_at, value;
    char summary[128];
} sent;

typedef struct capture {
    sent items[64];
    int count;
} capture;

static void sink(void *arg, const tw_alert_notice *alerts, size_t n)
{
    capture *c = arg;
    for (size_t i = 0; i < n && c->count < 64; i++) {
        sent *s = &c->items[c->count++];
        memset(s, 0, sizeof *s);
        for (size_t k = 0; k < alerts[i].label_count; k++) {
            if (!strcmp(alerts[i].labels[k].name, "alertname"))
                snprintf(s->name, sizeof s->name, "%s", alerts[i].labels[k].value);
        }
        for (size_t k = 0; k < alerts[i].annotation_count; k++) {
            if (!strcmp(alerts[i].annotations[k].name, "summary"))
                snprintf(s->summary, sizeof s->summary, "%s", alerts[i].annotations[k].value);
        }
        s->resolved = alerts[i].resolved;
        s->changed = alerts[i].changed;
        s->starts_at = alerts[i].starts_at;
        s->ends_at = alerts[i].ends_at;
        s->value = alerts[i].value;
    }
}

static void test_alert_states(void **state)
{
    (void)state;
    tw_registry *reg;
    assert_int_equal(tw_registry_new(&reg), TW_OK);
    tw_family *f;
    const char *names[] = {"job"}, *values[] = {"train"};
    tw_family_options fo = {.name = "x", .help = "x", .type = TW_METRIC_GAUGE, .label_count = 1, .label_names = names};
    assert_int_equal(tw_family_register(reg, &fo, &f), TW_OK);
    tw_gauge *x;
    assert_int_equal(tw_family_series(f, values, &x), TW_OK);
    const char *rules = "groups:\n"
                        "  - name: g\n"
                        "    rules:\n"
                        "      - record: x2\n"
                        "        expr: x * 2\n"
                        "      - alert: High\n"
                        "        expr: x2 > 3\n"
                        "        for: 10s\n"
                        "        keep_firing_for: 5s\n"
                        "        annotations:\n"
                        "          summary: 'x2 is {{ $value }} on {{ $labels.job }}'\n";
    problems p;
    tw_ruleset *rs;
    assert_int_equal(load(rules, &p, &rs), TW_OK);
    capture c = {.count = 0};
    tw_alerting_options o = {.registry = reg, .default_interval = 1, .resend_delay = 60, .sink = sink, .sink_arg = &c};
    tw_alerting *a;
    assert_int_equal(tw_alerting_new(rs, &o, &a), TW_OK);
    double t0 = 1000000;
    tw_gauge_set(x, 0);
    tw_alerting_tick(a, t0);
    assert_int_equal(c.count, 0);
    tw_gauge_set(x, 2); /* x2 = 4 > 3: pending from t0+1 */
    for (int s = 1; s <= 10; s++)
        tw_alerting_tick(a, t0 + s);
    assert_int_equal(c.count, 0); /* pending alerts are not sent */
    assert_int_equal(tw_alerting_firing(a), 0);
    tw_alerting_tick(a, t0 + 11); /* held 10 s: firing */
    assert_int_equal(c.count, 1);
    assert_string_equal(c.items[0].name, "High");
    assert_false(c.items[0].resolved);
    assert_true(c.items[0].changed);
    assert_true(c.items[0].starts_at == t0 + 1);
    assert_true(c.items[0].ends_at == t0 + 11 + 4 * 60);
    assert_string_equal(c.items[0].summary, "x2 is 4 on train");
    assert_int_equal(tw_alerting_firing(a), 1);
    tw_alerting_tick(a, t0 + 12);
    assert_int_equal(c.count, 1); /* no re-send before the resend delay */
    tw_gauge_set(x, 0);
    tw_alerting_tick(a, t0 + 13); /* gone, but kept firing for 5 s */
    tw_alerting_tick(a, t0 + 17);
    assert_int_equal(tw_alerting_firing(a), 1);
    assert_int_equal(c.count, 1);
    tw_alerting_tick(a, t0 + 18.0009); /* 5 s after it went: resolved */
    assert_int_equal(tw_alerting_firing(a), 0);
    assert_int_equal(c.count, 2);
    assert_true(c.items[1].resolved);
    assert_true(c.items[1].changed);
    /* never ahead of the clock (not rounded up to t0 + 18.001): Alertmanager
       takes a resolved alert whose endsAt is still in the future for a firing
       one and keeps the earlier post's endsAt, minutes away */
    assert_true(c.items[1].ends_at == t0 + 18);
    tw_alerting_tick(a, t0 + 19);
    assert_int_equal(c.count, 2);
    tw_alerting_tick(a, t0 + 78); /* resolved alerts are re-sent too, for 15 minutes */
    assert_int_equal(c.count, 3);
    assert_true(c.items[2].resolved);
    assert_false(c.items[2].changed);
    tw_gauge_set(x, 5); /* back: a new alert, pending again */
    tw_alerting_tick(a, t0 + 79);
    assert_int_equal(tw_alerting_firing(a), 0);
    tw_alerting_tick(a, t0 + 89);
    assert_int_equal(tw_alerting_firing(a), 1);
    assert_int_equal(c.count, 4);
    assert_true(c.items[3].starts_at == t0 + 79);
    assert_true(c.items[3].value == 10);
    assert_int_equal(tw_alerting_fired_total(a), 2);
    /* the engine's own metrics are in the registry */
    char *text;
    size_t len;
    assert_int_equal(tw_registry_expose(reg, TW_EXPOSE_TEXT, &text, &len), TW_OK);
    assert_non_null(strstr(text, "trainwatch_alerts{alertname=\"High\",alertstate=\"firing\"} 1"));
    assert_non_null(strstr(text, "trainwatch_rule_group_evaluations_total{rule_group=\"g\"}"));
    free(text);
    tw_alerting_free(a);
    tw_registry_free(reg);
}

static void test_failing_rule_keeps_alerts(void **state)
{
    (void)state;
    tw_registry *reg;
    assert_int_equal(tw_registry_new(&reg), TW_OK);
    tw_family *f;
    const char *names[] = {"rank"};
    tw_family_options fo = {.name = "y", .help = "y", .type = TW_METRIC_GAUGE, .label_count = 1, .label_names = names};
    assert_int_equal(tw_family_register(reg, &fo, &f), TW_OK);
    tw_gauge *y0, *y1;
    const char *r0[] = {"0"}, *r1[] = {"1"};
    assert_int_equal(tw_family_series(f, r0, &y0), TW_OK);
    assert_int_equal(tw_family_series(f, r1, &y1), TW_OK);
    /* many-to-many on the right side is an evaluation error once both ranks exist */
    const char *rules = "groups:\n  - name: g\n    rules:\n      - alert: M\n        expr: y > ignoring(rank) y\n";
    problems p;
    tw_ruleset *rs;
    assert_int_equal(load(rules, &p, &rs), TW_OK);
    char *log = NULL;
    size_t len = 0;
    FILE *lf = open_memstream(&log, &len);
    tw_alerting_options o = {.registry = reg, .default_interval = 1, .log = lf};
    tw_alerting *a;
    assert_int_equal(tw_alerting_new(rs, &o, &a), TW_OK);
    tw_alerting_tick(a, 2000000);
    tw_alerting_tick(a, 2000001);
    fclose(lf);
    assert_non_null(strstr(log, "rule M in group g (r.yml:4) failed: found duplicate series"));
    assert_null(strstr(strstr(log, "failed") + 1, "failed")); /* said once, not every evaluation */
    free(log);
    char *text;
    assert_int_equal(tw_registry_expose(reg, TW_EXPOSE_TEXT, &text, &len), TW_OK);
    assert_non_null(strstr(text, "trainwatch_rule_evaluation_failures_total{rule_group=\"g\"} 2"));
    free(text);
    tw_alerting_free(a);
    tw_registry_free(reg);
}

/* The labels of the last alert sent, as name=value pairs joined by commas. */
static void labels_sink(void *arg, const tw_alert_notice *alerts, size_t n)
{
    char *out = arg;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        out[0] = '\0';
        for (size_t k = 0; k < alerts[i].label_count; k++)
            snprintf(out + strlen(out), 512 - strlen(out), "%s%s=%s", k ? "," : "", alerts[i].labels[k].name,
                     alerts[i].labels[k].value);
        snprintf(out + strlen(out), 512 - strlen(out), " url=%s", alerts[i].generator_url ? alerts[i].generator_url : "");
    }
}

/* An alert over series {job, rank} with target labels as a scrape gives
 * them (honor or not), and external labels added when sent. */
static void alert_with_target(bool honor, char *got)
{
    tw_registry *reg;
    assert_int_equal(tw_registry_new(&reg), TW_OK);
    tw_family *f;
    const char *names[] = {"job", "rank"}, *values[] = {"cmd", "0"};
    tw_family_options fo = {.name = "x", .help = "x", .type = TW_METRIC_GAUGE, .label_count = 2, .label_names = names};
    assert_int_equal(tw_family_register(reg, &fo, &f), TW_OK);
    tw_gauge *x;
    assert_int_equal(tw_family_series(f, values, &x), TW_OK);
    tw_gauge_set(x, 1);
    problems p;
    tw_ruleset *rs;
    assert_int_equal(load("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: x > 0\n"
                          "        labels:\n          cluster: own\n",
                          &p, &rs),
                     TW_OK);
    const tw_alert_label target[] = {{"job", "trainwatch"}, {"instance", "h:1"}, {"run", "r"}};
    const tw_alert_label external[] = {{"cluster", "c1"}, {"region", "eu"}};
    tw_alerting_options o = {.registry = reg, .default_interval = 1, .sink = labels_sink, .sink_arg = got,
                             .target_labels = target, .target_label_count = 3, .honor_labels = honor,
                             .external_labels = external, .external_label_count = 2, .page_url = "http://h:1/alerts"};
    tw_alerting *a;
    assert_int_equal(tw_alerting_new(rs, &o, &a), TW_OK);
    tw_alerting_tick(a, 3000000);
    size_t len;
    char *page = tw_alerting_page(a, true, &len);
    assert_non_null(page);
    assert_non_null(strstr(page, "\"name\":\"A\",\"type\":\"alerting\",\"query\":\"x > 0\",\"health\":\"ok\","
                                 "\"state\":\"firing\""));
    assert_non_null(strstr(page, "\"instance\":\"h:1\""));
    assert_null(strstr(page, "region")); /* external labels are the sender's, not the rule's */
    free(page);
    page = tw_alerting_page(a, false, &len);
    assert_non_null(strstr(page, "<td id=\"A\">A</td><td>firing</td>"));
    free(page);
    tw_alerting_free(a);
    tw_registry_free(reg);
}

static void test_alerts_carry_the_scrapes_target_labels(void **state)
{
    (void)state;
    char got[512];
    /* Prometheus without honor_labels: the target's job wins, the series' is exported_job */
    alert_with_target(false, got);
    assert_string_equal(got, "alertname=A,cluster=own,exported_job=cmd,instance=h:1,job=trainwatch,rank=0,"
                             "region=eu,run=r url=http://h:1/alerts");
    /* with honor_labels the series' own job stays */
    alert_with_target(true, got);
    assert_string_equal(got, "alertname=A,cluster=own,instance=h:1,job=cmd,rank=0,region=eu,run=r "
                             "url=http://h:1/alerts");
}

/* ---- signing and payloads ----------------------------------------------- */

static void hex(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

static void test_hmac_sha256(void **state)
{
    (void)state;
    uint8_t mac[32];
    char text[65];
    tw_sha256("abc", 3, mac);
    hex(mac, 32, text);
    assert_string_equal(text, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* RFC 4231 test cases 2 and 6 (a key longer than the block) */
    tw_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, mac);
    hex(mac, 32, text);
    assert_string_equal(text, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    uint8_t key[131];
    memset(key, 0xaa, sizeof key);
    const char *msg = "Test Using Larger Than Block-Size Key - Hash Key First";
    tw_hmac_sha256(key, sizeof key, msg, strlen(msg), mac);
    hex(mac, 32, text);
    assert_string_equal(text, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    /* RFC 4648 section 10, and the two alphabets */
    char b64[64];
    assert_int_equal(tw_base64_encode("foob", 4, false, b64), 8);
    assert_string_equal(b64, "Zm9vYg==");
    tw_base64_encode("fooba", 5, false, b64);
    assert_string_equal(b64, "Zm9vYmE=");
    tw_base64_encode("foobar", 6, false, b64);
    assert_string_equal(b64, "Zm9vYmFy");
    tw_base64_encode("", 0, false, b64);
    assert_string_equal(b64, "");
    tw_base64_encode("\xfb\xff", 2, false, b64);
    assert_string_equal(b64, "+/8=");
    tw_base64_encode("\xfb\xff", 2, true, b64);
    assert_string_equal(b64, "-_8=");
}

static void test_payloads(void **state)
{
    (void)state;
    char *ln[] = {"alertname", "job", "rank"}, *lv[] = {"TrainingLossNaN", "demo \"x\"", "0"};
    char *an[] = {"summary"}, *av[] = {"Loss is NaN"};
    tw_queued_alert a = {.label_names = ln, .label_values = lv, .label_count = 3, .annotation_names = an,
                         .annotation_values = av, .annotation_count = 1, .starts_at = 1700000000.25,
                         .ends_at = 1700000240, .value = 5, .fingerprint = 0xabc};
    tw_payload_context c = {.host = "node1", .external_url = "http://x", .now = 1700000000};
    char *body, *url;
    size_t len;
    const tw_payload_format *api = tw_payload_format_find("alertmanager-api");
    assert_int_equal(api->build(api, &c, &a, 1, "http://am/api/v2/alerts", &body, &len, &url), TW_OK);
    assert_null(url);
    assert_non_null(strstr(body, "\"labels\":{\"alertname\":\"TrainingLossNaN\",\"job\":\"demo \\\"x\\\"\",\"rank\":\"0\"}"));
    assert_non_null(strstr(body, "\"startsAt\":\"2023-11-14T22:13:20.250Z\""));
    assert_non_null(strstr(body, "\"endsAt\":\"2023-11-14T22:17:20.000Z\""));
    free(body);
    const tw_payload_format *ding = tw_payload_format_find("dingtalk");
    c.secret = "SECabc";
    assert_int_equal(ding->build(ding, &c, &a, 1, "https://oapi.dingtalk.com/robot/send?access_token=t", &body, &len, &url),
                     TW_OK);
    /* the signature the DingTalk docs describe, computed here independently */
    char to_sign[64], sig[64];
    uint8_t mac[32];
    int n = snprintf(to_sign, sizeof to_sign, "%lld\n%s", 1700000000000LL, "SECabc");
    tw_hmac_sha256("SECabc", 6, to_sign, (size_t)n, mac);
    tw_base64_encode(mac, 32, false, sig);
    assert_non_null(strstr(url, "access_token=t&timestamp=1700000000000&sign="));
    assert_non_null(strstr(body, "\"msgtype\":\"markdown\""));
    assert_non_null(strstr(body, "[FIRING] TrainingLossNaN"));
    assert_non_null(strstr(body, "host: node1"));
    free(body);
    free(url);
    assert_null(tw_payload_format_find("telegram"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_templates),
        cmocka_unit_test(test_template_output_is_bounded),
        cmocka_unit_test(test_regex_is_re2),
        cmocka_unit_test(test_regex_never_backtracks),
        cmocka_unit_test(test_default_rules_load),
        cmocka_unit_test(test_rule_file_problems),
        cmocka_unit_test(test_deep_expressions_are_refused),
        cmocka_unit_test(test_yaml_documents_are_bounded),
        cmocka_unit_test(test_alert_states),
        cmocka_unit_test(test_failing_rule_keeps_alerts),
        cmocka_unit_test(test_alerts_carry_the_scrapes_target_labels),
        cmocka_unit_test(test_hmac_sha256),
        cmocka_unit_test(test_payloads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
