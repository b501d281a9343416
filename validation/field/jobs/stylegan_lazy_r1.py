"""A StyleGAN2-style GAN trained as its official loop does it, in plain torch: a mapping network, a synthesis network
of modulated 3x3 convolutions (weight demodulation, grouped convolution per sample) from 4 px to --size, a residual
discriminator; non-saturating logistic losses; lazy regularisation: the R1 penalty on real images (the
discriminator's gradient with respect to its input, by autograd.grad with create_graph, then a second backward)
only every --r1-every steps, so one step in that many needs more memory than the others; Adam with the lazy
regularisation's corrected betas; fp32. Random "real" images. History from the start; the snapshot is dumped in the
except handler.
"""
import argparse, math
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=32)
p.add_argument("--size", type=int, default=128)
p.add_argument("--channels", type=int, default=256)
p.add_argument("--r1-every", type=int, default=4)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--max-entries", type=int, default=150000)
args = p.parse_args()
Z = 512


class ModConv(nn.Module):
    def __init__(self, cin, cout, demodulate=True):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(cout, cin, 3, 3))
        self.affine = nn.Linear(Z, cin)
        nn.init.ones_(self.affine.bias)
        self.demodulate, self.scale = demodulate, 1 / math.sqrt(cin * 9)

    def forward(self, x, w):
        b, cin, h, wd = x.shape
        style = self.affine(w)
        weight = self.scale * self.weight[None] * style[:, None, :, None, None]
        if self.demodulate:
            weight = weight * torch.rsqrt(weight.pow(2).sum([2, 3, 4], keepdim=True) + 1e-8)
        out = F.conv2d(x.reshape(1, b * cin, h, wd), weight.reshape(-1, cin, 3, 3), padding=1, groups=b)
        return F.leaky_relu(out.reshape(b, -1, h, wd), 0.2) * math.sqrt(2)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.mapping = nn.Sequential(*[m for _ in range(8) for m in (nn.Linear(Z, Z), nn.LeakyReLU(0.2))])
        self.const = nn.Parameter(torch.randn(1, args.channels, 4, 4))
        n = int(math.log2(args.size)) - 2
        self.convs = nn.ModuleList(ModConv(args.channels, args.channels) for _ in range(2 * n + 1))
        self.to_rgb = nn.ModuleList(ModConv(args.channels, 3, demodulate=False) for _ in range(n + 1))

    def forward(self, z):
        w = self.mapping(F.normalize(z, dim=1))
        x = self.const.expand(len(z), -1, -1, -1)
        x = self.convs[0](x, w)
        rgb = self.to_rgb[0](x, w)
        for i in range(1, len(self.to_rgb)):
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
            x = self.convs[2 * i](self.convs[2 * i - 1](x, w), w)
            rgb = F.interpolate(rgb, scale_factor=2, mode="bilinear", align_corners=False) + self.to_rgb[i](x, w)
        return rgb


class DBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(cin, cin, 3, 1, 1), nn.Conv2d(cin, cout, 3, 2, 1)
        self.skip = nn.Conv2d(cin, cout, 1, 2, bias=False)

    def forward(self, x):
        y = self.conv2(F.leaky_relu(self.conv1(F.leaky_relu(x, 0.2)), 0.2))
        return (y + self.skip(x)) / math.sqrt(2)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        n = int(math.log2(args.size)) - 2
        self.from_rgb = nn.Conv2d(3, args.channels, 1)
        self.blocks = nn.Sequential(*[DBlock(args.channels, args.channels) for _ in range(n)])
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(args.channels * 16, args.channels), nn.LeakyReLU(0.2),
                                  nn.Linear(args.channels, 1))

    def forward(self, x):
        return self.head(self.blocks(self.from_rgb(x)))


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch.manual_seed(0)
G, D = Generator().cuda(), Discriminator().cuda()
ratio = args.r1_every / (args.r1_every + 1)
opt_g = torch.optim.Adam(G.parameters(), lr=0.002, betas=(0.0, 0.99))
opt_d = torch.optim.Adam(D.parameters(), lr=0.002 * ratio, betas=(0.0, 0.99 ** ratio))
try:
    for step in range(args.steps):
        real = torch.rand(args.batch, 3, args.size, args.size, device="cuda") * 2 - 1
        fake = G(torch.randn(args.batch, Z, device="cuda"))
        d_loss = F.softplus(D(fake.detach())).mean() + F.softplus(-D(real)).mean()
        opt_d.zero_grad(set_to_none=True)
        d_loss.backward()
        opt_d.step()
        if step % args.r1_every == 0:
            real.requires_grad_(True)
            (grad,) = torch.autograd.grad(D(real).sum(), real, create_graph=True)
            r1 = grad.pow(2).sum([1, 2, 3]).mean() * (10 / 2) * args.r1_every
            opt_d.zero_grad(set_to_none=True)
            r1.backward()
            opt_d.step()
        g_loss = F.softplus(-D(G(torch.randn(args.batch, Z, device="cuda")))).mean()
        opt_g.zero_grad(set_to_none=True)
        g_loss.backward()
        opt_g.step()
        print(f"step {step}: d {d_loss.item():.3f} g {g_loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
