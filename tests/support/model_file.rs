//! An editable GGUF model file, shared by the model tests (through
//! `tests/common/mod.rs`) and the `model_load` fuzz target
//! (`fuzz/fuzz_targets/model_load.rs`), so both start from the same tiny
//! Qwen3 file and edit it the same way.
//!
//! The in-place edits (`put`, `put_tensor`, ...) suit a fuzzer applying a
//! list of them; the by-value ones (`set`, `tensor`, ...) chain into one
//! expression in a test.

use std::sync::OnceLock;

use inferno_cpu::gguf::{Array, GgmlType, Gguf, Value, WriteError, Writer};
use inferno_cpu::synth::{model_bytes, SynthConfig};

/// One tensor: name, type, dimensions and data bytes.
pub type Tensor = (String, GgmlType, Vec<u64>, Vec<u8>);

/// An editable copy of a GGUF file: metadata and tensors in file order.
#[derive(Clone)]
pub struct Edit {
    /// Metadata keys and values.
    pub meta: Vec<(String, Value)>,
    /// Tensors.
    pub tensors: Vec<Tensor>,
}

impl Edit {
    /// The synthetic tiny Qwen3 model, seed 7.
    pub fn tiny() -> Self {
        // Built once per process: tests and fuzz inputs edit many copies.
        static TINY: OnceLock<Edit> = OnceLock::new();
        TINY.get_or_init(|| Self::synth(&SynthConfig::tiny()))
            .clone()
    }

    /// A synthetic model of `cfg`'s shapes, seed 7.
    pub fn synth(cfg: &SynthConfig) -> Self {
        let bytes = model_bytes(cfg, 7).expect("synthetic model writes");
        Self::of(&Gguf::parse(&bytes).expect("synthetic model parses"))
    }

    /// A copy of a parsed file's metadata and tensors.
    pub fn of(g: &Gguf<'_>) -> Self {
        Self {
            meta: g
                .metadata()
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            tensors: g
                .tensors()
                .iter()
                .map(|t| {
                    (
                        t.name.clone(),
                        t.ggml_type,
                        t.dims.clone(),
                        g.data_of(t).to_vec(),
                    )
                })
                .collect(),
        }
    }

    /// The value of a metadata key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.meta.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Sets (or adds) a metadata key, in place.
    pub fn put(&mut self, key: &str, value: Value) {
        match self.meta.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.meta.push((key.to_string(), value)),
        }
    }

    /// Replaces a tensor (or adds it), in place.
    pub fn put_tensor(&mut self, name: &str, ty: GgmlType, dims: &[u64], data: Vec<u8>) {
        let t = (name.to_string(), ty, dims.to_vec(), data);
        match self.tensors.iter_mut().find(|x| x.0 == name) {
            Some(slot) => *slot = t,
            None => self.tensors.push(t),
        }
    }

    /// Sets (or adds) a metadata key.
    pub fn set(mut self, key: &str, value: Value) -> Self {
        self.put(key, value);
        self
    }

    /// Removes a metadata key.
    pub fn remove(mut self, key: &str) -> Self {
        self.meta.retain(|(k, _)| k != key);
        self
    }

    /// Replaces a tensor (or adds it).
    pub fn tensor(mut self, name: &str, ty: GgmlType, dims: &[u64], data: Vec<u8>) -> Self {
        self.put_tensor(name, ty, dims, data);
        self
    }

    /// Removes a tensor.
    pub fn drop_tensor(mut self, name: &str) -> Self {
        self.tensors.retain(|t| t.0 != name);
        self
    }

    /// The tensor's data, as stored.
    pub fn data(&self, name: &str) -> &[u8] {
        &self
            .tensors
            .iter()
            .find(|t| t.0 == name)
            .expect("tensor present")
            .3
    }

    /// The file's bytes, or the writer's error (a key or tensor the
    /// writer refuses).
    pub fn try_bytes(&self) -> Result<Vec<u8>, WriteError> {
        let mut w = Writer::new();
        for (k, v) in &self.meta {
            w.add(k, v.clone())?;
        }
        for (name, ty, dims, data) in &self.tensors {
            w.add_tensor(name, *ty, dims, data.as_slice())?;
        }
        w.to_bytes()
    }

    /// The file's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        self.try_bytes()
            .expect("the writer accepts the edited file")
    }
}

/// A `tokenizer.ggml.tokens` list of `n` entries (`t0`, `t1`, ...).
pub fn tokens(n: u64) -> Value {
    Value::Array(Array::String((0..n).map(|i| format!("t{i}")).collect()))
}
