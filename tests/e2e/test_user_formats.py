"""Line formats users define: --pattern REGEX (PCRE2 named groups) and
--formats FILE (YAML), for analyze, run and watch; errors at load time with
their position. Checked on real logs of ../shared/corpus: a pattern written
for PaddleOCR's lines must read the same numbers from the same lines as the
built-in ppocr format (computed independently here with Python's re)."""
import json
import re
import subprocess

from conftest import SOURCE, analyze_json, records, run

DRRG = "paddle-suites/ppocr-det-drrg-workerlog.0.excerpt.log"
PATTERN = (r"epoch: \[(?<epoch>\d+)/\d+\], global_step: (?<global_step>\d+), lr: (?<lr>[0-9.]+), "
           r"loss: (?<loss>[0-9.]+), loss_text: (?<loss_text>[0-9.]+)")


def python_pattern():
    return re.compile(PATTERN.replace("(?<", "(?P<"))


def test_pattern_reads_what_python_reads(corpus):
    got, result = records("--pattern", PATTERN, corpus / DRRG)
    assert result.returncode == 0, result.stderr
    steps = [r for r in got if r["kind"] == "step"]
    expected = []
    for number, line in enumerate(open(corpus / DRRG, encoding="utf-8", errors="replace"), 1):
        m = python_pattern().search(line)
        if m:
            expected.append((number, int(m["epoch"]), int(m["global_step"]), float(m["lr"]), float(m["loss"]),
                             float(m["loss_text"])))
    assert len(expected) > 100
    assert [(r["line"], r["epoch"], r["global_step"], r["lr"], r["loss"], r["metrics"]["loss_text"])
            for r in steps] == expected
    # the built-in ppocr format reads the same losses from the same lines
    builtin, _ = records(corpus / DRRG)
    assert [(r["line"], r["loss"]) for r in builtin if r["kind"] == "step"] == [(e[0], e[4]) for e in expected]


def test_pattern_report_names_the_format(corpus):
    report, result = analyze_json("--pattern", PATTERN, corpus / DRRG)
    assert report["inputs"][0]["format"] == "pattern 1"
    assert report["summary"]["last_step"] == 600


def test_formats_file_with_detect_and_eval(corpus, tmp_path):
    formats = tmp_path / "formats.yaml"
    formats.write_text(
        "formats:\n"
        "  - name: drrg-train\n"
        "    detect: 'ppocr INFO: epoch:'\n"
        f"    pattern: '{PATTERN}'\n"
        "  - name: drrg-eval\n"
        "    kind: eval\n"
        "    pattern: 'best metric, hmean: (?<hmean>[0-9.]+)'\n")
    got, result = records("--formats", formats, corpus / DRRG)
    assert result.returncode == 0, result.stderr
    assert len([r for r in got if r["kind"] == "step"]) == len(
        [l for l in open(corpus / DRRG, errors="replace") if python_pattern().search(l)])
    report, _ = analyze_json("--formats", formats, corpus / DRRG)
    assert report["inputs"][0]["format"] == "drrg-train"


def test_bad_pattern_is_refused_at_load_with_its_position(corpus):
    pattern = r"step (?<step>\d+) loss: (?<loss>[0-9.]+"
    result = run(["trainwatch", "analyze", "--pattern", pattern, corpus / DRRG])
    assert result.returncode == 2 and result.stdout == ""
    first, shown, caret = result.stderr.splitlines()
    # PCRE2 finds the missing parenthesis at the end of the pattern
    assert first == f"trainwatch analyze: --pattern 1: offset {len(pattern)}: missing closing parenthesis"
    assert shown == "  " + pattern and caret == " " * (2 + len(pattern)) + "^"
    result = run(["trainwatch", "analyze", "--pattern", r"loss: ([0-9.]+)", corpus / DRRG])
    assert result.returncode == 2 and "--pattern 1: no named group" in result.stderr
    result = run(["trainwatch", "analyze", "--pattern", r"loss: (?<loss>[0-9.]+)", corpus / DRRG])
    assert result.returncode == 2 and "--pattern 1: no step counter" in result.stderr


