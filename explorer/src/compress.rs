//! Precompressed copies of a site's static files.
//!
//! A static server can answer `Accept-Encoding: br` or `gzip` with a file
//! written once at build time instead of compressing on every request. For
//! every text-like file (HTML, CSS, JS, JSON, WASM, Markdown) this writes
//! `<file>.gz` (gzip, level 9) and `<file>.br` (brotli, quality 9) next to
//! it, skipping a copy that would not be smaller.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Extensions that get compressed copies.
const COMPRESSIBLE: [&str; 7] = ["html", "css", "js", "json", "wasm", "md", "txt"];

/// Brotli quality: 9 is within a few percent of 11 and several times faster.
const BROTLI_QUALITY: u32 = 9;
const BROTLI_WINDOW: u32 = 22;

/// Bytes written per encoding, for the build report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Compressed {
    pub files: usize,
    pub raw: u64,
    pub gzip: u64,
    pub brotli: u64,
}

/// gzip of `bytes` at level 9.
pub fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(bytes)?;
    enc.finish()
}

/// brotli of `bytes`.
pub fn brotli(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    {
        let mut enc =
            brotli::CompressorWriter::new(&mut out, 64 * 1024, BROTLI_QUALITY, BROTLI_WINDOW);
        enc.write_all(bytes)?;
        enc.flush()?;
    }
    Ok(out)
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            files_under(&entry.path(), out)?;
        } else if kind.is_file() {
            out.push(entry.path());
        }
    }
    Ok(())
}

/// Write `.gz` and `.br` next to every compressible file under `dir`.
pub fn precompress(dir: &Path) -> std::io::Result<Compressed> {
    let mut files = Vec::new();
    files_under(dir, &mut files)?;
    files.sort();
    let mut total = Compressed::default();
    for path in files {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !COMPRESSIBLE.contains(&ext) {
            continue;
        }
        let bytes = fs::read(&path)?;
        total.files += 1;
        total.raw += bytes.len() as u64;
        for (suffix, packed) in [("gz", gzip(&bytes)?), ("br", brotli(&bytes)?)] {
            if packed.len() >= bytes.len() {
                continue;
            }
            let mut name = path.clone().into_os_string();
            name.push(".");
            name.push(suffix);
            fs::write(PathBuf::from(name), &packed)?;
            match suffix {
                "gz" => total.gzip += packed.len() as u64,
                _ => total.brotli += packed.len() as u64,
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn copies_decompress_to_the_original_and_are_smaller() {
        let dir = tempfile::tempdir().unwrap();
        let html = "<p>kvwitness</p>\n".repeat(500);
        fs::write(dir.path().join("a.html"), &html).unwrap();
        fs::write(dir.path().join("b.png"), [0u8; 2000]).unwrap();
        let report = precompress(dir.path()).unwrap();
        assert_eq!(report.files, 1, "only compressible extensions");
        let gz = fs::read(dir.path().join("a.html.gz")).unwrap();
        let mut back = String::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_string(&mut back)
            .unwrap();
        assert_eq!(back, html);
        let br = fs::read(dir.path().join("a.html.br")).unwrap();
        let mut back = Vec::new();
        brotli::Decompressor::new(&br[..], 4096)
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, html.as_bytes());
        assert!(br.len() < html.len() / 10 && gz.len() < html.len() / 10);
        assert!(!dir.path().join("b.png.gz").exists());
    }
}
