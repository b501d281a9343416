"""ImageNet training the way timm's train.py and NVIDIA apex's ImageNet example feed the GPU, on random images.

A DataLoader of uint8 images (pinned, worker processes) feeds a prefetcher: on a side CUDA stream it copies the next
batch to the GPU, converts it to float, normalizes it and applies random erasing, while the model trains on the
batch before; the main stream waits on the side stream and, as apex's data_prefetcher does, record_stream()s the
tensors it takes over, so that their blocks go back to the side stream's pool only when the main stream is done.
Then MixUp on the GPU, channels_last, bf16 autocast, AdamW, an EMA of the weights (timm's ModelEmaV2 style:
torch._foreach_lerp_ over the parameters). History from step --history-from-step; the snapshot is dumped in an
`except torch.OutOfMemoryError` handler.
"""
import argparse
import torch, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--arch", default="efficientnet_v2_s")
p.add_argument("--batch", type=int, default=128)
p.add_argument("--size", type=int, default=288)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--workers", type=int, default=4)
p.add_argument("--history-from-step", type=int, default=1)
args = p.parse_args()


class RandomImages(torch.utils.data.Dataset):
    def __len__(self):
        return args.batch * (args.steps + 2)

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randint(0, 256, (3, args.size, args.size), dtype=torch.uint8, generator=g), i % 1000


class Prefetcher:
    mean = torch.tensor([0.485 * 255, 0.456 * 255, 0.406 * 255]).view(1, 3, 1, 1)
    std = torch.tensor([0.229 * 255, 0.224 * 255, 0.225 * 255]).view(1, 3, 1, 1)

    def __init__(self, loader):
        self.loader = loader
        self.stream = torch.cuda.Stream()
        self.mean, self.std = self.mean.cuda(), self.std.cuda()

    def erase(self, x):
        n, _, h, w = x.shape
        eh, ew = h // 3, w // 3
        top = torch.randint(0, h - eh, (1,)).item()
        left = torch.randint(0, w - ew, (1,)).item()
        x[: n // 4, :, top:top + eh, left:left + ew] = torch.randn(n // 4, 3, eh, ew, device=x.device, dtype=x.dtype)
        return x

    def __iter__(self):
        first = True
        for images, targets in self.loader:
            with torch.cuda.stream(self.stream):
                next_images = images.cuda(non_blocking=True)
                next_targets = targets.cuda(non_blocking=True)
                next_images = self.erase(next_images.float().sub_(self.mean).div_(self.std))
                next_images = next_images.contiguous(memory_format=torch.channels_last)
            if not first:
                yield batch_images, batch_targets
            first = False
            torch.cuda.current_stream().wait_stream(self.stream)
            next_images.record_stream(torch.cuda.current_stream())
            next_targets.record_stream(torch.cuda.current_stream())
            batch_images, batch_targets = next_images, next_targets
        yield batch_images, batch_targets


def mixup(x, y, alpha=0.8):
    lam = float(torch.distributions.Beta(alpha, alpha).sample())
    target = F.one_hot(y, 1000).float()
    return x.mul(lam).add_(x.flip(0), alpha=1 - lam), target.mul(lam).add_(target.flip(0), alpha=1 - lam)


torch.backends.cudnn.benchmark = True
model = getattr(torchvision.models, args.arch)().cuda().to(memory_format=torch.channels_last)
ema = [p.detach().clone() for p in model.parameters()]
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
loader = torch.utils.data.DataLoader(RandomImages(), batch_size=args.batch, shuffle=True, num_workers=args.workers,
                                     pin_memory=True, drop_last=True, persistent_workers=False)

try:
    for step, (images, targets) in enumerate(Prefetcher(loader)):
        if step == args.steps:
            break
        if step == args.history_from_step:
            torch.cuda.memory._record_memory_history(max_entries=100000)
        images, soft = mixup(images, targets)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.sum(-soft * F.log_softmax(model(images).float(), dim=-1), dim=-1).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            torch._foreach_lerp_(ema, [p.detach() for p in model.parameters()], 1 - 0.9998)
        if step % 4 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
