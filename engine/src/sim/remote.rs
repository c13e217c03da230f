//! One worker of a PD pair, in its own process, with its peer across a real
//! connection.
//!
//! A [`Sim`] with a [`Role`] runs only that worker's half of the cluster:
//! the router's request reaches only that worker, and the worker's answer
//! is the request's answer (the router in front decides what the client
//! gets). Everything the two halves share in one process goes through
//! [`Wire`] messages instead, in the order a real transfer engine carries
//! them (Mooncake's bootstrap and NIXL's notifications, modelled in
//! [`crate::transfer`]):
//!
//! * decode → prefill: [`Wire::Register`] (`receiver.init(kv_indices)`:
//!   the destination pages decode reserved for the room), [`Wire::Ack`]
//!   (decode drained the room), [`Wire::Close`] (deferred release closes
//!   the room to the sender);
//! * prefill → decode: [`Wire::Chunk`] (writes posted; the last one carries
//!   the completion flag and, with `kv-checksum`, the checksum) and
//!   [`Wire::Page`] (one write landed: the bytes of a prefill page for one
//!   destination page).
//!
//! The same doors, `Req`, pools, channel rules and attention run on both
//! sides; only where the bytes of a landed write go changes: into the
//! decode pool of the same process, or onto the wire to the decode
//! process, which writes them into the page the prefill never saw.

use kvw_evidence::EventKind;

use super::Sim;
use crate::pool::WriterId;
use crate::trace::ranges;
use crate::transfer::ChunkSend;

/// Which worker of the pair a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Prefill,
    Decode,
}

impl Role {
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "prefill" => Some(Role::Prefill),
            "decode" => Some(Role::Decode),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Prefill => "prefill",
            Role::Decode => "decode",
        }
    }
}

/// What one worker tells its peer about one bootstrap room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wire {
    /// decode → prefill: the room's destination pages, in page-table order.
    Register { room: u64, dst_pages: Vec<u32> },
    /// prefill → decode: `pages` writes were posted to the room.
    Chunk {
        room: u64,
        pages: u32,
        last: bool,
        checksum: Option<u32>,
    },
    /// prefill → decode: a posted write landed on destination page
    /// `dst_page` with these bytes, written by the request's KV generation
    /// `generation`.
    Page {
        room: u64,
        dst_page: u32,
        generation: u32,
        bytes: Vec<u16>,
    },
    /// decode → prefill: decode is done with the room (the drain ack).
    Ack { room: u64 },
    /// decode → prefill: the room is closed to the sender.
    Close { room: u64 },
}

impl Wire {
    pub fn room(&self) -> u64 {
        match self {
            Wire::Register { room, .. }
            | Wire::Chunk { room, .. }
            | Wire::Page { room, .. }
            | Wire::Ack { room }
            | Wire::Close { room } => *room,
        }
    }
}

/// Why a message from the peer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("bootstrap room {0} already has a decode receiver")]
    RegisteredTwice(u64),
    #[error("bootstrap room {0} is not one this worker serves")]
    UnknownRoom(u64),
    #[error("page {page} is not among the pages registered for bootstrap room {room}")]
    NotRegistered { room: u64, page: u32 },
    #[error("a page of {got} values where the pool's pages hold {want}")]
    PageSize { got: usize, want: usize },
    #[error("a {0} message is not one this worker takes")]
    WrongSide(&'static str),
}

