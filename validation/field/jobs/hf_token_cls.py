"""Token classification (NER) with the HF Trainer, as transformers' run_ner.py runs it: BertForTokenClassification
(random init: no download), DataCollatorForTokenClassification (dynamic padding per batch, labels padded with
-100), bf16, eval every --eval-steps. Random sentences of log-normal lengths. History from step
--history-from-step; the snapshot is dumped in an except handler around trainer.train().
"""
import argparse, random
import torch
from transformers import (BertConfig, BertForTokenClassification, DataCollatorForTokenClassification,
                          PreTrainedTokenizerFast, Trainer, TrainerCallback, TrainingArguments)
from tokenizers import Tokenizer, models

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=24)
p.add_argument("--batch", type=int, default=64)
p.add_argument("--eval-batch", type=int, default=128)
p.add_argument("--max-len", type=int, default=512)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-steps", type=int, default=5)
p.add_argument("--history-from-step", type=int, default=0)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

# A tokenizer only for the collator's padding (pad id 0); no vocabulary is read from it.
tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"[PAD]": 0, "[UNK]": 1}, "[UNK]")),
                                    pad_token="[PAD]", unk_token="[UNK]")


class RandomSentences(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        lengths = [max(8, min(args.max_len, int(rng.lognormvariate(4.2, 0.8)))) for _ in range(n)]
        self.rows = [([rng.randrange(2, 30522) for _ in range(k)], [rng.randrange(9) for _ in range(k)])
                     for k in lengths]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        ids, tags = self.rows[i]
        return {"input_ids": ids, "attention_mask": [1] * len(ids), "labels": tags}


class StartHistory(TrainerCallback):
    def on_step_begin(self, targs, state, control, **kw):
        if state.global_step == args.history_from_step:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


model = BertForTokenClassification(BertConfig(hidden_size=args.hidden, num_hidden_layers=args.layers,
                                              num_attention_heads=args.hidden // 64, intermediate_size=4 * args.hidden,
                                              max_position_embeddings=max(512, args.max_len), num_labels=9))
targs = TrainingArguments(output_dir="ner_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=4, dataloader_num_workers=0, seed=0)
callbacks = [StartHistory()] if args.history_from_step else []
if not args.history_from_step:
    torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Trainer(model=model, args=targs, train_dataset=RandomSentences(args.steps * args.batch, 1),
                  eval_dataset=RandomSentences(2 * args.eval_batch, 2),
                  data_collator=DataCollatorForTokenClassification(tokenizer), callbacks=callbacks)
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
