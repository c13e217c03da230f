//! The README of a bundle: generated from the index, checked by what it
//! states.
//!
//! The README is not signed itself. [`readme`] writes it from the index:
//! prose on what the folder is and how to check it, and one table row per
//! receipt whose cells are facts (file, scale, switches, HTTP status,
//! outcome). [`check_readme`] reads every such row back and requires it to
//! state exactly what the index says, each receipt once; the prose around
//! the tables is not compared, so rewording it (or the sentences a renderer
//! makes from the same facts) leaves every published bundle verifying,
//! while a README that misstates a fact, drops a receipt or invents one is
//! refused.

use std::collections::BTreeMap;
use std::str::FromStr;

use super::index::{BundleIndex, IndexEntry};
use super::others::OtherEntry;
use crate::predicate::{Fix, Outcome, PoisonMode, Scale};

/// The switches as `a, b`, or `none`.
fn fixes_cell(fixes: &[Fix]) -> String {
    if fixes.is_empty() {
        return "none".into();
    }
    fixes
        .iter()
        .map(|f| f.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A receipt's row: `| file | scale | fixes | poison-on-free | HTTP | outcome | foreign pages read |`.
fn receipt_row(e: &IndexEntry) -> String {
    format!(
        "| `{}` | {} | {} | {} | {} | {} | {} |\n",
        e.file,
        e.scale,
        fixes_cell(&e.fixes),
        e.poison_on_free,
        e.verdict.http_status,
        e.verdict.outcome,
        e.verdict.foreign_pages_read,
    )
}

/// Another kind's row: `| file | kind | result |`.
fn other_row(o: &OtherEntry) -> String {
    format!(
        "| `{}` | {} | {} |\n",
        o.file,
        o.facts.kind(),
        o.facts.result().replace('|', "\\|")
    )
}

/// The README of a bundle, generated from its index.
pub fn readme(index: &BundleIndex) -> String {
    let rows: String = index.receipts.iter().map(receipt_row).collect();
    let others = others_section(&index.others);
    let (what, probe_table) = if index.receipts.is_empty() {
        (audit_intro(&index.others), String::new())
    } else {
        (probe_intro(&index.predicate_type), probe_table(&rows))
    };
    format!(
        r#"# kvwitness evidence bundle

{what}

- `kvw.pub.json` is the ed25519 public key that signed every receipt
  (keyid `{keyid}`, the SHA-256 of the raw key). Anyone holding this folder
  can check integrity with it; to know *who* signed, compare the keyid with
  one you obtained from the publisher by another channel.
- `index.json` lists every receipt with its configuration, verdict and digests.
- `manifest.json` is a signed in-toto Statement whose subjects are every
  receipt and `index.json`: removing, adding or renaming a receipt breaks it.
- `README.md` (this file) is generated from `index.json`; `kvw verify`
  reads back every row of the tables below and refuses a bundle whose
  README states anything the index does not.
- `SHA256SUMS` lists the SHA-256 of every other file.

{probe_table}{others}
## How to verify

With kvwitness (checks every digest, signature, index entry and step):

```sh
kvw verify .                        # with the key in this folder
kvw verify . --key trusted.pub.json # with a key you trust
kvw verify . --reproduce            # also re-run every probe and compare
```

With coreutils only (integrity of the files, not the signatures):

```sh
sha256sum -c SHA256SUMS
```

With Python's `securesystemslib` (an independent DSSE and ed25519 implementation):

```python
import json
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

key_dict = json.load(open("kvw.pub.json"))
key = SSlibKey.from_dict(key_dict["keyid"], key_dict)
envelope = Envelope.from_dict(json.load(open("receipts/<name>.json")))
envelope.verify([key], 1)  # raises VerificationError unless the signature is good
statement = json.loads(envelope.payload)
```

The subject digest of each statement is the SHA-256 of the predicate in
RFC 8785 canonical JSON (JCS), e.g. `hashlib.sha256(rfc8785.dumps(predicate))`
with Python's `rfc8785` package; the payload itself is the JCS form of the
statement, byte for byte.
"#,
        keyid = index.keyid,
    )
}

/// What the folder is, for a bundle of probe runs.
fn probe_intro(predicate_type: &str) -> String {
    format!(
        "This folder holds signed records of kvwitness probe runs. Each file in
`receipts/` is one run of the prefill/decode KV-cache isolation probe: a
DSSE envelope (payload type `application/vnd.in-toto+json`) whose payload is
an in-toto Statement v1 with predicate type
`{predicate_type}`. The predicate records
the full configuration, the seven steps of the request's life with the pages
it reserved, received and read, and the verdict."
    )
}

/// What the folder is, for a bundle without probe runs (`kvw audit --out`):
/// the endpoints audited are facts of the index, the prose is not compared.
fn audit_intro(others: &[OtherEntry]) -> String {
    let mut endpoints: Vec<&str> = others
        .iter()
        .filter_map(|o| match &o.facts {
            super::others::OtherFacts::Audit { endpoint, .. } => Some(endpoint.as_str()),
            _ => None,
        })
        .collect();
    endpoints.sort_unstable();
    endpoints.dedup();
    let audited = match endpoints.as_slice() {
        [] => String::new(),
        list => format!(
            " of {}",
            list.iter()
                .map(|e| format!("`{}`", e.replace(['`', '\n', '\r', '|'], "'")))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!(
        "This folder holds the signed receipts of an audit{audited} by `kvw audit`.
Each file in `receipts/` is one gate: a DSSE envelope (payload type
`application/vnd.in-toto+json`) whose payload is an in-toto Statement v1
recording the gate's result, the reason, the measured facts and every
request and response it relied on, with API keys replaced by tenant labels.
`kvw site build --bundle . --out SITE` renders it as a report page."
    )
}

/// The table of probe runs.
fn probe_table(rows: &str) -> String {
    format!(
        "## Receipts

`outcome` is `leak` (another tenant's data reached the answer),
`wrong-answer`, `correct` or `refused` (an error, no foreign data).

| file | scale | fixes | poison-on-free | HTTP | outcome | foreign pages read |
|---|---|---|---|---|---|---|
{rows}"
    )
}

/// The README's table of receipts of other kinds, empty when there are none.
fn others_section(others: &[OtherEntry]) -> String {
    if others.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "\n## Other receipts\n\nModel checks, scenario runs, gate runs, randomized runs and audits, each\nunder its own predicate type, signed by the same key and listed in the\nmanifest.\n\n| file | kind | result |\n|---|---|---|\n",
    );
    text.extend(others.iter().map(other_row));
    text
}

/// The cells of a Markdown table row, `\|` kept inside a cell.
fn cells(line: &str) -> Option<Vec<String>> {
    let inner = line.trim().strip_prefix('|')?.strip_suffix('|')?;
    let mut out = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                out.last_mut()?.push('|');
            }
            '|' => out.push(String::new()),
            c => out.last_mut()?.push(c),
        }
    }
    Some(out.into_iter().map(|c| c.trim().to_string()).collect())
}

/// The facts a receipt row states.
#[derive(Debug, PartialEq, Eq)]
struct RowFacts {
    scale: Scale,
    fixes: Vec<Fix>,
    poison_on_free: PoisonMode,
    http_status: u16,
    outcome: Outcome,
    foreign_pages_read: u64,
}

impl RowFacts {
    fn of(e: &IndexEntry) -> RowFacts {
        RowFacts {
            scale: e.scale,
            fixes: e.fixes.clone(),
            poison_on_free: e.poison_on_free,
            http_status: e.verdict.http_status,
            outcome: e.verdict.outcome,
            foreign_pages_read: e.verdict.foreign_pages_read,
        }
    }

    /// What a receipt row states, read back into typed values.
    fn read(cells: &[String]) -> Result<RowFacts, String> {
        let [_, scale, fixes, poison, http, outcome, foreign] = cells else {
            return Err(format!("{} cells, expected 7", cells.len()));
        };
        let fixes = match fixes.as_str() {
            "none" => Vec::new(),
            list => list
                .split(',')
                .map(|f| Fix::from_str(f.trim()).map_err(|e| e.to_string()))
                .collect::<Result<_, _>>()?,
        };
        let number = |what: &str, s: &str| format!("{what} {s:?} is not a number");
        Ok(RowFacts {
            scale: Scale::from_str(scale).map_err(|e| e.to_string())?,
            fixes,
            poison_on_free: PoisonMode::from_str(poison).map_err(|e| e.to_string())?,
            http_status: http.parse().map_err(|_| number("HTTP status", http))?,
            outcome: Outcome::from_str(outcome).map_err(|e| e.to_string())?,
            foreign_pages_read: foreign
                .parse()
                .map_err(|_| number("foreign page count", foreign))?,
        })
    }

    /// The facts in a few words, for an error line.
    fn words(&self) -> String {
        format!(
            "scale {}, fixes {}, poison-on-free {}, HTTP {}, outcome {}, {} foreign page(s)",
            self.scale,
            fixes_cell(&self.fixes),
            self.poison_on_free,
            self.http_status,
            self.outcome,
            self.foreign_pages_read
        )
    }
}

/// Check that the README states what the index says: every table row
/// naming a receipt (`| \`receipts/…\` | …`) states that receipt's facts,
/// and every receipt of the index has exactly one row. The prose is not
/// compared. `Err` says which row is wrong, and how.
pub fn check_readme(text: &str, index: &BundleIndex) -> Result<(), String> {
    let mut probes: BTreeMap<&str, &IndexEntry> = index
        .receipts
        .iter()
        .map(|e| (e.file.as_str(), e))
        .collect();
    let mut others: BTreeMap<&str, &OtherEntry> =
        index.others.iter().map(|e| (e.file.as_str(), e)).collect();
    for line in text.lines() {
        let Some(cells) = cells(line) else { continue };
        let Some(file) = cells
            .first()
            .and_then(|c| c.strip_prefix('`'))
            .and_then(|c| c.strip_suffix('`'))
            .filter(|c| c.starts_with(super::RECEIPTS_DIR))
        else {
            continue;
        };
        let wrong = |why: String| format!("the row of {file} {why}");
        if let Some(e) = probes.remove(file) {
            let stated =
                RowFacts::read(&cells).map_err(|e| wrong(format!("does not read: {e}")))?;
            let facts = RowFacts::of(e);
            if stated != facts {
                return Err(wrong(format!(
                    "states {}, the index says {}",
                    stated.words(),
                    facts.words()
                )));
            }
        } else if let Some(o) = others.remove(file) {
            let stated = (cells.get(1), cells.get(2), cells.len());
            let result = o.facts.result();
            if stated != (Some(&o.facts.kind().to_string()), Some(&result), 3) {
                return Err(wrong(format!(
                    "does not state kind {} and result {result}",
                    o.facts.kind()
                )));
            }
        } else if index.receipts.iter().any(|e| e.file == file)
            || index.others.iter().any(|e| e.file == file)
        {
            return Err(format!("{file} has more than one row"));
        } else {
            return Err(format!("a row names {file}, which the index does not list"));
        }
    }
    match probes.keys().chain(others.keys()).next() {
        Some(file) => Err(format!("no row for {file}")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_keep_escaped_pipes() {
        assert_eq!(
            cells("| `a` | b \\| c | d |"),
            Some(vec!["`a`".into(), "b | c".into(), "d".into()])
        );
        assert_eq!(cells("not a row"), None);
    }
}
