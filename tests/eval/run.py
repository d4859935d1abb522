#!/usr/bin/python3
"""The evaluation set: runs `trainwatch analyze --json` on every real case under
tests/eval/cases/ and scores it against the checks an engineer wrote from
reading the log (before analyze was run on it).

  run.py [--build DIR] [--half dev|holdout|all] [--case ID ...] [--json]
         [--scores-row] [--kinds]

Prints one row per case (id, half, checks held/total, and for each check that
did not hold: what it asked and what analyze said instead), then the totals per
half and the false alarms on the controls. It is a report, not a gate: it exits
0 whatever the score, and 2 only when it cannot run (no binary, a case file it
cannot read). --scores-row prints the line tests/eval/SCORES.md keeps;
--kinds the table of kinds per half that tests/eval/README.md shows (it
runs nothing).

A check holds when one finding meets every field it gives:
  rule      the finding's rule is one of these
  severity  the finding is at least this severe (error > warning > info)
  line      the finding's line, or a (file:line) its evidence cites in the
            case's log, is one of these
  text      this regex (case-insensitive) is in the finding's title+evidence
  rank      the finding names this rank (its rank field, or "rank N" in text)
  step      the finding names this step, within step_tol (its step field, or
            "step N" in its text)
no_alarm: true holds when no finding is a warning or an error.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SEVERITY = {"info": 0, "warning": 1, "error": 2}
CHECK_FIELDS = {"about", "rule", "severity", "line", "text", "rank", "step",
                "step_tol", "value", "value_tol", "no_alarm"}
CASE_FIELDS = {"id", "half", "kind", "format", "source", "log", "cut",
               "conclusion", "checks", "args"}
MAX_LOG_BYTES = 2 * 1024 * 1024


class CaseError(Exception):
    """A case file that cannot be scored; names the file."""


def as_list(v):
    return v if isinstance(v, list) else [v]


def load_case(path):
    """Reads and checks one case file; returns its dict or raises CaseError."""
    try:
        with open(path, encoding="utf-8") as f:
            case = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise CaseError(f"{path}: cannot read: {e}")
    if not isinstance(case, dict):
        raise CaseError(f"{path}: not a mapping")
    unknown = set(case) - CASE_FIELDS
    if unknown:
        raise CaseError(f"{path}: unknown fields {sorted(unknown)}")
    for field in ("id", "half", "kind", "source", "conclusion", "checks"):
        if not case.get(field):
            raise CaseError(f"{path}: no {field}")
    if case["half"] not in ("dev", "holdout"):
        raise CaseError(f"{path}: half must be dev or holdout")
    src = case["source"]
    if not isinstance(src, dict) or not src.get("url"):
        raise CaseError(f"{path}: source has no url")
    log = os.path.join(HERE, case.get("log") or f"logs/{case['id']}.log")
    if not os.path.isfile(log):
        raise CaseError(f"{path}: log {log} is missing")
    if os.path.getsize(log) > MAX_LOG_BYTES:
        raise CaseError(f"{path}: log {log} is over 2 MB")
    case["log_path"] = log
    for i, check in enumerate(case["checks"]):
        if not isinstance(check, dict):
            raise CaseError(f"{path}: check {i + 1} is not a mapping")
        unknown = set(check) - CHECK_FIELDS
        if unknown:
            raise CaseError(f"{path}: check {i + 1}: unknown fields {sorted(unknown)}")
        if "severity" in check and check["severity"] not in SEVERITY:
            raise CaseError(f"{path}: check {i + 1}: bad severity")
    return case


def run_analyze(binary, case):
    """Returns (findings, note): analyze's findings, and its error line if it
    gave no report."""
    argv = [binary, "analyze", "--json"]
    argv += [str(a) for a in case.get("args") or []] + [case["log_path"]]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                           errors="replace")
    except subprocess.TimeoutExpired:
        return [], "analyze ran over 120 s"
    try:
        report = json.loads(p.stdout)
    except ValueError:
        err = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return [], f"exit {p.returncode}: {err[:160]}"
    return report.get("findings") or [], None


def finding_text(f):
    return f"{f.get('title') or ''}\n{f.get('evidence') or ''}"


def cited_lines(f, log_path):
    """The lines of the case's log a finding points at."""
    lines = set()
    if isinstance(f.get("line"), int):
        lines.add(f["line"])
    base = re.escape(os.path.basename(log_path))
    for m in re.finditer(base + r":(\d+)", finding_text(f)):
        lines.add(int(m.group(1)))
    return lines


def names_number(f, field, word, want, tol):
    v = f.get(field)
    if isinstance(v, (int, float)) and abs(v - want) <= tol:
        return True
    for m in re.finditer(rf"\b{word}s? ?[=:]? ?\[?(\d+)", finding_text(f), re.I):
        if abs(int(m.group(1)) - want) <= tol:
            return True
    return False


def finding_meets(f, check, log_path):
    if "rule" in check and f.get("rule") not in as_list(check["rule"]):
        return False
    if "severity" in check and \
            SEVERITY.get(f.get("severity"), -1) < SEVERITY[check["severity"]]:
        return False
    if "line" in check and \
            not cited_lines(f, log_path) & set(as_list(check["line"])):
        return False
    if "text" in check and \
            not re.search(str(check["text"]), finding_text(f), re.I):
        return False
    if "rank" in check and not names_number(f, "rank", "rank", check["rank"], 0):
        return False
    if "step" in check and not names_number(
            f, "step", "step", check["step"], check.get("step_tol", 0)):
        return False
    if "value" in check:
        v = f.get("value")
        if not isinstance(v, (int, float)) or \
                abs(v - check["value"]) > check.get("value_tol", 0):
            return False
    return True


