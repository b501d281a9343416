"""A word-level Transformer language model trained as PyTorch's examples/word_language_model does it
(nn.TransformerEncoder with a causal mask, Adam, gradient clipping), with one change users often make: the
epoch's accuracy is computed at the end from logits kept on the GPU, `epoch_logits.append(
output.detach())`, so every step leaves its batch's logits behind and the run grows until the epoch ends.

bf16 autocast; a fixed --batch × --bptt batch of random token ids (seeded); --steps steps in one epoch. History
from step --history-from-step (0: the start); the snapshot is dumped in the except handler, or with --observer by
the OOM observer.
"""
import argparse, math
import torch, torch.nn as nn, torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--ntoken", type=int, default=32000)
p.add_argument("--emsize", type=int, default=1024)
p.add_argument("--nhead", type=int, default=16)
p.add_argument("--nlayers", type=int, default=8)
p.add_argument("--bptt", type=int, default=512)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--max-entries", type=int, default=100000)
p.add_argument("--history-from-step", type=int, default=0)
p.add_argument("--observer", action="store_true", help="dump from the OOM observer, not the except handler")
args = p.parse_args()


class TransformerModel(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(args.emsize, args.nhead, 4 * args.emsize, dropout=0.1, batch_first=True)
        self.encoder = nn.Embedding(args.ntoken, args.emsize)
        self.transformer = nn.TransformerEncoder(layer, args.nlayers, enable_nested_tensor=False)
        self.decoder = nn.Linear(args.emsize, args.ntoken)

    def forward(self, src, mask):
        x = self.encoder(src) * math.sqrt(args.emsize)
        return self.decoder(self.transformer(x, mask=mask, is_causal=True))


torch.manual_seed(0)
device = torch.device("cuda")
model = TransformerModel().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
mask = nn.Transformer.generate_square_subsequent_mask(args.bptt, device=device)
data = torch.randint(0, args.ntoken, (args.steps, args.batch, args.bptt + 1),
                     generator=torch.Generator().manual_seed(1))
if args.observer:
    torch._C._cuda_attach_out_of_memory_observer(
        lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
epoch_logits, epoch_targets = [], []
try:
    model.train()
    for step in range(args.steps):
        if step == args.history_from_step:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
        batch = data[step].to(device)
        src, targets = batch[:, :-1], batch[:, 1:]
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            output = model(src, mask)
            loss = F.cross_entropy(output.float().view(-1, args.ntoken), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
        epoch_logits.append(output.detach())
        epoch_targets.append(targets)
        print(f"step {step} loss {loss.item():.3f}", flush=True)
    correct = sum((logits.argmax(-1) == t).sum().item() for logits, t in zip(epoch_logits, epoch_targets))
    print(f"epoch accuracy {correct / (args.steps * args.batch * args.bptt):.4f}")
except torch.OutOfMemoryError:
    if not args.observer:
        torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
