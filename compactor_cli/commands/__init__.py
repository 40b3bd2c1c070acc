"""What a command is: its options (options.py), the typed settings they build (settings.py,
configure.py) and one class per command in an explicit registry (``COMMANDS``). The engine runs
records through whatever command it is handed; nothing here runs records."""
