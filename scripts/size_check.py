"""Placeholder replaced by the size check (modules over 500 lines, functions over 60)."""
