"""T5 span-corruption-style pre-training with Adafactor under HF Accelerate, as T5 users run it.

T5ForConditionalGeneration from config (random init: no download), transformers' Adafactor (relative_step=False,
scale_parameter=False, lr 1e-3, as the T5 fine-tuning recipes set it; torch's own when transformers has none),
Accelerator(mixed_precision="bf16"), inputs and targets whose lengths vary apart (random spans), padded per batch.
Memory history is turned on only from step --history-from (a user who starts it once the run looks steady); the
snapshot is dumped in an `except` handler around the loop.
"""
import argparse, random
import torch
from accelerate import Accelerator
from transformers import T5Config, T5ForConditionalGeneration

try:
    from transformers.optimization import Adafactor
except ImportError:
    from torch.optim import Adafactor

p = argparse.ArgumentParser()
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--history-from", type=int, default=3)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
VOCAB, PAD = 32128, 0

rng = random.Random(7)
rows = []
for _ in range(args.steps * args.batch):
    n = max(32, min(1024, int(rng.lognormvariate(6.0, 0.5))))
    m = max(8, min(256, int(n * rng.uniform(0.1, 0.3))))
    rows.append((torch.randint(2, VOCAB, (n,)), torch.randint(2, VOCAB, (m,))))


def collate(batch):
    ids = torch.nn.utils.rnn.pad_sequence([a for a, _ in batch], batch_first=True, padding_value=PAD)
    labels = torch.nn.utils.rnn.pad_sequence([b for _, b in batch], batch_first=True, padding_value=-100)
    return ids, (ids != PAD).long(), labels


accelerator = Accelerator(mixed_precision="bf16")
config = T5Config(vocab_size=VOCAB, d_model=args.d_model, d_kv=64, d_ff=args.d_model * 11 // 4,
                  num_layers=args.layers, num_heads=args.d_model // 64, feed_forward_proj="gated-gelu",
                  decoder_start_token_id=PAD, pad_token_id=PAD)
model = T5ForConditionalGeneration(config)
opt = Adafactor(model.parameters(), lr=1e-3, relative_step=False, scale_parameter=False, warmup_init=False) \
    if Adafactor.__module__.startswith("transformers") else Adafactor(model.parameters(), lr=1e-3)
loader = torch.utils.data.DataLoader(rows, batch_size=args.batch, collate_fn=collate)
model, opt, loader = accelerator.prepare(model, opt, loader)
model.train()


def train():
    for step, (ids, mask, labels) in enumerate(loader):
        if step == args.history_from:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        if step % 4 == 0:
            accelerator.print(f"step {step} src {ids.shape[1]} tgt {labels.shape[1]} loss {loss.item():.3f}")


try:
    train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
