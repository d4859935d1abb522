"""Reading the ranks of a launch together: the rank that failed first is the
cause, and the ranks that were then terminated by the launcher, lost their
peers or stopped logging are its victims, named in the same finding; no rank
is blamed for stopping when another failed first. Real logs: the shared
corpus and tests/corpus-extra (see its SOURCES.md)."""
import json
import os
import re
import pathlib
import signal
import subprocess
import time

import pytest

from conftest import analyze_json, binary, records, run

EXTRA = pathlib.Path(__file__).resolve().parents[1] / "corpus-extra" / "paddle-distributed"
IBOT0 = "paddle-errors/ibot-launch-crashes-workerlog.0"
RTDETR = "paddle-distributed/ppdet-rtdetr-2gpu-sigterm-workerlog"


def ibot(corpus, *args):
    """The 4-GPU IBOT job: rank 0 from the corpus, ranks 1-3 from corpus-extra."""
    files = [corpus / IBOT0] + [EXTRA / f"ibot-4gpu-launch-crashes-workerlog.{i}" for i in (1, 2, 3)]
    return analyze_json(*args, *files)


def failures(report, launch):
    return [f for f in report["findings"] if f["launch"] == launch and f["rule"] in ("crash", "killed")]


def test_the_rank_that_failed_first_is_the_cause_and_the_others_its_victims(corpus):
    """Launch at 09:37:57: rank 3 raises AttributeError at workerlog.3:260;
    ranks 0-2 get SIGTERM from the launcher (PID 2819590) a moment later."""
    report, result = ibot(corpus, "--launch", "all")
    assert report["launch_count"] == 7
    launch = next(la for la in report["launches"] if la["start_line"] == 232)
    found = failures(report, launch["index"])
    assert len(found) == 1, found
    f = found[0]
    assert f["rule"] == "crash" and f["rank"] == 3
    assert f["file"].endswith("ibot-4gpu-launch-crashes-workerlog.3") and f["line"] == 260
    assert f["title"] == "Rank 3 failed first (before any training step); ranks 0-2 went down with it"
    assert f["evidence"].startswith("AttributeError: 'DataParallel' object has no attribute 'module'")
    assert 'deepest frame in your code: File "main_ibot.py", line 407, in train_one_epoch' in f["evidence"]
    for rank, line, second in ((0, 305, 27), (1, 262, 27), (2, 277, 28)):
        assert f"rank {rank}: terminated: SIGTERM from PID 2819590 at 2023-04-05 09:38:{second} UTC (" in f["evidence"]
        assert f"workerlog.{rank}:{line})" in f["evidence"]
    assert launch["outcome"] == "crashed" and launch["outcome_detail"].startswith("AttributeError: 'DataParallel'")
    # no finding of that launch blames a victim
    blamed = {g["rank"] for g in report["findings"] if g["launch"] == launch["index"] and g["severity"] == "error"}
    assert blamed == {3}
    assert result.returncode == 1


def test_ranks_that_lost_their_peer_are_victims(corpus):
    """Launch at 08:13:37: rank 0 cannot load libnccl.so; ranks 1-3 then fail
    in barrier() with "TCP send error ... Broken pipe": not causes."""
    report, _ = ibot(corpus, "--launch", "all")
    launch = next(la for la in report["launches"] if la["start_line"] == 56)
    (f,) = failures(report, launch["index"])
    assert f["rank"] == 0 and f["line"] == 68 and f["file"].endswith("ibot-launch-crashes-workerlog.0")
    assert f["evidence"].startswith("RuntimeError: (PreconditionNotMet) The third-party dynamic library (libnccl.so)")
    assert "ranks 1-3 went down with it" in f["title"]
    for rank in (1, 2, 3):
        assert f"rank {rank}: lost its peers: ValueError: (InvalidArgument) TCP send error. Details: Broken pipe." in f["evidence"]


def test_the_same_error_on_every_rank_is_said_once(corpus):
    """Launch at 09:44:32: every rank raises the same AssertionError."""
    report, _ = ibot(corpus, "--launch", "all")
    launch = next(la for la in report["launches"] if la["start_line"] == 307)
    (f,) = failures(report, launch["index"])
    assert f["title"] == "4 ranks failed with the same error before their first step"
    assert f["evidence"].startswith("AssertionError: Input image size (96*96) doesn't match model (224*224).")
    assert "rank 3: the same error (" in f["evidence"] and "workerlog.3:344)" in f["evidence"]


def test_every_rank_terminated_by_the_launcher_blames_none(corpus):
    """RT-DETR on 2 GPUs: in both launches both ranks get SIGTERM from the same
    PID in the same second; rank 1 (which logs no steps) is not the culprit."""
    report, result = analyze_json("--launch", "all", corpus / f"{RTDETR}.0", corpus / f"{RTDETR}.1")
    for launch, pid, line in ((2, 1180505, 259), (1, 1136560, 84)):
        (f,) = failures(report, launch)
        assert f["rule"] == "killed" and f["rank"] == 0 and f["line"] == line
        assert f["title"] == "Every rank was stopped from outside: 2 ranks terminated, none failed first"
        assert f"every signal came from the same process, PID {pid} (the launcher)" in f["evidence"]
        assert f"rank 1: terminated: SIGTERM from PID {pid} at 2023-08-04 " in f["evidence"]
    assert not any("before its first step" in f["title"] for f in report["findings"])
    assert result.returncode == 1


