"""The runtime: imported inside training processes. Light: no CLI, no rich, no pydantic."""
