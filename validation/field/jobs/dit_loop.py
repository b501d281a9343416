"""A diffusion transformer (DiT) as the DiT reference train.py and its minimal re-implementations write it, in a
plain loop: latents cut into patches, timestep and class embeddings, adaLN-Zero blocks, the noise-prediction MSE
at random timesteps, bf16 autocast, AdamW, an EMA copy of the model updated after every step, the model under
torch.compile (--compile default, or reduce-overhead whose CUDA graphs keep their own pool, or none). Fixed
shapes. History from the start; the snapshot is dumped by the OOM observer.
"""
import argparse, copy, math
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--latent", type=int, default=64)
p.add_argument("--patch", type=int, default=2)
p.add_argument("--width", type=int, default=1152)
p.add_argument("--depth", type=int, default=28)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--compile", default="default", help="default | reduce-overhead | none")
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=100000)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm1 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.attn = nn.MultiheadAttention(d, d // 72, batch_first=True)
        self.norm2 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))

    def forward(self, x, c):
        s1, g1, a1, s2, g2, a2 = self.ada(c).chunk(6, dim=1)
        h = modulate(self.norm1(x), s1, g1)
        x = x + a1.unsqueeze(1) * self.attn(h, h, h, need_weights=False)[0]
        return x + a2.unsqueeze(1) * self.mlp(modulate(self.norm2(x), s2, g2))


class DiT(nn.Module):
    def __init__(self):
        super().__init__()
        d, self.p = args.width, args.patch
        self.tokens = (args.latent // args.patch) ** 2
        self.embed = nn.Conv2d(4, d, args.patch, args.patch)
        self.pos = nn.Parameter(torch.zeros(1, self.tokens, d))
        self.time = nn.Sequential(nn.Linear(256, d), nn.SiLU(), nn.Linear(d, d))
        self.label = nn.Embedding(1001, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(args.depth))
        self.final = nn.Linear(d, args.patch * args.patch * 4)

    def forward(self, x, t, y):
        n = x.shape[0]
        half = 128
        freqs = torch.exp(-math.log(10000) * torch.arange(half, device=x.device) / half)
        t_emb = torch.cat([torch.cos(t[:, None] * freqs), torch.sin(t[:, None] * freqs)], dim=1)
        c = self.time(t_emb) + self.label(y)
        h = self.embed(x).flatten(2).transpose(1, 2) + self.pos
        for block in self.blocks:
            h = block(h, c)
        side = args.latent // self.p
        h = self.final(h).view(n, side, side, self.p, self.p, 4)
        return torch.einsum("nhwpqc->nchpwq", h).reshape(n, 4, args.latent, args.latent)


model = DiT().cuda()
ema = copy.deepcopy(model).requires_grad_(False)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0)
forward = torch.compile(model, mode=args.compile) if args.compile != "none" else model
betas = torch.linspace(1e-4, 0.02, 1000, device="cuda")
alphas = torch.cumprod(1 - betas, 0)
for step in range(args.steps):
    if args.compile == "reduce-overhead":
        torch.compiler.cudagraph_mark_step_begin()
    latents = torch.randn(args.batch, 4, args.latent, args.latent, device="cuda")
    labels = torch.randint(0, 1000, (args.batch,), device="cuda")
    t = torch.randint(0, 1000, (args.batch,), device="cuda")
    noise = torch.randn_like(latents)
    a = alphas[t].view(-1, 1, 1, 1)
    noisy = a.sqrt() * latents + (1 - a).sqrt() * noise
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.mse_loss(forward(noisy, t.float(), labels).float(), noise)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 1e-4)
    print(f"step {step} loss {loss.item():.4f}", flush=True)
