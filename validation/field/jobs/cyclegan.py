"""CycleGAN as junyanz/pytorch-CycleGAN-and-pix2pix trains it (train.py, models/cycle_gan_model.py, networks.py):
two ResnetGenerators (reflection padding, 7x7 conv, 2 stride-2 downsamplings, --n-blocks residual blocks, 2
ConvTranspose2d upsamplings, tanh; 'instance' norm: InstanceNorm2d without affine or running stats) and two
PatchGAN NLayerDiscriminators (n_layers 3), normal(0, 0.02) init, the LSGAN loss (MSELoss against a real/fake label
expanded like the prediction), cycle L1 x lambda 10 and identity L1 x 0.5 x lambda per direction, one Adam(2e-4,
(0.5, 0.999)) for both generators and one for both discriminators, the discriminators frozen by set_requires_grad
through the generator step, and cudnn.benchmark as its BaseModel sets it. Each discriminator sees fakes from an
ImagePool of --pool-size images that, as the repository's does, keeps past generated images on the GPU (views of
whole generated batches, in a Python list). fp32, unaligned random images in [-1, 1] made on the CPU (seeded) and
moved to the GPU per iteration. History from just before the loop; the snapshot is dumped by the OOM observer.
"""
import argparse, itertools, random
import torch, torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=4)
p.add_argument("--size", type=int, default=256)
p.add_argument("--ngf", type=int, default=64)
p.add_argument("--ndf", type=int, default=64)
p.add_argument("--n-blocks", type=int, default=9)
p.add_argument("--pool-size", type=int, default=50)
p.add_argument("--iters", type=int, default=12)
p.add_argument("--max-entries", type=int, default=200000)
args = p.parse_args()

random.seed(0)
torch.manual_seed(0)
torch.backends.cudnn.benchmark = True
device = torch.device("cuda")
lambda_A, lambda_B, lambda_idt = 10.0, 10.0, 0.5


def norm_layer(c):
    return nn.InstanceNorm2d(c, affine=False, track_running_stats=False)


class ResnetBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv_block = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3), norm_layer(dim), nn.ReLU(True),
                                        nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3), norm_layer(dim))

    def forward(self, x):
        return x + self.conv_block(x)


