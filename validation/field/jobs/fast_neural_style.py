"""Fast neural style transfer as pytorch/examples' fast_neural_style/neural_style.py trains it: its TransformerNet
(reflection-padded convs, instance norm, residual blocks, upsampling convs), a VGG16 feature loss (torchvision,
random weights: no download), Gram-matrix style loss, Adam, a plain loop over images of one size. Random images.
History from the start; the snapshot is dumped in an except handler around the loop.
"""
import argparse
import torch, torch.nn as nn
from torchvision.models import vgg16

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=16)
p.add_argument("--image-size", type=int, default=512)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--max-entries", type=int, default=100000)
args = p.parse_args()


class ConvLayer(nn.Module):
    def __init__(self, cin, cout, k, stride):
        super().__init__()
        self.pad = nn.ReflectionPad2d(k // 2)
        self.conv = nn.Conv2d(cin, cout, k, stride)

    def forward(self, x):
        return self.conv(self.pad(x))


class ResidualBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1, self.n1 = ConvLayer(c, c, 3, 1), nn.InstanceNorm2d(c, affine=True)
        self.c2, self.n2 = ConvLayer(c, c, 3, 1), nn.InstanceNorm2d(c, affine=True)

    def forward(self, x):
        return x + self.n2(self.c2(torch.relu(self.n1(self.c1(x)))))


class UpsampleConvLayer(nn.Module):
    def __init__(self, cin, cout, k, stride, upsample=None):
        super().__init__()
        self.upsample = upsample
        self.conv = ConvLayer(cin, cout, k, stride)

    def forward(self, x):
        if self.upsample:
            x = nn.functional.interpolate(x, mode="nearest", scale_factor=self.upsample)
        return self.conv(x)


class TransformerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(ConvLayer(3, 32, 9, 1), nn.InstanceNorm2d(32, affine=True), nn.ReLU(),
                                  ConvLayer(32, 64, 3, 2), nn.InstanceNorm2d(64, affine=True), nn.ReLU(),
                                  ConvLayer(64, 128, 3, 2), nn.InstanceNorm2d(128, affine=True), nn.ReLU())
        self.res = nn.Sequential(*[ResidualBlock(128) for _ in range(5)])
        self.up = nn.Sequential(UpsampleConvLayer(128, 64, 3, 1, 2), nn.InstanceNorm2d(64, affine=True), nn.ReLU(),
                                UpsampleConvLayer(64, 32, 3, 1, 2), nn.InstanceNorm2d(32, affine=True), nn.ReLU(),
                                ConvLayer(32, 3, 9, 1))

    def forward(self, x):
        return self.up(self.res(self.down(x)))


class Vgg16(nn.Module):  # the example's: relu1_2, relu2_2, relu3_3, relu4_3
    def __init__(self):
        super().__init__()
        features = vgg16(weights=None).features
        self.slices = nn.ModuleList([features[:4], features[4:9], features[9:16], features[16:23]])
        for param in self.parameters():
            param.requires_grad = False

    def forward(self, x):
        out = []
        for s in self.slices:
            x = s(x)
            out.append(x)
        return out


def gram_matrix(y):
    b, ch, h, w = y.size()
    features = y.view(b, ch, w * h)
    return features.bmm(features.transpose(1, 2)) / (ch * h * w)


device = torch.device("cuda")
transformer, vgg = TransformerNet().to(device), Vgg16().to(device)
optimizer = torch.optim.Adam(transformer.parameters(), 1e-3)
mse = nn.MSELoss()
style = torch.rand(1, 3, args.image_size, args.image_size, device=device)
gram_style = [gram_matrix(y) for y in vgg(style)]
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
try:
    for step in range(args.steps):
        x = torch.rand(args.batch, 3, args.image_size, args.image_size).to(device)
        optimizer.zero_grad()
        y = transformer(x)
        features_y, features_x = vgg(y), vgg(x)
        content_loss = 1e5 * mse(features_y[1], features_x[1])
        style_loss = 0.0
        for ft_y, gm_s in zip(features_y, gram_style):
            style_loss += mse(gram_matrix(ft_y), gm_s[:len(x)].expand(len(x), -1, -1))
        total = content_loss + 1e10 * style_loss
        total.backward()
        optimizer.step()
        print(f"step {step} content {content_loss.item():.2f} style {style_loss.item():.4f}", flush=True)
except torch.OutOfMemoryError:
    torch.cuda.memory._dump_snapshot("oom_snapshot.pickle")
    raise
