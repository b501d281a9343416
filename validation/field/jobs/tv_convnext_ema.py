"""ConvNeXt training as torchvision's classification reference runs it, on random images.

bf16 autocast, AdamW, label smoothing 0.1, MixUp/CutMix from torchvision.transforms.v2 on the GPU batch, an EMA
of the weights (torch.optim.swa_utils.AveragedModel, as the reference's --model-ema), and progressive resizing:
the image size grows every --grow steps (FFCV-style: small images first, full size at the end). History from the
start; the snapshot is dumped in an `except torch.OutOfMemoryError` handler around the loop.
"""
import argparse
import torch, torch.nn.functional as F, torchvision
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torchvision.transforms import v2

p = argparse.ArgumentParser()
p.add_argument("--arch", default="convnext_tiny")
p.add_argument("--batch", type=int, default=96)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--sizes", default="160,192,224,256")
p.add_argument("--grow", type=int, default=4, help="steps at each size")
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = getattr(torchvision.models, args.arch)().cuda().to(memory_format=torch.channels_last)
ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9998), use_buffers=True)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
mix = v2.RandomChoice([v2.MixUp(num_classes=1000, alpha=0.8), v2.CutMix(num_classes=1000, alpha=1.0)])
sizes = [int(s) for s in args.sizes.split(",")]


def train():
    for step in range(args.steps):
        s = sizes[min(step // args.grow, len(sizes) - 1)]
        x = torch.randn(args.batch, 3, s, s, device="cuda")
        y = torch.randint(0, 1000, (args.batch,), device="cuda")
        x, y = mix(x, y)
        x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        ema.update_parameters(model)
        if step % 4 == 0:
            print(f"step {step} size {s} loss {loss.item():.3f}", flush=True)


try:
    train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
