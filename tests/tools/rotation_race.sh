#!/bin/bash
# rotation_race.sh: the watch rotation torture outside pytest, to chase
# rare races on a slow (ASan) build, where the watcher lags the writer (it
# found a generation read twice and a last generation never read, both
# fixed). Prints records, duplicates and missing steps; run it in a loop.
# usage: tests/tools/rotation_race.sh BUILD_DIR KEEP_GENERATIONS
B=$1; K=$2
rm -rf /tmp/tw-rotation-race && mkdir /tmp/tw-rotation-race && cd /tmp/tw-rotation-race && : > train.log
$B/trainwatch watch --web.listen-address none --state state --records records.jsonl --from-start train.log 2>err.txt >/dev/null &
W=$!
for i in $(seq 50); do grep -q train.log state 2>/dev/null && break; sleep 0.1; done
/usr/bin/python3 /work/main/tests/e2e/rotate_writer.py train.log 24000 20 1 0.001 $K > w.out
sleep 8; kill $W; wait $W 2>/dev/null
/usr/bin/python3 -c "
import json
s=[json.loads(l)['global_step'] for l in open('records.jsonl') if '\"step\"' in l]
import collections; c=collections.Counter(s); d=[k for k,v in c.items() if v>1]; m=set(range(1,24001))-set(s)
print('records',len(s),'dups',len(d),sorted(d)[:3],'missing',len(m),sorted(m)[:3])"
