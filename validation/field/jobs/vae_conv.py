"""A convolutional VAE on 128x128 images, as the PyTorch examples' VAE is usually grown into one: a 5-stage
strided-conv encoder to mu and log-variance (--latent), the reparameterisation trick, a transposed-conv decoder,
binary cross-entropy summed over pixels plus the KL term, Adam, fp32. Each epoch of --steps-per-epoch batches ends
with a test pass under torch.no_grad() at --test-batch and a grid of reconstructions written with
torchvision.utils.save_image, as the example does. Random images. History from the start; the snapshot is dumped in
the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F
from torchvision.utils import save_image

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=192)
p.add_argument("--test-batch", type=int, default=384)
p.add_argument("--width", type=int, default=96)
p.add_argument("--latent", type=int, default=256)
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--steps-per-epoch", type=int, default=6)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        w = args.width
        chans = [3, w, w * 2, w * 4, w * 8, w * 8]
        self.encoder = nn.Sequential(*[m for a, b in zip(chans, chans[1:])
                                       for m in (nn.Conv2d(a, b, 4, 2, 1), nn.BatchNorm2d(b), nn.LeakyReLU(0.2))])
        self.mu = nn.Linear(w * 8 * 16, args.latent)
        self.logvar = nn.Linear(w * 8 * 16, args.latent)
        self.expand = nn.Linear(args.latent, w * 8 * 16)
        rev = chans[::-1]
        layers = []
        for a, b in zip(rev, rev[1:]):
            layers += [nn.ConvTranspose2d(a, b, 4, 2, 1)]
            layers += [nn.BatchNorm2d(b), nn.ReLU()] if b != 3 else [nn.Sigmoid()]
        self.decoder = nn.Sequential(*layers)

    def forward(self, x):
        h = self.encoder(x).flatten(1)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.decoder(self.expand(z).view(len(x), -1, 4, 4)), mu, logvar


def loss_function(recon, x, mu, logvar):
    bce = F.binary_cross_entropy(recon, x, reduction="sum")
    return bce - 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = VAE().cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
try:
    for epoch in range(args.epochs):
        model.train()
        for step in range(args.steps_per_epoch):
            x = torch.rand(args.batch, 3, 128, 128, device="cuda")
            recon, mu, logvar = model(x)
            loss = loss_function(recon, x, mu, logvar)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        test_loss = 0.0
        with torch.no_grad():
            for i in range(2):
                x = torch.rand(args.test_batch, 3, 128, 128, device="cuda")
                recon, mu, logvar = model(x)
                test_loss += loss_function(recon, x, mu, logvar).item()
                if i == 0:
                    save_image(torch.cat([x[:8], recon[:8]]), f"reconstruction_{epoch}.png", nrow=8)
        print(f"epoch {epoch}: train loss {loss.item() / args.batch:.1f} test loss {test_loss / 2 / args.test_batch:.1f}",
              flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
