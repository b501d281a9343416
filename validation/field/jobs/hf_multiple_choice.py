"""Multiple choice with the HF Trainer, as transformers' run_swag.py runs it: BertForMultipleChoice (random init: no
download), four endings per context, the script's own DataCollatorForMultipleChoice (flatten, tokenizer.pad to the
batch's longest, unflatten), bf16, eval every --eval-steps. Random contexts and endings of log-normal lengths.
History from the start; the snapshot is dumped by the OOM observer.
"""
import argparse, random
import torch
from transformers import (BertConfig, BertForMultipleChoice, PreTrainedTokenizerFast, Trainer, TrainingArguments)
from tokenizers import Tokenizer, models

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=24)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--eval-batch", type=int, default=32)
p.add_argument("--choices", type=int, default=4)
p.add_argument("--max-len", type=int, default=512)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-steps", type=int, default=5)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"[PAD]": 0, "[UNK]": 1}, "[UNK]")),
                                    pad_token="[PAD]", unk_token="[UNK]")


class RandomSwag(torch.utils.data.Dataset):
    """Each example: a context and `choices` endings, each pair truncated to max_len as the script tokenizes it."""

    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.rows = []
        for _ in range(n):
            context = max(8, int(rng.lognormvariate(4.0, 0.6)))
            pairs = [min(args.max_len, context + max(4, int(rng.lognormvariate(3.0, 0.5))))
                     for _ in range(args.choices)]
            ids = [[rng.randrange(2, 30522) for _ in range(k)] for k in pairs]
            self.rows.append((ids, rng.randrange(args.choices)))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        ids, label = self.rows[i]
        return {"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids], "label": label}


class DataCollatorForMultipleChoice:  # run_swag.py's
    def __call__(self, features):
        labels = [f.pop("label") for f in features]
        batch_size, num_choices = len(features), len(features[0]["input_ids"])
        flat = [{k: v[i] for k, v in f.items()} for f in features for i in range(num_choices)]
        batch = tokenizer.pad(flat, padding=True, return_tensors="pt")
        batch = {k: v.view(batch_size, num_choices, -1) for k, v in batch.items()}
        batch["labels"] = torch.tensor(labels, dtype=torch.int64)
        return batch


model = BertForMultipleChoice(BertConfig(hidden_size=args.hidden, num_hidden_layers=args.layers,
                                         num_attention_heads=args.hidden // 64, intermediate_size=4 * args.hidden,
                                         max_position_embeddings=max(512, args.max_len)))
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
targs = TrainingArguments(output_dir="swag_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=4, learning_rate=5e-5, dataloader_num_workers=0, seed=0)
trainer = Trainer(model=model, args=targs, train_dataset=RandomSwag(args.steps * args.batch, 1),
                  eval_dataset=RandomSwag(2 * args.eval_batch, 2), data_collator=DataCollatorForMultipleChoice())
trainer.train()
