"""numpy tracing: jl.trace, @jl.jit and the numpy API the tracer answers."""
