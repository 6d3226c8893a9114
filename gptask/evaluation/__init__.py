"""Running the objective: repeats, timeouts, child process groups, noise handling, failed runs."""
