//! Matrix-vector and matrix-matrix products over Q8_0 and f32 weights.
