"""A one-off memory spike is a spike, not growth (issue 27, item 4): a peak
counter that jumps at one huge batch and stays flat, or a reading that
jumps and comes back, is a memory_spike finding quoting the batch's input
shapes when the log describes them; steady growth stays memory_growth."""
import os
import subprocess

from conftest import BUILD, SOURCE, analyze_json


def rules(report):
    return {f["rule"]: f for f in report["findings"]}


def test_a_peak_counter_that_jumps_once_is_a_spike_with_its_shapes(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    if os.environ.get("TW_PY_PRELOAD"):  # the ASan build's extension: the runtime first, as test_python.py does
        env["LD_PRELOAD"] = os.environ["TW_PY_PRELOAD"]
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    subprocess.run(["/usr/bin/python3", str(SOURCE / "examples/python/train_numpy.py"), "--log-dir", str(tmp_path),
                    "--spike-at", "50"], check=True, env=env, capture_output=True, timeout=120)
    report, _ = analyze_json(tmp_path / "train.log")
    found = rules(report)
    assert "memory_growth" not in found, found["memory_growth"]["title"]
    f = found["memory_spike"]
    assert f["step"] == 50 and f["severity"] == "warning", f
    assert "stayed there" in f["title"]
    assert "input0=<ndarray float32 shape=[64000,16] size=1024000>" in f["evidence"]


def ppocr_log(path, mem_at, warning_at=None):
    lines = []
    for s in range(1, 41):
        lines.append(f"[2024/03/09 15:15:{s:02d}] ppocr INFO: epoch: [1/1], global_step: {s}, lr: 0.001, "
                     f"loss: {3 - 0.01 * s:.4f}, avg_reader_cost: 0.01 s, avg_batch_cost: 0.5 s, avg_samples: 8.0, "
                     f"ips: 16.0 samples/s, eta: 0:00:01, max_mem_reserved: {mem_at(s)} MB")
        if s == warning_at:
            lines.append(f"[2024/03/09 15:15:{s:02d}] ppocr WARNING: uncropped batch: image shape [8, 3, 2160, 3840] "
                         "is larger than the crop [8, 3, 640, 640]")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_spike_and_back_quotes_the_uncropped_batch(tmp_path):
    log = ppocr_log(tmp_path / "spike.log", lambda s: 21000 if s == 20 else 6000, warning_at=19)
    found = rules(analyze_json(log)[0])
    assert "memory_growth" not in found
    f = found["memory_spike"]
    assert f["step"] == 20 and f["line"] == 21
    assert "image shape [8, 3, 2160, 3840]" in f["evidence"] and "spike.log:20" in f["evidence"]


def test_a_jump_that_stays_without_shapes_is_still_a_spike(tmp_path):
    log = ppocr_log(tmp_path / "jump.log", lambda s: 6000 if s < 12 else 15000)
    found = rules(analyze_json(log)[0])
    assert "memory_growth" not in found
    f = found["memory_spike"]
    assert f["step"] == 12 and "describes the batch" not in f["evidence"]


def test_steady_growth_is_growth_not_a_spike(tmp_path):
    log = ppocr_log(tmp_path / "grow.log", lambda s: 6000 + 150 * s)
    found = rules(analyze_json(log)[0])
    assert "memory_growth" in found and "memory_spike" not in found


def test_flat_memory_has_neither(tmp_path):
    log = ppocr_log(tmp_path / "flat.log", lambda s: 6000 + (s % 3))
    found = rules(analyze_json(log)[0])
    assert "memory_growth" not in found and "memory_spike" not in found
