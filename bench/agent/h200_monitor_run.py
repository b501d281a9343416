#!/usr/bin/env python3
"""The hook in a real training loop on a GPU, with the node agent beside it.

1. Overhead: the fixtures' Llama workload (0.95 B parameters, bf16 autocast, AdamW, micro-batch
   4 x 2048 tokens) in alternating blocks of steps without and with fragscope.torch.Monitor;
   reports the step-time difference and the hook's own measured time per step.
2. Push toward fragmentation: long-lived 256 MiB tensors pin the starts of 1 GiB segments
   (the rest of each is freed but stranded), then the process is capped just above what it
   holds and trains on variable sequence lengths. The agent (started by the caller with its
   config) fires its rules, asks the rank to checkpoint (the loop does, and acknowledges), and
   logs a dry-run drain.

    h200_monitor_run.py --out DIR --agent-port PORT --rank-dir DIR

Writes DIR/results.json and DIR/metrics_*.txt (the agent's /metrics at phase ends); the hook's
telemetry goes to DIR/telemetry/rank0/steps.jsonl.
"""

import argparse
import json
import os
import random
import statistics
import time
import urllib.request

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from fragscope.torch import Monitor

GiB = 2 ** 30


def lengths(n, lo, hi, seed):
    """record.py's sequence lengths: log-normal, clipped, multiples of 8."""
    rng = random.Random(seed)
    return [int(max(lo, min(hi, rng.lognormvariate(7.0, 0.6)))) // 8 * 8 for _ in range(n)]


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def series(text, name, **labels):
    """Values of one metric in Prometheus text, filtered by labels."""
    out = []
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            out.append(float(line.rsplit(" ", 1)[1]))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--agent-port", type=int, required=True)
    p.add_argument("--rank-dir", required=True)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--block-steps", type=int, default=10)
    p.add_argument("--push-steps", type=int, default=40)
    p.add_argument("--stranded-segments", type=int, default=40)
    p.add_argument("--history-entries", type=int, default=0,
                   help="keep memory history on (the hook then dumps a snapshot with its trace at an OOM; "
                        "this adds to the measured overhead)")
    args = p.parse_args()
    results = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0)}

    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=2048, num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=16,
                      intermediate_size=5632, vocab_size=32000, max_position_embeddings=8192)
    cfg._attn_implementation = "sdpa"
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train(ids):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()  # the usual per-step logging sync

    # -- 1. overhead ------------------------------------------------------------------------
    batch = torch.randint(0, 32000, (4, 2048)).pin_memory()
    for _ in range(3):
        train(batch.to("cuda", non_blocking=True))
    mon = Monitor(os.path.join(args.out, "telemetry"), job="h200-demo", rank_dir=args.rank_dir,
                  largest_free_every=10, history_max_entries=args.history_entries or None)
    times = {False: [], True: []}
    for block in range(args.blocks):
        use = block % 2 == 1
        for _ in range(args.block_steps):
            t0 = time.perf_counter()
            if use:
                with mon.step(batch):
                    train(mon.to_device(batch))
            else:
                with mon.pause():  # unmonitored: not the next monitored step's data wait
                    train(batch.to("cuda", non_blocking=True))
            times[use].append(time.perf_counter() - t0)
    hook_s = mon._recorder.hook_s_total
    without, with_ = statistics.median(times[False]), statistics.median(times[True])
    results["overhead"] = {
        "steps_each": len(times[True]), "median_step_s_without": without, "median_step_s_with": with_,
        "mean_step_s_without": statistics.fmean(times[False]), "mean_step_s_with": statistics.fmean(times[True]),
        "median_difference_percent": 100.0 * (with_ - without) / without,
        "hook_s_per_step": hook_s / mon.steps, "hook_percent_of_step": 100.0 * hook_s / mon.steps / with_,
        "steps_recorded": mon.steps,
    }
    time.sleep(1.5)  # two agent polls
    metrics_a = scrape(args.agent_port)
    with open(os.path.join(args.out, "metrics_overhead.txt"), "w") as f:
        f.write(metrics_a)

    # -- 2. toward fragmentation ------------------------------------------------------------
    lens = lengths(args.push_steps + 6, 256, 4096, 1234)
    for L in lens[:6]:
        ids = torch.randint(0, 32000, (4, L)).pin_memory()
        with mon.step(ids):
            train(mon.to_device(ids))
    # Strand memory the way long-lived small tensors do in real jobs: each 1 GiB segment gets a
    # 256 MiB tensor that stays alive at its start; the 768 MiB behind it is freed but cannot be
    # returned to the driver (the segment is split), nor serve a request larger than itself.
    stranded_segments = args.stranded_segments
    torch.cuda.empty_cache()  # so the 256 MiB requests land in the fresh segments
    kept, fillers = [], []
    for _ in range(stranded_segments):
        whole = torch.empty(GiB, dtype=torch.uint8, device="cuda")  # a fresh 1 GiB segment
        del whole
        kept.append(torch.empty(256 * 2 ** 20, dtype=torch.uint8, device="cuda"))
        fillers.append(torch.empty(768 * 2 ** 20, dtype=torch.uint8, device="cuda"))
    del fillers
    reserved = torch.cuda.memory_reserved()
    total = torch.cuda.mem_get_info()[1]
    # Cap the process just above what it holds: a longer batch now needs the stranded memory.
    fraction = min(0.95, (reserved + 2 * GiB) / total)
    torch.cuda.set_per_process_memory_fraction(fraction)
    results["push"] = {"stranded_segments": stranded_segments, "reserved_after_stranding": reserved,
                       "memory_fraction": fraction}
    ooms, checkpoints, trajectory = 0, 0, []
    t_push = time.time()
    for i, L in enumerate(lens[6:]):
        ids = torch.randint(0, 32000, (4, L)).pin_memory()
        try:
            with mon.step(ids):
                train(mon.to_device(ids))
        except torch.cuda.OutOfMemoryError:
            ooms += 1
            opt.zero_grad(set_to_none=True)
        time.sleep(0.2)  # the agent polls every 0.5 s; rules hold for 5 s
        if mon.checkpoint_requested:
            with mon.phase("checkpoint"):
                torch.save({k: v.detach().cpu() for k, v in list(model.state_dict().items())[:8]},
                           "/tmp/fragscope-demo-ckpt.pt")
            checkpoints += 1
        s = torch.cuda.memory_stats()
        trajectory.append({"step": mon.steps, "seq_len": L, "t": round(time.time() - t_push, 2),
                           "fragmentation_ratio": s["inactive_split_bytes.all.current"]
                           / max(1, s["reserved_bytes.all.current"]),
                           "reserved": s["reserved_bytes.all.current"], "retries": s["num_alloc_retries"],
                           "ooms": s["num_ooms"]})
    time.sleep(2.0)
    metrics_b = scrape(args.agent_port)
    with open(os.path.join(args.out, "metrics_push.txt"), "w") as f:
        f.write(metrics_b)
    results["push"].update({"steps": len(lens) - 6, "ooms_caught": ooms, "checkpoints_taken": checkpoints,
                            "trajectory": trajectory,
                            "agent_fragmentation_ratio": series(metrics_b, "fragscope_fragmentation_ratio"),
                            "agent_alerts": {r: series(metrics_b, "fragscope_agent_alerts", rule=r)
                                             for r in ("fragmentation", "alloc_retries", "hbm_used", "data_wait")},
                            "agent_checkpoint_acks": series(metrics_b, "fragscope_checkpoint_acks_total"),
                            "agent_nvml_up": series(metrics_b, "fragscope_nvml_up"),
                            "agent_gpu_used": series(metrics_b, "fragscope_gpu_memory_used_bytes"),
                            "agent_gpu_total": series(metrics_b, "fragscope_gpu_memory_total_bytes")})
    mon.close()
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(json.dumps({k: v for k, v in results.items() if k != "push"}, indent=1))
    print(json.dumps({k: v for k, v in results["push"].items() if k != "trajectory"}, indent=1))


if __name__ == "__main__":
    main()
