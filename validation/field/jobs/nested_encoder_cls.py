"""Text classification with nn.TransformerEncoder as PyTorch's tutorials write it: token embeddings and learned
positions, batch_first encoder layers (norm_first=False, so the inference fast path applies), a padding mask from
each batch's lengths (documents of 64 to --max-len tokens, padded to the batch's longest), mean pooling over the
unpadded tokens, AdamW, fp32 with TF32. Every --eval-every steps an evaluation under torch.inference_mode with a larger
batch, where the encoder turns the padded batch into a nested tensor (enable_nested_tensor) and runs the fused
kernels. Random documents. History from the start; the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--dim", type=int, default=768)
p.add_argument("--heads", type=int, default=12)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--vocab", type=int, default=30522)
p.add_argument("--batch", type=int, default=48)
p.add_argument("--eval-batch", type=int, default=192)
p.add_argument("--max-len", type=int, default=1024)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--eval-every", type=int, default=5)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
torch.backends.cuda.matmul.allow_tf32 = True


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(args.vocab, args.dim, padding_idx=0)
        self.pos = nn.Embedding(args.max_len, args.dim)
        layer = nn.TransformerEncoderLayer(args.dim, args.heads, 4 * args.dim, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, args.layers, enable_nested_tensor=True)
        self.head = nn.Linear(args.dim, 20)

    def forward(self, tokens, pad):
        x = self.emb(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        x = self.encoder(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).float()
        return self.head((x.nan_to_num(0.0) * keep).sum(1) / keep.sum(1))


def batch_of(n, gen):
    lengths = torch.randint(64, args.max_len + 1, (n,), generator=gen)
    width = int(lengths.max())
    tokens = torch.randint(1, args.vocab, (n, width), generator=gen)
    pad = torch.arange(width)[None] >= lengths[:, None]
    tokens[pad] = 0
    return tokens.cuda(), pad.cuda(), torch.randint(20, (n,), generator=gen).cuda()


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch.manual_seed(0)
model = Classifier().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
gen = torch.Generator().manual_seed(5)
try:
    for step in range(args.steps):
        tokens, pad, y = batch_of(args.batch, gen)
        loss = F.cross_entropy(model(tokens, pad), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step}: width {tokens.shape[1]} loss {loss.item():.3f}", flush=True)
        if (step + 1) % args.eval_every == 0:
            model.eval()
            with torch.inference_mode():
                tokens, pad, y = batch_of(args.eval_batch, gen)
                acc = (model(tokens, pad).argmax(-1) == y).float().mean().item()
            model.train()
            print(f"eval after {step}: acc {acc:.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
