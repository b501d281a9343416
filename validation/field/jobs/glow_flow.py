"""Glow (Kingma & Dhariwal 2018), a normalizing flow trained by maximum likelihood as its reference implementations
write it: --levels levels of --depth flow steps (actnorm with data-dependent init, an invertible 1x1 convolution whose
log-determinant comes from torch.linalg.slogdet, an affine coupling whose scale and shift a 3-layer ConvNet
predicts), a squeeze before each level and half the channels split off after it, a learned Gaussian prior; the loss
in bits per dimension with uniform dequantisation, Adam with warm-up, gradient-norm clipping. Random 64 x 64 images.
History from step --history-from; the snapshot is dumped in the except handler.
"""
import argparse, math
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=64)
p.add_argument("--image", type=int, default=64)
p.add_argument("--levels", type=int, default=3)
p.add_argument("--depth", type=int, default=16)
p.add_argument("--hidden", type=int, default=512)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--history-from", type=int, default=1)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
torch.manual_seed(0)


class ActNorm(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.loc, self.log_scale = nn.Parameter(torch.zeros(1, c, 1, 1)), nn.Parameter(torch.zeros(1, c, 1, 1))
        self.initialized = False

    def forward(self, x):
        if not self.initialized:
            with torch.no_grad():
                self.loc.copy_(-x.mean((0, 2, 3), keepdim=True))
                self.log_scale.copy_(-torch.log(x.std((0, 2, 3), keepdim=True) + 1e-6))
            self.initialized = True
        return (x + self.loc) * self.log_scale.exp(), self.log_scale.sum() * x.shape[2] * x.shape[3]


class InvConv(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.linalg.qr(torch.randn(c, c))[0])

    def forward(self, x):
        log_det = torch.linalg.slogdet(self.weight)[1]
        return F.conv2d(x, self.weight[:, :, None, None]), log_det * x.shape[2] * x.shape[3]


class Coupling(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(c // 2, args.hidden, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(args.hidden, args.hidden, 1), nn.ReLU(),
                                 nn.Conv2d(args.hidden, c, 3, padding=1))
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, x):
        a, b = x.chunk(2, 1)
        shift, raw = self.net(a).chunk(2, 1)
        scale = torch.sigmoid(raw + 2)
        return torch.cat([a, (b + shift) * scale], 1), scale.log().flatten(1).sum(1)


def squeeze(x):
    b, c, h, w = x.shape
    return x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4).reshape(b, c * 4, h // 2, w // 2)


class Glow(nn.Module):
    def __init__(self):
        super().__init__()
        self.levels, c = nn.ModuleList(), 3
        for level in range(args.levels):
            c *= 4
            steps = [m for _ in range(args.depth) for m in (ActNorm(c), InvConv(c), Coupling(c))]
            self.levels.append(nn.ModuleList(steps))
            if level < args.levels - 1:
                c //= 2

    def forward(self, x):
        logdet, prior = 0, 0
        for level, steps in enumerate(self.levels):
            x = squeeze(x)
            for step in steps:
                x, ld = step(x)
                logdet = logdet + ld
            if level < len(self.levels) - 1:
                x, z = x.chunk(2, 1)
                prior = prior + (-0.5 * (z ** 2 + math.log(2 * math.pi))).flatten(1).sum(1)
        return prior + (-0.5 * (x ** 2 + math.log(2 * math.pi))).flatten(1).sum(1) + logdet


model = Glow().cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
dims = 3 * args.image ** 2
try:
    for step in range(args.steps):
        if step == args.history_from:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
        x = (torch.randint(0, 256, (args.batch, 3, args.image, args.image), device="cuda").float() +
             torch.rand(args.batch, 3, args.image, args.image, device="cuda")) / 256 - 0.5
        loss = (-(model(x) - dims * math.log(256)) / (dims * math.log(2))).mean()
        for g in opt.param_groups:
            g["lr"] = 1e-3 * min(1.0, (step + 1) / 5)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 50.0)
        opt.step()
        print(f"step {step}: {loss.item():.3f} bits/dim", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
