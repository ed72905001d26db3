"""Frozen public codecs mapping images to flat latents and back."""

from privfed.engines.codecs.autoencoder import ConvAutoencoderCodec
from privfed.engines.codecs.base import Codec
from privfed.engines.codecs.pca import PCACodec
from privfed.engines.codecs.pretrained import DiffusersCodec, DiffusersKind

__all__ = ["Codec", "ConvAutoencoderCodec", "DiffusersCodec", "DiffusersKind", "PCACodec"]
