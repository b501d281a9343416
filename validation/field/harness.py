#!/usr/bin/env python3
"""Runs one third-party training script as its user would, on a card shrunk to a budget.

    python3 harness.py --out DIR [--budget-gib G] -- JOB.py [JOB ARGS...]

The job runs in-process (runpy, as `python JOB.py`), with DIR/user as its working folder: what it
writes there (its own snapshot dump, a log the caller tees) is all a user would have. The harness
adds only what a smaller card and a label need, outside DIR/user:
  - a ballast: a raw cudaMalloc (cupy, outside PyTorch's allocator) takes all free memory but G
    after CUDA init, so an OOM is the driver's, with the real message, as on a smaller GPU;
  - DIR/truth.json: the outcome, the OOM message, max_memory_reserved/allocated, num_alloc_retries
    and num_ooms from memory_stats() after the job returned or raised (never shown to fragscope).
"""
import argparse, json, os, runpy, sys, time, traceback


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--budget-gib", type=float, default=0)
    p.add_argument("job", nargs=argparse.REMAINDER)
    a = p.parse_args()
    job = [x for x in a.job if x != "--"] if a.job[:1] == ["--"] else a.job
    user = os.path.join(a.out, "user")
    os.makedirs(user, exist_ok=True)
    job_path = os.path.abspath(job[0])
    import torch
    torch.cuda.init()
    torch.empty(1, device="cuda")
    truth = {"job": os.path.basename(job_path), "argv": job[1:],
             "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "torch": torch.__version__}
    ballast = None
    if a.budget_gib > 0:
        import cupy
        free, _ = torch.cuda.mem_get_info()
        want = int(a.budget_gib * 2**30)
        if free > want:
            ballast = cupy.cuda.runtime.malloc(free - want)
        truth.update(budget_bytes=want, ballast_bytes=free - want)
    os.chdir(user)
    sys.argv = [job_path] + job[1:]
    sys.path.insert(0, os.path.dirname(job_path))
    t0 = time.time()
    status = 0
    try:
        runpy.run_path(job_path, run_name="__main__")
        truth["outcome"] = "completed"
    except torch.OutOfMemoryError as e:
        truth.update(outcome="oom", oom_message=str(e), mem_get_info=list(torch.cuda.mem_get_info()))
        traceback.print_exc()
        status = 1
    except BaseException as e:  # a job that dies otherwise (Lightning wraps errors): keep the text
        oom = "out of memory" in str(e).lower() or "OutOfMemoryError" in type(e).__name__
        truth.update(outcome="oom" if oom else "error", oom_message=str(e), error_type=type(e).__name__)
        traceback.print_exc()
        status = 1
    truth["wall_s"] = round(time.time() - t0, 2)
    s = torch.cuda.memory_stats()
    for k in ["reserved_bytes.all.peak", "allocated_bytes.all.peak", "num_alloc_retries", "num_ooms",
              "num_device_alloc", "num_device_free", "reserved_bytes.all.current"]:
        truth[k] = s.get(k, 0)
    truth["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    truth["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    with open(os.path.join(a.out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    print("RESULT " + json.dumps({k: truth.get(k) for k in ["job", "alloc_conf", "outcome", "budget_bytes",
                                                            "max_memory_reserved", "max_memory_allocated",
                                                            "num_alloc_retries", "wall_s"]}), flush=True)
    sys.stdout.flush()
    os._exit(status)  # no teardown surprises (NCCL, dataloader workers) after the record is written


if __name__ == "__main__":
    main()
