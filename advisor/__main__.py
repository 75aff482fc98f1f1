"""`python -m advisor` runs the CLI."""

from advisor.cli import entry

if __name__ == "__main__":
    entry()