def test_one_rank_alone_keeps_its_own_crash(corpus):
    """Rank 3's log alone: its own failure is reported as before."""
    report, _ = analyze_json("--launch", "all", EXTRA / "ibot-4gpu-launch-crashes-workerlog.3")
    assert not any("failed first" in f["title"] or "went down" in f["title"] for f in report["findings"])


def test_healthy_ranks_get_no_failure_finding(corpus):
    report, result = analyze_json(corpus / "paddle-distributed/vinvl-4gpu-30epoch-workerlog.0",
                                  corpus / "paddle-distributed/vinvl-4gpu-30epoch-workerlog.3")
    assert report["healthy"] and result.returncode == 0
    assert not {f["rule"] for f in report["findings"]} & {"crash", "killed", "rank_stopped", "shared_device"}


@pytest.mark.parametrize("rank,said", [(1, "2819590 at 2023-04-05 09:38:27"), (2, "2819590 at 2023-04-05 09:38:28"),
                                        (3, "2874420 at 2023-04-05 09:49:22")])
def test_signal_reports_say_who_sent_them(rank, said):
    """The Paddle signal block's sender PID and abort time stay with the event."""
    recs = run(["trainwatch", "analyze", "--records", EXTRA / f"ibot-4gpu-launch-crashes-workerlog.{rank}"]).stdout
    assert f"SIGTERM from PID {said} UTC]" in recs


def launch_demo(tmp_path, *flags, ranks=4, per_node=None, rank_flags=None):
    """What paddle.distributed.launch does with the demo trainer: one process
    per rank with PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM and FLAGS_selected_gpus
    set, each writing log/workerlog.N; when one exits with an error the others
    get a SIGTERM (from this process). The simulated GPUs are shared between
    the processes of a node (--device-pool; per_node ranks a node, default
    all on one). rank_flags: {rank: [flags]} for one rank only. Returns the
    rank that failed first (None if none failed) and the logs."""
    (tmp_path / "log").mkdir()
    per_node = per_node or ranks
    procs, logs = [], []
    for rank in range(ranks):
        env = dict(os.environ, PADDLE_TRAINER_ID=str(rank), PADDLE_TRAINERS_NUM=str(ranks),
                   FLAGS_selected_gpus=str(rank % per_node))
        pool = tmp_path / ("gpus" if per_node == ranks else f"node{rank // per_node}-gpus")
        pool.mkdir(exist_ok=True)
        logs.append(tmp_path / "log" / f"workerlog.{rank}")
        with open(logs[-1], "w") as out:
            procs.append(subprocess.Popen([binary("demo-train"), "--device-pool", pool, *flags,
                                           *(rank_flags or {}).get(rank, [])],
                                          stdout=out, stderr=subprocess.STDOUT, env=env))
    first, deadline = None, time.monotonic() + 120
    while first is None and any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        first = next((rank for rank, p in enumerate(procs) if p.poll() not in (None, 0)), None)
        time.sleep(0.005)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(timeout=60)
    return first, logs


def rank_list(ranks):
    """Ranks as findings name them: runs of three or more as "0-2"."""
    runs, out = [], []
    for r in ranks:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    for run_ in runs:
        out += [f"{run_[0]}-{run_[-1]}"] if len(run_) >= 3 else [str(r) for r in run_]
    return ", ".join(out)


# four ranks, each keeping 1 MB more on its GPU every step; 80 MB GPUs
SHARED = ["--epochs", "1", "--steps-per-epoch", "200", "--log-interval", "5", "--slow-reader", "50",
          "--leak-mb", "1", "--device-memory-mb", "80"]


