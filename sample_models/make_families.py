"""Small PyTorch re-implementations of the distinctive structures of well-known vision networks,
exported to ONNX and to .pt2, for importer tests without downloads (torchvision is not needed).

Written here from the papers' descriptions, reduced in width and depth, with seeded random weights
(untrained).  Each keeps what makes its family hard for an importer:

  resnet        basic blocks, a strided 1x1-conv downsample branch, BatchNorm, max pool
  mobilenet_v2  inverted residuals: 1x1 expand, depthwise 3x3, 1x1 project, ReLU6
  mobilenet_v3  hardswish, squeeze-and-excitation with hardsigmoid
  efficientnet  MBConv with SiLU and a sigmoid squeeze-and-excitation
  regnet        grouped 3x3 convolutions (X block)
  shufflenet    channel shuffle (reshape / transpose / reshape of computed sizes), chunk into halves
  swin          window partition / reverse computed from ``x.shape``, shifted windows (``torch.roll``),
                an attention mask, a relative-position bias gathered from a table, patch merging
  vit           patch-embedding conv, a class token concatenated per batch, position embedding,
                ``nn.MultiheadAttention``

    python make_families.py            # writes families/<name>.onnx and families/<name>.pt2

The ONNX files come from the legacy TorchScript exporter (``dynamo=False``, opset 17): it writes the
Shape / Gather / Concat chains torch models compute their reshapes with.  The default dynamo
exporter needs ``onnxscript``, which is not installed here.  Deterministic: same bytes every run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

SEED = 0
HERE = Path(__file__).resolve().parent
OUT = HERE / "families"


def bn(c):
    return nn.BatchNorm2d(c)


# ---------------------------------------------------------------------------------------------
# ResNet


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = bn(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = bn(cout)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), bn(cout))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + idt)


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), bn(8), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.layer1 = BasicBlock(8, 8)
        self.layer2 = BasicBlock(8, 16, 2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


# ---------------------------------------------------------------------------------------------
# MobileNet v2 / v3, EfficientNet


class SqueezeExcite(nn.Module):
    def __init__(self, c, squeeze, act, gate):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1)
        self.act, self.gate = act, gate

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.act(self.fc1(s))))


class InvertedResidual(nn.Module):
    """MobileNet v2 (ReLU6), v3 (hardswish + SE/hardsigmoid) and EfficientNet's MBConv (SiLU + SE/sigmoid)."""

    def __init__(self, cin, cout, stride, expand, act, se=None):
        super().__init__()
        mid = cin * expand
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(cin, mid, 1, bias=False), bn(mid), act()]
        layers += [nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), bn(mid), act()]
        if se is not None:
            layers.append(se(mid))
        layers += [nn.Conv2d(mid, cout, 1, bias=False), bn(cout)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.residual else y


class MobileNet(nn.Module):
    def __init__(self, act, se=None):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), bn(8), act())
        self.blocks = nn.Sequential(
            InvertedResidual(8, 8, 1, 1, act, se), InvertedResidual(8, 12, 2, 4, act, se),
            InvertedResidual(12, 12, 1, 4, act, se), InvertedResidual(12, 16, 2, 4, act, se),
        )  # fmt: skip
        self.head = nn.Sequential(nn.Conv2d(16, 32, 1, bias=False), bn(32), act())
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def mobilenet_v2():
    return MobileNet(nn.ReLU6)


