"""Parsers: pure text → typed records, one module per tool or format."""
