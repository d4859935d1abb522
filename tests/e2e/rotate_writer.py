"""A log writer for the rotation tests: appends numbered steps to PATH and
rotates it every EVERY steps, alternating (or mixing at random) a rename
rotation (PATH -> PATH.1 -> PATH.2 ..., then a new PATH) and a copy-truncate
(copy PATH to PATH.1, truncate PATH in place).

usage: rotate_writer.py PATH LINES EVERY [SEED] [PAUSE] [KEEP] [options]
(KEEP rotated generations are kept; older ones are deleted, as logrotate does)

options:
  --format ppocr|olmo|traceback
        ppocr: one line per step; olmo: a header line and indented metrics
        per step (a multi-line block); traceback: ppocr steps with a Python
        traceback (RuntimeError: failure N) after every 7th step
  --chunk BYTES   write in chunks of this many bytes, as a block-buffered
                  writer does: lines are split between writes (and between
                  a copy and the truncated file); 0: one write per step
  --rotate mixed|copytruncate|rename
Prints the number of rotations, and with --format traceback the number of
tracebacks written.
"""
import argparse
import os
import random
import shutil
import time

parser = argparse.ArgumentParser()
parser.add_argument("path")
parser.add_argument("lines", type=int)
parser.add_argument("every", type=int)
parser.add_argument("seed", type=int, nargs="?", default=1)
parser.add_argument("pause", type=float, nargs="?", default=0.001)
parser.add_argument("keep", type=int, nargs="?", default=4)
parser.add_argument("--format", default="ppocr", choices=["ppocr", "olmo", "traceback"])
parser.add_argument("--chunk", type=int, default=0)
parser.add_argument("--rotate", default="mixed", choices=["mixed", "copytruncate", "rename"])
args = parser.parse_args()
path, keep = args.path, args.keep
rng = random.Random(args.seed)


def step_text(n):
    if args.format == "olmo":
        return (f"2025-12-27 22:14:36.270\thost:0\tolmo.train:990\tINFO\t[step={n}/100000,epoch=0]\n"
                f"    optim/total_grad_norm=1.014\n"
                f"    train/CrossEntropyLoss={1.0 / n:.6f}\n"
                f"    throughput/device/tokens_per_second=105,488\n")
    text = f"[2024/03/09 15:15:33] ppocr INFO: epoch: [1/9], global_step: {n}, lr: 0.001000, loss: {1.0 / n:.6f}\n"
    if args.format == "traceback" and n % 7 == 0:
        text += ("Traceback (most recent call last):\n"
                 "  File \"train.py\", line 12, in <module>\n"
                 "    main()\n"
                 f"  File \"train.py\", line {n}, in main\n"
                 "    raise RuntimeError(\"failure\")\n"
                 f"RuntimeError: failure {n}\n")
    return text


def shift():
    for k in range(keep - 1, 0, -1):
        if os.path.exists(f"{path}.{k}"):
            os.replace(f"{path}.{k}", f"{path}.{k + 1}")  # the oldest is replaced: it goes


fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
pending = b""
rotations = tracebacks = 0


def write(data, flush=False):
    """Writes whole chunks (all of it when flush or --chunk 0)."""
    global pending
    pending += data
    size = args.chunk
    while pending and (size == 0 or flush or len(pending) >= size):
        take = len(pending) if size == 0 or (flush and len(pending) < size) else size
        os.write(fd, pending[:take])
        pending = pending[take:]


for n in range(1, args.lines + 1):
    write(step_text(n).encode())
    if args.format == "traceback" and n % 7 == 0:
        tracebacks += 1
    if n % args.every == 0:
        shift()
        rename = args.rotate == "rename" or (args.rotate == "mixed" and rng.random() < 0.5)
        if rename:
            write(b"", flush=True)  # a writer flushes before it closes and reopens
            os.close(fd)
            os.replace(path, f"{path}.1")
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        else:
            # what the writer has not written yet stays in its buffer:
            # with --chunk the copy may end inside a line
            shutil.copyfile(path, f"{path}.1")
            os.truncate(path, 0)
        rotations += 1
        time.sleep(args.pause)
write(b"", flush=True)
os.close(fd)
print(rotations if args.format != "traceback" else f"{rotations} {tracebacks}")
