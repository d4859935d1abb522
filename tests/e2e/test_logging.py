"""libtrainwatch logging (trainwatch/log.h) from the outside: the rotating
file set equals Python's RotatingFileHandler's for the same records; many
threads, sync and async, lose and tear nothing; a crash after logging keeps
the queued records; full disks and unwritable paths are counted; ranks
gate the console and name the files; the environment record reads git;
analyze reads the text and JSON logs back to the same steps; the installed
library builds an outside program."""
import json
import logging
import logging.handlers
import os
import pathlib
import shutil
import signal
import subprocess

from conftest import BUILD, SOURCE, binary, records, run


def sanitized():
    """A build with ASan+UBSan: their runtime reports a fault itself (exit 1) and outside programs link it."""
    syms = subprocess.run(["nm", binary("log-crash")], capture_output=True, text=True).stdout
    return "__asan_init" in syms


def file_set(path):
    """{name: bytes} of PATH and its numbered backups."""
    base = pathlib.Path(path)
    return {p.name: p.read_bytes() for p in base.parent.iterdir() if p.name == base.name or
            p.name.startswith(base.name + ".")}


def python_rotation(path, messages, max_bytes, backups):
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=max_bytes, backupCount=backups)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log = logging.Logger("py-rotation")
    log.addHandler(handler)
    for m in messages:
        log.info(m)
    handler.close()


def lines_in_order(path, backups):
    """All records, oldest file first."""
    out = []
    for k in range(backups, -1, -1):
        p = pathlib.Path(f"{path}.{k}" if k else path)
        if p.exists():
            out += p.read_text().splitlines()
    return out


def test_one_thread_makes_pythons_file_set(tmp_path):
    for max_bytes, backups in ((300, 3), (1000, 1), (500, 0), (0, 4)):
        ours, theirs = tmp_path / f"c{max_bytes}_{backups}", tmp_path / f"p{max_bytes}_{backups}"
        ours.mkdir()
        theirs.mkdir()
        assert run(["log-writer", ours / "train.log", max_bytes, backups, 1, 200]).returncode == 0
        messages = [f"t0 r{i} " + "x" * ((i * 7) % 50) for i in range(200)]
        python_rotation(theirs / "train.log", messages, max_bytes, backups)
        assert file_set(ours / "train.log") == file_set(theirs / "train.log"), (max_bytes, backups)
    assert set(file_set(tmp_path / "c500_0" / "train.log")) == {"train.log"}  # backupCount=0 never rotates


def check_many_threads(tmp_path, mode, threads=4, count=3000):
    path = tmp_path / "mt.log"
    backups = 2000
    assert run(["log-writer", path, 2048, backups, threads, count, mode], timeout=300).returncode == 0
    got = lines_in_order(path, backups)
    expected = {f"t{t} r{i} " + "x" * ((i * 7 + t * 13) % 50) for t in range(threads) for i in range(count)}
    assert len(got) == threads * count and set(got) == expected  # each once, none torn or interleaved
    for t in range(threads):  # each thread's records in its order
        mine = [int(line.split()[1][1:]) for line in got if line.startswith(f"t{t} ")]
        assert mine == list(range(count))
    # Python's handler, given the same records in the same order, makes the same files
    theirs = tmp_path / "py"
    theirs.mkdir()
    python_rotation(theirs / "mt.log", got, 2048, backups)
    assert file_set(path) == file_set(theirs / "mt.log")


def test_many_threads_sync(tmp_path):
    check_many_threads(tmp_path, "sync")


def test_many_threads_async(tmp_path):
    check_many_threads(tmp_path, "async")


