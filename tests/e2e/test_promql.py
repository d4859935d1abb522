"""trainwatch's PromQL evaluator against Prometheus itself.

The same samples go to our evaluator (tests/tools/promql_eval) and into a
`promtool test rules` file, whose expected values are the ones we computed.
promtool runs Prometheus's engine on the samples and says whether each value
matches. A mismatch fails the test with both values; nothing is hard-coded.
"""
import math
import re
import subprocess

import pytest

from conftest import binary

INTERVAL = 60  # seconds between samples, as promtool's `interval: 1m`

SERIES = {
    'req_total{job="a",rank="0"}': "0 10 20 30 40 50 60 70 80 90 100 110 120",
    'req_total{job="a",rank="1"}': "5 5 7 11 2 4 9 9 15 15 30 31 40",       # resets
    'req_total{job="b",rank="0"}': "1 3 _ _ 9 11 12 stale _ 20 21 22 25",  # gaps, a stale marker
    'loss{job="a",rank="0"}': "2.5 2.25 2 1.75 1.5 1.25 1 0.75 0.5 NaN NaN NaN NaN",
    'loss{job="a",rank="1"}': "3 2.5 2.75 2 1.5 1.75 1 0.5 0.25 0.125 0.5 1 2",
    'loss{job="b",rank="0"}': "4 4 4 4 4 4 4 Inf 4 4 4 -Inf 4",
    'util{job="a",rank="0",gpu="0"}': "90 80 70 20 10 10 10 15 20 25 90 95 99",
    'util{job="a",rank="0",gpu="1"}': "50 50 50 50 50 50 50 50 50 50 50 50 50",
    'util{job="a",rank="1",gpu="0"}': "10 20 30 40 50 60 70 80 90 100 100 100 100",
    'step{job="a",rank="0"}': "100 200 300 400 400 400 400 400 500 600 700 800 900",
    'step{job="a",rank="1"}': "100 200 300 400 500 600 700 800 900 1000 1100 1200 1300",
    'last_progress{job="a",rank="0"}': "60 120 180 240 240 240 240 240 540 600 660 720 780",
    'last_progress{job="a",rank="1"}': "60 120 180 240 300 360 420 480 540 600 660 720 780",
    # a histogram per rank (cumulative buckets), and one with a bucket missing its +Inf
    'step_seconds_bucket{rank="0",le="0.1"}': "0 1 2 4 6 6 8 10 10 12 12 14 15",
    'step_seconds_bucket{rank="0",le="0.5"}': "0 3 6 9 12 14 18 20 24 27 30 33 35",
    'step_seconds_bucket{rank="0",le="1"}': "0 4 8 12 16 20 24 28 32 36 40 44 48",
    'step_seconds_bucket{rank="0",le="+Inf"}': "0 4 9 13 18 22 27 31 36 40 45 49 54",
    'step_seconds_bucket{rank="1",le="0.25"}': "0 0 0 1 1 1 2 2 2 3 3 3 4",
    'step_seconds_bucket{rank="1",le="2.5"}': "0 2 4 6 8 10 12 14 16 18 20 22 24",
    'step_seconds_bucket{rank="1",le="+Inf"}': "0 2 4 6 8 10 12 14 16 18 20 22 24",
    'odd_bucket{le="1"}': "1 2 3 4 5 6 7 8 9 10 11 12 13",
    'odd_bucket{le="2"}': "1 2 3 4 5 6 7 8 9 10 11 12 13",
}
# label values for the regular expressions (one sample, at 0)
REGEX_VALUES = ["12", "a1", "x_1", "abc", "ABC", "a b", "a\\nb", "a\\n", "é", "αβ", "a.b", "aaa", "{", "tab\\tx", "",
                "ab", "aB"]
for i, v in enumerate(REGEX_VALUES):
    SERIES[f'lbl{{i="{i}",v="{v}"}}'] = "1"

RANGE_FUNCTIONS = ["avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
                   "last_over_time", "rate", "increase", "delta", "deriv", "changes"]

