"""Dense-retrieval training with GradCache, as Tevatron and the GradCache paper run it: a batch too large for one
backward is encoded twice. First without grad, in chunks, to get every query and passage representation; the
contrastive loss over the whole batch (in-batch negatives, one positive and --hard hard negatives per query) gives
each representation its gradient; then each chunk is encoded again with grad and backpropagated against its cached
gradient.

A BERT-style bi-encoder (HF BertModel from config, shared between queries and passages), queries of up to 32 tokens
and passages of up to --max-passage tokens, padded per chunk to the longest in it, bf16 autocast, AdamW. History from
the start; the snapshot is dumped in an `except` handler around the loop.
"""
import argparse, random
import torch, torch.nn.functional as F
from transformers import BertConfig, BertModel

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=768)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--queries", type=int, default=256)
p.add_argument("--hard", type=int, default=3)
p.add_argument("--chunk", type=int, default=64)
p.add_argument("--max-passage", type=int, default=256)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
VOCAB = 30522

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
model = BertModel(BertConfig(vocab_size=VOCAB, hidden_size=args.hidden, num_hidden_layers=args.layers,
                             num_attention_heads=args.hidden // 64, intermediate_size=4 * args.hidden,
                             max_position_embeddings=512), add_pooling_layer=False).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
rng = random.Random(7)


def texts(n, longest):
    lengths = [rng.randint(8, longest) for _ in range(n)]
    return [torch.randint(1000, VOCAB, (k,)) for k in lengths]


def padded(rows):
    n = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), n, dtype=torch.long)
    mask = torch.zeros(len(rows), n, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)], mask[i, :len(r)] = r, 1
    return ids.cuda(), mask.cuda()


def encode(rows):
    ids, mask = padded(rows)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return model(input_ids=ids, attention_mask=mask).last_hidden_state[:, 0].float()


def chunks(rows):
    return [rows[i:i + args.chunk] for i in range(0, len(rows), args.chunk)]


def train():
    for step in range(args.steps):
        queries = texts(args.queries, 32)
        passages = texts(args.queries * (1 + args.hard), args.max_passage)
        with torch.no_grad():
            q_reps = torch.cat([encode(c) for c in chunks(queries)])
            p_reps = torch.cat([encode(c) for c in chunks(passages)])
        q_reps.requires_grad_(), p_reps.requires_grad_()
        scores = q_reps @ p_reps.T / 0.05
        loss = F.cross_entropy(scores, torch.arange(args.queries, device="cuda") * (1 + args.hard))
        loss.backward()
        for rows, grads in ((queries, q_reps.grad), (passages, p_reps.grad)):
            for i, c in enumerate(chunks(rows)):
                encode(c).backward(grads[i * args.chunk:(i + 1) * args.chunk])
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step} loss {loss.item():.3f}", flush=True)


try:
    train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
