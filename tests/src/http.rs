//! Raw HTTP/1.1 over 127.0.0.1: the request goes out byte for byte as the
//! test wrote it and the answer is read to its end, so a test sees exactly
//! what a client would (no client library normalising either side).
//!
//! Every read is bounded ([`READ_TIMEOUT`] unless a test gives its own): a
//! server that never answers ends the exchange with what arrived, status 0
//! when nothing did, instead of hanging the test.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How long a read waits for the next bytes before the exchange ends.
pub const READ_TIMEOUT: Duration = Duration::from_secs(15);

/// A response as it arrived.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code; 0 when no status line arrived.
    pub status: u16,
    /// Status line and headers, as sent.
    pub head: String,
    /// Everything after the blank line, as sent.
    pub body: Vec<u8>,
}

impl Response {
    /// Split raw response bytes into status, head and body.
    pub fn parse(bytes: &[u8]) -> Response {
        let (head, body) = match bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            Some(at) => (&bytes[..at], bytes[at + 4..].to_vec()),
            None => (bytes, Vec::new()),
        };
        let head = String::from_utf8_lossy(head).into_owned();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        Response { status, head, body }
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The value of header `name` (case-insensitive), the first one sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// Connect to 127.0.0.1:`port` with reads bounded by `timeout`.
pub fn connect(port: u16, timeout: Duration) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    s
}

/// Everything the peer sends until it closes (or a read times out).
pub fn read_all(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// Send `raw` as is and read the answer; a write the server cut short is
/// not an error (the answer, if any, says why).
pub fn exchange(port: u16, raw: &[u8], timeout: Duration) -> Response {
    let mut s = connect(port, timeout);
    let _ = s.write_all(raw);
    Response::parse(&read_all(&mut s))
}

/// The bytes of `line` (`METHOD /target`) as HTTP/1.1 with `Host` and
/// `Connection: close`, then `headers`, `Content-Length` and `body`.
pub fn request_bytes(line: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    let mut raw = format!("{line} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for h in headers {
        raw.push_str(h);
        raw.push_str("\r\n");
    }
    raw.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut raw = raw.into_bytes();
    raw.extend_from_slice(body);
    raw
}

/// One request (see [`request_bytes`]) and its answer.
pub fn send(port: u16, line: &str, headers: &[&str], body: &[u8]) -> Response {
    exchange(port, &request_bytes(line, headers, body), READ_TIMEOUT)
}

/// `GET target` with `headers`.
pub fn get(port: u16, target: &str, headers: &[&str]) -> Response {
    send(port, &format!("GET {target}"), headers, b"")
}

/// `POST target` of a JSON `body`, with `Authorization: Bearer key` when a
/// key is given.
pub fn post_json(port: u16, target: &str, key: Option<&str>, body: &[u8]) -> Response {
    let auth = key.map(|k| format!("Authorization: Bearer {k}"));
    let mut headers = vec!["Content-Type: application/json"];
    headers.extend(auth.as_deref());
    send(port, &format!("POST {target}"), &headers, body)
}

/// The bytes of a chunked POST of `times` chunks of `chunk` to `target`,
/// with the final empty chunk.
pub fn chunked_bytes(target: &str, headers: &[&str], chunk: &[u8], times: usize) -> Vec<u8> {
    let mut raw = format!(
        "POST {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n"
    );
    for h in headers {
        raw.push_str(h);
        raw.push_str("\r\n");
    }
    raw.push_str("\r\n");
    let mut raw = raw.into_bytes();
    for _ in 0..times {
        raw.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        raw.extend_from_slice(chunk);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    raw
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_splits_into_status_head_and_body() {
        let r = Response::parse(
            b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n\r\nno\r\n\r\nmore",
        );
        assert_eq!(r.status, 404);
        assert_eq!(r.header("content-type"), Some("text/plain"));
        assert_eq!(r.text(), "no\r\n\r\nmore");
        let none = Response::parse(b"");
        assert_eq!((none.status, none.body.len()), (0, 0));
    }

    #[test]
    fn a_request_carries_its_length_and_closes() {
        let raw = request_bytes("POST /x", &["A: b"], b"{}");
        assert_eq!(
            raw,
            b"POST /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\nA: b\r\nContent-Length: 2\r\n\r\n{}"
        );
        let c = chunked_bytes("/y", &[], b"ab", 2);
        assert!(c.ends_with(b"2\r\nab\r\n2\r\nab\r\n0\r\n\r\n"));
    }
}
