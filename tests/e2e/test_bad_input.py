"""Bad input is a first-class case: each gets one clear line naming the input,
a non-zero exit when nothing can be analysed, and the good lines of a
damaged file are still used."""
import gzip
import json
import random

from conftest import run

STEP = ("[2024/03/09 15:15:{s:02d}] ppocr INFO: epoch: [1/2], global_step: {n}, lr: 0.1, loss: {loss}, "
        "avg_reader_cost: 0.01 s, avg_batch_cost: 0.5 s, ips: 8.0 samples/s\n")


def good_lines(count=20, start=1):
    return "".join(STEP.format(s=i % 60, n=i * 10, loss=1.0 / i) for i in range(start, start + count))


def one_error_line(stderr, path):
    lines = [l for l in stderr.splitlines() if l]
    assert len(lines) == 1, stderr
    assert str(path) in lines[0]
    return lines[0]


def test_missing_file(tmp_path):
    path = tmp_path / "nope.log"
    result = run(["trainwatch", "analyze", path])
    assert result.returncode == 2
    assert "no such file or directory" in one_error_line(result.stderr, path)
    assert result.stdout == ""


def test_path_through_a_file(tmp_path):
    afile = tmp_path / "a.log"
    afile.write_text(good_lines())
    result = run(["trainwatch", "analyze", afile / "x"])
    assert result.returncode == 2
    one_error_line(result.stderr, afile / "x")


def test_directory(tmp_path):
    result = run(["trainwatch", "analyze", tmp_path])
    assert result.returncode == 2
    assert "is a directory" in one_error_line(result.stderr, tmp_path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.log"
    path.write_text("")
    result = run(["trainwatch", "analyze", path])
    assert result.returncode == 2
    assert "no training records recognised in 0 lines" in one_error_line(result.stderr, path)


def test_binary_garbage(tmp_path):
    path = tmp_path / "garbage.bin"
    path.write_bytes(random.Random(1).randbytes(64 * 1024))
    result = run(["trainwatch", "analyze", path])
    assert result.returncode == 2
    assert "looks binary" in one_error_line(result.stderr, path)


def test_ten_megabyte_line_is_cut_and_the_rest_parsed(tmp_path):
    path = tmp_path / "huge.log"
    path.write_text(good_lines(10) + "x" * (10 * 1024 * 1024) + "\n" + good_lines(10, start=11))
    report = run(["trainwatch", "analyze", "--json", path])
    assert report.returncode == 0, report.stderr
    assert "1 lines longer than" in report.stderr
    data = json.loads(report.stdout)
    assert data["summary"]["step_records"] == 20
    assert data["summary"]["last_step"] == 200


def test_invalid_utf8_keeps_json_valid(tmp_path):
    path = tmp_path / "bytes.log"
    path.write_bytes(good_lines(5).encode() + b"Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                     b"ValueError: bad \xff\xfe\xc3 bytes\n")
    result = run(["trainwatch", "analyze", "--json", path])
    data = json.loads(result.stdout)  # must be valid JSON (and UTF-8)
    crash = [f for f in data["findings"] if f["rule"] == "crash"]
    assert crash and "bad \ufffd\ufffd\ufffd bytes" in crash[0]["evidence"]
    assert result.returncode == 1


def test_truncated_last_line(tmp_path):
    path = tmp_path / "cut.log"
    text = good_lines(10)
    path.write_text(text + text.splitlines()[0][:60])
    data = json.loads(run(["trainwatch", "analyze", "--json", path]).stdout)
    assert data["summary"]["step_records"] == 10
    assert data["inputs"][0]["lines"] == 11


def test_mixed_formats_in_one_file(tmp_path):
    path = tmp_path / "mixed.log"
    path.write_text(good_lines(5) + "Epoch 1/2\nstep 10/20 - loss: 0.5 - 10ms/step\n"
                    "{'loss': 0.2, 'learning_rate': 0.001, 'epoch': 1.0}\n" + good_lines(5, start=6))
    data = json.loads(run(["trainwatch", "analyze", "--json", path]).stdout)
    assert data["inputs"][0]["format"] == "ppocr"
    # the counters of the three formats go back and forth: several launches,
    # every step record read all the same
    assert sum(la["step_records"] for la in data["launches"]) == 12


def test_truncated_gzip_reports_and_keeps_what_was_read(tmp_path):
    path = tmp_path / "run.log.gz"
    data = gzip.compress(good_lines(3000).encode())
    path.write_bytes(data[: len(data) // 2])
    result = run(["trainwatch", "analyze", "--json", path])
    assert result.returncode == 2
    assert "corrupt or truncated gzip data" in one_error_line(result.stderr, path)
    report = json.loads(result.stdout)
    assert 0 < report["summary"]["step_records"] < 3000
    assert report["inputs"][0]["error"] == "corrupt or truncated gzip data"


def test_one_bad_file_among_good_ones(tmp_path):
    good = tmp_path / "workerlog.0"
    good.write_text(good_lines(30))
    result = run(["trainwatch", "analyze", good, tmp_path / "workerlog.1"])
    assert result.returncode == 2
    assert "workerlog.1" in one_error_line(result.stderr, tmp_path / "workerlog.1")
    assert "Summary" in result.stdout


def test_wrong_forced_format_says_so(tmp_path):
    path = tmp_path / "a.log"
    path.write_text(good_lines(5))
    result = run(["trainwatch", "analyze", "--format", "hapi", path])
    assert result.returncode == 2
    assert "no training records recognised" in result.stderr
    result = run(["trainwatch", "analyze", "--format", "nosuch", path])
    assert result.returncode == 2
    assert "unknown format 'nosuch'" in result.stderr


def test_stdin(tmp_path):
    result = run(["trainwatch", "analyze", "--json", "-"], input=good_lines(12))
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert data["inputs"][0]["path"] == "<stdin>"
    assert data["summary"]["step_records"] == 12
