"""The HTML report (--html of analyze, run and trace) opened in a real
headless Chromium through the DevTools protocol (browser.py).

Every page is checked the same way: it loads with no request but the page
itself (the Network domain's log) and no script error; each chart's series
have as many points as the parsed records say (analyze --records, an input
the writer does not share) and their minimum and maximum are the report's
(analyze --json); the polylines and the table view hold the points drawn;
each finding of the JSON report is on the page, quoting its log line, and
its link leads to an element that shows (a highlighted region or a chart).
A screenshot of each page is kept under the build's test-artifacts/report/;
TW_UPDATE_SCREENSHOT=1 also writes docs/images/report.png (the README's,
the top of `run --html`'s page of the demo trainer whose loss turns NaN).
"""
import html.parser
import json
import math
import os
import pathlib
import re
import subprocess

import pytest

from conftest import BUILD, SOURCE, binary, run
from browser import CHROMIUM, Browser
from test_history import ppocr_log

ARTIFACTS = BUILD / "test-artifacts" / "report"

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/install-deps.sh check)")

EXTRACT = r"""(() => {
  const fin = v => Number.isFinite(v) ? v : null;
  const charts = [...document.querySelectorAll('figure.chart')].map(fig => {
    const el = fig.querySelector('script.chart-data');
    const step = fig.querySelector('svg.v-step') || fig.querySelector('svg.plot');
    const polylines = step ? [...step.querySelectorAll('polyline.s')].map(p => {
      const pts = p.getAttribute('points').trim();
      return {name: p.getAttribute('data-name'), points: pts ? pts.split(/\s+/).length : 0};
    }) : [];
    const bodies = [...fig.querySelectorAll('table.points tbody')].map(tb => {
      const rows = [...tb.querySelectorAll('tr')].filter(tr => tr.children[0].tagName === 'TD');
      const vals = rows.map(tr => Number(tr.children[tr.children.length - 1].textContent)).filter(Number.isFinite);
      return {name: tb.getAttribute('data-series'), rows: rows.length,
              min: fin(Math.min(...vals)), max: fin(Math.max(...vals))};
    });
    return {id: fig.id, data: el ? JSON.parse(el.textContent) : null, polylines, bodies,
            bars: fig.querySelectorAll('g.bar').length, bands: step ? step.querySelectorAll('rect.band').length : 0,
            time_view: !!fig.querySelector('svg.v-time')};
  });
  const findings = [...document.querySelectorAll('li.finding')].map(li => {
    const a = li.querySelector('a.goto');
    return {title: (a || li.querySelector('strong')).textContent, href: a ? a.getAttribute('href') : null,
            quote: li.querySelector('blockquote.logline') ? li.querySelector('blockquote.logline').textContent : null};
  });
  const tables = {};
  document.querySelectorAll('table[class^="top-"]').forEach(t => {
    tables[t.className] = tables[t.className] || [];
    tables[t.className].push([...t.querySelectorAll('tbody tr, tr')].filter(r => r.children[0].tagName === 'TD')
      .map(r => r.children[0].textContent));
  });
  return {charts, findings, tables, title: document.title};
})()"""

FOLLOW = r"""(async href => {
  location.hash = href;
  await new Promise(r => setTimeout(r, 60));
  const el = document.querySelector(href);
  if (!el) return {exists: false};
  const box = el.getBoundingClientRect();
  const n = href.slice(3);
  return {exists: true, shown: getComputedStyle(el).display !== 'none' && box.width > 0 && box.height > 0,
          highlighted: href.startsWith('#f-') ? document.querySelectorAll('.hl.on[data-f="' + n + '"]').length : null,
          views: el.closest('figure').querySelectorAll('svg.plot').length};
})"""


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    yield b
    b.close()


def records_of(*inputs):
    out = run(["trainwatch", "analyze", "--records", *inputs])
    assert out.returncode in (0, 1, 2), out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def value(v):
    return float("nan") if v == "NaN" else float("inf") if v == "+Inf" else float("-inf") if v == "-Inf" else v


def close(a, b):
    return a == b or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12))


