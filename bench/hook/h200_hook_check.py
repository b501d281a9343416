#!/usr/bin/env python3
"""The hook's three ways in, on a GPU: a forced OOM through each, and the capture's step overhead.

Run from the repository root on a machine with a CUDA GPU, torch and transformers (no network:
every model is random-initialised from a config). Under 4 minutes on an H200.

    python3 bench/hook/h200_hook_check.py --out /tmp/hookcheck [--fragscope build/src/cli/fragscope]

1. hf: a transformers Trainer with fragscope.integrations.hf.FragscopeCallback trains a tiny
   Llama under a memory budget; the 7th batch is 128x longer and runs out of memory. The
   exception ends the process (the callback's excepthook adds the message to meta.json).
2. no_code: a plain PyTorch loop that never imports fragscope, run under
   `python -m fragscope.run`, hits the same OOM.
   For both: while the process still lives, the rank file must exist under the rank folder and
   show the OOM (`ooms` >= 1); afterwards the dump folder must hold meta.json with the OOM message,
   stats.json, summary.txt, snapshot_at_oom.pickle and steps.jsonl, and `fragscope doctor` (with
   --fragscope) must read it (exit 0 or 1, not 2).
3. overhead: a 1024-wide, 8-layer Llama (batch 8 x 1024 tokens, bf16, AdamW, a DataLoader) in
   rounds of blocks without the capture, with it but without memory history, and with the full
   capture (history ring of 100,000 entries); steps/s of each, from the median block.
4. lightning: a short fit with fragscope.integrations.lightning.FragscopeCallback when Lightning
   is installed (steps.jsonl and the rank file), else "not installed".

Prints one JSON line with every result; --out keeps the files.
"""

import argparse
import glob
import json
import os
import struct
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUDGET_BYTES = 6 * 2 ** 30
OOM_AT_BATCH = 7  # the 7th batch is the long one


# -- helpers shared by the parts (no torch needed) ---------------------------------------------
def rank_file_state(rank_dir, pid):
    """The rank file this process published (searched below rank_dir), with step and ooms."""
    paths = glob.glob(os.path.join(rank_dir, "**", f"rank*-pid{pid}.fsr"), recursive=True)
    if not paths:
        return {"found": False}
    with open(paths[0], "rb") as f:
        raw = f.read(512)
    mode = os.stat(paths[0]).st_mode & 0o777
    return {"found": True, "path": paths[0], "mode": oct(mode), "magic_ok": raw[:8] == b"FRAGSCOP",
            "step": struct.unpack_from("<Q", raw, 80)[0], "ooms": struct.unpack_from("<Q", raw, 168)[0],
            "reserved_bytes": struct.unpack_from("<Q", raw, 96)[0]}


def tiny_llama(torch, hidden=256, layers=4):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=hidden, intermediate_size=hidden * 11 // 4, num_hidden_layers=layers,
                         num_attention_heads=max(4, hidden // 64), num_key_value_heads=max(4, hidden // 64),
                         vocab_size=32000, max_position_embeddings=65536)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


def cap_memory(torch):
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(BUDGET_BYTES / total)


class GrowingBatches:
    """Collator: batches of 8 x 256 random tokens, the OOM_AT_BATCH-th one 8 x 32768."""

    def __init__(self, torch):
        self.torch, self.calls = torch, 0

    def __call__(self, items):
        self.calls += 1
        length = 32768 if self.calls == OOM_AT_BATCH else 256
        ids = self.torch.randint(0, 32000, (len(items), length))
        return {"input_ids": ids, "labels": ids, "attention_mask": self.torch.ones_like(ids)}


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f)


# -- part 1: HF Trainer with the callback ------------------------------------------------------
def part_hf(out):
    import torch
    from transformers import Trainer, TrainingArguments

    from fragscope.integrations.hf import FragscopeCallback

    cap_memory(torch)
    args = TrainingArguments(output_dir=os.path.join(out, "hf-trainer"), max_steps=20, per_device_train_batch_size=8,
                             bf16=True, report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
                             remove_unused_columns=False, dataloader_num_workers=0)
    trainer = Trainer(model=tiny_llama(torch), args=args, train_dataset=[{"n": i} for i in range(1000)],
                      data_collator=GrowingBatches(torch),
                      callbacks=[FragscopeCallback(os.path.join(out, "hf"), job="h200-hf")])
    try:
        trainer.train()
    except torch.cuda.OutOfMemoryError:
        state = rank_file_state(os.environ["FRAGSCOPE_RANK_DIR"], os.getpid())
        write_json(os.path.join(out, "hf-rankfile.json"), state)
        raise  # ends the process as an OOM would: the excepthook puts the message into meta.json


