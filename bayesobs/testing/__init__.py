"""Test doubles: local servers that speak the chat and batch APIs, outside the layers.

Nothing else in the package imports this package (import-linter's ``protected``
contract in ``pyproject.toml``).  The names load on first use (PEP 562), so
``python -m bayesobs.testing.fakeserver`` and ``python -m bayesobs.testing.fakebatch``
run their module once.
"""

from importlib import import_module

# public name -> module, imported on first use
_LAZY = {
    "Answer": "fakeserver",
    "FakeChatServer": "fakeserver",
    "Script": "fakeserver",
    "constant": "fakeserver",
    "FakeBatchServer": "fakebatch",
    "Fate": "fakebatch",
    "always": "fakebatch",
    "hashed": "fakebatch",
}


def __getattr__(name: str):
    """Load a re-exported name from its module on first use (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'bayesobs.testing' has no attribute {name!r}")
    return getattr(import_module(f".{_LAZY[name]}", __name__), name)


__all__ = sorted(_LAZY)