class Markup(html.parser.HTMLParser):
    """Attributes well formed and the elements the writers open closed."""
    CHECKED = {"html", "head", "body", "main", "section", "figure", "svg", "g", "table", "details", "ul", "ol",
               "script", "style", "header", "footer", "figcaption", "blockquote", "caption", "thead"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors = [], []

    def handle_starttag(self, tag, attrs):
        for name, _ in attrs:
            if not re.fullmatch(r"[a-z][a-z0-9-]*", name):
                self.errors.append(f"<{tag}> attribute {name!r}")
        if tag in self.CHECKED:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        for name, _ in attrs:
            if not re.fullmatch(r"[a-z][a-z0-9-]*", name):
                self.errors.append(f"<{tag}/> attribute {name!r}")

    def handle_endtag(self, tag):
        if tag in self.CHECKED:
            if not self.stack or self.stack[-1] != tag:
                self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            else:
                self.stack.pop()


def check_markup(path):
    m = Markup()
    m.feed(pathlib.Path(path).read_text())
    m.close()
    assert not m.errors and not m.stack, (m.errors[:5], m.stack)


def open_page(browser, html, name):
    check_markup(html)
    url, requests, errors = browser.open(html)
    assert requests == [url], f"the page requested more than itself: {requests}"
    assert not errors, errors
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"{name}.png"
    browser.screenshot(str(shot))
    assert shot.stat().st_size > 1000
    return browser.evaluate(EXTRACT)


def chart(page, cid):
    found = [c for c in page["charts"] if c["id"] == cid]
    return found[0] if found else None


def check_drawn(c):
    """The polylines and the table hold the points drawn, with the
    extremes of the series (min/max buckets keep them)."""
    data = c["data"]
    by_name = {p["name"]: p["points"] for p in c["polylines"]}
    bodies = {b["name"]: b for b in c["bodies"]}
    for s in data["series"]:
        assert by_name[s["name"]] == s["drawn"], (c["id"], s)
        assert bodies[s["name"]]["rows"] == s["drawn"] + s["not_finite"], (c["id"], s)
        assert s["drawn"] <= 2 * 300 and s["drawn"] <= s["points"]
        if s["points"]:
            assert close(bodies[s["name"]]["min"] * data["y_scale"], s["min"]), (c["id"], s)
            assert close(bodies[s["name"]]["max"] * data["y_scale"], s["max"]), (c["id"], s)


def check_series(page, cid, name, recs, key, rank=None, metric=False):
    """Series name of chart cid has one point per record carrying key (of
    rank; metric: a named metric of the record), and the extremes of those
    records."""
    c = chart(page, cid)
    values = [value(r["metrics"][key] if metric else r[key]) for r in recs
              if r["kind"] == "step" and key in (r.get("metrics", {}) if metric else r)
              and (rank is None or r["rank"] == rank)]
    if not values:
        assert c is None or name not in [s["name"] for s in c["data"]["series"]]
        return None
    assert c is not None, f"no chart {cid}"
    s = next(s for s in c["data"]["series"] if s["name"] == name)
    finite = [v for v in values if math.isfinite(v)]
    assert s["points"] == len(finite), (cid, s, len(finite))
    assert s["not_finite"] == len(values) - len(finite)
    if finite:
        assert close(s["min"], min(finite)) and close(s["max"], max(finite)), (cid, s)
    check_drawn(c)
    return s


def check_eval_charts(page, report, recs):
    """One chart per evaluation metric (up to 4) with a point per evaluation
    record carrying it, its extremes, and the report's best among them."""
    for i, m in enumerate(report["summary"]["eval_metrics"][:4]):
        c = chart(page, f"chart-eval-{i + 1}")
        assert c is not None and c["data"]["series"][0]["name"] == m["name"]
        values = [r["metrics"][m["name"]] for r in recs if r["kind"] == "eval" and m["name"] in r.get("metrics", {})]
        s = c["data"]["series"][0]
        assert s["points"] == len(values) == m["count"], (m, s)
        assert close(s["min"], min(values)) and close(s["max"], max(values))
        assert close(m["best"], s["min"]) or close(m["best"], s["max"])
        check_drawn(c)
    assert chart(page, f"chart-eval-{min(4, len(report['summary']['eval_metrics'])) + 1}") is None


def check_findings(browser, page, report):
    titles = [f["title"] for f in page["findings"]]
    assert titles == [f["title"] for f in report["findings"]]
    for f, shown in zip(report["findings"], page["findings"]):
        if f["file"] and f["line"] and os.path.isfile(f["file"]):
            lines = pathlib.Path(f["file"]).read_bytes().split(b"\n")  # lines as the parser counts them
            if f["line"] <= len(lines):
                text = lines[f["line"] - 1][:400].rstrip(b"\r\n").decode("utf-8", "ignore")
                text = "".join(" " if ord(ch) < 0x20 and ch != "\t" else ch for ch in text)
                assert shown["quote"] == text, f
        if shown["href"]:
            result = browser.evaluate(f"({FOLLOW})({json.dumps(shown['href'])})", wait=True)
            assert result["exists"] and result["shown"], (shown, result)
            if shown["href"].startswith("#f-"):  # lit in the step view and, when there is one, the time view
                assert result["highlighted"] == result["views"], (shown, result)


def analyze_page(browser, tmp_path, name, inputs, *options):
    html = tmp_path / f"{name}.html"
    out = run(["trainwatch", "analyze", "--json", "--html", html, *options, *inputs])
    assert out.returncode in (0, 1), out.stderr
    report = json.loads(out.stdout)
    page = open_page(browser, html, name)
    return report, page, html


def demo_log(tmp_path, name, *flags, rank=None):
    log = tmp_path / (f"{name}.workerlog.{rank}" if rank is not None else f"{name}.log")
    with open(log, "w") as f:
        subprocess.run([binary("demo-train"), "--epochs", "2", "--steps-per-epoch", "60", "--log-interval", "1",
                        *flags], stdout=f, stderr=subprocess.STDOUT, timeout=120)
    return log


FAULTS = {
    "clean": ([], [], None),
    "slow-reader": (["--slow-reader", "20"], [], "data_loading_bound"),
    "lr-spike": (["--lr-spike-at", "30"], [], "nan_loss"),
    "leak": (["--leak-mb", "4"], ["--device-memory", "2"], "memory_growth"),
    "stall": (["--stall-at", "50", "--stall-seconds", "2"], ["--stall-seconds", "1"], "stall"),
    "crash": (["--crash-at", "70"], [], None),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_demo_fault_page_has_its_finding_charts_and_links(browser, tmp_path, fault):
    flags, options, rule = FAULTS[fault]
    log = demo_log(tmp_path, fault, *flags)
    report, page, _ = analyze_page(browser, tmp_path, f"demo-{fault}", [log], *options)
    recs = records_of(log)
    if rule:
        assert rule in [f["rule"] for f in report["findings"]]
    if fault == "crash":
        assert report["findings"] and report["findings"][0]["severity"] == "error"
    loss = check_series(page, "chart-loss", "loss", recs, "loss")
    assert close(loss["min"], report["summary"]["best_loss"])
    check_series(page, "chart-lr", "learning rate", recs, "lr")
    step = check_series(page, "chart-step", "step time", recs, "batch_time")
    assert close(step["max"], report["summary"]["step_time_max"])
    check_series(page, "chart-step", "data wait", recs, "data_time")
    check_series(page, "chart-throughput", "samples/s", recs, "samples_per_sec")
    check_eval_charts(page, report, recs)
    mem = check_series(page, "chart-memory", "memory", recs, "mem_bytes")
    assert close(mem["max"], report["summary"]["peak_memory_bytes"])
    assert chart(page, "chart-loss")["time_view"]
    check_findings(browser, page, report)
    if fault == "lr-spike":
        assert loss["not_finite"] > 0
    if fault == "leak":  # the projection drawn is the memory rule's: from its last point to the step it names
        c = chart(page, "chart-memory")
        proj = next(s for s in c["data"]["series"] if s["name"] == "projected growth")
        growth = next(f for f in report["findings"] if f["rule"] == "memory_growth")
        full = re.search(r"device is full around step (\d+)", growth["evidence"]).group(1)
        note = browser.evaluate("document.querySelector('#chart-memory p.note').textContent")
        assert f"full around step {full}." in note, (note, growth["evidence"])
        last_mem = [r["mem_bytes"] for r in recs if r["kind"] == "step" and "mem_bytes" in r][-1]
        assert proj["points"] == 2 and close(proj["min"], last_mem) and proj["max"] > last_mem


def test_run_writes_the_page_at_the_end(browser, tmp_path):
    html = tmp_path / "run.html"
    report_json = tmp_path / "run.json"
    out = run(["trainwatch", "run", "--web.listen-address", "none", "--report", report_json, "--html", html, "--",
               binary("demo-train"), "--epochs", "1", "--steps-per-epoch", "40", "--log-interval", "1",
               "--lr-spike-at", "20"], timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(report_json.read_text())
    page = open_page(browser, html, "run-lr-spike")
    if os.environ.get("TW_UPDATE_SCREENSHOT") == "1":  # the README's picture
        browser.screenshot(str(SOURCE / "docs" / "images" / "report.png"), height=1250, scale=0.8)
    assert "nan_loss" in [f["rule"] for f in report["findings"]]
    c = chart(page, "chart-loss")
    s = c["data"]["series"][0]
    assert s["points"] + s["not_finite"] == report["summary"]["step_records"]
    check_drawn(c)
    check_findings(browser, page, report)


def test_run_html_refuses_stdout_and_an_unwritable_path(tmp_path):
    out = run(["trainwatch", "run", "--html", "-", "--", "true"])
    assert out.returncode == 2 and "--html" in out.stderr
    out = run(["trainwatch", "run", "--web.listen-address", "none", "--html", tmp_path / "no" / "such" / "x.html",
               "--", "true"])
    assert out.returncode == 2 and "--html" in out.stderr and "not starting" in out.stderr


def test_multi_rank_demo_overlays_each_ranks_step_time(browser, tmp_path):
    logs = [demo_log(tmp_path, "multi", "--seed", str(r + 1), *(["--slow-reader", "3"] if r == 1 else []), rank=r)
            for r in range(3)]
    report, page, _ = analyze_page(browser, tmp_path, "demo-3-ranks", logs)
    recs = records_of(*logs)
    c = chart(page, "chart-ranks")
    assert c is not None
    assert sorted(s["name"] for s in c["data"]["series"]) == ["rank 0", "rank 1", "rank 2"]
    for r in range(3):
        check_series(page, "chart-ranks", f"rank {r}", recs, "batch_time", rank=r)
    check_findings(browser, page, report)


def test_corpus_single_rank(browser, tmp_path, corpus):
    log = corpus / "paddle-suites" / "ppdet-rtdetr-ssdd-1gpu.log"
    report, page, _ = analyze_page(browser, tmp_path, "corpus-rtdetr", [log])
    recs = records_of(log)
    loss = check_series(page, "chart-loss", "loss", recs, "loss")
    assert close(loss["min"], report["summary"]["best_loss"])
    step = check_series(page, "chart-step", "step time", recs, "batch_time")
    assert close(step["max"], report["summary"]["step_time_max"])
    check_series(page, "chart-lr", "learning rate", recs, "lr")
    check_series(page, "chart-throughput", "samples/s", recs, "samples_per_sec")
    # twelve loss parts: the first eight seen drawn, each with all its records, the rest in the table
    names = list(next(r for r in recs if r["kind"] == "step" and r.get("metrics"))["metrics"])
    assert len(names) == 12
    parts = chart(page, "chart-loss-parts")
    assert [s["name"] for s in parts["data"]["series"]] == names[:8]
    for name in names[:8]:
        check_series(page, "chart-loss-parts", name, recs, name, metric=True)
    assert "12 loss parts logged; 8 drawn" in browser.evaluate(
        "document.querySelector('#chart-loss-parts p.note').textContent")
    assert chart(page, "chart-train-metrics") is None
    check_findings(browser, page, report)


def test_corpus_training_metrics_other_than_loss(browser, tmp_path, corpus):
    log = corpus / "paddle-suites" / "ppocr-v2.0-official-cht-mobile-rec-train.log.excerpt"
    report, page, _ = analyze_page(browser, tmp_path, "corpus-ppocr-rec", [log])
    recs = records_of(log)
    names = [m["name"] for m in report["summary"]["train_metrics"]]
    assert "acc" in names and "norm_edit_dis" in names
    c = chart(page, "chart-train-metrics")
    assert [s["name"] for s in c["data"]["series"]] == [n for n in names if not n.startswith("loss_")][:8]
    for name in names:
        s = check_series(page, "chart-train-metrics", name, recs, name, metric=True)
        m = next(m for m in report["summary"]["train_metrics"] if m["name"] == name)
        if report["launch_count"] == 1:  # else the summary is the last launch's, the chart every launch's
            assert close(m["best"], s["min"]) or close(m["best"], s["max"])
    assert chart(page, "chart-loss-parts") is None
    check_findings(browser, page, report)


def test_gpu_log_charts_over_the_launch(browser, tmp_path, corpus):
    """The DRRG launch of 2024/03/11 with the default.gpu.log written for it:
    per GPU, one point per CSV row within a minute of the steps' span, its
    utilisation and memory extremes; the samples start before the first step,
    so there is no clean mapping to steps and the charts are over time only."""
    from test_gpu_logs import DRRG_0311, PADDLE_GPU, paddle_rows, step_times
    report, page, _ = analyze_page(browser, tmp_path, "gpu-log", [DRRG_0311, corpus / PADDLE_GPU])
    steps = step_times(DRRG_0311)
    used = [r for r in paddle_rows(corpus / PADDLE_GPU) if steps[0] - 60 <= r[1] <= steps[-1] + 60]
    assert len(used) == report["summary"]["gpu"]["samples"] > 10
    util, mem = chart(page, "chart-gpu-util"), chart(page, "chart-gpu-memory")
    for c, values, scale in ((util, [r[2] for r in used], 1), (mem, [r[3] * 1048576 for r in used], 1)):
        s = c["data"]["series"]
        assert [x["name"] for x in s] == ["GPU 0"]
        assert s[0]["points"] == len(values) and close(s[0]["min"], min(values)) and close(s[0]["max"], max(values))
        assert c["time_view"] and not c["polylines"] == []
        check_drawn(c)
    note = browser.evaluate("document.querySelector('#chart-gpu-util p.note').textContent")
    assert "over time only" in note and PADDLE_GPU.split("/")[1] in note
    assert browser.evaluate("document.querySelectorAll('#chart-gpu-util svg.v-step').length") == 0
    # the time view is shown with the step switch too, and shares the page's time origin with the loss
    assert browser.evaluate("getComputedStyle(document.querySelector('#chart-gpu-util svg.v-time')).display") != "none"
    x0 = browser.evaluate("[...document.querySelectorAll('svg.v-time')].map(s => s.getAttribute('data-t0'))")
    assert len(set(x0)) == 1, x0
    idle = [i for i, f in enumerate(report["findings"]) if f["rule"] == "gpu_underused"]
    assert len(idle) == 1 and page["findings"][idle[0]]["href"] == "#chart-gpu-util"
    check_findings(browser, page, report)


def test_gpu_log_inside_the_steps_is_drawn_over_steps_too(browser, tmp_path):
    """GPU samples every 10 s strictly inside the steps' timestamps (one step a
    second): a clean time-to-step mapping, so the charts have a step view
    too, each sample at the step logged at its second."""
    log = tmp_path / "train.log"
    log.write_text("".join(line(s) for s in range(1, 301)))
    gpu = tmp_path / "default.gpu.log"
    rows = [(g, t, (t * 7 + g * 13) % 100, 1000 + t + g) for t in range(10, 300, 10) for g in range(2)]
    gpu.write_text("index,utilization_gpu,memory_total,memory_used,memory_free,timestamp\n" + "".join(
        f"{g},{u},8000,{m},{8000 - m},2024/03/09 15:{t // 60:02d}:{t % 60:02d}.000\n" for g, t, u, m in rows))
    report, page, _ = analyze_page(browser, tmp_path, "gpu-steps", [log, gpu])
    util = chart(page, "chart-gpu-util")
    for g in range(2):
        s = next(x for x in util["data"]["series"] if x["name"] == f"GPU {g}")
        values = [u for gg, _, u, _ in rows if gg == g]
        assert s["points"] == len(values) and s["min"] == min(values) and s["max"] == max(values)
    check_drawn(util)
    assert browser.evaluate("document.querySelectorAll('#chart-gpu-util svg.v-step').length") == 1
    steps = browser.evaluate("[...document.querySelectorAll('#chart-gpu-util table.points tbody')][0]"
                             ".querySelectorAll('td:first-child').length")
    assert steps == len(rows) // 2
    first = browser.evaluate("document.querySelector('#chart-gpu-util table.points td').textContent")
    assert float(first) == 10  # the sample at 15:00:10 sits at the step logged at 15:00:10
    note = browser.evaluate("(document.querySelector('#chart-gpu-util p.note') || {}).textContent || ''")
    assert "over time only" not in note
    check_findings(browser, page, report)


def test_run_html_draws_what_nvml_sampled(browser, tmp_path):
    """run --html with the stand-in NVML library (two GPUs at 37% and 81%,
    10 GiB used of 80): one series per GPU with the sampled values."""
    fake = BUILD / "fake-nvml" / "libnvidia-ml.so.1"
    html = tmp_path / "run-gpu.html"
    env = dict(os.environ, TW_NVML_LIBRARY=str(fake), FAKE_NVML_USED_GIB="10")
    out = run(["trainwatch", "run", "--web.listen-address", "none", "--html", html, "--",
               binary("demo-train"), "--epochs", "1", "--steps-per-epoch", "30", "--log-interval", "1",
               "--slow-reader", "100"], timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    page = open_page(browser, html, "run-gpu")
    util, mem = chart(page, "chart-gpu-util"), chart(page, "chart-gpu-memory")
    assert util is not None and mem is not None
    by_name = {s["name"]: s for s in util["data"]["series"]}
    assert sorted(by_name) == ["GPU 0", "GPU 1"]
    assert by_name["GPU 0"]["points"] >= 2 and by_name["GPU 0"]["min"] == by_name["GPU 0"]["max"] == 37
    assert by_name["GPU 1"]["min"] == by_name["GPU 1"]["max"] == 81
    for s in mem["data"]["series"]:
        assert s["min"] == s["max"] == 10 * 2 ** 30
    check_drawn(util)
    check_drawn(mem)
    assert "NVML" in browser.evaluate("document.querySelector('#chart-gpu-util p.note').textContent")


def test_environment_of_the_launch_shown(browser, tmp_path, corpus):
    """PaddleSeg ENCNet states its environment per launch (2 GPUs, then 4): the
    page's environment table is the summary's environment line, key by key,
    each with the log line it was read from; --launch 1 shows the first's."""
    log = corpus / "paddle-suites" / "paddleseg-encnet-4gpu-workerlog.0.excerpt.log"
    lines = log.read_text(errors="replace").split("\n")
    for launch, name in ((None, "env-last"), ("1", "env-first")):
        report, page, _ = analyze_page(browser, tmp_path, name, [log], *(["--launch", launch] if launch else []))
        rows = browser.evaluate("[...document.querySelectorAll('#environment-table tbody tr, #environment-table tr')]"
                                ".filter(r => r.children[0].tagName === 'TD')"
                                ".map(r => [...r.children].map(c => c.textContent))")
        assert rows and ", ".join(f"{k} {v}" for k, v, _ in rows) == report["summary"]["environment"]
        for key, value, at in rows:
            number = int(re.search(r":(\d+) \(rank \d+\)$", at).group(1))
            assert value in lines[number - 1] and at.startswith(str(log))
        gpus = dict((k, v) for k, v, _ in rows)["GPUs used"]
        assert gpus == ("2" if launch == "1" else "4")
        check_findings(browser, page, report)


def test_corpus_evaluations(browser, tmp_path, corpus):
    log = corpus / "paddle-suites" / "paddlevideo-3dresnet18-ucf101-train.log"
    report, page, _ = analyze_page(browser, tmp_path, "corpus-paddlevideo", [log])
    assert len(report["summary"]["eval_metrics"]) >= 2
    check_eval_charts(page, report, records_of(log))
    check_findings(browser, page, report)


def test_corpus_multi_rank_with_launches(browser, tmp_path, corpus):
    logs = sorted((corpus / "paddle-distributed").glob("vinvl-4gpu-30epoch-workerlog.*"))
    report, page, _ = analyze_page(browser, tmp_path, "corpus-vinvl", logs)
    recs = records_of(*logs)
    ranks = sorted({r["rank"] for r in recs if r["kind"] == "step" and "loss" in r})
    loss = check_series(page, "chart-loss", "loss (rank %d)" % ranks[0], recs, "loss", rank=ranks[0])
    assert loss is not None
    bands = chart(page, "chart-loss")["bands"]
    assert bands == (report["launch_count"] if report["launch_count"] > 1 else 0)
    check_findings(browser, page, report)


def test_corpus_restarted_job_links_its_findings(browser, tmp_path, corpus):
    logs = sorted((corpus / "paddle-distributed").glob("ppdet-rtdetr-2gpu-sigterm-workerlog.*"))
    report, page, _ = analyze_page(browser, tmp_path, "corpus-sigterm", logs)
    assert report["findings"]
    assert any(f["href"] for f in page["findings"])
    check_findings(browser, page, report)


TRACES = sorted(p.name for p in (SOURCE.parent / "shared" / "corpus" / "traces").glob("*")) or ["(no corpus)"]


@pytest.mark.parametrize("name", TRACES + ["hta-sampled-rank0+1"])
def test_trace_page_bars_and_top_tables(browser, tmp_path, corpus, name):
    if name == "hta-sampled-rank0+1":
        traces = [corpus / "traces" / f"hta-sampled-rank{r}-ws128.kineto.json.gz" for r in (0, 1)]
    else:
        traces = [corpus / "traces" / name]
    html = tmp_path / "trace.html"
    out = run(["trainwatch", "trace", "--json", "--html", html, *traces])
    assert out.returncode in (0, 1), out.stderr
    report = json.loads(out.stdout)
    page = open_page(browser, html, "trace-" + name.split(".")[0])
    for i, rank in enumerate(report["ranks"]):
        c = chart(page, f"trace-rank-{i}")
        if not rank["steps"]:
            assert c is None
            continue
        assert c["data"]["steps"] == len(rank["steps"]) == c["bars"] == c["data"]["bars"]
    kernels = [[k["name"] for k in r["top_kernels"]] for r in report["ranks"] if r["top_kernels"]]
    ops = [[k["name"] for k in r["top_operators"]] for r in report["ranks"] if r["top_operators"]]
    assert page["tables"].get("top-kernels", []) == kernels
    assert page["tables"].get("top-ops", []) == ops
    check_findings(browser, page, report)


def test_trace_html_to_stdout(corpus):
    trace = corpus / "traces" / "hta-alexnet-a100.kineto.json.gz"
    out = run(["trainwatch", "trace", "--html", "-", trace])
    assert out.returncode in (0, 1), out.stderr
    assert out.stdout.startswith("<!DOCTYPE html>") and "split-table" in out.stdout


def test_html_to_stdout_is_the_same_page(tmp_path, corpus):
    log = corpus / "paddle-suites" / "ppdet-rtdetr-ssdd-1gpu.log"
    out = run(["trainwatch", "analyze", "--html", "-", log])
    assert out.returncode in (0, 1), out.stderr
    assert out.stdout.startswith("<!DOCTYPE html>") and out.stdout.rstrip().endswith("</html>")
    html = tmp_path / "file.html"
    run(["trainwatch", "analyze", "--html", html, log])
    assert html.read_text() == out.stdout


def test_unwritable_html_path_is_an_error_before_any_work(tmp_path):
    for command in ("analyze", "trace"):
        out = run(["trainwatch", command, "--html", tmp_path / "no" / "such" / "r.html", "/nonexistent"])
        assert out.returncode == 2 and "--html" in out.stderr and "/nonexistent" not in out.stderr
    out = run(["trainwatch", "analyze", "--records", "--html", tmp_path / "r.html", "/nonexistent"])
    assert out.returncode == 2 and "--records" in out.stderr


def line(step, loss="0.5", stamp=True, rank_time=0.1):
    head = "[2024/03/09 15:%02d:%02d] " % (step // 60 % 60, step % 60) if stamp else ""
    return (f"{head}ppocr INFO: epoch: [1/1], global_step: {step}, lr: 0.001000, loss: {loss}, "
            f"avg_reader_cost: 0.00100 s, avg_batch_cost: {rank_time:.5f} s, ips: 100.0 samples/s, "
            "max_mem_reserved: 100 MB\n")


BAD = {
    "one-record": lambda d: {"one.log": line(1)},
    "all-nan": lambda d: {"nan.log": "".join(line(s, "nan") for s in range(1, 50))},
    "no-timestamps": lambda d: {"plain.log": "".join(line(s, stamp=False) for s in range(1, 50))},
    "1000-ranks": lambda d: {f"workerlog.{r}": "".join(line(s, rank_time=0.1 + r / 1e4) for s in range(1, 4))
                             for r in range(1000)},
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_data_still_gives_a_valid_page(browser, tmp_path, case):
    files = BAD[case](tmp_path)
    paths = []
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    report, page, html = analyze_page(browser, tmp_path, f"bad-{case}", paths)
    assert page["title"].startswith("trainwatch")
    for c in page["charts"]:
        if c["data"] and "series" in c["data"]:
            check_drawn(c)
    recs = records_of(*paths)
    if case == "all-nan":
        c = chart(page, "chart-loss")
        assert c["data"]["series"][0]["points"] == 0 and c["data"]["series"][0]["not_finite"] == 49
    if case == "no-timestamps":
        assert not chart(page, "chart-loss")["time_view"]
    if case == "1000-ranks":
        c = chart(page, "chart-ranks")
        assert len(c["data"]["series"]) == 8
        assert html.stat().st_size < 2 * 1024 * 1024
    if case == "one-record":
        check_series(page, "chart-loss", "loss", recs, "loss")
    check_findings(browser, page, report)


def test_long_run_keeps_its_spike_and_nan_when_downsampled(browser, tmp_path):
    steps = 20000
    log = tmp_path / "long.log"
    log.write_text("".join(line(s, "9.5" if s == 12345 else "nan" if s == 15000 else f"{1 + 1 / s:.6f}")
                           for s in range(1, steps + 1)))
    report, page, _ = analyze_page(browser, tmp_path, "long-run", [log])
    s = chart(page, "chart-loss")["data"]["series"][0]
    assert s["points"] < steps  # the run's series is downsampled ...
    assert s["max"] == 9.5 and s["not_finite"] >= 1  # ... and keeps the spike and the NaN
    assert s["drawn"] <= 600
    check_drawn(chart(page, "chart-loss"))
    check_findings(browser, page, report)


def test_hover_dark_mode_and_print(browser, tmp_path):
    log = demo_log(tmp_path, "look", "--lr-spike-at", "30")
    _, page, _ = analyze_page(browser, tmp_path, "demo-look", [log])
    box = browser.evaluate("(() => { const r = document.querySelector('#chart-loss svg.v-step')"
                           ".getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()")
    browser.call("Input.dispatchMouseEvent", type="mouseMoved", x=box[0] + box[2] * 0.3, y=box[1] + box[3] / 2)
    tip = browser.evaluate("(() => { const t = document.querySelector('#chart-loss .tip');"
                           " return {hidden: t.hidden, text: t.textContent}; })()")
    assert not tip["hidden"] and tip["text"].startswith("loss: "), tip
    background = "getComputedStyle(document.body).backgroundColor"
    assert browser.evaluate(background) == "rgb(255, 255, 255)"
    browser.call("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": "dark"}])
    try:
        assert browser.evaluate(background) == "rgb(21, 23, 26)"
        browser.screenshot(str(ARTIFACTS / "demo-look-dark.png"))
    finally:
        browser.call("Emulation.setEmulatedMedia", features=[])
    browser.call("Emulation.setEmulatedMedia", media="print")
    try:
        shown = browser.evaluate("[...document.querySelectorAll('svg.plot')].map(s => getComputedStyle(s).display)")
        views = browser.evaluate("[...document.querySelectorAll('svg.plot')].map(s => s.classList[1])")
        assert all((d != "none") == (v == "v-step") for d, v in zip(shown, views))
        assert browser.evaluate("getComputedStyle(document.querySelector('.xaxis')).display") == "none"
    finally:
        browser.call("Emulation.setEmulatedMedia", media="")


def compare_log(path, lr, reader, workers, steps=300):
    return ppocr_log(path, steps=steps, reader=reader, lr=lr, env=[f"num_workers: {workers}"])


def test_compare_html_overlays_the_runs_and_says_what_the_text_says(browser, tmp_path):
    """compare --html of two logs read now and one recorded run: one line
    a run in each chart, the parting's band on the loss chart, and the
    verdict, the table and the differing facts the text gives."""
    a = compare_log(tmp_path / "a.log", lr=0.01, reader=0.01, workers=8)
    b = compare_log(tmp_path / "b.log", lr=0.05, reader=0.06, workers=2)
    c = compare_log(tmp_path / "c.log", lr=0.01, reader=0.01, workers=8, steps=150)
    db = tmp_path / "runs.db"
    r = run(["trainwatch", "analyze", "--history", db, "--history-job", "job-c", c])
    assert r.returncode in (0, 1), r.stderr
    recorded = json.loads(run(["trainwatch", "runs", "--history", db, "--json"]).stdout)["runs"]
    assert len(recorded) == 1 and recorded[0]["job"] == "job-c", recorded
    page = tmp_path / "compare.html"
    out = run(["trainwatch", "compare", "--history", db, "--html", page, a, b, str(recorded[0]["id"])])
    assert out.returncode == 0, out.stderr
    text = out.stdout  # the text still goes to stdout
    assert "verdict:" in text
    got = open_page(browser, page, "compare")
    assert got["title"] == "trainwatch compare: 3 runs"
    charts = {c["id"]: c for c in got["charts"]}
    assert {"chart-loss", "chart-step-time", "chart-throughput"} <= set(charts), list(charts)
    for cid in ("chart-loss", "chart-step-time"):
        names = [p["name"] for p in charts[cid]["polylines"]]
        assert len(names) == 3 and [n[0] for n in names] == ["A", "B", "C"], names
        assert all(p["points"] > 10 for p in charts[cid]["polylines"]), charts[cid]["polylines"]
        check_drawn(charts[cid])
    assert charts["chart-loss"]["bands"] == 1  # B parts from A; C follows it
    said = browser.evaluate("""(() => ({
      verdict: [...document.querySelectorAll('#verdict li')].map(li => li.textContent),
      parting: [...document.querySelectorAll('#parting li')].map(li => li.textContent),
      differ: [...document.querySelectorAll('#differences-table tbody tr')].map(
        tr => [...tr.children].map(td => td.textContent)),
      runs: [...document.querySelectorAll('#runs-table tr')].map(tr => tr.textContent)}))()""")
    verdict_text = text.split("verdict:\n")[1].splitlines()
    assert said["verdict"] == [v.strip() for v in verdict_text if v.strip()], (said, text)
    for sentence in said["parting"]:
        assert "  " + sentence in text, (sentence, text)
    assert said["parting"][0].startswith("B parts from A at step")
    assert said["parting"][1].startswith("C follows A")
    assert ["num_workers", "8", "2", "8"] in said["differ"], said["differ"]
    assert "job job-c" in said["runs"][2] and "read now, not recorded" in said["runs"][0], said["runs"]


def test_compare_html_to_stdout_and_refusals(tmp_path):
    a = compare_log(tmp_path / "a.log", lr=0.01, reader=0.01, workers=8, steps=60)
    b = compare_log(tmp_path / "b.log", lr=0.01, reader=0.02, workers=4, steps=60)
    db = tmp_path / "runs.db"
    out = run(["trainwatch", "compare", "--history", db, "--html", "-", a, b])
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("<!DOCTYPE html>") and out.stdout.rstrip().endswith("</html>")
    assert "verdict:" not in out.stdout  # the page instead of the text
    check_markup_text(out.stdout)
    bad = run(["trainwatch", "compare", "--history", db, "--html", tmp_path / "no" / "such" / "c.html", a, b])
    assert bad.returncode == 2 and "--html" in bad.stderr and len(bad.stderr.splitlines()) == 1, bad.stderr


def check_markup_text(text):
    m = Markup()
    m.feed(text)
    m.close()
    assert not m.errors and not m.stack, (m.errors[:5], m.stack)