# -- part 2: a plain loop, run under python -m fragscope.run -------------------------------------
def part_plain(out):
    import torch

    cap_memory(torch)
    model = tiny_llama(torch).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loader = torch.utils.data.DataLoader(list(range(1000)), batch_size=8, collate_fn=GrowingBatches(torch))
    try:
        for batch in loader:
            batch = {k: v.cuda() for k, v in batch.items()}
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(**batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    except torch.cuda.OutOfMemoryError:
        write_json(os.path.join(out, "plain-rankfile.json"),
                   rank_file_state(os.environ["FRAGSCOPE_RANK_DIR"], os.getpid()))
        raise


# -- part 3: the capture's overhead ---------------------------------------------------------------
def overhead_loop(torch):
    """The overhead's training loop (a 1024-wide, 8-layer Llama, batch 8 x 1024 tokens, bf16, AdamW, a DataLoader):
    a function that runs n steps and returns the mean seconds per step."""
    model = tiny_llama(torch, hidden=1024, layers=8).cuda().to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.utils.data.DataLoader(torch.randint(0, 32000, (2048, 1024)), batch_size=8)

    def forever():  # a new pass over the DataLoader each time: every batch goes through its iterator
        while True:
            yield from data

    batches = forever()

    def run_block(steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(steps):
            ids = next(batches).cuda(non_blocking=True)
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / steps

    return run_block


def part_overhead(out, rounds=4, block=20):
    import torch

    from fragscope import capture

    run_block = overhead_loop(torch)
    run_block(10)  # warm up
    configs = {"off": None, "capture_no_history": capture.Settings(out_dir=os.path.join(out, "overhead"),
                                                                   history_entries=0),
               "capture": capture.Settings(out_dir=os.path.join(out, "overhead"))}
    times = {name: [] for name in configs}
    hook_ms = []
    for _ in range(rounds):
        for name, settings in configs.items():
            running = capture.start(settings) if settings else None
            times[name].append(run_block(block))
            if running:
                recorder = running.watch.recorder
                hook_ms.append(recorder.hook_s_total / max(1, recorder.steps) * 1e3)
                capture.stop()
    median = {name: sorted(values)[len(values) // 2] for name, values in times.items()}
    result = {"step_ms": {name: round(value * 1e3, 3) for name, value in median.items()},
              "steps_per_s": {name: round(1 / value, 3) for name, value in median.items()},
              "overhead_pct": {name: round((median[name] / median["off"] - 1) * 100, 2)
                               for name in configs if name != "off"},
              "hook_ms_per_step": round(sorted(hook_ms)[len(hook_ms) // 2], 4), "rounds": rounds, "block": block,
              "blocks_ms": {name: [round(v * 1e3, 2) for v in values] for name, values in times.items()}}
    write_json(os.path.join(out, "overhead.json"), result)


# -- part 4: Lightning ------------------------------------------------------------------------------
def part_lightning(out):
    import torch
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl

    from fragscope.integrations.lightning import FragscopeCallback

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = tiny_llama(torch)

        def training_step(self, batch, batch_idx):
            return self.model(**batch).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    def short_batches(items):
        ids = torch.randint(0, 32000, (len(items), 256))
        return {"input_ids": ids, "labels": ids}

    loader = torch.utils.data.DataLoader(list(range(80)), batch_size=8, collate_fn=short_batches)
    callback = FragscopeCallback(os.path.join(out, "lightning"), job="h200-lightning")
    seen = {}

    class Probe(pl.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if batch_idx == 5:
                seen.update(rank_file_state(os.environ["FRAGSCOPE_RANK_DIR"], os.getpid()))

    trainer = pl.Trainer(max_steps=10, accelerator="gpu", devices=1, precision="bf16-mixed", logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, callbacks=[callback, Probe()],
                         default_root_dir=os.path.join(out, "lightning-root"))
    trainer.fit(Module(), loader)
    write_json(os.path.join(out, "lightning-rankfile.json"), seen)


PARTS = {"hf": part_hf, "plain": part_plain, "overhead": part_overhead, "lightning": part_lightning}


# -- the parent: runs each part in its own process and checks what it left --------------------------
def run_part(argv, out, name, timeout):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""),
               FRAGSCOPE_RANK_DIR=os.path.join(out, "shm", "fragscope"), PYTHONUNBUFFERED="1")
    start = time.perf_counter()
    with open(os.path.join(out, f"{name}.log"), "w") as log:
        try:
            status = subprocess.run(argv, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            status = "timeout"
    return status, round(time.perf_counter() - start, 1)


def log_tail(out, name, lines=5):
    with open(os.path.join(out, f"{name}.log"), errors="replace") as f:
        return f.read().splitlines()[-lines:]


def check_dump(folder, fragscope):
    """What an OOM left in `folder`, and what the doctor made of it."""
    files = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    result = {"files": files}
    try:
        with open(os.path.join(folder, "meta.json")) as f:
            meta = json.load(f)
        message = meta.get("oom_message") or ""
        result.update(oom_message=message[:160], oom_step=meta.get("oom_step"))
    except (OSError, ValueError) as error:
        message = ""
        result["meta_error"] = str(error)
    try:
        with open(os.path.join(folder, "steps.jsonl")) as f:
            result["steps_lines"] = sum(1 for _ in f)
    except OSError:
        result["steps_lines"] = 0
    need = {"meta.json", "stats.json", "summary.txt", "snapshot_at_oom.pickle", "steps.jsonl"}
    result["ok"] = need <= set(files) and "out of memory" in message and result["steps_lines"] >= OOM_AT_BATCH - 2
    if fragscope:
        doctor = subprocess.run([fragscope, "doctor", folder], capture_output=True, text=True, timeout=120)
        result["doctor_exit"] = doctor.returncode
        result["doctor_head"] = (doctor.stdout or doctor.stderr).splitlines()[:3]
        result["ok"] = result["ok"] and doctor.returncode in (0, 1)
    return result


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"found": False}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/fragscope-hook-check")
    parser.add_argument("--fragscope", help="the fragscope binary, to run the doctor on each dump")
    parser.add_argument("--part", choices=sorted(PARTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        PARTS[args.part](args.out)
        return
    os.makedirs(args.out, exist_ok=True)
    started = time.perf_counter()
    me = [sys.executable, os.path.abspath(__file__), "--out", args.out, "--part"]
    report = {}
    probe = subprocess.run([sys.executable, "-c", "import torch, transformers; print(torch.__version__, "
                            "transformers.__version__, torch.cuda.get_device_name(0))"], capture_output=True, text=True)
    report["versions"] = probe.stdout.strip() or probe.stderr.strip().splitlines()[-1:]

    status, seconds = run_part(me + ["hf"], args.out, "hf", 100)
    rank = read_json(os.path.join(args.out, "hf-rankfile.json"))
    dump = check_dump(os.path.join(args.out, "hf", "rank0"), args.fragscope)
    report["hf"] = {"exit": status, "seconds": seconds, "rank_file": rank, "dump": dump,
                    "log_tail": log_tail(args.out, "hf"),
                    "ok": status not in (0, "timeout") and rank.get("ooms", 0) >= 1 and dump["ok"]}

    capture_out = os.path.join(args.out, "no-code")
    status, seconds = run_part([sys.executable, "-m", "fragscope.run", "--out", capture_out, "--job", "h200-no-code",
                                "--"] + me + ["plain"], args.out, "no_code", 100)
    rank = read_json(os.path.join(args.out, "plain-rankfile.json"))
    dump = check_dump(os.path.join(capture_out, "rank0"), args.fragscope)
    report["no_code"] = {"exit": status, "seconds": seconds, "rank_file": rank, "dump": dump,
                         "log_tail": log_tail(args.out, "no_code"),
                         "ok": status not in (0, "timeout") and rank.get("ooms", 0) >= 1 and dump["ok"]}

    status, seconds = run_part(me + ["overhead"], args.out, "overhead", 100)
    report["overhead"] = dict(read_json(os.path.join(args.out, "overhead.json")), exit=status, seconds=seconds)

    if subprocess.run([sys.executable, "-c", "import lightning.pytorch"], capture_output=True).returncode == 0 or \
            subprocess.run([sys.executable, "-c", "import pytorch_lightning"], capture_output=True).returncode == 0:
        status, seconds = run_part(me + ["lightning"], args.out, "lightning", 60)
        rank = read_json(os.path.join(args.out, "lightning-rankfile.json"))
        steps = glob.glob(os.path.join(args.out, "lightning", "rank0", "steps.jsonl"))
        lines = sum(1 for _ in open(steps[0])) if steps else 0
        report["lightning"] = {"exit": status, "seconds": seconds, "rank_file": rank, "steps_lines": lines,
                               "ok": status == 0 and rank.get("found", False) and lines >= 10}
    else:
        report["lightning"] = "not installed"
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
