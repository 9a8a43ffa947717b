"""`python -m memstore` is `ct` (the git hook stubs call it this way)."""

from .cli import run

if __name__ == "__main__":
    run()
