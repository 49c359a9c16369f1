"""SIGIL v1 bytes: token forms, opcodes, frame kinds, modes and reset reasons (docs/sigil.md)."""

from __future__ import annotations

from enum import IntEnum

VERSION = 0x01
FRAME_START = 0xF0
HOT_SIZE = 127
LONG_TOKEN = 0x7F
SHORT_MIN, SHORT_MAX = 0x80, 0xBF
SHORT_LIMIT = 1 << 14  # ids below this fit a two-byte short token
MAX_VARINT_BYTES = 5
VARINT_LIMIT = 1 << 32
DEFAULT_MAX_PAYLOAD = 64 * 1024
CRC_BYTES = 4


class Op(IntEnum):
    CHUNK_END = 0xC0
    TOOL_CALL_START = 0xC1
    TOOL_CALL_END = 0xC2
    THINK_START = 0xC3
    THINK_END = 0xC4
    CODE_BLOCK_START = 0xC5
    CODE_BLOCK_END = 0xC6
    FLUSH = 0xC7
    STREAM_END = 0xCF


RESERVED_OPCODES = range(0xC8, 0xCF)


class Kind(IntEnum):
    HELLO = 0x01
    DATA = 0x02
    UPSTREAM_ERROR = 0x03


class Mode(IntEnum):
    """The parse mode; its value is the entry-mode byte of a DATA frame."""

    TEXT = 0
    THINK = 1
    TOOL_CALL = 2
    CODE_BLOCK = 3


MODES = {Mode.TEXT: "text", Mode.THINK: "think", Mode.TOOL_CALL: "tool_call", Mode.CODE_BLOCK: "code_block"}
START_OF = {Mode.THINK: Op.THINK_START, Mode.TOOL_CALL: Op.TOOL_CALL_START, Mode.CODE_BLOCK: Op.CODE_BLOCK_START}
END_OF = {Mode.THINK: Op.THINK_END, Mode.TOOL_CALL: Op.TOOL_CALL_END, Mode.CODE_BLOCK: Op.CODE_BLOCK_END}
MODE_STARTED_BY: dict[int, Mode] = {op: mode for mode, op in START_OF.items()}
MODE_ENDED_BY: dict[int, Mode] = {op: mode for mode, op in END_OF.items()}


class Reason:
    """Reset reasons, as they appear in the inspection format."""

    UNMATCHED_MODE_END = "UnmatchedModeEnd"
    NESTED_MODE_START = "NestedModeStart"
    RESERVED_OPCODE = "ReservedOpcode"
    VARINT_OVERFLOW = "VarintOverflow"
    INVALID_BYTE = "InvalidByte"
    TRUNCATED_TOKEN = "TruncatedToken"
    FRAME_CORRUPT = "FrameCorrupt"
    UNSUPPORTED_VERSION = "UnsupportedVersion"
    UNKNOWN_FRAME_KIND = "UnknownFrameKind"
    SEQUENCE_GAP = "SequenceGap"
    MISSING_HELLO = "MissingHello"
    BAD_HELLO = "BadHello"
    MODE_MISMATCH = "ModeMismatch"
    BAD_ENTRY_MODE = "BadEntryMode"
    UNTERMINATED_MODE = "UnterminatedMode"
    TRAILING_AFTER_END = "TrailingAfterEnd"
    UPSTREAM_ERROR = "UpstreamError"
    BAD_UPSTREAM_ERROR = "BadUpstreamError"
    TRUNCATED = "Truncated"
    TOO_MANY_STREAMS = "TooManyStreams"