def mobilenet_v3():
    return MobileNet(nn.Hardswish, lambda c: SqueezeExcite(c, max(4, c // 4), nn.ReLU(), nn.Hardsigmoid()))


def efficientnet():
    return MobileNet(nn.SiLU, lambda c: SqueezeExcite(c, max(4, c // 4), nn.SiLU(), nn.Sigmoid()))


# ---------------------------------------------------------------------------------------------
# RegNet (X blocks: grouped 3x3)


class XBlock(nn.Module):
    def __init__(self, cin, cout, stride, group_width=4):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), bn(cout), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(cout, cout, 3, stride, 1, groups=cout // group_width, bias=False), bn(cout),
                               nn.ReLU())  # fmt: skip
        self.c = nn.Sequential(nn.Conv2d(cout, cout, 1, bias=False), bn(cout))
        self.proj = None if stride == 1 and cin == cout else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                                           bn(cout))  # fmt: skip

    def forward(self, x):
        idt = x if self.proj is None else self.proj(x)
        return nn.functional.relu(self.c(self.b(self.a(x))) + idt)


class RegNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), bn(8), nn.ReLU())
        self.s1 = XBlock(8, 16, 2)
        self.s2 = XBlock(16, 16, 1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.s2(self.s1(self.stem(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


# ---------------------------------------------------------------------------------------------
# ShuffleNet v2


def channel_shuffle(x, groups: int):
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, -1, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        half = cout // 2
        self.stride = stride
        if stride > 1:
            self.branch1 = nn.Sequential(nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), bn(cin),
                                         nn.Conv2d(cin, half, 1, bias=False), bn(half), nn.ReLU())  # fmt: skip
        bin_ = cin if stride > 1 else half
        self.branch2 = nn.Sequential(
            nn.Conv2d(bin_, half, 1, bias=False), bn(half), nn.ReLU(),
            nn.Conv2d(half, half, 3, stride, 1, groups=half, bias=False), bn(half),
            nn.Conv2d(half, half, 1, bias=False), bn(half), nn.ReLU(),
        )  # fmt: skip

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), bn(8), nn.ReLU())
        self.units = nn.Sequential(ShuffleUnit(8, 16, 2), ShuffleUnit(16, 16, 1), ShuffleUnit(16, 16, 1))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.units(self.stem(x))
        return self.fc(x.mean([2, 3]))


# ---------------------------------------------------------------------------------------------
# Swin


def window_partition(x, ws: int):
    b, h, w, c = x.shape
    x = x.view(b, h // ws, ws, w // ws, ws, c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)


def window_reverse(windows, ws: int, h: int, w: int):
    c = windows.shape[-1]
    b = windows.shape[0] // ((h // ws) * (w // ws))
    x = windows.view(b, h // ws, w // ws, ws, ws, c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)


class WindowAttention(nn.Module):
    def __init__(self, dim, heads, ws):
        super().__init__()
        self.heads, self.ws, self.scale = heads, ws, (dim // heads) ** -0.5
        self.qkv, self.proj = nn.Linear(dim, dim * 3), nn.Linear(dim, dim)
        self.bias_table = nn.Parameter(torch.randn((2 * ws - 1) ** 2, heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (ws - 1)
        self.register_buffer("rel_index", (rel[..., 0] * (2 * ws - 1) + rel[..., 1]).flatten(), persistent=False)

    def forward(self, x, mask=None):
        bw, n, c = x.shape
        qkv = self.qkv(x).reshape(bw, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q * self.scale) @ k.transpose(-2, -1)
        bias = self.bias_table[self.rel_index].view(n, n, -1).permute(2, 0, 1)
        attn = attn + bias.unsqueeze(0)
        if mask is not None:
            nw = mask.shape[0]
            attn = attn.view(bw // nw, nw, self.heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.heads, n, n)
        attn = attn.softmax(-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(bw, n, c))


class SwinBlock(nn.Module):
    def __init__(self, dim, heads, ws, shift, res):
        super().__init__()
        self.ws, self.shift = ws, shift
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, heads, ws)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * 2), nn.GELU(), nn.Linear(dim * 2, dim))
        mask = None
        if shift:
            img = torch.zeros(1, res, res, 1)
            cnt = 0
            for hs in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                for wsl in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                    img[:, hs, wsl, :] = cnt
                    cnt += 1
            mw = window_partition(img, ws).squeeze(-1)
            mask = mw.unsqueeze(1) - mw.unsqueeze(2)
            mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        b, h, w, c = x.shape
        y = self.norm1(x)
        if self.shift:
            y = torch.roll(y, shifts=(-self.shift, -self.shift), dims=(1, 2))
        y = window_reverse(self.attn(window_partition(y, self.ws), self.mask), self.ws, h, w)
        if self.shift:
            y = torch.roll(y, shifts=(self.shift, self.shift), dims=(1, 2))
        x = x + y
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm, self.reduction = nn.LayerNorm(4 * dim), nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x):
        x0, x1, x2, x3 = x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]
        return self.reduction(self.norm(torch.cat([x0, x1, x2, x3], -1)))


class Swin(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 16, 2, 2)
        self.norm0 = nn.LayerNorm(16)
        self.stage1 = nn.Sequential(SwinBlock(16, 2, 4, 0, 16), SwinBlock(16, 2, 4, 2, 16))
        self.merge = PatchMerging(16)
        self.stage2 = nn.Sequential(SwinBlock(32, 4, 4, 0, 8), SwinBlock(32, 4, 4, 2, 8))
        self.norm, self.head = nn.LayerNorm(32), nn.Linear(32, 10)

    def forward(self, x):
        x = self.norm0(self.patch(x).permute(0, 2, 3, 1))
        x = self.stage2(self.merge(self.stage1(x)))
        return self.head(self.norm(x).mean([1, 2]))


# ---------------------------------------------------------------------------------------------
# ViT


class EncoderLayer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * 2), nn.GELU(), nn.Linear(dim * 2, dim))

    def forward(self, x):
        y = self.ln1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    def __init__(self, dim=32, patch=8, size=32):
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (size // patch) ** 2 + 1, dim) * 0.02)
        self.layers = nn.Sequential(EncoderLayer(dim, 4), EncoderLayer(dim, 4))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, 10)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.layers(x)
        return self.head(self.ln(x[:, 0]))


FAMILIES = {
    "resnet": ResNet, "mobilenet_v2": mobilenet_v2, "mobilenet_v3": mobilenet_v3, "efficientnet": efficientnet,
    "regnet": RegNet, "shufflenet": ShuffleNet, "swin": Swin, "vit": ViT,
}  # fmt: skip
INPUT = (1, 3, 32, 32)


def build(name: str) -> nn.Module:
    torch.manual_seed(SEED)
    model = FAMILIES[name]()
    with torch.no_grad():  # BatchNorm statistics that are not all the identity
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    return model.eval()


def example() -> torch.Tensor:
    return torch.randn(*INPUT, generator=torch.Generator().manual_seed(SEED))


def export(name: str, out: Path = OUT) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    model, x = build(name), example()
    onnx_path, pt2_path = out / f"{name}.onnx", out / f"{name}.pt2"
    torch.onnx.export(model, (x,), str(onnx_path), opset_version=17, dynamo=False, input_names=["image"],
                      output_names=["logits"])  # fmt: skip
    ep = torch.export.export(model, (x,))
    torch.export.save(ep, str(pt2_path))
    return onnx_path, pt2_path


def main(argv: list[str]) -> int:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for name in argv or list(FAMILIES):
        onnx_path, pt2_path = export(name)
        print(f"{name}: {onnx_path.stat().st_size:,} B onnx, {pt2_path.stat().st_size:,} B pt2")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
