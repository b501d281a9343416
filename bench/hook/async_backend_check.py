#!/usr/bin/env python3
"""The hook under PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, on a GPU: every way in trains to the end.

That allocator raises on memory history, the OOM observer and snapshots. Each part runs a short training
loop in its own process with the backend set (all parts at once; one still running after 55 s fails) and
must finish, log the notice `memory history, OOM snapshots and the largest free block are off: the
cudaMallocAsync allocator backend ...` exactly once, and no other notice of the hook:

1. monitor: fragscope.torch.Monitor with out_dir, memory history asked for, the largest free block every
   step, a checkpoint signal chained to the program's own SIGUSR1 handler (both run; the program's is back
   after close), an eval phase; steps.jsonl holds every step, the rank file is there while it runs and gone
   after.
2. monitor_no_out: Monitor(None, largest_free_every=1), where a snapshot on the first step used to raise.
3. watch: the callbacks' StepWatch with the default history ring, DataLoader waits, and the checkpoint
   agreement over a one-rank NCCL group (the all_reduce runs on the GPU).
4. capture: a plain loop that never imports fragscope, under `python -m fragscope.run`.
5. oom: a real OOM (a 4 TiB tensor) out of a Monitor step, caught by the program: stats.json,
   summary.txt and meta.json with its message are written, no snapshot.
6. lightning, hf: the callbacks in a real Lightning fit / transformers Trainer with a checkpoint request
   written mid-run (saved once), when the framework is installed; else "not installed".

    PYTHONPATH=python python3 bench/hook/async_backend_check.py --out /tmp/async-check

Prints one JSON line with every result; exits 1 when a part failed.
"""

import argparse
import glob
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ALLOC_CONF = "backend:cudaMallocAsync"
NOTICE = "fragscope: memory history, OOM snapshots and the largest free block are off: the cudaMallocAsync"
STEPS = 40


# -- helpers for the parts (each runs in its own process) -------------------------------------------
class Notices(logging.Handler):
    """Keeps the hook's notices (and prints them, as the job's log would)."""

    def __init__(self):
        super().__init__()
        self.lines = []
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
        logging.getLogger("fragscope").addHandler(self)

    def emit(self, record):
        self.lines.append(record.getMessage())


def model_and_data(torch):
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    data = torch.utils.data.TensorDataset(torch.randn(STEPS * 16, 1024))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4), torch.utils.data.DataLoader(data, batch_size=16)


def train_step(model, opt, x):
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def rank_files(pid=None):
    pattern = f"rank*-pid{pid or os.getpid()}.fsr"
    return glob.glob(os.path.join(os.environ["FRAGSCOPE_RANK_DIR"], "**", pattern), recursive=True)


def lines_in(path):
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def finish(out, name, notices, **result):
    """Writes the part's result; ok needs the backend, one async notice and nothing else gone wrong."""
    import torch

    result.update(backend=torch.cuda.get_allocator_backend(), notices=notices.lines)
    hook_failures = [n for n in notices.lines if not n.startswith(NOTICE)]
    result["ok"] = (result.pop("ok") and result["backend"] == "cudaMallocAsync"
                    and sum(n.startswith(NOTICE) for n in notices.lines) == 1 and not hook_failures)
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(result, f)


# -- the parts ----------------------------------------------------------------------------------------
def part_monitor(out):
    import torch

    from fragscope.torch import Monitor

    notices = Notices()
    model, opt, loader = model_and_data(torch)
    theirs = []
    signal.signal(signal.SIGUSR1, lambda signum, frame: theirs.append(signum))
    handler = signal.getsignal(signal.SIGUSR1)
    saved, published = 0, False
    with Monitor(os.path.join(out, "monitor"), history_max_entries=100_000, largest_free_every=1,
                 checkpoint_signal=signal.SIGUSR1) as mon:
        for i, (x,) in enumerate(mon.loader(loader)):
            with mon.step(x):
                train_step(model, opt, mon.to_device(x))
            published = published or bool(rank_files())
            if i == 10:
                os.kill(os.getpid(), signal.SIGUSR1)
            if mon.checkpoint_requested:
                with mon.phase("checkpoint"):
                    torch.save(model.state_dict(), os.path.join(out, "monitor-request.pt"))
                    saved += 1
            if i == 20:
                with mon.phase("eval"), torch.no_grad():
                    model(torch.randn(16, 1024, device="cuda"))
    lines = lines_in(os.path.join(out, "monitor", "rank0", "steps.jsonl"))
    restored = signal.getsignal(signal.SIGUSR1) is handler
    finish(out, "monitor", notices, steps=mon.steps, lines=lines, published=published, left=rank_files(),
           saved=saved, their_handler_ran=len(theirs), restored=restored,
           ok=mon.steps == lines == STEPS and published and not rank_files() and saved == len(theirs) == 1
           and restored)


