import re

def scan(kinds: re.Pattern[str], currency: re.Pattern[str], dot_words: frozenset[str], unit_words: frozenset[str],
         text: str) -> list[tuple[int, int, str | None]]: ...
