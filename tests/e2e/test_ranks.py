"""Reading the ranks of a launch together: the rank that failed first is the
cause, and the ranks that were then terminated by the launcher, lost their
peers or stopped logging are its victims, named in the same finding; no rank
is blamed for stopping when another failed first. Real logs: the shared
corpus and tests/corpus-extra (see its SOURCES.md)."""
import pathlib

import pytest

from conftest import analyze_json, run

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


def test_ranks_on_one_gpu_are_said_with_each_ranks_evidence(tmp_path):
    """Two ranks both print Paddle's device line for GPU 0 and rank 1 runs out
    of memory there. Synthetic: no public log with this fault was found; the
    lines are Paddle's own wording (gpu_resources.cc, ResourceExhaustedError)."""
    lines = {
        0: ["W0405 08:31:56.274407 2488321 gpu_resources.cc:61] Please NOTE: device: 0, GPU Compute Capability: 8.6, "
            "Driver API Version: 11.5, Runtime API Version: 11.5"],
        1: ["W0405 08:31:56.741673 2488326 gpu_resources.cc:61] Please NOTE: device: 0, GPU Compute Capability: 8.6, "
            "Driver API Version: 11.5, Runtime API Version: 11.5",
            "ResourceExhaustedError: Out of memory error on GPU 0. Cannot allocate 1.2GB memory on GPU 0, 22.1GB "
            "memory has been allocated and available memory is only 300.0MB."],
    }
    for rank, text in lines.items():
        (tmp_path / f"workerlog.{rank}").write_text("\n".join(text) + "\n")
    report, _ = analyze_json(tmp_path / "workerlog.0", tmp_path / "workerlog.1")
    (f,) = [f for f in report["findings"] if f["rule"] == "shared_device"]
    assert f["title"] == "2 ranks (0, 1) use the same GPU, device 0" and f["severity"] == "warning"
    assert f["rank"] == 0 and f["line"] == 1 and f["file"].endswith("workerlog.0")
    assert "rank 0: Please NOTE: device: 0," in f["evidence"] and "rank 1: Please NOTE: device: 0," in f["evidence"]
    assert "rank 1 ran out of memory: ResourceExhaustedError: Out of memory error on GPU 0." in f["evidence"]
    assert "LOCAL_RANK" in f["recommendation"] and "FLAGS_selected_gpus" in f["recommendation"]


def test_ranks_on_their_own_gpus_are_not_said(corpus):
    """IBOT's four ranks use devices 4, 5, 6, 7."""
    report, _ = ibot(corpus, "--launch", "all")
    assert "shared_device" not in {f["rule"] for f in report["findings"]}
