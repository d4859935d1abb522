#!/bin/bash
# rotation_race.sh: the watch rotation torture outside pytest, to chase rare
# races on a slow (ASan) build, where the watcher lags the writer and is
# killed with SIGKILL at set moments (it found a generation read twice, a
# last generation never read, and a copy-truncate missed by a restart that
# had read nothing of the file yet; all fixed). Prints records, duplicates
# and missing steps, and with --format traceback the exceptions; run it in
# a loop with different seeds.
# usage: tests/tools/rotation_race.sh BUILD_DIR KEEP_GENERATIONS [KILLS [SEED [writer options...]]]
#   e.g. rotation_race.sh build-asan 8 12 2 --format olmo --chunk 700
#        rotation_race.sh build-asan 150 0            (more than 64 generations)
B=$(cd "$1" && pwd); K=$2; KILLS=${3:-0}; SEED=${4:-1}; shift 4 2>/dev/null || shift $#
HERE=$(cd "$(dirname "$0")/../e2e" && pwd)
D=$(mktemp -d /tmp/tw-rotation-race.XXXXXX) && cd "$D" && : > train.log
start() { "$B/trainwatch" watch --web.listen-address none --state state --records records.jsonl --from-start train.log 2>>err.txt >/dev/null & W=$!; }
start
for i in $(seq 50); do grep -q train.log state 2>/dev/null && break; sleep 0.1; done
if [ "$KILLS" -gt 0 ]; then TOTAL=400 EVERY=40 PAUSE=0.3; else TOTAL=24000 EVERY=20 PAUSE=0.001; fi
/usr/bin/python3 "$HERE/rotate_writer.py" train.log $TOTAL $EVERY "$SEED" $PAUSE "$K" "$@" > w.out & P=$!
for i in $(seq "$KILLS"); do sleep 0.4; kill -9 $W; wait $W 2>/dev/null; start; done
wait $P; sleep 4; kill $W; wait $W 2>/dev/null
/usr/bin/python3 -c "
import collections, json, sys
recs = [json.loads(l) for l in open('records.jsonl')]
s = [r['global_step'] for r in recs if r['kind'] == 'step']
c = collections.Counter(s); d = [k for k, v in c.items() if v > 1]; m = set(range(1, $TOTAL + 1)) - set(s)
ex = [r['message'] for r in recs if r['kind'] == 'event' and r['event'] == 'exception']
print('records', len(s), 'dups', len(d), sorted(d)[:3], 'missing', len(m), sorted(m)[:3],
      'exceptions', len(ex), 'distinct', len(set(ex)), 'writer', open('w.out').read().split())"
echo "(kept in $D)"
