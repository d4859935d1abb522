"""A NaN loss is an error finding in every format analyze reads (issue 27,
item 2): each format's line, as its framework prints it, written for ten
steps with the loss (or one loss component) turning NaN at the seventh.
Formats whose logs print no step counter (HuggingFace Trainer's stdout
dicts) must still count steps, so the NaN has a step and a line."""
import pytest

from conftest import analyze_json, run

# One line per format: {s} the step (1-based), {l} the loss, {c} a component.
TEMPLATES = {
    "hapi": "step {s:3d}/938 - loss: {l} - acc: 0.8203 - 23ms/step",
    "ppocr": "[2024/03/09 15:15:{s:02d}] ppocr INFO: epoch: [1/1200], global_step: {s}, lr: 0.028000, "
             "loss: {l}, loss_text: {c}, avg_reader_cost: 0.23760 s, avg_batch_cost: 0.99427 s, "
             "avg_samples: 4.0, ips: 4.02304 samples/s, eta: 2 days",
    "ppdet": "[08/02 02:46:{s:02d}] ppdet.engine INFO: Epoch: [0] [{s:3d}/464] learning_rate: 0.000010 "
             "loss_class: {c} loss: {l} eta: 4:07:18 batch_cost: 0.4416 data_cost: 0.0002 ips: 4.5291 images/s",
    "ppcls": "[2024/07/31 20:24:{s:02d}] ppcls INFO: [Train][Epoch 24/120][Iter: {s}/304]lr(PiecewiseDecay): "
             "0.00100000, top1: 1.00000, CELoss: {c}, loss: {l}, batch_cost: 0.61280s, reader_cost: 0.12493, "
             "ips: 26.10981 samples/s",
    "paddleseg": "2021-11-23 20:45:{s:02d} [INFO]\t[TRAIN] epoch: 1, iter: {s}0/80000, loss: {l}, lr: 0.009999, "
                 "batch_cost: 1.5401, reader_cost: 0.12922, ips: 1.2986 samples/sec | ETA 34:13:14",
    "paddlenlp": "[2024-03-03 18:06:{s:02d},568] [    INFO] - loss: {l}, learning_rate: 4e-08, global_step: {s}, "
                 "interval_runtime: 4.8704, interval_samples_per_second: 6.57",
    "megatron": " iteration      {s}00/  500000 | consumed samples:        51200 | elapsed time per iteration (ms): "
                "1234.5 | learning rate: 1.500E-04 | global batch size:   512 | lm loss: {l} | loss scale: 65536.0 |",
    "deepspeed": "[2023-05-03 10:00:{s:02d},000] [INFO] [timer.py:1:x] [Rank 0] steps: {s}0 loss: {l} "
                 "iter time (s): 0.567 samples/sec: 56.4",
    "tqdm": "Epoch 0:  45%|####5     | {s}0/1000 [00:30<00:37, 14.92it/s, loss={l}, v_num=0]",
    "mmdet": "2023-01-01 12:00:{s:02d},000 - mmdet - INFO - Epoch [1][{s}0/1000]\tlr: 1.000e-02, eta: 1:00:00, "
             "time: 0.500, data_time: 0.100, memory: 3000, loss_cls: {c}, loss: {l}",
    "mmengine": "01/01 12:00:{s:02d} - mmengine - INFO - Epoch(train)  [2][ {s}0/1000]  lr: 2.0e-02  eta: 0:30:00  "
                "time: 0.4  data_time: 0.1  memory: 3000  loss: {l}  loss_cls: {c}",
    "detectron2": "[01/01 12:00:{s:02d} d2.utils.events]:  eta: 0:10:00  iter: {s}9  total_loss: {l}  loss_cls: {c}  "
                  "time: 0.5012  data_time: 0.0100  lr: 0.00019981  max_mem: 3012M",
    "mmdet-json": '{{"mode": "train", "epoch": 1, "iter": {s}0, "lr": 0.02, "memory": 3000, "data_time": 0.1, '
                  '"loss": {l}, "loss_cls": {c}, "time": 0.5}}',
    "hf-dict": "{{'loss': {l}, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.{s}}}",
    "kv": "epoch 3 step={s}20 loss={l} lr=0.001 step_time=0.21",
    "vinvl": "02/13/2022 23:11:{s:02d} - INFO - Epoch: [1], step: [{s}00], lr: 0.000020, batch_loss: {l}, "
             "avg_loss: 0.0849",
}
# the formats whose lines name a loss component beside the total
WITH_COMPONENT = [name for name, t in TEMPLATES.items() if "{c}" in t]
NAN_AT = 7


