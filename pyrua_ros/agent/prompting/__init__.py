"""The prompt a model sees: arm contracts, the API reference, the reference's own text."""
