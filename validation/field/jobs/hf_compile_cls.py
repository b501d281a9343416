"""Text classification with the HF Trainer and TrainingArguments(torch_compile=True), as the Trainer docs suggest
for speed: BertForSequenceClassification (random init: no download; bert-base sizes, --layers), group_by_length=True
(batches of similar lengths, longest first), DataCollatorWithPadding to the batch's longest in multiples of 8, bf16,
eval every --eval-steps. Reviews of random lengths (lognormal, truncated to --max-len). History from the start; the
snapshot is dumped in an except handler around train().
"""
import argparse, random
import torch
from transformers import (BertConfig, BertForSequenceClassification, DataCollatorWithPadding,
                          PreTrainedTokenizerFast, Trainer, TrainingArguments)
from tokenizers import Tokenizer, models

p = argparse.ArgumentParser()
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=64)
p.add_argument("--eval-batch", type=int, default=128)
p.add_argument("--max-len", type=int, default=512)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-steps", type=int, default=6)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"[PAD]": 0, "[UNK]": 1}, "[UNK]")),
                                    pad_token="[PAD]", unk_token="[UNK]")


class RandomReviews(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.rows = []
        for _ in range(n):
            length = min(args.max_len, max(8, int(rng.lognormvariate(5.0, 0.7))))
            self.rows.append(([rng.randrange(5, 30522) for _ in range(length)], rng.randrange(2)))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        ids, label = self.rows[i]
        return {"input_ids": ids, "attention_mask": [1] * len(ids), "labels": label}


model = BertForSequenceClassification(BertConfig(num_hidden_layers=args.layers, num_labels=2,
                                                 max_position_embeddings=args.max_len))
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
# transformers 5 spells group_by_length=True as a sampling strategy
fields = TrainingArguments.__dataclass_fields__
grouping = ({"group_by_length": True} if "group_by_length" in fields
            else {"train_sampling_strategy": "group_by_length"} if "train_sampling_strategy" in fields else {})
print("grouping:", grouping, flush=True)
targs = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          torch_compile=True, eval_strategy="steps", eval_steps=args.eval_steps,
                          save_strategy="no", report_to=[], logging_steps=4, learning_rate=3e-5,
                          dataloader_num_workers=0, seed=0, **grouping)
trainer = Trainer(model=model, args=targs, train_dataset=RandomReviews(args.steps * args.batch, 1),
                  eval_dataset=RandomReviews(2 * args.eval_batch, 2),
                  data_collator=DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8))
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