def alarms(findings):
    return [f for f in findings if SEVERITY.get(f.get("severity"), 0) >= 1]


def check_holds(check, findings, log_path):
    if check.get("no_alarm"):
        return not alarms(findings)
    return any(finding_meets(f, check, log_path) for f in findings)


def describe(check):
    if check.get("no_alarm"):
        return "no alarm"
    parts = [f"{k}={check[k]}" for k in ("rule", "severity", "line", "rank",
                                          "step", "text") if k in check]
    return " ".join(parts)


def said_instead(findings, note):
    if note:
        return note
    if not findings:
        return "no findings"
    return "; ".join(f"{f.get('rule')}/{f.get('severity')}@{f.get('line')}"
                     for f in findings[:6])


def score(binary, cases):
    rows = []
    for case in cases:
        findings, note = run_analyze(binary, case)
        results = [check_holds(c, findings, case["log_path"])
                   for c in case["checks"]]
        rows.append({"id": case["id"], "half": case["half"],
                     "kind": case["kind"], "held": sum(results),
                     "total": len(results),
                     "control": case["kind"] == "healthy",
                     "false_alarm": case["kind"] == "healthy" and bool(alarms(findings)),
                     "missed": [describe(c) for c, ok in
                                zip(case["checks"], results) if not ok],
                     "instead": said_instead(findings, note)})
    return rows


def totals(rows, half):
    sel = [r for r in rows if half in ("all", r["half"])]
    held = sum(r["held"] for r in sel)
    total = sum(r["total"] for r in sel)
    fa = sum(r["false_alarm"] for r in sel)
    controls = sum(r["control"] for r in sel)
    return held, total, fa, controls, len(sel)


def pct(held, total):
    return 100.0 * held / total if total else 0.0


def print_table(rows):
    width = max([len(r["id"]) for r in rows] + [4])
    print(f"{'case':<{width}}  half     held  what analyze said instead")
    for r in rows:
        mark = f"{r['held']}/{r['total']}"
        tail = "" if not r["missed"] else \
            f"missed [{' | '.join(r['missed'])}]; said: {r['instead']}"
        print(f"{r['id']:<{width}}  {r['half']:<7}  {mark:>4}  {tail}")
    for half in ("dev", "holdout", "all"):
        held, total, fa, controls, n = totals(rows, half)
        print(f"{half:>7}: {held}/{total} checks held ({pct(held, total):.1f}%), "
              f"{n} cases, {fa} false alarms on {controls} controls")


def commit_id():
    try:
        return subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip() or "?"
    except OSError:
        return "?"


def scores_row(rows):
    d = totals(rows, "dev")
    h = totals(rows, "holdout")
    return (f"| {datetime.date.today().isoformat()} | {commit_id()} | {len(rows)} "
            f"| {d[0]}/{d[1]} ({pct(d[0], d[1]):.1f}%) "
            f"| {h[0]}/{h[1]} ({pct(h[0], h[1]):.1f}%) | {d[2] + h[2]}/{d[3] + h[3]} |")


def kinds_table(cases):
    """The Markdown table of cases per kind and half, most cases first."""
    count = {}
    for c in cases:
        count.setdefault(c["kind"], {"dev": 0, "holdout": 0})[c["half"]] += 1
    rows = sorted(count.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    out = ["| kind | dev | holdout | cases |", "|---|---|---|---|"]
    out += [f"| `{k}` | {v['dev']} | {v['holdout']} | {v['dev'] + v['holdout']} |" for k, v in rows]
    dev = sum(v["dev"] for v in count.values())
    hold = sum(v["holdout"] for v in count.values())
    out.append(f"| all {len(count)} kinds | {dev} | {hold} | {dev + hold} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("TW_BUILD", "build"))
    ap.add_argument("--half", choices=("dev", "holdout", "all"), default="all")
    ap.add_argument("--case", action="append", default=[])
    ap.add_argument("--cases", default=os.path.join(HERE, "cases"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--scores-row", action="store_true")
    ap.add_argument("--kinds", action="store_true")
    a = ap.parse_args()

    binary = os.path.join(a.build, "trainwatch")
    if not os.access(binary, os.X_OK):
        print(f"eval: {binary}: no trainwatch binary (build first)", file=sys.stderr)
        return 2
    try:
        names = sorted(n for n in os.listdir(a.cases) if n.endswith(".yaml"))
    except OSError as e:
        print(f"eval: {a.cases}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        cases = [load_case(os.path.join(a.cases, n)) for n in names]
    except CaseError as e:
        print(f"eval: {e}", file=sys.stderr)
        return 2
    if a.kinds:
        print(kinds_table(cases))
        return 0
    cases = [c for c in cases if a.half in ("all", c["half"])
             and (not a.case or c["id"] in a.case)]
    rows = score(binary, cases)
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    elif a.scores_row:
        print(scores_row(rows))
    else:
        print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
