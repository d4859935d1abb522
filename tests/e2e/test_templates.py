"""Lines nobody recognised: the lines no format read are grouped into
templates; the rare ones that look like trouble (trouble words, one rank
only, after the last step) are the report's "Unusual lines", with their
first line; --templates prints the whole table. Real corpus logs; what each
line says is checked against the file itself."""
import json
import re

from conftest import analyze_json, records, run

EXPECTATIONS = "tests/e2e/corpus_expectations.json"
IBOT = "paddle-errors/ibot-launch-crashes-workerlog.0"
RTDETR = "paddle-distributed/ppdet-rtdetr-2gpu-sigterm-workerlog.0"
DRRG = "paddle-suites/ppocr-det-drrg-workerlog.0.excerpt.log"


def line_of(path, number):
    with open(path, encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f, 1):
            if i == number:
                return line.rstrip("\n")
    raise AssertionError(f"{path} has no line {number}")


def test_an_unknown_failure_is_found(corpus):
    """iBOT's argparse error is no format's: the miner finds it."""
    report, _ = analyze_json(corpus / IBOT)
    hits = [u for u in report["unusual_lines"] if "error" in u["example"]]
    assert len(hits) == 1
    u = hits[0]
    assert u["file"] == str(corpus / IBOT) and u["rank"] == 0 and u["count"] == 1 and "says trouble" in u["why"]
    assert line_of(corpus / IBOT, u["line"]).endswith(u["example"])
    assert u["example"].startswith("iBOT: error: argument --arch: invalid choice")
    assert u["template"].startswith("iBOT: error: argument --arch: invalid choice: <STR>")


def test_lines_after_the_last_step(corpus):
    """RT-DETR's first launch dies with a DataLoader thread's exception after
    its last step; the second launch starts at line 120."""
    report, _ = analyze_json(corpus / RTDETR)
    got, _ = records(corpus / RTDETR)
    steps = [r["line"] for r in got if r["kind"] == "step"]
    starts = [l["start_line"] for l in report["launches"] if l["start_line"]]
    after = [u for u in report["unusual_lines"] if "after the last step" in u["why"]]
    assert after
    for u in after:
        next_start = min([s for s in starts if s > u["line"]] or [10**9])
        assert any(s < u["line"] for s in steps)
        assert not any(u["line"] < s < next_start for s in steps)  # no step of its launch after it
    assert any(u["example"] == "Exception in thread Thread-5:" and line_of(corpus / RTDETR, u["line"]).endswith(
        "Exception in thread Thread-5:") for u in after)


def test_healthy_runs_have_no_unusual_lines_and_no_new_findings(corpus):
    from conftest import SOURCE
    want = json.loads((SOURCE / EXPECTATIONS).read_text())
    for name, w in want.items():
        if isinstance(w, dict) and w.get("healthy"):
            report, _ = analyze_json(corpus / name)
            assert report["unusual_lines"] == [], name
            assert report["healthy"], name


def test_templates_table_counts_masked_lines(corpus):
    out = run(["trainwatch", "analyze", "--no-color", "--templates", corpus / DRRG]).stdout
    table = out[out.index("\nTemplates  "):]
    rows = {}
    for line in table.splitlines()[2:]:
        m = re.match(r"\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(.*)$", line)
        if m:
            rows[m.group(5)] = (int(m.group(1)), m.group(4))
    text = (corpus / DRRG).read_text(encoding="utf-8", errors="replace").splitlines()
    assert rows["list index out of range"][0] == sum(l == "list index out of range" for l in text)
    lanms = sum(l.strip() == "lanms has been installed." for l in text)
    assert lanms > 10 and rows["lanms has been installed."][0] == lanms
    first = rows["list index out of range"][1]
    assert text[int(first.rsplit(":", 1)[1]) - 1] == "list index out of range"
    # numbers are masked: no template carries a digit
    assert not any(re.search(r"\d", t) for t in rows)


