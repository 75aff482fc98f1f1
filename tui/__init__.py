"""The Textual wizard front end, shipped inside the package as `advisor.tui` (see pyproject.toml)."""
