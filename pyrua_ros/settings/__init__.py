"""The settings of a run: the schema, its sections, the modes and the model's settings."""
