"""Paddle static-graph paddle.static.Print blocks read as values, so a
static-graph run gets the same loss analysis. The blocks are written here in
TensorFormatter's wording (paddle/fluid/operators/tensor_formatter.cc); no
committed log of them was found."""
from conftest import analyze_json, records


def block(variable, value, message=None):
    lines = [f"Variable: {variable}"]
    if message:
        lines.append(f"  - message: {message}")
    lines += ["  - lod: {}", "  - place: Place(gpu:0)", "  - shape: [1]", "  - layout: NCHW", "  - dtype: float",
              f"  - data: [{value}]"]
    return "\n".join(lines) + "\n"


def test_print_blocks_are_steps_with_their_loss(tmp_path):
    log = tmp_path / "static.log"
    losses = [2.3 / (1 + i * 0.1) for i in range(30)]
    log.write_text("".join(block("accuracy_0.tmp_0", 0.1 + i * 0.01, "acc") + block("mean_0.tmp_0", f"{loss:.5f}", "loss")
                           for i, loss in enumerate(losses)))
    recs, _ = records(log)
    steps = [r for r in recs if r["kind"] == "step"]
    assert len(steps) == 30
    assert steps[0]["line"] == 16 and steps[0]["step"] == 1 and steps[0]["loss"] == 2.3
    assert steps[0]["metrics"] == {"acc": 0.1}
    report, result = analyze_json(log)
    assert report["inputs"][0]["format"] == "static-print"
    assert report["summary"]["first_loss"] == 2.3 and report["summary"]["last_step"] == 30
    assert result.returncode == 0


def test_a_nan_loss_printed_by_a_block_is_found(tmp_path):
    log = tmp_path / "static.log"
    log.write_text("".join(block("mean_0.tmp_0", f"{2.0 - i * 0.05:.4f}", "train loss") for i in range(10))
                   + block("mean_0.tmp_0", "nan", "train loss"))
    report, result = analyze_json(log)
    (f,) = [f for f in report["findings"] if f["rule"] == "nan_loss"]
    assert f["step"] == 11 and f["line"] == 88
    assert result.returncode == 1