def test_json_lines_rotate_whole(tmp_path):
    path = tmp_path / "j.jsonl"
    assert run(["log-writer", path, 4096, 100, 2, 500, "async", "json"]).returncode == 0
    got = [json.loads(line) for line in lines_in_order(path, 100)]
    assert len(got) == 1000 and all(r["log.logger"] == "writer" and r["log.level"] == "INFO" for r in got)
    # Elastic Common Schema names at the top, trainwatch's own under one prefix
    # (this writer logs without a call site: no log.origin.*)
    assert all(set(r) == {"@timestamp", "log.level", "log.logger", "message", "host.name", "process.pid",
                          "ecs.version", "trainwatch"} for r in got), got[0]
    assert all(r["process.pid"] > 0 and r["host.name"] and r["ecs.version"] == "8.11.0" for r in got)


def test_crash_leaves_queued_records_on_disk(tmp_path):
    for mode, sig in (("abort", signal.SIGABRT), ("segv", signal.SIGSEGV), ("fpe", signal.SIGFPE),
                      ("bus", signal.SIGBUS)):
        for queue in ("async", "sync"):
            path = tmp_path / f"{mode}-{queue}.jsonl"
            result = run(["log-crash", mode, 5000, path, queue])  # within the queue: none dropped
            # the handler before ours runs again: the default action, or ASan's report (exit 1)
            assert result.returncode == -sig or (sanitized() and result.returncode == 1), (mode, queue, result)
            steps = [json.loads(line)["trainwatch"]["step"] for line in path.read_text().splitlines()]
            assert steps == list(range(5000)), (mode, queue)
            text = pathlib.Path(f"{path}.txt").read_text().splitlines()
            assert len(text) == 5000 and text[-1].endswith("step=4999 loss=0.0002")


def test_full_disk_and_unwritable_path_are_counted(tmp_path):
    full = run(["log-crash", "exit", 50, "/dev/full"])
    assert full.returncode == 0
    assert full.stdout == "dropped 50\n"
    assert full.stderr.count("cannot write /dev/full") == 1
    (tmp_path / "a-file").write_text("")  # a missing directory is created; one under a file cannot be
    nowhere = tmp_path / "a-file" / "x.jsonl"
    missing = run(["log-crash", "exit", 50, nowhere, "async"])
    assert missing.returncode == 0 and missing.stdout == "dropped 100\n"  # the JSON file and its text twin
    assert missing.stderr.count("cannot open") == 2
    readonly = tmp_path / "ro"
    readonly.mkdir()
    readonly.chmod(0o555)
    path = readonly / "x.jsonl" if os.geteuid() != 0 else pathlib.Path("/proc/x.jsonl")  # root writes anywhere
    ro = run(["log-crash", "exit", 10, path])
    assert ro.returncode == 0 and ro.stdout == "dropped 20\n" and "cannot open" in ro.stderr


def demo(tmp_path, env_extra=None, *args):
    env = {k: v for k, v in os.environ.items() if k not in (
        "RANK", "WORLD_SIZE", "LOCAL_RANK", "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "OMPI_COMM_WORLD_RANK",
        "SLURM_PROCID", "NO_COLOR")}
    env.update(env_extra or {})
    return subprocess.run([binary("log-demo"), "--dir", str(tmp_path), *args], capture_output=True, text=True,
                          env=env, timeout=60, cwd=tmp_path)


def test_console_only_from_rank_zero_and_files_per_rank(tmp_path):
    outs = {}
    for rank in range(3):
        r = demo(tmp_path, {"RANK": str(rank), "WORLD_SIZE": "3"}, "--steps", "20")
        assert r.returncode == 0
        outs[rank] = r.stderr
    assert "| INFO | trainer |" in outs[0] and "Step step=20 loss=" in outs[0]
    for rank in (1, 2):
        assert "| INFO |" not in outs[rank] and "| WARNING | trainer |" in outs[rank]
    for rank in range(3):
        text = (tmp_path / f"train_rank_{rank}.log").read_text()
        assert "step=20" in text
        first = json.loads((tmp_path / f"train_rank_{rank}.jsonl").read_text().splitlines()[0])
        assert first["trainwatch"]["rank"] == rank and first["trainwatch"]["world_size"] == 3
        records = [json.loads(line) for line in (tmp_path / f"train_rank_{rank}.jsonl").read_text().splitlines()]
        # each call site, as ECS's log.origin names it
        assert records and all(r["log.origin.file.name"].endswith(".c") and r["log.origin.file.line"] > 0
                               and r["log.origin.function"] for r in records)
    # the documented order: PADDLE_TRAINER_ID before RANK
    r = demo(tmp_path, {"PADDLE_TRAINER_ID": "5", "PADDLE_TRAINERS_NUM": "8", "RANK": "2"}, "--steps", "5")
    assert r.returncode == 0 and (tmp_path / "train_rank_5.log").exists() and "| INFO |" not in r.stderr


