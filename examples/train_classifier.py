#!/usr/bin/python3
"""A minimal training script in the style of pytorch/examples/imagenet.

    python3 examples/train_classifier.py <imagefolder-dir>            # torchvision
    python3 examples/train_classifier.py <pack> --ufspack             # ufspack
    python3 examples/train_classifier.py <pack> --ufspack --fast-transforms exact   # or on

The two runs differ only in the three marked lines that build the datasets;
with the same seed they see the same samples, labels and tensors, so they
print the same losses.  --fast-transforms runs the transforms natively
(MyImageFolder's fast_transforms=): "exact" gives the same tensors, so the
same losses; "on" also lets JPEGs be downscaled in the DCT, close to
torchvision's pixels but not equal (docs/transforms.md).

With --val <dir or pack> each epoch ends with the validation loss and
accuracy, on the centre crop (Resize + CenterCrop) of every sample.

--sampler block (with --ufspack) reads the training pack block by block with
ufspack.BlockSampler (--block-bytes, --window) instead of shuffle=True: the
same epochs, a different order (bench/train_parity.sh compares the two).
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision import datasets, transforms

import ufspack  # (1) the import

FAST_TRANSFORMS = {"off": False, "exact": "exact", "on": True}


def make_dataset(args, path, transform):
    if args.ufspack:
        fast = FAST_TRANSFORMS[args.fast_transforms]
        return ufspack.MyImageFolder(path, transform, fast_transforms=fast)  # (2) the dataset
    return datasets.ImageFolder(path, transform)  # (3) was this line


def make_model(arch, classes):
    if arch == "tiny":
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                             nn.Flatten(), nn.Linear(8 * 16, classes))
    layers, c = [], 3
    for width in (16, 32, 64, 128):  # "cnn": four conv-BN-ReLU-pool blocks
        layers += [nn.Conv2d(c, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2)]
        c = width
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(c, classes))


def evaluate(model, loader):
    model.eval()
    loss, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for images, target in loader:
            out = model(images)
            loss += F.cross_entropy(out, target, reduction="sum").item()
            correct += (out.argmax(1) == target).sum().item()
            n += len(target)
    model.train()
    return loss / n, correct / n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", help="ImageFolder directory, or a pack with --ufspack")
    ap.add_argument("--ufspack", action="store_true", help="read a pack with ufspack.MyImageFolder")
    ap.add_argument("--fast-transforms", choices=sorted(FAST_TRANSFORMS), default="off",
                    help="with --ufspack: MyImageFolder's fast_transforms (off: False, exact, on: True)")
    ap.add_argument("--val", help="validation ImageFolder directory (or pack with --ufspack): evaluate each epoch")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", type=int, default=32, help="crop size")
    ap.add_argument("--arch", choices=["tiny", "cnn"], default="tiny")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--sampler", choices=["random", "block"], default="random")
    ap.add_argument("--block-bytes", type=int, default=8 << 20)
    ap.add_argument("--window", type=int, default=16)
    args = ap.parse_args()
    if args.fast_transforms != "off" and not args.ufspack:
        ap.error("--fast-transforms needs --ufspack")
    if args.sampler == "block" and not args.ufspack:
        ap.error("--sampler block needs --ufspack")

    torch.manual_seed(args.seed)
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    transform = transforms.Compose([
        transforms.RandomResizedCrop(args.size, scale=(0.5, 1.0)),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        normalize,
    ])
    train_dataset = make_dataset(args, args.data, transform)
    sampler = None
    if args.sampler == "block":
        sampler = ufspack.BlockSampler(train_dataset, block_bytes=args.block_bytes, window=args.window,
                                       seed=args.seed, batch_size=args.batch_size,
                                       num_workers=args.workers)
    loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, shuffle=sampler is None, sampler=sampler,
        num_workers=args.workers, generator=torch.Generator().manual_seed(args.seed))
    val_loader = None
    if args.val:
        val_transform = transforms.Compose([
            transforms.Resize(args.size * 256 // 224),
            transforms.CenterCrop(args.size),
            transforms.ToTensor(),
            normalize,
        ])
        val_loader = torch.utils.data.DataLoader(
            make_dataset(args, args.val, val_transform), batch_size=100, num_workers=args.workers)

    model = make_model(args.arch, len(train_dataset.classes))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    print(f"{len(train_dataset)} samples, classes {train_dataset.classes}")
    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        total, steps = 0.0, 0
        for step, (images, target) in enumerate(loader):
            loss = F.cross_entropy(model(images), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, steps = total + loss.item(), steps + 1
            print(f"epoch {epoch} step {step} loss {loss.item():.6f}")
        if val_loader is not None:
            val_loss, val_acc = evaluate(model, val_loader)
            print(f"epoch {epoch} train_loss {total / steps:.6f} val_loss {val_loss:.6f} val_acc {val_acc:.4f}")


if __name__ == "__main__":
    main()
