//! Q4_K, Q5_K and Q4_0 projections packed eight rows at a time (what
//! `Model` does where the CPU's kernel reads packed rows: AVX-512 VNNI and
//! AVX2 all three)
//! give the file's own bits: the same logits as the unpacked file, on every backend and
//! thread count, decode and prefill.
#![cfg(not(feature = "loom"))]

use inferno_cpu::backend::{AnyBackend, Backend};
use inferno_cpu::gguf::{Gguf, TensorLayout};
use inferno_cpu::matvec::Weight;
use inferno_cpu::model::{argmax, Model, Qwen3, Session, SessionOptions};
use inferno_cpu::quant::Kernel;
use inferno_cpu::synth::{model_bytes, FileType, SynthConfig};

fn logits<B: Backend>(model: &Qwen3<'_>, b: B, prefill: bool) -> Vec<u32> {
    let opts = SessionOptions {
        max_positions: 64,
        ..SessionOptions::default()
    };
    let mut s = Session::new(model, b, opts).unwrap();
    let prompt = [3u32, 141, 59, 265, 358, 97, 93, 238, 46, 17, 401];
    let mut out = Vec::new();
    let mut push = |l: &[f32]| out.extend(l.iter().map(|v| v.to_bits()));
    if prefill {
        push(&s.prefill_all(&prompt).unwrap());
    } else {
        for &t in &prompt {
            push(s.decode(t).unwrap());
        }
    }
    let mut t = argmax(s.logits());
    for _ in 0..6 {
        let l = s.decode(t).unwrap();
        t = argmax(l);
        push(l);
    }
    out
}

fn packed_names(model: &Model) -> Vec<String> {
    let gguf = model.file().gguf();
    gguf.tensors()
        .iter()
        .filter(|t| t.layout != TensorLayout::File)
        .map(|t| t.name.clone())
        .collect()
}

/// A Q4_K_M, Q5_K_M or Q4_0 model read through `Model` packs its layers'
/// Q4_K, Q5_K or Q4_0 projections (and nothing else) where the CPU runs
/// the eight-row kernels, and gives the unpacked file's logits bit for bit
/// on every backend (prefill's sixteen-row Q4_0 GEMM reading the packed
/// rows too).
#[test]
fn packed_projections_give_the_file_s_bits() {
    for file_type in [FileType::Q4KM, FileType::Q5KM, FileType::Q4_0] {
        check_packed(file_type);
    }
}

/// Whether `Model` packs a quantized file's projections with the
/// selected kernel: AVX-512 VNNI and AVX2 read packed Q4_K, Q5_K and
/// Q4_0 rows.
fn packs() -> bool {
    matches!(Kernel::selected(), Kernel::Avx512Vnni | Kernel::Avx2)
}

fn check_packed(file_type: FileType) {
    let bytes = model_bytes(&SynthConfig::small().with_file_type(file_type), 5).unwrap();
    let gguf = Gguf::parse(&bytes).unwrap();
    let plain = Qwen3::load(&gguf).unwrap();
    let model = Model::from_bytes(&bytes).unwrap();
    let packed = packed_names(&model);
    if packs() {
        assert!(!packed.is_empty(), "{file_type:?}: nothing packed");
        assert!(matches!(
            model.qwen3().weights.layers[0].q,
            Weight::Q4KPacked(_) | Weight::Q5KPacked(_) | Weight::Q4_0Packed(_)
        ));
    } else {
        assert!(packed.is_empty(), "{packed:?}");
    }
    for name in &packed {
        let info = gguf.tensor(name).unwrap();
        assert!(
            name.starts_with("blk.") && info.dims[1].is_multiple_of(8),
            "{name}"
        );
    }
    for (name, threads) in [
        ("scalar", 1),
        ("simd", 1),
        ("parallel", 3),
        ("pool", 1),
        ("pool", 2),
        ("pool", 3),
    ] {
        for prefill in [false, true] {
            let b = || AnyBackend::new(name, threads).unwrap();
            assert!(
                logits(&plain, b(), prefill) == logits(model.qwen3(), b(), prefill),
                "{file_type:?}: {name} x{threads}, prefill {prefill}"
            );
        }
    }
}

/// A mapped file's pages are the page cache's: `Model::open` packs
/// nothing, `Model::read` of the same file packs where the kernel is the
/// eight-row one, and both give the same logits.
#[test]
fn a_mapped_file_is_left_as_written() {
    let bytes = model_bytes(&SynthConfig::small().with_file_type(FileType::Q4KM), 9).unwrap();
    let path = std::env::temp_dir().join(format!("inferno-packed-{}.gguf", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let mapped = Model::open(&path).unwrap();
    let read = Model::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(packed_names(&mapped).is_empty());
    assert_eq!(packed_names(&read).is_empty(), !packs());
    let b = || AnyBackend::new("pool", 2).unwrap();
    assert!(logits(mapped.qwen3(), b(), false) == logits(read.qwen3(), b(), false));
}

/// Writing out a packed model's file restores the file's order: the
/// written tensors hold the original bytes, and the written file loads
/// with the original logits.
#[test]
fn a_packed_file_writes_out_as_written() {
    for file_type in [FileType::Q5KM, FileType::Q4_0] {
        check_written(file_type);
    }
}

fn check_written(file_type: FileType) {
    use inferno_cpu::gguf::Writer;
    let bytes = model_bytes(&SynthConfig::small().with_file_type(file_type), 3).unwrap();
    let original = Gguf::parse(&bytes).unwrap();
    let model = Model::from_bytes(&bytes).unwrap();
    let written = Writer::from_gguf(&model.file().gguf())
        .unwrap()
        .to_bytes()
        .unwrap();
    let again = Gguf::parse(&written).unwrap();
    for t in original.tensors() {
        let w = again.tensor(&t.name).unwrap();
        assert_eq!(w.layout, TensorLayout::File);
        assert!(again.data_of(w) == original.data_of(t), "{}", t.name);
        let in_model = model.file().gguf();
        let m = in_model.tensor(&t.name).unwrap();
        assert!(
            in_model.data_in_file_order(m)[..] == original.data_of(t)[..],
            "{}",
            t.name
        );
    }
    let plain = Qwen3::load(&original).unwrap();
    let reloaded = Model::from_bytes(&written).unwrap();
    let b = || AnyBackend::new("simd", 1).unwrap();
    assert!(logits(&plain, b(), false) == logits(reloaded.qwen3(), b(), false));
}