def test_ranks_on_one_gpu_are_said_with_each_ranks_evidence(tmp_path):
    """The demo trainer as 4 ranks that ignore FLAGS_selected_gpus
    (--ignore-local-rank): each prints Paddle's "init nccl context ... gpu id:
    0" line and they fill GPU 0 together; the first rank out of memory is
    the cause, the others (SIGTERM from the launcher) its victims. No public
    log set with this fault was found (see test_nccl_says_two_ranks_share_a_gpu)."""
    first, logs = launch_demo(tmp_path, *SHARED, "--ignore-local-rank")
    assert first is not None, "no rank ran out of memory"
    report, result = analyze_json(*logs)
    assert result.returncode == 1
    (f,) = [f for f in report["findings"] if f["rule"] == "shared_device"]
    assert f["title"] == "4 ranks (0, 1, 2, 3) use the same GPU, device 0" and f["severity"] == "warning"
    assert f["rank"] == 0 and f["line"] == 1 and f["file"].endswith("workerlog.0")
    for rank in range(4):
        assert (f"rank {rank}: init nccl context nranks: 4 local rank: {rank} gpu id: 0 ring id: 0 "
                f"({logs[rank]}:1)") in f["evidence"]
    assert (f"rank {first} ran out of memory: ResourceExhaustedError: Out of memory error on GPU 0. Cannot allocate "
            "1.000000MB memory on GPU 0, ") in f["evidence"]
    assert "LOCAL_RANK" in f["recommendation"] and "FLAGS_selected_gpus" in f["recommendation"]

    (crash,) = [f for f in report["findings"] if f["rule"] in ("crash", "killed")]
    others = [r for r in range(4) if r != first]
    assert crash["rule"] == "crash" and crash["rank"] == first and crash["file"].endswith(f"workerlog.{first}")
    assert crash["line"] == next(i for i, line in enumerate(logs[first].read_text().splitlines(), 1)
                                 if line.startswith("Out of memory error on GPU 0"))
    assert crash["title"] == f"Rank {first} failed first; ranks {rank_list(others)} went down with it"
    assert crash["evidence"].startswith("ResourceExhaustedError: Out of memory error on GPU 0. Cannot allocate ")
    for rank in others:
        assert f"rank {rank}: terminated: SIGTERM from PID {os.getpid()} at " in crash["evidence"]
    blamed = {g["rank"] for g in report["findings"] if g["severity"] == "error"}
    assert blamed == {first}

    # Paddle's message names no other process: the other ranks' own lines do
    (oom,) = [f for f in report["findings"] if f["rule"] == "oom"]
    assert oom["rank"] == first and oom["title"] == "Out of memory during training: several ranks on one device"
    assert f"ranks {', '.join(str(r) for r in others)} also use GPU 0, by their own lines" in oom["evidence"]
    assert "LOCAL_RANK" in oom["recommendation"] and "reduce the per-device batch size" not in oom["recommendation"]


def test_ranks_on_their_own_demo_gpus_are_not_said(tmp_path):
    """The same job with each rank on the GPU its launcher gave it: four
    devices of 80 MB, none full, no finding of a shared device or a failure."""
    first, logs = launch_demo(tmp_path, *SHARED, "--steps-per-epoch", "20")
    assert first is None
    for rank in range(4):
        assert f"gpu id: {rank} ring id: 0" in logs[rank].read_text()
    report, result = analyze_json(*logs)
    assert not {f["rule"] for f in report["findings"]} & {"shared_device", "crash", "killed", "oom", "rank_stopped"}


def test_two_nodes_using_the_same_gpu_indices_are_not_said(tmp_path):
    """Four demo ranks on two nodes of two GPUs (indices 0, 1, 0, 1, a pool of
    devices per node); rank 0 alone asks for more than its GPU holds. Rank 2's
    GPU 0 is another node's: no shared device, and the OOM keeps its own kind
    and advice (one rank's OOM was taken as proof of sharing before)."""
    first, logs = launch_demo(tmp_path, *SHARED, "--steps-per-epoch", "20", per_node=2,
                              rank_flags={0: ["--oom-at", "10", "--oom-mb", "100"]})
    assert first == 0
    assert "gpu id: 0 ring id: 0" in logs[2].read_text()
    report, _ = analyze_json(*logs)
    rules = {f["rule"] for f in report["findings"]}
    assert "shared_device" not in rules, report["findings"]
    (oom,) = [f for f in report["findings"] if f["rule"] == "oom"]
    assert oom["rank"] == 0 and oom["title"].endswith("one allocation too large for the device"), oom["title"]


def test_ranks_on_their_own_gpus_are_not_said(corpus):
    """IBOT's four ranks use devices 4, 5, 6, 7."""
    report, _ = ibot(corpus, "--launch", "all")
    assert "shared_device" not in {f["rule"] for f in report["findings"]}


# The launcher's report of the rank that failed (tests/corpus-extra/launcher,
# real excerpts from public issue threads; see its SOURCES.md rows).
LAUNCHER = pathlib.Path(__file__).resolve().parents[1] / "corpus-extra" / "launcher"
PADDLE_ABORT = LAUNCHER / "paddle-33074-launcher-abort-trainer3.log"


@pytest.mark.parametrize("name,line,ranks,code", [
    ("paddle-33074-launcher-abort-trainer3.log", 2, "3", 3),
    ("paddleclas-727-console-abort-trainers123.log", 17, "1, 2, 3", -1),
    ("repvit-65-console-elastic-failed-local2.log", 7, "local 2", 2),
    ("unsloth-10-elastic-failed-local3-glog.log", 4, "local 3", 3),
    ("cppo-6-torchrun-root-cause-sigkill.log", 22, "0", None),
])
def test_the_launchers_report_is_read_as_an_event(name, line, ranks, code):
    """Paddle's legacy launcher (ABORT!!! ... rank=[N]), the elastic agent's
    "failed (exitcode: 1) local_rank: 2" (a rank within its node: "local 2")
    and torchrun's Root Cause entry, as the launchers printed them: the ranks
    named, at the report's line."""
    recs, _ = records(LAUNCHER / name)
    (e,) = [r for r in recs if r.get("event") == "launcher"]
    assert e["line"] == line and e["detail"] == ranks and e.get("code", 0) == (code if code is not None else 0)
    assert not any(r.get("event") == "exit" for r in recs)  # "exitcode" in the report is not a process exit of its own


