"""WGAN-GP as "Improved Training of Wasserstein GANs" and its popular PyTorch ports (e.g. the PyTorch-GAN
collection's wgan_gp.py) train it: a DCGAN-style generator and critic at --size px, --n-critic critic updates per
generator update, the gradient penalty from `torch.autograd.grad(..., create_graph=True, retain_graph=True)` on
random interpolates between real and fake images, so each critic step runs a double backward. Adam(0, 0.9), fp32.
Random "real" images (seeded). History from the start; the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=64)
p.add_argument("--size", type=int, default=128)
p.add_argument("--nz", type=int, default=128)
p.add_argument("--width", type=int, default=64)
p.add_argument("--n-critic", type=int, default=5)
p.add_argument("--gen-steps", type=int, default=3)
p.add_argument("--lambda-gp", type=float, default=10.0)
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()

torch.manual_seed(0)
device = torch.device("cuda")
w, levels = args.width, args.size.bit_length() - 4  # 128 px: 4 ×2 upsamplings from 8 px


def generator():
    layers = [nn.ConvTranspose2d(args.nz, w * 2 ** levels, 8, 1, 0), nn.BatchNorm2d(w * 2 ** levels), nn.ReLU(True)]
    for i in range(levels, 0, -1):
        layers += [nn.ConvTranspose2d(w * 2 ** i, w * 2 ** (i - 1), 4, 2, 1), nn.BatchNorm2d(w * 2 ** (i - 1)),
                   nn.ReLU(True)]
    return nn.Sequential(*layers, nn.Conv2d(w, 3, 3, 1, 1), nn.Tanh())


def critic():
    layers = [nn.Conv2d(3, w, 4, 2, 1), nn.LeakyReLU(0.2, True)]
    for i in range(levels - 1):
        layers += [nn.Conv2d(w * 2 ** i, w * 2 ** (i + 1), 4, 2, 1), nn.InstanceNorm2d(w * 2 ** (i + 1), affine=True),
                   nn.LeakyReLU(0.2, True)]
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(w * 2 ** (levels - 1) * 8 * 8, 1))


G, D = generator().to(device), critic().to(device)
opt_g = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.0, 0.9))
opt_d = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.0, 0.9))
gen = torch.Generator().manual_seed(1)


def gradient_penalty(real, fake):
    alpha = torch.rand(real.size(0), 1, 1, 1, device=device)
    interpolates = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    d_interpolates = D(interpolates)
    gradients = torch.autograd.grad(outputs=d_interpolates, inputs=interpolates,
                                    grad_outputs=torch.ones_like(d_interpolates),
                                    create_graph=True, retain_graph=True, only_inputs=True)[0]
    gradients = gradients.view(gradients.size(0), -1)
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean()


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
try:
    for it in range(args.gen_steps * args.n_critic):
        real = (torch.rand(args.batch, 3, args.size, args.size, generator=gen) * 2 - 1).to(device)
        opt_d.zero_grad()
        z = torch.randn(args.batch, args.nz, 1, 1, device=device)
        fake = G(z)
        d_loss = -D(real).mean() + D(fake.detach()).mean() + args.lambda_gp * gradient_penalty(real, fake.detach())
        d_loss.backward()
        opt_d.step()
        if it % args.n_critic == args.n_critic - 1:
            opt_g.zero_grad()
            g_loss = -D(G(z)).mean()
            g_loss.backward()
            opt_g.step()
            print(f"[Iter {it + 1}/{args.gen_steps * args.n_critic}] D loss: {d_loss.item():.4f} "
                  f"G loss: {g_loss.item():.4f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
