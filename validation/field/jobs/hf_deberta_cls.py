"""Sequence classification with DeBERTa-v2 under the HF Trainer, as run_glue.py fine-tunes it on long inputs.

DebertaV2ForSequenceClassification from config (random init: no download; disentangled attention with relative
position buckets: content-to-position and position-to-content scores, each quadratic in the length), documents of
random length padded per batch (DataCollatorWithPadding), bf16, AdamW, eval every --eval-steps. History from the
start; the snapshot is dumped by the OOM observer.
"""
import argparse, random
import torch
from transformers import DebertaV2Config, DebertaV2ForSequenceClassification, Trainer, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--eval-batch", type=int, default=32)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-steps", type=int, default=5)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
VOCAB, PAD = 128100, 0

torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))


class Documents(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.rows = [[rng.randrange(3, VOCAB) for _ in range(max(32, min(1024, int(rng.lognormvariate(5.9, 0.6)))))]
                     for _ in range(n)]
        self.labels = [rng.randrange(3) for _ in range(n)]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return {"input_ids": self.rows[i], "labels": self.labels[i]}


def collate(rows):
    n = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), n), PAD, dtype=torch.long)
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r["input_ids"])], mask[i, :len(r["input_ids"])] = torch.tensor(r["input_ids"]), 1
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([r["labels"] for r in rows])}


config = DebertaV2Config(vocab_size=VOCAB, hidden_size=args.hidden, num_hidden_layers=args.layers,
                         num_attention_heads=args.hidden // 64, intermediate_size=4 * args.hidden,
                         max_position_embeddings=1024, relative_attention=True, position_buckets=256,
                         pos_att_type=["p2c", "c2p"], max_relative_positions=-1, position_biased_input=False,
                         share_att_key=True, norm_rel_ebd="layer_norm", num_labels=3, pad_token_id=PAD)
model = DebertaV2ForSequenceClassification(config)
targs = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=2, dataloader_num_workers=0, seed=0, prediction_loss_only=True,
                          remove_unused_columns=False)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Trainer(model=model, args=targs, train_dataset=Documents(args.steps * args.batch, 1),
                  eval_dataset=Documents(2 * args.eval_batch, 2), data_collator=collate)
trainer.train()
