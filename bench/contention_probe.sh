#!/usr/bin/env bash
# How long an embedding process takes to start (bench/model_start.py) on an idle machine and
# beside one busy process a core, at the busy ones' nice 0 and nice 10 (what the Ray engine's
# prepare and build tasks step back to): does priority, or the cores' sharing, decide it?
# Usage: bash bench/contention_probe.sh MODEL_DIR
set -u
model=$1
python3 bench/model_start.py "$model" >/dev/null  # warms the file cache
echo "idle $(python3 bench/model_start.py "$model")"
for nice in 0 10; do
  pids=()
  for _ in $(seq "$(nproc)"); do nice -n "$nice" python3 -c "while True: pass" & pids+=($!); done
  sleep 1
  echo "busy-nice-$nice $(python3 bench/model_start.py "$model")"
  kill "${pids[@]}"; wait 2>/dev/null
done
