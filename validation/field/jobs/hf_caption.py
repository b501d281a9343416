"""Image captioning with VisionEncoderDecoderModel and the HF Seq2SeqTrainer, as the "image captioning" guide
and the ViT-GPT2 model cards train it: a ViT encoder and a GPT-2 decoder with cross-attention (both from config,
random init: no download), captions of varying length padded per batch (labels -100 on the padding), bf16,
gradient checkpointing on (non-reentrant unless --checkpointing says otherwise), eval every --eval-steps with a
larger batch (loss only). History from the start; the snapshot is dumped in the except handler around
trainer.train().
"""
import argparse, random
import torch
from transformers import (GPT2Config, GPT2LMHeadModel, Seq2SeqTrainer, Seq2SeqTrainingArguments, ViTConfig,
                          ViTModel, VisionEncoderDecoderModel)

p = argparse.ArgumentParser()
p.add_argument("--image", type=int, default=384)
p.add_argument("--patch", type=int, default=16)
p.add_argument("--width", type=int, default=768)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--eval-batch", type=int, default=64)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--eval-steps", type=int, default=4)
p.add_argument("--checkpointing", default="non-reentrant", help="non-reentrant | reentrant | none")
p.add_argument("--max-entries", type=int, default=100000)
p.add_argument("--stacks", default="all", help="_record_memory_history's stacks: all | python")
args = p.parse_args()


class RandomCaptions(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.seed = seed
        self.captions = [[rng.randrange(3, 50257) for _ in range(max(8, min(128, int(rng.lognormvariate(3.3, 0.5)))))]
                         for _ in range(n)]

    def __len__(self):
        return len(self.captions)

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 1000003 + i)
        return {"pixel_values": torch.rand(3, args.image, args.image, generator=g), "labels": self.captions[i]}


def collate(rows):
    n = max(len(r["labels"]) for r in rows)
    labels = torch.full((len(rows), n), -100, dtype=torch.long)
    for i, r in enumerate(rows):
        labels[i, :len(r["labels"])] = torch.tensor(r["labels"])
    return {"pixel_values": torch.stack([r["pixel_values"] for r in rows]), "labels": labels}


encoder = ViTModel(ViTConfig(image_size=args.image, patch_size=args.patch, hidden_size=args.width,
                             num_hidden_layers=args.layers, num_attention_heads=args.width // 64,
                             intermediate_size=4 * args.width), add_pooling_layer=False)
decoder = GPT2LMHeadModel(GPT2Config(n_embd=args.width, n_layer=args.layers, n_head=args.width // 64,
                                     add_cross_attention=True, is_decoder=True, use_cache=False))
model = VisionEncoderDecoderModel(encoder=encoder, decoder=decoder)
model.config.decoder_start_token_id = 50256
model.config.pad_token_id = 50256
targs = Seq2SeqTrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                                 per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                                 gradient_checkpointing=args.checkpointing != "none",
                                 gradient_checkpointing_kwargs={"use_reentrant": args.checkpointing == "reentrant"},
                                 eval_strategy="steps", eval_steps=args.eval_steps,
                                 save_strategy="no", report_to=[], logging_steps=2, dataloader_num_workers=0,
                                 seed=0, prediction_loss_only=True, remove_unused_columns=False)
if args.max_entries > 0:  # 0: no history (to tell a failure of the recording from one of the job)
    torch.cuda.memory._record_memory_history(max_entries=args.max_entries, stacks=args.stacks)
trainer = Seq2SeqTrainer(model=model, args=targs, train_dataset=RandomCaptions(args.steps * args.batch, 1),
                         eval_dataset=RandomCaptions(2 * args.eval_batch, 2), data_collator=collate)
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
