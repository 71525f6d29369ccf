"""Kafka's compression codecs, framed byte-for-byte the way Kafka's Java client frames them.

A compressed batch (or a magic 0/1 wrapper message) carries the whole records section as one codec
stream. Each codec has framing quirks that a reader of real Kafka logs must accept and a writer must
reproduce, so that Kafka's own tools read what we write:

* gzip: an RFC 1952 stream, possibly several concatenated members.
* snappy: xerial's ``SnappyOutputStream`` block framing. Readers also see raw snappy (franz-go) and
  xerial headers with little-endian version ints (Redpanda).
* lz4: an LZ4 frame with independent 64 KiB blocks and no checksums. Magic 0 messages carry Kafka's
  broken header checksum (KIP-57).
* zstd: a standard zstd frame, with or without the content size.

Python's zlib compresses gzip, zstandard zstd, cramjam snappy and lz4 (the fastest of the libraries
measured for each, see ``benchmarks/README.md``); the framing Kafka expects around their output is
written here.
"""

from __future__ import annotations

import enum
import gzip
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from typing import Final

import cramjam
import zstandard

from pysparklog.errors import CorruptRecordError, InvalidConfigError, UnsupportedCodecError

BytesLike = bytes | bytearray | memoryview
#: A block of a frame being written: input bytes, or cramjam's output.
_Block = BytesLike | cramjam.Buffer

#: Bits 0-2 of the attributes of a record batch or legacy message hold the codec id.
CODEC_MASK: Final = 0x07

#: Kafka's default levels (``GzipCompression``, ``Lz4Compression``, ``ZstdCompression``). The JDK's
#: ``Deflater.DEFAULT_COMPRESSION`` is zlib's level 6.
GZIP_DEFAULT_LEVEL: Final = 6
LZ4_DEFAULT_LEVEL: Final = 9
ZSTD_DEFAULT_LEVEL: Final = 3

#: xerial header: magic ``82 'SNAPPY' 00`` | version i32 | min compatible version i32. Kafka writes
#: both ints as big-endian 1; Redpanda writes them little-endian (kafka-python issue #2414), so
#: readers look only at the magic.
_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = struct.Struct(">8sii")
_XERIAL_VERSION: Final = 1
#: xerial ``SnappyOutputStream``'s default block size: each block compresses at most this much input.
_XERIAL_BLOCK_SIZE: Final = 32 * 1024
#: Before each xerial block: its compressed length, i32 BE.
_XERIAL_BLOCK_LENGTH: Final = struct.Struct(">i")

#: LZ4 frame header: magic ``04 22 4D 18`` | FLG | BD | [content size u64 LE] | [dict id u32 LE] | HC.
_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
_LZ4_FLG_OFFSET: Final = len(_LZ4_MAGIC)
_LZ4_DESCRIPTOR_SIZE: Final = 2  # FLG and BD
_LZ4_FLG_BLOCK_CHECKSUM: Final = 0x10
_LZ4_FLG_CONTENT_SIZE: Final = 0x08
_LZ4_CONTENT_SIZE_SIZE: Final = 8
_LZ4_FLG_DICT_ID: Final = 0x01
_LZ4_DICT_ID_SIZE: Final = 4
#: HC is the second byte of xxh32 over the descriptor, i.e. ``(xxh32 >> 8) & 0xFF``.
_LZ4_HC_SHIFT: Final = 8
_LZ4_HC_MASK: Final = 0xFF
#: Kafka's frame header (``KafkaLZ4BlockOutputStream``): FLG 60 (version 1, independent blocks, no block or
#: content checksum, no content size), BD 40 (blocks of at most 64 KiB), and the HC of those two bytes.
_LZ4_KAFKA_HEADER: Final = _LZ4_MAGIC + bytes.fromhex("604082")
#: Before each block: its size, u32 LE, the high bit set when the block is stored uncompressed.
_LZ4_BLOCK_SIZE: Final = struct.Struct("<I")
_LZ4_UNCOMPRESSED_BIT: Final = 0x80000000
#: A block size of 0 ends the blocks; after the blocks, with content checksums on: xxh32 (seed 0) of the
#: content, u32 LE.
_LZ4_END_MARK: Final = bytes(_LZ4_BLOCK_SIZE.size)
_LZ4_CHECKSUM: Final = struct.Struct("<I")
#: Kafka wrote the broken LZ4 header checksum in magic 0 messages only.
_LZ4_BROKEN_CHECKSUM_MAGIC: Final = 0
#: The most bytes of input a block of Kafka's frames holds (BD 40).
_LZ4_MAX_BLOCK: Final = 64 * 1024


