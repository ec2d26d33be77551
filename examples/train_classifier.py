#!/usr/bin/python3
"""A minimal training script in the style of pytorch/examples/imagenet.

    python3 examples/train_classifier.py <imagefolder-dir>            # torchvision
    python3 examples/train_classifier.py <pack> --ufspack             # ufspack

The two runs differ only in the three marked lines that build the dataset;
with the same seed they see the same samples, labels and tensors, so they
print the same losses.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision import datasets, transforms

import ufspack  # (1) the import


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", help="ImageFolder directory, or a pack with --ufspack")
    ap.add_argument("--ufspack", action="store_true", help="read a pack with ufspack.MyImageFolder")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    transform = transforms.Compose([
        transforms.RandomResizedCrop(32, scale=(0.5, 1.0)),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    if args.ufspack:
        train_dataset = ufspack.MyImageFolder(args.data, transform)  # (2) the dataset
    else:
        train_dataset = datasets.ImageFolder(args.data, transform)  # (3) was this line
    loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
        generator=torch.Generator().manual_seed(args.seed))

    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                          nn.Flatten(), nn.Linear(8 * 16, len(train_dataset.classes)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    print(f"{len(train_dataset)} samples, classes {train_dataset.classes}")
    for epoch in range(args.epochs):
        for step, (images, target) in enumerate(loader):
            loss = F.cross_entropy(model(images), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(f"epoch {epoch} step {step} loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
