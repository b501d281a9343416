"""Translation fine-tuning of T5 with the HF Seq2SeqTrainer, evaluated by generation, as run_translation.py does
with --predict_with_generate.

T5ForConditionalGeneration from config (random init: no download; random token ids), sources and targets of
random length padded per batch (DataCollatorForSeq2Seq-style, labels -100), bf16, AdamW, eval every
--eval-steps by beam search (generation_num_beams, generation_max_length): the eval batch runs `generate`, its
key/value caches growing token by token for every beam. History from the start; the snapshot is dumped in an
`except` handler around trainer.train().
"""
import argparse, random
import torch
from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments, T5Config, T5ForConditionalGeneration

p = argparse.ArgumentParser()
p.add_argument("--d-model", type=int, default=768)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--eval-batch", type=int, default=64)
p.add_argument("--beams", type=int, default=4)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--eval-steps", type=int, default=4)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
VOCAB, PAD, EOS = 32128, 0, 1


class Pairs(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.rows = []
        for _ in range(n):
            src = max(16, min(512, int(rng.lognormvariate(5.0, 0.6))))
            tgt = max(8, min(256, int(src * rng.uniform(0.8, 1.3))))
            self.rows.append(([rng.randrange(2, VOCAB) for _ in range(src)] + [EOS],
                              [rng.randrange(2, VOCAB) for _ in range(tgt)] + [EOS]))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def collate(rows):
    n, m = max(len(s) for s, _ in rows), max(len(t) for _, t in rows)
    ids = torch.full((len(rows), n), PAD, dtype=torch.long)
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    labels = torch.full((len(rows), m), -100, dtype=torch.long)
    for i, (s, t) in enumerate(rows):
        ids[i, :len(s)], mask[i, :len(s)] = torch.tensor(s), 1
        labels[i, :len(t)] = torch.tensor(t)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


config = T5Config(vocab_size=VOCAB, d_model=args.d_model, d_kv=64, d_ff=4 * args.d_model, num_layers=args.layers,
                  num_heads=args.d_model // 64, decoder_start_token_id=PAD, pad_token_id=PAD, eos_token_id=EOS)
model = T5ForConditionalGeneration(config)
targs = Seq2SeqTrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                                 per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                                 eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no",
                                 report_to=[], logging_steps=2, dataloader_num_workers=0, seed=0,
                                 predict_with_generate=True, generation_num_beams=args.beams,
                                 generation_max_length=256, remove_unused_columns=False)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Seq2SeqTrainer(model=model, args=targs, train_dataset=Pairs(args.steps * args.batch, 1),
                         eval_dataset=Pairs(args.eval_batch, 2), data_collator=collate)
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
