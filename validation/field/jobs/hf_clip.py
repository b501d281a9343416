"""Contrastive image-text training of CLIP with the HF Trainer, as transformers' run_clip.py example runs it
(CLIPModel, random init: no download; random images and captions).

The collator stacks pixel_values, pads the captions to the batch's longest (at most 77 tokens) and passes
return_loss=True, as run_clip.py's collate_fn does. bf16, AdamW, eval every --eval-steps with a larger eval
batch. History from the start; the snapshot is dumped by the OOM observer (the PyTorch docs' recipe).
"""
import argparse, random
import torch
from transformers import CLIPConfig, CLIPModel, Trainer, TrainingArguments

p = argparse.ArgumentParser()
p.add_argument("--vision-hidden", type=int, default=768)
p.add_argument("--vision-layers", type=int, default=12)
p.add_argument("--patch", type=int, default=16)
p.add_argument("--image-size", type=int, default=224)
p.add_argument("--batch", type=int, default=128)
p.add_argument("--eval-batch", type=int, default=256)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--eval-steps", type=int, default=4)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class RandomPairs(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.captions = [[49406] + [rng.randrange(1, 49405) for _ in range(max(4, min(75, int(rng.gauss(20, 12)))))]
                         + [49407] for _ in range(n)]
        self.seed = seed

    def __len__(self):
        return len(self.captions)

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 1000003 + i)
        return {"pixel_values": torch.randn(3, args.image_size, args.image_size, generator=g),
                "input_ids": self.captions[i]}


def collate(rows):
    n = max(len(r["input_ids"]) for r in rows)
    ids = torch.zeros(len(rows), n, dtype=torch.long)
    mask = torch.zeros(len(rows), n, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r["input_ids"])] = torch.tensor(r["input_ids"])
        mask[i, :len(r["input_ids"])] = 1
    return {"pixel_values": torch.stack([r["pixel_values"] for r in rows]), "input_ids": ids,
            "attention_mask": mask, "return_loss": True}


config = CLIPConfig(
    text_config={"hidden_size": 512, "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 8,
                 "max_position_embeddings": 77, "vocab_size": 49408},
    vision_config={"hidden_size": args.vision_hidden, "intermediate_size": 4 * args.vision_hidden,
                   "num_hidden_layers": args.vision_layers, "num_attention_heads": args.vision_hidden // 64,
                   "image_size": args.image_size, "patch_size": args.patch},
    projection_dim=512)
model = CLIPModel(config)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
targs = TrainingArguments(output_dir="clip_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=2, remove_unused_columns=False, dataloader_num_workers=0, seed=0,
                          learning_rate=5e-5, warmup_steps=2, weight_decay=0.1)
trainer = Trainer(model=model, args=targs, train_dataset=RandomPairs(args.steps * args.batch, 1),
                  eval_dataset=RandomPairs(2 * args.eval_batch, 2), data_collator=collate)
trainer.train()
