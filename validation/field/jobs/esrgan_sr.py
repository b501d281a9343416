"""Super-resolution GAN training as ESRGAN / Real-ESRGAN repositories write it: an RRDB generator (residual-in-
residual dense blocks at the low resolution, ×4 upsampling by PixelShuffle), a VGG-style discriminator with adaptive
pooling, a frozen VGG-19 (no weights: no download) for the perceptual loss on conv5_4 features, L1 + perceptual +
relativistic adversarial loss for G, then the D step; bf16 autocast, Adam for each. High-resolution crops of a size
drawn per batch (--sizes), low-resolution inputs by bicubic downsampling on the GPU. History from the start; the
snapshot is dumped in the except handler.
"""
import argparse, random
import torch, torch.nn as nn, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=16)
p.add_argument("--sizes", default="128,192,256")
p.add_argument("--blocks", type=int, default=12)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
sizes = [int(s) for s in args.sizes.split(",")]
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch.manual_seed(0)
rng = random.Random(0)


class DenseBlock(nn.Module):
    def __init__(self, c=64, g=32):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(c + i * g, g if i < 4 else c, 3, padding=1) for i in range(5))

    def forward(self, x):
        feats = [x]
        for i, conv in enumerate(self.convs):
            out = conv(torch.cat(feats, 1))
            if i < 4:
                feats.append(F.leaky_relu(out, 0.2))
        return x + 0.2 * out


class RRDB(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(DenseBlock(), DenseBlock(), DenseBlock())

    def forward(self, x):
        return x + 0.2 * self.blocks(x)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Conv2d(3, 64, 3, padding=1)
        self.body = nn.Sequential(*[RRDB() for _ in range(args.blocks)])
        self.up = nn.Sequential(nn.Conv2d(64, 256, 3, padding=1), nn.PixelShuffle(2), nn.LeakyReLU(0.2),
                                nn.Conv2d(64, 256, 3, padding=1), nn.PixelShuffle(2), nn.LeakyReLU(0.2),
                                nn.Conv2d(64, 3, 3, padding=1))

    def forward(self, x):
        h = self.head(x)
        return self.up(h + self.body(h))


def discriminator():
    layers, c = [], 3
    for out, stride in [(64, 1), (64, 2), (128, 1), (128, 2), (256, 1), (256, 2), (512, 1), (512, 2)]:
        layers += [nn.Conv2d(c, out, 3, stride, 1), nn.BatchNorm2d(out), nn.LeakyReLU(0.2)]
        c = out
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(512 * 16, 100), nn.LeakyReLU(0.2),
                         nn.Linear(100, 1))


G, D = Generator().cuda(), discriminator().cuda()
vgg = torchvision.models.vgg19().features[:35].cuda().eval().requires_grad_(False)
opt_g = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.9, 0.99))
opt_d = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.9, 0.99))
try:
    for step in range(args.steps):
        size = rng.choice(sizes)
        hr = torch.rand(args.batch, 3, size, size, device="cuda")
        lr = F.interpolate(hr, scale_factor=0.25, mode="bicubic", antialias=True).clamp(0, 1)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            sr = G(lr)
            real_logit = D(hr).detach()
            fake_logit = D(sr)
            adv = F.binary_cross_entropy_with_logits(fake_logit - real_logit.mean(), torch.ones_like(fake_logit))
            loss_g = F.l1_loss(sr, hr) + F.l1_loss(vgg(sr), vgg(hr)) + 5e-3 * adv
        opt_g.zero_grad(set_to_none=True)
        loss_g.backward()
        opt_g.step()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            real_logit, fake_logit = D(hr), D(sr.detach())
            loss_d = F.binary_cross_entropy_with_logits(real_logit - fake_logit.mean(), torch.ones_like(real_logit)) + \
                F.binary_cross_entropy_with_logits(fake_logit - real_logit.mean(), torch.zeros_like(fake_logit))
        opt_d.zero_grad(set_to_none=True)
        loss_d.backward()
        opt_d.step()
        print(f"step {step}: crop {size} loss_g {loss_g.item():.3f} loss_d {loss_d.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
