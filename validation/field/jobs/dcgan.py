"""The PyTorch tutorial "DCGAN Tutorial" as written there (Generator of ConvTranspose2d, Discriminator of
Conv2d, BatchNorm, BCELoss, Adam lr 0.0002 betas (0.5, 0.999); each iteration updates D on a real and a fake
batch, then G), on random 64 px images instead of CelebA, scaled up by --ngf/--ndf and the batch. The loader
shuffles a dataset that is not a multiple of the batch (drop_last=False, as in the tutorial), so each epoch
ends on a smaller batch. History from the start; the snapshot is dumped in an except handler.
"""
import argparse
import torch, torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--nz", type=int, default=100)
p.add_argument("--ngf", type=int, default=64)
p.add_argument("--ndf", type=int, default=64)
p.add_argument("--batch", type=int, default=1024)
p.add_argument("--images", type=int, default=2500, help="dataset size (not a multiple of --batch)")
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class Generator(nn.Module):
    def __init__(self, nz, ngf):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, x):
        return self.main(x)


class Discriminator(nn.Module):
    def __init__(self, ndf):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 8), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, x):
        return self.main(x)


def weights_init(m):
    if m.__class__.__name__.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif m.__class__.__name__.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
device = torch.device("cuda")
netG = Generator(args.nz, args.ngf).to(device)
netG.apply(weights_init)
netD = Discriminator(args.ndf).to(device)
netD.apply(weights_init)
criterion = nn.BCELoss()
optimizerD = torch.optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))
images = torch.utils.data.TensorDataset(torch.rand(args.images, 3, 64, 64) * 2 - 1)
dataloader = torch.utils.data.DataLoader(images, batch_size=args.batch, shuffle=True, num_workers=0)
try:
    for epoch in range(args.epochs):
        for i, (data,) in enumerate(dataloader):
            netD.zero_grad()
            real = data.to(device)
            b_size = real.size(0)
            label = torch.full((b_size,), 1.0, dtype=torch.float, device=device)
            errD_real = criterion(netD(real).view(-1), label)
            errD_real.backward()
            noise = torch.randn(b_size, args.nz, 1, 1, device=device)
            fake = netG(noise)
            label.fill_(0.0)
            errD_fake = criterion(netD(fake.detach()).view(-1), label)
            errD_fake.backward()
            optimizerD.step()
            netG.zero_grad()
            label.fill_(1.0)
            errG = criterion(netD(fake).view(-1), label)
            errG.backward()
            optimizerG.step()
            print(f"[{epoch}/{args.epochs}][{i}/{len(dataloader)}] Loss_D {(errD_real + errD_fake).item():.4f} "
                  f"Loss_G {errG.item():.4f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
