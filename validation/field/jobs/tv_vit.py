"""Vision Transformer training as torchvision's classification reference runs it (vit_b_16 recipe), on
random images: AdamW (foreach, the default), bf16 autocast, label smoothing, cosine schedule, gradient
clipping, a last batch smaller than the others (drop_last=False). Fixed image size. History from the
start; the snapshot is dumped by the OOM observer.
"""
import argparse
import torch, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--arch", default="vit_b_16")
p.add_argument("--batch", type=int, default=128)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--size", type=int, default=224)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
model = getattr(torchvision.models, args.arch)().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.3)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps)
images = args.steps * args.batch - args.batch // 3
for step in range(args.steps):
    n = min(args.batch, images - step * args.batch)
    x = torch.randn(n, 3, args.size, args.size, device="cuda")
    y = torch.randint(0, 1000, (n,), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y, label_smoothing=0.11)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    print(f"step {step} batch {n} loss {loss.item():.3f}", flush=True)
