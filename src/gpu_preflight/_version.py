"""The package version, on the lowest floor: any layer may read it without importing the facade."""

__version__ = "0.1.0"
