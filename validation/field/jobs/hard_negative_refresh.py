"""Dense-retrieval training with hard negatives refreshed from the model's own index, as ANCE (Xiong et al. 2020,
"Approximate Nearest Neighbor Negative Contrastive Learning for Dense Text Retrieval") does it and as the DPR forks
and Tevatron users who add "ANCE-style" negative refreshing write it, with the asynchronous refresh run inline in the
training process (no second GPU for the index): a BERT bi-encoder (HF BertModel from config, random init: no download;
one encoder shared by queries and passages, CLS pooling, L2-normalised embeddings), a batch of --batch queries, each
with its positive and --negatives hard negatives drawn from its row of the hard-negative table (Tevatron's
train_group_size - 1), the InfoNCE loss over in-batch and hard negatives at temperature --temperature, dynamic
padding to the longest text of each forward, bf16 autocast, AdamW (fused=True). Every --refresh-every steps, before
the step, the index is refreshed as ANCE's inference worker does: model.eval(), torch.no_grad and autocast, the
corpus (a random --refresh-size of it, 0: all of it, as forks that refresh on a sample do) encoded in chunks of
--encode-batch passages sorted longest first (as sentence-transformers' encode sorts, to pad less) into one
preallocated [passages, hidden] GPU matrix in --index-dtype, every training query encoded likewise, the scores
queries @ index.T in blocks of --score-block queries, the query's own positive masked out and torch.topk keeping
the --topk best passages (ANCE's top 200) as its new negatives; then the matrices are freed and model.train().

What is random (seeded by --seed): the weights, a corpus of --corpus passages of random token ids and random lengths
(64-256 tokens, kept on the CPU as one flat tensor with offsets, as a tokenised corpus is stored), --queries
queries of 16-48 tokens each with one random positive passage, the hard-negative table before the first refresh
(random passages: the run starts with random instead of BM25 negatives), the queries of each step, the negatives
drawn from the table, and the sample of the corpus each refresh re-encodes. fp32 weights and AdamW states, bf16
autocast for the encoder, the index and the query embeddings in fp16 (default) or bf16, the scores in their dtype.
Measured apart on an H100: a training step at the defaults peaks near 15.4 GB allocated (16 queries and 128 passages
padded to the longest, about 256 tokens, with grad), a refresh near 26.3 GB (a chunk of the 4,096 longest passages
without grad), so the run's peak is the first refresh's, after the history has started.

History is turned on after --history-after training steps (2: mid-run, as a user chasing an OOM adds it; a ring of
--max-entries), so the first refresh (before step --refresh-every) is recorded; the snapshot is dumped in the except
handler around the whole loop. A line is printed per step (its loss, its phase: random negatives, a refresh and a
step, or ANCE negatives, and the memory allocated) and per refresh.
"""
import argparse, time
import torch, torch.nn.functional as F
from transformers import BertConfig, BertModel

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=768)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--corpus", type=int, default=200000, help="passages in the synthetic corpus (on the CPU)")
p.add_argument("--queries", type=int, default=32768, help="training queries, one positive passage each")
p.add_argument("--batch", type=int, default=16, help="queries a step")
p.add_argument("--negatives", type=int, default=7, help="hard negatives a query (train_group_size - 1)")
p.add_argument("--topk", type=int, default=200, help="negatives kept per query at each refresh")
p.add_argument("--temperature", type=float, default=0.05)
p.add_argument("--lr", type=float, default=2e-5)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--refresh-every", type=int, default=4)
p.add_argument("--refresh-size", type=int, default=100000, help="passages re-encoded at each refresh (0: all)")
p.add_argument("--encode-batch", type=int, default=4096, help="passages (or queries) encoded at a time")
p.add_argument("--score-block", type=int, default=4096, help="queries scored against the index at a time")
p.add_argument("--index-dtype", default="fp16", choices=["fp16", "bf16"])
p.add_argument("--seed", type=int, default=42)
p.add_argument("--history-after", type=int, default=2, help="training steps before the history is turned on")
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()
VOCAB, CLS = 30522, 101
INDEX_DTYPE = torch.float16 if args.index_dtype == "fp16" else torch.bfloat16

torch.manual_seed(args.seed)
gen = torch.Generator().manual_seed(args.seed)


def tokenised(n, shortest, longest):
    """n random texts of shortest..longest tokens: (flat token ids, offsets, lengths), all on the CPU."""
    lengths = torch.randint(shortest, longest + 1, (n,), generator=gen)
    offsets = torch.cumsum(lengths, 0) - lengths
    flat = torch.randint(1000, VOCAB, (int(lengths.sum()),), generator=gen, dtype=torch.int32)
    return flat, offsets, lengths


