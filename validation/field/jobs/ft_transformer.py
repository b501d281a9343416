"""A tabular FT-Transformer (Gorishniy et al., "Revisiting deep learning models for tabular data"), as its
reference loop trains it: every numeric feature becomes a token (a per-feature linear embedding), every
categorical one a row of its own embedding table, a [CLS] token, --layers pre-norm transformer blocks, a head on
[CLS]; rows in batches of --batch, bf16 autocast, AdamW, cross-entropy. The validation split is scored in chunks
of --eval-batch rows under torch.no_grad() every --eval-every steps, its logits kept on the GPU and concatenated
for the metric (as the reference does). History from the start; the snapshot is dumped by the OOM observer.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--numeric", type=int, default=96)
p.add_argument("--categorical", type=int, default=32)
p.add_argument("--cardinality", type=int, default=1000)
p.add_argument("--dim", type=int, default=192)
p.add_argument("--layers", type=int, default=4)
p.add_argument("--batch", type=int, default=2048)
p.add_argument("--eval-batch", type=int, default=8192)
p.add_argument("--eval-rows", type=int, default=32768)
p.add_argument("--eval-every", type=int, default=6)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--classes", type=int, default=100)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


class FTTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.num_weight = nn.Parameter(torch.randn(args.numeric, args.dim) * 0.02)
        self.num_bias = nn.Parameter(torch.zeros(args.numeric, args.dim))
        self.cat_embed = nn.Embedding(args.categorical * args.cardinality, args.dim)
        self.register_buffer("cat_offset", torch.arange(args.categorical) * args.cardinality)
        self.cls = nn.Parameter(torch.zeros(1, 1, args.dim))
        block = nn.TransformerEncoderLayer(args.dim, nhead=8, dim_feedforward=args.dim * 4 // 3 * 2, dropout=0.1,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, args.layers, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.LayerNorm(args.dim), nn.ReLU(), nn.Linear(args.dim, args.classes))

    def forward(self, x_num, x_cat):
        tokens = x_num.unsqueeze(-1) * self.num_weight + self.num_bias
        tokens = torch.cat([self.cls.expand(len(x_num), -1, -1), tokens, self.cat_embed(x_cat + self.cat_offset)], 1)
        return self.head(self.blocks(tokens)[:, 0])


def rows(n, generator):
    x_num = torch.randn(n, args.numeric, device="cuda", generator=generator)
    x_cat = torch.randint(0, args.cardinality, (n, args.categorical), device="cuda", generator=generator)
    y = (x_num[:, :8].sum(1).mul(7).long() + x_cat[:, 0]) % args.classes
    return x_num, x_cat, y


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = FTTransformer().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-5)
train_gen = torch.Generator(device="cuda").manual_seed(0)
eval_x_num, eval_x_cat, eval_y = rows(args.eval_rows, torch.Generator(device="cuda").manual_seed(1))
for step in range(args.steps):
    model.train()
    x_num, x_cat, y = rows(args.batch, train_gen)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x_num, x_cat), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if (step + 1) % args.eval_every == 0:
        model.eval()
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            logits = torch.cat([model(eval_x_num[i:i + args.eval_batch], eval_x_cat[i:i + args.eval_batch])
                                for i in range(0, args.eval_rows, args.eval_batch)])
        accuracy = (logits.argmax(1) == eval_y).float().mean().item()
        print(f"step {step + 1}: loss {loss.item():.3f} val accuracy {accuracy:.3f}", flush=True)
