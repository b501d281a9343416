"""A GPT training loop in the style of minGPT / nanoGPT forks that sample from the model while training: every
--sample-every steps, model.generate() decodes --sample-tokens new tokens for a batch of --sample-batch prompts
(top-k sampling, a KV cache grown by torch.cat at every token, as minGPT-style caches do), then training goes on.
Pre-LN blocks, AdamW (fused), bf16 autocast. Random token ids (seeded). History from the start; the snapshot is
dumped in the except handler.
"""
import argparse, math
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--vocab", type=int, default=50304)
p.add_argument("--width", type=int, default=1024)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--ctx", type=int, default=1024)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--steps", type=int, default=8)
p.add_argument("--sample-every", type=int, default=3)
p.add_argument("--sample-batch", type=int, default=256)
p.add_argument("--sample-tokens", type=int, default=384)
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()


class Block(nn.Module):
    def __init__(self, d, heads=16):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.heads = heads

    def forward(self, x, cache=None):
        B, T, C = x.shape
        q, k, v = self.attn(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if cache is not None:
            if cache:
                k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
            cache[:] = [k, v]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None or T > 1)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(args.vocab, args.width), nn.Embedding(args.ctx, args.width)
        self.blocks = nn.ModuleList(Block(args.width) for _ in range(args.layers))
        self.ln_f = nn.LayerNorm(args.width)
        self.head = nn.Linear(args.width, args.vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx, caches=None, start=0):
        pos = torch.arange(start, start + idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for i, blk in enumerate(self.blocks):
            x = blk(x, None if caches is None else caches[i])
        return self.head(self.ln_f(x))

    @torch.no_grad()
    def generate(self, idx, new_tokens, top_k=200):
        caches = [[] for _ in self.blocks]
        logits = self(idx, caches)[:, -1, :]
        for t in range(new_tokens):
            v, _ = torch.topk(logits, top_k)
            logits[logits < v[:, [-1]]] = -float("inf")
            nxt = torch.multinomial(F.softmax(logits.float(), dim=-1), 1)
            idx = torch.cat((idx, nxt), dim=1)
            logits = self(nxt, caches, start=idx.size(1) - 1)[:, -1, :]
        return idx


torch.manual_seed(0)
device = torch.device("cuda")
model = GPT().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), fused=True)
data = torch.randint(args.vocab, (args.steps, args.batch, args.ctx + 1), generator=torch.Generator().manual_seed(1))

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
try:
    for step in range(args.steps):
        x, y = data[step, :, :-1].to(device), data[step, :, 1:].to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x).float().view(-1, args.vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"iter {step}: loss {loss.item():.4f}", flush=True)
        if (step + 1) % args.sample_every == 0:
            model.eval()
            prompts = data[step, :, :32].to(device)
            prompts = prompts.repeat(math.ceil(args.sample_batch / args.batch), 1)[:args.sample_batch]
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model.generate(prompts, args.sample_tokens)
            print(f"sampled {tuple(out.shape)}", flush=True)
            model.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