passages = tokenised(args.corpus, 64, 256)
queries = tokenised(args.queries, 16, 48)
positive = torch.randint(0, args.corpus, (args.queries,), generator=gen)
hard_negatives = torch.randint(0, args.corpus, (args.queries, args.topk), generator=gen)  # random until a refresh

model = BertModel(BertConfig(vocab_size=VOCAB, hidden_size=args.hidden, num_hidden_layers=args.layers,
                             num_attention_heads=args.hidden // 64, intermediate_size=4 * args.hidden,
                             max_position_embeddings=512), add_pooling_layer=False).cuda()
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, fused=True)
print(f"{sum(p_.numel() for p_ in model.parameters()) / 1e6:.1f}M parameters, corpus {args.corpus} passages "
      f"({len(passages[0]) / 1e6:.1f}M tokens), {args.queries} queries", flush=True)


def collate(texts, ids):
    """Dynamic padding: the texts `ids` (a CPU LongTensor) padded to the longest of them, [CLS] first, on the GPU."""
    flat, offsets, lengths = texts
    lens = lengths[ids]
    pos = torch.arange(int(lens.max()))
    mask = pos[None, :] < lens[:, None]
    tokens = flat[(offsets[ids][:, None] + pos[None, :]).clamp(max=len(flat) - 1)].long() * mask
    tokens[:, 0] = CLS
    return tokens.cuda(), mask.long().cuda()


def encode(tokens, mask):
    """CLS pooling, normalised (Tevatron's pooling "cls" with normalize)."""
    return F.normalize(model(input_ids=tokens, attention_mask=mask).last_hidden_state[:, 0], dim=-1)


def longest_first(lengths):
    return torch.sort(lengths, descending=True, stable=True).indices


@torch.no_grad()
def refresh():
    """ANCE's index refresh: re-encode (a sample of) the corpus and every training query with the current model,
    score them, keep each query's --topk best passages but its positive as its hard-negative table row."""
    model.eval()
    n = min(args.refresh_size or args.corpus, args.corpus)
    sub = torch.randperm(args.corpus, generator=gen)[:n]
    sub = sub[longest_first(passages[2][sub])]
    q_order = longest_first(queries[2])
    index = torch.empty(n, args.hidden, dtype=INDEX_DTYPE, device="cuda")
    q_emb = torch.empty(args.queries, args.hidden, dtype=INDEX_DTYPE, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        for i in range(0, n, args.encode_batch):
            index[i:i + args.encode_batch] = encode(*collate(passages, sub[i:i + args.encode_batch]))
        for i in range(0, args.queries, args.encode_batch):
            q_emb[i:i + args.encode_batch] = encode(*collate(queries, q_order[i:i + args.encode_batch]))
    column = torch.full((args.corpus,), -1, dtype=torch.long)
    column[sub] = torch.arange(n)
    sub_gpu = sub.cuda()
    for i in range(0, args.queries, args.score_block):
        rows = q_order[i:i + args.score_block]
        scores = q_emb[i:i + args.score_block] @ index.T  # [block, n], in the index's dtype
        pos_col = column[positive[rows]].cuda()
        hit = (pos_col >= 0).nonzero().squeeze(1)
        scores[hit, pos_col[hit]] = float("-inf")  # the positive is no negative
        hard_negatives[rows] = sub_gpu[scores.topk(args.topk, dim=1).indices].cpu()
    del index, q_emb, scores
    model.train()
    return n


def train_step():
    qids = torch.randint(0, args.queries, (args.batch,), generator=gen)
    pick = torch.rand(args.batch, args.topk, generator=gen).argsort(dim=1)[:, :args.negatives]
    group = torch.cat([positive[qids][:, None], hard_negatives[qids].gather(1, pick)], dim=1)  # [positive, negs]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        q = encode(*collate(queries, qids))
        d = encode(*collate(passages, group.flatten()))
        scores = q @ d.T / args.temperature  # in-batch and hard negatives: [batch, batch * (1 + negatives)]
    loss = F.cross_entropy(scores.float(), torch.arange(args.batch, device="cuda") * (1 + args.negatives))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


refreshes = 0
try:
    for step in range(args.steps):
        if step == args.history_after:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
        phase = "ance-negatives" if refreshes else "random-negatives"
        if step and step % args.refresh_every == 0:
            t0 = time.time()
            n = refresh()
            refreshes += 1
            phase = "refresh+train"
            print(f"refresh {refreshes} before step {step}: {n} passages, {args.queries} queries, "
                  f"{time.time() - t0:.1f} s, allocated {torch.cuda.memory_allocated() / 2**30:.2f} GiB", flush=True)
        loss = train_step()
        print(f"step {step} loss {loss.item():.4f} phase {phase} "
              f"allocated {torch.cuda.memory_allocated() / 2**30:.2f} GiB", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
