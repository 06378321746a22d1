//! README.md's configuration tables against the code: every environment variable the
//! broker reads is documented, and every variable documented there is read.
//!
//! "Read" is found in the source text: a string literal shaped like a variable name
//! (upper case with at least one `_`) anywhere in `src/` or `proxy/src/`, or any upper-case literal
//! passed as the first argument of a call (`env.parse("PORT", ...)` — this catches
//! names without `_`). Unit-test modules (from `#[cfg(test)]` on) and compile-time
//! `env!(...)` names are not the broker reading its environment, and are skipped.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

fn rust_files(dir: &Path, out: &mut Vec<String>) {
    for e in fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = fs::read_to_string(&p).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            out.push(code.to_string());
        }
    }
}

fn is_name(s: &str) -> bool {
    s.len() >= 3
        && s.starts_with(|c: char| c.is_ascii_uppercase())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Every `"LITERAL"` in `text` with the text just before its opening quote.
fn literals(text: &str) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(i) = rest.find('"') {
        let start = offset + i + 1;
        let Some(j) = text[start..].find('"') else {
            break;
        };
        let lit = &text[start..start + j];
        out.push((lit.to_string(), &text[..start - 1]));
        offset = start + j + 1;
        rest = &text[offset..];
    }
    out
}

fn read_by_code() -> BTreeSet<String> {
    let mut files = Vec::new();
    // The broker and the front proxy (proxy/src) share one configuration section.
    for dir in ["src", "proxy/src"] {
        rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir), &mut files);
    }
    let mut names = BTreeSet::new();
    for f in &files {
        for (lit, before) in literals(f) {
            if !is_name(&lit) || before.ends_with("env!(") {
                continue;
            }
            let call_arg = before.trim_end().ends_with('(');
            if lit.contains('_') || call_arg {
                names.insert(lit);
            }
        }
    }
    names
}

/// The backquoted names in the first column of the tables under `## Configuration`.
fn documented() -> BTreeSet<String> {
    let readme = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("read README.md");
    let start = readme
        .find("\n## Configuration")
        .expect("README.md has a ## Configuration section");
    let section = &readme[start + 1..];
    let end = section[3..].find("\n## ").map_or(section.len(), |i| i + 3);
    let mut names = BTreeSet::new();
    for line in section[..end].lines() {
        let Some(first) = line.strip_prefix('|').and_then(|l| l.split('|').next()) else {
            continue;
        };
        for part in first.split('`').skip(1).step_by(2) {
            if is_name(part) {
                names.insert(part.to_string());
            }
        }
    }
    names
}

#[test]
fn every_variable_the_broker_reads_is_in_the_readme() {
    let code = read_by_code();
    let docs = documented();
    assert!(
        code.len() > 50,
        "found only {} variables in src/",
        code.len()
    );
    let missing: Vec<_> = code.difference(&docs).collect();
    assert!(
        missing.is_empty(),
        "read in src/ but not in README.md's configuration tables: {missing:?}"
    );
}

#[test]
fn every_variable_in_the_readme_is_read_by_the_broker() {
    let code = read_by_code();
    let stale: Vec<_> = documented().difference(&code).cloned().collect();
    assert!(
        stale.is_empty(),
        "in README.md's configuration tables but read nowhere in src/: {stale:?}"
    );
}
