"""Plain helpers every layer uses: seeding, argument checks, labels, progress, MPI, smoke caps, output files."""
