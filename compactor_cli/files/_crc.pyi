#: True where the processor folds with PCLMULQDQ (x86-64 with SSE4.1); else checksum.py uses zlib.
ACCELERATED: int

def crc32(data: bytes | bytearray | memoryview, value: int = 0, /) -> int: ...
