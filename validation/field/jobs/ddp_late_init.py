"""DistributedDataParallel set up after the model and a cached dataset are on the GPU, as a script moved from one
GPU to torchrun often does: env:// rendezvous (a single rank here, as `torchrun --nproc-per-node 1`), the model
and --cache-gib of preprocessed data moved to the device first, then DDP(model), whose parameter broadcast makes
NCCL create its communicator and buffers, outside PyTorch's allocator. NCCL_DEBUG=WARN, as its docs advise for a
failing job. No snapshot: the user has the log.
"""
import argparse, os
import torch, torch.distributed as dist, torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--layers", type=int, default=8)
p.add_argument("--cache-gib", type=float, default=1.0)
p.add_argument("--steps", type=int, default=4)
args = p.parse_args()

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29531")
os.environ.setdefault("NCCL_DEBUG", "WARN")
dist.init_process_group("nccl", rank=0, world_size=1)
try:
    torch.cuda.set_device(0)
    model = nn.Sequential(*[nn.Linear(args.hidden, args.hidden) for _ in range(args.layers)]).cuda()
    rows = int(args.cache_gib * 2**30) // (4 * args.hidden)
    cache = torch.randn(rows, args.hidden, device="cuda")  # the preprocessed dataset, kept on the GPU
    model = nn.parallel.DistributedDataParallel(model, device_ids=[0])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(args.steps):
        x = cache[torch.randint(0, rows, (256,), device="cuda")]
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step} loss {loss.item():.4f}", flush=True)
finally:
    dist.destroy_process_group()