def test_config_dump_lines_are_one_template(corpus):
    """DRRG's config dump, 'ppocr INFO: <key> : <value>' with a different key
    on each line, is one template once Drain generalises the keys: as many
    lines as Python counts, first seen at the first of them; the trouble
    line beside it keeps its own."""
    out = run(["trainwatch", "analyze", "--no-color", "--templates", corpus / DRRG]).stdout
    rows = [l for l in out.splitlines() if l.endswith("  ppocr INFO: <*> : <*>")]
    assert len(rows) == 1
    text = (corpus / DRRG).read_text(encoding="utf-8", errors="replace").splitlines()
    dump = [i for i, l in enumerate(text, 1) if re.fullmatch(r"\[[^\]]*\] ppocr INFO:\s+\S+ : \S+\s*", l)]
    assert len(dump) > 100
    lines, _, _, first = rows[0].split()[:4]
    assert int(lines) == len(dump) and int(first.rsplit(":", 1)[1]) == dump[0]
    assert any(l.endswith("  list index out of range") for l in out.splitlines())


def launch_ranges(report, path):
    """(first line, last line) of each launch of a one-file log, from where
    the report says each starts."""
    total = sum(1 for _ in open(path, encoding="utf-8", errors="replace"))
    starts = [1] + [l["start_line"] for l in report["launches"][1:]]
    return [(a, b - 1) for a, b in zip(starts, starts[1:] + [total + 1])]


def per_launch(path, ranges, wanted):
    text = open(path, encoding="utf-8", errors="replace").read().splitlines()
    counts = {}
    for i, (a, b) in enumerate(ranges, 1):
        n = sum(1 for number in range(a, b + 1) if wanted(text[number - 1]))
        if n:
            counts[i] = n
    return counts


def test_templates_counted_per_launch(corpus):
    """DRRG's log holds several launches: each template's lines are counted per
    launch, in --templates' 'by launch' column and in the JSON's unusual
    lines, as Python counts them between the launches' start lines."""
    report, _ = analyze_json(corpus / DRRG)
    assert report["launch_count"] > 2
    ranges = launch_ranges(report, corpus / DRRG)
    lanms = per_launch(corpus / DRRG, ranges, lambda l: l.strip() == "lanms has been installed.")
    assert len(lanms) > 1
    out = run(["trainwatch", "analyze", "--no-color", "--templates", corpus / DRRG]).stdout
    row = next(l for l in out.splitlines() if l.endswith("  lanms has been installed."))
    assert row.split()[2] == ",".join(f"{k}:{v}" for k, v in lanms.items())
    u = next(u for u in report["unusual_lines"] if u["example"] == "list index out of range")
    index_errors = per_launch(corpus / DRRG, ranges, lambda l: l == "list index out of range")
    assert {x["launch"]: x["count"] for x in u["launches"]} == index_errors
    assert u["launch"] == min(index_errors) and u["ranks"] == 1 and u["count"] == sum(index_errors.values())


def test_after_the_last_step_is_judged_per_launch(corpus):
    """PaddleVideo's AGCN log: each attempt prints its config again before
    its start line, so launch 2's copy of 'label_path : <PATH>' comes after
    launch 2's last step; but the launches without a step hold it too: it is
    a start-up line, not one printed as a process went down."""
    name = "paddle-suites/paddlevideo-agcn-ansi-color-workerlog.0"
    report, _ = analyze_json(corpus / name)
    ranges = launch_ranges(report, corpus / name)
    got, _ = records(corpus / name)
    steps = [r["line"] for r in got if r["kind"] == "step"]
    text = (corpus / name).read_text(encoding="utf-8", errors="replace").splitlines()
    label = [i for i, l in enumerate(text, 1) if "label_path" in l and "/" in l]
    (a2, b2) = ranges[1]
    in_two = [n for n in label if a2 <= n <= b2]
    assert in_two and max(s for s in steps if a2 <= s <= b2) < in_two[0]  # after launch 2's last step
    assert any(not any(a <= s <= b for s in steps) and any(a <= n <= b for n in label) for a, b in ranges)
    assert not [u for u in report["unusual_lines"] if "label_path" in u["example"]]
