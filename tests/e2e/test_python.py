"""The trainwatch Python package (python/, docs/python.md) end to end: every
script runs in a fresh /usr/bin/python3 importing the extension from the
build tree (under the ASan build with libasan preloaded), against real
files, a real Prometheus, a real Pushgateway, promtool, prometheus_client
and `trainwatch analyze`."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import BUILD, SOURCE, analyze_json
from servers import Prometheus, Pushgateway, free_port, http, wait_until

PYTHON = "/usr/bin/python3"


ECS_NAMES = {"@timestamp": "time", "log.level": "level", "log.logger": "logger", "log.origin.file.name": "file",
             "log.origin.function": "func", "log.origin.file.line": "line", "host.name": "host",
             "process.pid": "pid"}


def log_record(line):
    """One JSON line of the logging library (ECS names, trainwatch's own
    members under "trainwatch"), flattened to short names for the asserts."""
    rec = json.loads(line)
    flat = {ECS_NAMES.get(k, k): v for k, v in rec.items() if k not in ("trainwatch", "ecs.version")}
    assert rec["ecs.version"] and set(ECS_NAMES) - {"log.origin.file.name", "log.origin.function",
                                                    "log.origin.file.line"} <= set(rec), rec
    flat.update(rec.get("trainwatch", {}))
    return flat


def py_env(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(BUILD / "python")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "OMPI_COMM_WORLD_RANK",
              "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        env.pop(k, None)
    if os.environ.get("TW_PY_PRELOAD"):  # the ASan build: the runtime first, leaks of CPython itself not reported
        env["LD_PRELOAD"] = os.environ["TW_PY_PRELOAD"]
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    env.update(extra or {})
    return env


def py(code, cwd, extra_env=None, check=True, timeout=120, args=()):
    script = cwd / "script.py"
    script.write_text(textwrap.dedent(code))
    r = subprocess.run([PYTHON, str(script), *args], cwd=cwd, env=py_env(extra_env), capture_output=True, text=True,
                       timeout=timeout)
    if check:
        assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


@pytest.fixture(autouse=True)
def built():
    if not list((BUILD / "python" / "trainwatch").glob("_native*.so")):
        pytest.fail(f"{BUILD}/python/trainwatch/_native*.so is not built (run make build)")


# ---- logging ---------------------------------------------------------------------------------------


def test_rotation_keeps_the_newest_records_in_order(tmp_path):
    py("""
        import trainwatch
        log = trainwatch.setup_logger("trainer", log_file="train.log", max_bytes=4000, backup_count=3,
                                      console_level=None)
        for i in range(400):
            log.info("record %d", i, extra={"seq": i})
    """, tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("train.log"))
    assert names == ["train.log", "train.log.1", "train.log.2", "train.log.3"]
    seqs = []
    for name in ["train.log.3", "train.log.2", "train.log.1", "train.log"]:
        data = (tmp_path / name).read_bytes()
        assert len(data) <= 4000
        seqs += [int(m) for m in re.findall(rb" seq=(\d+)$", data, re.M)]
    assert seqs[-1] == 399
    assert seqs == list(range(seqs[0], 400)), "records lost or out of order across the rotated files"


def test_setup_twice_adds_no_handler_and_no_duplicate_line(tmp_path):
    r = py("""
        import trainwatch
        a = trainwatch.setup_logger("trainer", log_file="train.log", console_level=None)
        b = trainwatch.setup_logger("trainer", log_file="train.log", console_level=None)
        assert a is b
        print(len(a.handlers))
        a.info("once")
    """, tmp_path)
    assert r.stdout.strip() == "1"
    assert (tmp_path / "train.log").read_text().count("once") == 1


def test_ranks_from_the_environment(tmp_path):
    code = """
        import trainwatch
        log = trainwatch.setup_logger("trainer", log_file="train.log", json_file="train.jsonl", console_level="INFO")
        log.info("hello from my rank")
        log.warning("a warning")
    """
    outs = {}
    for rank in (0, 1):
        r = py(code, tmp_path, {"RANK": str(rank), "WORLD_SIZE": "2"})
        outs[rank] = r.stderr
    for rank in (0, 1):
        text = (tmp_path / f"train_rank{rank}.log").read_text()
        assert "hello from my rank" in text
        record = log_record((tmp_path / f"train_rank{rank}.jsonl").read_text().splitlines()[0])
        assert record["rank"] == rank and record["world_size"] == 2
    assert not (tmp_path / "train.log").exists()
    assert "hello from my rank" in outs[0] and "a warning" in outs[0]
    assert "hello from my rank" not in outs[1] and "a warning" in outs[1]


def test_redaction_in_text_and_json(tmp_path):
    py("""
        import trainwatch
        log = trainwatch.setup_logger("trainer", log_file="train.log", json_file="train.jsonl", console_level=None)
        log.info("fetching https://alice:hunter2@example.com/data with Bearer abc.def.ghi",
                 extra={"hf_token": "hf_secretvalue", "tokens_per_sec": 1234})
        trainwatch.get_logger("trainer").info("direct", db_password="pw123", user_email="bob@example.com")
    """, tmp_path)
    for name in ("train.log", "train.jsonl"):
        text = (tmp_path / name).read_text()
        for secret in ("hunter2", "abc.def.ghi", "hf_secretvalue", "pw123", "bob@example.com"):
            assert secret not in text, (name, secret)
        assert "1234" in text
    rec = log_record((tmp_path / "train.jsonl").read_text().splitlines()[0])
    assert rec["hf_token"] == "[REDACTED]" and rec["tokens_per_sec"] == 1234


def test_tracebacks_follow_text_and_are_one_json_field(tmp_path):
    py("""
        import trainwatch
        log = trainwatch.setup_logger("trainer", log_file="train.log", json_file="train.jsonl", console_level=None)
        def load_batch():
            raise KeyError("image_0042.jpg")
        try:
            load_batch()
        except KeyError:
            log.exception("batch failed", extra={"step": 7})
        log.info("where am I", stack_info=True)
    """, tmp_path)
    text = (tmp_path / "train.log").read_text()
    assert re.search(r"\| ERROR \| trainer \| <module>:\d+ \| batch failed step=7\nTraceback \(most recent call last\):\n"
                     r"(.*\n)*.*KeyError: 'image_0042.jpg'", text)
    lines = (tmp_path / "train.jsonl").read_text().splitlines()
    assert len(lines) == 2
    err, info = log_record(lines[0]), log_record(lines[1])
    assert err["message"] == "batch failed" and err["step"] == 7
    assert err["exception"].startswith("Traceback (most recent call last):")
    assert "in load_batch" in err["exception"] and err["exception"].endswith("KeyError: 'image_0042.jpg'")
    assert info["stack"].startswith("Stack (most recent call last):")
    # analyze sees the exception event in both encodings
    for name in ("train.log", "train.jsonl"):
        report, _ = analyze_json(str(tmp_path / name))
        assert report["summary"]["event_counts"]["exception"] == 1, name


def test_extra_fields_are_typed_and_summaries_replace_content(tmp_path):
    py("""
        import numpy as np, trainwatch
        log = trainwatch.setup_logger("trainer", log_file=None, json_file="train.jsonl", console_level=None)
        batch = np.zeros((32, 3, 224, 224), np.float32)
        log.info("batch", extra={"n": 3, "x": 2.5, "ok": True, "s": "text", "none": None, "big": 2**80,
                                 "np_int": np.int64(7), "np_float": np.float32(0.5), "lst": [1, 2],
                                 "batch": trainwatch.summary(batch), "meta": trainwatch.summary({"a": 1, "b": 2})})
    """, tmp_path)
    rec = log_record((tmp_path / "train.jsonl").read_text())
    assert rec["n"] == 3 and rec["x"] == 2.5 and rec["ok"] is True and rec["s"] == "text" and rec["none"] is None
    assert rec["big"] == pytest.approx(2.0**80) and rec["np_int"] == 7 and rec["np_float"] == 0.5
    assert rec["lst"] == "[1, 2]"
    assert rec["batch"] == {"type": "ndarray float32", "shape": [32, 3, 224, 224], "size": 4816896}
    assert rec["meta"] == {"type": "dict", "shape": [2], "size": 2}


def test_setup_loggers_direct_path_writes_what_loggings_path_writes(tmp_path):
    py("""
        import logging, trainwatch
        log = trainwatch.setup_logger("trainer", log_file="train.log", console_level=None, level="DEBUG")
        assert isinstance(log, logging.Logger) and isinstance(log, trainwatch.Logger)
        def emit_all():
            log.debug("debug %d", 1)
            log.info("Step %d loss=%s", 7, 2.5, extra={"lr": 0.1, "phase": "train"})
            log.warning("%(a)s and %(b)s", {"a": "mapping", "b": "args"})
            log.error("plain %s")
            log.critical("crit", extra={"n": None})
        emit_all()                                 # the direct path
        log.addFilter(lambda record: True)         # a filter: logging's own path
        emit_all()
        seen = []
        log.filters.clear()
        extra = logging.Handler()
        extra.emit = seen.append
        log.addHandler(extra)                      # another handler sees every record
        log.info("both %s", "handlers")
        assert [r.getMessage() for r in seen] == ["both handlers"]
    """, tmp_path)
    lines = [l.split(" | ", 1)[1] for l in (tmp_path / "train.log").read_text().splitlines()]
    assert len(lines) == 11
    direct, logging_path = lines[:5], lines[5:10]
    assert direct[1] == "INFO | trainer | emit_all:7 | Step 7 loss=2.5 lr=0.1 phase=train"
    assert direct[2].endswith("| mapping and args") and direct[3].endswith("| plain %s")
    assert direct[4].endswith("| crit n=None")
    assert [re.sub(r":\d+ \|", ":N |", l) for l in direct] == [re.sub(r":\d+ \|", ":N |", l) for l in logging_path]
    assert lines[10].startswith("INFO | trainer | <module>:") and lines[10].endswith("| both handlers")


def test_setup_logger_on_a_logger_made_before_and_two_loggers_apart(tmp_path):
    py("""
        import logging, trainwatch
        early = logging.getLogger("early")       # made by a library before setup_logger runs
        log = trainwatch.setup_logger("early", log_file="early.log", console_level=None)
        assert log is early and type(log) is trainwatch.Logger
        other = trainwatch.setup_logger("other", log_file="other.log", console_level=None)
        log.info("to early"); other.info("to other")
    """, tmp_path)
    early, other = (tmp_path / "early.log").read_text(), (tmp_path / "other.log").read_text()
    assert "| early | <module>:7 | to early" in early and "to other" not in early
    assert "| other | <module>:7 | to other" in other and "to early" not in other


def test_handler_on_any_logger_keeps_each_handlers_records_apart(tmp_path):
    py("""
        import logging, trainwatch
        a = logging.getLogger("app.a"); a.setLevel(logging.DEBUG); a.propagate = False
        b = logging.getLogger("app.b"); b.setLevel(logging.DEBUG); b.propagate = False
        a.addHandler(trainwatch.Handler(file="a.log"))
        b.addHandler(trainwatch.Handler(logging.WARNING, file="b.log", pattern="%(levelname)s %(name)s %(message)s"))
        a.debug("to a"); b.info("below b's level"); b.warning("to b")
        logging.getLogger("app.a.child").info("child of a")
    """, tmp_path)
    a, b = (tmp_path / "a.log").read_text(), (tmp_path / "b.log").read_text()
    assert "| DEBUG | app.a | <module>:" in a and "to a" in a and "| app.a.child |" in a and "to b" not in a
    assert b == "WARNING app.b to b\n"


def test_handler_takes_the_arguments_of_logging_file_handlers(tmp_path):
    """Handler("h.log") used to raise "unknown level": its first argument was
    the level. It now takes FileHandler/RotatingFileHandler's arguments; the
    old level-first form still works, with a DeprecationWarning."""
    (tmp_path / "w.log").write_text("an old line\n")
    r = py("""
        import logging, warnings, trainwatch
        warnings.simplefilter("always")
        log = logging.getLogger("fh"); log.setLevel(logging.DEBUG); log.propagate = False
        log.addHandler(trainwatch.Handler("h.log"))
        log.addHandler(trainwatch.Handler("r.log", "a", 300, 2, "utf-8"))
        log.addHandler(trainwatch.Handler("w.log", mode="w", maxBytes=10_000, backupCount=1, encoding="UTF-8"))
        log.addHandler(trainwatch.Handler(logging.WARNING, file="old.log"))
        for i in range(12):
            log.info("line %d of the rotating file", i)
        log.warning("to every handler")
        for bad in (dict(mode="r+"), dict(encoding="latin-1")):
            try:
                trainwatch.Handler("x.log", **bad)
            except ValueError as e:
                print("ValueError:", e)
        logging.shutdown()
    """, tmp_path)
    h = (tmp_path / "h.log").read_text()
    assert "line 0 of the rotating file" in h and "to every handler" in h
    assert "an old line" not in (tmp_path / "w.log").read_text()  # mode="w" truncated it
    assert (tmp_path / "r.log.1").exists() and (tmp_path / "r.log.2").exists()  # maxBytes=300, backupCount=2
    assert not (tmp_path / "r.log.3").exists()
    old = (tmp_path / "old.log").read_text()
    assert "to every handler" in old and "rotating file" not in old  # the level still applies
    assert r.stderr.count("DeprecationWarning") == 1 and "pass level=... instead" in r.stderr
    assert "ValueError: trainwatch.Handler: mode 'r+'" in r.stdout
    assert "ValueError: trainwatch.Handler: encoding 'latin-1': files are written in UTF-8" in r.stdout


def test_setup_logger_creates_missing_directories_and_names_the_expanded_path(tmp_path):
    """setup_logger(log_file="logs/train_rank_{rank}.log") failed when logs/
    was absent, with the template unexpanded in the message."""
    (tmp_path / "a_file").write_text("")
    r = py("""
        import trainwatch
        log = trainwatch.setup_logger(name="mk", log_file="logs/deep/train_rank_{rank}.log", console_level=None)
        log.info("into a new directory")
        try:
            trainwatch.setup_logger(name="bad", log_file="a_file/train_rank_{rank}.log", console_level=None)
        except OSError as e:
            print("OSError:", e, "|", e.filename)
    """, tmp_path, extra_env={"RANK": "3", "WORLD_SIZE": "4"})
    assert "into a new directory" in (tmp_path / "logs" / "deep" / "train_rank_3.log").read_text()
    assert "OSError: [Errno 20] Not a directory: 'a_file/train_rank_3.log' | a_file/train_rank_3.log" in r.stdout
    assert "{rank}" not in r.stdout


def test_handler_on_a_plain_logger_honours_filters_levels_extra_and_tracebacks(tmp_path):
    # Without filters the handler's handle is the C emit itself; with one,
    # the filter runs first: both ways on a plain logging.Logger.
    py("""
        import enum, logging, trainwatch
        log = logging.getLogger("plain"); log.setLevel(logging.DEBUG); log.propagate = False
        h = trainwatch.Handler(logging.INFO, file="plain.log", json_file="plain.jsonl")
        log.addHandler(h)
        class Mode(enum.IntEnum):
            TRAIN = 3
        log.debug("below the handler's level")
        log.info("no filter %d", 1, extra={"n": 3, "x": 2.5, "ok": True, "none": None, "mode": Mode.TRAIN})
        def drop(record):
            return not getattr(record, "drop", False)
        def tag(record):
            record.tagged = "yes"                   # a filter may add a field
            return True
        h.addFilter(drop); h.addFilter(tag)
        log.info("kept %s", "by the filter")
        log.info("dropped", extra={"drop": True})
        try:
            {}["missing"]
        except KeyError:
            log.error("failed", exc_info=True)
        h.removeFilter(drop); h.removeFilter(tag)
        log.info("after", extra={"drop": True})    # no filter left: written, drop is a field
    """, tmp_path)
    text = (tmp_path / "plain.log").read_text()
    assert "below the handler's level" not in text and "dropped" not in text
    assert re.search(r"\| INFO \| plain \| <module>:\d+ \| no filter 1 n=3 x=2.5 ok=true none=None mode=3\n", text), text
    assert "| kept by the filter tagged=yes\n" in text
    assert re.search(r"\| ERROR \| plain \| <module>:\d+ \| failed tagged=yes\nTraceback \(most recent call last\):\n"
                     r"(.*\n)*KeyError: 'missing'\n", text), text
    assert text.endswith("| after drop=true\n")
    recs = [log_record(l) for l in (tmp_path / "plain.jsonl").read_text().splitlines()]
    assert [r["message"] for r in recs] == ["no filter 1", "kept by the filter", "failed", "after"]
    first = recs[0]
    assert first["n"] == 3 and first["x"] == 2.5 and first["ok"] is True and first["none"] is None
    assert first["mode"] == 3 and first["level"] == "INFO" and first["logger"] == "plain"
    assert recs[2]["exception"].startswith("Traceback") and recs[2]["exception"].endswith("KeyError: 'missing'")
    assert recs[3]["drop"] is True


def test_messages_are_what_percent_formatting_makes(tmp_path):
    # The common conversions (%s of str/int/float, %d, %i, %%) are formatted
    # in C without a str object; everything else by Python's own %. Both
    # must give msg % args exactly, through trainwatch.Handler on a plain
    # logger and through setup_logger's direct path; a bad format is
    # dropped and counted, as before.
    r = py("""
        import json, logging, trainwatch
        class Sub(str):
            pass
        big = 2**63
        cases = [
            ("plain", ()), ("%s", ("text",)), ("%s|%s|%s", ("a", 7, 2.134)), ("%d and %i", (-42, 0)),
            ("%s", (-9223372036854775808,)), ("%d", (9223372036854775807,)), ("%s %d", (big, -big)),
            ("%s", (2**200,)), ("%s %s %s %s", (float("inf"), float("-inf"), float("nan"), -0.0)),
            ("%s %s %s %s", (1e16, 1e-5, 0.1, 123456789.0)), ("%s %s", (1.0, 2.5e-300)),
            ("100%% done %s%%", (3,)), ("%s", (True,)), ("%d", (True,)), ("%d", (2.7,)), ("%s", (None,)),
            ("%s", ([1, 2],)), ("%s", (Sub("sub"),)), ("%r", ("r",)), ("%5d|%-4s|%.2f", (3, "x", 2.0)),
            ("%(a)s and %(b)d", ({"a": "map", "b": 2},)), ("%s", ({"a": 1},)), ("%s", ({},)),
            ("été %s ü", ("ñ",)), ("%s", ("x" * 1500,)), ("%s" * 300, tuple(range(300))),
            ("no conversion %%", (1,)), ("%s %s", ("one",)), ("trailing %", ("a",)), ("%y", (1,)),
            ("%d", ("not a number",)),
        ]
        expected = []
        for msg, args in cases:
            a = args[0] if len(args) == 1 and isinstance(args[0], dict) and args[0] else args
            try:
                expected.append(msg % a if args else msg)
            except (TypeError, ValueError):
                expected.append(None)
        plain = logging.getLogger("plain"); plain.propagate = False; plain.setLevel(logging.INFO)
        plain.addHandler(trainwatch.Handler(json_file="plain.jsonl"))
        direct = trainwatch.setup_logger("direct", log_file=None, json_file="direct.jsonl", console_level=None)
        for msg, args in cases:
            plain.info(msg, *args)
            direct.info(msg, *args)
        json.dump(expected, open("expected.json", "w"))
        print(trainwatch.REGISTRY.get_sample_value("trainwatch_python_log_errors_total"))
    """, tmp_path)
    expected = json.loads((tmp_path / "expected.json").read_text())
    errors = sum(e is None for e in expected)
    assert errors == 5 and r.stdout.strip() == str(float(2 * errors))
    for name in ("plain.jsonl", "direct.jsonl"):
        got = [log_record(l)["message"] for l in (tmp_path / name).read_text().splitlines()]
        assert got == [e for e in expected if e is not None], name


def test_direct_logger_fields_and_call_sites(tmp_path):
    # Typed fields of every kind, and the file, function and line of each
    # call: more call sites than the cache has slots, two functions, a
    # second file.
    (tmp_path / "other.py").write_text("def from_other(log):\n    log.warning('other file')\n")
    py("""
        import enum, trainwatch
        from other import from_other
        trainwatch.setup_logger("trainer", log_file=None, json_file="direct.jsonl", console_level=None)
        log = trainwatch.get_logger("trainer")
        class Mode(enum.IntEnum):
            TRAIN = 3
        class Ratio(float):
            pass
        log.info("types", i=7, f=2.5, t=True, fa=False, none=None, s="text", big=2**80, neg=-3, mode=Mode.TRAIN,
                 ratio=Ratio(0.25), lst=[1, 2])
        def one():
            log.info("one")
        def two():
            log.info("two")
        for i in range(3):
            one(); two()
        for i in range(40):                          # 40 code objects, each twice
            for _ in range(2):
                eval(compile("\\n" * (100 + i) + "log.info('site', i=" + str(i) + ")", "sites.py", "exec"))
        many = compile("\\n" * 200 + "".join(f"log.info('many', i={i})\\n" for i in range(40)), "many.py", "exec")
        exec(many); exec(many)                       # one code object, 40 call sites
        from_other(log)
        log.info("end")
    """, tmp_path)
    recs = [log_record(l) for l in (tmp_path / "direct.jsonl").read_text().splitlines()]
    t = recs[0]
    assert t["i"] == 7 and t["f"] == 2.5 and t["t"] is True and t["fa"] is False and t["none"] is None
    assert t["s"] == "text" and t["big"] == pytest.approx(2.0**80) and t["neg"] == -3 and t["mode"] == 3
    assert t["ratio"] == 0.25 and t["lst"] == "[1, 2]"
    assert t["func"] == "<module>" and t["file"].endswith("script.py") and t["line"] == 10
    calls = recs[1:7]
    assert [(r["message"], r["func"], r["line"]) for r in calls] == [("one", "one", 13), ("two", "two", 15)] * 3
    sites = recs[7:87]
    assert [(r["i"], r["line"], r["file"]) for r in sites] == [(i, 101 + i, "sites.py") for i in range(40) for _ in (0, 1)]
    assert [r["func"] for r in sites] == ["<module>"] * 80
    many = recs[87:167]
    assert [(r["i"], r["line"], r["file"]) for r in many] == [(i, 201 + i, "many.py") for i in range(40)] * 2
    recs = recs[:87] + recs[167:]
    last = recs[87]
    assert (last["message"], last["func"], last["line"], last["level"]) == ("other file", "from_other", 2, "WARNING")
    assert last["file"].endswith("other.py") and len(recs) == 89
    assert (recs[88]["message"], recs[88]["func"], recs[88]["line"]) == ("end", "<module>", 24)


def test_logging_errors_never_raise_and_are_counted(tmp_path):
    r = py("""
        import trainwatch
        log = trainwatch.setup_logger("trainer", log_file="train.log", console_level=None)
        log.info("%d steps", "not a number")          # logging's own handler prints a traceback each time
        log.info("%s and %s", "one")
        log.info("fine")
        class Bad:
            def __str__(self): raise RuntimeError("no str")
        trainwatch.get_logger("trainer").info("direct", field=Bad())
        print(trainwatch.REGISTRY.get_sample_value("trainwatch_python_log_errors_total"))
    """, tmp_path)
    assert r.stdout.strip() == "3.0"
    assert r.stderr.count("trainwatch: a log record was dropped") == 1, r.stderr
    assert "fine" in (tmp_path / "train.log").read_text()


def test_log_environment_adds_python_and_numpy(tmp_path):
    py("""
        import numpy, trainwatch
        log = trainwatch.setup_logger("trainer", log_file=None, json_file="train.jsonl", console_level=None)
        trainwatch.log_environment(log)
    """, tmp_path)
    rec = log_record((tmp_path / "train.jsonl").read_text())
    assert rec["message"] == "environment" and rec["logger"] == "trainer"
    assert rec["func"] == "<module>" and rec["file"].endswith("script.py") and rec["line"] == 4
    assert rec["python"] == "%d.%d.%d" % sys.version_info[:3]
    import numpy
    assert rec["numpy"] == numpy.__version__
    assert rec["pid"] > 0 and "cpus" in rec and "argv" in rec


def test_json_and_text_logs_read_by_analyze_with_steps_times_and_data_share(tmp_path):
    py("""
        import time, trainwatch
        log = trainwatch.setup_logger("trainer", log_file="train.log", json_file="train.jsonl", console_level=None)
        def loader():
            for i in range(30):
                time.sleep(0.03)          # a slow reader: at least 30 ms per batch
                yield [i] * 8
        timer = trainwatch.StepTimer(log, log_freq=5, batch_size=8)
        for batch in timer.wrap(loader()):
            sum(batch)                    # next to no compute
            timer.update(loss=1.0 / (1 + timer.recorder.step), lr=0.1)
    """, tmp_path)
    reports = [analyze_json(str(tmp_path / name))[0] for name in ("train.log", "train.jsonl")]
    for report in reports:
        s = report["summary"]
        assert s["step_records"] == 6 and s["first_step"] == 5 and s["last_step"] == 30
        assert s["data_share"] > 0.5, s["data_share"]  # a bound the sleeps guarantee, not a timing
        assert s["step_time_p50"] >= 0.03
        assert s["final_lr"] == 0.1
    text, js = (dict(r["summary"]) for r in reports)
    # the two encodings' timestamps are parsed apart: durations may differ in float rounding
    assert text.pop("duration_seconds") == pytest.approx(js.pop("duration_seconds"), abs=0.002)
    assert text == js


# ---- metrics ---------------------------------------------------------------------------------------

SIDE_BY_SIDE = """
import sys
from {module} import CollectorRegistry, Counter, Gauge, Histogram, Enum, Info, generate_latest, write_to_textfile
reg = CollectorRegistry()
requests = Counter("app_requests", "Requests.", ["method", "code"], registry=reg)
requests.labels("get", "200").inc()
requests.labels(method="post", code="500").inc(2.5)
requests.labels("get", "200").inc(3)
total = Counter("app_batches_total", "Batches.", registry=reg)
total.inc(7)
temp = Gauge("app_temperature", "Temperature.", namespace="rig", unit="celsius", registry=reg)
temp.set(21.5); temp.inc(2); temp.dec(0.25)
queue = Gauge("app_queue", "Queue.", ["rank"], registry=reg)
for r in range(3):
    queue.labels(str(r)).set(r * 10)
