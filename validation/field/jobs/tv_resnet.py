"""ImageNet-style ResNet training as torchvision's reference recipe does it, on random images.

cudnn.benchmark, channels_last, fp16 autocast with GradScaler, SGD with momentum, multi-scale batches
(progressive resizing: 160-448 px). History from the start; the snapshot is dumped by the OOM
observer, as PyTorch's "understanding GPU memory" post shows.
"""
import argparse, random
import torch, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--arch", default="resnet50")
p.add_argument("--batch", type=int, default=96)
p.add_argument("--steps", type=int, default=24)
p.add_argument("--sizes", default="160,224,288,352,448")
p.add_argument("--max-entries", type=int, default=100000)
p.add_argument("--no-benchmark", action="store_true")
args = p.parse_args()

torch.backends.cudnn.benchmark = not args.no_benchmark
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


def oom_observer(device, alloc, device_alloc, device_free):
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")


torch._C._cuda_attach_out_of_memory_observer(oom_observer)
model = getattr(torchvision.models, args.arch)().cuda().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
scaler = torch.amp.GradScaler("cuda")
sizes = [int(s) for s in args.sizes.split(",")]
rng = random.Random(0)
for step in range(args.steps):
    s = rng.choice(sizes)
    x = torch.randn(args.batch, 3, s, s, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
    if step % 5 == 0:
        print(f"step {step} size {s} loss {loss.item():.3f}", flush=True)
