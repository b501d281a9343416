"""A plain ViT training loop as timm-style scripts write it without timm: a ViT-L/16-like encoder whose blocks run
through torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False), gradient accumulation over --accum
micro-batches, AdamW (foreach), bf16 autocast, and torch.cuda.empty_cache() after every optimizer step, as forum
answers advise against fragmentation. Random images (seeded). History from the start; the snapshot is dumped in the
except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=64)
p.add_argument("--accum", type=int, default=4)
p.add_argument("--size", type=int, default=384)
p.add_argument("--width", type=int, default=1024)
p.add_argument("--depth", type=int, default=24)
p.add_argument("--steps", type=int, default=4)
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()


class Block(nn.Module):
    def __init__(self, d, heads=16):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(self.n1(x)).view(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, N, C))
        return x + self.fc2(F.gelu(self.fc1(self.n2(x))))


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        d = args.width
        self.patch = nn.Conv2d(3, d, 16, 16)
        self.pos = nn.Parameter(torch.zeros(1, (args.size // 16) ** 2, d))
        self.blocks = nn.ModuleList(Block(d) for _ in range(args.depth))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 1000)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=False)
        return self.head(self.norm(x).mean(1))


torch.manual_seed(0)
device = torch.device("cuda")
model = ViT().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)
gen = torch.Generator().manual_seed(1)

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
try:
    for step in range(args.steps):
        for micro in range(args.accum):
            images = torch.rand(args.batch, 3, args.size, args.size, generator=gen).to(device)
            labels = torch.randint(1000, (args.batch,), generator=gen).to(device)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(images), labels) / args.accum
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        print(f"step {step} loss {loss.item() * args.accum:.4f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
