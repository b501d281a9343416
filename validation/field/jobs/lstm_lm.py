"""A word-level LSTM language model trained as PyTorch's examples/word_language_model does it (the "large"
configuration: 1500-wide embedding and LSTM, tied weights, dropout 0.65, fp32, plain SGD written out over
p.data with gradient clipping), with the variable-length BPTT of AWD-LSTM (a window of bptt, or bptt/2 with
probability 0.05, then jittered by a normal of sd 5), and an evaluation pass every --eval-every batches.
On random tokens. History from the start; the snapshot is dumped in the except handler.
"""
import argparse, math, random
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--ntokens", type=int, default=50000)
p.add_argument("--emsize", type=int, default=1500)
p.add_argument("--nlayers", type=int, default=2)
p.add_argument("--batch", type=int, default=128)
p.add_argument("--eval-batch", type=int, default=64)
p.add_argument("--bptt", type=int, default=200)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--eval-every", type=int, default=6)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.65)
        self.encoder = nn.Embedding(args.ntokens, args.emsize)
        self.rnn = nn.LSTM(args.emsize, args.emsize, args.nlayers, dropout=0.65)
        self.decoder = nn.Linear(args.emsize, args.ntokens)
        self.decoder.weight = self.encoder.weight

    def forward(self, x, hidden):
        output, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return F.log_softmax(self.decoder(self.drop(output)).view(-1, args.ntokens), dim=1), hidden

    def init_hidden(self, bsz):
        w = next(self.parameters())
        return (w.new_zeros(args.nlayers, bsz, args.emsize), w.new_zeros(args.nlayers, bsz, args.emsize))


def batchify(n_tokens, bsz, seed):
    data = torch.randint(0, args.ntokens, (n_tokens,), generator=torch.Generator().manual_seed(seed))
    return data[:n_tokens // bsz * bsz].view(bsz, -1).t().contiguous().cuda()


def repackage_hidden(h):
    return tuple(v.detach() for v in h)


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
train_data = batchify(args.batch * args.bptt * (args.steps + 4), args.batch, 1)
val_data = batchify(args.eval_batch * args.bptt * 3, args.eval_batch, 2)
model = RNNModel().cuda()
criterion = nn.NLLLoss()
lr, rng = 20.0, random.Random(0)


def evaluate():
    model.eval()
    hidden, total = model.init_hidden(args.eval_batch), 0.0
    with torch.no_grad():
        for i in range(0, val_data.size(0) - 1, args.bptt):
            seq_len = min(args.bptt, len(val_data) - 1 - i)
            output, hidden = model(val_data[i:i + seq_len], hidden)
            total += seq_len * criterion(output, val_data[i + 1:i + 1 + seq_len].reshape(-1)).item()
    return total / (len(val_data) - 1)


try:
    model.train()
    hidden, i = model.init_hidden(args.batch), 0
    for step in range(args.steps):
        bptt = args.bptt if rng.random() < 0.95 else args.bptt / 2
        seq_len = max(5, min(int(rng.gauss(bptt, 5)), args.bptt + 20, len(train_data) - 1 - i))
        data, targets = train_data[i:i + seq_len], train_data[i + 1:i + 1 + seq_len].reshape(-1)
        i += seq_len
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p_ in model.parameters():
            p_.data.add_(p_.grad, alpha=-lr)
        if (step + 1) % args.eval_every == 0:
            print(f"step {step} loss {loss.item():.2f} val ppl {math.exp(min(evaluate(), 20)):.1f}", flush=True)
            model.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
