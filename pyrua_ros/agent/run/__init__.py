"""Running an episode: boot, validate, the loop or single shot, the VLA server, progress."""
