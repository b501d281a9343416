"""Speech separation with Conv-TasNet (Luo & Mesgarani 2019) as Asteroid-style recipes train it: a learned 1-D conv
encoder (N=512, L=16), a temporal convolutional separator (R repeats of X dilated depthwise-separable blocks, B=128,
H=512, PReLU, global layer norm), sigmoid masks for 2 speakers, a transposed-conv decoder; permutation-invariant
SI-SNR loss, Adam, gradient clipping at 5. Mixtures of 2–6 s at 8 kHz drawn per utterance, a batch padded to its
longest; every --eval-every steps a validation pass on full 8 s utterances under torch.no_grad. History as a ring of
--max-entries from the start; the snapshot is dumped by the OOM observer.
"""
import argparse, itertools, random
import torch, torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=8)
p.add_argument("--repeats", type=int, default=3)
p.add_argument("--blocks", type=int, default=8)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--eval-every", type=int, default=6)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
RATE, N, L, B, H, SPK = 8000, 512, 16, 128, 512, 2

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch.manual_seed(0)
rng = random.Random(0)


class GlobalLayerNorm(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gamma, self.beta = nn.Parameter(torch.ones(1, c, 1)), nn.Parameter(torch.zeros(1, c, 1))

    def forward(self, x):
        mean = x.mean((1, 2), keepdim=True)
        var = ((x - mean) ** 2).mean((1, 2), keepdim=True)
        return self.gamma * (x - mean) / (var + 1e-8).sqrt() + self.beta


class Block(nn.Module):
    def __init__(self, dilation):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(B, H, 1), nn.PReLU(), GlobalLayerNorm(H),
                                 nn.Conv1d(H, H, 3, padding=dilation, dilation=dilation, groups=H), nn.PReLU(),
                                 GlobalLayerNorm(H))
        self.res, self.skip = nn.Conv1d(H, B, 1), nn.Conv1d(H, B, 1)

    def forward(self, x):
        y = self.net(x)
        return x + self.res(y), self.skip(y)


class ConvTasNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Conv1d(1, N, L, stride=L // 2, bias=False)
        self.bottleneck = nn.Sequential(GlobalLayerNorm(N), nn.Conv1d(N, B, 1))
        self.blocks = nn.ModuleList(Block(2 ** x) for _ in range(args.repeats) for x in range(args.blocks))
        self.mask = nn.Sequential(nn.PReLU(), nn.Conv1d(B, SPK * N, 1))
        self.decoder = nn.ConvTranspose1d(N, 1, L, stride=L // 2, bias=False)

    def forward(self, mix):
        w = torch.relu(self.encoder(mix.unsqueeze(1)))
        x, skips = self.bottleneck(w), 0
        for block in self.blocks:
            x, s = block(x)
            skips = skips + s
        masks = torch.sigmoid(self.mask(skips)).view(mix.shape[0], SPK, N, -1)
        out = self.decoder((w.unsqueeze(1) * masks).flatten(0, 1))
        return out.view(mix.shape[0], SPK, -1)[..., :mix.shape[-1]]


def si_snr(est, ref):
    est, ref = est - est.mean(-1, keepdim=True), ref - ref.mean(-1, keepdim=True)
    proj = (est * ref).sum(-1, keepdim=True) * ref / (ref.pow(2).sum(-1, keepdim=True) + 1e-8)
    return 10 * torch.log10(proj.pow(2).sum(-1) / ((est - proj).pow(2).sum(-1) + 1e-8) + 1e-8)


def pit_loss(est, ref):
    scores = torch.stack([si_snr(est[:, list(perm)], ref).mean(-1) for perm in itertools.permutations(range(SPK))])
    return -scores.max(0).values.mean()


def batch(n, seconds):
    lengths = [int(RATE * s) for s in seconds]
    padded = -(-max(lengths) // (L // 2)) * (L // 2)  # a whole number of encoder strides: the decoder gives it back
    refs = torch.zeros(n, SPK, padded, device="cuda")
    for i, k in enumerate(lengths):
        refs[i, :, :k] = torch.randn(SPK, k, device="cuda")
    return refs.sum(1), refs


model = ConvTasNet().cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(args.steps):
    mix, refs = batch(args.batch, [rng.uniform(2, 6) for _ in range(args.batch)])
    loss = pit_loss(model(mix), refs)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    opt.step()
    print(f"step {step}: length {mix.shape[-1] / RATE:.2f} s, loss {loss.item():.3f}", flush=True)
    if (step + 1) % args.eval_every == 0:
        model.eval()
        with torch.no_grad():
            mix, refs = batch(args.batch, [8.0] * args.batch)
            print(f"eval after {step}: SI-SNR {-pit_loss(model(mix), refs).item():.2f} dB", flush=True)
        model.train()
