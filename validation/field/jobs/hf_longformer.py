"""Long-document classification with Longformer and the HF Trainer, as the text-classification example runs it
(LongformerForSequenceClassification from config, random init: no download; random token ids).

Documents of lognormal length up to --max-len tokens, padded per batch by DataCollatorWithPadding (Longformer pads
again to a multiple of its attention window inside the model), sliding-window attention with global attention on
the first token, bf16, AdamW, eval every --eval-steps with a larger batch. History from the start; the snapshot is
dumped in the except handler around trainer.train().
"""
import argparse, random
import torch
from transformers import (DataCollatorWithPadding, LongformerConfig, LongformerForSequenceClassification,
                          PreTrainedTokenizerFast, Trainer, TrainingArguments)
from tokenizers import Tokenizer, models

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=768)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--window", type=int, default=256)
p.add_argument("--max-len", type=int, default=4096)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--eval-batch", type=int, default=16)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-steps", type=int, default=5)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
VOCAB = 30000


class RandomDocuments(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.rows = []
        for _ in range(n):
            length = max(64, min(args.max_len, int(rng.lognormvariate(7.2, 0.6))))
            self.rows.append({"input_ids": [0] + [rng.randrange(4, VOCAB) for _ in range(length - 2)] + [2],
                              "label": rng.randrange(4)})

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


# A tokenizer only for its padding (the collator asks it to pad): the ids are made above.
tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<pad>": 1, "<unk>": 3}, "<unk>")),
                                    pad_token="<pad>", unk_token="<unk>")
config = LongformerConfig(vocab_size=VOCAB, hidden_size=args.hidden, num_hidden_layers=args.layers,
                          num_attention_heads=args.hidden // 64, intermediate_size=4 * args.hidden,
                          attention_window=args.window, max_position_embeddings=args.max_len + 2, num_labels=4,
                          pad_token_id=1)
model = LongformerForSequenceClassification(config)
targs = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=2, dataloader_num_workers=0, seed=0)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Trainer(model=model, args=targs, train_dataset=RandomDocuments(args.steps * args.batch, 1),
                  eval_dataset=RandomDocuments(2 * args.eval_batch, 2),
                  data_collator=DataCollatorWithPadding(tokenizer))
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
