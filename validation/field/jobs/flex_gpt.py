"""GPT pretraining on packed documents with FlexAttention, as torchtitan and attention-gym set it up.

Each row packs documents of random length into --seq tokens; a document-causal BlockMask is built per batch with
create_block_mask (on the GPU), and the compiled flex_attention runs the layers' attention. Rotary embeddings,
RMSNorm, a SwiGLU MLP, bf16 autocast, fused AdamW. History from the start; the snapshot is dumped in an
`except torch.OutOfMemoryError` handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

p = argparse.ArgumentParser()
p.add_argument("--layers", type=int, default=12)
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--seq", type=int, default=4096)
p.add_argument("--vocab", type=int, default=50304)
p.add_argument("--steps", type=int, default=10)
args = p.parse_args()

flex = torch.compile(flex_attention, dynamic=False)


def rotary(x, cos, sin):
    a, b = x[..., ::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        hidden = 8 * d // 3 // 64 * 64
        self.gate, self.up, self.down = nn.Linear(d, hidden, bias=False), nn.Linear(d, hidden, bias=False), \
            nn.Linear(hidden, d, bias=False)

    def forward(self, x, mask, cos, sin):
        B, T, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, T, 3, self.heads, D // self.heads).unbind(2)
        q, k, v = rotary(q, cos, sin).transpose(1, 2), rotary(k, cos, sin).transpose(1, 2), v.transpose(1, 2)
        x = x + self.proj(flex(q, k, v, block_mask=mask).transpose(1, 2).reshape(B, T, D))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        d = args.hidden
        self.embed = nn.Embedding(args.vocab, d)
        self.blocks = nn.ModuleList(Block(d, d // 128) for _ in range(args.layers))
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, args.vocab, bias=False)
        freqs = 1.0 / (10000 ** (torch.arange(0, 128, 2).float() / 128))
        angles = torch.outer(torch.arange(args.seq).float(), freqs)
        self.register_buffer("cos", angles.cos()[None, :, None, :], persistent=False)
        self.register_buffer("sin", angles.sin()[None, :, None, :], persistent=False)

    def forward(self, ids, mask):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, mask, self.cos, self.sin)
        return self.head(self.norm(x))


def packed_batch(generator):
    """Token ids and the document each token belongs to: documents of 64 to seq/2 tokens, packed back to back."""
    lengths = torch.randint(64, args.seq // 2, (args.batch, args.seq // 64), generator=generator)
    ends = lengths.cumsum(1)
    positions = torch.arange(args.seq)
    documents = torch.searchsorted(ends, positions.expand(args.batch, -1).contiguous(), right=True)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=generator)
    return ids.cuda(), documents.cuda()


torch.cuda.memory._record_memory_history(max_entries=100000)
model = GPT().cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
generator = torch.Generator().manual_seed(7)
try:
    for step in range(args.steps):
        ids, documents = packed_batch(generator)

        def document_causal(b, h, q_idx, kv_idx):
            return (documents[b, q_idx] == documents[b, kv_idx]) & (q_idx >= kv_idx)

        mask = create_block_mask(document_causal, B=args.batch, H=None, Q_LEN=args.seq, KV_LEN=args.seq)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids, mask)
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