def test_ranks_named_by_the_launcher_whose_logs_are_missing():
    """PaddleClas issue 727: the console holds rank 0's config dump and the
    launcher's ABORT naming ranks 1-3; only the console was given."""
    report, result = analyze_json(LAUNCHER / "paddleclas-727-console-abort-trainers123.log")
    (f,) = [f for f in report["findings"] if f["rule"] == "crash"]
    assert f["title"] == "Ranks 1, 2, 3 failed, by the launcher's report; their logs are not among the inputs"
    assert f["line"] == 17 and f["severity"] == "error"
    assert ("the launcher's report: ABORT!!! Out of all 4 trainers, the trainer process with rank=[1, 2, 3] was "
            "aborted. Please check its log. (") in f["evidence"]
    for rank in (1, 2, 3):
        assert f"rank {rank}'s own log is not among the inputs; its error is there (Paddle: log/workerlog.{rank})" in f["evidence"]
    assert "rank 0: no error of its own in its log" in f["evidence"]
    assert result.returncode == 1


def test_the_elastic_agent_names_the_local_rank_that_failed():
    """RepViT issue 65: rank 0's epoch lines, the agent's SIGTERMs, then
    "failed (exitcode: 1) local_rank: 2". A local rank is the rank within the
    agent's node, and nothing in the console says which node: local rank 2
    is named as such, never as global rank 2."""
    report, _ = analyze_json(LAUNCHER / "repvit-65-console-elastic-failed-local2.log")
    (f,) = [f for f in report["findings"] if f["rule"] == "crash"]
    assert f["title"] == ("Local rank 2 on this node failed, by the launcher's report; the log does not say which "
                          "global rank that is")
    assert f["line"] == 7 and f["rank"] == 0
    assert "the launcher's report: failed (exitcode: 1) local_rank: 2 (pid: 60554) (" in f["evidence"]
    assert "local rank 2 on this node" in f["evidence"] and "Rank 2" not in f["title"]
    assert "rank 2's own log is not among the inputs" not in f["evidence"]
    assert "rank 0: stopped logging at step" in f["evidence"] and "without an error of its own" in f["evidence"]
    assert "LOCAL_RANK=2" in f["recommendation"]


LRC = LAUNCHER / "lrc-2node-torchrun-agents-healthy.log"
UNSLOTH_FAILED = LAUNCHER / "unsloth-10-elastic-failed-local3-glog.log"


def lines_of(path, first, last):
    """Lines first..last (1-based, inclusive) of a corpus file."""
    return path.read_text().splitlines(keepends=True)[first - 1:last]


def test_the_agents_rank_assignment_is_read_as_an_event():
    """The two agents of the Lawrencium job print their rendezvous result
    into one file: group_rank 0 holds global ranks 0-3, group_rank 1 (local
    ranks 0-3) global ranks 4-7, in a world of 2 nodes."""
    recs, _ = records(LRC)
    ranks = [r for r in recs if r.get("event") == "rank-assignment"]
    assert [(r["line"], r["detail"], r["code"]) for r in ranks] == [(64, "0, 1, 2, 3", 2), (82, "4, 5, 6, 7", 2)]
    assert "group_rank=1" in ranks[1]["message"] and "global_ranks=[4, 5, 6, 7]" in ranks[1]["message"]


def test_the_healthy_two_node_job_gets_no_finding():
    """The whole Lawrencium job log: two agents, eight ranks' epochs, both
    worker groups SUCCEEDED. Nothing of the agents' lines is a finding."""
    report, result = analyze_json(LRC)
    assert report["findings"] == [] and result.returncode == 0


def test_the_agents_rank_assignment_turns_a_local_rank_into_the_global_one(tmp_path):
    """Node 1's agent (group_rank 1, global ranks 4-7: the Lawrencium job's
    real lines 74-85) and then an agent's real "failed (exitcode: 1)
    local_rank: 3" (unsloth issue 10): in the log of that node, local rank 3
    is global rank 7. The file joins two real excerpts (no public log was
    found with both and a failure on a node other than the first: searched
    find_string "group_rank=1", the issues corpus for ChildFailedError with
    rendezvous results)."""
    console = tmp_path / "node1-agent.log"
    console.write_text("".join(lines_of(LRC, 74, 85)) + UNSLOTH_FAILED.read_text())
    report, result = analyze_json(console)
    (f,) = [f for f in report["findings"] if f["rule"] == "crash"]
    assert f["title"] == "Rank 7 failed, by the launcher's report; its log is not among the inputs"
    assert ("local rank 3 on the node of global ranks 4-7 (group_rank=1, by the agent's rank assignment at "
            f"{console}:9) is rank 7") in f["evidence"]
    assert ("rank 7's own log is not among the inputs; its error is there (torchrun: --log-dir's "
            "attempt_N/LOCAL_RANK/stderr.log on its node, else that node's console)") in f["evidence"]
    assert "workerlog" not in f["evidence"]  # a Paddle file name for a torch job, before
    assert result.returncode == 1


