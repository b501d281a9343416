"""Neural machine translation with a GRU encoder-decoder and Bahdanau attention, as the PyTorch tutorial "NLP From
Scratch: Translation with a Sequence to Sequence Network and Attention" builds it, trained on batches: sources
packed with `pack_padded_sequence` (cuDNN's packed RNN), the decoder unrolled step by step with teacher forcing,
additive attention over the encoder's outputs at every target position.

Sentence pairs of random lengths (sources up to --max-len, targets about as long), batches of --batch sorted by
source length, embedding 512, hidden 1024, a 32k vocabulary each side, NLL over the target, Adam, gradient
clipping. History from the start; the snapshot is dumped in an `except` handler around the loop.
"""
import argparse, random
import torch, torch.nn as nn, torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=128)
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--max-len", type=int, default=80)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
H = args.hidden


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(args.vocab, 512)
        self.gru = nn.GRU(512, H, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * H, H)

    def forward(self, src, lengths):
        packed = pack_padded_sequence(self.embed(src), lengths, batch_first=True)
        out, h = self.gru(packed)
        out, _ = pad_packed_sequence(out, batch_first=True)
        return out, torch.tanh(self.bridge(torch.cat([h[0], h[1]], -1)))


class AttnDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(args.vocab, 512)
        self.wq, self.wk, self.v = nn.Linear(H, H), nn.Linear(2 * H, H), nn.Linear(H, 1)
        self.cell = nn.GRUCell(512 + 2 * H, H)
        self.out = nn.Linear(H, args.vocab)

    def forward(self, enc, mask, h, tgt):
        keys = self.wk(enc)
        logps = []
        for t in range(tgt.shape[1] - 1):
            score = self.v(torch.tanh(self.wq(h)[:, None] + keys)).squeeze(-1).masked_fill(~mask, -1e9)
            context = (F.softmax(score, -1)[..., None] * enc).sum(1)
            h = self.cell(torch.cat([self.embed(tgt[:, t]), context], -1), h)
            logps.append(F.log_softmax(self.out(h), -1))
        return torch.stack(logps, 1)


encoder, decoder = Encoder().cuda(), AttnDecoder().cuda()
params = list(encoder.parameters()) + list(decoder.parameters())
opt = torch.optim.Adam(params, lr=1e-3)
rng = random.Random(4)


def batch():
    src_len = sorted((rng.randint(4, args.max_len) for _ in range(args.batch)), reverse=True)
    tgt_len = [max(3, min(args.max_len + 10, n + rng.randint(-5, 10))) for n in src_len]
    src = torch.zeros(args.batch, src_len[0], dtype=torch.long)
    tgt = torch.zeros(args.batch, max(tgt_len), dtype=torch.long)
    for i, (a, b) in enumerate(zip(src_len, tgt_len)):
        src[i, :a] = torch.randint(3, args.vocab, (a,))
        tgt[i, :b] = torch.randint(3, args.vocab, (b,))
    return src.cuda(), torch.tensor(src_len), tgt.cuda()


def train():
    torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
    for step in range(args.steps):
        src, lengths, tgt = batch()
        enc, h = encoder(src, lengths)
        mask = torch.arange(enc.shape[1], device="cuda")[None] < lengths.cuda()[:, None]
        logp = decoder(enc, mask, h, tgt)
        loss = F.nll_loss(logp.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        print(f"step {step} source {src.shape[1]} target {tgt.shape[1]} loss {loss.item():.3f}", flush=True)


try:
    train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