def part_monitor_no_out(out):
    import torch

    from fragscope.torch import Monitor

    notices = Notices()
    model, opt, loader = model_and_data(torch)
    with Monitor(None, largest_free_every=1) as mon:
        for (x,) in mon.loader(loader):
            with mon.step(x):
                train_step(model, opt, mon.to_device(x))
    finish(out, "monitor_no_out", notices, steps=mon.steps, ok=mon.steps == STEPS)


def part_watch(out):
    import torch
    import torch.distributed as dist

    from fragscope import loader_wait
    from fragscope.capture import DEFAULT_HISTORY_ENTRIES
    from fragscope.watch import StepWatch, any_rank

    notices = Notices()
    model, opt, loader = model_and_data(torch)
    watch = StepWatch(os.path.join(out, "watch"), device=torch.device("cuda:0"),
                      history_max_entries=DEFAULT_HISTORY_ENTRIES)
    for (x,) in loader:
        watch.step_begin()
        train_step(model, opt, x.cuda())
        watch.step_end()
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    agreed = [any_rank(watch.checkpoint_requested(), torch.device("cuda:0")), any_rank(True, torch.device("cuda:0"))]
    dist.destroy_process_group()
    steps, history = watch.recorder.steps, watch.history
    watch.close()
    lines = lines_in(os.path.join(out, "watch", "rank0", "steps.jsonl"))
    listeners = len(loader_wait._listeners)
    finish(out, "watch", notices, steps=steps, lines=lines, history=history, agreed=agreed, listeners=listeners,
           ok=steps == lines == STEPS and not history and agreed == [False, True] and listeners == 0)


def part_plain(out):  # runs under python -m fragscope.run: no fragscope here
    import torch

    model, opt, loader = model_and_data(torch)
    for (x,) in loader:
        train_step(model, opt, x.cuda())
    with open(os.path.join(out, "plain.json"), "w") as f:
        json.dump({"backend": torch.cuda.get_allocator_backend(), "steps": STEPS}, f)


def request_checkpoint_at(step, now):
    """Writes the agent's checkpoint flag beside this process's rank file at `step`."""
    if step == now:
        for path in rank_files():
            with open(path + ".checkpoint", "w") as f:
                f.write("1\n")


