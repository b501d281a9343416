"""A Transformer language model trained on batches made as fairseq makes them with --max-tokens: sentences of
random length (a log-normal, 16 to --max-len tokens) bucketed by length and packed into batches of at most
--max-tokens tokens each, so short sentences come many to a batch and long ones few; the batches are shuffled
(seeded). A pre-LayerNorm decoder (nn.TransformerEncoder with a causal mask, SDPA), tied embeddings, label-smoothed
cross-entropy, Adam with fairseq's inverse-sqrt warmup, clipping, bf16 autocast. History from the start; the
snapshot is dumped in the except handler.
"""
import argparse, math, random
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--dim", type=int, default=1024)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--max-tokens", type=int, default=16384)
p.add_argument("--max-len", type=int, default=1024)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


def batches_by_max_tokens(n_sentences, seed):  # fairseq's batch_by_size over length-sorted indices
    rng = random.Random(seed)
    lengths = sorted(min(args.max_len, max(16, int(rng.lognormvariate(5.0, 0.8)))) for _ in range(n_sentences))
    batches, current = [], []
    for length in lengths:
        if current and (len(current) + 1) * max(current[-1], length) > args.max_tokens:
            batches.append(current)
            current = []
        current.append(length)
    batches.append(current)
    rng.shuffle(batches)
    return batches


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(args.vocab, args.dim)
        self.pos = nn.Embedding(args.max_len, args.dim)
        layer = nn.TransformerEncoderLayer(args.dim, args.heads, 4 * args.dim, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.decoder = nn.TransformerEncoder(layer, args.layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(args.dim)

    def forward(self, tokens):
        length = tokens.size(1)
        x = self.embed(tokens) * math.sqrt(args.dim) + self.pos(torch.arange(length, device=tokens.device))
        mask = nn.Transformer.generate_square_subsequent_mask(length, device=tokens.device)
        return F.linear(self.norm(self.decoder(x, mask=mask, is_causal=True)), self.embed.weight)


torch.manual_seed(0)
model = LM().cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=5e-4, betas=(0.9, 0.98), eps=1e-8)
schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / 4000, (4000 / (s + 1)) ** 0.5))
plan = batches_by_max_tokens(6000, 1)[:args.steps]
gen = torch.Generator().manual_seed(2)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
try:
    for step, lengths in enumerate(plan):
        width = max(lengths)
        tokens = torch.randint(0, args.vocab, (len(lengths), width + 1), generator=gen).cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, args.vocab), tokens[:, 1:].reshape(-1),
                                   label_smoothing=0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        print(f"step {step} batch {len(lengths)} x {width} loss {loss.item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
