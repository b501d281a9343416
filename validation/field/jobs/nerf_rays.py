"""NeRF training as the original paper's PyTorch ports (nerf-pytorch) run it, on a random scene: batches of rays, a
coarse network queried at stratified samples along each ray, then a fine network at the coarse samples plus as many
drawn by inverse-transform sampling from the coarse weights (`torch.searchsorted`, a sort of the merged depths).

Positional encoding of points (10 frequencies) and view directions (4), 8-layer 256-wide MLPs with a skip at layer
4, volume rendering by alpha compositing (`cumprod`), MSE on both networks' colours, Adam. Every step draws the
same number of rays. History from the start; the snapshot is dumped by the OOM observer.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--rays", type=int, default=4096)
p.add_argument("--coarse", type=int, default=64)
p.add_argument("--fine", type=int, default=128)
p.add_argument("--width", type=int, default=256)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


def encode(x, freqs):
    bands = 2.0 ** torch.arange(freqs, device=x.device) * torch.pi
    y = x[..., None] * bands
    return torch.cat([x, torch.sin(y).flatten(-2), torch.cos(y).flatten(-2)], -1)


class NeRF(nn.Module):
    def __init__(self, w):
        super().__init__()
        pts, views = 3 + 3 * 2 * 10, 3 + 3 * 2 * 4
        self.layers = nn.ModuleList([nn.Linear(pts, w)] +
                                    [nn.Linear(w + (pts if i == 4 else 0), w) for i in range(1, 8)])
        self.sigma, self.feature = nn.Linear(w, 1), nn.Linear(w, w)
        self.view, self.rgb = nn.Linear(w + views, w // 2), nn.Linear(w // 2, 3)

    def forward(self, pts, dirs):
        x0 = encode(pts, 10)
        h = x0
        for i, layer in enumerate(self.layers):
            h = F.relu(layer(torch.cat([h, x0], -1) if i == 4 else h))
        v = F.relu(self.view(torch.cat([self.feature(h), encode(dirs, 4)], -1)))
        return torch.sigmoid(self.rgb(v)), F.relu(self.sigma(h)).squeeze(-1)


def render(model, origins, dirs, depths):
    pts = origins[:, None] + dirs[:, None] * depths[..., None]
    rgb, sigma = model(pts, dirs[:, None].expand_as(pts))
    delta = torch.cat([depths[:, 1:] - depths[:, :-1], torch.full_like(depths[:, :1], 1e10)], -1)
    alpha = 1 - torch.exp(-sigma * delta)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha + 1e-10], -1), -1)[:, :-1]
    weights = alpha * trans
    return (weights[..., None] * rgb).sum(1), weights


def importance(depths, weights, n):
    mids = 0.5 * (depths[:, 1:] + depths[:, :-1])
    pdf = (weights[:, 1:-1] + 1e-5) / (weights[:, 1:-1] + 1e-5).sum(-1, keepdim=True)
    cdf = torch.cat([torch.zeros_like(pdf[:, :1]), torch.cumsum(pdf, -1)], -1)
    u = torch.rand(cdf.shape[0], n, device=cdf.device)
    idx = torch.searchsorted(cdf, u, right=True).clamp(1, cdf.shape[1] - 1)
    lo, hi = torch.gather(cdf, 1, idx - 1), torch.gather(cdf, 1, idx)
    b_lo, b_hi = torch.gather(mids, 1, idx - 1), torch.gather(mids, 1, idx)
    return (b_lo + (u - lo) / (hi - lo).clamp(min=1e-5) * (b_hi - b_lo)).detach()


coarse, fine = NeRF(args.width).cuda(), NeRF(args.width).cuda()
opt = torch.optim.Adam(list(coarse.parameters()) + list(fine.parameters()), lr=5e-4)
for step in range(args.steps):
    origins = torch.randn(args.rays, 3, device="cuda")
    dirs = F.normalize(torch.randn(args.rays, 3, device="cuda"), dim=-1)
    target = torch.rand(args.rays, 3, device="cuda")
    t = torch.linspace(2.0, 6.0, args.coarse, device="cuda")
    depths = t + torch.rand(args.rays, args.coarse, device="cuda") * (4.0 / args.coarse)
    rgb_c, weights = render(coarse, origins, dirs, depths)
    merged, _ = torch.sort(torch.cat([depths, importance(depths, weights, args.fine)], -1), -1)
    rgb_f, _ = render(fine, origins, dirs, merged)
    loss = F.mse_loss(rgb_c, target) + F.mse_loss(rgb_f, target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 4 == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
