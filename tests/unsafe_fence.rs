//! The crate's rule, checked by `cargo test`: `unsafe` code appears only in
//! `src/unsafe_core/`, and only `src/lib.rs` opens that door.

use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of one line: string literals blanked, `//` comment cut.
fn code_of(line: &str) -> String {
    let mut code = String::with_capacity(line.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            match (escaped, c) {
                (false, '\\') => escaped = true,
                (false, '"') => {
                    in_string = false;
                    code.push('"');
                }
                _ => escaped = false,
            }
        } else if c == '"' {
            in_string = true;
            code.push('"');
        } else if c == '/' && chars.peek() == Some(&'/') {
            break;
        } else {
            code.push(c);
        }
    }
    code
}

/// Whether a line uses the `unsafe` keyword as code.
fn uses_unsafe(line: &str) -> bool {
    let code = code_of(line);
    let code = code.as_str();
    let bytes = code.as_bytes();
    code.match_indices("unsafe").any(|(i, _)| {
        let before = i.checked_sub(1).map(|j| bytes[j]);
        let after = code[i + "unsafe".len()..].trim_start();
        let word_start = before.is_none_or(|b| !(b.is_ascii_alphanumeric() || b == b'_'));
        word_start
            && (after.starts_with('{')
                || after.starts_with("fn ")
                || after.starts_with("impl")
                || after.starts_with("trait ")
                || after.starts_with("extern "))
    })
}

#[test]
fn no_unsafe_outside_the_core() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "src",
        "tests",
        "benches",
        "examples",
        "fuzz/fuzz_targets",
        "fuzz/src",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 5, "found only {} Rust files", files.len());
    let core = root.join("src/unsafe_core");
    let mut offenders = Vec::new();
    for file in &files {
        if file.starts_with(&core) {
            continue;
        }
        let text = fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if uses_unsafe(line) {
                offenders.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
            if code_of(line).contains("allow(unsafe_code)") && !file.ends_with("src/lib.rs") {
                offenders.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "unsafe outside src/unsafe_core:\n{}",
        offenders.join("\n")
    );
    let lib = fs::read_to_string(root.join("src/lib.rs")).unwrap();
    assert_eq!(lib.matches("allow(unsafe_code)").count(), 1);
    assert!(lib.contains("#![deny(unsafe_code)]"));
}

#[test]
fn detector_sees_unsafe_code() {
    // The check above is only as good as this detector.
    assert!(uses_unsafe("    unsafe { x }"));
    assert!(uses_unsafe("pub unsafe fn f() {}"));
    assert!(uses_unsafe("unsafe impl Send for X {}"));
    assert!(!uses_unsafe("// unsafe { x }"));
    assert!(!uses_unsafe("let s = \"unsafe { }\";"));
    assert!(uses_unsafe("let s = \"a\\\"b\"; unsafe { x }"));
    assert!(!uses_unsafe("deny(unsafe_code)"));
    assert!(!uses_unsafe("fn not_unsafe() {}"));
}