def test_bad_formats_file_names_the_line(corpus, tmp_path):
    bad = tmp_path / "formats.yaml"
    bad.write_text("formats:\n  - name: x\n    pattern: 'step (?<step>\\d+'\n")
    result = run(["trainwatch", "analyze", "--formats", bad, corpus / DRRG])
    assert result.returncode == 2
    assert result.stderr == (f"trainwatch analyze: --formats {bad}: line 3: format 'x': pattern: offset 16: "
                             "missing closing parenthesis\n")
    bad.write_text("formats:\n  - name: x\n    patern: 'step (?<step>\\d+)'\n")
    result = run(["trainwatch", "analyze", "--formats", bad, corpus / DRRG])
    assert "line 3: unknown key 'patern'" in result.stderr and result.returncode == 2
    result = run(["trainwatch", "analyze", "--formats", tmp_path / "missing.yaml", corpus / DRRG])
    assert result.returncode == 2 and "No such file or directory" in result.stderr


def test_run_and_watch_take_patterns(corpus, tmp_path):
    """The pattern names loss_text "text_part": the summary's train metrics
    show that name only when the pattern read the lines."""
    renamed = PATTERN.replace("(?<loss_text>", "(?<text_part>")
    result = run(["trainwatch", "run", "--web.listen-address", "none", "--pattern", renamed, "--",
                  "cat", corpus / DRRG], timeout=120)
    assert result.returncode == 0, result.stderr
    assert "text_part 0.5684" in result.stderr
    log = tmp_path / "train.log"
    log.write_bytes((corpus / DRRG).read_bytes())
    result = run(["trainwatch", "watch", "--web.listen-address", "none", "--duration", "1", "--json", "--from-start",
                  "--pattern", renamed, log], timeout=120)
    report = json.loads(result.stdout)
    assert "text_part" in [m["name"] for m in report["summary"]["train_metrics"]]
    result = run(["trainwatch", "watch", "--pattern", "bad(", log])
    assert result.returncode == 2
    assert "trainwatch watch: --pattern 1: offset 4: missing closing parenthesis" in result.stderr


TRAINER = r'''
import json, random, sys
# a real (tiny) training loop: linear regression by SGD, printing its loss the
# way in-house scripts do; the losses it computed go to the second file
random.seed(0)
data = [(x / 10, 3 * x / 10 + 1 + random.gauss(0, 0.1)) for x in range(50)]
w = b = 0.0
style, log, truth = sys.argv[1], open(sys.argv[2], "w"), []
step = 0
for epoch in range(1, 4):
    for i in range(0, 50, 5):
        batch = data[i:i + 5]
        loss = sum((w * x + b - y) ** 2 for x, y in batch) / len(batch)
        gw = sum(2 * (w * x + b - y) * x for x, y in batch) / len(batch)
        gb = sum(2 * (w * x + b - y) for x, y in batch) / len(batch)
        w, b, step = w - 0.05 * gw, b - 0.05 * gb, step + 1
        text = {"epoch-step": f"Epoch {epoch} Step {step}: loss {loss:.4f}",
                "it-bar": f"it {step} | loss={loss:.4f} | w {w:.3f}",
                "paddle-list": f"step: {step} loss: [{loss:.4f}]"}[style]
        print(text, file=log)
        truth.append([step, round(loss, 4)])
json.dump(truth, open(sys.argv[3], "w"))
'''


