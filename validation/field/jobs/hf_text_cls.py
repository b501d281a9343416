"""Sequence classification with the HF Trainer, as transformers' run_glue.py runs it with --pad_to_max_length False:
RobertaForSequenceClassification (random init: no download; roberta-large sizes), sentence pairs truncated to
--max-len, DataCollatorWithPadding to the batch's longest, fp16 autocast, gradient checkpointing (--ckpt), eval every
--eval-steps with compute_metrics (the Trainer gathers the logits on the GPU). Random pairs of MNLI-like lengths.
History from the start; the snapshot is dumped in an except handler around train().
"""
import argparse, random
import torch
from transformers import (DataCollatorWithPadding, PreTrainedTokenizerFast, RobertaConfig,
                          RobertaForSequenceClassification, Trainer, TrainingArguments)
from tokenizers import Tokenizer, models

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=24)
p.add_argument("--batch", type=int, default=64)
p.add_argument("--eval-batch", type=int, default=128)
p.add_argument("--max-len", type=int, default=256)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-steps", type=int, default=5)
p.add_argument("--ckpt", action="store_true")
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<pad>": 1, "<unk>": 3}, "<unk>")),
                                    pad_token="<pad>", unk_token="<unk>")


class RandomPairs(torch.utils.data.Dataset):
    """Premise and hypothesis as the script tokenizes them: <s> a </s></s> b </s>, truncated to max_len."""

    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.rows = []
        for _ in range(n):
            a, b = max(4, int(rng.lognormvariate(3.3, 0.6))), max(3, int(rng.lognormvariate(2.6, 0.5)))
            length = min(args.max_len, a + b + 4)
            self.rows.append(([rng.randrange(4, 50265) for _ in range(length)], rng.randrange(3)))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        ids, label = self.rows[i]
        return {"input_ids": ids, "attention_mask": [1] * len(ids), "labels": label}


def compute_metrics(p):
    return {"accuracy": float((p.predictions.argmax(-1) == p.label_ids).mean())}


model = RobertaForSequenceClassification(RobertaConfig(hidden_size=args.hidden, num_hidden_layers=args.layers,
                                                       num_attention_heads=args.hidden // 64,
                                                       intermediate_size=4 * args.hidden, num_labels=3,
                                                       max_position_embeddings=args.max_len + 2))
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
targs = TrainingArguments(output_dir="glue_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, fp16=True,
                          gradient_checkpointing=args.ckpt, eval_strategy="steps", eval_steps=args.eval_steps,
                          save_strategy="no", report_to=[], logging_steps=4, learning_rate=1e-5,
                          dataloader_num_workers=0, seed=0)
trainer = Trainer(model=model, args=targs, train_dataset=RandomPairs(args.steps * args.batch, 1),
                  eval_dataset=RandomPairs(2 * args.eval_batch, 2), data_collator=DataCollatorWithPadding(tokenizer),
                  compute_metrics=compute_metrics)
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
