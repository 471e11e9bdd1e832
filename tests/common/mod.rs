//! Helpers shared by the model tests: a tiny Qwen3 file rewritten with
//! edits, as a hostile or unusual writer would produce it.
#![allow(dead_code)]

use std::sync::OnceLock;

use inferno_cpu::gguf::{GgmlType, Gguf, GgufFile, Value, Writer};
use inferno_cpu::synth::{model_bytes, SynthConfig};

/// An editable copy of a GGUF file: metadata and tensors in file order.
#[derive(Clone)]
pub struct Edit {
    pub meta: Vec<(String, Value)>,
    pub tensors: Vec<(String, GgmlType, Vec<u64>, Vec<u8>)>,
}

impl Edit {
    /// The synthetic tiny Qwen3 model, seed 7.
    pub fn tiny() -> Self {
        // Built once per test binary: the tests edit hundreds of copies.
        static TINY: OnceLock<Edit> = OnceLock::new();
        TINY.get_or_init(|| Self::synth(&SynthConfig::tiny()))
            .clone()
    }

    /// A synthetic model of `cfg`'s shapes, seed 7.
    pub fn synth(cfg: &SynthConfig) -> Self {
        let bytes = model_bytes(cfg, 7).unwrap();
        let g = Gguf::parse(&bytes).unwrap();
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

    /// Sets (or adds) a metadata key.
    pub fn set(mut self, key: &str, value: Value) -> Self {
        match self.meta.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.meta.push((key.to_string(), value)),
        }
        self
    }

    /// Removes a metadata key.
    pub fn remove(mut self, key: &str) -> Self {
        self.meta.retain(|(k, _)| k != key);
        self
    }

    /// Replaces a tensor (or adds it).
    pub fn tensor(mut self, name: &str, ty: GgmlType, dims: &[u64], data: Vec<u8>) -> Self {
        let t = (name.to_string(), ty, dims.to_vec(), data);
        match self.tensors.iter_mut().find(|x| x.0 == name) {
            Some(slot) => *slot = t,
            None => self.tensors.push(t),
        }
        self
    }

    /// Removes a tensor.
    pub fn drop_tensor(mut self, name: &str) -> Self {
        self.tensors.retain(|t| t.0 != name);
        self
    }

    /// The tensor's data, as stored.
    pub fn data(&self, name: &str) -> &[u8] {
        &self.tensors.iter().find(|t| t.0 == name).unwrap().3
    }

    /// The file's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        for (k, v) in &self.meta {
            w.add(k, v.clone()).unwrap();
        }
        for (name, ty, dims, data) in &self.tensors {
            w.add_tensor(name, *ty, dims, data.as_slice()).unwrap();
        }
        w.to_bytes().unwrap()
    }

    /// The file in an aligned buffer, as a model file read from disk is
    /// (no file is written, so tests running in parallel cannot race on
    /// one).
    pub fn file(&self) -> GgufFile {
        GgufFile::from_bytes(&self.bytes()).unwrap()
    }
}

/// f32 values of a little-endian f32 tensor.
pub fn f32s(data: &[u8]) -> Vec<f32> {
    data.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
