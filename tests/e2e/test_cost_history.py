"""The cost kept in the run history (docs/history.md#cost, schema 3): `run`
records the GPU time and money cost.c counted (the stand-in NVML library,
tests/fake-nvml), `analyze` counts them from the GPU telemetry logs given
beside the logs (each GPU's sampled span, idle under --gpu-idle-below) and
says, prints in --json and records them; `runs`, `runs show`, `--json` and
`compare` carry them. The expected figures are computed here from the
files with the csv module."""
import json
import re

from conftest import binary, run
from test_cost import fake_env
from test_gpu_logs import DRRG_0311, PADDLE_GPU, paddle_rows, step_times


def gpu_time_of(corpus, below=10.0):
    """GPU-seconds and idle GPU-seconds of the paddle GPU log over the DRRG launch (one GPU)."""
    steps = step_times(DRRG_0311)
    used = sorted(r for r in paddle_rows(corpus / PADDLE_GPU) if steps[0] - 60 <= r[1] <= steps[-1] + 60)
    total = idle = 0.0
    for a, b in zip(used, used[1:]):
        if b[1] > a[1]:
            total += b[1] - a[1]
            idle += (b[1] - a[1]) if a[2] < below else 0
    return total, idle


def test_analyze_counts_the_gpu_time_of_a_gpu_log_says_it_and_records_it(corpus, tmp_path):
    db = tmp_path / "runs.db"
    total, idle = gpu_time_of(corpus)
    assert total > 0
    result = run(["trainwatch", "analyze", "--history", db, "--gpu-hour-cost", "2", "--json", DRRG_0311,
                  corpus / PADDLE_GPU])
    g = json.loads(result.stdout)["summary"]["gpu_time"]
    assert g["gpus"] == 1 and abs(g["gpu_seconds"] - total) < 1e-6 and abs(g["idle_seconds"] - idle) < 1e-6
    assert g["idle_below"] == 10 and abs(g["cost"] - total * 2 / 3600) < 1e-9
    assert abs(g["idle_cost"] - idle * 2 / 3600) < 1e-9 and g["price_source"] == "2 per GPU-hour"
    # the text says it the way run's summary does
    text = run(["trainwatch", "analyze", "--no-history", "--gpu-hour-cost", "2", DRRG_0311,
                corpus / PADDLE_GPU]).stdout
    m = re.search(r"^GPU time: (\S+) GPU-(hours|seconds), (\S+) GPU-(?:hours|seconds) of it idle \((\d+)%, under "
                  r"10% utilisation\); cost (\S+), (\S+) of it idle$", text, re.M)
    assert m, text
    # the HTML report's summary table has the same words
    page = tmp_path / "report.html"
    run(["trainwatch", "analyze", "--no-history", "--gpu-hour-cost", "2", "--html", page, DRRG_0311,
         corpus / PADDLE_GPU])
    row = re.search(r"<tr><th>GPU time</th><td>([^<]*)</td></tr>", page.read_text())
    assert row and "GPU time: " + row.group(1) == m.group(0), (row, m.group(0))
    shown = float(m.group(1)) * (3600 if m.group(2) == "hours" else 1)
    assert abs(shown - total) <= max(0.01 * total, 1) and int(m.group(4)) == round(100 * idle / total)
    # with time left (a plan from --max-steps), the money at the end at this rate
    planned = json.loads(run(["trainwatch", "analyze", "--no-history", "--gpu-hour-cost", "2", "--max-steps",
                              "100000", "--json", DRRG_0311, corpus / PADDLE_GPU]).stdout)["summary"]
    left = planned["eta_seconds"]
    assert g["projected_cost"] is None and left > 0
    assert abs(planned["gpu_time"]["projected_cost"] - (g["cost"] + 2 / 3600 * left)) < 1e-6, planned["gpu_time"]
    # a stricter idle threshold counts more idle time; no price: no money
    strict = json.loads(run(["trainwatch", "analyze", "--no-history", "--gpu-idle-below", "50", "--json",
                             DRRG_0311, corpus / PADDLE_GPU]).stdout)["summary"]["gpu_time"]
    assert abs(strict["idle_seconds"] - gpu_time_of(corpus, 50)[1]) < 1e-6 and strict["cost"] is None
    # recorded: runs --json, runs show
    e = json.loads(run(["trainwatch", "runs", "--history", db, "--json"]).stdout)["runs"][0]
    assert e["gpus"] == 1 and abs(e["gpu_seconds"] - total) < 1e-6 and abs(e["gpu_hours"] - total / 3600) < 1e-9
    assert abs(e["cost"] - total * 2 / 3600) < 1e-9 and e["price_source"] == "2 per GPU-hour"
    assert "GPU time: " in run(["trainwatch", "runs", "--history", db, "show", str(e["id"])]).stdout
    # the GPU log's utilisation is a series of the run, at the steps the log was at
    view = json.loads(run(["trainwatch", "runs", "--history", db, "show", str(e["id"]), "--json"]).stdout)["run"]
    util = next(x for x in view["series"] if x["metric"] == "gpu_util")["points"]
    steps = [p[0] for p in next(x for x in view["series"] if x["metric"] == "loss")["points"]]
    assert 10 <= len(util) <= 600 and all(0 <= v <= 100 for _, v in util), util[:5]
    assert min(steps) <= util[0][0] and util[-1][0] <= max(steps) and util == sorted(util, key=lambda p: p[0])


