"""The same network in PyTorch, from the same initial weights, for the step-by-step comparison.

A twin of any network course.py builds (``cfg.layers()``: convolution -> batch norm -> ReLU, with
or without 2x2 average pooling, then the linear head and its loss, or a given gradient of the last
block's output). Its training step is timed as the course's is: the wall time of the whole step
(the batch in, the loss out, as ``CourseNet.train_step``), and on a GPU the device's time from the
step's first kernel to its last (CUDA events recorded after the batch's upload and before the
loss's read, as the course's profiling events span its step's kernels).
"""
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
    """The network with torch.nn.functional ops and torch.optim.SGD (the same update)."""

    def __init__(self, cfg, params: dict, device: str = "cpu"):
        import torch
        self.torch, self.cfg, self.device = torch, cfg, device
        self.layers = cfg.layers()
        if device != "cpu":      # float32 convolutions and matmuls, not TF32 (PyTorch allows TF32 in cuDNN by default)
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.benchmark = True     # cuDNN's autotuner, as the course's chooser
        # IOHW (C, K, R, S) -> PyTorch's OIHW (K, C, R, S)
        conv = {name: np.ascontiguousarray(v.transpose(1, 0, 2, 3)) if name.startswith("w") else v
                for name, v in params.items()}
        self.p = {k: torch.tensor(v, device=device, requires_grad=True) for k, v in conv.items()}
        self.opt = torch.optim.SGD(list(self.p.values()), lr=cfg.lr, momentum=cfg.momentum)
        self.step_device_ms = []          # per step, CUDA events (GPU only)

    def forward(self, x):
        """The logits (with a head), else the last block's output."""
        F, p = self.torch.nn.functional, self.p
        a = x
        for i, layer in enumerate(self.layers, 1):
            a = F.conv2d(a, p[f"w{i}"], stride=layer["stride"], padding=1)
            a = F.batch_norm(a, None, None, p[f"gamma{i}"], p[f"beta{i}"], training=True, eps=model.EPS)
            a = F.relu(a, inplace=True)
            if layer["pool"]:
                a = F.avg_pool2d(a, 2)
        return F.linear(a.flatten(1), p["fc_w"], p["fc_b"]) if self.cfg.head else a

    logits = forward

    def _sync(self):
        if self.device != "cpu":
            self.torch.cuda.synchronize()

    def _events(self):
        if self.device == "cpu":
            return None
        return [self.torch.cuda.Event(enable_timing=True) for _ in range(2)]

    def step(self, x: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
        """One SGD step, the batch's upload and the loss's read included: (loss before the update,
        milliseconds of wall time for the step)."""
        torch = self.torch
        self._sync()
        t0 = time.perf_counter()
        xt = torch.from_numpy(x).to(self.device)
        yt = torch.from_numpy(labels).to(self.device)
        marks = self._events()
        if marks:
            marks[0].record()
        self.opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.forward(xt), yt)
        loss.backward()
        self.opt.step()
        if marks:
            marks[1].record()
        value = loss.item()                # the loss on the host: the step's wait for the device
        ms = (time.perf_counter() - t0) * 1e3
        if marks:
            self.step_device_ms.append(marks[0].elapsed_time(marks[1]))
        return value, ms

    def step_from_gradient(self, x, grad_output) -> None:
        """Without a head: one SGD step from a given gradient of the last block's output (device
        tensors; x requires its gradient when the course computes the input's, cfg.input_grad)."""
        self.opt.zero_grad()
        x.grad = None
        self.forward(x).backward(grad_output)
        self.opt.step()

    def gradients(self, x: np.ndarray, labels: np.ndarray) -> dict:
        """Gradients of one batch (no update), in the course's layouts (IOHW convolutions)."""
        torch = self.torch
        self.opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.forward(torch.from_numpy(x).to(self.device)),
                                                 torch.from_numpy(labels).to(self.device))
        loss.backward()
        return self.host_gradients()

    def host_gradients(self) -> dict:
        """The parameters' gradients as NumPy arrays, convolutions in IOHW."""
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
                z = self.forward(torch.from_numpy(x[s:s + b]).to(self.device)).cpu().numpy()
                right += int((z.argmax(axis=1) == labels[s:s + b]).sum())
                seen += b
        return right / seen
