"""Datasets, the explicit public/private/test split, and client partitions.

This package needs numpy only (scikit-learn for :func:`load_digits`, Pillow for
:func:`load_image_folder`); it never imports torch.
"""

from privfed.data.datasets import (
    DatasetSplit,
    ImageDataset,
    load_dataset,
    load_digits,
    load_image_folder,
    load_npz,
    require_classification_data,
    split_public_private,
)
from privfed.data.partition import PartitionScheme, partition

__all__ = [
    "DatasetSplit",
    "ImageDataset",
    "PartitionScheme",
    "load_dataset",
    "load_digits",
    "load_image_folder",
    "load_npz",
    "partition",
    "require_classification_data",
    "split_public_private",
]
