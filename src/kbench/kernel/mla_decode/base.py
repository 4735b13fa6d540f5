"""mla_decode base: the PyTorch path in the plan's dtype (batched matmuls and a softmax), the library baseline."""

from __future__ import annotations

from typing import Any

from kbench.plan.base import Config, Launch, Stage

from ._common import MlaDecode, Workspace


class MlaDecodeTorch(MlaDecode):
    """scores = [q_nope, q_pe] @ kv^T, causal mask, softmax (fp32), out = P @ kv[:, :d]: torch bmm + softmax."""

    def stages(self) -> list[Stage]:
        return [self.attention_stage(self._build, [{}], [""])]

    def _build(self, ws: Workspace, cfg: Config) -> Launch:
        import torch

        b, s, t, h, d = self.b, self.s, self.t, self.h, self.d
        q = torch.cat([ws.q_nope, ws.q_pe], dim=-1).reshape(b, s * h, d + self.p)  # rows: token-major
        kv_t = ws.kv.transpose(1, 2)  # [b, d+p, t]
        values = ws.kv[..., :d]
        pos = torch.arange(t, device=ws.kv.device)
        limit = (t - s + torch.arange(s, device=ws.kv.device)).repeat_interleave(h)  # per row
        masked = pos[None, :] > limit[:, None]  # [s*h, t]
        out = ws.out.view(b, s * h, d)

        def run() -> Any:
            scores = torch.bmm(q, kv_t).float() * self.scale
            scores.masked_fill_(masked, float("-inf"))
            probs = scores.softmax(dim=-1).to(q.dtype)
            torch.bmm(probs, values, out=out)

        return Launch(run)


PLAN = MlaDecodeTorch
