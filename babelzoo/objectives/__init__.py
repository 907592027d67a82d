"""Pre-training objectives, one file each, registered by name."""
