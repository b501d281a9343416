"""Causal-LM fine-tuning with the HF Trainer and a compute_metrics that wants token accuracy (GPT2LMHeadModel,
random init: no download; random token ids), as the many forum threads on "CUDA out of memory during evaluation"
have it: no preprocess_logits_for_metrics and no eval_accumulation_steps, so the Trainer's evaluation loop
concatenates every eval batch's full-vocabulary logits on the GPU until the loop ends.

bf16, AdamW, eval every --eval-steps over --eval-batches batches of per_device_eval_batch_size. History from the
start; the snapshot is dumped in an except handler around trainer.train().
"""
import argparse, random
import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, default_data_collator

p = argparse.ArgumentParser()
p.add_argument("--n-embd", type=int, default=768)
p.add_argument("--n-layer", type=int, default=12)
p.add_argument("--block-size", type=int, default=512)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--eval-batch", type=int, default=16)
p.add_argument("--eval-batches", type=int, default=8)
p.add_argument("--steps", type=int, default=6)
p.add_argument("--eval-steps", type=int, default=3)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


def blocks(n, seed):
    rng = random.Random(seed)
    rows = [[rng.randrange(50257) for _ in range(args.block_size)] for _ in range(n)]
    return [{"input_ids": r, "labels": r} for r in rows]


def compute_metrics(eval_pred):  # token accuracy from the logits the Trainer gathered
    logits, labels = eval_pred
    predictions = np.argmax(logits[:, :-1], axis=-1)
    return {"accuracy": float((predictions == labels[:, 1:]).mean())}


model = GPT2LMHeadModel(GPT2Config(n_embd=args.n_embd, n_layer=args.n_layer, n_head=args.n_embd // 64,
                                   n_positions=max(1024, args.block_size), vocab_size=50257))
targs = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=1, dataloader_num_workers=0, seed=0)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Trainer(model=model, args=targs, train_dataset=blocks(args.steps * args.batch, 1),
                  eval_dataset=blocks(args.eval_batches * args.eval_batch, 2), data_collator=default_data_collator,
                  compute_metrics=compute_metrics)
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
