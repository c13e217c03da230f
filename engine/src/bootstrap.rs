//! The bootstrap connection of a split PD pair: how KV moves between a
//! prefill process and a decode process.
//!
//! Upstream, the router adds `bootstrap_host`, `bootstrap_port` and
//! `bootstrap_room` to the request it sends both workers; the decode
//! worker's receiver reaches the prefill's bootstrap server at that address
//! and registers the pages it reserved for the room, and the prefill's
//! sender writes its pages into them (Mooncake over RDMA, or NIXL). Here the
//! same exchange runs over TCP: decode opens one connection per room to the
//! prefill's bootstrap address and sends [`Wire::Register`]; prefill answers
//! on it with [`Wire::Chunk`] and [`Wire::Page`], decode with
//! [`Wire::Ack`] and [`Wire::Close`]. What each side does with a message is
//! [`crate::sim::remote`]'s; this module only carries them.
//!
//! A peer may be hostile or broken: every frame is bounded
//! ([`MAX_FRAME`]), the first one must come within [`FIRST_FRAME_TIME`] and
//! must be a registration, a frame for another room ends the connection,
//! and the prefill takes at most [`MAX_CONNECTIONS`] at once. A connection
//! that ends is reported once, as [`Event::Lost`].

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::sim::Wire;

/// Largest frame either side reads (a registration of a million pages).
pub const MAX_FRAME: usize = 8 << 20;
/// Connections a prefill's bootstrap server holds at once.
pub const MAX_CONNECTIONS: usize = 1024;
/// Longest a new connection may take to register its room.
pub const FIRST_FRAME_TIME: Duration = Duration::from_secs(10);
/// Longest decode waits to reach the prefill's bootstrap address.
pub const CONNECT_TIME: Duration = Duration::from_secs(5);
/// Longest one frame may take to write before the connection is given up.
const WRITE_TIME: Duration = Duration::from_secs(30);

/// What a connection tells its worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A message of the peer.
    Message(Wire),
    /// The peer refused the room, with its reason.
    Refused(String),
    /// The connection ended (closed, broken, or a protocol error), once.
    Lost(String),
}

/// One frame on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Frame {
    Msg(Wire),
    Refused { room: u64, reason: String },
}

/// What a worker hears of one connection.
#[derive(Debug)]
pub struct Heard {
    pub room: u64,
    /// The connection it came on ([`Link::id`]): a room's messages count
    /// only on the connection that registered it.
    pub conn: u64,
    pub event: Event,
    /// For a new registration, the link to answer on.
    pub link: Option<Link>,
}

/// Where a worker hears of its connections.
pub type Report = Arc<dyn Fn(Heard) + Send + Sync>;

/// Names every connection of the process.
static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// The sending half of one room's connection. Frames are written in order
/// by the link's own thread; dropping the link flushes what was queued and
/// closes the connection.
#[derive(Debug)]
pub struct Link {
    id: u64,
    tx: mpsc::Sender<Frame>,
}

impl Link {
    /// The connection this link writes to.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Queue a message for the peer (dropped if the connection is gone).
    pub fn send(&self, msg: Wire) {
        let _ = self.tx.send(Frame::Msg(msg));
    }

    /// Tell the peer its room is refused; the caller then drops the link.
    pub fn refuse(&self, room: u64, reason: &str) {
        let _ = self.tx.send(Frame::Refused {
            room,
            reason: reason.to_string(),
        });
    }
}

/// Start the thread that writes `rx`'s frames to `stream` and closes it
/// once the link is dropped.
fn writer(mut stream: TcpStream, rx: mpsc::Receiver<Frame>) {
    let _ = stream.set_write_timeout(Some(WRITE_TIME));
    let spawned = std::thread::Builder::new()
        .name("kvw-bootstrap-write".into())
        .spawn(move || {
            for frame in rx {
                if stream.write_all(&encode(&frame)).is_err() {
                    break;
                }
            }
            let _ = stream.shutdown(Shutdown::Both);
        });
    if let Err(e) = spawned {
        tracing::warn!("bootstrap: no thread for a connection's writes: {e}");
    }
}

