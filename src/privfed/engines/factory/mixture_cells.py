"""The factory job's mixture cells: public anchors per class and the cell's factory.

Kept apart from :mod:`privfed.engines.factory.job` so that the job only
dispatches here: the anchors come from the run's public split
(:func:`public_images`, the one :func:`~privfed.engines.factory.job.public_codec`
fits the codec on), per class, by :func:`~privfed.engines.factory.mixture.public_anchors`.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from privfed.engines.codecs.base import Codec
from privfed.engines.factory.config import FactoryPipelineConfig
from privfed.engines.factory.gaussian import LatentGaussianDP
from privfed.engines.factory.mixture import LatentMixtureFactory, public_anchors, release_plan
from privfed.errors import ParameterError

__all__ = ["class_anchors", "make_mixture_factory", "mixture_cell_plan", "public_images"]


@functools.lru_cache(maxsize=4)
def public_images(
    dataset: str,
    num_classes: int | None,
    public_fraction: float,
    test_fraction: float,
    seed: int,
) -> tuple[torch.Tensor, np.ndarray]:
    """``(images, labels)`` of the run's public split (what the codec and the anchors use)."""
    from privfed.data import load_dataset, split_public_private

    split = split_public_private(
        load_dataset(dataset, num_classes=num_classes),
        public_fraction=public_fraction,
        test_fraction=test_fraction,
        seed=seed,
    )
    return torch.from_numpy(np.array(split.public.images)), np.asarray(split.public.labels)


def class_anchors(config: FactoryPipelineConfig, codec: Codec, class_id: int) -> torch.Tensor:
    """Public anchors of ``class_id``, ``(k, d)`` (the origin if the class has no public image)."""
    public, labels = public_images(
        config.dataset,
        config.num_classes,
        float(config.public_fraction),
        float(config.test_fraction),
        config.seed,
    )
    images = public[torch.from_numpy(labels == int(class_id))]
    if images.shape[0] == 0:
        return torch.zeros((1, int(codec.latent_dim)), dtype=torch.float64)
    return public_anchors(codec, images, config.mixture_components)


def make_mixture_factory(
    config: FactoryPipelineConfig,
    class_id: int,
    client_id: int,
    codec: Codec,
    noise_seed: bytes | None,
) -> LatentMixtureFactory:
    """The mixture factory of one cell (DP when ``config.epsilon`` is set)."""
    dp = (
        None
        if config.epsilon is None
        else LatentGaussianDP(
            epsilon=float(config.epsilon), delta=float(config.delta), seed=noise_seed
        )
    )
    return LatentMixtureFactory(
        codec=codec,
        anchors=class_anchors(config, codec, class_id),
        class_id=class_id,
        client_id=client_id,
        dp=dp,
    )


def mixture_cell_plan(config: FactoryPipelineConfig, codec: Codec) -> Any:
    """The plan every DP mixture cell of the run releases with (its ``ledger()`` is the run's).

    The private-labels latent-moment plan at ``config.epsilon``/``delta`` and
    the codec's public radius and dimension: the plan
    :meth:`~privfed.engines.factory.mixture.LatentMixtureFactory.fit` uses.
    """
    if config.epsilon is None:
        raise ParameterError("config.epsilon", "a target epsilon (not None)", None)
    return release_plan(
        float(config.epsilon),
        float(config.delta),
        float(codec.default_clip_norm),
        int(codec.latent_dim),
    )