queue.labels(1).inc()
lat = Histogram("app_latency_seconds", "Latency.", ["route"], registry=reg, buckets=[0.1, 0.5, 1, 5])
for v in [0.05, 0.2, 0.7, 3, 10, 0.5]:
    lat.labels("/a").observe(v)
lat.labels(route="/b").observe(0.01)
dflt = Histogram("app_default_buckets", "Default buckets.", registry=reg)
dflt.observe(0.3)
Enum("app_phase", "Phase.", states=["warmup", "train", "eval"], registry=reg).state("train")
Info("app_build", "Build.", registry=reg).info({{"version": "1.2", "commit": "abc"}})
with_escape = Gauge("app_escape", 'Help with \\\\ and "quotes".', ["path"], registry=reg)
with_escape.labels('a"b\\\\c\\nd').set(1)
sys.stdout.buffer.write(generate_latest(reg))
write_to_textfile("{module}.prom", reg)
"""


def samples_of(text):
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for fam in text_string_to_metric_families(text):
        # prometheus_client 0.16 writes NAME_created as gauges of their own in the text format; every
        # trainwatch registry has trainwatch_dropped_series_total (docs/python.md lists both)
        if fam.name.endswith("_created") or fam.name.startswith("trainwatch_"):
            continue
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            out[(s.name, tuple(sorted(s.labels.items())))] = (fam.type, s.value)
        out[("TYPE", fam.name)] = (fam.type, fam.documentation)
    return out


def test_same_script_with_prometheus_client_and_trainwatch(tmp_path):
    ours = py(SIDE_BY_SIDE.format(module="trainwatch"), tmp_path).stdout
    theirs = py(SIDE_BY_SIDE.format(module="prometheus_client"), tmp_path).stdout
    a, b = samples_of(ours), samples_of(theirs)
    assert samples_of((tmp_path / "trainwatch.prom").read_text()) == a
    assert samples_of((tmp_path / "prometheus_client.prom").read_text()) == b
    assert set(a) == set(b), (set(a) ^ set(b))
    for key in b:
        assert a[key] == b[key], key
    check = subprocess.run(["promtool", "check", "metrics"], input=ours.encode(), capture_output=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_default_registry_passes_promtool_and_has_process_metrics(tmp_path):
    r = py("""
        import sys, trainwatch
        trainwatch.setup_logger("trainer", log_file="train.log", console_level=None)
        t = trainwatch.StepTimer("trainer", log_freq=2, batch_size=4)
        for b in t.wrap(range(4)):
            t.update(loss=0.5)
        sys.stdout.buffer.write(trainwatch.generate_latest())
    """, tmp_path)
    check = subprocess.run(["promtool", "check", "metrics"], input=r.stdout.encode(), capture_output=True)
    assert check.returncode == 0, check.stdout + check.stderr
    for name in ("process_resident_memory_bytes", "trainwatch_train_loss{", "trainwatch_step_duration_seconds_bucket{",
                 "trainwatch_data_wait_seconds_count{", "trainwatch_python_log_errors_total 0"):
        assert name in r.stdout, name
    assert re.search(r'^trainwatch_train_step\{run="script",rank="0"\} 4$', r.stdout, re.M), r.stdout


def test_validation_errors_are_python_exceptions(tmp_path):
    r = py("""
        import trainwatch as tw
        reg = tw.CollectorRegistry()
        def err(f):
            try:
                f()
            except Exception as e:
                return type(e).__name__
            return "no error"
        c = tw.Counter("ok_count", "doc", ["a"], registry=reg, series_limit=3)
        print(err(lambda: tw.Gauge("bad-name", "doc", registry=reg)))
        print(err(lambda: tw.Gauge("g", "doc", ["__reserved"], registry=reg)))
        print(err(lambda: tw.Counter("ok_count", "doc", registry=reg)))
        print(err(lambda: c.labels("1", "2")))
        print(err(lambda: c.labels(b="1")))
        print(err(lambda: c.inc()))
        print(err(lambda: c.labels("x").inc(-1)))
        print(err(lambda: tw.Gauge("nine", "doc", list("abcdefghi"), registry=reg)))  # over the label limit
        print(err(lambda: tw.Histogram("h", "doc", registry=reg, buckets=[2, 1])))
        print(err(lambda: tw.Histogram("h2", "doc", ["le"], registry=reg)))
        for v in "xyz":
            c.labels(v).inc()
        print(err(lambda: c.labels("one too many")))
        print(err(lambda: c.labels("éééé\\x00")))  # the NUL past as many bytes as characters
        print(reg.get_sample_value("trainwatch_dropped_series_total"))
        print(issubclass(tw.CardinalityError, ValueError))
    """, tmp_path)
    assert r.stdout.split() == ["ValueError", "ValueError", "ValueError", "ValueError", "ValueError", "ValueError",
                                "ValueError", "CardinalityError", "ValueError", "ValueError", "CardinalityError",
                                "ValueError", "1.0", "True"]


def test_start_http_server_scraped_by_a_real_prometheus(procs, tmp_path):
    port = free_port()
    script = tmp_path / "serve.py"
    script.write_text(textwrap.dedent(f"""
        import sys, trainwatch
        server = trainwatch.start_http_server({port})
        q = trainwatch.Gauge("app_queue_depth", "Queue depth.", ["rank"])
        q.labels("0").set(42)
        trainwatch.Counter("app_steps", "Steps.").inc(7)
        h = trainwatch.Histogram("app_step_seconds", "Step time.")
        for v in (0.02, 0.2, 2.0):
            h.observe(v)
        print(server.port, flush=True)
        sys.stdin.read()
        server.stop()
    """))
    proc = subprocess.Popen([PYTHON, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=py_env(),
                            text=True)
    try:
        assert int(proc.stdout.readline()) == port
        status, headers, body = http(f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and b"app_queue_depth{rank=\"0\"} 42" in body
        prom = procs(Prometheus, str(tmp_path), [{"job_name": "py", "static_configs": [
            {"targets": [f"127.0.0.1:{port}"]}]}])
        assert prom.wait_for('app_queue_depth{rank="0"}')[0]["value"][1] == "42"
        assert prom.wait_for("app_steps_total")[0]["value"][1] == "7"
        assert prom.wait_for('app_step_seconds_bucket{le="0.25"}')[0]["value"][1] == "2"
        assert prom.wait_for("app_step_seconds_count")[0]["value"][1] == "3"
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert proc.returncode == 0


def test_metrics_from_threads_and_a_forked_child(tmp_path):
    r = py("""
        import os, sys, threading, trainwatch as tw
        server = tw.start_http_server(0)
        c = tw.Counter("thr_steps", "d", ["worker"])
        shared = c.labels("all")
        def work(i):
            mine = c.labels(str(i % 2))
            for _ in range(20000):
                shared.inc()
                mine.inc(0.5)
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
        pid = os.fork()
        if pid == 0:                 # a DataLoader worker: updates, then exits normally
            shared.inc(5)
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        v = tw.REGISTRY.get_sample_value
        print(status, v("thr_steps_total", {"worker": "all"}), v("thr_steps_total", {"worker": "0"}))
        server.stop()
    """, tmp_path, timeout=120)
    assert r.stdout.split() == ["0", "80000.0", "20000.0"]


def test_start_http_server_on_a_taken_port_raises(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        r = py(f"""
            import trainwatch
            try:
                trainwatch.start_http_server({taken})
            except OSError as e:
                print("OSError", e)
        """, tmp_path)
    assert r.stdout.startswith("OSError") and f"127.0.0.1:{taken}" in r.stdout


def group(pg):
    """The app_* samples the Pushgateway holds for job pyjob, run a/b."""
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for fam in text_string_to_metric_families(pg.metrics()):
        for s in fam.samples:
            if s.name.startswith("app_") and s.labels.get("job") == "pyjob" and s.labels.get("run") == "a/b":
                out[s.name] = s.value
    return out


def test_start_http_server_with_basic_auth_from_a_web_config(tmp_path):
    import base64
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt  # Debian's Python 3.11 still ships it; libxcrypt does bcrypt
    hashed = crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16))
    (tmp_path / "web.yml").write_text(f"basic_auth_users:\n  alice: '{hashed}'\n")
    (tmp_path / "bad.yml").write_text("basic_auth_users:\n  bob: plaintext\n")
    port = free_port()
    script = tmp_path / "serve.py"
    script.write_text(textwrap.dedent(f"""
        import sys, trainwatch
        try:
            trainwatch.start_http_server({free_port()}, web_config_file="bad.yml")
        except ValueError as e:
            print("refused:", e, flush=True)
        server = trainwatch.start_http_server({port}, web_config_file="web.yml")
        trainwatch.Gauge("app_secret_gauge", "x").set(1)
        print(server.port, flush=True)
        sys.stdin.read()
    """))
    proc = subprocess.Popen([PYTHON, str(script)], cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=py_env(), text=True)
    try:
        refused = proc.stdout.readline()
        assert refused.startswith("refused:") and "bad.yml" in refused and "bcrypt" in refused
        assert int(proc.stdout.readline()) == port
        url = f"http://127.0.0.1:{port}/metrics"
        assert http(url)[0] == 401
        good = "Basic " + base64.b64encode(b"alice:s3cret").decode()
        status, _, body = http(url, {"Authorization": good})
        assert status == 200 and b"app_secret_gauge 1" in body
        wrong = "Basic " + base64.b64encode(b"alice:guess").decode()
        assert http(url, {"Authorization": wrong})[0] == 401
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert proc.returncode == 0


def test_time_count_exceptions_and_in_progress(tmp_path):
    r = py("""
        import time, trainwatch as tw
        reg = tw.CollectorRegistry()
        h = tw.Histogram("t_seconds", "d", registry=reg, buckets=[0.001, 1])
        g = tw.Gauge("t_last_seconds", "d", registry=reg)
        c = tw.Counter("t_errors", "d", registry=reg)
        busy = tw.Gauge("t_busy", "d", registry=reg)
        @h.time()
        def slow():
            time.sleep(0.01)
        slow(); slow()
        with g.time():
            time.sleep(0.01)
        @c.count_exceptions(ValueError)
        def fails(kind):
            raise kind("x")
        for kind in (ValueError, KeyError, ValueError):
            try:
                fails(kind)
            except Exception:
                pass
        with busy.track_inprogress():
            inside = reg.get_sample_value("t_busy")
        stamp = tw.Gauge("t_stamp", "d", registry=reg)
        stamp.set_to_current_time()
        v = reg.get_sample_value
        print(v("t_seconds_count"), v("t_seconds_bucket", {"le": "0.001"}), v("t_seconds_bucket", {"le": "1.0"}),
              v("t_last_seconds") >= 0.01, v("t_errors_total"), inside, v("t_busy"),
              abs(v("t_stamp") - time.time()) < 60)
    """, tmp_path)
    assert r.stdout.split() == ["2.0", "0.0", "2.0", "True", "2.0", "1.0", "0.0", "True"]


def test_pushgateway_round_trip(procs, tmp_path):
    pg = procs(Pushgateway, str(tmp_path))
    script = tmp_path / "push.py"
    script.write_text(textwrap.dedent(f"""
        import trainwatch as tw
        reg = tw.CollectorRegistry()
        tw.Gauge("app_final_loss", "Final loss.", registry=reg).set(0.125)
        tw.Counter("app_epochs", "Epochs.", registry=reg).inc(3)
        tw.push_to_gateway("127.0.0.1:{pg.port}", job="pyjob", registry=reg, grouping_key={{"run": "a/b"}})
        print("pushed", flush=True)
        input()
        reg2 = tw.CollectorRegistry()
        tw.Gauge("app_extra", "Extra.", registry=reg2).set(5)
        tw.pushadd_to_gateway("http://127.0.0.1:{pg.port}", job="pyjob", registry=reg2, grouping_key={{"run": "a/b"}})
        print("added", flush=True)
        input()
        tw.push_to_gateway("127.0.0.1:{pg.port}", job="pyjob", registry=reg2, grouping_key={{"run": "a/b"}})
        print("replaced", flush=True)
        input()
        tw.delete_from_gateway("127.0.0.1:{pg.port}", job="pyjob", grouping_key={{"run": "a/b"}})
        print("deleted", flush=True)
        try:
            tw.push_to_gateway("127.0.0.1:{free_port()}", job="pyjob", registry=reg, timeout=0.5)
        except tw.PushError as e:
            print("PushError", e, flush=True)
    """))
    proc = subprocess.Popen([PYTHON, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=py_env(),
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "pushed"
        assert group(pg) == {"app_final_loss": 0.125, "app_epochs_total": 3}
        proc.stdin.write("\n"); proc.stdin.flush()
        assert proc.stdout.readline().strip() == "added"
        assert group(pg) == {"app_final_loss": 0.125, "app_epochs_total": 3, "app_extra": 5}
        proc.stdin.write("\n"); proc.stdin.flush()
        assert proc.stdout.readline().strip() == "replaced"
        assert group(pg) == {"app_extra": 5}
        proc.stdin.write("\n"); proc.stdin.flush()
        assert proc.stdout.readline().strip() == "deleted"
        assert group(pg) == {}
        line = proc.stdout.readline()
        assert line.startswith("PushError") and "127.0.0.1" in line
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert proc.returncode == 0


# ---- training hooks ----------------------------------------------------------------------------------


def test_numpy_example_with_the_callback_read_back_by_analyze(tmp_path):
    py(open(SOURCE / "examples/python/train_numpy.py").read(), tmp_path,
       args=["--log-dir", "run", "--json", "--epochs", "2", "--steps-per-epoch", "30", "--log-freq", "5",
             "--slow-reader", "3"])
    for name in ("train.log", "train.jsonl"):
        report, _ = analyze_json(str(tmp_path / "run" / name))
        s = report["summary"]
        assert s["step_records"] == 12 and s["first_step"] == 5 and s["last_step"] == 60, s
        assert s["last_epoch"] == 2 and s["eval_records"] == 2
        assert s["final_lr"] == 0.5 and s["final_loss"] < s["first_loss"]
        assert s["data_share"] > 0.5, s["data_share"]
        assert "data_loading_bound" in [f["rule"] for f in report["findings"] if f["severity"] == "warning"]
    text = (tmp_path / "run" / "train.log").read_text()
    assert re.search(r"\| INFO \| trainer \| main:\d+ \| environment host=.* numpy=", text)


def test_nan_and_memory_spike_reported_at_their_step(tmp_path):
    r = py(open(SOURCE / "examples/python/train_numpy.py").read(), tmp_path,
           args=["--log-dir", "run", "--epochs", "2", "--steps-per-epoch", "20", "--nan-at", "27", "--spike-at",
                 "13"])
    text = (tmp_path / "run" / "train.log").read_text()
    spike = [l for l in text.splitlines() if "memory spike" in l]
    assert len(spike) == 1 and "memory spike at step 13:" in spike[0]
    assert "input0=<ndarray float32 shape=[64000,16] size=1024000>" in spike[0]
    nan = [l for l in text.splitlines() if "| ERROR |" in l]
    assert len(nan) == 1 and "non-finite loss at step 27: nan; the 5 losses before it: " in nan[0]
    assert "memory spike" in r.stderr and "non-finite loss" in r.stderr  # the console takes WARNING and up
    report, _ = analyze_json(str(tmp_path / "run" / "train.log"))
    nan_findings = [f for f in report["findings"] if f["rule"] == "nan_loss"]
    assert nan_findings and nan_findings[0]["step"] == 27


def test_callback_logs_the_exception_that_ends_training(tmp_path):
    r = py(open(SOURCE / "examples/python/train_numpy.py").read(), tmp_path,
           args=["--log-dir", "run", "--json", "--epochs", "1", "--steps-per-epoch", "20", "--fail-at", "9"],
           check=False)
    assert r.returncode == 1 and "RuntimeError: injected failure at step 9" in r.stderr
    last = log_record((tmp_path / "run" / "train.jsonl").read_text().splitlines()[-1])
    assert last["level"] == "ERROR" and last["message"].startswith("training failed at step 8: RuntimeError")
    assert last["exception"].endswith("RuntimeError: injected failure at step 9")
    report, _ = analyze_json(str(tmp_path / "run" / "train.jsonl"))
    assert report["summary"]["event_counts"]["exception"] == 1


def test_a_failing_part_of_a_hook_is_dropped_counted_and_said_once_in_the_log(tmp_path):
    """A memory_fn that returns None fails on every step: its part is left
    out and counted, said once through the logger (so in the log file), and
    every step record is still written (before: one stderr line and no step
    record after the first failure; analyze then found no steps)."""
    r = py("""
        import trainwatch
        reg = trainwatch.CollectorRegistry()
        log = trainwatch.setup_logger("trainer", log_file="train.log", console_level=None)
        cb = trainwatch.PaddleCallback(log, log_freq=5, run="hk", registry=reg, memory_fn=lambda: None)
        cb.on_train_begin()
        cb.on_epoch_begin(0)
        for step in range(20):
            cb.on_train_batch_begin(step)
            logs = {"loss": [2.0 - step * 0.05], "batch_size": 8}
            if step == 7:
                logs["loss"] = "not a number"       # one bad loss: that step's loss is dropped
            cb.on_train_batch_end(step, logs)
        cb.on_train_batch_end(20, logs=42)          # logs that are not a dict: counted, nothing raised
        cb.on_train_end()
        for hook in ("memory", "loss", "on_train_batch_end"):
            print(hook, reg.get_sample_value("trainwatch_hook_errors_total", {"run": "hk", "rank": "0", "hook": hook}))
        print("steps", reg.get_sample_value("trainwatch_train_step", {"run": "hk", "rank": "0"}))
    """, tmp_path)
    got = dict(line.split() for line in r.stdout.splitlines())
    assert got == {"memory": "20.0", "loss": "1.0", "on_train_batch_end": "1.0", "steps": "20.0"}, r.stdout
    text = (tmp_path / "train.log").read_text()
    said = [l for l in text.splitlines() if "part of the training hook failed" in l]
    assert len(said) == 3, said  # once per part, not per step
    assert any("'memory' part" in l and "TypeError" in l and 'hook="memory"' in l for l in said)
    assert "| WARNING |" in said[0]
    assert len(re.findall(r"\| Step \d+", text)) == 4
    assert "failed" not in r.stderr  # said in the log, not only on stderr
    report, _ = analyze_json(str(tmp_path / "train.log"))
    assert report["summary"]["step_records"] == 4 and report["summary"]["last_step"] == 20
    assert not [f for f in report["findings"] if f["rule"] in ("oom", "crash")]


def test_step_timer_context_manager_and_metrics(tmp_path):
    r = py("""
        import time, trainwatch
        reg = trainwatch.CollectorRegistry()
        log = trainwatch.setup_logger("trainer", log_file="train.log", console_level=None)
        timer = trainwatch.StepTimer(log, log_freq=4, run="ctx", registry=reg)
        for i in range(8):
            time.sleep(0.01)                       # between steps: data wait
            with timer.step():
                time.sleep(0.002)
                timer.update(loss=2.0 - i * 0.1, samples=16, name="clashes with LogRecord.name")
        print(reg.get_sample_value("trainwatch_train_step", {"run": "ctx", "rank": "0"}))
        print(reg.get_sample_value("trainwatch_data_wait_seconds_count", {"run": "ctx", "rank": "0"}))
        print(reg.get_sample_value("trainwatch_data_wait_seconds_sum", {"run": "ctx", "rank": "0"}))
        print(reg.get_sample_value("trainwatch_train_loss", {"run": "ctx", "rank": "0"}))
    """, tmp_path)
    step, count, wait_sum, loss = (float(x) for x in r.stdout.split())
    assert step == 8 and count == 8 and loss == pytest.approx(1.3)
    assert wait_sum > 0.06  # 7 gaps of 10 ms (the first step has none)
    text = (tmp_path / "train.log").read_text()
    assert text.count("| Step ") == 2 and text.count(" field_name=clashes with LogRecord.name") == 2


# ---- the extension's argument handling ------------------------------------------------------------------


def test_fuzzed_arguments_raise_python_exceptions_never_crash(tmp_path):
    r = py("""
        import logging, math, random, trainwatch as tw
        from trainwatch import _native
        rng = random.Random(1234)
        values = [None, 0, -1, 1, 2**70, -2**70, 1.5, float("nan"), float("inf"), -0.0, "", "a", "x" * 1_000_000,
                  "nul\\x00byte", "\\udcff", "ünï 名前", b"bytes", bytearray(b"ba"), [], [1, "a"], (), ("a", "b"),
                  {}, {"a": 1}, object(), lambda: 0, True, 10**400 if False else 1e308, ["le"], ("a",) * 10]
        def pick():
            return rng.choice(values)
        reg = tw.CollectorRegistry()
        g = tw.Gauge("fz_g", "doc", registry=reg)
        c = tw.Counter("fz_c", "doc", ["a", "b"], registry=reg)
        h = tw.Histogram("fz_hist", "doc", ["x"], registry=reg, buckets=[1, 2])
        handler = tw.Handler(file="fz.log", json_file="fz.jsonl")
        fast = handler.fast_logger("fuzz")
        setup = tw.setup_logger("fuzz.setup", log_file="fz-setup.log", console_level=None)
        calls = [
            lambda: handler._router.log(pick(), pick(), pick(), pick(), pick()),
            lambda: setup.info(pick(), pick(), extra=pick()),
            lambda: setup.warning(pick(), *[pick() for _ in range(rng.randint(0, 3))]),
            lambda: tw.Gauge(pick(), pick(), registry=reg),
            lambda: tw.Counter("fz_" + str(rng.random())[2:], pick(), pick(), registry=reg),
            lambda: tw.Histogram("fz_hist" + str(rng.random())[2:], "d", registry=reg, buckets=pick()),
            lambda: g.set(pick()),
            lambda: g.inc(pick()),
            lambda: g.dec(amount=pick()),
            lambda: g.set(),
            lambda: g.inc(1, 2, 3),
            lambda: g.inc(bogus=1),
            lambda: c.labels(pick(), pick()).inc(pick()),
            lambda: c.labels(*[pick() for _ in range(rng.randint(0, 4))]),
            lambda: c.labels(a=pick(), b=pick(), c=pick()),
            lambda: c.labels(pick(), b=pick()),
            lambda: h.labels(pick()).observe(pick()),
            lambda: h.observe(pick()),
            lambda: reg.get_sample_value(pick(), pick()),
            lambda: _native.Registry(pick()),
            lambda: g._tw_register(pick(), pick(), pick(), pick()),
            lambda: _native.push(pick(), pick(), pick(), pick(), pick()),
            lambda: _native.start_http_server(pick(), pick()),
            lambda: fast.info(pick(), a=pick(), b=pick()),
            lambda: fast.log(pick(), pick(), x=pick()),
            lambda: fast.info(pick(), pick()),
            lambda: handler._router.emit(pick()),
            lambda: handler._router.emit(logging.LogRecord(pick(), 20, pick(), 1, pick(), pick(), None)),
            lambda: handler.add_file(pick(), pick()),
            lambda: _native.level_parse(pick()),
            lambda: _native.redact_add(pick()),
            lambda: _native.redact_text(pick()),
            lambda: _native.environment_add(pick(), pick()),
            lambda: tw.summary(pick()),
        ]
        raised = 0
        for i in range(6000):
            try:
                rng.choice(calls)()
            except Exception:
                raised += 1
        out = tw.generate_latest(reg)
        open("fz.prom", "wb").write(out)
        print(raised, len(out))
    """, tmp_path, timeout=600)
    raised, size = (int(x) for x in r.stdout.split())
    assert raised > 1000 and size > 0
    # whatever was accepted is still a valid exposition: promtool may find
    # lint problems (exit 3: no help text, names), never a parse error (1)
    with open(tmp_path / "fz.prom", "rb") as f:
        check = subprocess.run(["promtool", "check", "metrics"], stdin=f, capture_output=True, text=True)
    assert check.returncode in (0, 3) and "error" not in check.stderr, check.stdout + check.stderr


# ---- installing -----------------------------------------------------------------------------------------


def pythons_elsewhere():
    """CPython interpreters other than Debian's /usr/bin/python3: python3 and
    python3.N found on PATH, and pyenv's versions where pyenv is installed,
    as {realpath: (major, minor)}."""
    names = ["python3"] + [f"python3.{n}" for n in range(8, 15)]
    candidates = [os.path.join(d, n) for d in os.environ.get("PATH", "").split(os.pathsep) for n in names]
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    if os.path.isdir(os.path.join(pyenv_root, "versions")):
        candidates += [os.path.join(pyenv_root, "versions", v, "bin", "python3")
                       for v in sorted(os.listdir(os.path.join(pyenv_root, "versions")))]
    found = {}
    for c in candidates:
        if not os.access(c, os.X_OK):
            continue
        r = subprocess.run([c, "-c", "import sys; print(sys.implementation.name, sys.executable, *sys.version_info[:2])"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:  # a pyenv shim for a version not selected
            continue
        impl, exe, major, minor = r.stdout.split()
        exe = os.path.realpath(exe)
        if impl == "cpython" and exe != os.path.realpath(PYTHON):
            found.setdefault(exe, (int(major), int(minor)))
    return found


def pip_install(python, venv, *, system_site, isolation, build_dir):
    """Makes a fresh venv with PYTHON and pip-installs this checkout into it
    offline, the way docs/python.md says; returns pip's result."""
    subprocess.run([python, "-m", "venv", *(["--system-site-packages"] if system_site else []), str(venv)],
                   check=True)
    env = {k: v for k, v in py_env().items() if k not in ("PYTHONPATH", "LD_PRELOAD", "PYTHONHOME")}
    env["TW_CMAKE_BUILD_DIR"] = str(build_dir)
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index", "--quiet",
                           *([] if isolation else ["--no-build-isolation"]), str(SOURCE)],
                          env=env, capture_output=True, text=True, timeout=900)


