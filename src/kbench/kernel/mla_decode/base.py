"""mla_decode base: the PyTorch path in the plan's dtype (batched matmuls and a softmax), the library baseline. A
paged cache is gathered into [b, t, d + p] first and a ragged batch masked per sequence, as part of what is timed."""

from __future__ import annotations

from typing import Any, ClassVar

from kbench.plan.base import Config, Launch, Stage

from ._common import MlaDecode, Workspace


class MlaDecodeTorch(MlaDecode):
    """scores = [q_nope, q_pe] @ kv^T, causal mask, softmax (fp32), out = P @ kv[:, :d]: torch bmm + softmax."""

    SERVES: ClassVar[bool] = True

    def stages(self) -> list[Stage]:
        return [self.attention_stage(self._build, [{}], [""])]

    def _build(self, ws: Workspace, cfg: Config) -> Launch:
        import torch

        b, s, t, h, d = self.b, self.s, self.t, self.h, self.d
        q = torch.cat([ws.q_nope, ws.q_pe], dim=-1).reshape(b, s * h, d + self.p)  # rows: token-major
        dev = ws.kv.device
        pos = torch.arange(t, device=dev)
        lens = torch.tensor(self.lens() if self.t_min else [t], device=dev)[:, None]  # [b or 1, 1]
        limit = lens - s + torch.arange(s, device=dev).repeat_interleave(h)[None, :]  # [b, s*h]: per row
        masked = pos[None, None, :] > limit[:, :, None]  # [b or 1, s*h, t]
        out = ws.out.view(b, s * h, d)
        pool = ws.kv.view(-1, d + self.p)
        rows = None  # a paged cache's pool rows of each sequence's t positions (past its length: any, masked)
        if self.page:
            table = ws.table.long().clamp(min=0)  # type: ignore[attr-defined]
            block = (pos // self.page).clamp(max=table.shape[1] - 1)
            rows = (table[:, block] * self.page + pos % self.page).view(-1)

        def run() -> Any:
            kv = ws.kv if rows is None else pool[rows].view(b, t, d + self.p)
            scores = torch.bmm(q, kv.transpose(1, 2)).float() * self.scale
            scores.masked_fill_(masked, float("-inf"))
            probs = scores.softmax(dim=-1).to(q.dtype)
            torch.bmm(probs, kv[..., :d], out=out)

        return Launch(run)


PLAN = MlaDecodeTorch
