"""I/O accelerators app: a small-read prefetcher and a burst buffer tuned per I/O pattern."""
