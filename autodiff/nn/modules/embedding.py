"""``Embedding``, as torch.nn: a lookup table drawn from N(0, 1), its ``padding_idx``
row zero."""

from __future__ import annotations

from ... import checks
from .. import init
from ..functional.embedding import _embedding_checked
from .module import Module, factory, parameter, sizes

__all__ = ["Embedding"]


class Embedding(Module):
    """A lookup table: row ``i`` of ``weight`` (num_embeddings, embedding_dim) for index i.

    Initialized from N(0, 1), with the ``padding_idx`` row zero (and never trained).
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, *, xp=None,
                 dtype=None, device=None, generator=None):  # fmt: skip
        super().__init__()
        sizes("Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        xp, dtype, device = factory(xp, dtype, device, "Embedding", generator)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            checks.integer("Embedding", "padding_idx", padding_idx, -num_embeddings,
                           num_embeddings - 1)  # fmt: skip
            padding_idx = int(padding_idx) % num_embeddings
        self.padding_idx = padding_idx
        w = init.normal_(parameter(xp, (num_embeddings, embedding_dim), dtype, device),
                         generator=generator)  # fmt: skip
        if padding_idx is not None:
            from ...engine.grad_mode import no_grad

            with no_grad():
                w[padding_idx, ...] = 0.0
        self.weight = w

    def forward(self, indices):
        return _embedding_checked(indices, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s if self.padding_idx is None else s + f", padding_idx={self.padding_idx}"
