"""Train a small CNN on scikit-learn's bundled 8x8 digits and export it.

Writes (next to this file):
  digits_cnn.onnx    torch.onnx.export (legacy TorchScript exporter), opset 17,
                     input `input` [1,1,8,8] float32, output `probs` [1,10]
  digits_cnn.pt2     torch.export.export + torch.export.save, same I/O
  digits_cnn.npz     x float32 [N,1,8,8], y int64 [N]   (held-out test split)
                     calib float32 [64,1,8,8]          (first 64 training images)

Run with the default python (torch, onnx, onnxruntime, scikit-learn).
"""
import os
import random
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _digits_data import N_CALIB, load_split  # noqa: E402

SEED = 0
EPOCHS = 15
BATCH = 32
LR = 2e-3


class DigitsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(16 * 4 * 4, 64)
        self.relu3 = nn.ReLU()
        self.fc2 = nn.Linear(64, 10)
        self.softmax = nn.Softmax(dim=1)

    def logits(self, x):
        x = self.relu1(self.conv1(x))
        x = self.relu2(self.conv2(x))
        x = self.flatten(self.pool(x))
        x = self.relu3(self.fc1(x))
        return self.fc2(x)

    def forward(self, input):  # noqa: A002 - named `input` so torch.export's user input matches the ONNX one
        return self.softmax(self.logits(input))


def set_determinism():
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)


def train(model, x_tr, y_tr):
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    loss_fn = nn.CrossEntropyLoss()
    xt = torch.from_numpy(x_tr[:, None])
    yt = torch.from_numpy(y_tr)
    gen = torch.Generator().manual_seed(SEED)
    model.train()
    for epoch in range(EPOCHS):
        perm = torch.randperm(len(xt), generator=gen)
        total = 0.0
        for i in range(0, len(xt), BATCH):
            idx = perm[i:i + BATCH]
            opt.zero_grad()
            loss = loss_fn(model.logits(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        print(f"  epoch {epoch + 1:2d}/{EPOCHS} loss {total / len(xt):.4f}")
    model.eval()


def main():
    set_determinism()
    x_tr, x_te, y_tr, y_te = load_split()
    print(f"digits split: train {len(x_tr)}, test {len(x_te)}")

    model = DigitsCNN()
    train(model, x_tr, y_tr)
    with torch.no_grad():
        torch_acc = float((model(torch.from_numpy(x_te[:, None])).argmax(1).numpy() == y_te).mean())
    print(f"torch test accuracy: {torch_acc:.4f}")

    example = (torch.zeros(1, 1, 8, 8, dtype=torch.float32),)

    onnx_path = HERE / "digits_cnn.onnx"
    # Legacy TorchScript exporter: keeps module-scoped node names like /conv1/Conv.
    # (The default dynamo exporter in torch 2.13 needs `onnxscript`.)
    torch.onnx.export(
        model, example, str(onnx_path),
        dynamo=False,
        opset_version=17,
        input_names=["input"],
        output_names=["probs"],
        do_constant_folding=True,
    )

    pt2_path = HERE / "digits_cnn.pt2"
    ep = torch.export.export(model, example)
    torch.export.save(ep, str(pt2_path))

    # npukit's data sidecar (<model stem>.npz): x = held-out test split, y = labels,
    # calib = the first training images (for activation ranges)
    test_path = HERE / "digits_cnn.npz"
    np.savez(test_path, x=x_te[:, None].astype(np.float32), y=y_te.astype(np.int64),
             calib=x_tr[:N_CALIB, None].astype(np.float32))

    # Accuracy measured on the exported ONNX file with onnxruntime, batch 1.
    import onnx
    import onnxruntime as ort
    m = onnx.load(str(onnx_path))
    onnx.checker.check_model(m)
    ops = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    preds = np.array([int(np.argmax(sess.run(None, {"input": x_te[i][None, None]})[0]))
                      for i in range(len(x_te))])
    onnx_acc = float((preds == y_te).mean())

    for p in (onnx_path, pt2_path, test_path):
        print(f"wrote {p.name} ({p.stat().st_size} bytes)")
    print(f"onnx nodes: {len(m.graph.node)} {ops}")
    print(f"onnx node names: {[n.name for n in m.graph.node]}")
    print(f"onnxruntime test accuracy (digits_cnn.onnx): {onnx_acc:.4f} ({int((preds == y_te).sum())}/{len(y_te)})")
    if onnx_acc < 0.95:
        raise SystemExit("accuracy below 0.95")


if __name__ == "__main__":
    main()
