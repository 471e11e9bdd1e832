//! A 64 KB file claiming 2^60 tensors (and as many keys) is refused before
//! anything is allocated for those counts, and a huge (legal) alignment
//! costs the writer no buffer of that size, even when it pads a tensor.
//!
//! This binary holds a single test so nothing else runs while it reads the
//! process's peak virtual memory (`VmPeak`, Linux): a `Vec` sized from the
//! claimed count would reserve gigabytes of address space even if it were
//! never touched, and show up there.

use std::io::Write;

use inferno_cpu::gguf::{GgmlType, Gguf, GgufError, Writer};

/// A sink that counts bytes and records where the data byte `0x5a` lands
/// past the first 4 KiB (the header), looking at every byte it is given.
#[derive(Default)]
struct Counting {
    len: u64,
    /// End of the last nonzero byte within the first 4 KiB.
    nonzero_before: u64,
    /// `(position, byte)` of every nonzero byte past the first 4 KiB.
    marks: Vec<(u64, u8)>,
}

impl Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        const ZEROS: [u8; 4096] = [0; 4096];
        let buf = std::hint::black_box(buf);
        let mut at = self.len;
        // Whole zero chunks are one `memcmp`; 4 GiB pass through here.
        for chunk in buf.chunks(ZEROS.len()) {
            if chunk != &ZEROS[..chunk.len()] {
                for (i, &b) in chunk.iter().enumerate() {
                    let pos = at + i as u64;
                    match (b, pos < 4096) {
                        (0, _) => {}
                        (_, true) => self.nonzero_before = pos + 1,
                        (_, false) => self.marks.push((pos, b)),
                    }
                }
            }
            at += chunk.len() as u64;
        }
        self.len = at;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Peak virtual memory of this process in KiB, where the OS reports it.
fn vm_peak_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmPeak:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The writer's empty file, padded with zeros to 64 KiB, claiming
/// `n_tensors` tensors and `n_kv` keys.
fn hostile(n_tensors: u64, n_kv: u64) -> Vec<u8> {
    let mut bytes = Writer::new().to_bytes().unwrap();
    bytes[8..16].copy_from_slice(&n_tensors.to_le_bytes());
    bytes[16..24].copy_from_slice(&n_kv.to_le_bytes());
    bytes.resize(64 * 1024, 0);
    bytes
}

#[test]
fn huge_counts_fail_without_allocating() {
    let before = vm_peak_kib();
    let cases = [
        (1u64 << 60, 0u64),
        (0, 1 << 60),
        // Large but plausible for a machine: 64M tensor infos would be
        // several GB of `Vec` capacity.
        (1 << 26, 0),
        (0, 1 << 26),
        (u64::MAX, u64::MAX),
    ];
    for (n_tensors, n_kv) in cases {
        let bytes = hostile(n_tensors, n_kv);
        let remaining = bytes.len() as u64 - 24;
        match Gguf::parse(&bytes) {
            Err(GgufError::CountTooLarge {
                count,
                remaining: r,
                max,
                ..
            }) => {
                assert!(count == n_tensors || count == n_kv);
                assert_eq!(r, remaining);
                assert!(max <= remaining / 13, "max {max}");
            }
            other => panic!("({n_tensors}, {n_kv}): expected CountTooLarge, got {other:?}"),
        }
    }
    // Copying a file whose `general.alignment` is 2^31 (legal) through the
    // writer: its padding must not come from a buffer of that size.
    let mut w = Writer::new();
    w.alignment(1 << 31).unwrap();
    let bytes = w.to_bytes().unwrap();
    let copy = Writer::from_gguf(&Gguf::parse(&bytes).unwrap())
        .unwrap()
        .to_bytes()
        .unwrap();
    assert_eq!(copy, bytes);

    // The same alignment with a tensor, so padding is written twice: from
    // the end of the header to 2^31, and from the tensor's one byte to 2^32.
    // The sink sees every buffer (through `black_box`, so no write can be
    // optimised away) and records where the nonzero bytes land.
    let mut w = Writer::new();
    w.alignment(1 << 31)
        .unwrap()
        .add_tensor("t", GgmlType::I8, &[1], &[0x5a_u8][..])
        .unwrap();
    let mut sink = Counting::default();
    let written = w.write_to(&mut sink).unwrap();
    assert_eq!((written, sink.len), (1 << 32, 1 << 32));
    let header_len = bytes.len() as u64 + 8 + 1 + 4 + 8 + 4 + 8;
    assert!(sink.nonzero_before < header_len, "{}", sink.nonzero_before);
    assert_eq!(sink.marks, [(1u64 << 31, 0x5a)]);

    // A `Vec` sized from any of those numbers would have reserved gigabytes.
    match (before, vm_peak_kib()) {
        (Some(before), Some(after)) => {
            let grown_kib = after.saturating_sub(before);
            assert!(
                grown_kib < 16 * 1024,
                "peak virtual memory grew by {grown_kib} KiB"
            );
        }
        _ => eprintln!("note: VmPeak unavailable on this OS; checked the errors only"),
    }
}
