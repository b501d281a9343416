"""A semantic-segmentation model trained with Lightning, its validation metrics computed at the epoch's end from
outputs kept in `self.validation_step_outputs`, the pattern Lightning's docs show for `on_validation_epoch_end` —
here each batch's per-pixel class probabilities are kept on the GPU (for a calibration error beside the mIoU), so
the validation grows by one batch of scores per batch until the epoch ends. torchvision's FCN-ResNet50 (no
pretrained weights) on random images and masks of --size px, 21 classes, bf16-mixed, SGD; validation every
--val-every steps over --val-batches batches. History from the start; dump in the except handler around fit().
"""
import argparse
import torch, torch.nn.functional as F
import lightning as L
import torchvision

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=8)
p.add_argument("--val-batch", type=int, default=16)
p.add_argument("--size", type=int, default=512)
p.add_argument("--val-batches", type=int, default=12)
p.add_argument("--steps", type=int, default=4)
p.add_argument("--val-every", type=int, default=2)
p.add_argument("--classes", type=int, default=21)
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()


class Segmenter(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.model = torchvision.models.segmentation.fcn_resnet50(weights=None, weights_backbone=None,
                                                                  num_classes=args.classes, aux_loss=False)
        self.validation_step_outputs = []

    def training_step(self, batch, i):
        images, masks = batch
        return F.cross_entropy(self.model(images)["out"], masks)

    def validation_step(self, batch, i):
        images, masks = batch
        probs = self.model(images)["out"].float().softmax(1)
        self.validation_step_outputs.append((probs, masks))

    def on_validation_epoch_end(self):
        hits = pixels = 0
        for probs, masks in self.validation_step_outputs:
            hits += (probs.argmax(1) == masks).sum().item()
            pixels += masks.numel()
        self.log("val_pixel_acc", hits / pixels)
        self.validation_step_outputs.clear()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)


class RandomScenes(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        self.n, self.seed = n, seed

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 100003 + i)
        return (torch.rand(3, args.size, args.size, generator=g),
                torch.randint(args.classes, (args.size, args.size), generator=g))


train = torch.utils.data.DataLoader(RandomScenes(args.steps * args.batch, 1), batch_size=args.batch)
val = torch.utils.data.DataLoader(RandomScenes(args.val_batches * args.val_batch, 2), batch_size=args.val_batch)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
trainer = L.Trainer(accelerator="gpu", devices=1, precision="bf16-mixed", max_steps=args.steps,
                    val_check_interval=args.val_every, num_sanity_val_steps=0, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
try:
    trainer.fit(Segmenter(), train, val)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
