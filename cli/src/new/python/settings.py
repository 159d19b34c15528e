import os

_word = None


def word():
    """The setting `WORD`, read on the first call (componentize-py runs the
    module's top level at build time, before the operator's settings exist)."""
    global _word
    if _word is None:
        _word = os.environ.get("WORD", "forbidden")
    return _word
