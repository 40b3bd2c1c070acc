"""The batch function: JSONL lines in, the CLI's output lines and report items out (the public
path; the code is in engine/batch.py, whose docstring shows its use)."""

from .engine.batch import (
    COMMANDS,
    RUN_OPTIONS,
    BatchResult,
    Configured,
    Processor,
    build,
    configure,
    option_defaults,
    output_of,
    process_lines,
    processor_for,
    read_lines,
    report_for,
    settings_for,
    write_lines,
)

__all__ = [
    "COMMANDS",
    "RUN_OPTIONS",
    "BatchResult",
    "Configured",
    "Processor",
    "build",
    "configure",
    "option_defaults",
    "output_of",
    "process_lines",
    "processor_for",
    "read_lines",
    "report_for",
    "settings_for",
    "write_lines",
]
