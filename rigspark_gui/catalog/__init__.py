"""Model catalog and importers that turn local files (GGUF, HF config.json) into ModelSpecs."""