def test_fallback_reads_in_house_lines_and_explains(tmp_path):
    """No pattern: lines with a step-like counter and numbers are read by the
    fallbacks, and --explain says which one and what it picked up."""
    script = tmp_path / "train.py"
    script.write_text(TRAINER)
    for style, format in (("epoch-step", "counter"), ("it-bar", "counter"), ("paddle-list", "kv")):
        log, truth = tmp_path / f"{style}.log", tmp_path / f"{style}.json"
        subprocess.run(["/usr/bin/python3", script, style, log, truth], check=True)
        got, result = records("--explain", log)
        assert [[r["step"], r["loss"]] for r in got] == json.loads(truth.read_text()), style
        first_line = log.read_text().splitlines()[0]
        assert f"explain: {log}: read by {format} (the fallback for" in result.stderr
        assert f'first step record: line 1: "{first_line}"' in result.stderr
        assert "fields:" in result.stderr and " loss" in result.stderr
        if style == "it-bar":
            assert "explain:   metrics: w\n" in result.stderr


# Public logs in in-house print formats (tests/corpus-extra/SOURCES.md).
EXTRA = SOURCE / "tests/corpus-extra/fallback"
NANOGPT = EXTRA / "nanogpt-termux-shakespeare-train.log"
MYTORCH = EXTRA / "mytorch-tinystories-train.excerpt.log"


def python_float(text):
    return "NaN" if text == "nan" else float(text)


def test_fallback_reads_nanogpt_print_lines():
    """nanoGPT's train.py prints 'iter N: loss X, time Yms, mfu Z%' per step
    and 'step N: train loss A, val loss B' at each evaluation: the counter
    fallback reads the first as steps (the time in seconds) and the second as
    evaluations, the same numbers Python's re reads from the same lines
    (NaN losses included)."""
    steps, evals = [], []
    for number, line in enumerate(NANOGPT.read_text().splitlines(), 1):
        m = re.fullmatch(r"iter (\d+): loss (\S+), time ([0-9.]+)ms, mfu (\S+)%", line)
        if m:
            steps.append((number, int(m[1]), python_float(m[2]), round(float(m[3]) / 1000, 9)))
        m = re.fullmatch(r"step (\d+): train loss ([0-9.]+), val loss ([0-9.]+)", line)
        if m:
            evals.append((number, int(m[1]), float(m[2]), float(m[3])))
    assert len(steps) == 91 and len(evals) == 5
    got, result = records("--explain", NANOGPT)
    assert result.returncode == 0, result.stderr
    assert f"explain: {NANOGPT}: read by counter" in result.stderr
    assert [(r["line"], r["step"], r["loss"], round(r["batch_time"], 9)) for r in got if r["kind"] == "step"] == steps
    assert [(r["line"], r["step"], r["metrics"]["train_loss"], r["metrics"]["val_loss"])
            for r in got if r["kind"] == "eval"] == evals
    # the report: the NaN at iter 425 is found, on its line
    report, _ = analyze_json(NANOGPT)
    nan = [f for f in report["findings"] if f["rule"] == "nan_loss"]
    assert len(nan) == 1 and nan[0]["step"] == 425
    assert nan[0]["line"] == next(s[0] for s in steps if s[2] == "NaN")


def test_fallback_reads_bar_separated_key_value_lines():
    """my-torch's trainer prints 'step: N | loss: X | grad_norm: G | lr: L |
    time: Tms': the kv fallback reads step, loss, lr, the step time and
    grad_norm as a metric, as Python reads them."""
    expected = []
    for number, line in enumerate(MYTORCH.read_text().splitlines(), 1):
        m = re.fullmatch(r"step: (\d+) \| loss: (\S+) \| grad_norm: (\S+) \| lr: (\S+) \| time: (\d+)ms", line)
        assert m, line
        expected.append((number, int(m[1]), float(m[2]), float(m[3]), float(m[4]), round(int(m[5]) / 1000, 9)))
    got, result = records("--explain", MYTORCH)
    assert result.returncode == 0, result.stderr
    assert f"explain: {MYTORCH}: read by" in result.stderr
    assert [(r["line"], r["step"], r["loss"], r["metrics"]["grad_norm"], r["lr"], round(r["batch_time"], 9))
            for r in got if r["kind"] == "step"] == expected
    report, _ = analyze_json(MYTORCH)
    assert report["healthy"] and report["findings"] == []
