"""GPT-2 fine-tuning with Lightning Fabric, as Fabric's own examples and lit-gpt's scripts write the loop.

Fabric(precision="bf16-mixed") sets up HF's GPT2LMHeadModel, AdamW and a DataLoader; gradient accumulation under
fabric.no_backward_sync, fabric.backward, fabric.clip_gradients, dynamic padding to each batch's longest sample
(lengths random up to --max-len). History from step --history-from-step; the snapshot is dumped by the OOM
observer.
"""
import argparse, random
import torch
import lightning as L
from transformers import GPT2Config, GPT2LMHeadModel

p = argparse.ArgumentParser()
p.add_argument("--layers", type=int, default=24)
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--accumulate", type=int, default=2)
p.add_argument("--max-len", type=int, default=1024)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--history-from-step", type=int, default=1)
args = p.parse_args()


class RandomTexts(torch.utils.data.Dataset):
    def __len__(self):
        return args.batch * args.accumulate * (args.steps + 1)

    def __getitem__(self, i):
        n = random.Random(i).randint(args.max_len // 4, args.max_len)
        return torch.randint(0, 50257, (n,), generator=torch.Generator().manual_seed(i))


def pad_to_longest(samples):
    longest = max(len(s) for s in samples)
    ids = torch.zeros(len(samples), longest, dtype=torch.long)
    labels = torch.full((len(samples), longest), -100, dtype=torch.long)
    for row, s in enumerate(samples):
        ids[row, :len(s)] = s
        labels[row, :len(s)] = s
    return ids, labels


def oom_observer(device, alloc, device_alloc, device_free):
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")


torch._C._cuda_attach_out_of_memory_observer(oom_observer)
fabric = L.Fabric(accelerator="cuda", devices=1, precision="bf16-mixed")
fabric.launch()
config = GPT2Config(n_layer=args.layers, n_embd=args.hidden, n_head=args.hidden // 64, n_positions=args.max_len)
model = GPT2LMHeadModel(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
model, optimizer = fabric.setup(model, optimizer)
# A seeded shuffle: the labelling rerun must meet the batches in the same order (batch 61's did not).
loader = fabric.setup_dataloaders(torch.utils.data.DataLoader(RandomTexts(), batch_size=args.batch, shuffle=True,
                                                              collate_fn=pad_to_longest, num_workers=2,
                                                              generator=torch.Generator().manual_seed(0)))
for micro_step, (ids, labels) in enumerate(loader):
    step = micro_step // args.accumulate
    if step == args.steps:
        break
    if micro_step == args.history_from_step * args.accumulate:
        torch.cuda.memory._record_memory_history(max_entries=100000)
    is_accumulating = (micro_step + 1) % args.accumulate != 0
    with fabric.no_backward_sync(model, enabled=is_accumulating):
        loss = model(input_ids=ids, labels=labels).loss
        fabric.backward(loss / args.accumulate)
    if not is_accumulating:
        fabric.clip_gradients(model, optimizer, max_norm=1.0)
        optimizer.step()
        optimizer.zero_grad()
        fabric.print(f"step {step} tokens {ids.shape[1]} loss {loss.item():.3f}")
