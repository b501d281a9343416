"""Long-sequence masked-LM pretraining with BigBird and the HF Trainer, as the language-modeling example runs it
(BigBirdForMaskedLM from config, random init: no download; random token ids).

Block-sparse attention (block 64, 3 random blocks), sequences of a random length up to --max-len padded per batch to
a multiple of the block (BigBird falls back to full attention when a batch is too short for its blocks), 15% of the
tokens masked, bf16, AdamW, eval every --eval-steps with a larger batch. History from the start; the snapshot is
dumped in the except handler around trainer.train().
"""
import argparse, random
import torch
from transformers import BigBirdConfig, BigBirdForMaskedLM, Trainer, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=768)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--max-len", type=int, default=4096)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--eval-batch", type=int, default=16)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-steps", type=int, default=5)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
VOCAB, BLOCK, MASK, PAD = 32000, 64, 4, 0


class RandomTexts(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        lengths = [max(256, min(args.max_len, int(rng.lognormvariate(7.4, 0.5)))) for _ in range(n)]
        self.rows = [[rng.randrange(5, VOCAB) for _ in range(length)] for length in lengths]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def collate(rows):  # DataCollatorForLanguageModeling with pad_to_multiple_of=BLOCK, without a tokenizer
    n = -(-max(len(r) for r in rows) // BLOCK) * BLOCK
    ids = torch.full((len(rows), n), PAD, dtype=torch.long)
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        mask[i, :len(r)] = 1
    labels = ids.clone()
    chosen = (torch.rand(ids.shape) < 0.15) & (mask == 1)
    labels[~chosen] = -100
    ids[chosen] = MASK
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


model = BigBirdForMaskedLM(BigBirdConfig(vocab_size=VOCAB, hidden_size=args.hidden, num_hidden_layers=args.layers,
                                         num_attention_heads=args.hidden // 64, intermediate_size=4 * args.hidden,
                                         max_position_embeddings=args.max_len, attention_type="block_sparse",
                                         block_size=BLOCK, num_random_blocks=3, pad_token_id=PAD))
targs = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=2, dataloader_num_workers=0, seed=0, remove_unused_columns=False)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Trainer(model=model, args=targs, train_dataset=RandomTexts(args.steps * args.batch, 1),
                  eval_dataset=RandomTexts(2 * args.eval_batch, 2), data_collator=collate)
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
