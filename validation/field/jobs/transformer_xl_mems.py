"""A Transformer-XL language model in plain torch, as its reference implementation trains it: the corpus is read
in consecutive segments of --seg tokens, and every layer attends over its cached memory of the previous segments'
hidden states (detached, at most --mem-len) followed by the current segment, causally; the memories grow segment by
segment until --mem-len, then stay. Learned relative position biases per head, pre-norm blocks, bf16 autocast,
Adam with clipping. Random tokens. History from the start as a ring of --max-entries; the snapshot is dumped by the
OOM observer.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=16)
p.add_argument("--seg", type=int, default=512)
p.add_argument("--mem-len", type=int, default=2048)
p.add_argument("--dim", type=int, default=1024)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--max-entries", type=int, default=15000)
args = p.parse_args()

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(args.dim), nn.LayerNorm(args.dim)
        self.qkv, self.out = nn.Linear(args.dim, 3 * args.dim), nn.Linear(args.dim, args.dim)
        self.ff = nn.Sequential(nn.Linear(args.dim, 4 * args.dim), nn.GELU(), nn.Linear(4 * args.dim, args.dim))
        self.rel_bias = nn.Parameter(torch.zeros(args.heads, args.seg + args.mem_len))

    def forward(self, x, mem):
        b, s, d = x.shape
        h = self.norm1(torch.cat([mem, x], 1) if mem is not None else x)
        q, k, v = self.qkv(h).view(b, h.shape[1], 3, args.heads, -1).permute(2, 0, 3, 1, 4)
        q = q[:, :, -s:]
        m = k.shape[2] - s
        qi = torch.arange(s, device=x.device)[:, None] + m
        ki = torch.arange(k.shape[2], device=x.device)[None, :]
        distance = (qi - ki).clamp(min=0)
        bias = self.rel_bias[:, distance].to(q.dtype).masked_fill(ki > qi, float("-inf"))
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=bias[None])
        x = x + self.out(att.transpose(1, 2).reshape(b, s, d))
        return x + self.ff(self.norm2(x))


class TransformerXL(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(args.vocab, args.dim)
        self.layers = nn.ModuleList(Layer() for _ in range(args.layers))
        self.norm = nn.LayerNorm(args.dim)
        self.head = nn.Linear(args.dim, args.vocab, bias=False)

    def forward(self, ids, mems):
        x = self.embed(ids)
        new_mems = []
        for layer, mem in zip(self.layers, mems):
            cat = torch.cat([mem, x], 1) if mem is not None else x
            new_mems.append(cat[:, -args.mem_len:].detach())
            x = layer(x, mem)
        return self.head(self.norm(x)), new_mems


model = TransformerXL().cuda()
opt = torch.optim.Adam(model.parameters(), lr=2.5e-4)
corpus = torch.randint(0, args.vocab, (args.batch, args.seg * (args.steps + 1) + 1))
mems = [None] * args.layers
for step in range(args.steps):
    chunk = corpus[:, step * args.seg:(step + 1) * args.seg + 1].cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits, mems = model(chunk[:, :-1], mems)
        loss = F.cross_entropy(logits.float().view(-1, args.vocab), chunk[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    opt.step()
    print(f"step {step}: memory {mems[0].shape[1]} tokens, loss {loss.item():.3f}", flush=True)
