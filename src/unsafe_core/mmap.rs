//! Memory-mapping a model file (filled in with the GGUF reader).
