"""A WaveNet vocoder trained as the r9y9/NVIDIA reference loops do: --layers dilated causal 1-D convolutions
(dilations 1..512 repeating), gated tanh·sigmoid units, residual and skip 1×1 convolutions, local conditioning on
upsampled mel frames (a transposed convolution ×256), a softmax over 256 μ-law classes at every sample. Each batch is a
random crop of --min-samples to --max-samples samples (the loader's max_time_steps), fp32, Adam, clipping. History
from the start; the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=4)
p.add_argument("--layers", type=int, default=20)
p.add_argument("--channels", type=int, default=256)
p.add_argument("--min-samples", type=int, default=8192)
p.add_argument("--max-samples", type=int, default=16384)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
hop, n_mel, classes = 256, 80, 256


class ResidualBlock(nn.Module):
    def __init__(self, dilation):
        super().__init__()
        c = args.channels
        self.dilation = dilation
        self.conv = nn.Conv1d(c, 2 * c, 2, dilation=dilation)
        self.cond = nn.Conv1d(n_mel, 2 * c, 1)
        self.res, self.skip = nn.Conv1d(c, c, 1), nn.Conv1d(c, c, 1)

    def forward(self, x, mel):
        h = self.conv(F.pad(x, (self.dilation, 0))) + self.cond(mel)
        a, b = h.chunk(2, 1)
        z = torch.tanh(a) * torch.sigmoid(b)
        return (x + self.res(z)) * 0.5 ** 0.5, self.skip(z)


class WaveNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.upsample = nn.ConvTranspose1d(n_mel, n_mel, hop * 2, stride=hop, padding=hop // 2)
        self.embed = nn.Conv1d(classes, args.channels, 1)
        self.blocks = nn.ModuleList(ResidualBlock(2 ** (i % 10)) for i in range(args.layers))
        self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(args.channels, args.channels, 1), nn.ReLU(),
                                 nn.Conv1d(args.channels, classes, 1))

    def forward(self, audio_onehot, mel):
        mel = self.upsample(mel)[..., :audio_onehot.shape[-1]]
        x, skips = self.embed(audio_onehot), 0
        for block in self.blocks:
            x, s = block(x, mel)
            skips = skips + s
        return self.out(skips)


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch.manual_seed(0)
model = WaveNet().cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
gen = torch.Generator().manual_seed(7)
try:
    for step in range(args.steps):
        frames = int(torch.randint(args.min_samples // hop, args.max_samples // hop + 1, (1,), generator=gen))
        samples = frames * hop
        mel = torch.randn(args.batch, n_mel, frames, generator=gen).cuda()
        audio = torch.randint(0, classes, (args.batch, samples + 1), generator=gen).cuda()
        onehot = F.one_hot(audio[:, :-1], classes).transpose(1, 2).float()
        logits = model(onehot, mel)
        loss = F.cross_entropy(logits, audio[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        print(f"step {step}: samples {samples} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
