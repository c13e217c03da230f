//! The simulator's event queue: messages in virtual-time order, and those
//! due at the same microsecond in the order they were sent.
//!
//! The heap orders small keys (time, send number, slot) and the messages
//! wait in slots beside it, so a push or pop moves 24 bytes, not a message.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Clone)]
pub(super) struct EventQueue<M> {
    order: BinaryHeap<Reverse<(u64, u64, u32)>>,
    slots: Vec<Option<Copies<M>>>,
    free: Vec<u32>,
    sent: u64,
    /// The time and slot of the last push, while its slot still waits.
    last: Option<(u64, u32)>,
}

/// A message sent `count` times in a row for the same time: the copies sit
/// together in the order, so one entry stands for all of them.
#[derive(Clone)]
struct Copies<M> {
    msg: M,
    count: u32,
}

impl<M: Clone + PartialEq> EventQueue<M> {
    pub(super) fn new() -> Self {
        EventQueue {
            order: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            sent: 0,
            last: None,
        }
    }

    /// Queue `msg` for virtual time `at`. A message equal to the one the
    /// last push queued for the same time, still waiting, joins it: no
    /// message can come between them, so they come out one after the other
    /// exactly as two entries would.
    pub(super) fn push(&mut self, at: u64, msg: M) {
        self.sent += 1;
        if let Some((last_at, slot)) = self.last {
            if let Some(copies) = &mut self.slots[slot as usize] {
                if last_at == at && copies.msg == msg {
                    copies.count += 1;
                    return;
                }
            }
        }
        let copies = Copies { msg, count: 1 };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(copies);
                slot
            }
            None => {
                self.slots.push(Some(copies));
                (self.slots.len() - 1) as u32
            }
        };
        self.order.push(Reverse((at, self.sent, slot)));
        self.last = Some((at, slot));
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
                self.slots[*slot as usize]
                    .as_ref()
                    .is_some_and(|c| wanted(&c.msg))
            })
            .map(|Reverse((at, _, _))| *at)
            .min()
    }

    /// The next message and its time.
    pub(super) fn pop(&mut self) -> Option<(u64, M)> {
        let &Reverse((at, _, slot)) = self.order.peek()?;
        let copies = self.slots[slot as usize].as_mut()?;
        if copies.count > 1 {
            copies.count -= 1;
            return Some((at, copies.msg.clone()));
        }
        self.order.pop();
        let copies = self.slots[slot as usize].take()?;
        self.free.push(slot);
        if self.last.is_some_and(|(_, s)| s == slot) {
            self.last = None;
        }
        Some((at, copies.msg))
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

    /// Equal messages pushed one after the other for the same time come out
    /// one after the other, in their place; a push in between, another
    /// time or another message keeps them apart.
    #[test]
    fn copies_in_a_row_keep_their_place() {
        let mut q = EventQueue::new();
        q.push(5, "t");
        q.push(5, "t");
        q.push(4, "x");
        q.push(5, "t");
        q.push(5, "u");
        q.push(5, "t");
        q.push(5, "t");
        q.push(6, "t");
        assert_eq!(q.pop(), Some((4, "x")));
        assert_eq!(q.pop(), Some((5, "t")));
        // A push while the copies wait, equal and for the same time, but
        // not right after them: it goes last.
        q.push(5, "t");
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            rest,
            [
                (5, "t"),
                (5, "t"),
                (5, "u"),
                (5, "t"),
                (5, "t"),
                (5, "t"),
                (6, "t")
            ]
        );
    }
}
