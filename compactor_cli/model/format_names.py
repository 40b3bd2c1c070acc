"""The names of the formats xcompact reads, below the readers: the files layer refuses
``--in-place`` on a log by name without importing a reader."""

REQUEST_FORMATS = ("openai", "anthropic", "responses")
LOG_FORMATS = ("claude-code", "codex", "swe-agent", "mini-swe-agent", "sharegpt")
FORMATS = REQUEST_FORMATS + LOG_FORMATS
#: Formats whose one conversation is a whole file of JSON lines (read with read_file).
FILE_LEVEL = ("claude-code", "codex")
