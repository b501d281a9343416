"""A GPT trained with sequence-length warmup (as DeepSpeed's curriculum and several LLM recipes do: short sequences
first, the length raised every few steps), compiled with torch.compile(dynamic=True) so the new lengths reuse the
graph.

nanoGPT-style blocks (SDPA attention, GELU MLP), bf16 autocast, fused AdamW, gradient clipping; the batch's length
starts at --min-len and doubles every --every steps up to --max-len. History from the start; the snapshot is dumped
in an `except` handler around the loop.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--n-embd", type=int, default=1024)
p.add_argument("--n-layer", type=int, default=12)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--min-len", type=int, default=256)
p.add_argument("--max-len", type=int, default=2048)
p.add_argument("--every", type=int, default=3)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
VOCAB = 50304


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        d = args.n_embd
        self.wte, self.wpe = nn.Embedding(VOCAB, d), nn.Embedding(args.max_len, d)
        self.blocks = nn.ModuleList([Block(d, d // 64) for _ in range(args.n_layer)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.float().view(-1, VOCAB), targets.reshape(-1))


model = GPT().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
compiled = torch.compile(model, dynamic=True)


def train():
    torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
    for step in range(args.steps):
        length = min(args.max_len, args.min_len * 2 ** (step // args.every))
        data = torch.randint(0, VOCAB, (args.batch, length + 1), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = compiled(data[:, :-1], data[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step} len {length} loss {loss.item():.3f}", flush=True)


try:
    train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