class Codec(enum.IntEnum):
    """A compression codec, numbered as in the attributes of batches and legacy messages."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def kafka_name(self) -> str:
        """The name Kafka prints (``CompressionType.name``) and accepts in ``compression.type``."""
        return self.name.lower()

    @classmethod
    def from_name(cls, name: str) -> Codec:
        """Parse a ``compression.type`` value the way Kafka does: case-insensitively.

        Raises:
            UnsupportedCodecError: ``name`` is not one of Kafka's codec names.
        """
        try:
            return _CODECS_BY_NAME[name.lower()]
        except KeyError:
            accepted = ", ".join(_CODECS_BY_NAME)
            raise UnsupportedCodecError(f"unknown compression codec {name!r}; accepted: {accepted}") from None

    @classmethod
    def from_attributes(
        cls, attributes: int, *, file: str | os.PathLike[str] | None = None, position: int | None = None
    ) -> Codec:
        """The codec of a batch or message from its attributes; ``file`` and ``position`` locate errors.

        Raises:
            UnsupportedCodecError: the codec bits hold 5, 6 or 7, which Kafka does not define.
        """
        codec_id = attributes & CODEC_MASK
        try:
            return cls(codec_id)
        except ValueError:
            defined = ", ".join(f"{codec.value} {codec.kafka_name}" for codec in cls)
            raise UnsupportedCodecError(
                f"unknown compression codec id {codec_id} in attributes 0x{attributes:02x}; defined ids: {defined}",
                file=file,
                position=position,
            ) from None


_CODECS_BY_NAME: Final = {
    "none": Codec.NONE,
    "uncompressed": Codec.NONE,
    **{codec.kafka_name: codec for codec in Codec if codec is not Codec.NONE},
}

#: The levels Kafka accepts in ``compression.<codec>.level`` (zstd's minimum is zstd's own
#: ``ZSTD_minCLevel``); none and snappy take no level.
_LEVEL_RANGES: Final = {
    Codec.GZIP: range(1, 9 + 1),
    Codec.LZ4: range(1, 17 + 1),
    Codec.ZSTD: range(-131072, 22 + 1),
}


class _MalformedStreamError(Exception):
    """Framing that the codec library did not see but we did; ``decompress`` turns it into a CorruptRecordError."""


_zstd_local = threading.local()


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    """One compressor per level and thread (they are not thread-safe): building a compression
    context costs more than compressing a small batch."""
    compressors: dict[int, zstandard.ZstdCompressor] = _zstd_local.__dict__.setdefault("by_level", {})
    compressor = compressors.get(level)
    if compressor is None:
        compressor = compressors[level] = zstandard.ZstdCompressor(level=level)
    return compressor


def compress(codec: Codec, data: BytesLike, *, level: int | None = None) -> bytes:
    """Compress ``data`` into the stream Kafka's Java client would write for ``codec``.

    Args:
        codec: The codec.
        data: The uncompressed bytes (a records section or a legacy inner message set).
        level: The ``compression.<codec>.level``; None means Kafka's default. Only gzip, lz4 and
            zstd take one.

    Raises:
        InvalidConfigError: ``level`` is not one Kafka accepts for ``codec``.
    """
    accepted = _LEVEL_RANGES.get(codec, range(0))
    if level is not None and level not in accepted:
        detail = f"accepted: {accepted.start}..{accepted.stop - 1}" if accepted else "it takes no level"
        raise InvalidConfigError(f"compression level {level} is not accepted for {codec.kafka_name}; {detail}")
    if codec is Codec.NONE:
        return bytes(data)
    if codec is Codec.GZIP:
        # mtime 0 keeps the output reproducible, as the JDK's GZIPOutputStream does.
        return gzip.compress(data, compresslevel=GZIP_DEFAULT_LEVEL if level is None else level, mtime=0)
    if codec is Codec.SNAPPY:
        return _xerial_compress(data)
    if codec is Codec.LZ4:
        return _lz4_kafka_frame(data, LZ4_DEFAULT_LEVEL if level is None else level)
    return _zstd_compressor(ZSTD_DEFAULT_LEVEL if level is None else level).compress(data)


def decompress(
    codec: Codec,
    data: BytesLike,
    *,
    magic: int = 2,
    file: str | os.PathLike[str] | None = None,
    position: int | None = None,
) -> bytes:
    """Decompress a stream written by any Kafka client, with the quirks of each codec's framing.

    Args:
        codec: The codec from the batch's or wrapper message's attributes.
        data: The compressed bytes.
        magic: The magic of the batch or message; magic 0 lz4 frames carry Kafka's broken header
            checksum, which Kafka ignores, so it is recomputed before decoding.
        file: The file the bytes came from, named by errors.
        position: The position of the batch or message in ``file``, named by errors.

    Raises:
        CorruptRecordError: ``data`` is not a valid stream of ``codec``.
    """
    try:
        if codec is Codec.NONE:
            return bytes(data)
        if codec is Codec.GZIP:
            return gzip.decompress(data)
        if codec is Codec.SNAPPY:
            return _snappy_decompress(data)
        if codec is Codec.LZ4:
            frame = _lz4_fix_header_checksum(data) if magic == _LZ4_BROKEN_CHECKSUM_MAGIC else data
            return bytes(cramjam.lz4.decompress(frame))
        return _zstd_decompress(data)
    except (
        _MalformedStreamError,
        OSError,  # gzip.BadGzipFile
        EOFError,  # a truncated gzip member
        zlib.error,
        cramjam.DecompressionError,
        zstandard.ZstdError,
    ) as exc:
        raise CorruptRecordError(
            f"{codec.kafka_name} decompression of {len(data)} bytes failed: {exc}", file=file, position=position
        ) from exc


def _xerial_compress(data: BytesLike) -> bytes:
    """Frame ``data`` as xerial's ``SnappyOutputStream`` does: header, then length-prefixed raw blocks."""
    view = memoryview(data)
    parts = [_XERIAL_HEADER.pack(_XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_VERSION)]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts += (_XERIAL_BLOCK_LENGTH.pack(len(block)), block)
    return b"".join(parts)


