"""The PyTorch tutorial "Language Modeling with nn.Transformer" as written there (TransformerEncoder with a
causal mask, sinusoidal PositionalEncoding, fp32, SGD lr 5.0, clip_grad_norm_ 0.5, evaluate() under no_grad
every --eval-every batches), scaled up, with AWD-LSTM's variable BPTT length (bptt, half of it 5% of the time,
then a normal around it). History from the start; the snapshot is dumped by the OOM observer.
"""
import argparse, math, random
import torch, torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--ntoken", type=int, default=32000)
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--nhead", type=int, default=16)
p.add_argument("--d-hid", type=int, default=4096)
p.add_argument("--nlayers", type=int, default=12)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--eval-batch", type=int, default=64)
p.add_argument("--bptt", type=int, default=512)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--eval-every", type=int, default=5)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


def oom_observer(device, alloc, device_alloc, device_free):
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")


torch._C._cuda_attach_out_of_memory_observer(oom_observer)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(0)])


class TransformerModel(nn.Module):
    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout=0.2):
        super().__init__()
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken)

    def forward(self, src, src_mask):
        src = self.pos_encoder(self.embedding(src) * math.sqrt(self.d_model))
        return self.linear(self.transformer_encoder(src, src_mask))


def batchify(data, bsz):
    seq_len = data.size(0) // bsz
    return data[:seq_len * bsz].view(bsz, seq_len).t().contiguous().cuda()


def get_batch(source, i, seq_len):
    seq_len = min(seq_len, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


gen = torch.Generator().manual_seed(0)
train_data = batchify(torch.randint(0, args.ntoken, (args.steps * args.batch * args.bptt * 2,), generator=gen),
                      args.batch)
val_data = batchify(torch.randint(0, args.ntoken, (args.eval_batch * args.bptt * 2,), generator=gen),
                    args.eval_batch)
model = TransformerModel(args.ntoken, args.d_model, args.nhead, args.d_hid, args.nlayers).cuda()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
rng = random.Random(3)


def evaluate():
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, val_data.size(0) - 1, args.bptt):
            data, targets = get_batch(val_data, i, args.bptt)
            mask = nn.Transformer.generate_square_subsequent_mask(data.size(0), device="cuda")
            output = model(data, mask)
            total += data.size(0) * criterion(output.view(-1, args.ntoken), targets).item()
    model.train()
    return total / (len(val_data) - 1)


model.train()
i = 0
for step in range(args.steps):
    bptt = args.bptt if rng.random() < 0.95 else args.bptt // 2
    seq_len = max(32, min(2 * args.bptt, int(rng.gauss(bptt, bptt / 4))))
    data, targets = get_batch(train_data, i, seq_len)
    i += seq_len
    mask = nn.Transformer.generate_square_subsequent_mask(data.size(0), device="cuda")
    output = model(data, mask)
    loss = criterion(output.view(-1, args.ntoken), targets)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    optimizer.step()
    print(f"step {step} bptt {data.size(0)} loss {loss.item():.3f}", flush=True)
    if (step + 1) % args.eval_every == 0:
        print(f"eval loss {evaluate():.3f}", flush=True)
