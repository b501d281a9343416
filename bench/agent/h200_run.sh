#!/bin/bash
# The H200 run of issue 6 (docs/PERFORMANCE.md "agent"): the agent beside the hook in a real
# training loop. Runs on the device machine from the repository root, with the agent binary
# built here and carried: .device/bin/fragscope (stripped) and .device/lib (its shared
# libraries from `ldd`, libc and libm excepted). $OUT receives the results.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python
LOG=$OUT/log.txt
exec > >(tee -a "$LOG") 2>&1
nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv
python3 -c 'import torch, transformers; print(torch.__version__, transformers.__version__)'
uname -a; nproc
RANKDIR=/dev/shm/fragscope-demo
mkdir -p $RANKDIR || { RANKDIR=/tmp/fragscope-demo; mkdir -p $RANKDIR; }
# The shipped thresholds, but rules fire after 5 s (not 2 min) and retries count over 60 s.
cat > /tmp/agent.toml <<'TOML'
[thresholds]
hold_for_seconds = 5
retry_window_seconds = 60
[actions.checkpoint]
enabled = true
min_interval_seconds = 30
[actions.drain]
enabled = true
dry_run = true
rules = ["fragmentation", "alloc_retries"]
command = ["kubectl", "drain", "{node}", "--ignore-daemonsets"]
TOML
export LD_LIBRARY_PATH=$PWD/.device/lib
.device/bin/fragscope --version || { echo "agent binary does not run here"; ldd .device/bin/fragscope; }
.device/bin/fragscope agent --listen 127.0.0.1:9478 --rank-dir $RANKDIR --config /tmp/agent.toml \
  --poll-interval 0.5 --stale-after 30 --event-log $OUT/events.jsonl &
AGENT=$!
unset LD_LIBRARY_PATH
sleep 1
python3 - <<'PY'
import urllib.request
print(urllib.request.urlopen("http://127.0.0.1:9478/healthz").read())
m = urllib.request.urlopen("http://127.0.0.1:9478/metrics").read().decode()
print("\n".join(l for l in m.splitlines() if l.startswith(("fragscope_nvml_up", "fragscope_gpu_"))))
PY
T0=$(date +%s)
python3 bench/agent/h200_monitor_run.py --out $OUT/run --agent-port 9478 --rank-dir $RANKDIR \
  --history-entries "${HISTORY_ENTRIES:-0}"
echo "run took $(( $(date +%s) - T0 )) s"
echo "agent: $(grep -E 'VmRSS|VmHWM' /proc/$AGENT/status | tr -s ' ' | tr '\n' ' ')" \
  "cpu_ticks=$(awk '{print $14+$15}' /proc/$AGENT/stat) clk=$(getconf CLK_TCK)"
kill $AGENT; wait $AGENT; echo "agent exit $?"
cp $OUT/run/results.json $OUT/run/metrics_overhead.txt $OUT/run/metrics_push.txt $OUT/ 2>/dev/null
# The doctor on what the hook dumped at the OOM (snapshot with its trace when HISTORY_ENTRIES is set).
if [ -f $OUT/run/telemetry/rank0/snapshot_at_oom.pickle ]; then
  export LD_LIBRARY_PATH=$PWD/.device/lib
  .device/bin/fragscope doctor $OUT/run/telemetry/rank0 > $OUT/doctor.txt; echo "doctor exit $?"
  .device/bin/fragscope doctor $OUT/run/telemetry/rank0 --json > $OUT/doctor.json
  .device/bin/fragscope analyze $OUT/run/telemetry/rank0/snapshot_at_oom.pickle > $OUT/analyze.txt
  unset LD_LIBRARY_PATH
  # What the doctor read, in one file: the hook's OOM dump and the rank's telemetry.
  gzip $OUT/run/telemetry/rank0/snapshot_at_oom.pickle
  tar -C $OUT/run/telemetry -czf $OUT/oom_dump.tar.gz rank0
fi
rm -rf $OUT/run
ls -la $OUT
