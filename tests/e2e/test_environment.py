"""The environment and configuration a log states, shown in the summary and
compared across the ranks of a launch and across launches. Real logs from
../shared/corpus and tests/corpus-extra."""
import pathlib

from conftest import analyze_json, run

EXTRA = pathlib.Path(__file__).resolve().parents[1] / "corpus-extra" / "paddle-distributed"
SEG = "paddle-suites/paddleseg-encnet-4gpu-workerlog.0.excerpt.log"


def test_a_launch_on_other_gpus_than_the_one_before_is_flagged(corpus):
    """PaddleSeg ENCNet: launch 1 ran on 2 GPUs (line 8), launch 2 on 4 (line
    140), with the same per-GPU batch size: another global batch."""
    report, _ = analyze_json(corpus / SEG)
    (f,) = [f for f in report["findings"] if f["rule"] == "environment_changed"]
    assert f["title"] == "Launch 2 ran with GPUs used 4 where launch 1 had 2"
    assert f["severity"] == "warning" and f["launch"] is None and f["line"] == 140
    assert "launch 2: CUDA_VISIBLE_DEVICES 0,1 -> 0,1,2,3 (" in f["evidence"]
    assert report["summary"]["environment"] == ("cudnn 8.1, GPUs used 4, CUDA_VISIBLE_DEVICES 0,1,2,3, "
                                                 "PaddlePaddle 2.2.0, batch_size 2")
    first, _ = analyze_json("--launch", "1", corpus / SEG)
    assert "GPUs used 2" in first["summary"]["environment"]
    text = run(["trainwatch", "analyze", "--no-color", corpus / SEG]).stdout
    assert "  environment    cudnn 8.1, GPUs used 4," in text


def test_the_same_environment_everywhere_is_not_flagged(corpus):
    """IBOT: four ranks, seven launches, one commit and one configuration."""
    files = [corpus / "paddle-errors/ibot-launch-crashes-workerlog.0"] + \
        [EXTRA / f"ibot-4gpu-launch-crashes-workerlog.{i}" for i in (1, 2, 3)]
    report, _ = analyze_json("--launch", "all", *files)
    assert not {f["rule"] for f in report["findings"]} & {"environment_differs", "environment_changed"}
    assert report["summary"]["environment"].startswith("git commit ed03951a885c784a1cdd55afb95472c7e6f17404")


def test_ranks_in_different_environments_are_flagged(tmp_path):
    """Two ranks stating different Paddle versions (lines in PaddleSeg's
    Environment Information wording; no public log with this was found)."""
    for rank, version in ((0, "2.2.0"), (1, "2.3.1")):
        (tmp_path / f"workerlog.{rank}").write_text(
            f"PaddlePaddle: {version}\n"
            + "".join(f"[TRAIN] epoch: 1, iter: {i * 10}/100, loss: {1.0 / i:.4f}, lr: 0.01, batch_cost: 1.0, "
                      f"reader_cost: 0.01, ips: 2.0 samples/sec | ETA 00:01:00\n" for i in range(1, 6)))
    report, _ = analyze_json(tmp_path / "workerlog.0", tmp_path / "workerlog.1")
    (f,) = [f for f in report["findings"] if f["rule"] == "environment_differs"]
    assert f["title"] == "Ranks differ in PaddlePaddle: 2.2.0 on rank 0, 2.3.1 on rank 1"
    assert f["rank"] == 1 and f["line"] == 1 and f["file"].endswith("workerlog.1")
