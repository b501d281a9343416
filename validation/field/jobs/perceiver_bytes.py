"""A Perceiver IO language model over raw UTF-8 bytes (Jaegle et al.), in plain torch as its re-implementations
write it: inputs of up to --max-len bytes (random lengths, padded per batch with a key-padding mask) cross-attended
by --latents learned latents, --layers latent self-attention blocks, then every byte position queries the latents
back for masked-byte prediction (15% masked), bf16 autocast, AdamW with a cosine schedule. History starts mid-run at
step --history-from as a ring of --max-entries; the snapshot is dumped by the OOM observer.
"""
import argparse, math, random
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=32)
p.add_argument("--max-len", type=int, default=16384)
p.add_argument("--latents", type=int, default=256)
p.add_argument("--dim", type=int, default=768)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--history-from", type=int, default=2)
p.add_argument("--max-entries", type=int, default=80000)
args = p.parse_args()

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


class CrossAttention(nn.Module):
    def __init__(self, heads=8):
        super().__init__()
        self.heads = heads
        self.q_norm, self.kv_norm = nn.LayerNorm(args.dim), nn.LayerNorm(args.dim)
        self.q, self.kv, self.out = (nn.Linear(args.dim, args.dim), nn.Linear(args.dim, 2 * args.dim),
                                     nn.Linear(args.dim, args.dim))
        self.mlp = nn.Sequential(nn.LayerNorm(args.dim), nn.Linear(args.dim, 4 * args.dim), nn.GELU(),
                                 nn.Linear(4 * args.dim, args.dim))

    def forward(self, queries, inputs, mask=None):
        b, n, d = queries.shape
        q = self.q(self.q_norm(queries)).view(b, n, self.heads, -1).transpose(1, 2)
        k, v = self.kv(self.kv_norm(inputs)).view(b, inputs.shape[1], 2, self.heads, -1).permute(2, 0, 3, 1, 4)
        attn_mask = None if mask is None else mask[:, None, None, :]
        x = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask).transpose(1, 2).reshape(b, n, d)
        x = queries + self.out(x)
        return x + self.mlp(x)


class PerceiverIO(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(258, args.dim)
        self.pos = nn.Parameter(torch.randn(args.max_len, args.dim) * 0.02)
        self.latents = nn.Parameter(torch.randn(args.latents, args.dim) * 0.02)
        self.encode = CrossAttention()
        self.process = nn.ModuleList(CrossAttention() for _ in range(args.layers))
        self.decode = CrossAttention()
        self.head = nn.Linear(args.dim, 258)

    def forward(self, ids, mask):
        x = self.embed(ids) + self.pos[:ids.shape[1]]
        z = self.encode(self.latents.expand(len(ids), -1, -1), x, mask)
        for block in self.process:
            z = block(z, z)
        return self.head(self.decode(self.pos[:ids.shape[1]].expand(len(ids), -1, -1), z))


model = PerceiverIO().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / args.steps)))
rng = random.Random(9)
for step in range(args.steps):
    if step == args.history_from:
        torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
    lengths = [max(512, min(args.max_len, int(rng.lognormvariate(8.6, 0.6)))) for _ in range(args.batch)]
    n = max(lengths)
    ids = torch.randint(0, 256, (args.batch, n), device="cuda")
    mask = torch.arange(n, device="cuda")[None, :] < torch.tensor(lengths, device="cuda")[:, None]
    masked = (torch.rand(args.batch, n, device="cuda") < 0.15) & mask
    labels = torch.where(masked, ids, torch.full_like(ids, -100))
    ids = torch.where(masked, torch.full_like(ids, 256), ids)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids, mask)
        loss = F.cross_entropy(logits.float().view(-1, 258), labels.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()
    if step % 4 == 0:
        print(f"step {step}: {n} bytes, loss {loss.item():.3f}", flush=True)