class ResnetGenerator(nn.Module):
    def __init__(self, ngf, n_blocks):
        super().__init__()
        model = [nn.ReflectionPad2d(3), nn.Conv2d(3, ngf, 7), norm_layer(ngf), nn.ReLU(True)]
        for i in range(2):
            mult = 2 ** i
            model += [nn.Conv2d(ngf * mult, ngf * mult * 2, 3, stride=2, padding=1), norm_layer(ngf * mult * 2),
                      nn.ReLU(True)]
        model += [ResnetBlock(ngf * 4) for _ in range(n_blocks)]
        for i in range(2):
            mult = 2 ** (2 - i)
            model += [nn.ConvTranspose2d(ngf * mult, ngf * mult // 2, 3, stride=2, padding=1, output_padding=1),
                      norm_layer(ngf * mult // 2), nn.ReLU(True)]
        model += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, 3, 7), nn.Tanh()]
        self.model = nn.Sequential(*model)

    def forward(self, input):
        return self.model(input)


class NLayerDiscriminator(nn.Module):
    def __init__(self, ndf, n_layers=3):
        super().__init__()
        sequence = [nn.Conv2d(3, ndf, 4, stride=2, padding=1), nn.LeakyReLU(0.2, True)]
        nf_mult = 1
        for n in range(1, n_layers + 1):
            nf_mult_prev, nf_mult = nf_mult, min(2 ** n, 8)
            sequence += [nn.Conv2d(ndf * nf_mult_prev, ndf * nf_mult, 4, stride=2 if n < n_layers else 1, padding=1),
                         norm_layer(ndf * nf_mult), nn.LeakyReLU(0.2, True)]
        sequence += [nn.Conv2d(ndf * nf_mult, 1, 4, stride=1, padding=1)]
        self.model = nn.Sequential(*sequence)

    def forward(self, input):
        return self.model(input)


def init_func(m):
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(m.weight.data, 0.0, 0.02)
        nn.init.constant_(m.bias.data, 0.0)


class GANLoss(nn.Module):
    def __init__(self, target_real_label=1.0, target_fake_label=0.0):
        super().__init__()
        self.register_buffer("real_label", torch.tensor(target_real_label))
        self.register_buffer("fake_label", torch.tensor(target_fake_label))
        self.loss = nn.MSELoss()

    def __call__(self, prediction, target_is_real):
        target_tensor = (self.real_label if target_is_real else self.fake_label).expand_as(prediction)
        return self.loss(prediction, target_tensor)


class ImagePool:
    def __init__(self, pool_size):
        self.pool_size, self.num_imgs, self.images = pool_size, 0, []

    def query(self, images):
        if self.pool_size == 0:
            return images
        return_images = []
        for image in images:
            image = torch.unsqueeze(image.data, 0)
            if self.num_imgs < self.pool_size:
                self.num_imgs += 1
                self.images.append(image)
                return_images.append(image)
            elif random.uniform(0, 1) > 0.5:
                random_id = random.randint(0, self.pool_size - 1)
                tmp = self.images[random_id].clone()
                self.images[random_id] = image
                return_images.append(tmp)
            else:
                return_images.append(image)
        return torch.cat(return_images, 0)


class CycleGANModel:
    loss_names = ["D_A", "G_A", "cycle_A", "idt_A", "D_B", "G_B", "cycle_B", "idt_B"]

    def __init__(self):
        self.netG_A = ResnetGenerator(args.ngf, args.n_blocks).to(device)
        self.netG_B = ResnetGenerator(args.ngf, args.n_blocks).to(device)
        self.netD_A = NLayerDiscriminator(args.ndf).to(device)
        self.netD_B = NLayerDiscriminator(args.ndf).to(device)
        for net in (self.netG_A, self.netG_B, self.netD_A, self.netD_B):
            net.apply(init_func)
        self.fake_A_pool, self.fake_B_pool = ImagePool(args.pool_size), ImagePool(args.pool_size)
        self.criterionGAN = GANLoss().to(device)
        self.criterionCycle, self.criterionIdt = nn.L1Loss(), nn.L1Loss()
        self.optimizer_G = torch.optim.Adam(itertools.chain(self.netG_A.parameters(), self.netG_B.parameters()),
                                            lr=2e-4, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(itertools.chain(self.netD_A.parameters(), self.netD_B.parameters()),
                                            lr=2e-4, betas=(0.5, 0.999))

    def set_input(self, input):
        self.real_A = input["A"].to(device)
        self.real_B = input["B"].to(device)

    def forward(self):
        self.fake_B = self.netG_A(self.real_A)
        self.rec_A = self.netG_B(self.fake_B)
        self.fake_A = self.netG_B(self.real_B)
        self.rec_B = self.netG_A(self.fake_A)

    def backward_D_basic(self, netD, real, fake):
        loss_D_real = self.criterionGAN(netD(real), True)
        loss_D_fake = self.criterionGAN(netD(fake.detach()), False)
        loss_D = (loss_D_real + loss_D_fake) * 0.5
        loss_D.backward()
        return loss_D

    def backward_D_A(self):
        fake_B = self.fake_B_pool.query(self.fake_B)
        self.loss_D_A = self.backward_D_basic(self.netD_A, self.real_B, fake_B)

    def backward_D_B(self):
        fake_A = self.fake_A_pool.query(self.fake_A)
        self.loss_D_B = self.backward_D_basic(self.netD_B, self.real_A, fake_A)

    def backward_G(self):
        self.idt_A = self.netG_A(self.real_B)
        self.loss_idt_A = self.criterionIdt(self.idt_A, self.real_B) * lambda_B * lambda_idt
        self.idt_B = self.netG_B(self.real_A)
        self.loss_idt_B = self.criterionIdt(self.idt_B, self.real_A) * lambda_A * lambda_idt
        self.loss_G_A = self.criterionGAN(self.netD_A(self.fake_B), True)
        self.loss_G_B = self.criterionGAN(self.netD_B(self.fake_A), True)
        self.loss_cycle_A = self.criterionCycle(self.rec_A, self.real_A) * lambda_A
        self.loss_cycle_B = self.criterionCycle(self.rec_B, self.real_B) * lambda_B
        self.loss_G = (self.loss_G_A + self.loss_G_B + self.loss_cycle_A + self.loss_cycle_B
                       + self.loss_idt_A + self.loss_idt_B)
        self.loss_G.backward()

    def set_requires_grad(self, nets, requires_grad=False):
        for net in nets:
            for param in net.parameters():
                param.requires_grad = requires_grad

    def optimize_parameters(self):
        self.forward()
        self.set_requires_grad([self.netD_A, self.netD_B], False)
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()
        self.set_requires_grad([self.netD_A, self.netD_B], True)
        self.optimizer_D.zero_grad()
        self.backward_D_A()
        self.backward_D_B()
        self.optimizer_D.step()

    def get_current_losses(self):
        return {name: float(getattr(self, "loss_" + name)) for name in self.loss_names}


model = CycleGANModel()
gen = torch.Generator().manual_seed(1)
torch.cuda.memory._record_memory_history(max_entries=args.max_entries)
torch._C._cuda_attach_out_of_memory_observer(
    lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("oom_snapshot.pickle"))
epoch, epoch_iter = 1, 0
for _ in range(args.iters):
    data = {"A": torch.rand(args.batch, 3, args.size, args.size, generator=gen) * 2 - 1,
            "B": torch.rand(args.batch, 3, args.size, args.size, generator=gen) * 2 - 1}
    epoch_iter += args.batch
    model.set_input(data)
    model.optimize_parameters()
    message = f"(epoch: {epoch}, iters: {epoch_iter}) "
    print(message + " ".join(f"{k}: {v:.3f}" for k, v in model.get_current_losses().items()), flush=True)
