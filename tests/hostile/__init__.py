"""The hostile-input corpus (see README.md): cases generated at test time, never committed."""