/// A prefill's bootstrap server: accepts decode connections until dropped.
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Serve `listener`; every registration and later message is reported.
    pub fn start(listener: TcpListener, report: Report) -> io::Result<Server> {
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let open = Arc::new(AtomicUsize::new(0));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("kvw-bootstrap".into())
            .spawn(move || {
                while !stopping.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            if open.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                                tracing::warn!(
                                    "bootstrap: {MAX_CONNECTIONS} connections open; one refused"
                                );
                                continue;
                            }
                            open.fetch_add(1, Ordering::Relaxed);
                            let (report, open) = (report.clone(), open.clone());
                            let spawned = std::thread::Builder::new()
                                .name("kvw-bootstrap-read".into())
                                .spawn(move || {
                                    serve_one(stream, &report);
                                    open.fetch_sub(1, Ordering::Relaxed);
                                });
                            if spawned.is_err() {
                                tracing::warn!("bootstrap: no thread for a connection");
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(20))
                        }
                        Err(e) => {
                            tracing::warn!("bootstrap: accept failed: {e}");
                            std::thread::sleep(Duration::from_millis(20))
                        }
                    }
                }
            })?;
        Ok(Server {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One decode connection on the prefill side: a registration first, then
/// that room's acks and closes until it ends.
fn serve_one(stream: TcpStream, report: &Report) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(FIRST_FRAME_TIME));
    let _ = stream.set_nodelay(true);
    let mut reader = stream;
    let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
    let room = match read_frame(&mut reader) {
        Ok(Some(Frame::Msg(msg @ Wire::Register { .. }))) => {
            let room = msg.room();
            let Ok(out) = reader.try_clone() else {
                return;
            };
            let (tx, rx) = mpsc::channel();
            writer(out, rx);
            report(Heard {
                room,
                conn,
                event: Event::Message(msg),
                link: Some(Link { id: conn, tx }),
            });
            room
        }
        Ok(Some(_)) => {
            tracing::warn!(
                "bootstrap: a connection began with something other than a registration; closed"
            );
            return;
        }
        Ok(None) => return,
        Err(e) => {
            tracing::warn!("bootstrap: a connection sent no registration: {e}");
            return;
        }
    };
    let _ = reader.set_read_timeout(None);
    let why = follow(&mut reader, room, conn, report);
    let _ = reader.shutdown(Shutdown::Both);
    report(Heard {
        room,
        conn,
        event: Event::Lost(why),
        link: None,
    });
}

/// Report the room's messages from `reader` until the connection ends;
/// returns why it ended.
fn follow(reader: &mut TcpStream, room: u64, conn: u64, report: &Report) -> String {
    let heard = |event| Heard {
        room,
        conn,
        event,
        link: None,
    };
    loop {
        match read_frame(reader) {
            Ok(Some(Frame::Msg(msg))) if msg.room() == room => report(heard(Event::Message(msg))),
            Ok(Some(Frame::Msg(msg))) => {
                return format!(
                    "a message for room {} on room {room}'s connection",
                    msg.room()
                )
            }
            Ok(Some(Frame::Refused { reason, .. })) => {
                report(heard(Event::Refused(reason)));
                return "refused".into();
            }
            Ok(None) => return "closed by the peer".into(),
            Err(e) => return e.to_string(),
        }
    }
}

/// Decode's side: reach the prefill's bootstrap server at `addr` and
/// register `register`'s room on a connection of its own. Everything that
/// comes back, and the connection's end, is reported.
pub fn connect(addr: SocketAddr, register: Wire, report: Report) -> Link {
    let room = register.room();
    let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel();
    let _ = tx.send(Frame::Msg(register));
    let lost = move |report: &Report, why: String| {
        report(Heard {
            room,
            conn,
            event: Event::Lost(why),
            link: None,
        })
    };
    let spawned = std::thread::Builder::new()
        .name("kvw-bootstrap-connect".into())
        .spawn(move || {
            let mut stream = match TcpStream::connect_timeout(&addr, CONNECT_TIME) {
                Ok(s) => s,
                Err(e) => {
                    let why = format!("cannot reach the prefill's bootstrap server at {addr}: {e}");
                    return lost(&report, why);
                }
            };
            let _ = stream.set_nodelay(true);
            match stream.try_clone() {
                Ok(out) => writer(out, rx),
                Err(e) => return lost(&report, e.to_string()),
            }
            let why = follow(&mut stream, room, conn, &report);
            lost(&report, why);
        });
    if let Err(e) = spawned {
        tracing::warn!("bootstrap: no thread to connect room {room}: {e}");
    }
    Link { id: conn, tx }
}

/// One message as it goes on the wire (for a peer written elsewhere, and
/// for tests that play a hostile one).
pub fn encode_message(msg: &Wire) -> Vec<u8> {
    encode(&Frame::Msg(msg.clone()))
}

/// Read one frame from a peer: a message, or `Err` with the reason the peer
/// refused the room; `None` once the connection ended cleanly.
pub fn read_message(r: &mut impl Read) -> io::Result<Option<Result<Wire, String>>> {
    Ok(read_frame(r)?.map(|f| match f {
        Frame::Msg(m) => Ok(m),
        Frame::Refused { reason, .. } => Err(reason),
    }))
}

/// Read one frame; `None` on a clean end before its first byte.
fn read_frame(r: &mut impl Read) -> io::Result<Option<Frame>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(invalid(format!(
            "a frame of {len} bytes (at most {MAX_FRAME})"
        )));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    decode(&body).map(Some)
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

