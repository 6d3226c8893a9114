"""Where to measure next: acquisition search over a space, each task's proposals, cautious designs."""
