"""Image classification fine-tuning of a ViT with the HF Trainer, as transformers' image-classification example
(run_image_classification.py) runs it: ViTForImageClassification (random init: no download), pixel_values and
labels from a collate_fn, remove_unused_columns=False, bf16, eval every --eval-steps with accuracy from
compute_metrics (so the eval gathers its logits). Random images, fixed size. History from the start; the snapshot
is dumped by the OOM observer.
"""
import argparse
import torch
from transformers import Trainer, TrainingArguments, ViTConfig, ViTForImageClassification

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=24)
p.add_argument("--image-size", type=int, default=224)
p.add_argument("--labels", type=int, default=1000)
p.add_argument("--batch", type=int, default=96)
p.add_argument("--eval-batch", type=int, default=256)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--eval-steps", type=int, default=4)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class RandomImages(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        self.n, self.seed = n, seed

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 1000003 + i)
        return {"pixel_values": torch.randn(3, args.image_size, args.image_size, generator=g),
                "label": int(torch.randint(0, args.labels, (1,), generator=g))}


def collate_fn(examples):  # run_image_classification.py's
    return {"pixel_values": torch.stack([e["pixel_values"] for e in examples]),
            "labels": torch.tensor([e["label"] for e in examples])}


def compute_metrics(p):
    return {"accuracy": float((p.predictions.argmax(-1) == p.label_ids).mean())}


model = ViTForImageClassification(ViTConfig(
    hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
    intermediate_size=4 * args.hidden, image_size=args.image_size, patch_size=16, num_labels=args.labels))
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
targs = TrainingArguments(output_dir="vitcls_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=2, remove_unused_columns=False, learning_rate=5e-5, warmup_steps=2,
                          dataloader_num_workers=0, seed=0)
trainer = Trainer(model=model, args=targs, train_dataset=RandomImages(args.steps * args.batch, 1),
                  eval_dataset=RandomImages(2 * args.eval_batch, 2), data_collator=collate_fn,
                  compute_metrics=compute_metrics)
trainer.train()
