"""The telling line: an error quoted by its message (not the line naming
it), the CUDA assertion behind a CUDA error, the deepest frame of the user's
own code, and out-of-memory errors told apart by kind, each counted once.

Real logs where public ones were found (the IBOT job in tests/corpus-extra;
excerpts of issue threads in tests/corpus-extra/telling-line and devices: a
PyTorch 2.1 OutOfMemoryError, Indexing.cu assertions, an NCCL error with its
"Last error:" cause, a PyTorch 2.x OOM of a fragmented cache, an OOM listing
seven other processes on the device). No public log was found with each OOM kind (one
allocation, fragmentation, growth, during evaluation), a device-side
assertion followed by its CUDA error in one contiguous excerpt, or Paddle's
ResourceExhaustedError block (searched: the issues corpus for "Out of memory
error on GPU 0. Cannot allocate ... Error Message Summary", which returned
TensorFlow threads only; "Assertion ... failed ... device-side assert
triggered", whose threads paste the two in separate comments or with
markdown added), so those logs come from running the demo trainer
(build/demo-train, a real training loop) with its faults: its simulated GPU
(--device-memory-mb) fails an allocation that does not fit the way Paddle's
allocator does (MemoryError, then the Error Message Summary's
ResourceExhaustedError with the pool's own sizes), in a step, in evaluation,
for memory that grew (--leak-mb) or for one oversized request (--oom-at);
--bad-label-at puts a label outside the classes in a batch and the loss's
bounds check fails as Paddle's cross_entropy_kernel.cu assertion, followed by
the CUDA error 719 it causes. Fragmentation and PyTorch's list of the
processes on a device are not in Paddle's message, so the demo cannot print
them: beside the real PyTorch messages for both, two tests keep a log written
here in PyTorch's own wording (its 1.x fragmentation message, and a short
message listing two processes), and say so."""
import pathlib
import re
import subprocess

import pytest

from conftest import CORPUS, analyze_json, binary

EXTRA = pathlib.Path(__file__).resolve().parents[1] / "corpus-extra" / "paddle-distributed"


def demo(tmp_path, *flags, code=1):
    """The demo trainer's log with these faults; its exit status checked."""
    log = tmp_path / "train.log"
    with open(log, "w") as out:
        result = subprocess.run([binary("demo-train"), "--epochs", "2", "--steps-per-epoch", "50",
                                 "--log-interval", "5", *flags], stdout=out, stderr=subprocess.STDOUT, timeout=120)
    assert result.returncode == code, log.read_text()[-2000:]
    return log


def line_of(log, text):
    """The 1-based number of the first line of log holding text."""
    return next(i for i, line in enumerate(log.read_text().splitlines(), 1) if text in line)


def only(report, rule):
    found = [f for f in report["findings"] if f["rule"] == rule]
    assert len(found) == 1, report["findings"]
    return found[0]


def ppocr_steps(mems):
    return "".join(
        f"[2024/03/09 15:00:{i:02d}] ppocr INFO: epoch: [1/500], global_step: {10 * (i + 1)}, lr: 0.001000, "
        f"loss: {2.0 - i * 0.01:.6f}, avg_reader_cost: 0.01000 s, avg_batch_cost: 0.50000 s, avg_samples: 16.0, "
        f"ips: 32.00000 samples/s, eta: 2 days, 20:01:28, max_mem_reserved: {m} MB\n" for i, m in enumerate(mems))


def oom_finding(tmp_path, text):
    log = tmp_path / "train.log"
    log.write_text(text)
    report, result = analyze_json(log)
    assert result.returncode == 1
    return only(report, "oom")


def test_paddle_message_below_its_name_is_quoted_and_counted_once(tmp_path):
    """The demo's device (64 MB) fills with --leak-mb 2: Paddle's MemoryError,
    then the summary's ResourceExhaustedError with its message two lines
    below: one failure, quoted by its message, at the message's line, with
    the frames of the traceback above it."""
    log = demo(tmp_path, "--device-memory-mb", "64", "--leak-mb", "2")
    report, result = analyze_json(log)
    assert result.returncode == 1
    f = only(report, "oom")
    message = re.search(r"^Out of memory error on GPU 0\. Cannot allocate .*$", log.read_text(), re.M).group(0)
    assert f["evidence"].startswith("ResourceExhaustedError: " + message)
    assert message.startswith("Out of memory error on GPU 0. Cannot allocate 2.000000MB memory on GPU 0, ")
    assert f["line"] == line_of(log, "Out of memory error on GPU 0")  # the message's line, not the name's
    assert "failures in all" not in f["evidence"]  # one failure, printed as MemoryError and in the summary
    crash = only(report, "crash")
    assert crash["evidence"].startswith("ResourceExhaustedError: " + message)
    assert "failure reports" not in crash["evidence"]
    assert 'deepest frame in your code: File "tools/program.py", line 301, in train' in crash["evidence"]


