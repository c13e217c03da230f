//! The simulator's event queue: messages in virtual-time order, and those
//! due at the same microsecond in the order they were sent.
//!
//! The heap orders small keys (time, send number, slot) and the messages
//! wait in slots beside it, so a push or pop moves 24 bytes, not a message.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub(super) struct EventQueue<M> {
    order: BinaryHeap<Reverse<(u64, u64, u32)>>,
    slots: Vec<Option<M>>,
    free: Vec<u32>,
    sent: u64,
}

impl<M> EventQueue<M> {
    pub(super) fn new() -> Self {
        EventQueue {
            order: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            sent: 0,
        }
    }

    /// Queue `msg` for virtual time `at`.
    pub(super) fn push(&mut self, at: u64, msg: M) {
        self.sent += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(msg);
                slot
            }
            None => {
                self.slots.push(Some(msg));
                (self.slots.len() - 1) as u32
            }
        };
        self.order.push(Reverse((at, self.sent, slot)));
    }

    /// When the next message is due.
    pub(super) fn next_at(&self) -> Option<u64> {
        self.order.peek().map(|Reverse((at, _, _))| *at)
    }

    /// When the first message that `wanted` accepts is due.
    pub(super) fn next_at_of(&self, wanted: impl Fn(&M) -> bool) -> Option<u64> {
        self.order
            .iter()
            .filter(|Reverse((_, _, slot))| {
                self.slots[*slot as usize].as_ref().is_some_and(&wanted)
            })
            .map(|Reverse((at, _, _))| *at)
            .min()
    }

    /// The next message and its time.
    pub(super) fn pop(&mut self) -> Option<(u64, M)> {
        let Reverse((at, _, slot)) = self.order.pop()?;
        let msg = self.slots[slot as usize].take()?;
        self.free.push(slot);
        Some((at, msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_come_in_time_order_and_ties_in_send_order() {
        let mut q = EventQueue::new();
        for (at, m) in [(5, "a"), (1, "b"), (5, "c"), (3, "d")] {
            q.push(at, m);
        }
        assert_eq!(q.next_at(), Some(1));
        assert_eq!(q.pop(), Some((1, "b")));
        assert_eq!(q.next_at_of(|m| *m != "d"), Some(5));
        q.push(5, "e");
        q.push(2, "f");
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, [(2, "f"), (3, "d"), (5, "a"), (5, "c"), (5, "e")]);
        assert_eq!(q.next_at(), None);
    }
}
