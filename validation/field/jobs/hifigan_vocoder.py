"""HiFi-GAN vocoder training (Kong et al. 2020) as its reference repository runs it: a generator upsampling 80-bin mel
frames ×256 by transposed convolutions with multi-receptive-field residual blocks, a multi-period discriminator
(periods 2, 3, 5, 7, 11 over the waveform folded into 2-D) and a multi-scale discriminator (raw, ×2 and ×4 average-
pooled), least-squares adversarial losses, feature matching and a ×45 mel-spectrogram L1; AdamW (0.8, 0.99) for G
and D, fp32. Random audio crops of --segment samples at 22,050 Hz, the mel by torch.stft and a triangular filterbank
on the GPU. History from the start; the snapshot is dumped by the OOM observer.
"""
import argparse, math
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=48)
p.add_argument("--segment", type=int, default=8192)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
HOP, WIN, NFFT, MELS, RATE = 256, 1024, 1024, 80, 22050

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch.manual_seed(0)


def mel_filterbank():
    def hz_to_mel(f):
        return 2595 * math.log10(1 + f / 700)
    mels = torch.linspace(hz_to_mel(0), hz_to_mel(8000), MELS + 2)
    hz = 700 * (10 ** (mels / 2595) - 1)
    bins = torch.linspace(0, RATE / 2, NFFT // 2 + 1)
    lower, center, upper = hz[:-2, None], hz[1:-1, None], hz[2:, None]
    return torch.clamp(torch.minimum((bins - lower) / (center - lower), (upper - bins) / (upper - center)), min=0)


FILTERS, WINDOW = mel_filterbank().cuda(), torch.hann_window(WIN).cuda()


def mel(wave):
    spec = torch.stft(F.pad(wave, ((NFFT - HOP) // 2, (NFFT - HOP) // 2), mode="reflect"), NFFT, HOP, WIN, WINDOW,
                      center=False, return_complex=True)
    return torch.log(torch.clamp(FILTERS @ (spec.abs() + 1e-9), min=1e-5))


class ResBlock(nn.Module):
    def __init__(self, c, k):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv1d(c, c, k, dilation=d, padding=(k * d - d) // 2) for d in (1, 3, 5))
        self.convs2 = nn.ModuleList(nn.Conv1d(c, c, k, padding=k // 2) for _ in range(3))

    def forward(self, x):
        for c1, c2 in zip(self.convs, self.convs2):
            x = x + c2(F.leaky_relu(c1(F.leaky_relu(x, 0.1)), 0.1))
        return x


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = nn.Conv1d(MELS, 512, 7, padding=3)
        self.ups, self.blocks, c = nn.ModuleList(), nn.ModuleList(), 512
        for rate, k in [(8, 16), (8, 16), (2, 4), (2, 4)]:
            self.ups.append(nn.ConvTranspose1d(c, c // 2, k, rate, padding=(k - rate) // 2))
            c //= 2
            self.blocks.append(nn.ModuleList(ResBlock(c, k) for k in (3, 7, 11)))
        self.post = nn.Conv1d(c, 1, 7, padding=3)

    def forward(self, m):
        x = self.pre(m)
        for up, blocks in zip(self.ups, self.blocks):
            x = up(F.leaky_relu(x, 0.1))
            x = sum(b(x) for b in blocks) / len(blocks)
        return torch.tanh(self.post(F.leaky_relu(x)))


class PeriodD(nn.Module):
    def __init__(self, period):
        super().__init__()
        self.period = period
        chans = [1, 32, 128, 512, 1024, 1024]
        self.convs = nn.ModuleList(nn.Conv2d(chans[i], chans[i + 1], (5, 1), (3 if i < 4 else 1, 1), (2, 0))
                                   for i in range(5))
        self.post = nn.Conv2d(1024, 1, (3, 1), padding=(1, 0))

    def forward(self, x):
        b, c, t = x.shape
        x = F.pad(x, (0, (-t) % self.period), mode="reflect").view(b, c, -1, self.period)
        feats = []
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
            feats.append(x)
        return self.post(x).flatten(1), feats


class ScaleD(nn.Module):
    def __init__(self):
        super().__init__()
        spec = [(1, 128, 15, 1, 1), (128, 128, 41, 2, 4), (128, 256, 41, 2, 16), (256, 512, 41, 4, 16),
                (512, 1024, 41, 4, 16), (1024, 1024, 41, 1, 16), (1024, 1024, 5, 1, 1)]
        self.convs = nn.ModuleList(nn.Conv1d(i, o, k, s, groups=g, padding=k // 2) for i, o, k, s, g in spec)
        self.post = nn.Conv1d(1024, 1, 3, padding=1)

    def forward(self, x):
        feats = []
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
            feats.append(x)
        return self.post(x).flatten(1), feats


class Discriminators(nn.Module):
    def __init__(self):
        super().__init__()
        self.periods = nn.ModuleList(PeriodD(p) for p in (2, 3, 5, 7, 11))
        self.scales = nn.ModuleList(ScaleD() for _ in range(3))

    def forward(self, x):
        outs = [d(x) for d in self.periods]
        for i, d in enumerate(self.scales):
            outs.append(d(x if i == 0 else F.avg_pool1d(x, 4 ** i // 2 * 2, 2 ** i, padding=2 ** i)))
        return outs


G, D = Generator().cuda(), Discriminators().cuda()
opt_g = torch.optim.AdamW(G.parameters(), 2e-4, betas=(0.8, 0.99))
opt_d = torch.optim.AdamW(D.parameters(), 2e-4, betas=(0.8, 0.99))
for step in range(args.steps):
    wave = torch.randn(args.batch, args.segment, device="cuda").clamp(-1, 1) * 0.5
    m = mel(wave)
    fake = G(m)[:, :, :args.segment]
    loss_d = sum(((1 - r) ** 2).mean() + (f ** 2).mean()
                 for (r, _), (f, _) in zip(D(wave.unsqueeze(1)), D(fake.detach())))
    opt_d.zero_grad(set_to_none=True)
    loss_d.backward()
    opt_d.step()
    real_outs, fake_outs = D(wave.unsqueeze(1)), D(fake)
    adv = sum(((1 - f) ** 2).mean() for f, _ in fake_outs)
    matching = sum(F.l1_loss(ff, rf.detach()) for (_, rfs), (_, ffs) in zip(real_outs, fake_outs)
                   for rf, ff in zip(rfs, ffs))
    loss_g = adv + 2 * matching + 45 * F.l1_loss(mel(fake.squeeze(1)), m)
    opt_g.zero_grad(set_to_none=True)
    loss_g.backward()
    opt_g.step()
    print(f"step {step}: loss_d {loss_d.item():.3f} loss_g {loss_g.item():.3f}", flush=True)