def assert_installed_works(venv, tmp_path):
    env = py_env()
    del env["PYTHONPATH"]
    r = subprocess.run([str(venv / "bin" / "python"), "-c", "import trainwatch, sys; "
                        "trainwatch.Counter('installed', 'x').inc(); "
                        "print(trainwatch._native.__file__); sys.stdout.write(trainwatch.generate_latest().decode())"],
                       cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(str(venv / "lib")) and "\ninstalled_total 1\n" in r.stdout


def has_module(venv, name):
    return subprocess.run([str(venv / "bin" / "python"), "-c", f"import {name}"], capture_output=True).returncode == 0


@pytest.mark.parametrize("system_site,isolation", [(True, False), (False, True), (False, False)],
                         ids=["system-site-no-isolation", "plain-venv", "plain-venv-no-isolation"])
def test_pip_install_into_a_fresh_debian_venv_offline_without_wheel(tmp_path, system_site, isolation):
    venv = tmp_path / "venv"
    r = pip_install(PYTHON, venv, system_site=system_site, isolation=isolation, build_dir=BUILD)
    assert r.returncode == 0, r.stdout + r.stderr
    if not system_site:  # the case of the report: an interpreter without the wheel module
        assert not has_module(venv, "wheel") and not has_module(venv, "tomli")
    assert_installed_works(venv, tmp_path)


def test_pip_install_with_a_python3_from_elsewhere_on_path(tmp_path):
    usable = {exe: v for exe, v in pythons_elsewhere().items() if v >= (3, 11)}
    if not usable:
        pytest.skip("no CPython 3.11+ other than /usr/bin/python3 on PATH or in pyenv")
    python = next(iter(usable))
    venv = tmp_path / "venv"
    # its own build tree: the extension is compiled against that Python's headers
    r = pip_install(python, venv, system_site=True, isolation=False, build_dir=tmp_path / "build")
    assert r.returncode == 0, python + "\n" + r.stdout + r.stderr
    assert_installed_works(venv, tmp_path)


def test_pip_install_with_a_too_old_python_says_why(tmp_path):
    old = {exe: v for exe, v in pythons_elsewhere().items() if v < (3, 11)}
    if not old:
        pytest.skip("no CPython older than 3.11 on PATH or in pyenv to try")
    python, version = next(iter(old.items()))
    r = pip_install(python, tmp_path / "venv", system_site=False, isolation=True, build_dir=tmp_path / "build")
    assert r.returncode != 0
    assert f"trainwatch needs CPython 3.11 or newer" in r.stdout + r.stderr, r.stdout + r.stderr
    assert not (tmp_path / "build").exists()  # refused before any build
