"""Sequence classification fine-tuned in the plain loop of the Hugging Face course (chapter 3, "A full
training"): a BERT from config (random init: no download), DataCollatorWithPadding (pad to the longest in
the batch), AdamW with get_scheduler("linear"), fp32 throughout (the course adds no mixed precision), and
the course's evaluation loop (model.eval(), torch.no_grad()) after every epoch. History from the start
(ring of --max-entries); the snapshot is dumped in the except handler.
"""
import argparse, random
import torch
from torch.utils.data import DataLoader
from transformers import BertConfig, BertForSequenceClassification, DataCollatorWithPadding, get_scheduler

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=24)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--eval-batch", type=int, default=64)
p.add_argument("--rows", type=int, default=160, help="training rows per epoch")
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class Tokenized(torch.utils.data.Dataset):
    """Rows as a tokenizer returns them: input_ids, token_type_ids, attention_mask (lists) and a label."""

    def __init__(self, n, seed):
        rng = random.Random(seed)
        lengths = [max(8, min(512, int(rng.lognormvariate(5.0, 0.6)))) for _ in range(n)]
        self.rows = [{"input_ids": [rng.randrange(1000, 30000) for _ in range(k)], "token_type_ids": [0] * k,
                      "attention_mask": [1] * k, "labels": rng.randrange(2)} for k in lengths]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


class PadOnly:
    """DataCollatorWithPadding needs a tokenizer only for its pad(): this one pads with id 0, as BERT's does."""
    model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    padding_side = "right"
    pad_token_id = 0
    pad_token_type_id = 0

    def pad(self, rows, padding=True, max_length=None, pad_to_multiple_of=None, return_tensors="pt", **kw):
        n = max(len(r["input_ids"]) for r in rows)
        out = {k: torch.tensor([r[k] + [0] * (n - len(r[k])) for r in rows]) for k in self.model_input_names}
        out["labels"] = torch.tensor([r["labels"] for r in rows])
        return out


torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
collator = DataCollatorWithPadding(tokenizer=PadOnly())
train_dataloader = DataLoader(Tokenized(args.rows, 1), shuffle=True, batch_size=args.batch, collate_fn=collator)
eval_dataloader = DataLoader(Tokenized(2 * args.eval_batch, 2), batch_size=args.eval_batch, collate_fn=collator)
model = BertForSequenceClassification(BertConfig(hidden_size=args.hidden, num_hidden_layers=args.layers,
                                                 num_attention_heads=16, intermediate_size=4 * args.hidden,
                                                 num_labels=2))
device = torch.device("cuda")
model.to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
num_training_steps = args.epochs * len(train_dataloader)
lr_scheduler = get_scheduler("linear", optimizer=optimizer, num_warmup_steps=0,
                             num_training_steps=num_training_steps)
try:
    for epoch in range(args.epochs):
        model.train()
        for batch in train_dataloader:
            batch = {k: v.to(device) for k, v in batch.items()}
            outputs = model(**batch)
            loss = outputs.loss
            loss.backward()
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
        model.eval()
        correct = 0
        for batch in eval_dataloader:
            batch = {k: v.to(device) for k, v in batch.items()}
            with torch.no_grad():
                outputs = model(**batch)
            correct += (outputs.logits.argmax(dim=-1) == batch["labels"]).sum().item()
        print(f"epoch {epoch} loss {loss.item():.3f} accuracy {correct / (2 * args.eval_batch):.3f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
