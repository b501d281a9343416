"""nanoGPT (Karpathy's model.py and train.py, re-expressed compactly) with its activations offloaded to pinned host
memory as PyTorch's autograd docs show it (Autograd mechanics, "Saved tensors hooks": the forward run under
torch.autograd.graph.save_on_cpu(pin_memory=True), so that every tensor it saves for the backward is copied to
pinned host memory and copied back to the GPU when the backward needs it). --every-other wraps only the even
blocks instead (the odd blocks, the embeddings and the loss head keep what they save on the GPU), as users trade
the copies' time against memory. The model: pre-LayerNorm blocks with F.scaled_dot_product_attention (causal) and a
GELU MLP, tied embeddings, vocabulary 50304; bf16 autocast; AdamW with fused=False (so PyTorch's default foreach
implementation) over nanoGPT's two weight-decay groups, warmup and cosine learning rate, clipping at 1.0; gradient
accumulation over --ga micro-batches. Each step's sequence length is drawn from a seeded RNG between --min-len and
--max-len; random token ids (seeded). History from the start (a ring of --max-entries); the snapshot is dumped in
the except handler.
"""
import argparse, contextlib, math, random
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--n-layer", type=int, default=12)
p.add_argument("--n-embd", type=int, default=2048)
p.add_argument("--n-head", type=int, default=16)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--min-len", type=int, default=512)
p.add_argument("--max-len", type=int, default=1024)
p.add_argument("--ga", type=int, default=2)
p.add_argument("--steps", type=int, default=8)
p.add_argument("--lr", type=float, default=6e-4)
p.add_argument("--every-other", action="store_true", help="save_on_cpu around the even blocks only")
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()
vocab = 50304


def offload():
    return torch.autograd.graph.save_on_cpu(pin_memory=True)


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
        self.wte, self.wpe = nn.Embedding(vocab, args.n_embd), nn.Embedding(args.max_len, args.n_embd)
        self.h = nn.ModuleList([Block() for _ in range(args.n_layer)])
        self.ln_f = nn.LayerNorm(args.n_embd)
        self.lm_head = nn.Linear(args.n_embd, vocab, bias=False)
        self.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p_ in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                nn.init.normal_(p_, mean=0.0, std=0.02 / math.sqrt(2 * args.n_layer))

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, targets):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for i, block in enumerate(self.h):
            with offload() if args.every_other and i % 2 == 0 else contextlib.nullcontext():
                x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def get_lr(it, warmup_iters=2):
    if it < warmup_iters:
        return args.lr * (it + 1) / (warmup_iters + 1)
    return 0.1 * args.lr + 0.45 * args.lr * (1 + math.cos(math.pi * (it - warmup_iters) / args.steps))


def get_batch(T):
    x = torch.randint(vocab, (args.batch, T))
    y = torch.randint(vocab, (args.batch, T))
    return x.pin_memory().to("cuda", non_blocking=True), y.pin_memory().to("cuda", non_blocking=True)


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch.manual_seed(1337)
model = GPT().cuda()
print(f"number of parameters: {sum(p_.numel() for p_ in model.parameters()) / 1e6:.2f}M", flush=True)
decay = [p_ for p_ in model.parameters() if p_.dim() >= 2]
no_decay = [p_ for p_ in model.parameters() if p_.dim() < 2]
optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                              lr=args.lr, betas=(0.9, 0.95), fused=False)
ctx = torch.autocast("cuda", dtype=torch.bfloat16)
whole = contextlib.nullcontext if args.every_other else offload
rng = random.Random(0)
model.train()
try:
    for step in range(args.steps):
        T = rng.randint(args.min_len, args.max_len)
        for group in optimizer.param_groups:
            group["lr"] = get_lr(step)
        for micro_step in range(args.ga):
            X, Y = get_batch(T)
            with whole(), ctx:
                logits, loss = model(X, Y)
                loss = loss / args.ga
            loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {loss.item() * args.ga:.4f} seq {T} norm {norm.item():.3f} "
              f"lr {optimizer.param_groups[0]['lr']:.2e}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
