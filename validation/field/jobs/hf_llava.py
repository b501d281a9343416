"""Visual instruction tuning of a LLaVA-style model with the HF Trainer, as the LLaVA fine-tuning guides run it
(LlavaForConditionalGeneration from config: a CLIP ViT-L/14-336-like tower and a Llama decoder, random init: no
download).

Each example: an image (336 px, 576 image tokens after the projector) and an instruction and answer of random
length; the loss on the answer only (-100 on the image, the instruction and the padding), padded per batch, bf16,
AdamW, the vision tower frozen as in LLaVA's second stage, eval every --eval-steps with a larger batch. History from
the start; the snapshot is dumped in the except handler around trainer.train().
"""
import argparse, random
import torch
from transformers import (CLIPVisionConfig, LlamaConfig, LlavaConfig, LlavaForConditionalGeneration, Trainer,
                          TrainingArguments)

p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=2048)
p.add_argument("--layers", type=int, default=12)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--eval-batch", type=int, default=16)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--eval-steps", type=int, default=5)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()
VOCAB, IMAGE_TOKEN, IMAGE_TOKENS, PAD = 32064, 32000, 576, 0


class RandomConversations(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.seed = seed
        self.rows = []
        for _ in range(n):
            prompt = [rng.randrange(3, 32000) for _ in range(rng.randrange(16, 128))]
            answer = [rng.randrange(3, 32000) for _ in range(max(8, min(1024, int(rng.lognormvariate(5.0, 0.8)))))]
            self.rows.append((prompt, answer))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 1000003 + i)
        prompt, answer = self.rows[i]
        ids = [1] + [IMAGE_TOKEN] * IMAGE_TOKENS + prompt + answer
        labels = [-100] * (1 + IMAGE_TOKENS + len(prompt)) + answer
        return {"input_ids": ids, "labels": labels, "pixel_values": torch.rand(3, 336, 336, generator=g)}


def collate(rows):
    n = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), n), PAD, dtype=torch.long)
    labels = torch.full((len(rows), n), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r["input_ids"])] = torch.tensor(r["input_ids"])
        labels[i, :len(r["labels"])] = torch.tensor(r["labels"])
        mask[i, :len(r["input_ids"])] = 1
    return {"input_ids": ids, "labels": labels, "attention_mask": mask,
            "pixel_values": torch.stack([r["pixel_values"] for r in rows])}


vision = CLIPVisionConfig(hidden_size=1024, num_hidden_layers=12, num_attention_heads=16, intermediate_size=4096,
                          image_size=336, patch_size=14, projection_dim=768)
text = LlamaConfig(vocab_size=VOCAB, hidden_size=args.hidden, num_hidden_layers=args.layers,
                   num_attention_heads=args.hidden // 128, intermediate_size=int(2.6875 * args.hidden),
                   max_position_embeddings=4096, pad_token_id=PAD)
config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=IMAGE_TOKEN,
                     vision_feature_layer=-2, vision_feature_select_strategy="default")
config.image_token_id = config.image_token_index = IMAGE_TOKEN
model = LlavaForConditionalGeneration(config)
for parameter in model.model.vision_tower.parameters():
    parameter.requires_grad_(False)
targs = TrainingArguments(output_dir="hf_out", per_device_train_batch_size=args.batch,
                          per_device_eval_batch_size=args.eval_batch, max_steps=args.steps, bf16=True,
                          eval_strategy="steps", eval_steps=args.eval_steps, save_strategy="no", report_to=[],
                          logging_steps=2, dataloader_num_workers=0, seed=0, remove_unused_columns=False,
                          prediction_loss_only=True)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = Trainer(model=model, args=targs, train_dataset=RandomConversations(args.steps * args.batch, 1),
                  eval_dataset=RandomConversations(2 * args.eval_batch, 2), data_collator=collate)
try:
    trainer.train()
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