def test_one_allocation_too_large(tmp_path):
    """--oom-at 23 --oom-mb 20480: one 20 GiB request on the demo's 16 GiB device."""
    log = demo(tmp_path, "--oom-at", "23", "--oom-mb", "20480")
    report, _ = analyze_json(log)
    f = only(report, "oom")
    assert f["title"] == "Out of memory during training: one allocation too large for the device"
    assert "Cannot allocate 20.000000GB memory on GPU 0" in f["evidence"]
    assert "one request of 20.00 GiB, 125% of the device's 16.00 GiB" in f["evidence"]
    assert "last step reported before it: 20" in f["evidence"]


def test_fragmentation(tmp_path):
    """Written here in PyTorch 1.x's wording (reserved in total, not
    unallocated: the difference is computed); the real 2.x message is
    test_fragmentation_in_a_real_message's. Paddle's message (the demo's)
    says nothing of memory reserved but unallocated."""
    f = oom_finding(tmp_path, ppocr_steps([60000] * 5) + (
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity; "
        "60.10 GiB already allocated; 1.50 GiB free; 76.90 GiB reserved in total by PyTorch)\n"))
    assert f["title"] == "Out of memory during training: fragmentation"
    assert "16.80 GiB reserved by the allocator but unallocated, more than the 2.00 GiB asked for" in f["evidence"]
    assert "expandable_segments" in f["recommendation"]


def test_fragmentation_in_a_real_message():
    """PyTorch issue 152135 (real): 3.87 GiB reserved by PyTorch but
    unallocated, 4.9% of the 79.26 GiB device, and a request of 250 MiB that
    no block of it fit; the user's own words: "with 4gigs of free memory, the
    allocator is unable to create large enough segments". The numbers stand
    past the 240 bytes an event keeps (read from its detail). Before: a plain
    out-of-memory (the size guard was 5% of the device)."""
    report, result = analyze_json(TELLING / "pytorch-152135-oom-fragmentation.log")
    (f,) = [f for f in report["findings"] if f["rule"] == "oom"]
    assert f["title"].endswith(": fragmentation"), f["title"]
    assert "3.87 GiB reserved by the allocator but unallocated, more than the 250.0 MiB asked for" in f["evidence"]
    assert "expandable_segments" in f["recommendation"]
    assert result.returncode == 1


def test_memory_that_grew(tmp_path):
    """--leak-mb 2 keeps 2 MB more on the device every step; the demo's
    max_mem_reserved (the device's peak) rises until the 64 MB are gone."""
    log = demo(tmp_path, "--device-memory-mb", "64", "--leak-mb", "2")
    readings = [int(m) for m in re.findall(r"max_mem_reserved: (\d+) MB", log.read_text())]
    assert len(readings) >= 3 and readings[-1] > 1.25 * readings[0]
    report, _ = analyze_json(log)
    f = only(report, "oom")
    assert f["title"] == "Out of memory during training: memory that grew"
    assert f"device memory grew from {readings[0]:.1f} MiB to {max(readings):.1f} MiB before it" in f["evidence"]


def test_during_evaluation(tmp_path):
    """A 1 MB device: the training steps fit, the first evaluation's batch
    (the 1024 evaluation samples at once) does not."""
    log = demo(tmp_path, "--device-memory-mb", "1")
    report, _ = analyze_json(log)
    f = only(report, "oom")
    assert f["title"] == "Out of memory during evaluation: one allocation too large for the device"
    assert "Cannot allocate 1.125000MB memory on GPU 0" in f["evidence"]
    assert "evaluation batch size" in f["recommendation"]
    crash = only(report, "crash")
    assert 'deepest frame in your code: File "tools/program.py", line 571, in eval' in crash["evidence"]


