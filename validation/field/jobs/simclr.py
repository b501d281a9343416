"""SimCLR as the UvA deep-learning course's and the Lightning tutorials' notebooks write it, in a plain loop:
two random views of each image (random crop and flip, on the GPU), a torchvision --arch backbone with a
two-layer projection head, the NT-Xent loss over the 2B x 2B cosine similarities at temperature 0.07,
cudnn.benchmark, fp16 autocast with GradScaler, AdamW. History from step --history-from-step (after
cudnn's algorithm search in the first steps); the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--arch", default="resnet50")
p.add_argument("--batch", type=int, default=128)
p.add_argument("--size", type=int, default=224)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--history-from-step", type=int, default=2)
args = p.parse_args()

torch.backends.cudnn.benchmark = True
backbone = getattr(torchvision.models, args.arch)()
width = backbone.fc.in_features
backbone.fc = nn.Sequential(nn.Linear(width, 4 * 128), nn.ReLU(inplace=True), nn.Linear(4 * 128, 128))
model = backbone.cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=1e-4)
scaler = torch.amp.GradScaler("cuda")


def view(images):
    s = args.size
    crop = int(s * 0.75)
    i, j = torch.randint(0, s - crop + 1, (2,)).tolist()
    v = F.interpolate(images[:, :, i:i + crop, j:j + crop], size=(s, s), mode="bilinear", align_corners=False)
    return v.flip(3) if torch.rand(()) < 0.5 else v


def nt_xent(z, temperature=0.07):
    z = F.normalize(z.float(), dim=1)
    similarity = (z @ z.T) / temperature
    similarity.fill_diagonal_(float("-inf"))
    n = z.size(0) // 2
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).cuda()
    return F.cross_entropy(similarity, targets)


try:
    for step in range(args.steps):
        if step == args.history_from_step:
            torch.cuda.memory._record_memory_history(max_entries=100000)
        images = torch.rand(args.batch, 3, args.size, args.size, device="cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            z = model(torch.cat([view(images), view(images)], dim=0))
            loss = nt_xent(z)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        print(f"step {step} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
