"""A summarisation-style fine-tune with the HF Seq2SeqTrainer, as its docs show (T5, random init: no download).

Encoder-decoder, variable source and target lengths padded per batch, bf16, eval every --eval-steps
(loss only, or with --generate as the summarisation example runs it: predict_with_generate, greedy, up to
--gen-len tokens), Adafactor or AdamW. History from the start (max_entries=100000); the
snapshot is dumped in the except handler around trainer.train().
"""
import argparse, random
import torch
from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments, T5Config, T5ForConditionalGeneration

p = argparse.ArgumentParser()
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--eval-batch", type=int, default=32)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-steps", type=int, default=5)
p.add_argument("--optim", default="adamw_torch", help="adamw_torch | adafactor")
p.add_argument("--generate", action="store_true", help="predict_with_generate=True in the evals")
p.add_argument("--gen-len", type=int, default=128, help="generation_max_length")
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class RandomPairs(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.rows = []
        for _ in range(n):
            src = max(32, min(1024, int(rng.lognormvariate(6.0, 0.6))))
            tgt = max(8, min(256, int(rng.lognormvariate(4.4, 0.6))))
            src_ids = [rng.randrange(2, 32000) for _ in range(src)]
            self.rows.append((src_ids, [rng.randrange(2, 32000) for _ in range(tgt)]))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return {"input_ids": self.rows[i][0], "labels": self.rows[i][1]}


def collate(rows):
    ns, nt = max(len(r["input_ids"]) for r in rows), max(len(r["labels"]) for r in rows)
    ids = torch.zeros(len(rows), ns, dtype=torch.long)
    mask = torch.zeros(len(rows), ns, dtype=torch.long)
    labels = torch.full((len(rows), nt), -100, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r["input_ids"])] = torch.tensor(r["input_ids"])
        mask[i, :len(r["input_ids"])] = 1
        labels[i, :len(r["labels"])] = torch.tensor(r["labels"])
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


model = T5ForConditionalGeneration(T5Config(d_model=args.d_model, d_ff=4 * args.d_model, d_kv=64, num_heads=16,
                                            num_layers=args.layers, num_decoder_layers=args.layers,
                                            vocab_size=32128, decoder_start_token_id=0, pad_token_id=0,
                                            eos_token_id=1))
targs = Seq2SeqTrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                                 per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                                 eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no",
                                 report_to=[], logging_steps=4, optim=args.optim, dataloader_num_workers=0, seed=0,
                                 predict_with_generate=args.generate, generation_max_length=args.gen_len,
                                 generation_num_beams=1)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Seq2SeqTrainer(model=model, args=targs, train_dataset=RandomPairs(args.steps * args.batch, 1),
                         eval_dataset=RandomPairs(2 * args.eval_batch, 2), data_collator=collate)
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
