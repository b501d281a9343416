"""VQGAN-style autoencoder training as taming-transformers' loop does it, on random images.

An encoder/decoder of residual conv blocks with a vector quantiser (straight-through, commitment loss), L1 +
perceptual loss (features of a VGG16, frozen), a PatchGAN discriminator that joins at step --disc-start, with
the adaptive weight of the GAN loss taken from the gradients of the decoder's last layer
(torch.autograd.grad(..., retain_graph=True)); two Adam optimizers, bf16 autocast. History from the start; the
snapshot is dumped by the OOM observer.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--ch", type=int, default=128)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--size", type=int, default=256)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--disc-start", type=int, default=6)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


class ResBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, 1, 1)
        self.n2, self.c2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, 1, 1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        h = self.c1(F.silu(self.n1(x)))
        return self.skip(x) + self.c2(F.silu(self.n2(h)))


def tower(chans, down):
    layers = []
    for cin, cout in zip(chans, chans[1:]):
        layers += [ResBlock(cin, cout), ResBlock(cout, cout)]
        layers.append(nn.Conv2d(cout, cout, 3, 2, 1) if down else nn.Upsample(scale_factor=2))
    return nn.Sequential(*layers)


class VQ(nn.Module):
    def __init__(self, n=1024, dim=256):
        super().__init__()
        self.codebook = nn.Embedding(n, dim)

    def forward(self, z):
        flat = z.permute(0, 2, 3, 1).reshape(-1, z.shape[1])
        idx = torch.cdist(flat.float(), self.codebook.weight.float()).argmin(1)
        q = self.codebook(idx).view(z.shape[0], z.shape[2], z.shape[3], -1).permute(0, 3, 1, 2)
        loss = F.mse_loss(q, z.detach()) + 0.25 * F.mse_loss(z, q.detach())
        return z + (q - z).detach(), loss


c = args.ch
encoder = nn.Sequential(nn.Conv2d(3, c, 3, 1, 1), tower([c, c, 2 * c, 2 * c, 4 * c], True), nn.GroupNorm(32, 4 * c),
                        nn.SiLU(), nn.Conv2d(4 * c, 256, 1)).cuda()
quant = VQ().cuda()
decoder = nn.Sequential(nn.Conv2d(256, 4 * c, 3, 1, 1), tower([4 * c, 4 * c, 2 * c, 2 * c, c], False),
                        nn.GroupNorm(32, c), nn.SiLU(), nn.Conv2d(c, 3, 3, 1, 1)).cuda()
disc = nn.Sequential(nn.Conv2d(3, 64, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(64, 128, 4, 2, 1), nn.BatchNorm2d(128),
                     nn.LeakyReLU(0.2), nn.Conv2d(128, 256, 4, 2, 1), nn.BatchNorm2d(256), nn.LeakyReLU(0.2),
                     nn.Conv2d(256, 512, 4, 1, 1), nn.BatchNorm2d(512), nn.LeakyReLU(0.2),
                     nn.Conv2d(512, 1, 4, 1, 1)).cuda()
vgg = torchvision.models.vgg16().features[:23].cuda().eval().requires_grad_(False)
opt_ae = torch.optim.Adam(list(encoder.parameters()) + list(quant.parameters()) + list(decoder.parameters()),
                          lr=4.5e-6, betas=(0.5, 0.9))
opt_d = torch.optim.Adam(disc.parameters(), lr=4.5e-6, betas=(0.5, 0.9))
last_layer = decoder[-1].weight

for step in range(args.steps):
    x = torch.randn(args.batch, 3, args.size, args.size, device="cuda").clamp(-1, 1)
    gan_on = step >= args.disc_start
    with torch.autocast("cuda", dtype=torch.bfloat16):
        z, q_loss = quant(encoder(x))
        rec = decoder(z)
        nll = (x - rec).abs().mean() + F.mse_loss(vgg(rec), vgg(x))
        loss = nll + q_loss
        if gan_on:
            g_loss = -disc(rec).mean()
            nll_grad = torch.autograd.grad(nll, last_layer, retain_graph=True)[0]
            g_grad = torch.autograd.grad(g_loss, last_layer, retain_graph=True)[0]
            weight = (nll_grad.norm() / (g_grad.norm() + 1e-4)).clamp(0, 1e4).detach()
            loss = loss + 0.8 * weight * g_loss
    loss.backward()
    opt_ae.step()
    opt_ae.zero_grad(set_to_none=True)
    if gan_on:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            d_loss = F.relu(1 - disc(x)).mean() + F.relu(1 + disc(rec.detach())).mean()
        d_loss.backward()
        opt_d.step()
        opt_d.zero_grad(set_to_none=True)
    if step % 3 == 0:
        print(f"step {step} gan {gan_on} loss {loss.item():.3f}", flush=True)
