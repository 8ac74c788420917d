//! The shared cache of committed page images.
//!
//! Invariants:
//! - An entry is the latest committed image of its page (or, while a commit is being
//!   written, the image that commit is making durable).
//! - A *pinned* entry is never evicted. The pager pins every page of a commit in flight,
//!   because until the commit's writes are done the file may hold neither the old nor the
//!   new image in full; readers must get the image from here, never from the file.
//! - Eviction is least-recently-used among unpinned entries, so `capacity` bounds the
//!   unpinned working set; pinned entries may exceed it for the length of a commit.
//!
//! The recency order is a doubly linked list threaded through a slab of entries, so a hit
//! (the common case, several per operation) relinks one entry without allocating. The list
//! holds exactly the unpinned entries, ordered by the tick of their last use.

use crate::error::Pgno;
use crate::page::PageRef;
use crate::pager::PgnoMap;

/// No slot: the end of the list.
const NIL: usize = usize::MAX;

struct Slot {
    /// None while the slot is free.
    page: Option<PageRef>,
    pgno: Pgno,
    /// When the entry was last used (inserted or looked up).
    tick: u64,
    pinned: bool,
    /// Neighbours in the list (older, newer); NIL when pinned, free or at an end.
    prev: usize,
    next: usize,
}

/// LRU cache of page images.
pub(crate) struct Cache {
    capacity: usize,
    /// pgno -> index into `slots`.
    entries: PgnoMap<usize>,
    slots: Vec<Slot>,
    free_slots: Vec<usize>,
    /// Oldest and newest unpinned entries.
    head: usize,
    tail: usize,
    tick: u64,
    pub hits: u64,
    pub misses: u64,
}

