//! The event queue of the herd simulation: earliest first, ties in
//! scheduling order.
//!
//! A plain `BinaryHeap<(time, event)>` would order simultaneous events by
//! the event's own `Ord` (or need one), and a heap is not stable, so two
//! events at the same instant could come out in either order depending on
//! what else is in the heap. Every entry therefore carries a sequence number
//! taken when it was pushed: `(time, seq)` is a total order with no ties, so
//! the simulation is deterministic without the events being comparable.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::Duration;

/// A min-queue of events on virtual time, FIFO among equal times.
#[derive(Debug)]
pub(crate) struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
}

#[derive(Debug)]
struct Entry<E> {
    at: Duration,
    seq: u64,
    event: E,
}

impl<E> Entry<E> {
    fn key(&self) -> (Duration, u64) {
        (self.at, self.seq)
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest key.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

impl<E> EventQueue<E> {
    pub(crate) fn new() -> Self {
        EventQueue { heap: BinaryHeap::new(), next_seq: 0 }
    }

    /// Schedules `event` at virtual time `at`.
    pub(crate) fn push(&mut self, at: Duration, event: E) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Entry { at, seq, event });
    }

    /// The earliest event; among events at the same time, the first pushed.
    pub(crate) fn pop(&mut self) -> Option<(Duration, E)> {
        self.heap.pop().map(|entry| (entry.at, entry.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn drain(queue: &mut EventQueue<&'static str>) -> Vec<(u128, &'static str)> {
        std::iter::from_fn(|| queue.pop()).map(|(t, e)| (t.as_millis(), e)).collect()
    }

    #[test]
    fn earliest_first() {
        let mut q = EventQueue::new();
        q.push(ms(30), "c");
        q.push(ms(10), "a");
        q.push(ms(20), "b");
        assert_eq!(drain(&mut q), [(10, "a"), (20, "b"), (30, "c")]);
        assert!(q.pop().is_none());
    }

    #[test]
    fn ties_come_out_in_push_order() {
        let mut q = EventQueue::new();
        for name in ["first", "second", "third", "fourth", "fifth"] {
            q.push(ms(5), name);
        }
        q.push(ms(1), "early");
        q.push(ms(5), "sixth");
        assert_eq!(
            drain(&mut q),
            [
                (1, "early"),
                (5, "first"),
                (5, "second"),
                (5, "third"),
                (5, "fourth"),
                (5, "fifth"),
                (5, "sixth")
            ]
        );
    }

    #[test]
    fn events_pushed_while_draining_keep_the_order() {
        let mut q = EventQueue::new();
        q.push(ms(10), "a");
        q.push(ms(10), "b");
        let (t, first) = q.pop().unwrap();
        assert_eq!((t, first), (ms(10), "a"));
        q.push(ms(10), "c");
        q.push(ms(0), "d");
        assert_eq!(drain(&mut q), [(0, "d"), (10, "b"), (10, "c")]);
    }
}
