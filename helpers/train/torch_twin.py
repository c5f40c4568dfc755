"""The same network in PyTorch, from the same initial weights, for the step-by-step comparison."""
from __future__ import annotations

import time

import numpy as np

from . import model


def available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


class TorchNet:
    """model.py's network with torch.nn.functional ops and torch.optim.SGD (the same update)."""

    def __init__(self, cfg: model.Config, params: dict, device: str = "cpu"):
        import torch
        self.torch, self.cfg, self.device = torch, cfg, device
        if device != "cpu":      # float32 convolutions and matmuls, not TF32 (PyTorch allows TF32 in cuDNN by default)
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
        # IOHW (C, K, R, S) -> PyTorch's OIHW (K, C, R, S)
        conv = {name: np.ascontiguousarray(v.transpose(1, 0, 2, 3)) if name.startswith("w") else v
                for name, v in params.items()}
        self.p = {k: torch.tensor(v, device=device, requires_grad=True) for k, v in conv.items()}
        self.opt = torch.optim.SGD(list(self.p.values()), lr=cfg.lr, momentum=cfg.momentum)

    def logits(self, x):
        F, p = self.torch.nn.functional, self.p
        a = x
        for i in (1, 2):
            a = F.conv2d(a, p[f"w{i}"], padding=1)
            a = F.batch_norm(a, None, None, p[f"gamma{i}"], p[f"beta{i}"], training=True, eps=model.EPS)
            a = F.avg_pool2d(F.relu(a), 2)
        return F.linear(a.flatten(1), p["fc_w"], p["fc_b"])

    def _sync(self):
        if self.device != "cpu":
            self.torch.cuda.synchronize()

    def step(self, x: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
        """One SGD step: (loss before the update, milliseconds of wall time for the step)."""
        torch = self.torch
        xt = torch.from_numpy(x).to(self.device)
        yt = torch.from_numpy(labels).to(self.device)
        self._sync()
        t0 = time.perf_counter()
        self.opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.logits(xt), yt)
        loss.backward()
        self.opt.step()
        self._sync()
        return float(loss.detach()), (time.perf_counter() - t0) * 1e3

    def gradients(self, x: np.ndarray, labels: np.ndarray) -> dict:
        """Gradients of one batch (no update), in the course's layouts (IOHW convolutions)."""
        torch = self.torch
        self.opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.logits(torch.from_numpy(x).to(self.device)),
                                                 torch.from_numpy(labels).to(self.device))
        loss.backward()
        out = {}
        for k, v in self.p.items():
            g = v.grad.detach().cpu().numpy()
            out[k] = np.ascontiguousarray(g.transpose(1, 0, 2, 3)) if k.startswith("w") else g
        return out

    def evaluate(self, x: np.ndarray, labels: np.ndarray) -> float:
        """Accuracy over full batches, batch norm with each batch's statistics (as the course)."""
        torch, b, right, seen = self.torch, self.cfg.batch, 0, 0
        with torch.no_grad():
            for s in range(0, len(labels) - b + 1, b):
                z = self.logits(torch.from_numpy(x[s:s + b]).to(self.device)).cpu().numpy()
                right += int((z.argmax(axis=1) == labels[s:s + b]).sum())
                seen += b
        return right / seen
