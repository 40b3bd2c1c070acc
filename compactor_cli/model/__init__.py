"""What a conversation is: messages, owned keys, checks, token counts, context windows.

The bottom layer: it imports nothing of the package but ``errors`` and ``status``."""