def environment_record(tmp_path):
    r = demo(tmp_path, None, "--steps", "1")
    assert r.returncode == 0
    record = json.loads((tmp_path / "train_rank_0.jsonl").read_text().splitlines()[0])
    return dict(record["trainwatch"], message=record["message"], ecs_pid=record["process.pid"])


def test_environment_record_inside_and_outside_git(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(git + ["init", "-q", "-b", "exp"], check=True)
    (repo / "train.py").write_text("print('hi')\n")
    subprocess.run(git + ["add", "train.py"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "one"], check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    env = environment_record(repo)
    assert env["message"] == "environment" and env["git_commit"] == head and env["git_branch"] == "exp"
    assert env["git_dirty"] is False  # the log files written are untracked, as git describe --dirty sees them
    assert env["pid"] == env["ecs_pid"] > 0 and env["cpus"] >= 1 and env["memory_bytes"] > 0 and env["demo"] == "1.0"
    (repo / "train.py").write_text("print('changed')\n")
    shutil.rmtree(repo / "train_rank_0.jsonl", ignore_errors=True)
    (repo / "train_rank_0.jsonl").unlink()
    assert environment_record(repo)["git_dirty"] is True
    subprocess.run(git + ["commit", "-q", "-am", "two"], check=True)
    (repo / "train_rank_0.jsonl").unlink()
    again = environment_record(repo)
    assert again["git_dirty"] is False and again["git_commit"] != head
    outside = tmp_path / "plain"
    outside.mkdir()
    env = environment_record(outside)
    assert "git_commit" not in env and env["message"] == "environment"


def test_environment_names_gpus_through_nvml(tmp_path):
    fake = BUILD / "fake-nvml" / "libnvidia-ml.so.1"
    r = demo(tmp_path, {"TW_NVML_LIBRARY": str(fake), "CUDA_VISIBLE_DEVICES": "0,1"}, "--steps", "1")
    env = json.loads((tmp_path / "train_rank_0.jsonl").read_text().splitlines()[0])["trainwatch"]
    assert r.returncode == 0 and env["nvidia_driver"] == "550.54.15-fake" and env["gpu_count"] == 2
    assert env["gpus"] == "Fake H100 0, Fake H100 1" and env["cuda_visible_devices"] == "0,1"


def test_secrets_never_reach_the_files(tmp_path):
    assert demo(tmp_path, None, "--steps", "1").returncode == 0
    for name in ("train_rank_0.log", "train_rank_0.jsonl"):
        text = (tmp_path / name).read_text()
        assert "s3cret" not in text and "tok-123" not in text and "[REDACTED]" in text


def test_analyze_reads_text_and_json_back_to_the_same_steps(tmp_path):
    for mode in ((), ("--async",)):
        assert demo(tmp_path, None, "--steps", "100", *mode).returncode == 0
        text, _ = records(tmp_path / "train_rank_0.log")
        js, _ = records(tmp_path / "train_rank_0.jsonl")
        steps = [(r["step"], r["loss"]) for r in text if r["kind"] == "step"]
        assert len(steps) == 20 and [s for s, _ in steps] == list(range(5, 101, 5))
        assert steps == [(r["step"], r["loss"]) for r in js if r["kind"] == "step"]
        assert [r["kind"] for r in text] == [r["kind"] for r in js]
        assert [r.get("time") for r in text] == [r.get("time") for r in js]
        for f in tmp_path.iterdir():
            f.unlink()
    assert demo(tmp_path, None, "--steps", "100").returncode == 0
    for name in ("train_rank_0.log", "train_rank_0.jsonl"):
        report = json.loads(run(["trainwatch", "analyze", "--json", tmp_path / name]).stdout)
        assert report["inputs"][0]["format"] == "trainwatch-log"
        assert report["summary"]["step_records"] == 20 and report["summary"]["eval_records"] == 4
        assert report["summary"]["last_step"] == 100 and report["summary"]["train_metrics"] == []


def test_installed_library_builds_an_outside_program(tmp_path):
    prefix = tmp_path / "prefix"
    inst = subprocess.run(["cmake", "--install", str(BUILD), "--prefix", str(prefix)], capture_output=True,
                          text=True, timeout=120)
    assert inst.returncode == 0, inst.stderr
    lib = next(p for p in (prefix / "lib", prefix / "lib64", *prefix.glob("lib/*")) if (p / "libtrainwatch.so").exists())
    assert (lib / "libtrainwatch.a").exists() and (prefix / "include" / "trainwatch" / "log.h").exists()
    assert (prefix / "bin" / "trainwatch").exists()
    exported = subprocess.run(["nm", "-D", "--defined-only", str(lib / "libtrainwatch.so")], capture_output=True,
                              text=True).stdout.split("\n")
    names = [line.split()[-1] for line in exported if line.strip() and line.split()[-2] in "TDBR"]
    assert names and all(n.startswith("tw_") for n in names), [n for n in names if not n.startswith("tw_")][:5]
    program = tmp_path / "outside.c"
    program.write_text('#include <trainwatch/log.h>\n'
                       'int main(void) {\n'
                       '    tw_log_options o = tw_log_options_default();\n'
                       '    o.file_path = "outside.log";\n'
                       '    tw_log_setup(&o);\n'
                       '    TW_LOG_INFO(tw_logger_get("outside"), "Step", tw_field_int("step", 7));\n'
                       '    return 0;\n}\n')
    env = dict(os.environ, PKG_CONFIG_PATH=str(lib / "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "trainwatch"], capture_output=True, text=True,
                           env=env)
    assert flags.returncode == 0, flags.stderr
    exe = tmp_path / "outside"
    san = ["-fsanitize=address,undefined"] if sanitized() else []
    cc = subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", *san, str(program), "-o", str(exe), *flags.stdout.split()],
                        capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    ran = subprocess.run([str(exe)], capture_output=True, text=True, cwd=tmp_path,
                         env=dict(os.environ, LD_LIBRARY_PATH=str(lib)))
    assert ran.returncode == 0 and "| INFO | outside | main:6 | Step step=7" in ran.stderr
    assert "step=7" in (tmp_path / "outside.log").read_text()
    # the archive, then the libraries of Requires.private (their shared builds) and Libs.private
    private = subprocess.run(["pkg-config", "--print-requires-private", "trainwatch"], capture_output=True, text=True,
                             env=env).stdout.split()
    deps = subprocess.run(["pkg-config", "--libs", *private], capture_output=True, text=True).stdout.split()
    static = deps + ["-lm", "-lpthread", "-ldl"]
    exe2 = tmp_path / "outside-static"
    cc2 = subprocess.run(["cc", "-std=c11", *san, str(program), "-o", str(exe2), f"-I{prefix / 'include'}",
                          str(lib / "libtrainwatch.a"), *[f for f in static if f != "-ltrainwatch"]],
                         capture_output=True, text=True)
    assert cc2.returncode == 0, cc2.stderr
    assert subprocess.run([str(exe2)], cwd=tmp_path, capture_output=True).returncode == 0
