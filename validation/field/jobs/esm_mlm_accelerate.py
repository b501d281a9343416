"""Masked-language-model training of a protein language model (ESM-2 architecture, random init from EsmConfig: no
download) in an Accelerate loop, as the ESM fine-tuning notebooks and Accelerate's examples write it:
Accelerator(mixed_precision="bf16", gradient_accumulation_steps=--ga), accelerator.accumulate(), 15% masking,
protein sequences of random length (pad to the longest, up to --max-len residues), AdamW with a linear warm-up
schedule. History from --history-from-step (mid-run); the snapshot is dumped by the OOM observer.
"""
import argparse, random
import torch
from accelerate import Accelerator
from transformers import EsmConfig, EsmForMaskedLM, get_linear_schedule_with_warmup

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1280)
p.add_argument("--layers", type=int, default=24)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--ga", type=int, default=2)
p.add_argument("--max-len", type=int, default=1024)
p.add_argument("--steps", type=int, default=24, help="micro-batches")
p.add_argument("--history-from-step", type=int, default=2)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

accelerator = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=args.ga)
cfg = EsmConfig(vocab_size=33, hidden_size=args.hidden, num_hidden_layers=args.layers,
                num_attention_heads=args.hidden // 64, intermediate_size=4 * args.hidden, max_position_embeddings=1026,
                position_embedding_type="rotary", pad_token_id=1, mask_token_id=32, token_dropout=True)
model = EsmForMaskedLM(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=4e-4, weight_decay=0.01)
sched = get_linear_schedule_with_warmup(opt, 10, args.steps)
rng = random.Random(5)


class Proteins(torch.utils.data.Dataset):
    def __len__(self):
        return args.steps * args.batch

    def __getitem__(self, i):
        length = min(args.max_len - 2, int(rng.lognormvariate(5.7, 0.6)))
        return [0] + [rng.randrange(4, 24) for _ in range(length)] + [2]


def collate(rows):
    n = max(len(r) for r in rows)
    ids = torch.ones(len(rows), n, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
    labels = ids.clone()
    masked = (torch.rand(ids.shape) < 0.15) & (ids > 3)
    labels[~masked] = -100
    ids[masked] = 32
    return {"input_ids": ids, "attention_mask": (ids != 1).long(), "labels": labels}


loader = torch.utils.data.DataLoader(Proteins(), batch_size=args.batch, collate_fn=collate, shuffle=False)
model, opt, loader, sched = accelerator.prepare(model, opt, loader, sched)


def on_oom(device, alloc, device_alloc, device_free):
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")


torch._C._cuda_attach_out_of_memory_observer(on_oom)
model.train()
for step, batch in enumerate(loader):
    if step == args.history_from_step:
        torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
    with accelerator.accumulate(model):
        loss = model(**batch).loss
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
    accelerator.print(f"step {step} len {batch['input_ids'].shape[1]} loss {loss.item():.3f}")