def test_two_agents_in_one_file_leave_the_local_rank_local(tmp_path):
    """Both agents of the Lawrencium job wrote into one file (srun): which
    node's agent reported "local_rank: 3" the file cannot say, so no global
    rank is named. Real lines 1-85 of that job, then unsloth issue 10's lines."""
    console = tmp_path / "job.log"
    console.write_text("".join(lines_of(LRC, 1, 85)) + UNSLOTH_FAILED.read_text())
    report, _ = analyze_json(console)
    (f,) = [f for f in report["findings"] if f["rule"] == "crash"]
    assert f["title"].startswith("Local rank 3 on this node failed, by the launcher's report")
    assert "the agents of 2 nodes wrote into this log" in f["evidence"]


def test_torchruns_root_cause_is_preferred_to_the_agents_local_rank(tmp_path):
    """A file where torchrun's Root Cause entry (CPPO issue 6: rank 0) comes
    before another agent's "local_rank: 3" line (unsloth issue 10), as two
    nodes' consoles merged by srun can order them: the Root Cause's global
    rank is the report taken, whatever the order."""
    console = tmp_path / "merged.log"
    console.write_text((LAUNCHER / "cppo-6-torchrun-root-cause-sigkill.log").read_text() + UNSLOTH_FAILED.read_text())
    report, _ = analyze_json(console)
    (f,) = [f for f in report["findings"] if f["rule"] in ("crash", "killed")]
    assert f["title"].startswith("Rank 0 failed")
    assert "torchrun's Root Cause (first observed failure): time 2025-05-21_15:43:03 rank 0 (local_rank: 0)" in f["evidence"]


def test_torchruns_root_cause_with_a_signal_and_no_error_in_the_log():
    """CPPO issue 6: torchrun's ChildFailedError names rank 0, exitcode -9
    (SIGKILL) and the console holds no error of rank 0's own: the launcher's
    traceback (ChildFailedError) is not taken for the rank's error."""
    report, result = analyze_json(LAUNCHER / "cppo-6-torchrun-root-cause-sigkill.log")
    (f,) = [f for f in report["findings"] if f["rule"] in ("crash", "killed")]
    assert f["title"] == "Rank 0 failed without an error in its log, by the launcher's report"
    assert ("torchrun's Root Cause (first observed failure): time 2025-05-21_15:43:03 rank 0 (local_rank: 0) "
            "exitcode -9 (pid: 14750)") in f["evidence"]
    assert "exit code -9: killed by signal 9 (SIGKILL" in f["evidence"] and "OOM killer" in f["recommendation"]
    assert result.returncode == 1


def rank_logs(tmp_path, errors):
    """Ranks 1-3 of a job as Paddle's launcher leaves them in log/: one
    training record each, then what the test gives (lines of a rank's own)."""
    files = []
    for rank in (1, 2, 3):
        path = tmp_path / f"workerlog.{rank}"
        path.write_text("[2021/05/24 17:16:50] ppocr INFO: epoch: [1/500], global_step: 10, lr: 0.001000, "
                        "loss: 2.000000, avg_reader_cost: 0.01000 s, avg_batch_cost: 0.50000 s, "
                        "ips: 32.00000 samples/s\n" + "".join(line + "\n" for line in errors[rank]))
        files.append(path)
    return files


def traceback(message):
    return ["Traceback (most recent call last):", '  File "tools/train.py", line 40, in <module>', "    main()",
            message]


SIGTERM_BLOCK = ["--------------------------------------", "C++ Traceback (most recent call last):",
                 "--------------------------------------", "0   paddle::framework::SignalHandle(char const*, int)",
                 "", "----------------------", "Error Message Summary:", "----------------------",
                 "FatalError: `Termination signal` is detected by the operating system.",
                 "  [TimeInfo: *** Aborted at 1621847834 (unix time) try \"date -d @1621847834\" if you are using GNU date ***]",
                 "  [SignalInfo: *** SIGTERM (@0x3fe) received by PID 1164 (TID 0x7f6cf1fc6700) from PID 1022 ***]"]


def test_the_launcher_breaks_a_tie_between_failures_without_times(tmp_path):
    """Ranks 1 and 3 both raise an error of their own (Python tracebacks carry
    no time) and rank 2 is terminated. Alone, the logs cannot say which came
    first (rank 1, the lowest, said so); with the launcher's report (Paddle
    issue 33074's real lines: rank=[3]) rank 3 is the cause and the report is
    quoted. The rank logs are written here: no public job was found with its
    rank logs and its launcher's report both published (searched: find_string
    "ABORT!!! Out of all", "Root Cause (first observed failure)", "Container
    failed !!!"; the issues corpus for ABORT/ChildFailedError threads with
    workerlogs)."""
    ranks = rank_logs(tmp_path, {1: traceback("ValueError: rank one broke"), 2: SIGTERM_BLOCK,
                                 3: traceback("IndexError: list index out of range")})
    alone, _ = analyze_json(*ranks)
    (f,) = [f for f in alone["findings"] if f["rule"] in ("crash", "killed")]
    assert f["rank"] == 1 and "the lines carry no time: rank 1 is the lowest, not known to be the first" in f["evidence"]

    report, result = analyze_json(PADDLE_ABORT, *ranks)
    (f,) = [f for f in report["findings"] if f["rule"] in ("crash", "killed")]
    assert f["title"] == "Rank 3 failed first; ranks 1, 2 went down with it"  # the launcher's log is no rank
    assert f["rank"] == 3 and f["file"].endswith("workerlog.3") and f["line"] == 5
    assert f["evidence"].startswith("IndexError: list index out of range")
    assert "2 ranks failed of their own; the launcher's report names rank 3" in f["evidence"]
    assert ("the logs do not tell these failures apart (the same second, or no time); the launcher's report names "
            "rank 3: ABORT!!! Out of all 4 trainers, the trainer process with rank=[3] was aborted. Please check its "
            "log. (") in f["evidence"]
    assert "paddle-33074-launcher-abort-trainer3.log:2)" in f["evidence"]
    assert "rank 1: also failed: ValueError: rank one broke" in f["evidence"]
    assert "rank 2: terminated: SIGTERM from PID 1022" in f["evidence"]
    assert result.returncode == 1