def test_other_processes_in_pytorchs_message(tmp_path):
    """Written here in PyTorch 2's wording: Paddle's message (the demo's)
    lists no processes."""
    f = oom_finding(tmp_path, ppocr_steps([9000] * 5) + (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
        "79.15 GiB of which 9.81 MiB is free. Process 4011 has 40.10 GiB memory in use. Process 4012 has 39.03 GiB "
        "memory in use.\n"))
    assert "the message lists 2 processes holding memory on the device" in f["evidence"]


def test_device_side_assertion_is_the_cause_of_the_cuda_error(tmp_path):
    """--bad-label-at 27: label 32 of 32 classes; the cross-entropy's bounds
    check fails as Paddle's kernel assertion does, and the CUDA error 719 that
    follows is only its report: the assertion is quoted, at its line."""
    log = demo(tmp_path, "--bad-label-at", "27")
    report, result = analyze_json(log)
    assert result.returncode == 1
    f = only(report, "crash")
    assert f["evidence"].startswith("CUDA device-side assertion: cross_entropy_kernel.cu:1008 Assertion `false` failed. "
                                    "The value of label expected >= 0 and < 32, or == -100, but got 32. Please check "
                                    "label value. (reported as: OSError: (External) CUDA error(719)")
    assert f["line"] == line_of(log, "Assertion `false` failed")
    assert f["line"] < line_of(log, "CUDA error(719)")
    assert "last step logged before it: 25" in f["evidence"]
    assert "labels < num_classes" in f["recommendation"]
    assert "oom" not in {g["rule"] for g in report["findings"]}


def test_deepest_user_frame_on_a_real_log():
    """IBOT rank 1 alone, its launch at 09:44: the AssertionError (line 346)
    comes before the launcher's SIGTERM, so it is the error reported; it is
    raised in the user's own code, which is also the last frame: said once."""
    report, _ = analyze_json("--launch", "6", EXTRA / "ibot-4gpu-launch-crashes-workerlog.1")
    (f,) = [f for f in report["findings"] if f["rule"] in ("crash", "killed")]
    assert f["rule"] == "crash" and f["line"] == 346
    assert 'last frame: File "/home/xiejunlin/workspace/IBOT-Paddle/models/vision_transformer.py", line 198' in f["evidence"]
    assert "deepest frame in your code" not in f["evidence"]


TELLING = pathlib.Path(__file__).resolve().parents[1] / "corpus-extra" / "telling-line"


def test_pytorch_oom_past_the_message_limit_keeps_what_the_allocator_said():
    """QAnything issue 303 (real): PyTorch 2.1's one-line OutOfMemoryError,
    longer than an event keeps; its "Of the allocated memory 18.70 GiB is
    allocated by PyTorch" sentence came past the cut and was lost ('? allocated'),
    and 2.1 spells "total capacty"."""
    report, result = analyze_json(TELLING / "qanything-303-torch-oom-other-process.log")
    (f,) = [f for f in report["findings"] if f["rule"] == "oom"]
    assert f["line"] == 1
    assert f["evidence"].startswith("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 132.00 MiB. "
                                    "GPU 0 has a total capacty of 23.64 GiB of which 67.06 MiB is free.")
    assert "asked for 132.0 MiB on a device of 23.64 GiB: 18.70 GiB allocated, 67.1 MiB free" in f["evidence"]
    assert result.returncode == 1


def test_torch_oom_sizes_the_message_lacks_are_said_in_words(tmp_path):
    """Issue 27, item 5: a torch OOM without the allocated figure printed
    'with ? allocated'. The figures given are read (this process's memory in
    use too) and the missing one is named in words."""
    log = tmp_path / "oom.log"
    log.write_text(
        "step 1/9 - loss: 3.4 - 10ms/step\n"
        "step 2/9 - loss: 3.3 - 10ms/step\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB. GPU 5 has a total capacity of "
        "79.19 GiB of which 2.06 MiB is free. Including non-PyTorch memory, this process has 75.45 GiB memory in use.\n")
    report, _ = analyze_json(log)
    (f,) = [f for f in report["findings"] if f["rule"] == "oom"]
    assert "?" not in f["evidence"]
    assert ("asked for 2.0 MiB on a device of 79.19 GiB: this process had 75.45 GiB in use, 2.1 MiB free; "
            "the message does not say how much was allocated") in f["evidence"]
    log.write_text("step 1/9 - loss: 3.4 - 10ms/step\n"
                   "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB\n")
    report, _ = analyze_json(log)
    (f,) = [f for f in report["findings"] if f["rule"] == "oom"]
    assert "asked for 20.0 MiB; the message does not say how much was allocated or free" in f["evidence"]


