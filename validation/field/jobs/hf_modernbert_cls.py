"""Long-document classification with ModernBERT and the HF Trainer, as its model card's fine-tuning example
does it (random init from the config: no download): ModernBertForSequenceClassification (alternating global
and 128-token local attention, here through SDPA and its masks), documents of random length up to --max-len
(8,192: the reason to choose ModernBERT), dynamic padding, bf16, AdamW, eval every --eval-steps at a larger
batch. History from the start (a ring of --max-entries); the snapshot is dumped in the except handler.
"""
import argparse, random
import torch
from transformers import ModernBertConfig, ModernBertForSequenceClassification, Trainer, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=768)
p.add_argument("--layers", type=int, default=22)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--eval-batch", type=int, default=8)
p.add_argument("--max-len", type=int, default=8192)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--eval-steps", type=int, default=6)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class Documents(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.rows = [([rng.randrange(5, 50000) for _ in range(max(64, min(args.max_len,
                                                                         int(rng.lognormvariate(7.4, 0.7)))))],
                      rng.randrange(4)) for _ in range(n)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def collate(rows):
    n = max(len(ids) for ids, _ in rows)
    ids = torch.zeros(len(rows), n, dtype=torch.long)
    mask = torch.zeros(len(rows), n, dtype=torch.long)
    for i, (doc, _) in enumerate(rows):
        ids[i, :len(doc)] = torch.tensor(doc)
        mask[i, :len(doc)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([label for _, label in rows])}


cfg = ModernBertConfig(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
                       intermediate_size=args.hidden * 3 // 2, vocab_size=50368, max_position_embeddings=8192,
                       num_labels=4, attn_implementation="sdpa")
model = ModernBertForSequenceClassification(cfg)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
targs = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=5, dataloader_num_workers=0, seed=0)
trainer = Trainer(model=model, args=targs, train_dataset=Documents(args.steps * args.batch, 1),
                  eval_dataset=Documents(2 * args.eval_batch, 2), data_collator=collate)
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
