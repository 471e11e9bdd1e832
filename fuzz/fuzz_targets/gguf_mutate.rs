//! Structure-aware: build a valid file with the writer from the input, check
//! it reads back exactly, then overwrite some of its header fields (found by
//! walking the file) with boundary values (counts, lengths, type ids, dims,
//! offsets) and parse again. The first half exercises the writer and the
//! happy path; the second reaches deep validation paths that random bytes
//! rarely get past.
#![no_main]

use inferno_cpu::gguf::{Array, GgmlType, Gguf, Value, Writer};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

fn value(u: &mut Unstructured<'_>, depth: usize) -> Result<Value> {
    Ok(match u.int_in_range(0..=12u8)? {
        0 => Value::U8(u.arbitrary()?),
        1 => Value::I8(u.arbitrary()?),
        2 => Value::U16(u.arbitrary()?),
        3 => Value::I16(u.arbitrary()?),
        4 => Value::U32(u.arbitrary()?),
        5 => Value::I32(u.arbitrary()?),
        6 => Value::F32(u.arbitrary()?),
        7 => Value::Bool(u.arbitrary()?),
        8 => Value::String(u.arbitrary()?),
        9 if depth < 3 => Value::Array(array(u, depth + 1)?),
        10 => Value::U64(u.arbitrary()?),
        11 => Value::I64(u.arbitrary()?),
        _ => Value::F64(u.arbitrary()?),
    })
}

fn array(u: &mut Unstructured<'_>, depth: usize) -> Result<Array> {
    let n = u.int_in_range(0..=6usize)?;
    Ok(match u.int_in_range(0..=6u8)? {
        0 => Array::U8(u.arbitrary()?),
        1 => Array::I32((0..n).map(|_| u.arbitrary()).collect::<Result<_>>()?),
        2 => Array::F32((0..n).map(|_| u.arbitrary()).collect::<Result<_>>()?),
        3 => Array::Bool((0..n).map(|_| u.arbitrary()).collect::<Result<_>>()?),
        4 => Array::String((0..n).map(|_| u.arbitrary()).collect::<Result<_>>()?),
        5 if depth < 3 => Array::Array((0..n).map(|_| array(u, depth + 1)).collect::<Result<_>>()?),
        _ => Array::U64((0..n).map(|_| u.arbitrary()).collect::<Result<_>>()?),
    })
}

/// A valid file described by the input.
fn build(u: &mut Unstructured<'_>) -> Result<Vec<u8>> {
    let mut w = Writer::new();
    if u.arbitrary()? {
        w.version(2);
    }
    if u.arbitrary()? {
        let shift = u.int_in_range(3..=12u32)?;
        w.alignment(1 << shift).expect("power of two");
    }
    for i in 0..u.int_in_range(0..=6usize)? {
        // Mostly valid keys (lower-case ASCII segments); sometimes any
        // string, which the writer refuses like the reader would.
        let tail: &str = u.arbitrary()?;
        let key = if u.arbitrary()? {
            format!("k{i}.{tail}")
        } else {
            let seg: String = tail
                .bytes()
                .map(|b| b"abcdefghijklmnopqrstuvwxyz0123456789_-"[usize::from(b) % 38] as char)
                .collect();
            format!("k{i}.x{seg}")
        };
        let _ = w.add(&key, value(u, 0)?);
    }
    let mut datas = Vec::new();
    for i in 0..u.int_in_range(0..=4usize)? {
        let ty = *u.choose(GgmlType::ALL)?;
        let n_dims = u.int_in_range(1..=4usize)?;
        let mut dims = vec![ty.block_size() * u.int_in_range(1..=3u64)?];
        for _ in 1..n_dims {
            dims.push(u.int_in_range(1..=3u64)?);
        }
        let n: u64 = dims.iter().product();
        let len = ty.bytes_for(n).expect("whole blocks") as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|j| (j as u8).wrapping_mul(31) ^ i as u8)
            .collect();
        datas.push((format!("t{i}"), ty, dims, bytes));
    }
    for (name, ty, dims, bytes) in &datas {
        w.add_tensor(name, *ty, dims, bytes.as_slice())
            .expect("valid tensor");
    }
    Ok(w.to_bytes().expect("write to Vec"))
}

const INTERESTING: [u64; 16] = [
    0,
    1,
    2,
    3,
    4,
    5,
    31,
    32,
    0x7f,
    0xff,
    1 << 31,
    u32::MAX as u64,
    1 << 32,
    1 << 60,
    1 << 63,
    u64::MAX,
];

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(mut file) = build(&mut u) else { return };
    {
        let gguf = Gguf::parse(&file).expect("writer output parses");
        inferno_cpu_fuzz::touch(&gguf);
    }
    inferno_cpu_fuzz::check(&file);

    // Overwrite 1..=4 header fields (counts, lengths, type ids, dims,
    // offsets, values) with boundary values, at the field's own width.
    let fields = inferno_cpu_fuzz::fields(&file);
    if fields.is_empty() {
        return;
    }
    let Ok(n) = u.int_in_range(1..=4usize) else {
        return;
    };
    for _ in 0..n {
        let (Ok(field), Ok(pick), Ok(delta)) = (
            u.choose(&fields),
            u.int_in_range(0..=INTERESTING.len()),
            u.int_in_range(-2i64..=2),
        ) else {
            break;
        };
        let base = if pick == INTERESTING.len() {
            file.len() as u64
        } else {
            INTERESTING[pick]
        };
        let v = base.wrapping_add_signed(delta).to_le_bytes();
        file[field.at..field.at + field.width].copy_from_slice(&v[..field.width]);
    }
    if u.arbitrary().unwrap_or(false) {
        let cut = u.int_in_range(0..=file.len()).unwrap_or(file.len());
        file.truncate(cut);
    }
    inferno_cpu_fuzz::with_aligned(&file, inferno_cpu_fuzz::check);
});
