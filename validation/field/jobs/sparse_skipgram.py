"""Skip-gram word2vec with negative sampling as PyTorch users write it: input and output nn.Embedding(sparse=True)
over a large vocabulary, torch.optim.SparseAdam, batches of (centre, context) pairs drawn from a Zipfian corpus with
--negatives noise words per pair from the unigram^0.75 distribution (torch.multinomial), logsigmoid loss. The sparse
gradients hold as many rows as the batch touches, coalesced by the optimizer: their sizes change every step. History
from the start; the snapshot is dumped in the except handler.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--vocab", type=int, default=4_000_000)
p.add_argument("--dim", type=int, default=256)
p.add_argument("--batch", type=int, default=262144)
p.add_argument("--negatives", type=int, default=5)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch.manual_seed(0)
counts = 1.0 / torch.arange(1, args.vocab + 1, dtype=torch.float64) ** 1.05
unigram = (counts / counts.sum()).float().cuda()
noise = unigram.pow(0.75)
noise /= noise.sum()
centre_emb = nn.Embedding(args.vocab, args.dim, sparse=True).cuda()
context_emb = nn.Embedding(args.vocab, args.dim, sparse=True).cuda()
nn.init.zeros_(context_emb.weight)
opt = torch.optim.SparseAdam([*centre_emb.parameters(), *context_emb.parameters()], lr=1e-3)
try:
    for step in range(args.steps):
        centre = torch.multinomial(unigram, args.batch, replacement=True)
        context = torch.multinomial(unigram, args.batch, replacement=True)
        negative = torch.multinomial(noise, args.batch * args.negatives, replacement=True).view(args.batch, -1)
        c = centre_emb(centre)
        positive = F.logsigmoid((c * context_emb(context)).sum(-1))
        negatives = F.logsigmoid(-torch.bmm(context_emb(negative), c[:, :, None]).squeeze(-1)).sum(-1)
        loss = -(positive + negatives).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step}: rows {int(torch.cat([centre, context, negative.flatten()]).unique().numel())} "
              f"loss {loss.item():.4f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
