"""Frozen public codecs mapping images to flat latents and back."""

from privfed.models.codecs.autoencoder import ConvAutoencoderCodec
from privfed.models.codecs.base import Codec
from privfed.models.codecs.pca import PCACodec
from privfed.models.codecs.pretrained import DiffusersCodec, DiffusersKind

__all__ = ["Codec", "ConvAutoencoderCodec", "DiffusersCodec", "DiffusersKind", "PCACodec"]
