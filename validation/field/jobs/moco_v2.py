"""MoCo v2 as facebookresearch/moco's main_moco.py and builder.py write it, on one GPU, on random images.

A query encoder and a momentum key encoder (torchvision ResNet with a two-layer MLP head to 128 dimensions), the
key encoder updated each step by param_k.data = param_k.data * m + param_q.data * (1 - m), a queue of --queue
normalized keys (fp32, dim x K) as the negatives, logits over 1 positive and K negatives at temperature 0.2,
enqueue and dequeue in place, SGD with momentum, fp32, cudnn.benchmark. Two random views of each image are cropped
and flipped on the GPU. History from step --history-from-step; the snapshot is dumped by the OOM observer.
"""
import argparse
import torch, torch.nn as nn, torch.nn.functional as F, torchvision

p = argparse.ArgumentParser()
p.add_argument("--arch", default="resnet50")
p.add_argument("--batch", type=int, default=256)
p.add_argument("--size", type=int, default=224)
p.add_argument("--queue", type=int, default=65536)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--history-from-step", type=int, default=1)
args = p.parse_args()


def encoder():
    net = getattr(torchvision.models, args.arch)(num_classes=128)
    width = net.fc.weight.shape[1]
    net.fc = nn.Sequential(nn.Linear(width, width), nn.ReLU(), net.fc)
    return net


class MoCo(nn.Module):
    def __init__(self, dim=128, K=65536, m=0.999, T=0.2):
        super().__init__()
        self.K, self.m, self.T = K, m, T
        self.encoder_q, self.encoder_k = encoder(), encoder()
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.copy_(param_q.data)
            param_k.requires_grad = False
        self.register_buffer("queue", F.normalize(torch.randn(dim, K), dim=0))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data = param_k.data * self.m + param_q.data * (1.0 - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        self.queue[:, ptr:ptr + batch_size] = keys.T
        self.queue_ptr[0] = (ptr + batch_size) % self.K

    def forward(self, im_q, im_k):
        q = F.normalize(self.encoder_q(im_q), dim=1)
        with torch.no_grad():
            self._momentum_update_key_encoder()
            k = F.normalize(self.encoder_k(im_k), dim=1)
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
        logits = torch.cat([l_pos, l_neg], dim=1) / self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long).cuda()
        self._dequeue_and_enqueue(k)
        return logits, labels


def view(images):
    s = args.size
    crop = int(s * 0.6)
    i, j = torch.randint(0, s - crop + 1, (2,)).tolist()
    v = F.interpolate(images[:, :, i:i + crop, j:j + crop], size=(s, s), mode="bilinear", align_corners=False)
    return v.flip(3) if torch.rand(()) < 0.5 else v


def oom_observer(device, alloc, device_alloc, device_free):
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")


torch.backends.cudnn.benchmark = True
torch._C._cuda_attach_out_of_memory_observer(oom_observer)
model = MoCo(K=args.queue).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, weight_decay=1e-4)
criterion = nn.CrossEntropyLoss().cuda()
for step in range(args.steps):
    if step == args.history_from_step:
        torch.cuda.memory._record_memory_history(max_entries=100000)
    images = torch.rand(args.batch, 3, args.size, args.size, device="cuda")
    output, target = model(im_q=view(images), im_k=view(images))
    loss = criterion(output, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 2 == 0:
        print(f"step {step} loss {loss.item():.3f}", flush=True)
