"""A log writer for the rotation tests: appends numbered ppocr-style lines to
PATH and rotates it every EVERY lines, alternating (or mixing at random) a
rename rotation (PATH -> PATH.1 -> PATH.2 ..., then a new PATH) and a
copy-truncate (copy PATH to PATH.1, truncate PATH in place).

usage: rotate_writer.py PATH LINES EVERY [SEED] [PAUSE] [KEEP]
(KEEP rotated generations are kept; older ones are deleted, as logrotate does)
"""
import os
import random
import shutil
import sys
import time

path, lines, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0.001
keep = int(sys.argv[6]) if len(sys.argv) > 6 else 4


def shift():
    for k in range(keep - 1, 0, -1):
        if os.path.exists(f"{path}.{k}"):
            os.replace(f"{path}.{k}", f"{path}.{k + 1}")


out = open(path, "a")
rotations = 0
for n in range(1, lines + 1):
    out.write(f"[2024/03/09 15:15:33] ppocr INFO: epoch: [1/9], global_step: {n}, lr: 0.001000, loss: {1.0 / n:.6f}\n")
    out.flush()
    if n % every == 0:
        shift()
        if rng.random() < 0.5:
            out.close()
            os.replace(path, f"{path}.1")
            out = open(path, "a")
        else:
            shutil.copyfile(path, f"{path}.1")
            out.truncate(0)
            out.seek(0)
        rotations += 1
        time.sleep(pause)
out.close()
print(rotations)