const REGISTER: u8 = 1;
const CHUNK: u8 = 2;
const PAGE: u8 = 3;
const ACK: u8 = 4;
const CLOSE: u8 = 5;
const REFUSED: u8 = 6;

/// A frame: its body's length (u32), a tag, the room (u64), then the
/// tag's fields, all little-endian.
fn encode(frame: &Frame) -> Vec<u8> {
    let mut b = vec![0u8; 4];
    let room = match frame {
        Frame::Msg(m) => m.room(),
        Frame::Refused { room, .. } => *room,
    };
    let tag = match frame {
        Frame::Msg(Wire::Register { .. }) => REGISTER,
        Frame::Msg(Wire::Chunk { .. }) => CHUNK,
        Frame::Msg(Wire::Page { .. }) => PAGE,
        Frame::Msg(Wire::Ack { .. }) => ACK,
        Frame::Msg(Wire::Close { .. }) => CLOSE,
        Frame::Refused { .. } => REFUSED,
    };
    b.push(tag);
    b.extend(room.to_le_bytes());
    match frame {
        Frame::Msg(Wire::Register { dst_pages, .. }) => {
            b.extend((dst_pages.len() as u32).to_le_bytes());
            for p in dst_pages {
                b.extend(p.to_le_bytes());
            }
        }
        Frame::Msg(Wire::Chunk {
            pages,
            last,
            checksum,
            ..
        }) => {
            b.extend(pages.to_le_bytes());
            b.push(u8::from(*last));
            b.push(u8::from(checksum.is_some()));
            b.extend(checksum.unwrap_or(0).to_le_bytes());
        }
        Frame::Msg(Wire::Page {
            dst_page,
            generation,
            bytes,
            ..
        }) => {
            b.extend(dst_page.to_le_bytes());
            b.extend(generation.to_le_bytes());
            b.extend((bytes.len() as u32).to_le_bytes());
            for v in bytes {
                b.extend(v.to_le_bytes());
            }
        }
        Frame::Msg(Wire::Ack { .. } | Wire::Close { .. }) => {}
        Frame::Refused { reason, .. } => {
            b.extend((reason.len() as u32).to_le_bytes());
            b.extend(reason.as_bytes());
        }
    }
    let len = (b.len() - 4) as u32;
    b[..4].copy_from_slice(&len.to_le_bytes());
    b
}

/// Reads the fields of one frame body, refusing a short or long one.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        if self.0.len() < N {
            return Err(invalid("a frame cut short".into()));
        }
        let (head, rest) = self.0.split_at(N);
        self.0 = rest;
        Ok(head.try_into().unwrap_or([0; N]))
    }
    fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take::<1>()?[0])
    }
    fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    /// A count of items of `size` bytes that the rest of the body holds.
    fn count(&mut self, size: usize) -> io::Result<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(size) > self.0.len() {
            return Err(invalid(format!("a count of {n} past the frame's end")));
        }
        Ok(n)
    }
    fn end(&self) -> io::Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(invalid(format!(
                "{} bytes past a frame's fields",
                self.0.len()
            )))
        }
    }
}

