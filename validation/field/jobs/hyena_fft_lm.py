"""A long-convolution language model in the style of Hyena/H3, trained as its papers do with a sequence-length warmup:
each block projects to a value, a gate and an input, convolves the input with a learned per-channel filter as long as
the sequence by FFT (torch.fft.rfft/irfft over 2L points, in fp32 as cuFFT needs it), gates, projects back, then an
MLP; bf16 autocast elsewhere, AdamW, clipping. The sequence length doubles every --stage steps from --min-len up to
--max-len at a fixed batch. Random tokens. History from the start as a ring of --max-entries; the snapshot is dumped
by the OOM observer.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=8)
p.add_argument("--dim", type=int, default=768)
p.add_argument("--layers", type=int, default=8)
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--min-len", type=int, default=1024)
p.add_argument("--max-len", type=int, default=4096)
p.add_argument("--stage", type=int, default=3)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--max-entries", type=int, default=40000)
args = p.parse_args()

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


class LongConvBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(args.dim), nn.LayerNorm(args.dim)
        self.in_proj = nn.Linear(args.dim, 3 * args.dim)
        self.filter = nn.Parameter(torch.randn(args.dim, args.max_len) * 0.02)
        self.decay = nn.Parameter(torch.linspace(0.5, 4.0, args.dim)[:, None])
        self.out_proj = nn.Linear(args.dim, args.dim)
        self.mlp = nn.Sequential(nn.Linear(args.dim, 4 * args.dim), nn.GELU(), nn.Linear(4 * args.dim, args.dim))

    def forward(self, x):
        length = x.shape[1]
        value, gate, u = self.in_proj(self.norm1(x)).chunk(3, dim=-1)
        t = torch.linspace(0, 1, length, device=x.device)
        k = self.filter[:, :length] * torch.exp(-self.decay * t)
        with torch.autocast("cuda", enabled=False):
            n = 2 * length
            u_f = torch.fft.rfft(u.float().transpose(1, 2), n=n)
            k_f = torch.fft.rfft(k.float(), n=n)
            y = torch.fft.irfft(u_f * k_f, n=n)[..., :length].transpose(1, 2)
        x = x + self.out_proj(y.to(x.dtype) * F.silu(gate) * value)
        return x + self.mlp(self.norm2(x))


class LongConvLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(args.vocab, args.dim)
        self.blocks = nn.ModuleList(LongConvBlock() for _ in range(args.layers))
        self.norm = nn.LayerNorm(args.dim)
        self.head = nn.Linear(args.dim, args.vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


torch.manual_seed(0)
model = LongConvLM().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
for step in range(args.steps):
    length = min(args.max_len, args.min_len * 2 ** (step // args.stage))
    ids = torch.randint(0, args.vocab, (args.batch, length + 1), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids[:, :-1])
    loss = F.cross_entropy(logits.float().view(-1, args.vocab), ids[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    print(f"step {step}: length {length} loss {loss.item():.3f}", flush=True)
