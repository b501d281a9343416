"""A GPT trained with PyTorch's selective activation checkpointing, as its tutorial writes it: each block runs
under torch.utils.checkpoint (use_reentrant=False) with a context_fn from create_selective_checkpoint_contexts
whose policy saves the matmuls' outputs and recomputes the rest; bf16 autocast, AdamW (fused), sequences of
changing length (a bucketed sampler: lengths drawn per step). History from step --history-from as a ring of
--max-entries; the snapshot is dumped by the OOM observer.
"""
import argparse, functools
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts, CheckpointPolicy

p = argparse.ArgumentParser()
p.add_argument("--layers", type=int, default=16)
p.add_argument("--dim", type=int, default=1536)
p.add_argument("--heads", type=int, default=12)
p.add_argument("--vocab", type=int, default=50304)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--lengths", default="512,768,1024,1536,2048")
p.add_argument("--steps", type=int, default=18)
p.add_argument("--history-from", type=int, default=2)
p.add_argument("--max-entries", type=int, default=40000)
args = p.parse_args()

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))

SAVE = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default,
        torch.ops.aten._scaled_dot_product_flash_attention.default,
        torch.ops.aten._scaled_dot_product_efficient_attention.default}


def policy(ctx, op, *a, **k):
    return CheckpointPolicy.MUST_SAVE if op in SAVE else CheckpointPolicy.PREFER_RECOMPUTE


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.ln2, self.h = nn.LayerNorm(d), nn.LayerNorm(d), h
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.pos = nn.Embedding(args.vocab, args.dim), nn.Embedding(2048, args.dim)
        self.blocks = nn.ModuleList(Block(args.dim, args.heads) for _ in range(args.layers))
        self.ln, self.head = nn.LayerNorm(args.dim), nn.Linear(args.dim, args.vocab, bias=False)

    def forward(self, idx):
        x = self.emb(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        ctx = functools.partial(create_selective_checkpoint_contexts, policy)
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=False, context_fn=ctx)
        return self.head(self.ln(x))


torch.manual_seed(0)
model = GPT().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
lengths = [int(s) for s in args.lengths.split(",")]
gen = torch.Generator().manual_seed(1)
for step in range(args.steps):
    if step == args.history_from:
        torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
    t = lengths[int(torch.randint(len(lengths), (1,), generator=gen))]
    idx = torch.randint(args.vocab, (args.batch, t + 1), generator=gen).cuda(non_blocking=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, args.vocab), idx[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(f"step {step}: len {t} loss {loss.item():.3f}", flush=True)
