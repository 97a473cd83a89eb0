"""The window: presentation and interaction only; every answer comes from `core`."""