def test_timestamps_win_over_the_launchers_report(tmp_path):
    """Rank 1's fatal glog line is four seconds before rank 3's; the launcher
    names rank 3 (Paddle issue 33074's lines): rank 1 is the cause, and the
    finding says the launcher named rank 3. Rank logs written here (see above)."""
    ranks = rank_logs(tmp_path, {
        1: ["F0524 17:17:05.120000 4242 nccl_context.cc:99] Check failed: ncclSuccess == e (2 vs. 0)"],
        2: SIGTERM_BLOCK,
        3: ["F0524 17:17:09.450000 4250 gpu_info.cc:33] Check failed: cudaSuccess == e (700 vs. 0)"]})
    report, _ = analyze_json(PADDLE_ABORT, *ranks)
    (f,) = [f for f in report["findings"] if f["rule"] in ("crash", "killed")]
    assert f["rank"] == 1 and f["title"] == "Rank 1 failed first; ranks 2, 3 went down with it"
    assert "2 ranks failed of their own; rank 1's error is the earliest" in f["evidence"]
    assert ("the launcher named rank 3: ABORT!!! Out of all 4 trainers, the trainer process with rank=[3] was "
            "aborted. Please check its log. (") in f["evidence"]
    assert "the timestamps put rank 1's error first, and they are taken" in f["evidence"]


def test_the_launcher_names_the_first_of_ranks_failing_alike(tmp_path):
    """Ranks 1-3 raise the same error: one finding, placed at the rank the
    launcher names (rank 3), with its report. Rank logs written here."""
    same = traceback("AssertionError: Input image size (96*96) doesn't match model (224*224).")
    report, _ = analyze_json(PADDLE_ABORT, *rank_logs(tmp_path, {1: same, 2: same, 3: same}))
    (f,) = [f for f in report["findings"] if f["rule"] in ("crash", "killed")]
    assert f["title"] == "3 ranks failed with the same error" and f["rank"] == 3
    assert "the launcher's report names rank 3: ABORT!!! Out of all 4 trainers" in f["evidence"]


def test_a_launchers_log_among_rank_logs_is_no_rank_wherever_it_stands(tmp_path):
    """The launcher's log (Paddle issue 33074's ABORT naming rank 3) given
    between rank 1's and rank 2's logs took the number of its place (1) and
    was read as rank 1's lines. It is the launcher's, not a rank's: rank 1
    keeps its own log, and no rank 0 appears. Rank logs written here."""
    ranks = rank_logs(tmp_path, {1: traceback("ValueError: rank one broke"), 2: SIGTERM_BLOCK,
                                 3: traceback("IndexError: list index out of range")})
    report, _ = analyze_json(ranks[0], PADDLE_ABORT, ranks[1], ranks[2])
    (f,) = [f for f in report["findings"] if f["rule"] in ("crash", "killed")]
    assert f["title"] == "Rank 3 failed first; ranks 1, 2 went down with it"
    assert "rank 1: also failed: ValueError: rank one broke" in f["evidence"]
    assert "rank 0" not in f["evidence"]


def test_an_unresolved_local_rank_breaks_no_tie(tmp_path):
    """Ranks 1 and 3 fail without times; the only launcher line is an
    agent's "local_rank: 3" with nothing saying which node (unsloth issue
    10's real lines): it is not taken for global rank 3, and rank 1 stays the
    lowest, not known to be the first. With node 0's rank assignment before it
    (the Lawrencium job's lines 56-67: global ranks 0-3) local rank 3 is
    global rank 3 and breaks the tie. Rank logs written here."""
    ranks = rank_logs(tmp_path, {1: traceback("ValueError: rank one broke"), 2: SIGTERM_BLOCK,
                                 3: traceback("IndexError: list index out of range")})
    report, _ = analyze_json(UNSLOTH_FAILED, *ranks)
    (f,) = [f for f in report["findings"] if f["rule"] in ("crash", "killed")]
    assert f["rank"] == 1 and "rank 1 is the lowest, not known to be the first" in f["evidence"]
    assert "local rank 3 on this node" in f["evidence"] and "not used to order the failures" in f["evidence"]
    assert "the launcher's report names rank 3" not in f["evidence"]

    agent = tmp_path / "agent.log"
    agent.write_text("".join(lines_of(LRC, 56, 67)) + UNSLOTH_FAILED.read_text())
    report, _ = analyze_json(agent, *ranks)
    (f,) = [f for f in report["findings"] if f["rule"] in ("crash", "killed")]
    assert f["rank"] == 3 and f["title"] == "Rank 3 failed first; ranks 1, 2 went down with it"
    assert "2 ranks failed of their own; the launcher's report names rank 3" in f["evidence"]