def test_other_processes_listed_past_the_cut_are_counted():
    """unsloth (fork) issue 20 (real): rank 5's PyTorch OOM lists seven other
    processes on GPU 5, past the 240 bytes an event keeps; they are counted
    from the detail and the OOM is read as a shared device (before: one
    process seen, a plain out-of-memory with the batch-size advice only)."""
    report, result = analyze_json(TELLING.parent / "devices" / "unsloth-20-ddp-oom-seven-other-processes.log")
    (f,) = [f for f in report["findings"] if f["rule"] == "oom"]
    assert f["line"] == 1
    assert f["title"].endswith("a device shared with other processes"), f["title"]
    assert "the message lists 7 processes holding memory on the device" in f["evidence"]
    assert "LOCAL_RANK" in f["recommendation"]
    assert result.returncode == 1


def test_device_side_assertions_without_the_cuda_error_after_them():
    """lm-evaluation-harness issue 2293 (real): the Indexing.cu assertions,
    one per GPU thread, with the CUDA error not in the excerpt: the assertion
    is the error (no finding before)."""
    report, _ = analyze_json(TELLING / "lm-eval-2293-indexing-assertions.log")
    (f,) = [f for f in report["findings"] if f["rule"] == "crash"]
    assert f["evidence"].startswith("CUDA device-side assertion: Indexing.cu:1231: indexSelectSmallIndex: "
                                    "Assertion `srcIndex < srcSelectDimSize` failed.")
    assert "labels < num_classes" in f["recommendation"]


def test_an_nccl_error_is_quoted_by_its_cause():
    """MambaIR issue 39 (real): DistBackendError "NCCL error in: ...
    invalid usage", then "ncclInvalidUsage: ...", "Last error:" and the cause;
    the cause is quoted first, at its line."""
    report, _ = analyze_json(TELLING.parent / "devices" / "mambair-39-nccl-duplicate-gpu.log")
    (f,) = [f for f in report["findings"] if f["rule"] == "crash"]
    assert f["line"] == 11
    assert f["evidence"].startswith("NCCL error: Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 4000 "
                                    "(reported as: torch.distributed.DistBackendError: NCCL error in: ")


def filler(kind, extra):
    """300 real lines a long run repeats ahead of its error: nanoGPT's
    FutureWarning (tests/corpus-extra), or IBOT's NameError traceback (the
    shared corpus, its lines 34-41), the name numbered so that each is an
    exception of its own."""
    if kind == "warnings":
        log = (extra / "fallback/nanogpt-termux-shakespeare-train.log").read_text().splitlines()
        return "\n".join([next(l for l in log if "FutureWarning" in l)] * 300) + "\n"
    ibot = (CORPUS / "paddle-errors/ibot-launch-crashes-workerlog.0").read_text().splitlines(keepends=True)
    block = "".join(ibot[33:41])
    assert block.startswith("Traceback") and "NameError" in block
    return "".join(block.replace("name 'torch'", f"name 'torch{i}'") for i in range(300))


@pytest.mark.parametrize("kind,count,name,rule", [
    ("warnings", "warning", "telling-line/pytorch-152135-oom-fragmentation.log", "oom"),
    ("warnings", "warning", "launcher/repvit-65-console-elastic-failed-local2.log", "crash"),
    ("exceptions", "exception", "telling-line/pytorch-152135-oom-fragmentation.log", "oom"),
])
def test_hundreds_of_events_do_not_hide_the_error_after_them(tmp_path, name, rule, kind, count):
    """A run that logs a deprecation warning every step, or catches and logs
    an exception per bad sample, has hundreds of events; the error at the
    end must still be found. Before, the rules saw the first 256 events of
    a launch, so 300 of either ahead of a real OOM message or a real
    launcher report left the run with no finding of it at all."""
    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    extra = TELLING.parent
    log = tmp_path / "run.log"
    log.write_text(filler(kind, extra) + (extra / name).read_text())
    report, result = analyze_json(log)
    assert report["summary"]["event_counts"][count] >= 300
    assert rule in [f["rule"] for f in report["findings"]], [f["rule"] for f in report["findings"]]
    assert result.returncode == 1
