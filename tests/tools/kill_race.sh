#!/bin/bash
# kill_race.sh: test_watch.py's test_more_than_64_generations_with_kill_9
# outside pytest, with what it needs to be understood: the writer's exact
# load (2000 steps, a rotation every 10, mixed rename and copy-truncate,
# tracebacks, 1 KiB chunks that split lines, 200 generations kept), the
# watcher killed with SIGKILL every 0.5-1.4 s, and at each kill a copy of
# the state and of the records (state.K, rec.K) to see which restart went
# wrong. On the ASan build with the machine loaded (two `yes` loops) it
# loses a line in some runs (see the session notes of 2026-12-04); prints
# the kills, the steps missing, the steps counted twice and the folder kept.
# usage: tests/tools/kill_race.sh BUILD_DIR [WRITER_SEED [KILL_SEED]]
B=$(cd "$1" && pwd); SEED=${2:-5}; KS=${3:-1}
HERE=$(cd "$(dirname "$0")/../e2e" && pwd)
D=$(mktemp -d /tmp/tw-kill-race.XXXXXX) && cd "$D" && : > train.log
start() { "$B/trainwatch" watch --web.listen-address none --state state --records records.jsonl --from-start train.log 2>>err.txt >/dev/null & W=$!; }
steps() {
    /usr/bin/python3 -c "
import json
s = [json.loads(l)['trainwatch'] for l in open('records.jsonl').read().split('\n')[:-1]]
s = [r.get('global_step') for r in s if r['kind'] == 'step']
print($1)"
}
start
for i in $(seq 50); do grep -q train.log state 2>/dev/null && break; sleep 0.1; done
/usr/bin/python3 "$HERE/rotate_writer.py" train.log 2000 10 "$SEED" 0.02 200 --format traceback --chunk 1024 > w.out & P=$!
RANDOM=$KS; k=0
while kill -0 $P 2>/dev/null; do
    sleep 0.$((RANDOM % 10 + 5)); kill -9 $W; wait $W 2>/dev/null; k=$((k + 1))
    cp state "state.$k" 2>/dev/null; cp records.jsonl "rec.$k" 2>/dev/null; start
done
for i in $(seq 60); do [ "$(steps 'len(set(s))')" -ge 2000 ] && break; sleep 1; done
kill $W; wait $W 2>/dev/null
echo "kills $k missing $(steps 'sorted(set(range(1, 2001)) - set(s))[:10]') twice $(steps 'len(s) - len(set(s))') ($D)"