fn decode(body: &[u8]) -> io::Result<Frame> {
    let mut f = Fields(body);
    let tag = f.u8()?;
    let room = f.u64()?;
    let frame = match tag {
        REGISTER => {
            let n = f.count(4)?;
            let dst_pages = (0..n).map(|_| f.u32()).collect::<io::Result<_>>()?;
            Frame::Msg(Wire::Register { room, dst_pages })
        }
        CHUNK => {
            let pages = f.u32()?;
            let last = f.u8()? == 1;
            let has = f.u8()? == 1;
            let sum = f.u32()?;
            Frame::Msg(Wire::Chunk {
                room,
                pages,
                last,
                checksum: has.then_some(sum),
            })
        }
        PAGE => {
            let dst_page = f.u32()?;
            let generation = f.u32()?;
            let n = f.count(2)?;
            let bytes = (0..n)
                .map(|_| f.take::<2>().map(u16::from_le_bytes))
                .collect::<io::Result<_>>()?;
            Frame::Msg(Wire::Page {
                room,
                dst_page,
                generation,
                bytes,
            })
        }
        ACK => Frame::Msg(Wire::Ack { room }),
        CLOSE => Frame::Msg(Wire::Close { room }),
        REFUSED => {
            let n = f.count(1)?;
            let raw = f.0[..n].to_vec();
            f.0 = &f.0[n..];
            Frame::Refused {
                room,
                reason: String::from_utf8_lossy(&raw).into_owned(),
            }
        }
        t => return Err(invalid(format!("a frame of unknown kind {t}"))),
    };
    f.end()?;
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frame: Frame) {
        let bytes = encode(&frame);
        let got = read_frame(&mut &bytes[..]).unwrap().unwrap();
        assert_eq!(got, frame);
    }

    #[test]
    fn every_frame_reads_back_as_written() {
        round_trip(Frame::Msg(Wire::Register {
            room: u64::MAX >> 1,
            dst_pages: vec![7, 0, 4_000_000],
        }));
        round_trip(Frame::Msg(Wire::Chunk {
            room: 1,
            pages: 3,
            last: true,
            checksum: Some(0xdead_beef),
        }));
        round_trip(Frame::Msg(Wire::Chunk {
            room: 1,
            pages: 0,
            last: false,
            checksum: None,
        }));
        round_trip(Frame::Msg(Wire::Page {
            room: 2,
            dst_page: 9,
            generation: 1,
            bytes: vec![0, 1, u16::MAX],
        }));
        round_trip(Frame::Msg(Wire::Ack { room: 3 }));
        round_trip(Frame::Msg(Wire::Close { room: 3 }));
        round_trip(Frame::Refused {
            room: 4,
            reason: "bootstrap room 4 is not one this worker serves".into(),
        });
    }

    #[test]
    fn hostile_frames_are_refused_without_reading_past_them() {
        // A length past the bound is refused before anything is allocated.
        let huge = ((MAX_FRAME + 1) as u32).to_le_bytes();
        assert!(read_frame(&mut &huge[..]).is_err());
        // A registration that claims more pages than it carries.
        let mut b = encode(&Frame::Msg(Wire::Register {
            room: 1,
            dst_pages: vec![1, 2],
        }));
        b[13..17].copy_from_slice(&1000u32.to_le_bytes());
        assert!(read_frame(&mut &b[..]).is_err());
        // Trailing bytes, an unknown kind, a frame cut short.
        let mut b = encode(&Frame::Msg(Wire::Ack { room: 1 }));
        b.push(0);
        b[..4].copy_from_slice(&10u32.to_le_bytes());
        assert!(read_frame(&mut &b[..]).is_err());
        let mut b = encode(&Frame::Msg(Wire::Ack { room: 1 }));
        b[4] = 99;
        assert!(read_frame(&mut &b[..]).is_err());
        let b = encode(&Frame::Msg(Wire::Close { room: 1 }));
        assert!(read_frame(&mut &b[..b.len() - 1]).is_err());
        // A clean end before a frame is no error.
        assert!(read_frame(&mut &[][..]).unwrap().is_none());
    }

    #[test]
    fn a_registration_reaches_the_server_and_its_answers_come_back() {
        let (to_test, events) = mpsc::channel();
        let report: Report = Arc::new(move |h: Heard| {
            let _ = to_test.send((h.room, h.event, h.link));
        });
        let server = Server::start(TcpListener::bind("127.0.0.1:0").unwrap(), report).unwrap();
        let (to_decode, heard) = mpsc::channel();
        let decode: Report = Arc::new(move |h: Heard| {
            let _ = to_decode.send((h.room, h.event));
        });
        let link = connect(
            server.addr(),
            Wire::Register {
                room: 5,
                dst_pages: vec![3, 4],
            },
            decode,
        );
        let wait = Duration::from_secs(10);
        let (room, event, prefill_link) = events.recv_timeout(wait).unwrap();
        assert_eq!(room, 5);
        assert!(matches!(event, Event::Message(Wire::Register { .. })));
        let prefill_link = prefill_link.unwrap();
        prefill_link.send(Wire::Chunk {
            room: 5,
            pages: 1,
            last: true,
            checksum: None,
        });
        let (_, e) = heard.recv_timeout(wait).unwrap();
        assert!(matches!(e, Event::Message(Wire::Chunk { pages: 1, .. })));
        link.send(Wire::Ack { room: 5 });
        let (_, e, _) = events.recv_timeout(wait).unwrap();
        assert_eq!(e, Event::Message(Wire::Ack { room: 5 }));
        // A message for another room ends the connection on both sides.
        link.send(Wire::Ack { room: 6 });
        let (_, e, _) = events.recv_timeout(wait).unwrap();
        assert!(
            matches!(e, Event::Lost(ref why) if why.contains("room 6")),
            "{e:?}"
        );
        drop(prefill_link);
        let (_, e) = heard.recv_timeout(wait).unwrap();
        assert!(matches!(e, Event::Lost(_)), "{e:?}");
    }

    #[test]
    fn an_unreachable_prefill_is_reported_lost() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let (tx, rx) = mpsc::channel();
        let report: Report = Arc::new(move |h: Heard| {
            let _ = tx.send((h.room, h.event));
        });
        let _link = connect(port, Wire::Ack { room: 8 }, report);
        let (room, e) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(room, 8);
        assert!(
            matches!(e, Event::Lost(ref why) if why.contains("cannot reach")),
            "{e:?}"
        );
    }
}