CASES = []
for fn in RANGE_FUNCTIONS:
    for metric in ("req_total", "loss", "util"):
        for rng, at in (("5m", 600), ("3m", 720), ("90s", 400), ("10m", 720)):
            CASES.append((f"{fn}({metric}[{rng}])", at))
    CASES.append((f"{fn}(req_total[5m] offset 2m)", 720))
CASES += [
    # selectors and matchers
    ("req_total", 600), ("req_total", 450), ('req_total{job="b"}', 420), ('req_total{job="b"}', 780),
    ('loss{rank!="0"}', 300), ('util{gpu=~"0|1",rank="0"}', 600), ('util{job!~"a"}', 600),
    ('util{rank=~"1"}', 600), ("loss offset 3m", 720),
    # arithmetic, comparisons, bool, scalars
    ("loss * 2 + 1", 300), ("1 - loss", 300), ("loss / 0", 300), ("loss % 0.75", 300), ("2 ^ loss", 240),
    ("-loss", 300), ("-2 ^ 2", 0), ("loss > 1.5", 300), ("1.5 < loss", 300), ("loss >= bool 1.5", 300),
    ("loss == bool loss", 600), ("loss != 4", 480), ("3 > bool 2", 0), ("(1 + 2) * 3 - 4 / 8", 0),
    ("time() - last_progress", 780), ("time() - last_progress > 120", 480),
    ("loss - loss", 600), ("step / on(job, rank) last_progress", 600),
    ("step - ignoring(gpu) step", 600),
    ("util > on(job, rank) group_by_none", 600),
    # set operators
    ("loss and step", 600), ("loss and on(rank) util", 600), ("util unless on(rank) loss > 1", 300),
    ("loss or util", 300), ('loss{job="b"} or loss', 300), ("util unless ignoring(gpu) util > 50", 600),
    # aggregations
    ("sum(util)", 600), ("sum by (rank) (util)", 600), ("avg by (job) (util)", 600),
    ("avg without (gpu) (util)", 240), ("min by (rank) (loss)", 300), ("max(loss)", 600),
    ("count by (job) (util)", 600), ("count(util > 40)", 600), ("sum(loss) by (job)", 300),
    ("max by (job) (last_progress)", 780), ("min without (rank) (step)", 780),
    # functions over instant vectors
    ("abs(1 - loss)", 300), ("clamp_min(loss, 2)", 300), ("clamp_max(util, 50)", 600),
    ("clamp(util, 20, 60)", 600), ("absent(nothing)", 600), ('absent(nothing{job="a",rank="3"})', 600),
    ("absent(loss)", 600), ("vector(3)", 0), ("scalar(sum(util))", 600),
    # histogram_quantile over rates and raw buckets, edge quantiles, no +Inf bucket
    ("histogram_quantile(0.9, rate(step_seconds_bucket[5m]))", 600),
    ("histogram_quantile(0.5, sum by (le) (rate(step_seconds_bucket[5m])))", 720),
    ("histogram_quantile(0.99, step_seconds_bucket)", 480), ("histogram_quantile(0, step_seconds_bucket)", 480),
    ("histogram_quantile(1, step_seconds_bucket)", 480), ("histogram_quantile(0.5, odd_bucket)", 480),
    ("histogram_quantile(0.75, step_seconds_bucket offset 5m)", 720),
    # the shapes of trainwatch's default rules
    ("time() - max by (job) (last_progress) > clamp_min(2 * max by (job) (rate(step[5m])), 60)", 720),
    ("(time() - last_progress > 120) and on(job) (time() - max by (job) (last_progress) < 60)", 480),
    ("avg by (job, rank) (util) < 30 and on(job, rank) changes(step[2m]) > 0", 540),
    ("avg_over_time(loss[3m]) > 1.2 * avg_over_time(loss[5m] offset 3m)", 720),
    ("increase(req_total[5m]) > 0", 300),
]
# Prometheus's =~ is RE2, anchored as ^(?:RE)$: each pattern selects the
# same label values in both (the ones POSIX ERE read otherwise first)
REGEXES = [r"\d+", r"\w+", r"a\sb", r"\S+", r"[\s]+", r"(?i)abc", "a.*?", "(?U)a+", "a+?b", "[[:alpha:]]+", "[[:^alpha:]]+",
           "a.b", "(?s)a.b", "a.", ".", "..", r"\pL+", r"\p{Greek}+", "[^a]*", r"\x{e9}", r"\141b.", "a{1,3}", r"\{", "{",
           "a{", "a|", "(?P<n>a)bc", r"\Qa.b\E", r"[\d]+", r"\.", "^abc$", r"\Aabc\z", r"\bx_1\b", "[]a]*", "[a-c]+",
           "(?i)[A-C]+", "(?i:a)b", "(?i:a)(?-i:B)", "x*", "^*", r"\z*", r"\t", r"tab\Sx", "(?m)a$", "a$", r"[\p{Greek}\d]+",
           "[[:word:]]+", r"\_\d", "(|a)b", "(a)(b)(c)"]
