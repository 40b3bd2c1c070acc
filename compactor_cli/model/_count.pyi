from collections.abc import Callable
from types import NotImplementedType
from typing import Any

def conversation(messages: list[Any], shorts: dict[str, int], memo: dict[str, int], text: Callable[[str], int],
                 short: Callable[[str], int], min_chars: int, per_message: int, per_name: int, per_call: int,
                 message: Callable[[Any], int]) -> int | NotImplementedType: ...
def each(messages: list[Any], shorts: dict[str, int], memo: dict[str, int], text: Callable[[str], int],
         short: Callable[[str], int], min_chars: int, per_message: int, per_name: int, per_call: int,
         message: Callable[[Any], int]) -> list[int] | NotImplementedType: ...
