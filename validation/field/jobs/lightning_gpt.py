"""A GPT trained with Lightning as its docs show (LightningModule, Trainer(precision="bf16-mixed")),
validation every --val-every steps. History from the start; dump in the except handler around fit().
"""
import argparse, random
import torch, torch.nn as nn, torch.nn.functional as F
import lightning as L

p = argparse.ArgumentParser()
p.add_argument("--dim", type=int, default=1536)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--val-every", type=int, default=8)
p.add_argument("--val-batch", type=int, default=16)
p.add_argument("--max-len", type=int, default=2048)
p.add_argument("--vocab", type=int, default=50304)
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, d // 128, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        n = x.shape[1]
        mask = torch.triu(torch.ones(n, n, device=x.device, dtype=torch.bool), 1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(args.vocab, args.dim)
        self.pos = nn.Embedding(4096, args.dim)
        self.blocks = nn.ModuleList(Block(args.dim) for _ in range(args.layers))
        self.head = nn.Linear(args.dim, args.vocab, bias=False)

    def forward(self, ids):
        x = self.emb(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for b in self.blocks:
            x = b(x)
        return self.head(x)

    def loss(self, ids):
        logits = self(ids[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))

    def training_step(self, ids, i):
        return self.loss(ids)

    def validation_step(self, ids, i):
        self.log("val_loss", self.loss(ids))

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-4)


def rows(n, seed):
    rng = random.Random(seed)
    return [torch.randint(0, args.vocab, (max(64, min(args.max_len, int(rng.lognormvariate(6.6, 0.6)) // 8 * 8)),))
            for _ in range(n)]


def pad(batch):
    return torch.nn.utils.rnn.pad_sequence(batch, batch_first=True)


train = torch.utils.data.DataLoader(rows(args.steps * args.batch, 1), batch_size=args.batch, collate_fn=pad)
val = torch.utils.data.DataLoader(rows(2 * args.val_batch, 2), batch_size=args.val_batch, collate_fn=pad)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = L.Trainer(accelerator="gpu", devices=1, precision="bf16-mixed", max_steps=args.steps,
                    val_check_interval=args.val_every, num_sanity_val_steps=0, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
try:
    trainer.fit(GPT(), train, val)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
