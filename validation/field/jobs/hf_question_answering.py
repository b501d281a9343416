"""Extractive question answering with the HF Trainer, as transformers' run_qa.py runs it with
--pad_to_max_length False: BertForQuestionAnswering (random init: no download), question and context truncated to
--max-len tokens, DataCollatorWithPadding to the batch's longest, bf16, eval every --eval-steps over features
without answers (the Trainer gathers the start and end logits of every eval batch on the GPU, as run_qa's
trainer does before its post-processing). Random questions and contexts of SQuAD-like lengths.
History from the start in a ring of --max-entries; the snapshot is dumped in an except handler around train().
"""
import argparse, random
import torch
from transformers import (BertConfig, BertForQuestionAnswering, DataCollatorWithPadding, PreTrainedTokenizerFast,
                          Trainer, TrainingArguments)
from tokenizers import Tokenizer, models

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=24)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--eval-batch", type=int, default=64)
p.add_argument("--max-len", type=int, default=384)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-steps", type=int, default=5)
p.add_argument("--eval-features", type=int, default=192)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()

tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"[PAD]": 0, "[UNK]": 1}, "[UNK]")),
                                    pad_token="[PAD]", unk_token="[UNK]")


class RandomSquad(torch.utils.data.Dataset):
    """Features as run_qa's prepare_train_features makes them: [CLS] question [SEP] context [SEP], answer span."""

    def __init__(self, n, seed, answers):
        rng = random.Random(seed)
        self.rows = []
        for _ in range(n):
            question = max(4, int(rng.lognormvariate(2.4, 0.35)))
            context = max(20, int(rng.lognormvariate(5.0, 0.5)))
            length = min(args.max_len, question + context + 3)
            ids = [rng.randrange(2, 30522) for _ in range(length)]
            types = [0] * (question + 2) + [1] * (length - question - 2)
            row = {"input_ids": ids, "token_type_ids": types, "attention_mask": [1] * length}
            if answers:
                start = rng.randrange(question + 2, length - 1)
                row.update(start_positions=start, end_positions=min(length - 2, start + rng.randrange(1, 12)))
            self.rows.append(row)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return dict(self.rows[i])


model = BertForQuestionAnswering(BertConfig(hidden_size=args.hidden, num_hidden_layers=args.layers,
                                            num_attention_heads=args.hidden // 64,
                                            intermediate_size=4 * args.hidden,
                                            max_position_embeddings=max(512, args.max_len)))
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
targs = TrainingArguments(output_dir="qa_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=4, learning_rate=3e-5, dataloader_num_workers=0, seed=0)
trainer = Trainer(model=model, args=targs, train_dataset=RandomSquad(args.steps * args.batch, 1, True),
                  eval_dataset=RandomSquad(args.eval_features, 2, False),
                  data_collator=DataCollatorWithPadding(tokenizer))
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
