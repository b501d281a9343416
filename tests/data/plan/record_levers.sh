#!/bin/bash
# Records the runs of levers.txt (one per line: name, record_levers.py arguments, an optional
# ENV=<PYTORCH_CUDA_ALLOC_CONF>) on one GPU, four processes at a time (each process has its own
# caching allocator; the four largest fit the card together). Results under $OUT.
set -u
cd "$(dirname "$0")"
R=/tmp/levers; mkdir -p $R $OUT
export PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv
  for m in torch transformers bitsandbytes torchao lion_pytorch liger_kernel; do
    python3 -c "import $m; print('$m', getattr($m, '__version__', '?'))" 2>&1 | tail -1
  done
} > $OUT/env.txt 2>&1
python3 - > $OUT/sources.txt 2>&1 <<'PY'
import inspect, importlib
for mod, names in [("transformers.modeling_layers", ["GradientCheckpointingLayer.__call__"]),
                   ("transformers.models.llama.modeling_llama", ["LlamaModel.forward", "LlamaForCausalLM.forward"]),
                   ("torch.optim.adam", ["Adam._init_group", "_single_tensor_adam", "_fused_adam"]),
                   ("torch.optim.sgd", ["SGD._init_group", "_multi_tensor_sgd"]),
                   ("bitsandbytes.optim.optimizer", ["Optimizer8bit.step", "Optimizer2State.init_state",
                                                     "Optimizer2State.update_step"])]:
    try:
        m = importlib.import_module(mod)
    except Exception as e:
        print("##", mod, "unavailable:", e); continue
    for n in names:
        obj = m
        try:
            for part in n.split("."): obj = getattr(obj, part)
            print("##", mod, n); print(inspect.getsource(obj))
        except Exception as e:
            print("##", mod, n, "unavailable:", e)
PY
one() {
  local name=$1; shift
  local env="" args=()
  for a in "$@"; do case $a in ENV=*) env=${a#ENV=} ;; *) args+=("$a") ;; esac; done
  PYTORCH_CUDA_ALLOC_CONF=$env timeout 120 python3 record_levers.py $name --out $R/$name "${args[@]}" > $R/$name.log 2>&1
  echo "== $name rc=$? $(tail -1 $R/$name.log)"
}
export -f one; export R
grep -v '^#' levers.txt | grep . | timeout 170 xargs -P 4 -L 1 bash -c 'one "$@"' _ | tee $OUT/runs.txt
tar czf $OUT/levers.tgz -C $R --exclude='snapshot.pickle' .
(cd $R && ls */snapshot.pickle 2>/dev/null | tar cf - -T - | xz -T0 -6 > /tmp/snaps.tar.xz) && split -b 15m /tmp/snaps.tar.xz $OUT/snaps.tar.xz.
ls -la $OUT