def _snappy_decompress(data: BytesLike) -> bytes:
    """Read xerial framing, or raw snappy when the xerial magic is absent (as xerial's reader falls back)."""
    view = memoryview(data)
    if bytes(view[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC or len(view) < _XERIAL_HEADER.size:
        return bytes(cramjam.snappy.decompress_raw(view))
    parts = []
    cursor = _XERIAL_HEADER.size
    while cursor < len(view):
        if cursor + _XERIAL_BLOCK_LENGTH.size > len(view):
            raise _MalformedStreamError(
                f"xerial block length at byte {cursor} needs {_XERIAL_BLOCK_LENGTH.size} bytes, "
                f"only {len(view) - cursor} remain"
            )
        (length,) = _XERIAL_BLOCK_LENGTH.unpack_from(view, cursor)
        cursor += _XERIAL_BLOCK_LENGTH.size
        if not 0 <= length <= len(view) - cursor:
            raise _MalformedStreamError(
                f"xerial block at byte {cursor} has length {length}; expected 0..{len(view) - cursor} (bytes left)"
            )
        parts.append(bytes(cramjam.snappy.decompress_raw(view[cursor : cursor + length])))
        cursor += length
    return b"".join(parts)


def _lz4_kafka_frame(data: BytesLike, level: int) -> bytes:
    """Frame ``data`` as Kafka's ``KafkaLZ4BlockOutputStream`` does: Kafka's header, then independent blocks of
    at most 64 KiB, each stored uncompressed when compressing does not make it smaller, then the end mark.

    Kafka compresses with lz4's fast compressor at its default level and with LZ4HC at any other.
    """
    view = memoryview(data)
    blocks = _lz4_fast_blocks(view) if level == LZ4_DEFAULT_LEVEL else _lz4_hc_blocks(view, level)
    parts: list[_Block] = [_LZ4_KAFKA_HEADER]
    for size_field, block in blocks:
        parts += (_LZ4_BLOCK_SIZE.pack(size_field), block)
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


def _lz4_fast_blocks(view: memoryview) -> Iterator[tuple[int, _Block]]:
    """Blocks of lz4's fast compressor, with their size fields."""
    for start in range(0, len(view), _LZ4_MAX_BLOCK):
        chunk = view[start : start + _LZ4_MAX_BLOCK]
        block = cramjam.lz4.compress_block(chunk, store_size=False)
        if len(block) >= len(chunk):
            yield len(chunk) | _LZ4_UNCOMPRESSED_BIT, chunk
        else:
            yield len(block), block


def _lz4_hc_blocks(view: memoryview, level: int) -> Iterator[tuple[int, _Block]]:
    """Blocks of LZ4HC at ``level``, with their size fields.

    cramjam's block function takes no level, so its frame compressor makes them; it always adds block
    checksums, which Kafka's frame has none of, so the blocks are taken out of its frame. Before cramjam 2.12
    (the last release for Python 3.10 is 2.11) that compressor writes 8 KiB blocks, not 64 KiB ones: frames
    Kafka reads all the same, that compress less at higher levels.
    """
    compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
    compressor.compress(bytes(view))  # it takes bytes only
    yield from _lz4_blocks(memoryview(bytes(compressor.finish())))


def _lz4_blocks(frame: memoryview) -> Iterator[tuple[int, memoryview]]:
    """The blocks of one well-formed LZ4 frame: each one's size field (with its uncompressed bit) and its bytes."""
    flg = frame[_LZ4_FLG_OFFSET]
    cursor = _lz4_checksum_offset(flg) + 1
    checksum_size = _LZ4_CHECKSUM.size if flg & _LZ4_FLG_BLOCK_CHECKSUM else 0
    while True:
        (size_field,) = _LZ4_BLOCK_SIZE.unpack_from(frame, cursor)
        cursor += _LZ4_BLOCK_SIZE.size
        if not size_field:
            return
        end = cursor + (size_field & ~_LZ4_UNCOMPRESSED_BIT)
        yield size_field, frame[cursor:end]
        cursor = end + checksum_size


def _lz4_checksum_offset(flg: int) -> int:
    """Where a frame's header checksum (HC) is, after the descriptor and the optional fields ``flg`` announces."""
    return (
        _LZ4_FLG_OFFSET
        + _LZ4_DESCRIPTOR_SIZE
        + (_LZ4_CONTENT_SIZE_SIZE if flg & _LZ4_FLG_CONTENT_SIZE else 0)
        + (_LZ4_DICT_ID_SIZE if flg & _LZ4_FLG_DICT_ID else 0)
    )


def _lz4_fix_header_checksum(data: BytesLike) -> bytes:
    """Replace a magic 0 frame's header checksum with the correct one.

    Kafka before 0.10 computed HC over the frame magic as well as the descriptor (KIP-57), and Kafka
    still ignores HC in magic 0 messages; overwriting it accepts both the broken and the correct
    checksum. Bytes that are not an LZ4 frame are returned as they are, for lz4 to reject.
    """
    frame = bytearray(data)
    if frame[: len(_LZ4_MAGIC)] != _LZ4_MAGIC or len(frame) < _LZ4_FLG_OFFSET + _LZ4_DESCRIPTOR_SIZE:
        return bytes(frame)
    checksum_offset = _lz4_checksum_offset(frame[_LZ4_FLG_OFFSET])
    if checksum_offset < len(frame):
        frame[checksum_offset] = (_xxh32(frame[_LZ4_FLG_OFFSET:checksum_offset]) >> _LZ4_HC_SHIFT) & _LZ4_HC_MASK
    return bytes(frame)


def _xxh32(data: bytes | bytearray) -> int:
    """xxh32 with seed 0, which cramjam does not expose except as an LZ4 frame's content checksum."""
    compressor = cramjam.lz4.Compressor(content_checksum=True)
    compressor.compress(bytes(data))
    frame = bytes(compressor.finish())
    (checksum,) = _LZ4_CHECKSUM.unpack_from(frame, len(frame) - _LZ4_CHECKSUM.size)
    return int(checksum)


_ZSTD_ONE_SHOT_LIMIT = 1 << 30  # a frame claiming more than this is streamed, never preallocated


def _zstd_decompress(data: BytesLike) -> bytes:
    """Decode every frame in ``data``; a frame without a content size must be streamed, and must end.

    A single frame that states its size (what pysparklog writes) is decoded in one call, which is
    faster; the Java client's streaming frames, and several frames, take the general path.
    """
    remaining = bytes(data)
    size = zstandard.get_frame_parameters(remaining).content_size if remaining else zstandard.CONTENTSIZE_UNKNOWN
    if size != zstandard.CONTENTSIZE_UNKNOWN and size <= _ZSTD_ONE_SHOT_LIMIT:
        try:
            decompressor = getattr(_zstd_local, "decompressor", None) or zstandard.ZstdDecompressor()
            _zstd_local.decompressor = decompressor
            return bytes(decompressor.decompress(remaining, allow_extra_data=False))
        except zstandard.ZstdError:
            pass  # more than one frame, or a damaged one: the general path reports what is wrong
    parts = []
    while remaining:
        decompressor = zstandard.ZstdDecompressor().decompressobj()
        parts.append(decompressor.decompress(remaining))
        if not decompressor.eof:
            raise _MalformedStreamError("the zstd frame is truncated: it ends before its last block")
        remaining = decompressor.unused_data
    return b"".join(parts)
