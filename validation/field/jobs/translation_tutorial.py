"""The PyTorch tutorial "Language Translation with nn.Transformer" as written there (Seq2SeqTransformer: token
embeddings scaled by sqrt(emb), sinusoidal PositionalEncoding, nn.Transformer, a generator Linear; sequence-first
batches padded per batch, create_mask with a causal target mask and padding masks, CrossEntropyLoss with
ignore_index=PAD_IDX, Adam(lr=1e-4, betas=(0.9, 0.98), eps=1e-9), fp32), scaled up, on random sentence pairs of
log-normal lengths instead of Multi30k (no download). An evaluate() pass under no_grad every --eval-every
batches. History from the start; the snapshot is dumped in an except handler around the training loop.
"""
import argparse, math, random
import torch, torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--emb", type=int, default=1024)
p.add_argument("--nhead", type=int, default=16)
p.add_argument("--ffn", type=int, default=4096)
p.add_argument("--layers", type=int, default=6)
p.add_argument("--batch", type=int, default=128)
p.add_argument("--eval-batch", type=int, default=256)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-every", type=int, default=5)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
PAD_IDX, BOS_IDX, EOS_IDX = 1, 2, 3
DEVICE = torch.device("cuda")


class PositionalEncoding(nn.Module):
    def __init__(self, emb_size, dropout, maxlen=5000):
        super().__init__()
        den = torch.exp(-torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pos_embedding", pos_embedding.unsqueeze(-2))

    def forward(self, token_embedding):
        return self.dropout(token_embedding + self.pos_embedding[:token_embedding.size(0), :])


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, emb_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens):
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, layers, emb_size, nhead, src_vocab, tgt_vocab, ffn, dropout=0.1):
        super().__init__()
        self.transformer = nn.Transformer(d_model=emb_size, nhead=nhead, num_encoder_layers=layers,
                                          num_decoder_layers=layers, dim_feedforward=ffn, dropout=dropout)
        self.generator = nn.Linear(emb_size, tgt_vocab)
        self.src_tok_emb = TokenEmbedding(src_vocab, emb_size)
        self.tgt_tok_emb = TokenEmbedding(tgt_vocab, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

    def forward(self, src, trg, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, memory_key_padding_mask):
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
        outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None, src_padding_mask, tgt_padding_mask,
                                memory_key_padding_mask)
        return self.generator(outs)


def generate_square_subsequent_mask(sz):
    mask = (torch.triu(torch.ones((sz, sz), device=DEVICE)) == 1).transpose(0, 1)
    return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, float(0.0))


def create_mask(src, tgt):
    src_seq_len, tgt_seq_len = src.shape[0], tgt.shape[0]
    tgt_mask = generate_square_subsequent_mask(tgt_seq_len)
    src_mask = torch.zeros((src_seq_len, src_seq_len), device=DEVICE).type(torch.bool)
    src_padding_mask = (src == PAD_IDX).transpose(0, 1)
    tgt_padding_mask = (tgt == PAD_IDX).transpose(0, 1)
    return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask


rng = random.Random(0)


def sentence():
    n = max(4, min(400, int(rng.lognormvariate(4.0, 0.6))))
    return [BOS_IDX] + [rng.randrange(4, args.vocab) for _ in range(n)] + [EOS_IDX]


def batch_of(n):  # the tutorial's collate_fn: pad_sequence, sequence first
    pairs = [(torch.tensor(sentence()), torch.tensor(sentence())) for _ in range(n)]
    src = nn.utils.rnn.pad_sequence([s for s, _ in pairs], padding_value=PAD_IDX)
    tgt = nn.utils.rnn.pad_sequence([t for _, t in pairs], padding_value=PAD_IDX)
    return src.to(DEVICE), tgt.to(DEVICE)


def step(model, src, tgt, loss_fn):
    tgt_input = tgt[:-1, :]
    src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
    logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask)
    tgt_out = tgt[1:, :]
    return loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
transformer = Seq2SeqTransformer(args.layers, args.emb, args.nhead, args.vocab, args.vocab, args.ffn).to(DEVICE)
for p_ in transformer.parameters():
    if p_.dim() > 1:
        nn.init.xavier_uniform_(p_)
loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD_IDX)
optimizer = torch.optim.Adam(transformer.parameters(), lr=0.0001, betas=(0.9, 0.98), eps=1e-9)
try:
    for it in range(args.steps):
        transformer.train()
        src, tgt = batch_of(args.batch)
        loss = step(transformer, src, tgt, loss_fn)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {it} src {src.shape[0]} tgt {tgt.shape[0]} loss {loss.item():.3f}", flush=True)
        if (it + 1) % args.eval_every == 0:
            transformer.eval()
            with torch.no_grad():
                src, tgt = batch_of(args.eval_batch)
                print(f"eval loss {step(transformer, src, tgt, loss_fn).item():.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
