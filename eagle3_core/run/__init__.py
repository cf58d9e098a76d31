"""The run folder: its layout, the stage driver, manifests, locks, keys, checksums and safe writes."""
