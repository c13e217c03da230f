//! Finding leaked canaries in a response.
//!
//! The response text is split into plain and marked segments so the page can
//! wrap every verbatim occurrence of another tenant's canary in `<mark>`
//! without ever building HTML from strings.

/// A piece of the response text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Plain(String),
    Canary(String),
}

/// Split `text` around every occurrence of any of `canaries` (leftmost,
/// longest first when two start at the same place).
pub fn segments(text: &str, canaries: &[String]) -> Vec<Segment> {
    let needles: Vec<&str> = canaries
        .iter()
        .map(String::as_str)
        .filter(|c| !c.is_empty())
        .collect();
    let mut out = Vec::new();
    let mut plain_start = 0;
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let hit = needles
            .iter()
            .filter(|n| rest.starts_with(**n))
            .max_by_key(|n| n.len());
        if let Some(hit) = hit {
            if plain_start < i {
                out.push(Segment::Plain(text[plain_start..i].to_string()));
            }
            out.push(Segment::Canary(hit.to_string()));
            i += hit.len();
            plain_start = i;
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    if plain_start < text.len() {
        out.push(Segment::Plain(text[plain_start..].to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_every_occurrence() {
        let got = segments("a CANARY-acme-1 b CANARY-acme-1", &["CANARY-acme-1".into()]);
        assert_eq!(
            got,
            vec![
                Segment::Plain("a ".into()),
                Segment::Canary("CANARY-acme-1".into()),
                Segment::Plain(" b ".into()),
                Segment::Canary("CANARY-acme-1".into()),
            ]
        );
        assert_eq!(segments("è ok", &[]), vec![Segment::Plain("è ok".into())]);
    }
}
