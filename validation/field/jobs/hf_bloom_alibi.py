"""Causal-LM fine-tuning of a BLOOM-style model (ALiBi position biases) under the HF Trainer, as run_clm.py does
with dynamic padding instead of packing.

BloomForCausalLM from config (random init: no download; ALiBi: a per-head bias over every query-key pair, built
for each batch's length), documents of random length padded per batch with labels -100 on the padding, bf16,
AdamW, gradient accumulation 2, eval every --eval-steps. History from the start; the snapshot is dumped by the OOM
observer.
"""
import argparse, random
import torch
from transformers import BloomConfig, BloomForCausalLM, Trainer, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1536)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--eval-batch", type=int, default=16)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--eval-steps", type=int, default=4)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
VOCAB, PAD = 250880, 3

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


class Documents(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.rows = [[rng.randrange(4, VOCAB) for _ in range(max(64, min(2048, int(rng.lognormvariate(6.3, 0.6)))))]
                     for _ in range(n)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def collate(rows):
    n = max(len(r) for r in rows)
    ids = torch.full((len(rows), n), PAD, dtype=torch.long)
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)], mask[i, :len(r)] = torch.tensor(r), 1
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


config = BloomConfig(vocab_size=VOCAB, hidden_size=args.hidden, n_layer=args.layers, n_head=args.hidden // 64,
                     pad_token_id=PAD)
model = BloomForCausalLM(config)
targs = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, gradient_accumulation_steps=2,
                          max_steps=args.steps, bf16=True, eval_strategy="steps", eval_steps=args.eval_steps,
                          save_strategy="no", report_to=[], logging_steps=2, dataloader_num_workers=0, seed=0,
                          prediction_loss_only=True, remove_unused_columns=False)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Trainer(model=model, args=targs, train_dataset=Documents(2 * args.steps * args.batch, 1),
                  eval_dataset=Documents(2 * args.eval_batch, 2), data_collator=collate)
trainer.train()
