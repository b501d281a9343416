"""A causal-LM fine-tune with the HF Trainer, written as its docs show (random init: no download); Qwen2,
GPT-NeoX (Pythia) with --arch gpt_neox, or Llama with --arch llama. --lora R fine-tunes LoRA adapters of rank R
on every projection of a bf16 base, as PEFT's docs show (get_peft_model), instead of the whole model.

Dynamic padding (pad to the longest in the batch), bf16, eval every --eval-steps, optional gradient
checkpointing, torch_empty_cache_steps and torch_compile. History is recorded as PyTorch's memory docs suggest
(max_entries=100000: a ring), from the start or from --history-from-step through a callback; the
snapshot is dumped in the except handler around trainer.train().
"""
import argparse, inspect, random
import torch
from transformers import (GPTNeoXConfig, GPTNeoXForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM, Trainer, TrainingArguments, TrainerCallback)

p = argparse.ArgumentParser()
p.add_argument("--arch", default="qwen2", help="qwen2 | gpt_neox (Pythia) | llama")
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=16)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--eval-batch", type=int, default=16)
p.add_argument("--max-len", type=int, default=2048)
p.add_argument("--steps", type=int, default=18)
p.add_argument("--eval-steps", type=int, default=6)
p.add_argument("--ckpt", action="store_true")
p.add_argument("--empty-cache-steps", type=int, default=0)
p.add_argument("--max-entries", type=int, default=100000)
p.add_argument("--history-from-step", type=int, default=0)
p.add_argument("--lora", type=int, default=0, help="LoRA rank; 0: full fine-tune")
p.add_argument("--compile", action="store_true", help="TrainingArguments(torch_compile=True)")
p.add_argument("--ga", type=int, default=1, help="gradient_accumulation_steps")
p.add_argument("--group-by-length", action="store_true", help="TrainingArguments(group_by_length=True)")
args = p.parse_args()


class RandomText(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.rows = []
        for _ in range(n):
            length = max(16, min(args.max_len, int(rng.lognormvariate(6.3, 0.7))))
            self.rows.append([rng.randrange(32000) for _ in range(length)])

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return {"input_ids": self.rows[i]}


def collate(rows):
    n = max(len(r["input_ids"]) for r in rows)
    ids = torch.zeros(len(rows), n, dtype=torch.long)
    mask = torch.zeros(len(rows), n, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r["input_ids"])] = torch.tensor(r["input_ids"])
        mask[i, :len(r["input_ids"])] = 1
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class StartHistory(TrainerCallback):
    def on_step_begin(self, targs, state, control, **kw):
        if state.global_step == args.history_from_step:
            torch.cuda.memory._record_memory_history(max_entries=args.max_entries)


if args.arch == "gpt_neox":
    model = GPTNeoXForCausalLM(GPTNeoXConfig(hidden_size=args.hidden, num_hidden_layers=args.layers,
                                             num_attention_heads=16, intermediate_size=4 * args.hidden,
                                             vocab_size=32000, max_position_embeddings=4096))
elif args.arch == "llama":
    model = LlamaForCausalLM(LlamaConfig(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=16,
                                         num_key_value_heads=8, intermediate_size=args.hidden * 11 // 4,
                                         vocab_size=32000, max_position_embeddings=4096))
else:
    model = Qwen2ForCausalLM(Qwen2Config(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=16,
                                         num_key_value_heads=4, intermediate_size=args.hidden * 11 // 4,
                                         vocab_size=32000, max_position_embeddings=4096))
if args.lora:
    from peft import LoraConfig, get_peft_model
    model = get_peft_model(model.to(torch.bfloat16), LoraConfig(
        r=args.lora, lora_alpha=2 * args.lora, lora_dropout=0.05, task_type="CAUSAL_LM",
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
    model.print_trainable_parameters()
# transformers 5 names the length-grouped sampler a train_sampling_strategy; 4.x had group_by_length
grouping = {}
if args.group_by_length:
    fields = inspect.signature(TrainingArguments).parameters
    grouping = ({"group_by_length": True} if "group_by_length" in fields
                else {"train_sampling_strategy": "group_by_length"})
targs = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=5, gradient_checkpointing=args.ckpt, gradient_accumulation_steps=args.ga,
                          dataloader_num_workers=0, seed=0,
                          torch_empty_cache_steps=args.empty_cache_steps or None, torch_compile=args.compile,
                          **grouping)
callbacks = [StartHistory()] if args.history_from_step else []
if not args.history_from_step:
    torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Trainer(model=model, args=targs, train_dataset=RandomText(args.steps * args.batch * args.ga, 1),
                  eval_dataset=RandomText(2 * args.eval_batch, 2), data_collator=collate, callbacks=callbacks)
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