def write_log(tmp_path, name, template, nan_total, nan_component, nan_word="nan"):
    lines = []
    for s in range(1, 11):
        bad = s >= NAN_AT
        loss = nan_word if bad and nan_total else f"{2.5 - 0.1 * s:.4f}"
        comp = nan_word if bad and nan_component else f"{0.9 - 0.05 * s:.4f}"
        lines.append(template.format(s=s, l=loss, c=comp))
    path = tmp_path / f"{name}.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def nan_finding(report):
    found = [f for f in report["findings"] if f["rule"] == "nan_loss"]
    assert found, [f["rule"] for f in report["findings"]]
    return found[0]


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_nan_loss_is_an_error_in_every_format(tmp_path, name):
    path = write_log(tmp_path, name, TEMPLATES[name], nan_total=True, nan_component=False)
    report, result = analyze_json(path)
    assert result.returncode == 1, result.stderr
    f = nan_finding(report)
    assert f["severity"] == "error"
    assert f["line"] == NAN_AT, f
    assert "NaN" in f["title"]


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_healthy_lines_of_every_format_have_no_nan(tmp_path, name):
    path = write_log(tmp_path, name, TEMPLATES[name], nan_total=False, nan_component=False)
    report, _ = analyze_json(path)
    assert not [f for f in report["findings"] if f["rule"] == "nan_loss"]


@pytest.mark.parametrize("name", sorted(WITH_COMPONENT))
def test_a_loss_component_going_nan_first_is_named(tmp_path, name):
    path = write_log(tmp_path, name, TEMPLATES[name], nan_total=False, nan_component=True)
    report, _ = analyze_json(path)
    f = nan_finding(report)
    assert f["line"] == NAN_AT, f
    assert "component" in f["title"], f["title"]


def test_inf_is_reported_as_inf(tmp_path):
    path = write_log(tmp_path, "ppocr", TEMPLATES["ppocr"], nan_total=True, nan_component=False, nan_word="inf")
    report, _ = analyze_json(path)
    assert "+Inf" in nan_finding(report)["title"]


def test_hf_dicts_count_steps_by_order(tmp_path):
    path = write_log(tmp_path, "hf", TEMPLATES["hf-dict"], nan_total=True, nan_component=False)
    report, _ = analyze_json(path)
    assert nan_finding(report)["step"] == NAN_AT
    summary = report["summary"]
    assert (summary["step_records"], summary["first_step"], summary["last_step"]) == (10, 1, 10), summary
    assert summary["final_loss"] == "NaN", summary


def test_hf_dicts_take_the_progress_bars_step(tmp_path):
    lines = []
    for s in range(1, 6):
        lines.append(f" {s * 10}%|##        | {s * 50}/250 [00:0{s}<00:04,  9.5it/s]")
        loss = "nan" if s == 4 else f"{2.0 - 0.1 * s:.2f}"
        lines.append(f"{{'loss': {loss}, 'grad_norm': 1.0, 'learning_rate': 5e-05, 'epoch': 0.{s}}}")
    path = tmp_path / "hf_bar.log"
    path.write_text("\n".join(lines) + "\n")
    report, _ = analyze_json(path)
    f = nan_finding(report)
    assert f["step"] == 200 and f["line"] == 8, f


def test_summary_says_the_final_loss_is_nan(tmp_path):
    """Item 6: a run whose last losses are NaN has a final loss of NaN, in
    the text report and the HTML report, not 'unknown'."""
    path = write_log(tmp_path, "ppocr", TEMPLATES["ppocr"], nan_total=True, nan_component=False)
    text = run(["trainwatch", "analyze", "--no-color", path]).stdout
    assert "final NaN" in text, text
    html = tmp_path / "r.html"
    run(["trainwatch", "analyze", "--html", html, path])
    row = [line for line in html.read_text().splitlines() if "loss first / best / final" in line]
    assert row and "/ NaN" in row[0] and "unknown" not in row[0], row