CASES += [(f"lbl{{v=~`{r}`}}", 0) for r in REGEXES]
CASES += [(f"lbl{{v!~`{r}`}}", 0) for r in (r"\d+", "(?i)a.*", r"[\s\d]*")]
# a newline in the pattern: written as \n in a PromQL string
CASES += [('lbl{v=~"(?m)a$\\nb"}', 0), ('lbl{v=~"a\\n^"}', 0), ('lbl{v=~"(?m)a\\n^"}', 0), ('lbl{v=~"a$\\n"}', 0),
          ('lbl{v=~"(?m:a$)\\n"}', 0)]


def expand(values):
    return values.split()


def evaluate_ours(cases):
    lines = [f"interval {INTERVAL}"]
    lines += [f"series {labels} {' '.join(expand(values))}" for labels, values in SERIES.items()]
    lines += [f"eval {at} {expr}" for expr, at in cases]
    out = subprocess.run([binary("promql-eval")], input="\n".join(lines) + "\n", capture_output=True,
                         text=True, timeout=60, check=True).stdout
    results, current = [], None
    for line in out.splitlines():
        if line.startswith("result "):
            current = {"samples": [], "error": None, "scalar": None}
        elif line == "end":
            results.append(current)
        elif line.startswith("error "):
            current["error"] = line[6:]
        elif line.startswith("scalar "):
            current["scalar"] = float(line[7:])
        else:
            labels, value = line.rsplit(" ", 1)
            current["samples"].append((labels, float(value)))
    assert len(results) == len(cases)
    return results


def yaml_value(v):
    if math.isnan(v):
        return ".nan"
    if math.isinf(v):
        return ".inf" if v > 0 else "-.inf"
    return repr(v)


def promtool_file(path, cases, results):
    out = ["rule_files: []", "evaluation_interval: 1m", "tests:", "  - interval: 1m", "    input_series:"]
    for labels, values in SERIES.items():
        out.append(f"      - series: '{labels}'")
        out.append(f"        values: '{values}'")
    out.append("    promql_expr_test:")
    for (expr, at), r in zip(cases, results):
        samples = r["samples"] if r["scalar"] is None else [("{}", r["scalar"])]
        out.append(f"      - expr: '{expr}'")
        out.append(f"        eval_time: {at}s")
        if not samples:
            out.append("        exp_samples: []")
            continue
        out.append("        exp_samples:")
        for labels, v in samples:
            out.append(f"          - labels: '{labels}'")
            out.append(f"            value: {yaml_value(v)}")
    path.write_text("\n".join(out) + "\n")


SAMPLE = re.compile(r'(\w*\{[^}]*\})\s+([-+0-9.eEInfNa]+)')


def parse_listing(text):
    if text.strip() == "nil":
        return []
    return sorted((re.sub(r'__name__="([^"]*)",?\s*', "", m.group(1)), float(m.group(2)))
                  for m in SAMPLE.finditer(text))


def close(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b))


