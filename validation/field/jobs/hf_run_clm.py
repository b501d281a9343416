"""Causal-LM training of GPT-2 with the HF Trainer as transformers' run_clm.py runs it (GPT2LMHeadModel, random
init: no download; random token ids).

run_clm.py's group_texts: the tokenised texts concatenated and cut into blocks of --block-size tokens, so every
batch has the same shape; default_data_collator, labels the input ids. bf16, AdamW (fused with --fused), eval
every --eval-steps with per_device_eval_batch_size. History from the start; the snapshot is dumped in an except
handler around trainer.train().
"""
import argparse, random
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, default_data_collator

p = argparse.ArgumentParser()
p.add_argument("--n-embd", type=int, default=1024)
p.add_argument("--n-layer", type=int, default=24)
p.add_argument("--block-size", type=int, default=1024)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--eval-batch", type=int, default=32)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--eval-steps", type=int, default=4)
p.add_argument("--fused", action="store_true", help="optim=adamw_torch_fused")
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


def group_texts(n_blocks, seed):  # run_clm.py: concatenate, then cut into block_size chunks
    rng = random.Random(seed)
    stream = []
    while len(stream) < n_blocks * args.block_size:
        stream += [rng.randrange(50257) for _ in range(max(8, int(rng.lognormvariate(5.5, 1.0))))]
    return [{"input_ids": stream[i * args.block_size:(i + 1) * args.block_size],
             "labels": stream[i * args.block_size:(i + 1) * args.block_size]} for i in range(n_blocks)]


model = GPT2LMHeadModel(GPT2Config(n_embd=args.n_embd, n_layer=args.n_layer, n_head=args.n_embd // 64,
                                   n_positions=max(1024, args.block_size), vocab_size=50257))
targs = TrainingArguments(output_dir="clm_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=2, optim="adamw_torch_fused" if args.fused else "adamw_torch",
                          dataloader_num_workers=0, seed=0)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Trainer(model=model, args=targs, train_dataset=group_texts(args.steps * args.batch, 1),
                  eval_dataset=group_texts(2 * args.eval_batch, 2), data_collator=default_data_collator)
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