impl Sim<'_> {
    /// This process's worker, or `None` when the whole pair runs here.
    pub fn role(&self) -> Option<Role> {
        self.role
    }

    /// Run only `role`'s half of the pair; what crosses to the peer is put
    /// in [`Sim::outbox`].
    pub fn set_role(&mut self, role: Role) {
        self.role = Some(role);
    }

    /// Index of the request of bootstrap `room`.
    pub fn entry_of_room(&self, room: u64) -> Option<u32> {
        self.room_index.get(&room).copied()
    }

    /// Post one chunk's writes; prefill in its own process also tells the
    /// decode peer how many were posted.
    pub(super) fn send_chunk(&mut self, c: ChunkSend<'_>) -> usize {
        let sent = self.channel.send_chunk(c);
        if self.role == Some(Role::Prefill) && (sent > 0 || c.last) {
            self.outbox.push(Wire::Chunk {
                room: c.room,
                pages: sent as u32,
                last: c.last,
                checksum: c.checksum,
            });
        }
        sent
    }

    /// Decode's `receiver.init`: register the room's destination pages
    /// (sent to the prefill peer when it is in another process).
    pub(super) fn register_receiver(&mut self, room: u64, table: Vec<u32>) {
        if self.role == Some(Role::Decode) {
            self.outbox.push(Wire::Register {
                room,
                dst_pages: table.clone(),
            });
        }
        self.channel.receiver_init(room, table);
    }

    /// Writes that landed, shipped to the decode process instead of copied.
    pub(super) fn ship(&mut self, landed: &[crate::transfer::PageWrite]) {
        for w in landed {
            self.prefill_pool.settle(&[w.src_page]);
            self.outbox.push(Wire::Page {
                room: w.room,
                dst_page: w.dst_page,
                generation: w.writer.generation,
                bytes: self.prefill_pool.page_bytes(w.src_page).to_vec(),
            });
        }
    }

    /// A message from the peer, at the current time.
    pub fn take_remote(&mut self, msg: Wire) -> Result<(), Refused> {
        match (self.role, msg) {
            (Some(Role::Prefill), Wire::Register { room, dst_pages }) => {
                if self.channel.handshake_ready(room) {
                    return Err(Refused::RegisteredTwice(room));
                }
                self.channel.receiver_init(room, dst_pages);
                self.wake_prefill(self.now);
            }
            (Some(Role::Prefill), Wire::Ack { room }) => {
                for peer in self.channel.ack_with(room, self.ack_rules()) {
                    self.record_ack(room, peer);
                }
                self.wake_prefill(self.now);
            }
            (Some(Role::Prefill), Wire::Close { room }) => {
                self.channel.close(room);
                self.wake_prefill(self.now);
            }
            (
                Some(Role::Decode),
                Wire::Chunk {
                    room,
                    pages,
                    last,
                    checksum,
                },
            ) => {
                self.entry_of_room(room).ok_or(Refused::UnknownRoom(room))?;
                self.channel
                    .remote_posted(room, pages as usize, last, checksum);
                self.wake_decode(self.now);
            }
            (
                Some(Role::Decode),
                Wire::Page {
                    room,
                    dst_page,
                    generation,
                    bytes,
                },
            ) => self.land_remote(room, dst_page, generation, &bytes)?,
            (_, m) => {
                return Err(Refused::WrongSide(match m {
                    Wire::Register { .. } => "register",
                    Wire::Chunk { .. } => "chunk",
                    Wire::Page { .. } => "page",
                    Wire::Ack { .. } => "ack",
                    Wire::Close { .. } => "close",
                }))
            }
        }
        Ok(())
    }

    /// The connection to the peer of `room` is gone: the room is closed, so
    /// a transfer that has not completed polls `Failed`.
    pub fn peer_lost(&mut self, room: u64) {
        self.channel.close(room);
        self.wake_prefill(self.now);
        self.wake_decode(self.now);
    }

    /// A write from the prefill process landed: its bytes go into the
    /// registered destination page, stamped as the request's own KV.
    fn land_remote(
        &mut self,
        room: u64,
        dst_page: u32,
        generation: u32,
        bytes: &[u16],
    ) -> Result<(), Refused> {
        let req = self.entry_of_room(room).ok_or(Refused::UnknownRoom(room))?;
        let want = self.layout.page_elems();
        if bytes.len() != want {
            return Err(Refused::PageSize {
                got: bytes.len(),
                want,
            });
        }
        let registered = self
            .channel
            .room(room)
            .and_then(|r| r.dst_pages.as_ref())
            .is_some_and(|d| d.contains(&dst_page));
        if !registered {
            return Err(Refused::NotRegistered {
                room,
                page: dst_page,
            });
        }
        if self.decode_owner.get(dst_page as usize).copied().flatten() != Some(req) {
            self.stale_writes.push((req, dst_page));
        }
        self.decode_pool
            .write_page(dst_page, bytes, WriterId { req, generation });
        self.channel.remote_landed(room);
        if self.probed() == Some(req) {
            self.marks.transferred.push(dst_page);
        }
        self.record(
            req,
            EventKind::KvLanded {
                pages: ranges(&[dst_page]),
                until_us: None,
            },
        );
        self.wake_decode(self.now);
        Ok(())
    }

    /// What the worker has to send its peers, oldest first.
    pub fn take_outbox(&mut self) -> Vec<Wire> {
        std::mem::take(&mut self.outbox)
    }
}