def test_evaluator_matches_promtool(tmp_path):
    cases = [c for c in CASES if "group_by_none" not in c[0]]
    results = evaluate_ours(cases)
    errors = [(c, r["error"]) for c, r in zip(cases, results) if r["error"]]
    assert not errors, errors
    test_file = tmp_path / "promql_test.yml"
    promtool_file(test_file, cases, results)
    run = subprocess.run(["promtool", "test", "rules", str(test_file)], capture_output=True, text=True, timeout=120)
    if run.returncode == 0:
        return
    # promtool lists every case whose values differ from ours: tell exact
    # disagreements from last-bit rounding differences
    report = run.stdout + run.stderr
    blocks = re.findall(r'expr: "(.*?)", time: (\S+),\s*exp: (.*?)\n\s*got: (.*?)\n', report, re.S)
    assert blocks, report
    real = []
    for expr, at, exp, got in blocks:
        ours, theirs = parse_listing(exp), parse_listing(got)
        same = len(ours) == len(theirs) and all(
            la == lb and close(va, vb) for (la, va), (lb, vb) in zip(ours, theirs))
        if not same:
            real.append(f"{expr} at {at}: trainwatch {ours} vs Prometheus {theirs}")
    assert not real, "\n".join(real)


def test_unsupported_constructs_are_named():
    cases = [("holt_winters(loss[5m], 0.5, 0.5)", "function 'holt_winters' is not supported"),
             ("quantile_over_time(0.9, loss[5m])", "function 'quantile_over_time' is not supported"),
             ("topk(2, loss)", "aggregation 'topk' is not supported"),
             ("rate(loss[5m:1m])", "subqueries are not supported"),
             ("loss @ 100", "the @ modifier is not supported"),
             ("loss * on(rank) group_left util", "many-to-one matching (group_left) is not supported"),
             ("nosuchfn(loss)", "unknown function 'nosuchfn'"),
             ("loss +", "unexpected end of expression"),
             ("rate(loss)", "expects a range vector"),
             ("loss[5m]", None),
             ('{job="a"}', "selectors without a metric name are not supported"),
             ("1 > 2", "comparisons between scalars must use BOOL modifier"),
             ("util > on(job, rank) util", "many-to-many matching not allowed")]
    results = evaluate_ours([(expr, 600) for expr, _ in cases])
    for (expr, want), r in zip(cases, results):
        if want is None:
            assert r["error"], f"{expr} should not evaluate as a rule"
            continue
        assert r["error"] and want in r["error"], (expr, r)


# What RE2 refuses (Perl's and PCRE's extensions, Go's own rules): both refuse it.
REFUSED_REGEXES = ["(?=a)", "(?!a)", "(?<=a)b", "(?<!a)b", "(?>a)", "a*+", "a++", "a?+", "a{2}+", r"(a)\1", r"\1",
                   r"(?P<n>a)(?P=n)", "(?<n>a)", r"a\Z", r"\C", "(?R)", "(?1)", "(?&n)", "(?x)a", "(?#c)a", "(?|a)",
                   "a{1001}", "x{2,1}", "a**", "a{2}{3}", "a???", r"\e", r"\K", r"\G", r"\h", r"[\b]", "a)", "(a", "[a",
                   "(?-)a", "(?i-)a", r"\Qa.b", "(*UTF)a", r"\8", r"\x4", r"\p{Foo}", "[[:foo:]]", "(?P<>x)", "*a"]


@pytest.mark.parametrize("regex", REFUSED_REGEXES)
def test_regexes_re2_refuses_are_refused(tmp_path, regex):
    expr = f"lbl{{v=~`{regex}`}}"
    r = evaluate_ours([(expr, 0)])[0]
    assert r["error"] and "invalid regular expression" in r["error"], r
    rules = tmp_path / "r.yml"
    rules.write_text(f"groups:\n- name: g\n  rules:\n  - alert: A\n    expr: '{expr}'\n")
    check = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 1 and "error parsing regexp" in check.stdout + check.stderr, check


@pytest.mark.parametrize("expr", ["sum(", "loss{job=}", "loss[5]", "loss offset", "rate(loss[0s])", "'unterminated"])
def test_syntax_errors_point_at_a_column(expr):
    r = evaluate_ours([(expr, 0)])[0]
    assert r["error"] and r["error"].startswith("col "), r