def torchrun_log_dir(tmp_path, node, errors):
    """torchrun --log-dir's layout for one node: LOGDIR/<run_id>_<random>/
    attempt_0/<local rank>/stderr.log (torch.distributed.elastic.multiprocessing
    api.py, DefaultLogsSpecs.reify), each with one training record and then
    what the test gives."""
    files = []
    for rank, lines in errors.items():
        d = tmp_path / node / "10889_zhbb_9hb" / "attempt_0" / str(rank)
        d.mkdir(parents=True)
        path = d / "stderr.log"
        path.write_text("[2021/05/24 17:16:50] ppocr INFO: epoch: [1/500], global_step: 10, lr: 0.001000, "
                        "loss: 2.000000, avg_reader_cost: 0.01000 s, avg_batch_cost: 0.50000 s, "
                        "ips: 32.00000 samples/s\n" + "".join(line + "\n" for line in lines))
        files.append(path)
    return files


def test_the_rank_is_read_from_torchruns_log_dir(tmp_path):
    """Files named stderr.log in torchrun's log directory: the directory
    above each is its local rank, which on one node is its rank. Without it
    the four files were numbered in the order given (here reversed), and
    rank 3's error was blamed on "rank 0"."""
    files = torchrun_log_dir(tmp_path, "node0", {0: SIGTERM_BLOCK, 1: SIGTERM_BLOCK, 2: SIGTERM_BLOCK,
                                                 3: traceback("IndexError: list index out of range")})
    report, _ = analyze_json(*reversed(files))
    (f,) = [f for f in report["findings"] if f["rule"] in ("crash", "killed")]
    assert f["title"] == "Rank 3 failed first; ranks 0-2 went down with it"
    assert f["file"].endswith("attempt_0/3/stderr.log")


def test_two_nodes_log_dirs_do_not_merge_their_local_ranks(tmp_path):
    """Two nodes' log directories both hold a local rank 0: read as rank 0
    both would be one rank. The path cannot say which node is which
    (group_rank), so the directories' numbers are not taken as ranks: the
    files are numbered in the order given, and trainwatch says why."""
    a = torchrun_log_dir(tmp_path, "node-a", {0: traceback("IndexError: list index out of range")})
    b = torchrun_log_dir(tmp_path, "node-b", {0: SIGTERM_BLOCK})
    report, result = analyze_json(*a, *b)
    (f,) = [f for f in report["findings"] if f["rule"] in ("crash", "killed")]
    assert f["title"] == "Rank 0 failed first; rank 1 went down with it"
    assert "log directories of 2 torchrun agents (nodes)" in result.stderr
    assert "local ranks" in result.stderr


def test_no_launcher_report_no_launcher_evidence(corpus):
    """The IBOT job has no launcher output among its logs: nothing is said of one."""
    report, _ = ibot(corpus, "--launch", "all")
    assert not any("launcher's report" in f["evidence"] or "launcher named" in f["evidence"]
                   for f in report["findings"])


DEVICES = pathlib.Path(__file__).resolve().parents[1] / "corpus-extra" / "devices"


@pytest.mark.parametrize("name,line,ranks,bus", [("verl-161-nccl-duplicate-gpu.log", 4, "1, 0", "10"),
                                                  ("mambair-39-nccl-duplicate-gpu.log", 11, "2, 0", "4000")])
def test_nccl_says_two_ranks_share_a_gpu(name, line, ranks, bus):
    """Real logs (verl issue 161, MambaIR issue 39): NCCL's own "Duplicate
    GPU detected : rank 1 and rank 0 both on CUDA device 10" under the
    DistBackendError line, with no traceback header before it in the excerpt.
    Read as nothing before (no event at all). Other public forms of the fault
    (several ranks' Place(gpu:N) or NCCL cudaDev init lines on one index, OOM
    messages listing the other ranks' PIDs) were searched for in committed
    logs and issue threads (find_string "Duplicate GPU detected", the issues
    corpus for DDP OOMs on GPU 0) without a multi-rank log set to add: the
    per-rank test above runs the demo trainer as four ranks on one GPU."""
    report, _ = analyze_json(DEVICES / name)
    (f,) = [f for f in report["findings"] if f["rule"] == "shared_device"]
    assert f["title"] == f"2 ranks ({ranks}) use the same GPU, CUDA device {bus} (NCCL's bus id)"
    assert f["line"] == line and f["severity"] == "warning"
    assert f"NCCL error: Duplicate GPU detected : rank {ranks.split(', ')[0]} and rank" in f["evidence"]
    assert "LOCAL_RANK" in f["recommendation"] and "FLAGS_selected_gpus" in f["recommendation"]
    (crash,) = [f for f in report["findings"] if f["rule"] == "crash"]
    assert crash["line"] == line  # the cause's line, not the DistBackendError's
    assert crash["evidence"].startswith("NCCL error: Duplicate GPU detected")


