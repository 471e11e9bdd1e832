//! Feature-checked calls into `#[target_feature]` kernels (filled in with the
//! Q8_0 kernels).
