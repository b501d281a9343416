"""Sentence-embedding training with in-batch negatives, as sentence-transformers' MultipleNegativesRankingLoss
and its "training overview" loop do it, in a plain loop: a BERT encoder from config (random init: no download),
(query, passage) pairs of varying length padded per batch, mean pooling, the cross-entropy over the B x B
scaled cosine similarities, fp16 autocast with GradScaler, AdamW, torch.cuda.empty_cache() every
--empty-cache-every steps (as many loops do "to free memory"). History from step --history-from-step; the
snapshot is dumped in the except handler.
"""
import argparse, random
import torch, torch.nn.functional as F
from transformers import BertConfig, BertModel

p = argparse.ArgumentParser()
p.add_argument("--width", type=int, default=1024)
p.add_argument("--layers", type=int, default=24)
p.add_argument("--batch", type=int, default=128)
p.add_argument("--max-len", type=int, default=512)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--empty-cache-every", type=int, default=3)
p.add_argument("--history-from-step", type=int, default=1)
args = p.parse_args()

rng = random.Random(0)
model = BertModel(BertConfig(hidden_size=args.width, num_hidden_layers=args.layers,
                             num_attention_heads=args.width // 64, intermediate_size=4 * args.width,
                             max_position_embeddings=args.max_len), add_pooling_layer=False).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
scaler = torch.amp.GradScaler("cuda")


def batch_of(lengths):
    n = max(lengths)
    ids = torch.zeros(len(lengths), n, dtype=torch.long)
    mask = torch.zeros(len(lengths), n, dtype=torch.long)
    for i, length in enumerate(lengths):
        ids[i, :length] = torch.randint(1000, 30000, (length,))
        mask[i, :length] = 1
    return ids.cuda(), mask.cuda()


def embed(ids, mask):
    hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return F.normalize((hidden * m).sum(1) / m.sum(1), dim=-1)


try:
    for step in range(args.steps):
        if step == args.history_from_step:
            torch.cuda.memory._record_memory_history(max_entries=100000)
        queries = batch_of([max(8, min(64, int(rng.lognormvariate(2.8, 0.4)))) for _ in range(args.batch)])
        passages = batch_of([max(32, min(args.max_len, int(rng.lognormvariate(5.3, 0.5))))
                             for _ in range(args.batch)])
        with torch.autocast("cuda", dtype=torch.float16):
            scores = embed(*queries) @ embed(*passages).T * 20.0
            loss = F.cross_entropy(scores.float(), torch.arange(args.batch, device="cuda"))
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if (step + 1) % args.empty_cache_every == 0:
            torch.cuda.empty_cache()
        print(f"step {step} loss {loss.item():.4f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
