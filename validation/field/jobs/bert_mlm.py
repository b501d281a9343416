"""Masked-LM pretraining of BERT in a plain loop, as HF's run_mlm_no_trainer example writes it: Accelerate
with bf16 and gradient accumulation, dynamic padding per batch, 15 % masking (80/10/10), AdamW with a
linear schedule. History recorded from --history-from-step on (a mid-run start, ring of --max-entries);
the snapshot is dumped in the except handler.
"""
import argparse, random
import torch
from accelerate import Accelerator
from transformers import BertConfig, BertForMaskedLM, get_scheduler

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=16)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--ga", type=int, default=2)
p.add_argument("--steps", type=int, default=16)
p.add_argument("--max-entries", type=int, default=100000)
p.add_argument("--history-from-step", type=int, default=2)
args = p.parse_args()

rng = random.Random(3)
rows = [torch.randint(1000, 30522, (max(32, min(512, int(rng.lognormvariate(5.6, 0.5)))),))
        for _ in range(args.steps * args.batch)]


def collate(batch):
    ids = torch.nn.utils.rnn.pad_sequence(batch, batch_first=True)
    mask = (ids != 0).long()
    labels = ids.clone()
    pick = (torch.rand(ids.shape) < 0.15) & (mask == 1)
    labels[~pick] = -100
    r = torch.rand(ids.shape)
    ids = ids.masked_fill(pick & (r < 0.8), 103)
    swap = pick & (r >= 0.8) & (r < 0.9)
    ids[swap] = torch.randint(1000, 30522, (int(swap.sum()),))
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


accelerator = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=args.ga)
model = BertForMaskedLM(BertConfig(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=16,
                                   intermediate_size=4 * args.hidden, max_position_embeddings=512))
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
loader = torch.utils.data.DataLoader(rows, batch_size=args.batch, shuffle=True, collate_fn=collate)
sched = get_scheduler("linear", optimizer=opt, num_warmup_steps=2, num_training_steps=args.steps)
model, opt, loader, sched = accelerator.prepare(model, opt, loader, sched)
model.train()
try:
    for step, batch in enumerate(loader):
        if step == args.history_from_step:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
        with accelerator.accumulate(model):
            loss = model(**batch).loss
            accelerator.backward(loss)
            opt.step()
            sched.step()
            opt.zero_grad()
        if step % 4 == 0:
            accelerator.print(f"step {step} len {batch['input_ids'].shape[1]} loss {loss.item():.3f}")
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