def test_analyze_without_a_gpu_log_counts_none(corpus, tmp_path):
    db = tmp_path / "runs.db"
    report = json.loads(run(["trainwatch", "analyze", "--history", db, "--json", DRRG_0311]).stdout)
    assert report["summary"]["gpu_time"] is None
    e = json.loads(run(["trainwatch", "runs", "--history", db, "--json"]).stdout)["runs"][0]
    assert e["gpus"] is None and e["gpu_seconds"] is None and e["cost"] is None
    table = run(["trainwatch", "runs", "--history", db]).stdout.splitlines()
    assert table[0].split()[-2:] == ["GPU-HOURS", "COST"] and table[1].split()[-2:] == ["-", "-"]


def test_a_bad_price_table_stops_analyze(corpus, tmp_path):
    prices = tmp_path / "prices.txt"
    prices.write_text("H100\n")
    r = run(["trainwatch", "analyze", "--no-history", "--gpu-prices", prices, DRRG_0311])
    assert r.returncode == 2 and f"--gpu-prices {prices}:1:" in r.stderr


def test_run_records_what_cost_counted_and_runs_and_compare_show_it(corpus, tmp_path):
    db = tmp_path / "runs.db"
    r = run(["trainwatch", "run", "--history", db, "--run-name", "priced", "--gpu-hour-cost", "3.6", "--budget", "50",
             "--", binary("demo-train"), "--epochs", "1", "--steps-per-epoch", "300", "--log-interval", "5",
             "--slow-reader", "12"], env=fake_env(), timeout=300)
    assert r.returncode == 0, r.stderr
    said = re.search(r"^GPU time: (\d+) GPU-seconds", r.stderr, re.M)
    assert said and int(said.group(1)) >= 1, r.stderr
    e = json.loads(run(["trainwatch", "runs", "--history", db, "--json"]).stdout)["runs"][0]
    assert e["name"] == "priced" and e["gpus"] == 1 and e["gpu_idle_seconds"] == 0 and e["gpu_idle_below"] == 10
    assert abs(e["gpu_seconds"] - int(said.group(1))) <= 1
    assert abs(e["cost"] - e["gpu_seconds"] * 3.6 / 3600) < 1e-9 and e["budget"] == 50
    assert e["price_source"] == "3.6 per GPU-hour"
    show = json.loads(run(["trainwatch", "runs", "--history", db, "show", "priced", "--json"]).stdout)["run"]
    assert show["gpu_seconds"] == e["gpu_seconds"] and show["cost"] == e["cost"]
    # the utilisation NVML sampled is a series of the run (the stand-in's GPUs at FAKE_NVML_UTIL, 50 by default)
    util = next(x for x in show["series"] if x["metric"] == "gpu_util")["points"]
    assert util and all(0 <= v <= 100 for _, v in util), util
    text = run(["trainwatch", "runs", "--history", db, "show", "priced"]).stdout
    assert re.search(r"^  GPU time: \S+ GPU-hours on 1 GPU, 0% of it idle \(under 10% utilisation\); cost \S+ "
                     r"\(3.6 per GPU-hour\)", text, re.M), text
    # beside a run with no GPU time: compare's rows
    run(["trainwatch", "analyze", "--history", db, DRRG_0311])
    cmp = run(["trainwatch", "compare", "--history", db, "priced", "2"]).stdout
    hours = re.search(r"^  GPU-hours +(\S+) +-$", cmp, re.M)
    cost = re.search(r"^  cost +(\S+) +-$", cmp, re.M)
    assert hours and cost, cmp
    assert abs(float(hours.group(1)) - e["gpu_seconds"] / 3600) < 1e-3 and float(cost.group(1)) > 0
    both = json.loads(run(["trainwatch", "compare", "--history", db, "--json", "priced", "2"]).stdout)
    assert both["runs"][0]["gpu_seconds"] == e["gpu_seconds"] and both["runs"][1]["gpu_seconds"] is None