impl Cache {
    pub fn new(capacity: usize) -> Cache {
        Cache {
            capacity,
            entries: PgnoMap::default(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            head: NIL,
            tail: NIL,
            tick: 0,
            hits: 0,
            misses: 0,
        }
    }

    fn bump(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    fn unlink(&mut self, i: usize) {
        let (prev, next) = (self.slots[i].prev, self.slots[i].next);
        match prev {
            NIL => self.head = next,
            p => self.slots[p].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.slots[n].prev = prev,
        }
        self.slots[i].prev = NIL;
        self.slots[i].next = NIL;
    }

    /// Link unpinned entry `i` in tick order. Walks from the newest end: a used entry goes
    /// there at once, and an unpinned one was normally used just before.
    fn link(&mut self, i: usize) {
        let tick = self.slots[i].tick;
        let mut prev = self.tail;
        while prev != NIL && self.slots[prev].tick > tick {
            prev = self.slots[prev].prev;
        }
        let next = match prev {
            NIL => std::mem::replace(&mut self.head, i),
            p => std::mem::replace(&mut self.slots[p].next, i),
        };
        match next {
            NIL => self.tail = i,
            n => self.slots[n].prev = i,
        }
        self.slots[i].prev = prev;
        self.slots[i].next = next;
    }

    /// Look up a page, marking it recently used.
    pub fn get(&mut self, pgno: Pgno) -> Option<PageRef> {
        let t = self.bump();
        match self.entries.get(&pgno) {
            Some(&i) => {
                self.slots[i].tick = t;
                if !self.slots[i].pinned && self.tail != i {
                    self.unlink(i);
                    self.link(i);
                }
                self.hits += 1;
                self.slots[i].page.clone()
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Insert or replace an image; `pinned` entries stay until `unpin`.
    pub fn insert(&mut self, pgno: Pgno, page: PageRef, pinned: bool) {
        let t = self.bump();
        let i = match self.entries.get(&pgno) {
            Some(&i) => {
                if !self.slots[i].pinned {
                    self.unlink(i);
                }
                i
            }
            None => {
                let i = match self.free_slots.pop() {
                    Some(i) => i,
                    None => {
                        self.slots.push(Slot {
                            page: None,
                            pgno,
                            tick: 0,
                            pinned: false,
                            prev: NIL,
                            next: NIL,
                        });
                        self.slots.len() - 1
                    }
                };
                self.entries.insert(pgno, i);
                i
            }
        };
        let slot = &mut self.slots[i];
        slot.page = Some(page);
        slot.pgno = pgno;
        slot.tick = t;
        slot.pinned = pinned;
        if !pinned {
            self.link(i);
        }
        self.evict();
    }

    /// Drop an entry (pinned or not).
    pub fn remove(&mut self, pgno: Pgno) {
        if let Some(i) = self.entries.remove(&pgno) {
            self.release(i);
        }
    }

    /// Free slot `i`, already gone from `entries`.
    fn release(&mut self, i: usize) {
        if !self.slots[i].pinned {
            self.unlink(i);
        }
        self.slots[i].page = None;
        self.slots[i].pinned = false;
        self.free_slots.push(i);
    }

    /// Make a pinned entry evictable again.
    pub fn unpin(&mut self, pgno: Pgno) {
        if let Some(&i) = self.entries.get(&pgno) {
            if self.slots[i].pinned {
                self.slots[i].pinned = false;
                self.link(i);
            }
        }
        self.evict();
    }

    fn evict(&mut self) {
        while self.entries.len() > self.capacity {
            if self.head == NIL {
                break; // everything left is pinned
            }
            let i = self.head;
            self.entries.remove(&self.slots[i].pgno);
            self.release(i);
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn page(b: u8) -> PageRef {
        Arc::from(vec![b; 8])
    }

    #[test]
    fn evicts_least_recently_used_unpinned() {
        let mut c = Cache::new(2);
        c.insert(1, page(1), false);
        c.insert(2, page(2), false);
        c.get(1);
        c.insert(3, page(3), false);
        assert!(c.get(2).is_none(), "2 was least recently used");
        assert!(c.get(1).is_some() && c.get(3).is_some());
    }

    #[test]
    fn pinned_entries_survive_until_unpinned() {
        let mut c = Cache::new(1);
        c.insert(1, page(1), true);
        c.insert(2, page(2), true);
        c.insert(3, page(3), false);
        assert_eq!(c.len(), 2, "the unpinned entry goes first");
        assert!(c.get(1).is_some() && c.get(2).is_some());
        c.unpin(1);
        c.unpin(2);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn replacing_keeps_one_entry() {
        let mut c = Cache::new(4);
        c.insert(1, page(1), false);
        c.insert(1, page(9), true);
        c.unpin(1);
        assert_eq!(c.get(1).unwrap()[0], 9);
        assert_eq!(c.len(), 1);
    }

    /// Random operations against a direct model (ordered map from last-use tick): the
    /// same entries must survive.
    #[test]
    fn matches_tick_ordered_model() {
        use std::collections::{BTreeMap, HashMap};
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        for capacity in [1, 3, 8] {
            let mut c = Cache::new(capacity);
            // pgno -> (tick, pinned); tick order = recency.
            let mut model: HashMap<Pgno, (u64, bool)> = HashMap::new();
            let mut tick = 0u64;
            for _ in 0..20_000 {
                let pgno = next(16) as Pgno;
                tick += 1;
                match next(5) {
                    0 | 1 => {
                        let hit = c.get(pgno).is_some();
                        assert_eq!(hit, model.contains_key(&pgno));
                        if let Some(e) = model.get_mut(&pgno) {
                            e.0 = tick;
                        }
                    }
                    2 => {
                        let pinned = next(3) == 0;
                        c.insert(pgno, page(pgno as u8), pinned);
                        model.insert(pgno, (tick, pinned));
                    }
                    3 => {
                        c.unpin(pgno);
                        if let Some(e) = model.get_mut(&pgno) {
                            e.1 = false;
                        }
                    }
                    _ => {
                        c.remove(pgno);
                        model.remove(&pgno);
                    }
                }
                let lru: BTreeMap<u64, Pgno> = model
                    .iter()
                    .filter(|(_, &(_, pinned))| !pinned)
                    .map(|(&p, &(t, _))| (t, p))
                    .collect();
                for (_, p) in lru.into_iter() {
                    if model.len() <= capacity {
                        break;
                    }
                    model.remove(&p);
                }
                assert_eq!(c.len(), model.len());
                for p in model.keys() {
                    assert!(c.entries.contains_key(p), "page {p} should be cached");
                }
            }
        }
    }
}
