"""Pure numerics for the surrogate models: numpy in, numpy out, no I/O, no other gptask import."""
