"""A Fourier neural operator (Li et al.) trained on 2-D fields at several resolutions, as the neuraloperator
library's Darcy/Navier-Stokes examples and its multi-resolution training do it: lifting, --layers spectral
convolutions (torch.fft.rfft2, complex weights on the lowest --modes frequencies, irfft2) beside 1x1
convolutions, projection; the resolution drawn per batch from --resolutions (an FNO is resolution-invariant,
so users train on several), a relative L2 loss, AdamW, fp32 (FFTs). An eval at the finest resolution every
--eval-every steps under torch.no_grad(). History from the start; the snapshot is dumped in the except handler.
"""
import argparse, random
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--width", type=int, default=96)
p.add_argument("--modes", type=int, default=32)
p.add_argument("--layers", type=int, default=6)
p.add_argument("--batch", type=int, default=24)
p.add_argument("--resolutions", default="128,192,256,320")
p.add_argument("--eval-res", type=int, default=384)
p.add_argument("--eval-batch", type=int, default=16)
p.add_argument("--eval-every", type=int, default=8)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class SpectralConv2d(nn.Module):
    def __init__(self, width, modes):
        super().__init__()
        self.modes = modes
        scale = 1 / (width * width)
        self.w1 = nn.Parameter(scale * torch.randn(width, width, modes, modes, dtype=torch.cfloat))
        self.w2 = nn.Parameter(scale * torch.randn(width, width, modes, modes, dtype=torch.cfloat))

    def forward(self, x):
        b, c, h, w = x.shape
        x_ft = torch.fft.rfft2(x)
        out = torch.zeros(b, c, h, w // 2 + 1, dtype=torch.cfloat, device=x.device)
        m = self.modes
        out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :m, :m], self.w1)
        out[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -m:, :m], self.w2)
        return torch.fft.irfft2(out, s=(h, w))


class FNO2d(nn.Module):
    def __init__(self):
        super().__init__()
        self.lift = nn.Conv2d(3, args.width, 1)
        self.spectral = nn.ModuleList(SpectralConv2d(args.width, args.modes) for _ in range(args.layers))
        self.pointwise = nn.ModuleList(nn.Conv2d(args.width, args.width, 1) for _ in range(args.layers))
        self.project = nn.Sequential(nn.Conv2d(args.width, 128, 1), nn.GELU(), nn.Conv2d(128, 1, 1))

    def forward(self, a):
        b, _, h, w = a.shape
        gy, gx = torch.meshgrid(torch.linspace(0, 1, h, device=a.device), torch.linspace(0, 1, w, device=a.device),
                                indexing="ij")
        x = self.lift(torch.cat([a, gy.expand(b, 1, h, w), gx.expand(b, 1, h, w)], dim=1))
        for k, (spectral, pointwise) in enumerate(zip(self.spectral, self.pointwise)):
            x = spectral(x) + pointwise(x)
            if k < args.layers - 1:
                x = F.gelu(x)
        return self.project(x)


def relative_l2(pred, target):
    diff = (pred - target).flatten(1).norm(dim=1)
    return (diff / target.flatten(1).norm(dim=1)).mean()


def fields(batch, res):
    a = torch.randn(batch, 1, res, res, device="cuda")
    return a, torch.tanh(a).cumsum(-1) / res


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = FNO2d().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
resolutions = [int(r) for r in args.resolutions.split(",")]
rng = random.Random(11)
try:
    for step in range(args.steps):
        res = rng.choice(resolutions)
        a, u = fields(args.batch, res)
        loss = relative_l2(model(a), u)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step} res {res} loss {loss.item():.4f}", flush=True)
        if (step + 1) % args.eval_every == 0:
            model.eval()
            with torch.no_grad():
                a, u = fields(args.eval_batch, args.eval_res)
                print(f"eval res {args.eval_res} loss {relative_l2(model(a), u).item():.4f}", flush=True)
            model.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