def part_lightning(out):
    import torch
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl

    from fragscope.integrations.lightning import FragscopeCallback

    notices = Notices()
    model, _, loader = model_and_data(torch)

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = model

        def training_step(self, batch, batch_idx):
            return self.model(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    class Probe(pl.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            request_checkpoint_at(3, batch_idx)

    root = os.path.join(out, "lightning-root")
    trainer = pl.Trainer(max_steps=STEPS, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, default_root_dir=root,
                         callbacks=[Probe(), FragscopeCallback(os.path.join(out, "lightning"), request_poll_every=5)])
    trainer.fit(Module(), loader)
    saved = [os.path.basename(p) for p in glob.glob(os.path.join(root, "checkpoints", "fragscope-request-*.ckpt"))]
    lines = lines_in(os.path.join(out, "lightning", "rank0", "steps.jsonl"))
    finish(out, "lightning", notices, lines=lines, saved=saved, ok=lines == STEPS and len(saved) == 1)


def part_hf(out):
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from fragscope.integrations.hf import FragscopeCallback

    notices = Notices()
    model, _, _ = model_and_data(torch)

    class Regression(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            return {"loss": self.model(x).pow(2).mean()}

    class Probe(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            request_checkpoint_at(3, state.global_step)

    args = TrainingArguments(output_dir=os.path.join(out, "hf-trainer"), max_steps=STEPS,
                             per_device_train_batch_size=16, report_to=[], save_strategy="no", logging_strategy="no",
                             disable_tqdm=True, remove_unused_columns=False, dataloader_num_workers=0)
    data = [{"x": torch.randn(1024)} for _ in range(STEPS * 16)]
    Trainer(model=Regression(), args=args, train_dataset=data,
            callbacks=[Probe(), FragscopeCallback(os.path.join(out, "hf"), request_poll_every=5)]).train()
    saved = [os.path.basename(p) for p in glob.glob(os.path.join(out, "hf-trainer", "checkpoint-*"))]
    lines = lines_in(os.path.join(out, "hf", "rank0", "steps.jsonl"))
    finish(out, "hf", notices, lines=lines, saved=saved, ok=lines == STEPS and saved == ["checkpoint-5"])


def part_oom(out):
    import torch

    from fragscope import background_writer
    from fragscope.torch import Monitor

    notices = Notices()
    folder = os.path.join(out, "oom", "rank0")
    message = None
    with Monitor(os.path.join(out, "oom"), rank_dir=False) as mon:
        try:
            with mon.step():
                torch.empty(4 << 40, dtype=torch.uint8, device="cuda")
        except torch.cuda.OutOfMemoryError as error:
            message = str(error).splitlines()[0]
    background_writer.flush(10)
    files = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    meta = read_json(os.path.join(folder, "meta.json"))
    stats = read_json(os.path.join(folder, "stats.json"))
    finish(out, "oom", notices, files=files, message=message, meta_message=(meta.get("oom_message") or "")[:80],
           snapshot=meta.get("snapshot"), stats_keys=len(stats),
           ok=files == ["meta.json", "stats.json", "summary.txt"] and message is not None
           and (meta.get("oom_message") or "").startswith(message) and meta.get("snapshot") is False)


PARTS = {"monitor": part_monitor, "oom": part_oom, "monitor_no_out": part_monitor_no_out, "watch": part_watch,
         "plain": part_plain, "lightning": part_lightning, "hf": part_hf}


# -- the parent: starts every part at once with the backend set, then checks what each left ------------
def installed(*modules):
    return all(importlib.util.find_spec(module) for module in modules)  # found, not imported: no time lost


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"ok": False, "missing": os.path.basename(path)}


def check_capture(out, status, log):
    """The no-code run: the plain loop finished, the notice is in its log once, steps.jsonl has every step."""
    result = dict(read_json(os.path.join(out, "plain.json")), exit=status)
    result["lines"] = lines_in(os.path.join(out, "no-code", "rank0", "steps.jsonl"))
    result["notices"] = [line for line in log.splitlines() if line.startswith("fragscope:")]
    result["ok"] = (status == 0 and result.get("backend") == "cudaMallocAsync" and result["lines"] == STEPS
                    and len(result["notices"]) == 1 and result["notices"][0].startswith(NOTICE)
                    and "Traceback" not in log)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/fragscope-async-check")
    parser.add_argument("--part", choices=sorted(PARTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        PARTS[args.part](args.out)
        return 0
    os.makedirs(args.out, exist_ok=True)
    started = time.perf_counter()
    me = [sys.executable, os.path.abspath(__file__), "--out", args.out, "--part"]
    commands = {"monitor": me + ["monitor"], "oom": me + ["oom"], "monitor_no_out": me + ["monitor_no_out"],
                "watch": me + ["watch"],
                "capture": [sys.executable, "-m", "fragscope.run", "--out", os.path.join(args.out, "no-code"), "--"]
                + me + ["plain"]}
    report = {}
    for framework, present in (("lightning", installed("lightning") or installed("pytorch_lightning")),
                               ("hf", installed("transformers", "accelerate"))):
        if present:
            commands[framework] = me + [framework]
        else:
            report[framework] = "not installed"
    running = {}
    for name, command in commands.items():
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=ALLOC_CONF, PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.path.join(REPO, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   FRAGSCOPE_RANK_DIR=os.path.join(args.out, "shm", name))
        log = open(os.path.join(args.out, f"{name}.log"), "w")
        running[name] = (subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT), log)
    for name, (process, log) in running.items():
        try:
            status = process.wait(timeout=max(1.0, 55 - (time.perf_counter() - started)))
        except subprocess.TimeoutExpired:
            process.kill()
            status = "timeout"
        log.close()
        with open(os.path.join(args.out, f"{name}.log"), errors="replace") as f:
            text = f.read()
        if name == "capture":
            report[name] = check_capture(args.out, status, text)
        else:
            report[name] = dict(read_json(os.path.join(args.out, f"{name}.json")), exit=status)
            report[name]["ok"] = report[name]["ok"] and status == 0
        if not report[name]["ok"]:
            report[name]["log_tail"] = text.splitlines()[-8:]
    report["seconds"] = round(time.perf_counter() - started, 1)
    report["ok"] = all(part == "not installed" or part["ok"] for key, part in report.items()
                       if key not in ("seconds", "ok"))
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
