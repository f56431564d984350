"""qualify: decide whether an LLM serving recipe may go to production."""

from qualify._version import __version__

__all__ = ["__version__"]
