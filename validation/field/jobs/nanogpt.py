"""GPT-2 trained as Karpathy's nanoGPT train.py does it, on random tokens: its model (pre-LayerNorm blocks,
F.scaled_dot_product_attention, tied embedding), AdamW with fused=True, bf16 autocast, a GradScaler that
is a no-op under bf16, gradient accumulation over --ga micro-steps, gradient clipping at 1.0, and
estimate_loss() (eval_iters batches per split under torch.no_grad) at iteration 0 and every
--eval-interval; --compile compiles the model after the optimizer is made, as train.py does. History from the
start; the snapshot is dumped in the except handler.
"""
import argparse, math
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--n-layer", type=int, default=12)
p.add_argument("--n-embd", type=int, default=1024)
p.add_argument("--n-head", type=int, default=16)
p.add_argument("--block-size", type=int, default=1024)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--ga", type=int, default=4)
p.add_argument("--iters", type=int, default=8)
p.add_argument("--eval-interval", type=int, default=4)
p.add_argument("--eval-iters", type=int, default=3)
p.add_argument("--max-entries", type=int, default=100000)
p.add_argument("--compile", action="store_true", help="model = torch.compile(model), as train.py's compile=True")
args = p.parse_args()
vocab = 50304


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(args.n_embd, 3 * args.n_embd)
        self.c_proj = nn.Linear(args.n_embd, args.n_embd)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(args.n_embd, dim=2)
        q, k, v = (t.view(B, T, args.n_head, C // args.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(args.n_embd), CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(args.n_embd)
        self.mlp = nn.Sequential(nn.Linear(args.n_embd, 4 * args.n_embd), nn.GELU(),
                                 nn.Linear(4 * args.n_embd, args.n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, args.n_embd), nn.Embedding(args.block_size, args.n_embd)
        self.h = nn.ModuleList([Block() for _ in range(args.n_layer)])
        self.ln_f = nn.LayerNorm(args.n_embd)
        self.lm_head = nn.Linear(args.n_embd, vocab, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx, targets=None):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def get_batch(split):
    x = torch.randint(vocab, (args.batch, args.block_size))
    y = torch.randint(vocab, (args.batch, args.block_size))
    return x.pin_memory().to("cuda", non_blocking=True), y.pin_memory().to("cuda", non_blocking=True)


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = GPT().cuda()
scaler = torch.amp.GradScaler("cuda", enabled=False)  # dtype bfloat16: no scaling, as nanoGPT sets it
decay = [p_ for p_ in model.parameters() if p_.dim() >= 2]
no_decay = [p_ for p_ in model.parameters() if p_.dim() < 2]
optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                              lr=6e-4, betas=(0.9, 0.95), fused=True)
ctx = torch.autocast("cuda", dtype=torch.bfloat16)
if args.compile:
    model = torch.compile(model)


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        losses = torch.zeros(args.eval_iters)
        for k in range(args.eval_iters):
            X, Y = get_batch(split)
            with ctx:
                logits, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


try:
    X, Y = get_batch("train")
    for iter_num in range(args.iters):
        lr = 6e-4 * min(1.0, (iter_num + 1) / 2) * 0.5 * (1 + math.cos(math.pi * iter_num / args.iters))
        for group in optimizer.param_groups:
            group["lr"] = lr
        if iter_num % args.eval_interval == 0:
            losses = estimate_loss()
            print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}", flush=True)
        for micro_step in range(args.ga):
            with ctx:
                logits, loss = model(X, Y)
                loss = loss / args.ga
            X, Y = get_batch("train")
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