def test_two_nodes_workerlogs_of_one_local_rank_do_not_merge(tmp_path, corpus):
    """A two-node Paddle job leaves node0/log/workerlog.0 and
    node1/log/workerlog.0: each node numbers its workers by local rank. Read
    by name both were rank 0, one rank: the two processes' launches
    interleaved (4 launches) and the report said nothing of two ranks. The
    real RT-DETR pair (ranks 0 and 1 of one job) is copied into that layout:
    numbered in the order given, it reads as the pair does under its own
    names, and trainwatch says why."""
    src = corpus / "paddle-distributed"
    paths = []
    for node, name in (("node0", "ppdet-rtdetr-2gpu-sigterm-workerlog.0"), ("node1", "ppdet-rtdetr-2gpu-sigterm-workerlog.1")):
        d = tmp_path / node / "log"
        d.mkdir(parents=True)
        (d / "workerlog.0").write_bytes((src / name).read_bytes())
        paths.append(d / "workerlog.0")
    report, result = analyze_json(*paths)
    own, _ = analyze_json(src / "ppdet-rtdetr-2gpu-sigterm-workerlog.0", src / "ppdet-rtdetr-2gpu-sigterm-workerlog.1")
    assert [(f["rule"], f["title"]) for f in report["findings"]] == [(f["rule"], f["title"]) for f in own["findings"]]
    assert len(report["launches"]) == len(own["launches"]) == 2
    assert "both name rank 0 from different directories" in result.stderr and "local ranks" in result.stderr


def test_rotated_files_of_one_rank_in_one_directory_stay_one_rank(tmp_path, corpus):
    """workerlog.0 and workerlog.0.1 side by side are one rank's files (the
    same number in one directory): nothing is renumbered."""
    src = corpus / "paddle-distributed" / "ppdet-rtdetr-2gpu-sigterm-workerlog.0"
    text = src.read_text().splitlines(keepends=True)
    (tmp_path / "workerlog.0.1").write_text("".join(text[: len(text) // 2]))
    (tmp_path / "workerlog.0").write_text("".join(text[len(text) // 2:]))
    report, result = analyze_json(tmp_path / "workerlog.0.1", tmp_path / "workerlog.0")
    assert "different directories" not in result.stderr
    assert {r["rank"] for r in report["rank_health"]} == {0}


def test_the_straggler_says_what_keeping_pace_would_save(tmp_path):
    """Four ranks, rank 3 taking 0.3 s a step where the others take 0.1 s:
    the straggler finding says what the run would save if it kept pace,
    per step and, with nothing saying how many steps are planned, over the
    steps logged, in GPU time on the four GPUs that all wait for it. With a
    plan in the log (PaddleClas's [Epoch 1/2][Iter: 50/100]), over the
    steps left (the medians are the step-time histograms', so two minutes
    may read 1m59s)."""
    logs = []
    for rank in range(4):
        cost = 0.3 if rank == 3 else 0.1
        log = tmp_path / f"workerlog.{rank}"
        log.write_text("".join(f"step: {i}, loss: {2.0 / (1 + i / 10)}, lr: 0.1, batch_cost: {cost}\n"
                               for i in range(1, 101)))
        logs.append(log)
    r = run(["trainwatch", "analyze", "--json", *logs])
    f = [f for f in json.loads(r.stdout)["findings"] if f["rule"] == "straggler"]
    assert len(f) == 1 and f[0]["rank"] == 3, r.stdout
    evidence = f[0]["evidence"]
    assert "if rank 3 kept pace with the others, a step would take 0.100s instead of 0.300s" in evidence, evidence
    assert re.search(r"over the 100 steps logged that is 20(\.0)?s of 30(\.0)?s: 1m20s of GPU time on 4 GPUs",
                     evidence), evidence

    for rank in range(4):
        cost = 0.3 if rank == 3 else 0.1
        logs[rank].write_text("".join(
            f"[2026/05/28 20:{i // 60:02d}:{i % 60:02d}] ppcls INFO: [Train][Epoch 1/2][Iter: {i}/100]"
            f"lr(LinearWarmup): 0.10000000, CELoss: {2.0 / (1 + i / 10):.5f}, loss: {2.0 / (1 + i / 10):.5f}, "
            f"batch_cost: {cost:.5f}s, reader_cost: 0.00100, ips: 640.0 samples/s, eta: 0:05:00\n"
            for i in range(1, 51)))
    r = run(["trainwatch", "analyze", "--json", *logs])
    f = [f for f in json.loads(r.stdout)["findings"] if f["rule"] == "straggler"]
    assert len(f) == 1 and f[0]["rank"] == 3, r.stdout
    assert re.search(r"the 150 steps left would take 15(\.0)?s instead of 45(\.0)?s: (1m59s|2m0?s) of GPU time saved on 4 GPUs",
                     f[0]["evidence"]), f[0]["evidence"]
